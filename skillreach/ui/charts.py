"""The geometry of the dashboard's charts, as numbers and strings of numbers: the templates (autoescaped)
write the SVG markup, so no skill name or query text is ever part of a path.

:func:`history_chart`: one metric of a skill over time, one group per segment (a new group at every
pin change, labelled with what changed; never one line across pins), the 95 % interval as a band, each
point a link to its run, the bar (the skill's baseline, under the pins it was recorded with) as a dashed
line over the segment of those pins, and the catalog's markers along the bottom.
:func:`series_chart`: a plain series (the live activation share per week) on the same time axis.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from skillreach.ui.history import HistoryPoint, Marker, Pins, Segment

__all__ = ["Chart", "history_chart", "series_chart", "time_span"]

W, H = 560, 210
LEFT, RIGHT, TOP, BOTTOM = 40, 12, 34, 30


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    title: str
    href: str | None = None
    verdict: str | None = None


@dataclass(frozen=True)
class SegmentView:
    index: int
    label: str
    pins: str
    x0: float
    x1: float
    lines: tuple[str, ...]
    """Polyline point lists (``x,y x,y``): a run of consecutive measured points each."""
    bands: tuple[str, ...]
    """Polygon point lists of the 95 % interval."""
    whiskers: tuple[tuple[float, float, float], ...]
    """(x, y_hi, y_lo) of a lone point's interval."""
    dots: tuple[Dot, ...]


@dataclass(frozen=True)
class Boundary:
    x: float
    label: str
    short: str


@dataclass(frozen=True)
class MarkView:
    x: float
    own: bool
    label: str


@dataclass(frozen=True)
class BarView:
    x0: float
    x1: float
    y: float
    y_hi: float | None
    y_lo: float | None
    label: str


@dataclass(frozen=True)
class Chart:
    metric: str
    title: str
    width: int
    height: int
    left: float
    top: float
    right: float
    bottom: float
    segments: tuple[SegmentView, ...] = ()
    boundaries: tuple[Boundary, ...] = ()
    markers: tuple[MarkView, ...] = ()
    xticks: tuple[tuple[float, str], ...] = ()
    yticks: tuple[tuple[float, str], ...] = ()
    bar: BarView | None = None
    measured: int = 0
    note: str = ""
    series: tuple[str, ...] = field(default_factory=tuple)


def time_span(times: Sequence[datetime]) -> tuple[datetime, datetime]:
    """The axis of ``times``: their range padded by 4 % (a day each side for a single instant)."""
    t0, t1 = min(times), max(times)
    pad = (t1 - t0) * 0.04 if t1 > t0 else timedelta(days=1)
    return t0 - pad, t1 + pad


class _Scale:
    def __init__(self, t0: datetime, t1: datetime, y_max: float, width: int, height: int) -> None:
        self.t0, self.span = t0, max((t1 - t0).total_seconds(), 1e-9)
        self.y_max = y_max if y_max > 0 else 1.0
        self.x0, self.x1 = float(LEFT), float(width - RIGHT)
        self.y0, self.y1 = float(height - BOTTOM), float(TOP)

    def x(self, t: datetime) -> float:
        return round(self.x0 + (t - self.t0).total_seconds() / self.span * (self.x1 - self.x0), 2)

    def y(self, v: float) -> float:
        v = min(max(v, 0.0), self.y_max)
        return round(self.y0 - v / self.y_max * (self.y0 - self.y1), 2)


def _ticks(scale: _Scale, t0: datetime, t1: datetime) -> tuple[tuple[float, str], ...]:
    span = (t1 - t0).total_seconds()
    fmt = ("%H:%M:%S" if span < 3600 else "%H:%M" if span < 2 * 86400 else "%m-%d" if span < 300 * 86400
           else "%Y-%m")
    out = []
    for i in range(5):
        t = t0 + (t1 - t0) * (i / 4)
        out.append((scale.x(t), t.strftime(fmt)))
    return tuple(out)


def _yticks(scale: _Scale, percent: bool) -> tuple[tuple[float, str], ...]:
    steps = [scale.y_max * i / 4 for i in range(5)]
    fmt = ("{:.1%}" if scale.y_max < 0.1 else "{:.0%}") if percent else "{:.2f}"
    return tuple((scale.y(v), fmt.format(v)) for v in steps)


BUCKET_PX = 4.0
"""Points closer than this on the time axis are drawn as one (their mean, the union of their intervals,
a title naming how many studies): a chart of ten thousand studies has a point per pixel it can show."""


