"""The staged (group-sequential) mode of ``baseline compare`` and ``check --changed``: printing and exit."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillreach.baselines import BaselineRecord
    from skillreach.gates import Comparison
    from skillreach.sequential import StagedComparison
    from skillreach.settings import GateConfig

__all__ = ["staged_failure", "staged_outcome", "staged_payload"]


def staged_payload(st: StagedComparison) -> dict[str, Any]:
    return {**st.model_dump(mode="json"), "probes_saved": st.probes_saved}


def staged_failure(skill: str, st: StagedComparison, *, strict: bool) -> Any:
    """The GateFailed to raise for a staged verdict (``None`` when it passes)."""
    from skillreach.gates import GateFailed, Verdict

    if st.verdict is Verdict.breach or (strict and st.verdict is Verdict.inconclusive):
        bad = [m for m in st.metrics if m.verdict is st.verdict]
        parts = []
        for m in bad:
            last = m.looks[-1]
            parts.append(
                f"{m.metric} {st.verdict.value} at look {last.look} "
                f"(Δ {last.mean_diff:+.3f}, gate {m.gate:+.2f})"
            )
        return GateFailed(f"{skill}: staged gate failed: " + "; ".join(parts))
    return None


def print_staged(st: StagedComparison, console: Any) -> None:
    from rich.table import Table

    table = Table(title=f"staged gate ({st.looks_planned} planned looks, O'Brien–Fleming α-spending)")
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
    console.print(st.sentence())


def staged_outcome(
    base: BaselineRecord,
    new: BaselineRecord,
    gates: GateConfig,
    cmp: Comparison,
    *,
    strict: bool,
    looks: int,
    as_json: bool,
) -> None:
    """Replay the staged design over two records; print it beside the fixed comparison; raise on failure."""
    from rich.console import Console

    from skillreach.sequential import staged_from_records

    st = staged_from_records(base, new, gates.model_dump(), looks=looks)
    if as_json:
        payload = {**cmp.model_dump(mode="json"), "staged": staged_payload(st)}
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    else:
        from skillreach.cli.baseline_cmds import print_comparison

        console = Console(soft_wrap=True)
        console.print("[dim]fixed design, for reference (the staged verdict decides the exit code):[/]")
        print_comparison(cmp, console)
        print_staged(st, console)
    failure = staged_failure(new.skill, st, strict=strict)
    if not as_json:
        code = 0 if failure is None else 1
        verdict = st.verdict.value if st.verdict is not None else "undecided"
        Console(soft_wrap=True).print(f"staged verdict: {verdict} → exit {code}")
    if failure is not None:
        raise failure
