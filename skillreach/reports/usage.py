"""The live usage page: one line per skill over time (its activation share per day or week), each edit
(a version change, a commit of its ``SKILL.md``) and each skill added to the catalog marked on it, the
tables of ``skillreach usage`` and a note on what a live share is and is not.

Self-contained (no script, no CDN); geometry computed here as numbers, the template (autoescape on)
writes the markup, so skill names always render as text.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

import jinja2

from skillreach.live.usage import UsageReport
from skillreach.live.verdict import CatalogChange
from skillreach.reports._format import template_env

__all__ = ["render_usage_html"]

W, H, LEFT, RIGHT, TOP, BOTTOM = 960, 360, 56, 180, 20, 40
PALETTE = (
    "#1d4ed8",
    "#c2410c",
    "#047857",
    "#7c3aed",
    "#b91c1c",
    "#0e7490",
    "#a16207",
    "#be185d",
    "#4d7c0f",
    "#334155",
)
MAX_LINES = 12
"""Lines drawn (the skills with most activations); the tables list every skill."""


@functools.cache
def _env() -> jinja2.Environment:
    return template_env(html=True)


@dataclass(frozen=True)
class _Line:
    skill: str
    color: str
    points: str
    dots: tuple[tuple[float, float, str], ...]
    label_y: float


@dataclass(frozen=True)
class _Mark:
    x: float
    skill: str
    how: str
    label: str
    color: str
    label_y: float = TOP + 10


def _x(i: int, n: int) -> float:
    span = W - LEFT - RIGHT
    return LEFT + (span * i / (n - 1) if n > 1 else span / 2)


def _x_at(when: datetime, periods: Sequence[date], by: str) -> float | None:
    """Where an instant falls on the time axis (between the period starts it lies between)."""
    if not periods:
        return None
    starts = [datetime.combine(p, time(), tzinfo=UTC).timestamp() for p in periods]
    step = 7 * 86400 if by == "week" else 86400
    t = when.astimezone(UTC).timestamp()
    if t < starts[0] or t >= starts[-1] + step:
        return None
    for i in range(len(starts)):
        nxt = starts[i + 1] if i + 1 < len(starts) else starts[i] + step
        if starts[i] <= t < nxt:
            frac = (t - starts[i]) / (nxt - starts[i])
            return _x(i, len(starts)) + frac * (
                (_x(i + 1, len(starts)) - _x(i, len(starts))) if i + 1 < len(starts) else 0.0
            )
    return None


def _stagger(marks: list[_Mark], gap: float = 90.0) -> list[_Mark]:
    """Labels of marks closer than ``gap`` pixels go one row lower (three rows, then round again)."""
    from dataclasses import replace

    out: list[_Mark] = []
    row = 0
    for m in marks:
        row = (row + 1) % 3 if out and m.x - out[-1].x < gap else 0
        out.append(replace(m, label_y=TOP + 10 + 12 * row))
    return out


def render_usage_html(
    report: UsageReport, *, changes: Sequence[CatalogChange] = (), title: str = "Live skill usage"
) -> str:
    """The page (a string of HTML)."""
    totals: dict[str, int] = {}
    for r in report.rows:
        totals[r.skill] = totals.get(r.skill, 0) + r.activations
    drawn = sorted(totals, key=lambda s: (-totals[s], s))[:MAX_LINES]
    colors = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(drawn)}
    n = len(report.periods)
    top = max([v for s in drawn for v in report.share_series(s) if v is not None] or [0.0])
    top = max(top * 1.1, 0.05)

    def y(v: float) -> float:
        return TOP + (H - TOP - BOTTOM) * (1 - v / top)

    lines = []
    for s in drawn:
        pts = [(_x(i, n), y(v)) for i, v in enumerate(report.share_series(s)) if v is not None]
        dots = tuple(
            (px, py, f"{s} {report.periods[i]}: {v:.1%}")
            for i, ((px, py), v) in enumerate(
                zip(pts, [v for v in report.share_series(s) if v is not None], strict=True)
            )
        )
        lines.append(
            _Line(
                s,
                colors[s],
                " ".join(f"{px:.1f},{py:.1f}" for px, py in pts),
                dots,
                pts[-1][1] if pts else y(0),
            )
        )
    marks: list[_Mark] = []
    for c in changes:
        x = _x_at(c.at, report.periods, report.by)
        if x is not None:
            marks.append(_Mark(x, c.skill, c.how, c.sentence(), colors.get(c.skill, "#6b7280")))
    for v in report.versions:  # a version first seen after the window's first period: an edit went live
        x = _x_at(v.first, report.periods, report.by)
        first_of_skill = min((w.first for w in report.versions if w.skill == v.skill), default=v.first)
        if x is not None and v.first > first_of_skill:
            marks.append(
                _Mark(
                    x,
                    v.skill,
                    "version",
                    f"{v.skill}: version {v.version} live from {v.first:%Y-%m-%d %H:%M} UTC",
                    colors.get(v.skill, "#6b7280"),
                )
            )
    marks = _stagger(sorted(marks, key=lambda m: m.x))
    ticks = [(TOP + (H - TOP - BOTTOM) * (1 - k / 4), f"{top * k / 4:.0%}") for k in range(5)]
    every = max(1, n // 10)
    xticks = [(_x(i, n), p.isoformat()) for i, p in enumerate(report.periods) if i % every == 0]
    return (
        _env()
        .get_template("usage.html.j2")
        .render(
            title=title,
            r=report,
            lines=lines,
            marks=sorted(marks, key=lambda m: m.x),
            ticks=ticks,
            xticks=xticks,
            W=W,
            H=H,
            LEFT=LEFT,
            RIGHT=RIGHT,
            TOP=TOP,
            BOTTOM=BOTTOM,
            changes=changes,
        )
    )
