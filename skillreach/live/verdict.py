"""The discriminator: a live drop, settled by the frozen set.

A skill's live share fell past the live gate (:mod:`skillreach.live.gate`). Either the routing changed
(a neighbour now takes its requests) or the request mix moved (its requests are fewer, other skills'
more). The frozen set — the baseline's cases, re-run against the current catalog — tells them apart:

- the frozen set **breached** too: *routing change*, naming the skills that now take its cases and the
  catalog change nearest in time to the drop;
- the frozen set **holds**: *request mix*, with the live share of the skills that rose;
- the frozen set is **undecided** (its interval straddles the gate): *undecided*, with the cases it
  would take to decide.

Pure: the drop, the frozen-set comparison's verdict and its losses, and the catalog's changes in; one
:class:`LiveVerdict` out (an alert payload and a Markdown artifact are built from it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from skillreach.live.gate import LIVE_DROPPED, LiveDrop
from skillreach.models import Frozen

__all__ = [
    "LIVE_VERDICT",
    "REQUEST_MIX",
    "ROUTING_CHANGE",
    "UNDECIDED",
    "CatalogChange",
    "FrozenResult",
    "LiveVerdict",
    "decide",
    "drop_payload",
    "nearest_change",
    "verdict_markdown",
    "verdict_payload",
]

ROUTING_CHANGE = "routing change"
REQUEST_MIX = "request mix"
UNDECIDED = "undecided"
LIVE_VERDICT = "skillreach.live.verdict"
"""The alert (and event) of a settled live drop."""
NO_SKILL_TAKER = "(no skill)"


class CatalogChange(Frozen):
    """One change of the catalog: a skill added, edited or removed, when, and by which commit."""

    at: datetime
    skill: str
    how: Literal["added", "edited", "removed"]
    commit: str | None = None

    def sentence(self) -> str:
        by = f" (commit {self.commit[:12]})" if self.commit else ""
        return f"{self.skill} {self.how} on {self.at:%Y-%m-%d %H:%M} UTC{by}"


class FrozenResult(Frozen):
    """The frozen set's re-run for the dropped skill, against its baseline."""

    verdict: Literal["breach", "inconclusive", "ok"]
    baseline_id: str
    base: float | None
    """The baseline's activation on its positive cases."""
    new: float | None
    delta: float | None = None
    interval: tuple[float, float] | None = None
    gate: float | None = None
    lost: int = 0
    cases: int = 0
    taken_by: dict[str, int] = Field(default_factory=dict)
    """Skill (or ``(no skill)``) that now comes first on a lost case → how many cases."""
    needed: str | None = None
    """What would decide an undecided gate (more runs per case, …)."""
    study_id: str | None = None


class LiveVerdict(Frozen):
    skill: str
    verdict: Literal["routing change", "request mix", "undecided"]
    drop: LiveDrop
    frozen: FrozenResult
    takers: tuple[str, ...] = ()
    """routing change: the skills that now take its cases, most cases first."""
    nearest: CatalogChange | None = None
    """routing change: the catalog change nearest in time to the drop (one of a taker's first)."""
    message: str

    @property
    def headline(self) -> str:
        return f"{self.skill}: live drop — {self.verdict}"


def nearest_change(
    changes: Sequence[CatalogChange], when: datetime, *, prefer: Sequence[str] = (), skill: str = ""
) -> CatalogChange | None:
    """The change nearest in time to ``when`` (the drop's onset); a change of a skill in ``prefer`` (the
    skills that now take the cases) wins over others, the dropped skill's own edits count too."""
    if not changes:
        return None
    pool = [c for c in changes if c.skill in prefer] or list(changes)
    return min(pool, key=lambda c: (abs((c.at - when).total_seconds()), c.skill != skill, c.skill))


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def decide(drop: LiveDrop, frozen: FrozenResult, changes: Sequence[CatalogChange] = ()) -> LiveVerdict:
    """The verdict on ``drop`` given the frozen set's re-run (``frozen``) and the catalog's changes."""
    frozen_line = (
        f"frozen set (baseline {frozen.baseline_id}): activation {_pct(frozen.base)} → {_pct(frozen.new)}"
        f" — {frozen.verdict}"
    )
    if frozen.verdict == "breach":
        takers = tuple(
            n
            for n, _ in sorted(frozen.taken_by.items(), key=lambda kv: (-kv[1], kv[0]))
            if n != NO_SKILL_TAKER
        )
        near = nearest_change(
            changes, drop.onset or drop.windows.recent_start, prefer=takers, skill=drop.skill
        )
        took = ", ".join(f"{n} ({frozen.taken_by[n]} of {frozen.cases})" for n in takers) or "no other skill"
        message = (
            f"routing change: {drop.sentence()}; {frozen_line}, lost {frozen.lost} of {frozen.cases} cases; "
            f"its cases now go to {took}"
            + (f"; nearest catalog change: {near.sentence()}" if near else "; no catalog change on record")
        )
        return LiveVerdict(
            skill=drop.skill,
            verdict=ROUTING_CHANGE,
            drop=drop,
            frozen=frozen,
            takers=takers,
            nearest=near,
            message=message,
        )
    if frozen.verdict == "ok":
        rose = (
            ", ".join(f"{s.skill} {_pct(s.reference_share)} → {_pct(s.recent_share)}" for s in drop.rose[:5])
            or "none above its reference share"
        )
        message = (
            f"request mix: {drop.sentence()}; {frozen_line}: routing holds, the requests moved; "
            f"live share of the skills that rose: {rose}"
        )
        return LiveVerdict(skill=drop.skill, verdict=REQUEST_MIX, drop=drop, frozen=frozen, message=message)
    message = (
        f"undecided: {drop.sentence()}; {frozen_line}: the frozen set neither breaches nor holds"
        + (f" ({frozen.needed})" if frozen.needed else "")
        + "; re-run it with more runs per case"
    )
    return LiveVerdict(skill=drop.skill, verdict=UNDECIDED, drop=drop, frozen=frozen, message=message)


