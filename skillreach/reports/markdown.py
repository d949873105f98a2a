"""A markdown summary for a pull-request comment or ``$GITHUB_STEP_SUMMARY`` (GitHub-flavoured)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jinja2

from skillreach._io.console import strip_control
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

__all__ = ["md_escape", "render_markdown"]

_MD_SPECIAL = str.maketrans(
    {
        "|": "\\|",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "*": "\\*",
        "_": "\\_",
        "`": "\\`",
        "[": "\\[",
        "]": "\\]",
        "\\": "\\\\",
        "\n": " ",
        "\r": " ",
    }
)


def md_escape(value: object) -> str:
    """Text safe inside a markdown table cell: no markup, no HTML, no line break, no control character."""
    return strip_control(str(value).translate(_MD_SPECIAL))


@functools.cache
def _env() -> jinja2.Environment:
    env = template_env(html=False)  # markdown: every interpolated text goes through the ``md`` filter
    env.filters["md"] = md_escape
    env.filters["signed"] = _signed
    return env


def _signed(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:+.{digits}f}"


def render_markdown(
    artifact: Artifact,
    *,
    top: int = 10,
    gate: Sequence[Any] | None = None,
    not_compared: Sequence[str] = (),
    uplift: Sequence[Any] = (),
) -> str:
    """Headline figures with intervals, the weakest skills, compliance and task quality per skill,
    the gate report (when ``gate`` is given, as for :func:`~skillreach.reports.render_html`), the
    skills' uplift (``uplift``: their uplift reports), collisions, attractors and errors."""
    active, _ = class_rows(artifact)
    gates = gate_view(gate, not_compared)
    return (
        _env()
        .get_template("report.md.j2")
        .render(
            a=artifact,
            offline=offline_note(artifact),
            headlines=headlines(artifact),
            weakest=active[:top],
            more_classes=max(0, len(active) - top),
            collisions=artifact.collisions[:top],
            attractors=artifact.top_attractors[:top],
            errors=error_groups(artifact, samples=3)[:top],
            judge=judge_name(artifact),
            quality=quality_rows(artifact, gates),
            gates=gates,
            cohort_titles=COHORT_TITLES,
            uplift=list(uplift),
        )
    )
