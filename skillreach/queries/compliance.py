"""Per-probe compliance and task quality (spec/metrics.md, "Baseline metrics"). Pure functions.

:func:`evaluate_probe` judges one probe against its query's ``checks``:

**Compliance** (``requires`` / ``forbids``) — ``True`` when every required action was observed and no
forbidden action was; ``False`` otherwise; ``None`` when the judgement does not apply:

- the query has no ``requires``/``forbids`` checks, or no expected skill (out of scope);
- the probe errored (an errored probe is never scored);
- the probe did not activate the expected skill (it is not in the probe's invocations — the expected
  skill is never an acceptable skill, so this is ``S ∈ scored_inv``);
- the probe did not go past routing: no tool call recorded and no final answer (``final_text is
  None``) — a routing-only study says nothing about compliance, so it must not count as a failure.
  A runtime in compliance mode reports ``final_text=""`` when the agent ended with no text.

**Action matching** (:func:`matches`): a :class:`~skillreach.models.ToolPattern` matches a tool call
when its ``tool`` is ``"*"`` or equals the call's tool name (case-insensitive: ``bash`` = ``Bash``) and
its ``pattern`` — a Python regular expression, case-sensitive unless it says ``(?i)`` — is found by
``re.search`` either in the JSON of the call's input (``json.dumps(input, sort_keys=True,
ensure_ascii=False)``, e.g. ``{"command": "make preflight"}``) or in any string value of that input
(unescaped, so ``"`` and ``\\`` need no JSON escaping). An empty pattern matches any call of the tool.

**Task quality** (``output`` / ``rubric``) — a score in [0, 1], ``None`` when the query has no output
or rubric checks, when it has no expected skill, when the probe errored or when it carries no final
answer (``final_text is None``). The blend:

- assertions only: passed / total (``contains`` and ``not_contains`` are case-sensitive substring
  tests; ``regex`` is ``re.search`` with ``re.MULTILINE``);
- rubric only: the judge's grade (``probe.rubric_grade``, in [0, 1]);
- both: the plain mean of the assertion score and the grade — the rubric weighs as much as all the
  assertions together;
- a rubric whose grade is missing (the judge did not run): the assertion score alone, with the
  missing grade listed in ``failed`` so that reports show it; ``None`` when there are no assertions.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from skillreach.errors import InputError
from skillreach.models import OutputCheck, ProbeRecord, Query, ToolCall, ToolPattern

__all__ = [
    "ProbeJudgement",
    "assertion_score",
    "blend_quality",
    "evaluate_probe",
    "matches",
    "validate_checks",
]


@dataclass(frozen=True)
class ProbeJudgement:
    """The verdict on one probe. ``failed`` names every check that did not hold, for reports."""

    compliance: bool | None
    quality: float | None
    failed: tuple[str, ...] = ()
    assertions_passed: int = 0
    assertions_total: int = 0
    rubric_grade: float | None = None
    skipped: str | None = None
    """Why compliance was not judged (``None`` when it was, or when the query has no such checks)."""


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _call_json(call: ToolCall) -> str:
    return json.dumps(call.input, sort_keys=True, ensure_ascii=False)


def matches(pattern: ToolPattern, call: ToolCall) -> bool:
    """Whether ``call`` is an action described by ``pattern`` (see the module docstring)."""
    if pattern.tool != "*" and pattern.tool.casefold() != call.tool.casefold():
        return False
    if not pattern.pattern:
        return True
    rx = _compile(pattern.pattern)
    if rx.search(_call_json(call)):
        return True
    return any(rx.search(s) for s in _strings(call.input))


def _describe(p: ToolPattern) -> str:
    return f"{p.tool} /{p.pattern}/" if p.pattern else f"{p.tool} (any call)"


def _output_passes(check: OutputCheck, text: str) -> bool:
    if check.contains is not None:
        return check.contains in text
    if check.not_contains is not None:
        return check.not_contains not in text
    assert check.regex is not None
    return _compile(check.regex, re.MULTILINE).search(text) is not None


def _describe_output(check: OutputCheck) -> str:
    if check.contains is not None:
        return f"output should contain {check.contains!r}"
    if check.not_contains is not None:
        return f"output should not contain {check.not_contains!r}"
    return f"output should match /{check.regex}/"


def assertion_score(checks: Iterable[OutputCheck], text: str) -> tuple[int, int, list[str]]:
    """(passed, total, descriptions of the failed ones) of output assertions over ``text``."""
    passed = total = 0
    failed: list[str] = []
    for check in checks:
        total += 1
        if _output_passes(check, text):
            passed += 1
        else:
            failed.append(_describe_output(check))
    return passed, total, failed


def blend_quality(passed: int, total: int, grade: float | None) -> float | None:
    """The documented blend: mean of (passed/total) and the grade; either alone when the other is absent."""
    parts: list[float] = []
    if total > 0:
        parts.append(passed / total)
    if grade is not None:
        parts.append(min(1.0, max(0.0, float(grade))))
    if not parts:
        return None
    return sum(parts) / len(parts)


def validate_checks(query: Query) -> None:
    """Raise :class:`InputError` naming the query and field when a check's regex does not compile."""
    if query.checks is None:
        return
    fields: list[tuple[str, str]] = []
    for name in ("requires", "forbids"):
        for i, p in enumerate(getattr(query.checks, name)):
            fields.append((f"checks.{name}[{i}].pattern", p.pattern))
    for i, o in enumerate(query.checks.output):
        if o.regex is not None:
            fields.append((f"checks.output[{i}].regex", o.regex))
    for i, rx in enumerate(query.checks.tool_results):
        fields.append((f"checks.tool_results key #{i + 1}", rx))
    for where, rx in fields:
        try:
            _compile(rx)
        except re.error as exc:
            raise InputError(
                f"query {query.id!r}: {where} {rx!r} is not a valid regular expression ({exc}); fix the "
                "query set"
            ) from exc


