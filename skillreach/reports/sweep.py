"""The sweep report: the capacity curve (the sweep's metric — macro-F1 or pass rate — against catalog
size on a log axis, its 95 % band, the knee and the SLA levels) as inline SVG with no script, and the
per-size table.

Geometry is computed here as numbers; the template writes the markup with autoescaping on.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jinja2

from skillreach.author.sweep import METRIC_NAMES, SweepResult
from skillreach.reports._format import fmt_rate, template_env

__all__ = ["CurveGeometry", "curve_geometry", "render_sweep_html"]

W, H = 720.0, 340.0
LEFT, RIGHT, TOP, BOTTOM = 52.0, 20.0, 18.0, 42.0


@dataclass(frozen=True)
class Tick:
    pos: float
    label: str


@dataclass(frozen=True)
class CurveGeometry:
    line: str
    """``x,y`` points of the metric's polyline."""
    band: str
    """``x,y`` points of the interval band polygon (upper left→right, then lower right→left)."""
    dots: list[tuple[float, float, int, str]]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    knee_x: float | None
    sla: list[tuple[float, float | None, str]]
    """(y of the level, x of the interpolated size or None, label)."""


def _sx(size: float, lo: float, hi: float) -> float:
    span = (math.log(hi) - math.log(lo)) or 1.0
    return round(LEFT + (W - LEFT - RIGHT) * (math.log(size) - math.log(lo)) / span, 2)


def _sy(value: float) -> float:
    return round(TOP + (H - TOP - BOTTOM) * (1.0 - max(0.0, min(1.0, value))), 2)


def curve_geometry(result: SweepResult) -> CurveGeometry:
    metric = result.analysis.metric
    pts = [(p.size, *p.figure(metric)) for p in result.points if p.figure(metric)[0] is not None]
    sizes = [p.size for p in result.points] or [1, 2]
    lo, hi = min(sizes), max(*sizes, min(sizes) + 1)
    line = " ".join(f"{_sx(n, lo, hi)},{_sy(v or 0.0)}" for n, v, _ in pts)
    upper = [f"{_sx(n, lo, hi)},{_sy(ci[1])}" for n, _, ci in pts if ci is not None]
    lower = [f"{_sx(n, lo, hi)},{_sy(ci[0])}" for n, _, ci in reversed(pts) if ci is not None]
    knee = result.analysis.knee
    name = METRIC_NAMES[metric]
    sla = [
        (_sy(s.level), None if s.size is None else _sx(s.size, lo, hi), f"{name} ≥ {s.level:.2f}")
        for s in result.analysis.sla
    ]
    return CurveGeometry(
        line=line,
        band=" ".join(upper + lower),
        dots=[(_sx(n, lo, hi), _sy(v or 0.0), n, fmt_rate(v, ci)) for n, v, ci in pts],
        x_ticks=[Tick(_sx(s, lo, hi), str(s)) for s in sizes],
        y_ticks=[Tick(_sy(v / 10), f"{v / 10:.1f}") for v in range(0, 11, 2)],
        knee_x=None if knee.size is None else _sx(knee.size, lo, hi),
        sla=sla,
    )


@functools.cache
def _env() -> jinja2.Environment:
    return template_env(html=True)


def render_sweep_html(result: SweepResult) -> str:
    return (
        _env()
        .get_template("sweep.html.j2")
        .render(
            r=result,
            name=METRIC_NAMES[result.analysis.metric],
            g=curve_geometry(result),
            W=W,
            H=H,
            LEFT=LEFT,
            RIGHT=RIGHT,
            TOP=TOP,
            BOTTOM=BOTTOM,
        )
    )
