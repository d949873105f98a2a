"""``skillreach queries generate``: LLM query generation with provenance, as a Prefect flow.

The command is added to :data:`skillreach.cli.queries_cmds.queries_app`. Everything that can be
refused (no skills, unknown target or kind, a checkpoint of other inputs, no key) is checked before
Prefect starts, so bad input costs no wait and prints one line.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from skillreach._io.console import make_console
from skillreach.cli.queries_cmds import queries_app
from skillreach.errors import InputError

if TYPE_CHECKING:  # imported where used: the CLI starts without pydantic models or settings
    from skillreach.models import QueryKind
    from skillreach.settings import Settings

__all__ = ["generate_cmd", "register"]


def register(app: typer.Typer) -> None:
    """Nothing to add to the top level: ``generate`` lives on ``queries_app`` (registered below)."""


def _split(values: list[str] | None) -> list[str]:
    """Repeated options and comma-separated lists alike: ``--kinds a,b --kinds c``."""
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def _kinds(values: list[str] | None) -> tuple[QueryKind, ...]:
    from skillreach.models import QueryKind

    names = _split(values)
    if not names:
        return tuple(QueryKind)
    valid = [k.value for k in QueryKind]
    for name in names:
        if name not in valid:
            raise InputError(f"--kinds: unknown kind {name!r}; choose from {', '.join(valid)}")
    return tuple(QueryKind(n) for n in names)


@contextlib.contextmanager
def _quiet_prefect_console() -> Iterator[None]:
    """Keep Prefect's console lines out of the progress bar; its API log handler still gets them.

    Prefect sets up logging when it is imported: its console handler sits on the root logger.
    """
    import prefect  # noqa: F401  (logging is configured on import)
    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in ("prefect", "prefect.flow_runs"))]
    quieted = [(h, h.level) for lg in loggers for h in lg.handlers if isinstance(h, PrefectConsoleHandler)]
    for handler, _ in quieted:
        handler.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for handler, level in quieted:
            handler.setLevel(level)


@queries_app.command("generate")
def generate_cmd(
    *,
    skills: list[Path] = typer.Option(..., "--skills", help="Folder(s) of skills (repeatable)."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the sealed query set (.json)."),
    per_skill: int = typer.Option(
        4, "--per-skill", min=1, max=50, help="Drafts asked for per kind and target skill."
    ),
    kinds: list[str] | None = typer.Option(
        None,
        "--kinds",
        help="Kinds to generate (repeatable or comma-separated): implicit, contextual, "
        "neighbor_negative, out_of_scope. Default: all four.",
    ),
    model: str | None = typer.Option(None, "--model", help="Generator model (default claude-sonnet-5-5)."),
    temperature: float | None = typer.Option(
        None,
        "--temperature",
        min=0.0,
        max=1.0,
        help="Sent only when given (current Claude models refuse it); recorded in the provenance.",
    ),
    targets: list[str] | None = typer.Option(
        None, "--targets", help="Generate for these skills only (repeatable or comma-separated)."
    ),
    rivals: int = typer.Option(
        2, "--rivals", min=1, max=5, help="BM25 rivals shown per target for neighbor_negative queries."
    ),
    restart: bool = typer.Option(False, "--restart", help="Discard the checkpoint and generate afresh."),
    drop_leaks: bool = typer.Option(
        False, "--drop-leaks", help="Drop the queries the leak report flags (they are reported anyway)."
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", min=1, help="Targets in flight (default: the concurrency setting)."
    ),
    config: Path | None = typer.Option(None, "--config", help="A skillreach config file (TOML or YAML)."),
) -> None:
    """Generate labelled queries with an LLM from the skills' masked bodies (sealed, with provenance)."""
    from skillreach.queries.generation import DEFAULT_GENERATOR_MODEL, GenerationParams
    from skillreach.settings import load_settings
    from skillreach.tasks.generate import GenerateOptions, plan_generation

    settings = load_settings(config)
    params = GenerationParams(
        model=model or DEFAULT_GENERATOR_MODEL,
        temperature=temperature,
        per_skill=per_skill,
        kinds=_kinds(kinds),
        rivals=rivals,
    )
    options = GenerateOptions(
        skills=tuple(skills),
        out=out,
        params=params,
        targets=tuple(_split(targets)) or None,
        restart=restart,
        drop_leaks=drop_leaks,
        concurrency=concurrency or settings.concurrency,
        max_retries=settings.max_retries,
        timeout_s=settings.timeout_s,
    )
    # every refusal happens here, before Prefect starts
    plan = plan_generation(
        options, on_problem=lambda line: print(f"skillreach: warning: {line}", file=sys.stderr)
    )
    options = options.model_copy(update={"restart": False})
    _run(options, resumed=len(plan.finished), pending=len(plan.pending), settings=settings)


def _run(options: object, *, resumed: int, pending: int, settings: Settings) -> None:
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from skillreach.flows.generate_queries import generate_queries
    from skillreach.queries.generation import TargetResult
    from skillreach.runtimes.anthropic import cost_of
    from skillreach.tasks.generate import GenerateOptions

    assert isinstance(options, GenerateOptions)
    err = make_console(stderr=True)
    if resumed:
        err.print(f"resuming: {resumed} target(s) already in the checkpoint are not asked again")
    failures: list[str] = []
    with (
        Progress(
            TextColumn("[bold]generating[/bold] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        ) as progress,
        _quiet_prefect_console(),
    ):
        bar = progress.add_task("(starting Prefect)", total=pending)

        def on_target(result: TargetResult) -> None:
            if not result.ok:
                failures.append(result.target)
                progress.console.print(f"[yellow]failed[/yellow] {result.target}: {result.error}")
            progress.update(bar, advance=1, description=result.target)

        outcome = asyncio.run(
            generate_queries(
                options,
                on_plan=lambda plan: progress.update(bar, description="targets"),
                on_target=on_target,
            )
        )
    report = outcome.report
    kinds = ", ".join(f"{k} {n}" for k, n in report.kind_counts.items() if n)
    typer.echo(f"generated {outcome.queries} queries ({kinds}) → {outcome.out}")
    typer.echo(f"digest {outcome.digest}")
    typer.echo(
        f"generator {outcome.generator_model}; {report.requests} request(s) this run"
        + (f", {resumed} target(s) resumed from {outcome.checkpoint}" if resumed else "")
    )
    usage = report.usage
    cost = cost_of(usage, settings.price_for(outcome.generator_model))
    typer.echo(
        f"tokens: {usage.total_input} in, {usage.output_tokens} out"
        + (f" (≈ ${cost:.2f} at list price)" if cost is not None else "")
        + (" — resumed targets included" if resumed else "")
    )
    if report.dropped:
        typer.echo("dropped: " + ", ".join(f"{k} {n}" for k, n in report.dropped.items()))
    if report.leaks:
        flagged = len({e.query_id for e in report.leaks})
        action = "dropped" if report.leaks_dropped else "kept; --drop-leaks drops them"
        typer.echo(f"leaks: {flagged} queries name their skill or use its description's words ({action}):")
        for entry in report.leaks[:5]:
            typer.echo(f"  {entry.query_id} ({entry.skill}): {'; '.join(entry.reasons)}")
        if len(report.leaks) > 5:
            typer.echo(f"  … {len(report.leaks) - 5} more in the report")
    typer.echo(f"report {outcome.report_path}")
    failed = report.failures
    if failed:
        names = ", ".join(sorted(failed))
        print(
            f"skillreach: warning: {len(failed)} target(s) failed ({names}); run the same command "
            "again to retry them — finished targets are not asked again",
            file=sys.stderr,
        )
