"""Reports of an A/B diff (:class:`skillreach.author.diff.DiffResult`): terminal, markdown, HTML (SVG, no
script).

Geometry (the Δ bars with their intervals) is computed here as numbers; the templates write the markup
with autoescaping on (HTML) or every text through the ``md`` filter (markdown).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jinja2
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skillreach.author.diff import Delta, DiffResult
from skillreach.reports._format import METRIC_TITLES, fmt_num, template_env
from skillreach.reports.markdown import md_escape

__all__ = ["fmt_delta", "print_diff", "render_diff_html", "render_diff_markdown"]


def fmt_delta(d: Delta) -> str:
    """``+0.028 [-0.011, +0.068]``; ``n/a`` without pairs."""
    if d.delta is None:
        return "n/a"
    ci = f" [{d.ci95[0]:+.3f}, {d.ci95[1]:+.3f}]" if d.ci95 is not None else ""
    return f"{d.delta:+.3f}{ci}"


def _title(metric: str) -> str:
    return METRIC_TITLES.get(metric, metric.replace("_", " ").capitalize())


def _verdict_line(r: DiffResult) -> str:
    top1 = r.delta("top1_accuracy")
    line = f"{r.verdict}: Δ top-1 {fmt_delta(top1)} over {r.pairs} queries"
    if r.mcnemar is not None:
        line += f"; McNemar exact p = {r.mcnemar.pvalue:.4g} ({r.mcnemar.won} won, {r.mcnemar.lost} lost)"
    return line


def print_diff(r: DiffResult, console: Console | None = None, *, top: int = 10) -> None:
    console = console or Console()
    loss = r.loss_line()
    if loss is not None:  # the first line names the skill that lost significantly, and who took its queries
        console.print(f"[bold red]{escape(loss)}[/]")
    console.print(
        f"[bold]diff[/] A = {escape(r.a.folder)} ({escape(r.a.catalog_id)}, {escape(r.a.runtime)})  "
        f"B = {escape(r.b.folder)} ({escape(r.b.catalog_id)}, {escape(r.b.runtime)})"
    )
    for axis, what in r.moved.items():
        console.print(f"  moved: [cyan]{axis}[/] — {escape(what)}")
    for w in r.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    table = Table(show_edge=False, pad_edge=False)
    for col in ("metric", "A", "B", "Δ B − A [95% CI]", "pairs", "interval"):
        table.add_column(col, justify="right" if col in ("A", "B", "pairs") else "left")
    for d in r.headline:
        table.add_row(_title(d.metric), fmt_num(d.a), fmt_num(d.b), fmt_delta(d), str(d.pairs), d.method)
    console.print(table)
    colour = {"better": "green", "worse": "red"}.get(r.verdict, "yellow")
    console.print(f"[bold {colour}]{escape(_verdict_line(r))}[/]")
    if r.mcnemar_note:
        console.print(f"[dim]{escape(r.mcnemar_note)}[/]")
    if r.staged is not None:
        _print_staged(r, console)
    for title, flips in (("won", r.won), ("lost", r.lost)):
        for f in flips[:top]:
            text = f" — {escape(f.text[:80])}" if f.text else ""
            console.print(
                f"  {title} {escape(f.query_id)} ({escape(f.truth)}): {escape(f.a_predicted)} → "
                f"{escape(f.b_predicted)}{text}"
            )
        if len(flips) > top:
            console.print(f"  … {len(flips) - top} more {title}")
    moved = [s for s in r.skills if s.won or s.lost or s.stolen or s.released]
    if moved:
        st = Table(title="skills whose traffic moved", title_justify="left", show_edge=False, pad_edge=False)
        for col in ("skill", "Δ recall", "Δ precision", "won", "lost", "stolen", "released"):
            st.add_column(col)
        for s in moved[:top]:
            st.add_row(
                escape(s.skill),
                fmt_delta(s.recall),
                fmt_delta(s.precision),
                escape(", ".join(s.won)),
                escape(", ".join(s.lost)),
                escape(", ".join(s.stolen)),
                escape(", ".join(s.released)),
            )
        console.print(st)


def _print_staged(r: DiffResult, console: Console) -> None:
    st = r.staged
    assert st is not None
    table = Table(
        title=f"staged Δ top-1 ({st.looks_planned} planned looks, O'Brien–Fleming α-spending, "
        f"seed {st.seed})",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for col in ("look", "queries", "Δ", "repeated 95% CI", "critical t", "decision"):
        table.add_column(col, justify="right" if col in ("look", "queries", "critical t") else "left")
    for lk in st.looks:
        table.add_row(
            str(lk.look),
            str(lk.cases),
            f"{lk.mean_diff:+.3f}",
            f"[{lk.ci[0]:+.3f}, {lk.ci[1]:+.3f}]",
            f"{lk.critical:.3f}",
            lk.decision,
        )
    console.print(table)
    console.print(escape(st.sentence()), highlight=False)


# ------------------------------------------------------------------------------------------- html

_W, _PAD = 240.0, 8.0


@dataclass(frozen=True)
class _Bar:
    """One Δ bar on a [−1, 1] axis mapped to [_PAD, _W − _PAD]; ``None`` fields when undefined."""

    zero: float
    x: float | None
    lo: float | None
    hi: float | None
    text: str
    sign: str


def _x(v: float, scale: float) -> float:
    half = (_W - 2 * _PAD) / 2
    return round(_PAD + half + half * max(-1.0, min(1.0, v / scale)), 2)


def _bar(d: Delta, scale: float) -> _Bar:
    sign = "none"
    if d.delta is not None:
        sign = "up" if d.delta > 0 else "down" if d.delta < 0 else "none"
    return _Bar(
        zero=_x(0.0, scale),
        x=None if d.delta is None else _x(d.delta, scale),
        lo=None if d.ci95 is None else _x(d.ci95[0], scale),
        hi=None if d.ci95 is None else _x(d.ci95[1], scale),
        text=fmt_delta(d),
        sign=sign,
    )


@functools.cache
def _env(html: bool) -> jinja2.Environment:
    env = template_env(html=html)
    env.filters["delta"] = fmt_delta
    env.filters["md"] = md_escape
    env.globals["title"] = _title
    return env


def _scale(r: DiffResult) -> float:
    """The bars' half-width in rate units: the largest |end| shown, at least 0.1, at most 1."""
    ends = [abs(v) for s in r.skills for d in (s.recall, s.precision) for v in (d.ci95 or ())]
    ends += [abs(v) for d in r.headline for v in (d.ci95 or ())]
    return min(1.0, max(0.1, *ends)) if ends else 1.0


def render_diff_html(r: DiffResult, *, top: int = 40) -> str:
    scale = _scale(r)
    skills = r.skills[:top]
    return (
        _env(True)
        .get_template("diff.html.j2")
        .render(
            r=r,
            verdict=_verdict_line(r),
            head=[(d, _bar(d, scale)) for d in r.headline],
            skills=[(s, _bar(s.recall, scale), _bar(s.precision, scale)) for s in skills],
            more_skills=max(0, len(r.skills) - top),
            scale=scale,
            width=_W,
            pad=_PAD,
        )
    )


def render_diff_markdown(r: DiffResult, *, top: int = 10) -> str:
    moved = [s for s in r.skills if s.won or s.lost or s.stolen or s.released]
    return (
        _env(False)
        .get_template("diff.md.j2")
        .render(r=r, verdict=_verdict_line(r), skills=moved[:top], more=max(0, len(moved) - top), top=top)
    )
