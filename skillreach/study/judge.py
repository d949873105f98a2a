"""The rubric judge: prompt rendering, rubric versions, grade parsing, and an offline fake judge.

Pure apart from :func:`grade_probes`, which awaits a :class:`Judge`. The LLM judge that calls the
Messages API lives in ``runtimes/judge_anthropic.py`` (the SDK is imported there, lazily).

- The prompt is the Jinja2 template ``skillreach/templates/judge.j2`` (``StrictUndefined``), given the
  request, the recorded tool calls, the final answer and the rubric.
- ``rubric_version`` = ``sha256:`` over the template's source, the rubric text(s) and the judge model,
  so that a change to any of the three expires a baseline (spec/interfaces.md, baseline record).
- The judge replies ``{"grade": 0..1, "reason": "..."}``; :func:`parse_grade` also accepts a
  ``grade: 0.7`` line or ``7/10``, and refuses anything else (a failed grade is data: the probe keeps
  ``rubric_grade = None`` and its quality is reported as not graded).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

import jinja2

from skillreach.errors import JudgeReplyError, ProbeFailed
from skillreach.models import ProbeRecord, Query, ToolCall, Usage, sha256_hex

__all__ = [
    "FAKE_JUDGE_MODEL",
    "TEMPLATE_NAME",
    "FakeJudge",
    "Judge",
    "JudgeReplyError",
    "JudgeRequest",
    "JudgeResult",
    "default_judge_model",
    "grade_probes",
    "parse_grade",
    "render_judge_prompt",
    "rubric_version",
    "template_source",
]

TEMPLATE_DIR = Path(__file__).resolve().parents[1] / "templates"
TEMPLATE_NAME = "judge.j2"
FAKE_JUDGE_MODEL = "fake-judge-1"

def default_judge_model() -> str:
    """The judge model when none is given: ``$SKILLREACH_JUDGE_MODEL``, else the offline fake judge.

    Every place that pins a rubric version without an explicit judge (``baseline record``, the study
    flow's baselines, ``check``) uses this, so their records agree.
    """
    import os

    return os.environ.get("SKILLREACH_JUDGE_MODEL") or FAKE_JUDGE_MODEL


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # a prompt, not HTML
        keep_trailing_newline=True,
    )


def template_source(name: str = TEMPLATE_NAME) -> str:
    return (TEMPLATE_DIR / name).read_text(encoding="utf-8")


def render_judge_prompt(
    request: str, tool_calls: Sequence[ToolCall], final_answer: str | None, rubric: str
) -> str:
    """The judge prompt for one probe (template ``judge.j2``)."""
    calls = [
        {"tool": c.tool, "input_json": json.dumps(c.input, sort_keys=True, ensure_ascii=False)}
        for c in tool_calls
    ]
    return (
        _env()
        .get_template(TEMPLATE_NAME)
        .render(request=request, tool_calls=calls, final_answer=final_answer or "", rubric=rubric)
    )


def rubric_version(rubric: str | Mapping[str, str] | None, judge_model: str | None) -> str | None:
    """``sha256:`` of template source + rubric(s) + judge model; ``None`` when there is no rubric.

    ``rubric`` is one rubric text, or a mapping case id → rubric for a whole baseline (order-free).
    """
    if rubric is None or (isinstance(rubric, Mapping) and not rubric):
        return None
    rubrics: str | dict[str, str] = dict(sorted(rubric.items())) if isinstance(rubric, Mapping) else rubric
    payload = json.dumps(
        {"template": template_source(), "rubric": rubrics, "judge_model": judge_model or ""},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "sha256:" + sha256_hex(payload)


_JSON_OBJ = re.compile(r"\{[^{}]*\}", re.DOTALL)
_GRADE_LINE = re.compile(r"grade\W{0,3}\s*([01](?:\.\d+)?|\.\d+)\b", re.IGNORECASE)
_OUT_OF_TEN = re.compile(r"\b(10|\d(?:\.\d+)?)\s*/\s*10\b")


def parse_grade(text: str) -> tuple[float, str]:
    """(grade in [0, 1], reason) from a judge reply; :class:`JudgeReplyError` when there is none."""
    for candidate in reversed(_JSON_OBJ.findall(text)):
        try:
            obj = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("grade"), int | float):
            grade = float(obj["grade"])
            if not 0.0 <= grade <= 1.0:
                raise JudgeReplyError(f"judge grade {grade} is outside [0, 1]")
            return grade, str(obj.get("reason", ""))
    m = _GRADE_LINE.search(text)
    if m:
        grade = float(m.group(1))
        if 0.0 <= grade <= 1.0:
            return grade, ""
    m = _OUT_OF_TEN.search(text)
    if m:
        return float(m.group(1)) / 10.0, ""
    snippet = " ".join(text.split())[:80]
    raise JudgeReplyError(f"judge reply holds no grade in [0, 1]: {snippet!r}")


@dataclass(frozen=True)
class JudgeRequest:
    query_id: str
    request: str
    rubric: str
    final_answer: str
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def prompt(self) -> str:
        return render_judge_prompt(self.request, self.tool_calls, self.final_answer, self.rubric)


@dataclass(frozen=True)
class JudgeResult:
    grade: float
    reason: str = ""
    usage: Usage = field(default_factory=Usage)
    resolved_model: str | None = None


@runtime_checkable
class Judge(Protocol):
    """Grades one answer against its rubric. ``model`` is what ``rubric_version`` pins."""

    name: ClassVar[str]
    model: str

    async def grade(self, request: JudgeRequest) -> JudgeResult: ...

    async def aclose(self) -> None: ...


_STOP_WORDS = """about above after again against also answer because been before being below between both
could does doing down during each every from further have having here into itself just more most must
only other over same should some such than that their them then there these they this those through
under until very were what when where which while will with would your agent response mention
mentions explains explain says states"""
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[a-z0-9][a-z0-9_\-]{3,}")


class FakeJudge:
    """Deterministic offline judge: the share of the rubric's keywords found in the final answer.

    Keywords are the rubric's words of four or more characters, minus common words, compared without
    case. A rubric with no keyword grades 1 for a non-empty answer, 0 for an empty one.
    """

    name: ClassVar[str] = "fake"

    def __init__(self, model: str = FAKE_JUDGE_MODEL) -> None:
        self.model = model

    @staticmethod
    def keywords(rubric: str) -> list[str]:
        seen: dict[str, None] = {}
        for w in _WORD.findall(rubric.lower()):
            if w not in _STOP:
                seen.setdefault(w, None)
        return list(seen)

    async def grade(self, request: JudgeRequest) -> JudgeResult:
        answer = request.final_answer.lower()
        words = self.keywords(request.rubric)
        if not words:
            return JudgeResult(grade=1.0 if answer.strip() else 0.0, reason="no keywords in rubric")
        found = [w for w in words if re.search(rf"(?<![a-z0-9]){re.escape(w)}(?![a-z0-9])", answer)]
        missing = [w for w in words if w not in found]
        reason = f"{len(found)}/{len(words)} rubric keywords"
        if missing:
            reason += f"; missing {', '.join(missing)}"
        return JudgeResult(grade=len(found) / len(words), reason=reason, resolved_model=self.model)

    async def aclose(self) -> None:
        return None


def _needs_grade(query: Query | None, probe: ProbeRecord) -> bool:
    return (
        query is not None
        and query.checks is not None
        and bool(query.checks.rubric)
        and probe.error is None
        and probe.final_text is not None
        and probe.rubric_grade is None
    )


async def grade_probes(
    judge: Judge,
    queries: Mapping[str, Query] | Iterable[Query],
    probes: Sequence[ProbeRecord],
    *,
    concurrency: int = 4,
    on_graded: Callable[[ProbeRecord], None] | None = None,
) -> tuple[list[ProbeRecord], list[tuple[str, int, str]]]:
    """Grade every probe whose query has a rubric; return (records, failures).

    Records come back in the same order, graded ones with ``rubric_grade`` and ``rubric_version`` set;
    failures are ``(query_id, attempt, message)`` — those probes keep ``rubric_grade = None``.
    ``on_graded`` receives each graded record as soon as its grade arrives (e.g. a ``JsonlSink.write``,
    so that paid-for grades are on disk before anything else can fail).
    """
    by_id = dict(queries) if isinstance(queries, Mapping) else {q.id: q for q in queries}
    sem = asyncio.Semaphore(max(1, concurrency))
    failures: list[tuple[str, int, str]] = []

    async def one(probe: ProbeRecord) -> ProbeRecord:
        query = by_id.get(probe.query_id)
        if not _needs_grade(query, probe):
            return probe
        assert query is not None
        assert query.checks is not None
        assert query.checks.rubric
        req = JudgeRequest(
            query_id=query.id,
            request=query.text,
            rubric=query.checks.rubric,
            final_answer=probe.final_text or "",
            tool_calls=probe.tool_calls,
        )
        async with sem:
            try:
                result = await judge.grade(req)
            except ProbeFailed as exc:
                failures.append((probe.query_id, probe.attempt, exc.message))
                return probe
        graded = probe.model_copy(
            update={
                "rubric_grade": result.grade,
                "rubric_version": rubric_version(query.checks.rubric, judge.model),
            }
        )
        if on_graded is not None:
            on_graded(graded)
        return graded

    graded = await asyncio.gather(*(one(p) for p in probes))
    return list(graded), failures
