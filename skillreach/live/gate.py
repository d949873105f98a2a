"""The live gate: a skill's live activation share over the recent window against the reference window
just before it (``live_gates``: by default the last 14 days against the 28 before, −25 % relative).

Pure: events in, one :class:`LiveShare` per skill and the :class:`LiveDrop` of each skill past the gate
out. A drop says only that the live number fell; whether the routing changed or the request mix moved is
for the frozen set to settle (:mod:`skillreach.live.verdict`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from skillreach.live.events import EventKind, LiveEvent
from skillreach.live.usage import activated_skill
from skillreach.models import Frozen
from skillreach.settings import LiveGateConfig, parse_duration

__all__ = [
    "LIVE_DROPPED",
    "LiveDrop",
    "LiveShare",
    "LiveWindows",
    "check_live_gate",
    "drop_onset",
    "live_shares",
    "windows_for",
]

LIVE_DROPPED = "skillreach.live.dropped"
"""The Prefect event of a drop past the live gate (resource ``skillreach.skill.<name>``)."""


class LiveWindows(Frozen):
    reference_start: datetime
    recent_start: datetime
    until: datetime


class LiveShare(Frozen):
    """One skill's activations and share in the reference and the recent window."""

    skill: str
    reference_activations: int
    recent_activations: int
    reference_share: float | None
    recent_share: float | None

    @property
    def relative(self) -> float | None:
        """recent ÷ reference − 1 (``None`` when the reference share is 0 or unknown)."""
        if not self.reference_share or self.recent_share is None:
            return None
        return self.recent_share / self.reference_share - 1


class LiveDrop(Frozen):
    """A skill whose live share fell past the gate."""

    skill: str
    windows: LiveWindows
    reference_prompts: int
    recent_prompts: int
    share: LiveShare
    gate: float
    relative: float
    onset: datetime | None = None
    """The day the fall most likely began (:func:`drop_onset`)."""
    rose: tuple[LiveShare, ...] = ()
    """The skills whose share rose meanwhile, the largest rise first."""

    def sentence(self) -> str:
        ref, new = self.share.reference_share or 0.0, self.share.recent_share or 0.0
        return (
            f"{self.skill}: live activation share {ref:.1%} → {new:.1%} ({self.relative:+.0%} relative; "
            f"gate {self.gate:+.0%}) over {self.windows.recent_start:%Y-%m-%d}–{self.windows.until:%Y-%m-%d} "
            f"against {self.windows.reference_start:%Y-%m-%d}–{self.windows.recent_start:%Y-%m-%d} "
            f"({self.recent_prompts} and {self.reference_prompts} prompts)"
        )


def windows_for(gate: LiveGateConfig, until: datetime) -> LiveWindows:
    recent = parse_duration(gate.recent)
    reference = parse_duration(gate.reference)
    return LiveWindows(reference_start=until - recent - reference, recent_start=until - recent, until=until)


def _counts(
    events: Iterable[LiveEvent], windows: LiveWindows
) -> tuple[list[int], dict[str, list[set[tuple[str, str]]]], list[tuple[datetime, str | None]]]:
    """Main-agent prompts per window (0 reference, 1 recent), each skill's activations per window (once
    per prompt), and every (time, skill activated or ``None`` for a prompt) in both windows."""
    prompts = [0, 0]
    acts: dict[str, list[set[tuple[str, str]]]] = defaultdict(lambda: [set(), set()])
    timeline: list[tuple[datetime, str | None]] = []
    for ev in events:
        if ev.sidechain or ev.at < windows.reference_start or ev.at >= windows.until:
            continue
        i = 1 if ev.at >= windows.recent_start else 0
        if ev.kind is EventKind.PROMPT:
            prompts[i] += 1
            timeline.append((ev.at, None))
            continue
        skill = activated_skill(ev)
        if skill is None:
            continue
        key = (ev.session_id, ev.prompt_id) if ev.prompt_id else (ev.source, ev.event_id)
        if key not in acts[skill][i]:
            acts[skill][i].add(key)
            timeline.append((ev.at, skill))
    return prompts, acts, timeline


