"""Gate before re-record: what the service does with a fresh study of every skill.

For each skill of the catalog, one status — ``ok``, ``inconclusive``, ``breach``, ``expired`` (its
stored baseline's pins no longer match), ``no baseline``, ``no queries`` (no positive query: it cannot
have a baseline) — or, after a model snapshot change, ``drift`` / ``ok`` from the paired differences
across the two snapshots (information, never a gate). Then which new records are written: every skill
that has one, except a breached skill's, which waits as a *candidate* for a person to accept. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skillreach.baselines.gates import Comparison, compare
from skillreach.baselines.records import BaselineRecord
from skillreach.errors import RefusedError
from skillreach.settings import GateConfig

__all__ = ["STATUSES", "SkillGate", "gate_report_markdown", "gate_skills", "records_to_write"]

STATUSES = ("ok", "inconclusive", "breach", "drift", "expired", "no baseline", "no queries")


@dataclass(frozen=True)
class SkillGate:
    skill: str
    status: str
    new: BaselineRecord | None = None
    base: BaselineRecord | None = None
    comparison: Comparison | None = None
    reason: str = ""


def gate_skills(
    skills: Iterable[str],
    stored: Mapping[str, BaselineRecord | None],
    new: Mapping[str, BaselineRecord],
    gates: GateConfig,
    *,
    drift: bool = False,
) -> list[SkillGate]:
    """One :class:`SkillGate` per skill, in name order."""
    out: list[SkillGate] = []
    for skill in sorted(set(skills)):
        rec, base = new.get(skill), stored.get(skill)
        if rec is None:
            out.append(SkillGate(skill, "no queries", reason="no positive query names it; add queries"))
            continue
        if base is None:
            out.append(SkillGate(skill, "no baseline", rec))
            continue
        try:
            cmp = compare(base, rec, gates, drift=drift)
        except RefusedError as exc:
            out.append(SkillGate(skill, "expired", rec, base, reason=exc.message))
            continue
        status = cmp.verdict.value
        if drift:
            status = "drift" if status == "breach" else "ok"
        elif status == "n/a":
            status = "ok"
        out.append(SkillGate(skill, status, rec, base, cmp))
    return out


def records_to_write(results: Iterable[SkillGate]) -> tuple[list[BaselineRecord], list[BaselineRecord]]:
    """(records to write, candidates): a breach waits as a candidate; everything measured is recorded."""
    records: list[BaselineRecord] = []
    candidates: list[BaselineRecord] = []
    for r in results:
        if r.new is None:
            continue
        (candidates if r.status == "breach" else records).append(r.new)
    return records, candidates


def _fmt(x: Any) -> str:
    return "–" if x is None else f"{x:+.3f}" if isinstance(x, float) else str(x)


def gate_report_markdown(
    outcome_rows: list[dict[str, Any]], skipped: list[str], study_id: str,
    statuses: dict[str, str] | None = None, *, drift: bool = False,
) -> str:
    title = "Drift report" if drift else "Gate report"
    lines = [f"# {title} — study `{study_id}`", ""]
    if statuses:
        counts = {s: sum(1 for v in statuses.values() if v == s) for s in dict.fromkeys(statuses.values())}
        summary = ", ".join(f"{n} {s}" for s, n in counts.items())
        lines.append(f"**{summary}** over {len(statuses)} skills.")
        lines += ["", "| skill | status |", "|---|---|",
                  *[f"| {k} | {v} |" for k, v in sorted(statuses.items())], ""]
    if not outcome_rows and not skipped:
        if not statuses:
            lines.append("No stored baseline matches this study: nothing was gated. Record baselines with "
                         "the `rebaseline-all` deployment or `skillreach baseline record`.")
        return "\n".join(lines) + "\n"
    breaches = sum(1 for r in outcome_rows if r["verdict"] == "breach")
    plural = "es" if breaches != 1 else ""
    what = "moved past their gate" if drift else f"breach{plural}"
    how = "compared" if drift else "gated"
    lines.append(f"**{breaches} {what}** over {len(outcome_rows)} {how} metrics.")
    lines += ["", "| skill | metric | baseline | new | Δ (paired) | 95 % CI | gate | verdict |",
              "|---|---|---|---|---|---|---|---|"]
    for r in outcome_rows:
        ci = r.get("ci95")
        ci_s = "–" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"
        mark = "**breach**" if r["verdict"] == "breach" else r["verdict"]
        lines.append(f"| {r['skill']} | {r['metric']} | {_fmt(r.get('base'))} | {_fmt(r.get('new'))} | "
                     f"{_fmt(r.get('delta'))} | {ci_s} | {_fmt(r.get('gate'))} | {mark} |")
    if skipped:
        lines += ["", "Not compared:", *[f"- {s}" for s in skipped]]
    return "\n".join(lines) + "\n"
