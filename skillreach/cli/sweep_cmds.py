"""``skillreach sweep``: how many skills can this agent hold before routing breaks?

Runs the ``sweep`` flow (``flows/sweep.py``): one study per catalog size, each in its own folder
``OUT/n-XXXX`` (a re-run resumes every size), then the knee, the SLA sizes and the capacity curve
(``OUT/report.html``, ``OUT/sweep.json``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

__all__ = ["parse_sizes", "register", "run_sweep"]


def parse_sizes(text: str) -> tuple[int, ...]:
    from skillreach.errors import InputError

    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"--sizes {text}: give comma-separated whole numbers, e.g. 5,10,20,50") from None
    if not sizes or min(sizes) < 1:
        raise InputError(f"--sizes {text}: give comma-separated sizes of at least 1")
    return tuple(sorted(set(sizes)))


def run_sweep(config: Any, use_prefect: bool | None = None) -> Any:
    import asyncio  # here, not at the top: the CLI starts without it

    from skillreach.cli.run_cmds import prefect_server_up
    from skillreach.flows.sweep import sweep

    if use_prefect is None:
        use_prefect = prefect_server_up() is not None
    return asyncio.run(sweep(config) if use_prefect else sweep.fn(config))


def sweep_cmd(  # noqa: PLR0917 - typer passes options positionally
    skills: list[Path] = typer.Option([], "--skills", metavar="DIR", help="The corpus (repeatable)."),
    queries: Path | None = typer.Option(None, "--queries", metavar="FILE", help="The query set."),
    config: Path | None = typer.Option(None, "--config", metavar="FILE", help="Settings and study file."),
    design: str = typer.Option(
        "corpus",
        "--design",
        metavar="DESIGN",
        help="corpus: fixed anchor skills + a seeded sample of the whole corpus, so the mix of near and far "
        "rivals is the same at every size and the curve measures scale alone; target: one skill's "
        "neighbourhood (it and its --k nearest rivals) grown with seeded filler, dense at small sizes — "
        "the worst case of one skill, scale mixed with density.",
    ),
    target: str | None = typer.Option(None, "--target", metavar="NAME", help="The skill of --design target."),
    anchor: list[str] = typer.Option([], "--anchor", metavar="NAME", help="An anchor skill (repeatable)."),
    anchors: int = typer.Option(
        5, "--anchors", min=1, metavar="N", help="Without --anchor: N seeded anchors among queried skills."
    ),
    k: int = typer.Option(
        4, "--k", min=0, metavar="K", help="Rivals kept with the target (--design target)."
    ),
    sizes: str | None = typer.Option(
        None, "--sizes", metavar="N,N,...", help="Catalog sizes, e.g. 5,10,20,50."
    ),
    max_size: int | None = typer.Option(None, "--max", metavar="N", help="Largest size (with --points)."),
    points: int = typer.Option(6, "--points", min=2, metavar="K", help="Log-spaced sizes from 5 to --max."),
    runtime: str | None = typer.Option(
        None, "--runtime", metavar="NAME", help="The runtime (default keyword)."
    ),
    model: str | None = typer.Option(None, "--model", metavar="M", help="Model for LLM runtimes."),
    attempts: int | None = typer.Option(None, "--attempts", min=1, metavar="N", help="Attempts per query."),
    concurrency: int | None = typer.Option(
        None, "--concurrency", min=1, metavar="N", help="Probes in flight."
    ),
    seed: int = typer.Option(0, "--seed", metavar="N", help="Seed of anchors, filler and bootstrap."),
    metric: str = typer.Option(
        "f1",
        "--metric",
        metavar="NAME",
        help="What the knee, SLA sizes and early stop read: f1 (macro F1 of the study) or pass_rate "
        "(top-1 accuracy).",
    ),
    no_early_stop: bool = typer.Option(
        False, "--no-early-stop", help="Run every size (default: stop once the metric's upper bound < 0.80)."
    ),
    out: Path | None = typer.Option(
        None, "--out", metavar="DIR", help="Sweep folder (default runs/<time>-sweep)."
    ),
    as_json: bool = typer.Option(False, "--json", help="The result as JSON on stdout alone."),
) -> None:
    """A capacity sweep: one study per catalog size; per size pass rate, recall, precision, F1,
    abstention and prompt tokens with intervals; the knee (Kneedle on log size, above the noise floor),
    the largest sizes keeping F1 ≥ 0.90 and ≥ 0.85, and the capacity curve in OUT/report.html."""
    from rich.console import Console

    from skillreach.author.sweep import DESIGNS, METRICS, SweepConfig, log_sizes
    from skillreach.errors import InputError
    from skillreach.study import StudyConfig, default_out_dir

    if metric not in METRICS:
        raise InputError(f"--metric {metric}: use f1 or pass_rate")
    if design not in DESIGNS:
        raise InputError(f"--design {design}: use corpus or target")
    if design == "target" and target is None:
        raise InputError("--design target needs --target NAME")
    if not skills or queries is None:
        raise InputError("a sweep needs --skills DIR (the corpus) and --queries FILE")
    for path in (*skills, queries):
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
    if sizes is not None and max_size is not None:
        raise InputError("give --sizes or --max (with --points), not both")
    chosen = parse_sizes(sizes) if sizes is not None else tuple(log_sizes(max_size or 200, points))
    base = StudyConfig.build(
        config,
        skills=tuple(skills),
        queries=queries,
        runtime=runtime,
        model=model,
        attempts=attempts,
        concurrency=concurrency,
    )
    folder = out or default_out_dir(base, kind="sweep")
    cfg = SweepConfig(
        study=base,
        out=folder,
        sizes=chosen,
        design=design,
        metric=metric,
        target=target,
        anchors=tuple(anchor),
        n_anchors=anchors,
        k=k,
        seed=seed,
        stop_below=None if no_early_stop else 0.80,
    )
    console = Console(stderr=True)
    console.print(f"[dim]sweep of {len(chosen)} sizes ({', '.join(map(str, chosen))}) into {folder}")
    result = run_sweep(cfg)
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        return
    _print(result, _wide(Console()))


def _wide(console: Any) -> Any:
    """Piped output is 80 columns by default: give the tables room to show their intervals."""
    from rich.console import Console

    return console if console.is_terminal else Console(width=max(console.width, 120))


def _print(result: Any, console: Any) -> None:
    from rich.table import Table

    from skillreach.author.sweep import METRIC_NAMES
    from skillreach.reports import fmt_num, fmt_rate

    table = Table(
        title=f"capacity sweep · {result.design} · {result.runtime}",
        title_justify="left",
        show_edge=False,
        pad_edge=False,
    )
    for col in ("skills", "pass rate", "recall", "precision", "F1", "abstention", "tokens"):
        table.add_column(col, justify="right", no_wrap=True)
    for p in result.points:
        table.add_row(
            str(p.size),
            fmt_rate(p.pass_rate, p.pass_rate_ci),
            fmt_num(p.recall),
            fmt_num(p.precision),
            fmt_rate(p.f1, p.f1_ci),
            fmt_num(p.abstention),
            f"{p.prompt_tokens:.0f}",
        )
    console.print(table)
    a = result.analysis
    knee = (
        "none"
        if a.knee.size is None
        else f"{a.knee.size} ({'accepted' if a.knee.accepted else 'not accepted'})"
    )
    name = METRIC_NAMES[a.metric]
    console.print(f"knee of {name}: {knee} — {a.knee.reason}")
    for s in a.sla:
        if s.size is None:
            said = "none (below at the smallest size)"
        elif s.beyond:
            said = f"≥ {s.size:.0f} (never fell below)"
        else:
            said = f"≈ {s.size:.1f}"
        console.print(f"largest catalog with {name} ≥ {s.level:.2f}: {said}")
    if a.stopped_at:
        console.print(f"stopped early at {a.stopped_at} skills ({name} upper bound < 0.80)")
    console.print(f"  report    {result.out}/report.html\n  sweep     {result.out}/sweep.json")


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)
