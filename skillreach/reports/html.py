"""The self-contained HTML report: no script, no CDN, no external font; every figure in the page
carries a machine-readable hook (``data-metric``/``data-value``, ``data-class``/``data-field``).

Geometry (heatmap cells, interval bars) is computed here as numbers; the template writes the markup
with autoescaping on, so skill names, descriptions and query texts always render as text.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jinja2

from skillreach.models import NO_SKILL
from skillreach.reports._format import template_env
from skillreach.reports._view import (
    COHORT_TITLES,
    class_rows,
    error_groups,
    gate_view,
    headlines,
    judge_name,
    offline_note,
    quality_rows,
)
from skillreach.scoring.artifact import Artifact

__all__ = ["HEATMAP_MAX_LABELS", "render_html"]

HEATMAP_MAX_LABELS = 40
"""Beyond this many active labels the heatmap keeps the most confused ones (the artifact has all)."""

_BLUE = ((239, 246, 255), (29, 78, 216))  # diagonal: the share of a skill's probes routed to it
_ORANGE = ((255, 247, 237), (194, 65, 12))  # off-diagonal: the share sent elsewhere


@functools.cache
def _env() -> jinja2.Environment:
    return template_env(html=True)


def _mix(scale: tuple[tuple[int, int, int], tuple[int, int, int]], t: float) -> str:
    (r0, g0, b0), (r1, g1, b1) = scale
    t = min(1.0, max(0.0, t))
    return f"#{round(r0 + (r1 - r0) * t):02x}{round(g0 + (g1 - g0) * t):02x}{round(b0 + (b1 - b0) * t):02x}"


@dataclass(frozen=True)
class _Cell:
    x: float
    y: float
    size: float
    fill: str
    ink: str
    count: int
    share: float
    expected: str
    predicted: str


def _heatmap(artifact: Artifact) -> dict[str, Any]:
    active = [c for c in artifact.classes if c.active]
    note = ""
    if len(active) > HEATMAP_MAX_LABELS:
        skills = [c for c in active if c.label != NO_SKILL]
        skills.sort(key=lambda c: (-(c.fp + c.fn), c.label))
        keep = {c.label for c in skills[: HEATMAP_MAX_LABELS - 1]} | {NO_SKILL}
        note = (
            f"Showing the {len(keep)} labels with the most confusion of {len(active)} active; "
            "artifact.json holds every cell."
        )
        active = [c for c in active if c.label in keep]
    labels = [c.label for c in active]
    index = {label: i for i, label in enumerate(labels)}
    support = {c.label: c.support for c in active}
    n = len(labels)
    size = 34.0 if n <= 12 else 26.0 if n <= 24 else 18.0
    show_counts = n <= 24
    longest = max((len(x) for x in labels), default=4)
    margin = min(250.0, 16 + 7.4 * min(longest, 32))
    cells = []
    for c in artifact.confusion:
        if c.expected not in index or c.predicted not in index:
            continue
        row_total = support[c.expected] or 1
        share = c.count / row_total
        diagonal = c.expected == c.predicted
        intensity = 0.12 + 0.88 * share
        cells.append(
            _Cell(
                x=margin + index[c.predicted] * size,
                y=margin + index[c.expected] * size,
                size=size,
                fill=_mix(_BLUE if diagonal else _ORANGE, intensity),
                ink="#ffffff" if intensity > 0.55 else "#1f2937",
                count=c.count,
                share=share,
                expected=c.expected,
                predicted=c.predicted,
            )
        )
    return {
        "labels": labels,
        "cells": cells,
        "size": size,
        "margin": margin,
        "width": margin + n * size + 0.55 * margin,
        "height": margin + n * size + 10,
        "show_counts": show_counts,
        "note": note,
        "font": 12 if size >= 26 else 10,
        "legend": [
            (_mix(_BLUE, 0.12 + 0.88 * t), _mix(_ORANGE, 0.12 + 0.88 * t), t) for t in (0, 0.25, 0.5, 0.75, 1)
        ],
    }


def _short(text: str, limit: int = 180) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_html(
    artifact: Artifact,
    *,
    gate: Sequence[Any] | None = None,
    not_compared: Sequence[str] = (),
    uplift: Sequence[Any] = (),
) -> str:
    """The report as one HTML document (UTF-8, no external resource).

    ``gate``: the study's gate — :class:`skillreach.baselines.gates.Comparison` objects (or their JSON), or
    flat
    gate rows — shown as the gate report (verdicts, paired intervals, power advice) and as the
    old-cases / new-cases split of compliance and task quality; ``not_compared``: the skills whose
    baseline could not be compared, and why; ``uplift``: the skills' uplift reports
    (:class:`skillreach.author.uplift.UpliftReport`), shown with their intervals and routing misses.
    """
    active, inactive = class_rows(artifact)
    gates = gate_view(gate, not_compared)
    descriptions = {k: _short(v) for k, v in artifact.catalog.descriptions.items()}
    return (
        _env()
        .get_template("report.html.j2")
        .render(
            a=artifact,
            offline=offline_note(artifact),
            headlines=headlines(artifact),
            classes=active,
            inactive=inactive,
            descriptions=descriptions,
            heatmap=_heatmap(artifact),
            errors=error_groups(artifact),
            collisions=artifact.collisions[:50],
            more_collisions=max(0, len(artifact.collisions) - 50),
            attractors=artifact.top_attractors[:20],
            no_skill=NO_SKILL,
            short=_short,
            judge=judge_name(artifact),
            quality=quality_rows(artifact, gates),
            gates=gates,
            cohort_titles=COHORT_TITLES,
            uplift=list(uplift),
        )
    )