def live_shares(events: Iterable[LiveEvent], windows: LiveWindows) -> tuple[int, int, dict[str, LiveShare]]:
    """(reference prompts, recent prompts, skill → its :class:`LiveShare`)."""
    prompts, acts, _ = _counts(events, windows)
    return prompts[0], prompts[1], _shares(prompts, acts)


def _shares(prompts: list[int], acts: dict[str, list[set[tuple[str, str]]]]) -> dict[str, LiveShare]:
    return {
        skill: LiveShare(
            skill=skill,
            reference_activations=len(a[0]),
            recent_activations=len(a[1]),
            reference_share=len(a[0]) / prompts[0] if prompts[0] else None,
            recent_share=len(a[1]) / prompts[1] if prompts[1] else None,
        )
        for skill, a in sorted(acts.items())
    }


def drop_onset(timeline: Sequence[tuple[datetime, str | None]], skill: str) -> datetime | None:
    """The day the skill's share most likely changed: the split of the days (one change point, two
    binomial shares) that fits the activations best. ``None`` with fewer than two days."""
    import math

    days: dict[datetime, list[int]] = defaultdict(lambda: [0, 0])  # day → [prompts, activations]
    for at, who in timeline:
        day = at.replace(hour=0, minute=0, second=0, microsecond=0)
        if who is None:
            days[day][0] += 1
        elif who == skill:
            days[day][1] += 1
    order = sorted(days)
    if len(order) < 2:
        return None

    def loglik(n: int, k: int) -> float:
        k = min(k, n)
        if n == 0 or k in (0, n):
            return 0.0
        p = k / n
        return k * math.log(p) + (n - k) * math.log(1 - p)

    total_n = sum(days[d][0] for d in order)
    total_k = sum(days[d][1] for d in order)
    best, best_at = -math.inf, None
    n0 = k0 = 0
    for i in range(1, len(order)):
        n0 += days[order[i - 1]][0]
        k0 += days[order[i - 1]][1]
        score = loglik(n0, k0) + loglik(total_n - n0, total_k - k0)
        if score > best:
            best, best_at = score, order[i]
    return best_at


def check_live_gate(
    events: Sequence[LiveEvent],
    gate: LiveGateConfig,
    until: datetime,
    *,
    skills: Iterable[str] | None = None,
) -> list[LiveDrop]:
    """Every skill (of ``skills``, else every skill seen) whose share fell past ``gate`` over the recent
    window against the reference one. Not judged: a window with fewer than ``min_prompts`` prompts, a
    skill with fewer than ``min_activations`` in the reference window."""
    windows = windows_for(gate, until)
    prompts, acts, timeline = _counts(events, windows)
    if min(prompts) < gate.min_prompts:
        return []
    shares = _shares(prompts, acts)
    wanted = set(skills) if skills is not None else set(shares)
    drops: list[LiveDrop] = []
    for name in sorted(wanted):
        share = shares.get(name)
        if share is None or share.reference_activations < gate.min_activations:
            continue
        rel = share.relative
        if rel is None or rel >= gate.activation_share:
            continue
        rose = sorted(
            (
                s
                for s in shares.values()
                if s.skill != name and (s.recent_share or 0.0) > (s.reference_share or 0.0)
            ),
            key=lambda s: (s.reference_share or 0.0) - (s.recent_share or 0.0),
        )
        drops.append(
            LiveDrop(
                skill=name,
                windows=windows,
                reference_prompts=prompts[0],
                recent_prompts=prompts[1],
                share=share,
                gate=gate.activation_share,
                relative=rel,
                onset=drop_onset(timeline, name),
                rose=tuple(rose),
            )
        )
    return drops
