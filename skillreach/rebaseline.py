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

from skillreach.baselines import BaselineRecord
from skillreach.errors import RefusedError
from skillreach.gates import Comparison, compare
from skillreach.settings import GateConfig

__all__ = ["STATUSES", "SkillGate", "gate_skills", "records_to_write"]

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
