"""The staged (group-sequential) mode of ``baseline compare`` and ``check --changed``: printing and exit."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillreach.baselines.gates import Comparison
    from skillreach.baselines.records import BaselineRecord
    from skillreach.baselines.sequential import StagedComparison
    from skillreach.settings import GateConfig

__all__ = [
    "staged_annotations",
    "staged_check_group",
    "staged_failure",
    "staged_outcome",
    "staged_payload",
]


def staged_payload(st: StagedComparison) -> dict[str, Any]:
    return {**st.model_dump(mode="json"), "probes_saved": st.probes_saved}


def staged_failure(skill: str, st: StagedComparison, *, strict: bool) -> Any:
    """The GateFailed to raise for a staged verdict (``None`` when it passes)."""
    from skillreach.baselines.gates import Verdict
    from skillreach.errors import GateFailed

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

    from skillreach.baselines.sequential import staged_from_records

    st = staged_from_records(base, new, gates.model_dump(), looks=looks)
    if as_json:
        payload = {**cmp.model_dump(mode="json"), "staged": staged_payload(st)}
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    else:
        from skillreach.reports.gates import print_comparison, print_staged

        console = Console(soft_wrap=True)
        console.print("[dim]fixed design, for reference (the staged verdict decides the exit code):[/]")
        print_comparison(cmp, console)
        print_staged(st, console, new.skill)
    failure = staged_failure(new.skill, st, strict=strict)
    if not as_json:
        code = 0 if failure is None else 1
        verdict = st.verdict.value if st.verdict is not None else "undecided"
        Console(soft_wrap=True).print(f"staged verdict: {verdict} → exit {code}")
    if failure is not None:
        raise failure


# ------------------------------------------------------------------------------------ check --staged


def staged_check_group(
    cfg: Any,
    members: Sequence[tuple[str, BaselineRecord]],
    queries: Path,
    gates: GateConfig,
    *,
    looks: int,
    strict: bool,
    folder_of: Callable[[str], Path | None],
    console: Any,
    quiet: bool,
    in_process: bool = True,
    screen: list[str] | None = None,
) -> list[tuple[str, dict[str, Any], StagedComparison]]:
    """``check --changed --staged`` for one group of skills sharing a study: per skill its result entry
    (status = the staged verdict, the fixed comparison of what was probed for reference, the staged
    looks and the probes saved) and its staged result. ``screen``: the cases most at risk, probed
    first (:func:`~skillreach.baselines.scope.screen_cases`)."""
    import asyncio

    from skillreach.baselines.gates import Verdict, compare
    from skillreach.baselines.scope import losses
    from skillreach.cli._check_output import victim_line
    from skillreach.errors import RefusedError
    from skillreach.flows.staged import staged_check
    from skillreach.reports.gates import print_staged
    from skillreach.scoring.artifact import read_artifact
    from skillreach.study.grading import GRADED_FILE

    out = cfg.out or Path(".skillreach") / "check"
    cfg = cfg.model_copy(update={"out": out, "judge_model": members[0][1].judge_model or cfg.judge_model})
    for stale in ("probes.jsonl", GRADED_FILE):  # a check probes afresh
        (out / stale).unlink(missing_ok=True)
    folders = {name: (str(f) if (f := folder_of(name)) is not None else None) for name, _ in members}
    from skillreach.cli.run_cmds import prefect_server_up

    # a tracked flow run when a Prefect server answers (and --in-process is off); else the flow's body
    run = staged_check if not in_process and prefect_server_up() is not None else staged_check.fn
    result = asyncio.run(
        run(
            cfg, list(members), queries, folders=folders, gates=gates.model_dump(), looks=looks, screen=screen
        )
    )
    outcome, probed, planned = result.outcomes, result.probes_run, result.probes_planned
    read: list[Any] = []

    def outcomes() -> list[Any]:
        """The probes the stages ran (who took each lost case), read once when a skill did not pass."""
        if not read:
            art = out / "artifact.json"
            read.append(list(read_artifact(art).outcomes) if art.is_file() else [])
        return list(read[0])

    console.print(
        f"staged: probed {probed} of {planned} planned probes ({planned - probed} saved) "
        f"for {', '.join(n for n, _ in members)}"
    )
    entries: list[tuple[str, dict[str, Any], StagedComparison]] = []
    for name, rec in members:
        new, st = outcome[name]
        try:
            cmp = compare(rec, new, gates, strict)
        except RefusedError as exc:
            if st.verdict is Verdict.ok and st.screen and not any(
                o.role == "positive" for o in new.per_case.values()
            ):  # decided by a quiet screen before any case of its own was probed: nothing to compare
                msg = f"ok: none of its cases at risk; the screen ({st.screen} cases at risk) was quiet"
                entries.append((name, {"skill": name, "status": "ok", "message": msg,
                                       "staged": staged_payload(st)}, st))
                continue
            entries.append((name, {"skill": name, "status": "refused", "message": exc.message}, st))
            continue
        if not quiet:
            print_staged(st, console, name)
        status = st.verdict.value if st.verdict is not None else "inconclusive"
        victim = victim_line(name, cmp, losses(rec, new, outcomes())) if status != "ok" else None
        entries.append(
            (
                name,
                {
                    "skill": name,
                    "status": status,
                    "comparison": cmp.model_dump(mode="json"),
                    "staged": staged_payload(st),
                }
                | ({"victim": victim} if victim else {}),
                st,
            )
        )
    return entries


def staged_annotations(name: str, st: StagedComparison, *, strict: bool) -> list[tuple[str, str, str]]:
    """(level, title, message) of every staged metric that breached, or was inconclusive."""
    out = []
    for m in st.metrics:
        if m.verdict is None or m.verdict.value not in ("breach", "inconclusive") or not m.looks:
            continue
        last = m.looks[-1]
        level = "error" if m.verdict.value == "breach" or strict else "warning"
        msg = (
            f"{name}: {m.metric} (staged) {m.verdict.value} at look {last.look} of {st.looks_planned}: "
            f"Δ {last.mean_diff:+.3f}, repeated 95% CI [{last.ci[0]:+.3f}, {last.ci[1]:+.3f}], gate "
            f"{m.gate:+.2f}, {last.cases} cases; {st.probes_saved} probes saved"
        )
        out.append((level, f"skillreach gate: {m.verdict.value}", msg))
    return out