def verdict_payload(verdict: LiveVerdict, *, run_link: str, study_id: str | None = None) -> dict[str, Any]:
    """The alert payload (``skillreach.service.alerts`` notice form: skill, metric, message, run link)."""
    return {
        "event": LIVE_VERDICT,
        "skill": verdict.skill,
        "metric": "live_share",
        "message": verdict.message,
        "verdict": verdict.verdict,
        "cause": verdict.verdict.replace(" ", "-"),
        "baseline_id": verdict.frozen.baseline_id,
        "run_link": run_link,
        "study_id": study_id,
        "takers": list(verdict.takers),
        "nearest_change": verdict.nearest.model_dump(mode="json") if verdict.nearest else None,
        "reference_share": verdict.drop.share.reference_share,
        "recent_share": verdict.drop.share.recent_share,
        "relative": verdict.drop.relative,
        "rose": [
            {"skill": s.skill, "reference_share": s.reference_share, "recent_share": s.recent_share}
            for s in verdict.drop.rose[:10]
        ],
    }


def drop_payload(drop: LiveDrop) -> dict[str, Any]:
    """The payload of the ``skillreach.live.dropped`` event (what its triggered deployment is given)."""
    return {
        "event": LIVE_DROPPED,
        "skill": drop.skill,
        "metric": "live_share",
        "until": drop.windows.until.isoformat(),
        "reference_share": drop.share.reference_share,
        "recent_share": drop.share.recent_share,
        "relative": drop.relative,
        "gate": drop.gate,
        "message": drop.sentence(),
    }


def verdict_markdown(verdict: LiveVerdict, rows: Mapping[str, Any] | None = None) -> str:
    """The Prefect artifact's Markdown: the verdict, the live numbers, the frozen set's."""
    d, f = verdict.drop, verdict.frozen
    lines = [
        f"# {verdict.headline}",
        "",
        verdict.message,
        "",
        "| | reference | recent |",
        "|---|---|---|",
        f"| window | {d.windows.reference_start:%Y-%m-%d} – {d.windows.recent_start:%Y-%m-%d} | "
        f"{d.windows.recent_start:%Y-%m-%d} – {d.windows.until:%Y-%m-%d} |",
        f"| main-agent prompts | {d.reference_prompts} | {d.recent_prompts} |",
        f"| activations of {verdict.skill} | {d.share.reference_activations} | "
        f"{d.share.recent_activations} |",
        f"| live share | {_pct(d.share.reference_share)} | {_pct(d.share.recent_share)} |",
        "",
        f"Frozen set: baseline `{f.baseline_id}`, activation {_pct(f.base)} → {_pct(f.new)}, "
        f"verdict **{f.verdict}**" + (f", lost {f.lost} of {f.cases} cases" if f.lost else "") + ".",
    ]
    if verdict.takers:
        lines += ["", "Skills that now take its cases: " + ", ".join(verdict.takers) + "."]
    if verdict.nearest:
        lines += ["", f"Catalog change nearest in time: {verdict.nearest.sentence()}."]
    if d.rose:
        lines += ["", "| skill that rose | reference share | recent share |", "|---|---|---|"]
        lines += [f"| {s.skill} | {_pct(s.reference_share)} | {_pct(s.recent_share)} |" for s in d.rose[:10]]
    lines += [
        "",
        "A live share moves with the request mix as much as with routing; the frozen set (the "
        "same cases, the current catalog) is what separates the two.",
    ]
    return "\n".join(lines) + "\n"