def _buckets(
    seg: Segment, metric: str, scale: _Scale
) -> list[list[tuple[HistoryPoint, float, tuple[float, float] | None, int]] | None]:
    """The segment's measured points grouped by :data:`BUCKET_PX` of the axis, in order; ``None`` where a
    study did not measure the metric (the line breaks there)."""
    out: list[list[tuple[HistoryPoint, float, tuple[float, float] | None, int]] | None] = []
    key: int | None = None
    for p in seg.points:
        value, ci, n = p.value(metric)
        if value is None:
            out.append(None)
            key = None
            continue
        k = int((scale.x(p.at) - scale.x0) // BUCKET_PX)
        group = out[-1] if out else None
        if group is not None and k == key:
            group.append((p, value, ci, n))
        else:
            out.append([(p, value, ci, n)])
            key = k
    return out


def _segment_view(seg: Segment, metric: str, scale: _Scale, link: str) -> SegmentView:
    lines: list[str] = []
    bands: list[str] = []
    whiskers: list[tuple[float, float, float]] = []
    dots: list[Dot] = []
    run: list[tuple[float, float, tuple[float, float] | None]] = []

    def close() -> None:
        if len(run) > 1:
            lines.append(" ".join(f"{x},{y}" for x, y, _ in run))
            with_ci = [(x, ci) for x, _, ci in run if ci is not None]
            if len(with_ci) == len(run):
                upper = [f"{x},{scale.y(ci[1])}" for x, ci in with_ci]
                lower = [f"{x},{scale.y(ci[0])}" for x, ci in reversed(with_ci)]
                bands.append(" ".join(upper + lower))
        elif len(run) == 1 and run[0][2] is not None:
            x, _, ci = run[0]
            whiskers.append((x, scale.y(ci[1]), scale.y(ci[0])))  # type: ignore[index]
        run.clear()

    for group in _buckets(seg, metric, scale):
        if group is None:
            close()
            continue
        x = scale.x(group[-1][0].at) if len(group) == 1 else round(
            sum(scale.x(p.at) for p, _, _, _ in group) / len(group), 2)
        value = sum(v for _, v, _, _ in group) / len(group)
        cis = [c for _, _, c, _ in group if c is not None]
        ci = (min(c[0] for c in cis), max(c[1] for c in cis)) if len(cis) == len(group) else None
        y = scale.y(value)
        run.append((x, y, ci))
        last = group[-1][0]
        verdict = next((p.verdict for p, _, _, _ in group if p.verdict == "breach"), last.verdict)
        if len(group) == 1:
            shown = f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
            title = f"{last.at:%Y-%m-%d %H:%M} · {shown} · {group[0][3]} probes · {last.kind} {last.study_id}"
        else:
            low, high = min(v for _, v, _, _ in group), max(v for _, v, _, _ in group)
            title = (f"{len(group)} studies {group[0][0].at:%Y-%m-%d %H:%M} – {last.at:%Y-%m-%d %H:%M} · "
                     f"mean {value:.3f} (from {low:.3f} to {high:.3f}) · the newest: {last.kind} "
                     f"{last.study_id}")
        if verdict:
            title += f" · gate: {verdict}"
        dots.append(Dot(x, y, title, link.format(study=last.study_id), verdict))
    close()
    pins = ", ".join(f"{k} {v}" for k, v in seg.pins.items())
    return SegmentView(seg.index, seg.label, pins, scale.x(seg.start), scale.x(seg.end), tuple(lines),
                       tuple(bands), tuple(whiskers), tuple(dots))


def _short(text: str, limit: int = 34) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def history_chart(
    metric: str,
    title: str,
    segs: Sequence[Segment],
    *,
    span: tuple[datetime, datetime],
    markers: Sequence[Marker] = (),
    bar: tuple[Pins, float, tuple[float, float] | None, str] | None = None,
    link: str = "/runs/{study}",
    width: int = W,
    height: int = H,
) -> Chart:
    """One metric's chart: a group per segment, their boundaries labelled, the bar over the segments of
    its pins (``bar``: pins, value, interval, label), the markers inside ``span``."""
    t0, t1 = span
    scale = _Scale(t0, t1, 1.0, width, height)
    views = tuple(_segment_view(s, metric, scale, link) for s in segs)
    bounds = []
    for prev, seg in itertools.pairwise(segs):
        x = round((scale.x(prev.end) + scale.x(seg.start)) / 2, 2)
        bounds.append(Boundary(x, seg.label, _short("; ".join(seg.pins.short_changes_from(prev.pins)), 40)))
    bar_view = None
    if bar is not None:
        pins, value, ci, label = bar
        under = [s for s in segs if s.pins == pins]
        if under:
            x0, x1 = scale.x(under[0].start), scale.x(under[-1].end)
            if x1 - x0 < 8:
                x0, x1 = x0 - 4, x1 + 4
            bar_view = BarView(x0, x1, scale.y(value), scale.y(ci[1]) if ci else None,
                               scale.y(ci[0]) if ci else None, label)
    marks = tuple(MarkView(scale.x(m.at), m.own, m.label) for m in markers if t0 <= m.at <= t1)
    measured = sum(len(v.dots) for v in views)
    return Chart(metric, title, width, height, scale.x0, scale.y1, scale.x1, scale.y0, views, tuple(bounds),
                 marks, _ticks(scale, t0, t1), _yticks(scale, False), bar_view, measured,
                 "" if measured else "not measured by these studies")


def series_chart(
    metric: str,
    title: str,
    points: Sequence[tuple[datetime, float | None, str]],
    *,
    span: tuple[datetime, datetime],
    markers: Sequence[Marker] = (),
    width: int = W,
    height: int = H,
) -> Chart:
    """A plain series (one value per period: ``(when, value or None, title)``), its y axis up to the
    largest value (at least 1 %), as a share."""
    t0, t1 = span
    top = max([v for _, v, _ in points if v is not None] + [0.01])
    scale = _Scale(t0, t1, min(1.0, top * 1.15), width, height)
    runs: list[list[str]] = [[]]
    dots = []
    for at, value, label in points:
        if value is None:
            runs.append([])
            continue
        x, y = scale.x(at), scale.y(value)
        runs[-1].append(f"{x},{y}")
        dots.append(Dot(x, y, label))
    lines = tuple(" ".join(r) for r in runs if len(r) > 1)
    view = SegmentView(1, title, "", scale.x0, scale.x1, lines, (), (), tuple(dots))
    marks = tuple(MarkView(scale.x(m.at), m.own, m.label) for m in markers if t0 <= m.at <= t1)
    return Chart(metric, title, width, height, scale.x0, scale.y1, scale.x1, scale.y0, (view,), (), marks,
                 _ticks(scale, t0, t1), _yticks(scale, True), None, len(dots),
                 "" if dots else "no live usage recorded in this window (skillreach ingest)")
