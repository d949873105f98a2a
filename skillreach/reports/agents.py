"""The cross-agent matrix (:class:`skillreach.author.agents.AgentMatrix`): a terminal table and an HTML page
(no script; every text escaped)."""

from __future__ import annotations

import html

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from skillreach.author.agents import AgentCell, AgentMatrix
from skillreach.reports.diff import fmt_delta
from skillreach.reports.markdown import md_escape

__all__ = ["print_agent_matrix", "render_agent_matrix_html", "render_agent_matrix_markdown"]


def _rate(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci is not None else "")


def _cell(c: AgentCell | None) -> tuple[str, str]:
    if c is None:
        return "—", "—"
    return _rate(c.activation, c.activation_ci), _rate(c.false_activation, c.false_activation_ci)


def print_agent_matrix(m: AgentMatrix, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="Skill routing across agents (activation | false activation, 95 % intervals)")
    table.add_column("skill")
    for agent in m.agents:
        table.add_column(f"{agent} act.", justify="right")
        table.add_column(f"{agent} false", justify="right")
    for skill in m.skills:
        row = [escape(skill)]
        for agent in m.agents:
            row += list(_cell(m.cells[skill].get(agent)))
        table.add_row(*row)
    console.print(table)
    if m.gaps:
        console.print("\n[bold]Routed significantly differently[/] (B − A, paired as `skillreach diff`):")
        for g in m.gaps:
            console.print(
                f"  {escape(g.skill)}: {escape(g.b)} − {escape(g.a)}  recall {fmt_delta(g.recall)}  "
                f"precision {fmt_delta(g.precision)}"
            )
    else:
        console.print("\nNo skill is routed significantly differently between the agents.")
    for agent in m.agents:
        mine = [c for c in m.collisions if c.agent == agent]
        if mine:
            top = ", ".join(f"{c.expected} → {c.predicted} × {c.count}" for c in mine)
            console.print(f"[bold]{escape(agent)}[/] collisions: {escape(top)}")
    for w in m.warnings:
        console.print(f"[yellow]{escape(w)}")


def render_agent_matrix_html(m: AgentMatrix) -> str:
    e = html.escape
    head = "".join(
        f'<th colspan="2">{e(a)}<br><small>{e(m.versions.get(a) or "")}</small></th>' for a in m.agents
    )
    sub = "".join("<th>activation</th><th>false activation</th>" for _ in m.agents)
    rows = []
    for skill in m.skills:
        cells = "".join(
            f"<td>{e(act)}</td><td>{e(false)}</td>"
            for act, false in (_cell(m.cells[skill].get(a)) for a in m.agents)
        )
        rows.append(f"<tr><th>{e(skill)}</th>{cells}</tr>")
    gaps = "".join(
        f"<tr><td>{e(g.skill)}</td><td>{e(g.b)} − {e(g.a)}</td><td>{e(fmt_delta(g.recall))}</td>"
        f"<td>{e(fmt_delta(g.precision))}</td></tr>"
        for g in m.gaps
    )
    gap_table = (
        "<table><tr><th>skill</th><th>agents (B − A)</th><th>Δ recall</th><th>Δ precision</th></tr>"
        f"{gaps}</table>"
        if m.gaps
        else "<p>No skill is routed significantly differently between the agents.</p>"
    )
    coll = "".join(
        f"<tr><td>{e(c.agent)}</td><td>{e(c.expected)}</td><td>{e(c.predicted)}</td><td>{c.count}</td></tr>"
        for c in m.collisions
    )
    warn = "".join(f"<p class=warn>{e(w)}</p>" for w in m.warnings)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>skillreach: one query set across agents</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:right}}
tr th:first-child,td:first-child{{text-align:left}}
.warn{{color:#a60}}
</style></head><body>
<h1>One query set across agents</h1>
<p>The same sealed query set and catalog, one study per agent. Activation: the skill's recall on its own
queries; false activation: the share of the other queries' probes routed to it (95 % intervals).</p>
<table><tr><th rowspan="2">skill</th>{head}</tr><tr>{sub}</tr>{"".join(rows)}</table>
<h2>Skills routed significantly differently</h2>
<p>Paired over the same queries, as <code>skillreach diff</code> computes them.</p>
{gap_table}
<h2>Collisions per agent</h2>
<table><tr><th>agent</th><th>expected</th><th>routed to</th><th>probes</th></tr>{coll}</table>
{warn}
</body></html>
"""


def render_agent_matrix_markdown(m: AgentMatrix) -> str:
    """The matrix for a pull request's description."""
    head = (
        "| skill | "
        + " | ".join(f"{md_escape(a)} activation | {md_escape(a)} false" for a in m.agents)
        + " |"
    )
    rule = "|---|" + "---:|---:|" * len(m.agents)
    rows = [
        f"| {md_escape(skill)} | "
        + " | ".join(" | ".join(_cell(m.cells[skill].get(a))) for a in m.agents)
        + " |"
        for skill in m.skills
    ]
    lines = ["### Skill routing across agents", "", head, rule, *rows, ""]
    if m.gaps:
        lines += ["**Routed significantly differently** (B − A, paired):", ""]
        lines += [
            f"- {md_escape(g.skill)}: {md_escape(g.b)} − {md_escape(g.a)}, recall {fmt_delta(g.recall)}, "
            f"precision {fmt_delta(g.precision)}"
            for g in m.gaps
        ]
    else:
        lines.append("No skill is routed significantly differently between the agents.")
    for agent in m.agents:
        mine = [c for c in m.collisions if c.agent == agent]
        if mine:
            top = ", ".join(f"{c.expected} → {c.predicted} × {c.count}" for c in mine)
            lines.append(f"\n{md_escape(agent)} collisions: {md_escape(top)}")
    return "\n".join(lines) + "\n"
