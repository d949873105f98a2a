"""A gate's comparison in the terminal: the per-metric table of a fixed comparison and the looks of a
staged one (``baseline compare``, ``check --changed``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from skillreach.baselines.gates import Comparison
    from skillreach.baselines.sequential import StagedComparison

__all__ = ["fmt_value", "print_comparison", "print_staged"]


def fmt_value(v: float | None, signed: bool = False) -> str:
    """``0.800`` (``+0.125`` signed); ``–`` for a missing value."""
    if v is None:
        return "–"
    return f"{v:+.3f}" if signed else f"{v:.3f}"


def print_comparison(cmp: Comparison, console: Console) -> None:
    from rich.table import Table

    colours = {"ok": "green", "inconclusive": "yellow", "breach": "bold red", "n/a": "dim"}
    table = Table(title=f"{cmp.skill}: {cmp.base_id} → {cmp.new_id}", title_justify="left")
    for col, just in (
        ("metric", "left"),
        ("cohort", "left"),
        ("gate", "right"),
        ("baseline", "right"),
        ("new", "right"),
        ("Δ paired", "right"),
        ("95% CI", "right"),
        ("k", "right"),
        ("verdict", "left"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in cmp.results:
        ci = f"[{r.ci95[0]:+.3f}, {r.ci95[1]:+.3f}]" if r.ci95 else "–"
        colour = colours[r.verdict.value]
        table.add_row(
            r.metric,
            r.cohort,
            f"{r.gate:+.2f}",
            fmt_value(r.base),
            fmt_value(r.new),
            fmt_value(r.mean_diff, signed=True),
            ci,
            str(r.k),
            f"[{colour}]{r.verdict.value}[/]",
        )
    console.print(table)
    for r in cmp.results:
        if r.note:
            console.print(f"  {r.metric} ({r.cohort}): {r.note}")
    comp = cmp.cohorts.get("compliance", {})
    old, new = comp.get("baseline_cases"), comp.get("new_cases")
    if new is not None:
        console.print(
            "  compliance by cohort (new record): baseline cases "
            + (f"{old['value']:.3f} ({old['cases']} cases)" if old else "–")
            + f", new cases {new['value']:.3f} ({new['cases']} cases, 95% CI "
            f"[{new['ci95'][0]:.3f}, {new['ci95'][1]:.3f}])"
        )
    for w in cmp.warnings:
        console.print(f"  [yellow]warning:[/] {w}")
    colour = colours[cmp.verdict.value]
    tail = " (fails under --strict)" if cmp.verdict.value == "inconclusive" and not cmp.strict else ""
    console.print(f"verdict: [{colour}]{cmp.verdict.value}[/]{tail} → exit {cmp.exit_code}")


def print_staged(st: StagedComparison, console: Any, skill: str | None = None) -> None:
    """The staged looks as a table titled with the skill they gate (a check prints one per skill)."""
    from rich.table import Table

    who = f"{skill}: " if skill else ""
    table = Table(title=f"{who}staged gate ({st.looks_planned} planned looks, O'Brien–Fleming α-spending)")
    for col in ("metric", "look", "cases", "gate", "Δ", "repeated 95% CI", "critical t", "decision"):
        table.add_column(col)
    for m in st.metrics:
        for lk in m.looks:
            table.add_row(
                m.metric,
                str(lk.look),
                str(lk.cases),
                f"{m.gate:+.2f}",
                f"{lk.mean_diff:+.3f}",
                f"[{lk.ci[0]:+.3f}, {lk.ci[1]:+.3f}]",
                f"{lk.critical:.3f}",
                lk.decision,
            )
    console.print(table)
    console.print(f"{who}{st.sentence()}")
