"""``skillreach optimize SKILL`` and ``skillreach uplift SKILL``.

- ``optimize``: rounds of candidate descriptions (LLM + heuristics, static filter) probed on a seeded
  train split; the winner must beat the current description on the hold-out split with a paired test,
  neighbours not worse, or nothing changes (:mod:`skillreach.author.optimize`). ``--apply`` rewrites the
  frontmatter description atomically; ``--format diff`` prints a unified diff. Exit 0 when a winner
  passed the hold-out test, 1 when nothing is better (nothing changed), 2 on bad input.
- ``uplift``: task quality of the skill's cases with and without the skill in the catalog, paired per
  case; each routing miss classified *didn't need it*, *wrongly skipped* or *unclear*
  (:mod:`skillreach.author.uplift`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from skillreach.author.optimize import OptimizeResult

__all__ = ["register"]


def _run(coro: Any) -> Any:
    import asyncio  # here, not at the top: the CLI starts without it

    return asyncio.run(coro)


def _fmt_delta(d: Any) -> str:
    if d is None:
        return "–"
    return f"{d.mean:+.3f} [{d.ci95[0]:+.3f}, {d.ci95[1]:+.3f}] (k={d.k})"


def _print_result(result: OptimizeResult, console: Any) -> None:
    from rich.table import Table

    console.print(
        f"optimize {result.skill}: {len(result.split.train)} train / {len(result.split.holdout)} hold-out "
        f"queries; {result.probes} probes, ${result.spent_usd:.2f} spent"
    )
    for r in result.rounds:
        table = Table(title=f"round {r.round}", show_lines=False)
        for col in (
            "origin",
            "score",
            "Δ recall",
            "Δ false activation",
            "Δ neighbours' recall",
            "description",
        ):
            table.add_column(col)
        for c in r.candidates:
            table.add_row(
                c.origin,
                f"{c.score:+.3f}",
                _fmt_delta(c.deltas.get("recall")),
                _fmt_delta(c.deltas.get("false_activation")),
                _fmt_delta(c.deltas.get("rival_recall")),
                c.description,
            )
        console.print(table)
        for text, why in r.refused:
            console.print(f"  [yellow]filtered before probing:[/] {text!r}: {'; '.join(why)}")
    if result.winner is None:
        console.print("no candidate beat the current description on the train split: nothing changed")
        return
    console.print(f"train winner ({result.winner.origin}): {result.winner.description}")
    decision = result.decision
    assert decision is not None
    d = decision.deltas
    console.print(
        f"hold-out: Δ recall {_fmt_delta(d.get('recall'))}; Δ false activation "
        f"{_fmt_delta(d.get('false_activation'))}; Δ neighbours' recall {_fmt_delta(d.get('rival_recall'))}"
    )
    if decision.accepted:
        console.print("[green]the winner beats the current description on the hold-out split[/]")
    else:
        for reason in decision.reasons:
            console.print(f"[yellow]refused:[/] {reason}")
        console.print("nothing changed")


def _generate_queries(skill: str, dirs: list[Path], out: Path, model: str) -> None:
    """The generation flow (as ``skillreach queries generate --targets SKILL``), in process."""
    from skillreach.flows.generate_queries import drive
    from skillreach.queries.generation import GenerationParams
    from skillreach.tasks.generate import (
        GenerateOptions,
        finish_generation,
        generate_target,
        plan_generation,
        prepare_generation,
    )

    out.parent.mkdir(parents=True, exist_ok=True)
    options = GenerateOptions(
        skills=tuple(dirs), out=out, params=GenerationParams(model=model), targets=(skill,)
    )
    plan_generation(options, on_problem=lambda line: print(f"skillreach: warning: {line}", file=sys.stderr))
    outcome = _run(
        drive(
            options, prepare=prepare_generation.fn, generate=generate_target.fn, finish=finish_generation.fn
        )
    )
    print(
        f"generated {outcome.queries} queries for {skill} → {outcome.out} ({outcome.digest})", file=sys.stderr
    )


def optimize_cmd(  # noqa: PLR0917 - a typer command: one parameter per option
    skill: str = typer.Argument(..., metavar="SKILL", help="The skill whose description to improve."),
    skills: list[Path] = typer.Option([], "--skills", help="Folder(s) of skills (default: ./skills)."),
    queries: Path | None = typer.Option(
        None, "--queries", help="The sealed query set to optimise on (with --generate: where to write it)."
    ),
    generate: bool = typer.Option(
        False,
        "--generate",
        help="Generate the queries for SKILL with --llm-model (the generation flow, provenance kept) "
        "when the --queries file does not exist yet (default file: .skillreach/optimize/SKILL.queries.json).",
    ),
    config: Path | None = typer.Option(None, "--config", help="Study/settings file (runtime, options)."),
    runtime: str | None = typer.Option(None, "--runtime", help="The runtime that probes."),
    model: str | None = typer.Option(None, "--model", help="The model the runtime probes."),
    attempts: int | None = typer.Option(None, "--attempts", min=1, help="Runs per query."),
    rounds: int = typer.Option(2, "--rounds", min=1, help="Hill-climbing rounds."),
    seed: int = typer.Option(0, "--seed", help="Seed of the train / hold-out split."),
    holdout: float = typer.Option(0.2, "--holdout", help="Share of queries held out (stratified by kind)."),
    max_chars: int | None = typer.Option(
        None, "--max-chars", min=20, help="Length budget (default: the current length + 20 %)."
    ),
    llm_model: str | None = typer.Option(
        None, "--llm-model", help="Model proposing candidates (anthropic; default: heuristics only)."
    ),
    llm_candidates: int = typer.Option(3, "--llm-candidates", min=1, help="LLM candidates per round."),
    max_cost: float | None = typer.Option(
        None, "--max-cost", help="Refuse to start above this estimate (USD)."
    ),
    apply: bool = typer.Option(False, "--apply", help="Rewrite the description of SKILL.md (atomically)."),
    output: str = typer.Option("text", "--format", help="text, json or diff."),
) -> None:
    """Improve a description with evidence: the winner must beat the current one on held-out queries."""
    from skillreach._io.console import make_console
    from skillreach.author.optimize import rewrite_description, unified_diff
    from skillreach.errors import InputError
    from skillreach.study import StudyConfig

    if output not in ("text", "json", "diff"):
        raise InputError(f"--format {output!r}: expected text, json or diff")
    if not 0 < holdout < 1:
        raise InputError(f"--holdout {holdout}: must lie strictly between 0 and 1")
    dirs = list(skills) or [Path("skills")]
    for d in dirs:
        if not d.is_dir():
            raise InputError(f"{d}: no such folder of skills; pass --skills DIR")
    if queries is None:
        if not generate:
            raise InputError("optimize needs queries: pass --queries FILE, or --generate --llm-model M")
        queries = Path(".skillreach") / "optimize" / f"{skill}.queries.json"
    if generate and not queries.exists():
        if llm_model is None:
            raise InputError("--generate needs --llm-model (the model that writes the queries)")
        _generate_queries(skill, dirs, queries, llm_model)
    from skillreach.flows.optimize import optimize_description
    from skillreach.tasks.optimize import OptimizeOptions, prepare_optimize

    study = StudyConfig.build(
        config,
        skills=tuple(dirs),
        queries=queries,
        runtime=runtime,
        model=model,
        attempts=attempts,
        gate=False,
    )
    gates = study.gates  # config file > environment > defaults, resolved once
    opts = OptimizeOptions(
        skill=skill,
        study=study,
        rounds=rounds,
        seed=seed,
        holdout=holdout,
        max_chars=max_chars,
        llm_model=llm_model,
        llm_candidates=llm_candidates,
        max_cost=max_cost,
        gate_activation=gates.activation,
        gate_false_activation=gates.false_activation,
    )
    console = make_console(stderr=output != "text", soft_wrap=True)
    prep = _run(prepare_optimize.fn(opts))  # the estimate before any probe (refused over --max-cost)
    est = f"about ${prep.estimate_usd:.2f}" if prep.estimate_usd is not None else "no paid probes"
    console.print(f"optimize {skill}: up to {prep.probes_planned} probes, {est}")
    result = _run(optimize_description.fn(opts))
    winner = result.winner.description if result.winner is not None else None
    changed = ""
    if result.accepted and winner is not None:
        old, new = rewrite_description(result.path, winner, write=apply)
        changed = unified_diff(result.path, old, new)
    if output == "json":
        payload = {
            **result.model_dump(mode="json"),
            "accepted": result.accepted,
            "applied": apply and bool(changed),
        }
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    elif output == "diff":
        _print_result(result, console)
        sys.stdout.write(changed)
    else:
        _print_result(result, console)
    if apply and changed:
        console.print(f"applied: {result.path} (the description line alone)")
    if not result.accepted:
        raise typer.Exit(1)


def uplift_cmd(  # noqa: PLR0917 - a typer command
    skill: str = typer.Argument(..., metavar="SKILL", help="The skill whose uplift to measure."),
    skills: list[Path] = typer.Option([], "--skills", help="Folder(s) of skills (default: ./skills)."),
    queries: Path = typer.Option(..., "--queries", help="The sealed query set (cases with quality checks)."),
    config: Path | None = typer.Option(None, "--config", help="Study/settings file (runtime, options)."),
    runtime: str | None = typer.Option(None, "--runtime", help="The runtime that probes."),
    model: str | None = typer.Option(None, "--model", help="The model the runtime probes."),
    attempts: int | None = typer.Option(None, "--attempts", min=1, help="Runs per case and arm."),
    margin: float = typer.Option(0.1, "--margin", help="Quality drop that counts as 'wrongly skipped'."),
    as_json: bool = typer.Option(False, "--json", help="The report as JSON on stdout alone."),
) -> None:
    """Task quality with and without the skill, paired per case; classify the routing misses."""
    from rich.table import Table

    from skillreach._io.console import make_console
    from skillreach.errors import InputError
    from skillreach.flows.uplift import uplift
    from skillreach.study import StudyConfig

    dirs = list(skills) or [Path("skills")]
    for d in dirs:
        if not d.is_dir():
            raise InputError(f"{d}: no such folder of skills; pass --skills DIR")
    if not 0 <= margin < 1:
        raise InputError(f"--margin {margin}: must lie in [0, 1)")
    study = StudyConfig.build(
        config,
        skills=tuple(dirs),
        queries=queries,
        runtime=runtime,
        model=model,
        attempts=attempts,
        gate=False,
    )
    inner = (study.runtime_options or {}).get("inner", "keyword") if study.runtime == "retriever" else None
    if study.runtime == "keyword" or inner == "keyword":
        raise InputError(
            f"uplift: runtime {study.runtime} cannot produce task quality (an offline lexical baseline "
            "picks a skill but does no work); pass --runtime with an agent runtime (anthropic, "
            "claude-code, …; skillreach doctor lists them)"
        )
    report = _run(uplift.fn(study, skill, margin))
    if report.cases and all(c.quality_with is None and c.quality_without is None for c in report.cases):
        raise InputError(
            f"uplift: runtime {study.runtime} produced no task quality for any of {skill}'s "
            f"{len(report.cases)} cases (it cannot grade the work after loading a skill); use an agent "
            "runtime that can"
        )
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
        return
    console = make_console(soft_wrap=True)
    table = Table(title=f"uplift of {skill}: quality with vs without it in the catalog")
    for col in ("case", "activated", "quality with", "quality without", "uplift", "miss"):
        table.add_column(col)

    def f(v: float | None) -> str:
        return "–" if v is None else f"{v:.3f}"

    for c in report.cases:
        table.add_row(
            c.case,
            f"{c.activated}/{c.probes_with}",
            f(c.quality_with),
            f(c.quality_without),
            "–" if c.uplift is None else f"{c.uplift:+.3f}",
            c.miss or "",
        )
    console.print(table)
    u = report.uplift
    if u is None:
        console.print("uplift: – (no case has quality both with the skill activated and without it)")
    else:
        console.print(
            f"uplift: {u.value:+.3f}, 95% CI [{u.ci95[0]:+.3f}, {u.ci95[1]:+.3f}] over {u.cases} cases"
        )
    console.print("routing misses: " + ", ".join(f"{k} {v}" for k, v in report.misses.items()))


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize_cmd)
    app.command("uplift")(uplift_cmd)