def _compliance(query: Query, probe: ProbeRecord, failed: list[str]) -> tuple[bool | None, str | None]:
    checks = query.checks
    if checks is None or not checks.has_compliance or query.expected_skill is None:
        return None, None
    if probe.error is not None:
        return None, "probe errored"
    if query.expected_skill not in probe.invoked:
        return None, f"expected skill {query.expected_skill!r} not activated"
    if not probe.tool_calls and probe.final_text is None:
        return None, "probe did not go past routing"
    ok = True
    for p in checks.requires:
        if not any(matches(p, c) for c in probe.tool_calls):
            ok = False
            failed.append(f"required {_describe(p)} not observed")
    for p in checks.forbids:
        hits = [i for i, c in enumerate(probe.tool_calls, 1) if matches(p, c)]
        if hits:
            ok = False
            where = ", ".join(f"#{i}" for i in hits)
            failed.append(f"forbidden {_describe(p)} observed (call {where})")
    return ok, None


def _quality(query: Query, probe: ProbeRecord, failed: list[str]) -> tuple[float | None, int, int]:
    checks = query.checks
    if checks is None or not checks.has_quality or query.expected_skill is None:
        return None, 0, 0
    if probe.error is not None or probe.final_text is None:
        return None, 0, 0
    passed, total, out_failed = assertion_score(checks.output, probe.final_text)
    failed.extend(out_failed)
    grade = probe.rubric_grade if checks.rubric else None
    if checks.rubric and grade is None:
        failed.append("rubric not graded (no judge grade on the probe)")
    return blend_quality(passed, total, grade), passed, total


def evaluate_probe(query: Query, probe: ProbeRecord) -> ProbeJudgement:
    """Judge one probe of ``query``: compliance, quality and the failed checks (module docstring)."""
    if probe.query_id != query.id:
        raise ValueError(f"probe of {probe.query_id!r} judged against query {query.id!r}")
    validate_checks(query)
    failed: list[str] = []
    compliance, skipped = _compliance(query, probe, failed)
    quality, passed, total = _quality(query, probe, failed)
    grade = probe.rubric_grade if query.checks is not None and query.checks.rubric else None
    return ProbeJudgement(
        compliance=compliance,
        quality=quality,
        failed=tuple(failed),
        assertions_passed=passed,
        assertions_total=total,
        rubric_grade=grade,
        skipped=skipped,
    )
