"""Live usage tables: what the agents loaded, per skill, per day or week, per skill version.

Pure: a list of :class:`~skillreach.live.events.LiveEvent` in, a :class:`UsageReport` out (the store reads
the events; ``skillreach usage`` prints, writes JSON or the HTML page).

Definitions (the main agent only; a subagent's prompts and calls — ``sidechain`` — are counted apart):

- **prompts** of a period: the user prompts recorded in it (the denominator);
- **activations** of a skill: the prompts on which it ran (the skill that ran when the source says,
  else the one asked for), each prompt once; a call without a prompt id counts once itself;
- **activation share**: activations ÷ prompts of the same period. It moves with the request mix as
  much as with routing: a skill whose share falls may be losing its requests to a neighbour, or its
  requests may simply be fewer (the frozen set tells the two apart, see :mod:`skillreach.live.verdict`);
- **sessions**: the sessions with at least one activation of the skill;
- **hidden** calls (the source hid the name, e.g. ``custom_skill``) are never attributed to a skill;
- a **mismatch**: a call whose skill that ran differs from the one asked for;
- a **stale** skill: one of the catalog with no activation in the last N days.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from skillreach.live.events import UNKNOWN_VERSION, EventKind, LiveEvent
from skillreach.models import Frozen

__all__ = [
    "Mismatch",
    "Period",
    "PeriodTotals",
    "StaleSkill",
    "UsageReport",
    "UsageRow",
    "VersionSpan",
    "activated_skill",
    "period_of",
    "usage_report",
]

Period = Literal["day", "week"]


def period_of(at: datetime, by: Period) -> date:
    """The period an instant falls in (UTC): its day, or the Monday of its ISO week."""
    day = at.astimezone(UTC).date()
    return day - timedelta(days=day.weekday()) if by == "week" else day


def activated_skill(event: LiveEvent) -> str | None:
    """The skill a call activated: the one that ran when the source says, else the one asked for;
    ``None`` for a prompt or a hidden call."""
    if event.kind is not EventKind.SKILL or event.hidden:
        return None
    return event.skill_ran or event.skill


def _activation_key(event: LiveEvent) -> tuple[str, str]:
    """Activations are counted once per prompt (a skill called twice on one prompt is one activation)."""
    if event.prompt_id:
        return (event.session_id, event.prompt_id)
    return (event.source, event.event_id)


class UsageRow(Frozen):
    """One skill in one period, one version of it (``version=None``: every version together)."""

    skill: str
    period: date
    version: str | None = None
    prompts: int
    """Main-agent prompts in the period (every skill's denominator)."""
    activations: int
    sessions: int
    share: float | None
    """activations ÷ prompts; ``None`` when the period has no prompt."""
    sidechain_activations: int = 0
    """Activations by subagents (kept apart: not in ``activations``)."""


class PeriodTotals(Frozen):
    period: date
    prompts: int
    sessions: int
    activations: int
    hidden: int
    """Calls whose skill name the source hid (never attributed to a skill)."""
    sidechain_prompts: int = 0
    sidechain_activations: int = 0


class VersionSpan(Frozen):
    """One version of a skill live in the window: when first and last seen, how many activations."""

    skill: str
    version: str
    first: datetime
    last: datetime
    activations: int


class StaleSkill(Frozen):
    skill: str
    last_activation: datetime | None
    """The last activation ever seen in the events read (``None``: never)."""
    added: datetime | None = None
    """When the skill entered the catalog, when known (the skills repository's history)."""


class Mismatch(Frozen):
    requested: str
    ran: str
    calls: int


class UsageReport(Frozen):
    by: Period
    since: datetime | None
    until: datetime | None
    periods: tuple[date, ...]
    totals: tuple[PeriodTotals, ...]
    rows: tuple[UsageRow, ...]
    """Per skill and period, every version together."""
    version_rows: tuple[UsageRow, ...]
    """Per skill, period and version."""
    versions: tuple[VersionSpan, ...]
    stale: tuple[StaleSkill, ...] = ()
    stale_days: int | None = None
    mismatches: tuple[Mismatch, ...] = ()
    hidden: int = 0
    failed: int = 0
    """Calls the source reported as failed (``success`` false); still counted as asked for."""

    @property
    def skills(self) -> list[str]:
        return sorted({r.skill for r in self.rows})

    def share_series(self, skill: str) -> list[float | None]:
        """The skill's share in every period of the report, in order (``None``: no prompt that period)."""
        mine = {r.period: r for r in self.rows if r.skill == skill}
        totals = {t.period: t for t in self.totals}
        out: list[float | None] = []
        for p in self.periods:
            row = mine.get(p)
            prompts = totals[p].prompts if p in totals else 0
            out.append(row.share if row is not None else (0.0 if prompts else None))
        return out


def _share(activations: int, prompts: int) -> float | None:
    return activations / prompts if prompts else None


def usage_report(
    events: Iterable[LiveEvent],
    *,
    by: Period = "day",
    since: datetime | None = None,
    until: datetime | None = None,
    catalog: Sequence[str] = (),
    stale_days: int | None = None,
    now: datetime | None = None,
    added: Mapping[str, datetime] | None = None,
) -> UsageReport:
    """The usage tables of ``events`` within ``[since, until)``.

    ``catalog`` (the skills of ``--skills``) with ``stale_days``: the skills with no activation in the
    ``stale_days`` before ``now`` (default: ``until``, else the newest event, else the clock) — every
    event given counts for that, not only the window's. A skill ``added`` to the catalog less than
    ``stale_days`` ago is not stale yet: it has not had the time."""
    prompts: Counter[date] = Counter()
    prompt_sessions: dict[date, set[str]] = defaultdict(set)
    side_prompts: Counter[date] = Counter()
    acts: dict[tuple[str, date, str], set[tuple[str, str]]] = defaultdict(set)
    sessions: dict[tuple[str, date, str], set[str]] = defaultdict(set)
    side_acts: dict[tuple[str, date], set[tuple[str, str]]] = defaultdict(set)
    hidden: Counter[date] = Counter()
    mismatches: Counter[tuple[str, str]] = Counter()
    spans: dict[tuple[str, str], list[datetime]] = {}
    span_acts: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    last_seen: dict[str, datetime] = {}
    newest: datetime | None = None
    failed = 0
    for ev in events:
        newest = ev.at if newest is None or ev.at > newest else newest
        skill = activated_skill(ev)
        if skill is not None and not ev.sidechain:
            last_seen[skill] = max(last_seen.get(skill, ev.at), ev.at)
        if (since is not None and ev.at < since) or (until is not None and ev.at >= until):
            continue
        period = period_of(ev.at, by)
        if ev.kind is EventKind.PROMPT:
            if ev.sidechain:
                side_prompts[period] += 1
            else:
                prompts[period] += 1
                prompt_sessions[period].add(ev.session_id)
            continue
        if ev.hidden:
            hidden[period] += 1
            continue
        if skill is None:
            continue
        if ev.success is False:
            failed += 1
        if ev.skill and ev.skill_ran and ev.skill_ran != ev.skill:
            mismatches[(ev.skill, ev.skill_ran)] += 1
        if ev.sidechain:
            side_acts[(skill, period)].add(_activation_key(ev))
            continue
        version = ev.skill_version or UNKNOWN_VERSION
        acts[(skill, period, version)].add(_activation_key(ev))
        sessions[(skill, period, version)].add(ev.session_id)
        span = spans.setdefault((skill, version), [ev.at, ev.at])
        span[0], span[1] = min(span[0], ev.at), max(span[1], ev.at)
        span_acts[(skill, version)].add(_activation_key(ev))

    periods = sorted(
        set(prompts) | set(side_prompts) | set(hidden) | {p for _, p, _ in acts} | {p for _, p in side_acts}
    )
    version_rows = tuple(
        UsageRow(
            skill=s,
            period=p,
            version=v,
            prompts=prompts[p],
            activations=len(keys),
            sessions=len(sessions[(s, p, v)]),
            share=_share(len(keys), prompts[p]),
        )
        for (s, p, v), keys in sorted(acts.items())
    )
    merged: dict[tuple[str, date], set[tuple[str, str]]] = defaultdict(set)
    merged_sessions: dict[tuple[str, date], set[str]] = defaultdict(set)
    for (s, p, v), keys in acts.items():
        merged[(s, p)] |= keys
        merged_sessions[(s, p)] |= sessions[(s, p, v)]
    for key in side_acts:
        merged.setdefault(key, set())
    rows = tuple(
        UsageRow(
            skill=s,
            period=p,
            prompts=prompts[p],
            activations=len(keys),
            sessions=len(merged_sessions[(s, p)]),
            share=_share(len(keys), prompts[p]),
            sidechain_activations=len(side_acts.get((s, p), ())),
        )
        for (s, p), keys in sorted(merged.items())
    )
    totals = tuple(
        PeriodTotals(
            period=p,
            prompts=prompts[p],
            sessions=len(prompt_sessions[p]),
            activations=sum(len(k) for (_, q), k in merged.items() if q == p),
            hidden=hidden[p],
            sidechain_prompts=side_prompts[p],
            sidechain_activations=sum(len(k) for (_, q), k in side_acts.items() if q == p),
        )
        for p in periods
    )
    versions = tuple(
        VersionSpan(skill=s, version=v, first=first, last=last, activations=len(span_acts[(s, v)]))
        for (s, v), (first, last) in sorted(spans.items(), key=lambda kv: (kv[0][0], kv[1][0]))
    )
    stale: tuple[StaleSkill, ...] = ()
    if stale_days is not None and catalog:
        ref = now or until or newest or datetime.now(UTC)
        cutoff = ref - timedelta(days=stale_days)
        since_added = added or {}
        stale = tuple(
            StaleSkill(skill=name, last_activation=last_seen.get(name), added=since_added.get(name))
            for name in sorted(set(catalog))
            if (last_seen.get(name) is None or last_seen[name] < cutoff)
            and (name not in since_added or since_added[name] <= cutoff)
        )
    return UsageReport(
        by=by,
        since=since,
        until=until,
        periods=tuple(periods),
        totals=totals,
        rows=rows,
        version_rows=version_rows,
        versions=versions,
        stale=stale,
        stale_days=stale_days,
        mismatches=tuple(Mismatch(requested=a, ran=b, calls=n) for (a, b), n in sorted(mismatches.items())),
        hidden=sum(hidden.values()),
        failed=failed,
    )
