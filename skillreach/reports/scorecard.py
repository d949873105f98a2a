"""The terminal scorecard (rich): rates as ``0.800 [0.376, 0.964]``."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skillreach._console import make_console
from skillreach.artifacts import Artifact
from skillreach.reports._format import fmt_num, fmt_rate
from skillreach.reports._view import class_rows, headlines

__all__ = ["print_scorecard"]


def print_scorecard(artifact: Artifact, console: Console | None = None, *, top: int = 5) -> None:
    """Headline figures, the weakest skills, the top collisions and the error count."""
    console = console or make_console()
    a = artifact
    model = a.runtime.resolved_model or a.runtime.model
    title = f"skillreach · {escape(a.catalog.id)} · {escape(a.runtime.name or 'runtime')}"
    if model:
        title += f" · {escape(model)}"
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("metric")
    table.add_column("value [95% CI]", no_wrap=True)
    table.add_column("n", justify="right")
    for h in headlines(a):
        style = "dim" if h.value is None else ""
        table.add_row(h.name, h.text, "" if h.n is None else str(h.n), style=style)
    console.print(table)
    counts = (
        f"{a.counts.scored} of {a.counts.probes} probes scored, {a.counts.queries} queries × {a.attempts} "
        f"attempt{'s' if a.attempts != 1 else ''}"
    )
    if a.counts.errors:
        counts += f"; [bold red]{a.counts.errors} errored[/] (in no rate)"
    if a.counts.missing:
        counts += f"; {a.counts.missing} missing"
    if a.usage.cost_usd is not None:
        counts += f"; cost ${a.usage.cost_usd:.4f}"
    console.print(counts)

    active, _ = class_rows(a)
    weakest = [c for c in active if c.support][:top]
    if weakest:
        t = Table(title="weakest skills", title_justify="left", show_edge=False, pad_edge=False)
        for name, justify in (("skill", "left"), ("recall", "left"), ("precision", "left"), ("f1", "right")):
            t.add_column(name, justify=justify, no_wrap=name != "skill")  # type: ignore[arg-type]
        t.add_column("fp", justify="right")
        for c in weakest:
            t.add_row(
                escape(c.label),
                fmt_rate(c.recall, c.recall_ci),
                fmt_rate(c.precision, c.precision_ci),
                fmt_num(c.f1),
                str(c.fp),
            )
        console.print(t)
    for col in a.collisions[:top]:
        sample = f" — e.g. {escape(col.samples[0].query_id)}" if col.samples else ""
        console.print(
            f"collision: {escape(col.expected)} → [bold]{escape(col.predicted)}[/] × {col.count}{sample}"
        )
    for w in a.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
