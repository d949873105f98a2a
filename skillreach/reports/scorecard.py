"""The terminal scorecard (rich): rates as ``0.800 [0.376, 0.964]``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skillreach._io.console import make_console
from skillreach.reports._format import fmt_num, fmt_rate
from skillreach.reports._view import (
    COHORT_TITLES,
    GateView,
    class_rows,
    gate_view,
    headlines,
    judge_name,
    offline_note,
    quality_rows,
)
from skillreach.scoring.artifact import Artifact

__all__ = ["print_scorecard"]


def print_scorecard(
    artifact: Artifact,
    console: Console | None = None,
    *,
    top: int = 5,
    gate: Sequence[Any] | None = None,
    not_compared: Sequence[str] = (),
    uplift: Sequence[Any] = (),
) -> None:
    """Headline figures, the weakest skills, compliance and task quality per skill, the skills' uplift
    (``uplift``: their uplift reports), the gate report (when ``gate`` is given), the top collisions and
    the error count."""
    console = console or make_console()
    gates = gate_view(gate, not_compared)
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
    note = offline_note(a)
    if note:
        console.print(f"[yellow]note:[/] {escape(note)}")
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
    _print_quality(a, gates, console)
    for u in uplift:
        misses = ", ".join(f"{k} {n}" for k, n in u.misses.items())
        v = u.uplift
        value = "–" if v is None else f"{v.value:+.3f} [{v.ci95[0]:+.3f}, {v.ci95[1]:+.3f}]"
        value += "" if v is None else f" over {v.cases} cases"
        console.print(f"uplift of {escape(u.skill)}: {value}; routing misses: {misses}", highlight=False)
    if gates is not None:
        _print_gates(gates, console)
    for col in a.collisions[:top]:
        sample = f" — e.g. {escape(col.samples[0].query_id)}" if col.samples else ""
        console.print(
            f"collision: {escape(col.expected)} → [bold]{escape(col.predicted)}[/] × {col.count}{sample}"
        )
    for w in a.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")


def _mv(mv: Any) -> tuple[str, str]:
    if mv is None:
        return "n/a", ""
    return fmt_rate(mv.value, mv.ci95), f"{mv.n}/{mv.cases}"


def _print_quality(a: Artifact, gates: GateView | None, console: Console) -> None:
    rows = quality_rows(a, gates)
    if not rows:
        console.print(f"judge: {escape(judge_name(a))}; no probe judged on compliance or task quality")
        return
    t = Table(
        title=f"compliance and task quality (95% clustered CI) · judge {escape(judge_name(a))}",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    t.add_column("skill")
    t.add_column("compliance", no_wrap=True)
    t.add_column("n/cases", justify="right")
    t.add_column("task quality", no_wrap=True)
    t.add_column("n/cases", justify="right")
    for q in rows:
        t.add_row(escape(q.skill), *_mv(q.compliance), *_mv(q.task_quality))
        for cohort in ("baseline_cases", "new_cases") if q.cohorts else ():
            c = (q.cohorts.get("compliance") or {}).get(cohort)
            tq = (q.cohorts.get("task_quality") or {}).get(cohort)
            t.add_row(f"  {COHORT_TITLES[cohort]}", *_mv(c), *_mv(tq), style="dim")
    console.print(t)


def _signed(x: float | None) -> str:
    return "–" if x is None else f"{x:+.3f}"


def _print_gates(gates: GateView, console: Console) -> None:
    """The breached and inconclusive gates (the rest counted), power advice, skills not compared."""
    plural = "es" if gates.breaches != 1 else ""
    shown = [r for r in gates.rows if r.verdict in ("breach", "inconclusive")]
    ok = sum(1 for r in gates.rows if r.verdict == "ok")
    console.print(
        f"gate report: {gates.breaches} breach{plural} over {gates.gated} gated metrics "
        f"({ok} ok, {len(gates.rows) - gates.gated} with nothing to compare)",
        highlight=False,
    )
    if shown:
        t = Table(show_edge=False, pad_edge=False)
        for name in ("skill", "metric", "cases", "Δ [95% CI]", "gate", "verdict"):
            t.add_column(name, no_wrap=name != "skill")
        for r in shown:
            ci = f" [{_signed(r.ci[0])}, {_signed(r.ci[1])}]" if r.ci is not None else ""
            t.add_row(
                escape(r.skill),
                r.metric,
                r.cohort,
                _signed(r.delta) + ci,
                "" if r.gate is None else f"{r.gate:+.2f}",
                r.verdict,
                style="bold red" if r.verdict == "breach" else "yellow",
            )
        console.print(t)
    for r in shown:
        if r.note:
            console.print(f"  {escape(r.skill)} {r.metric}: {escape(r.note)}", highlight=False)
    for s in gates.not_compared:
        console.print(f"  not compared: {escape(s)}", highlight=False)
