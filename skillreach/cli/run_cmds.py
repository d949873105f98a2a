"""``skillreach run`` (one study, as the ``study`` flow) and ``skillreach serve`` (the local service).

``run`` talks to Prefect only when a Prefect server is configured and answering (``PREFECT_API_URL``):
the study is then a tracked flow run. Otherwise it runs the same flow in-process (``study.fn``), which
avoids Prefect's temporary server (15–37 s to start) and keeps ``make demo`` fast; alerts are then
posted directly to the webhooks.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import typer

from skillreach._io.console import make_console
from skillreach.cli._startup import startup_gc
from skillreach.errors import ConfigError, InputError

__all__ = ["errored_line", "has_batch_mode", "prefect_server_up", "register", "run_study"]


class _Progress:
    """A rich progress bar fed by the probe batches (``tasks._context.set_progress``)."""

    def __init__(self, console: Any) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("[bold]probing"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[errors]} errors"),
            TextColumn("{task.fields[retries]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        from skillreach.runtimes import RetryTally

        self.tally = RetryTally()
        self.task = self.bar.add_task("probes", total=None, errors=0, retries=self.tally.text())
        self.errors = 0
        self.started = False
        self.log_handler: logging.Handler | None = None
        """``DIR/skillreach.log`` once the folder is known, a buffer before (a study given no --out)."""

    def folder(self, out: Path) -> None:
        """The study's folder is known (derived from its fingerprint): the buffered log lines go to
        ``DIR/skillreach.log``, and every line after them."""
        from logging.handlers import MemoryHandler

        buffered = self.log_handler
        if not isinstance(buffered, MemoryHandler):
            return
        handler = _log_file(out)
        buffered.setTarget(handler)
        buffered.flush()
        log = logging.getLogger("skillreach")
        log.addHandler(handler)
        log.removeHandler(buffered)
        buffered.close()
        self.log_handler = handler

    def plan(self, total: int, done: int) -> None:
        """The study is planned: the bar appears (not before, so a set-up error is one line alone)."""
        self.bar.update(self.task, total=total, completed=done)
        if not self.started:
            self.started = True
            self.bar.start()

    def stop(self) -> None:
        if self.started:
            self.bar.stop()

    def estimate(self, line: str, over_cap: bool) -> None:
        """The cost estimate of a live run, before its first probe (``tasks.study.estimate_spend``)."""
        style = "yellow" if over_cap else "dim"
        from rich.markup import escape

        self.bar.console.print(f"[{style}]cost estimate: {escape(line)}", markup=True, highlight=False)

    def retried(self, err: Any, wait: float) -> None:
        """A runtime is about to wait and retry (``runtimes._retry.watch_retries``)."""
        self.tally.add(err, wait)
        self.bar.update(self.task, retries=self.tally.text())

    def __call__(self, record: Any) -> None:
        if record.error:
            self.errors += 1
        self.bar.update(self.task, advance=1, errors=self.errors)


def prefect_server_up(timeout_s: float = 1.5) -> str | None:
    """The Prefect API URL when one is configured and a Prefect server answers its health check there
    (``true``, whole within ``timeout_s``: a server that drips, floods or answers something else is no
    server), else ``None``; a URL Prefect cannot read at all is one ConfigError naming the variable."""
    from skillreach.cli._prefect_api import api_from_settings, server_answers

    url = api_from_settings()
    if not url:
        return None
    return url if server_answers(url, deadline_s=timeout_s) is None else None


def has_batch_mode(runtime: str) -> bool:
    """Whether the runtime called ``runtime`` has a batch mode (``batch_mode``: a batch API at half price)."""
    from skillreach.runtimes import REGISTRY, capability

    return runtime in REGISTRY and capability(runtime, "batch_mode")


PROBE_BYTES = 2_048
"""A rough upper bound of the memory one planned probe costs through probing and scoring."""


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1024 or unit == "PB":
            return f"{n:,.0f} {unit}"
        n /= 1024
    return f"{n:,.0f} PB"  # pragma: no cover


def check_planned_probes(cfg: Any, ceiling: int) -> None:
    """Refuse (or ask, on a terminal) a study whose planned probes exceed ``ceiling`` — before the
    plan, the catalog or the probe log is built. Counts queries × attempts (a target's catalog can only
    plan fewer)."""
    if cfg.attempts > ceiling:
        n_queries: int | None = None
        planned = cfg.attempts
    else:
        from skillreach.queries.sets import load_query_set

        if cfg.queries is not None:
            qpath = cfg.queries
        else:
            from skillreach.example import EXAMPLE_QUERIES

            qpath = EXAMPLE_QUERIES
        n_queries = len(load_query_set(qpath).queries)
        planned = n_queries * cfg.attempts
    if planned <= ceiling:
        return
    shape = f"{n_queries:,} queries × " if n_queries is not None else "at least 1 query × "
    line = (
        f"attempts: {planned:,} planned probes ({shape}{cfg.attempts:,} attempts, about "
        f"{_human_bytes(planned * PROBE_BYTES)} of memory) exceed max_probes {ceiling:,}"
    )
    if sys.stdin.isatty() and sys.stderr.isatty():
        if typer.confirm(f"{line}; run anyway?", default=False, err=True):
            return
        raise typer.Exit(1)
    raise InputError(f"{line}; lower --attempts, or raise --max-probes (SKILLREACH_MAX_PROBES)")


def other_configuration(out: Path, runtime: str, model: str | None) -> str | None:
    """What configuration the probes already in ``out`` ran, when it is not ``runtime``/``model``."""
    import json

    from skillreach.models import MAX_PROBE_LINE_BYTES

    probes = out / "probes.jsonl"
    try:
        with probes.open("rb") as fh:
            first = fh.readline(MAX_PROBE_LINE_BYTES + 1)  # bounded: a sparse file has no newline
    except OSError:
        return None
    if len(first) > MAX_PROBE_LINE_BYTES:
        return None  # not a probe log: the log's reader refuses it, naming the line
    try:
        rec = json.loads(first)
    except ValueError:
        return None
    if not isinstance(rec, dict):
        return None
    was_runtime, was_model = rec.get("runtime"), rec.get("model")
    if was_runtime and was_runtime != runtime:
        return f"runtime {was_runtime!r}"
    if model and was_model and was_model != model:
        return f"model {was_model!r}"
    return None


def _check_store() -> None:
    """Open the store the study will write to, before anything is built: a bad database URL, a missing
    driver or an unusable SKILLREACH_HOME is one line now, not after the catalog and the plan."""
    from skillreach.settings import load_settings
    from skillreach.store.database import open_store

    open_store(load_settings()).close()


def run_study(
    config: Any, *, progress: Any = None, use_prefect: bool | None = None, kind: str = "study"
) -> Any:
    """Run the study flow: tracked by Prefect when a server answers, in-process otherwise (the same
    flow's body, ``study.fn``)."""
    import asyncio  # here, not at the top: the CLI starts without it

    from skillreach.flows.study import study
    from skillreach.tasks import set_progress

    if use_prefect is None:
        use_prefect = prefect_server_up() is not None
    key = str(config.out)  # "None" for a study given no --out, until prepare_study knows its folder
    set_progress(key, progress)
    startup_gc.resume()  # the modules are loaded: the study collects its garbage as usual
    result: Any = None
    try:
        result = asyncio.run(study(config, kind) if use_prefect else study.fn(config, kind))
        return result
    finally:
        set_progress(key, None)
        if result is not None:
            set_progress(str(result.out), None)


def run_cmd(  # noqa: PLR0917 - typer passes options positionally
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="Settings and study file (TOML or YAML)."
    ),
    skills: list[Path] = typer.Option([], "--skills", metavar="DIR", help="A folder of skills (repeatable)."),
    queries: Path | None = typer.Option(
        None, "--queries", metavar="FILE", help="The query set (sealed JSON, or JSONL/CSV/YAML)."
    ),
    runtime: str | None = typer.Option(
        None,
        "--runtime",
        metavar="NAME[,NAME…]",
        help="fake, keyword, retriever, anthropic, claude-code, codex, gemini-cli, opencode, copilot…; "
        "a comma list runs one study per agent (same query set and catalog) and writes their matrix.",
    ),
    model: str | None = typer.Option(
        None, "--model", metavar="M", help="Model alias or snapshot for LLM runtimes."
    ),
    catalog: str | None = typer.Option(
        None, "--catalog", metavar="STRATEGY", help="full, singleton or neighborhood."
    ),
    target: str | None = typer.Option(
        None, "--target", metavar="NAME", help="The skill under test (with --catalog singleton|neighborhood)."
    ),
    attempts: int | None = typer.Option(None, "--attempts", min=1, metavar="N", help="Attempts per query."),
    max_turns: int | None = typer.Option(
        None, "--max-turns", min=1, metavar="N", help="Skill invocations per probe."
    ),
    no_early_exit: bool = typer.Option(False, "--no-early-exit", help="Go on after the expected skill."),
    concurrency: int | None = typer.Option(
        None, "--concurrency", min=1, metavar="N", help="Probes in flight."
    ),
    out: Path | None = typer.Option(
        None, "--out", metavar="DIR", help="Output folder (default runs/<time>-<runtime>)."
    ),
    max_cost: float | None = typer.Option(
        None,
        "--max-cost",
        metavar="USD",
        help="Stop starting probes past this many USD; the results so far are kept and a re-run with a "
        "higher cap resumes. A cost estimate above it is said before the first probe.",
    ),
    batch: bool = typer.Option(
        False, "--batch", help="Message Batches API at half price, slower (anthropic runtime; nightly runs)."
    ),
    compliance: bool = typer.Option(False, "--compliance", help="Judge compliance: go on after the target."),
    judge_model: str | None = typer.Option(
        None,
        "--judge-model",
        metavar="M",
        help="The rubric judge (default: $SKILLREACH_JUDGE_MODEL, else the offline fake judge).",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Probe into an --out folder that holds probes of another configuration (runtime, model, "
        "catalog, query set, attempts, options).",
    ),
    max_probes: int | None = typer.Option(
        None,
        "--max-probes",
        min=1,
        metavar="N",
        help="Refuse a study planning more probes (queries × attempts) than N (default 1,000,000).",
    ),
    keep_errors: bool = typer.Option(
        False,
        "--keep-errors",
        help="On a re-run into the same --out, keep errored probes as they are (default: probe them again).",
    ),
    follow_outside: bool = typer.Option(
        False,
        "--follow-outside",
        help="Follow symbolic links under --skills whose target lies outside it (default: named, skipped).",
    ),
    debug: bool = typer.Option(
        False, "--debug", help="Print every log line and traceback (they always go to DIR/skillreach.log)."
    ),
    gated: bool | None = typer.Option(
        None,
        "--gate/--no-gate",
        help="Gate the study against the stored baselines (default: only when the config file says "
        "gate = true).",
    ),
) -> None:
    """One study: probe every query × attempt, score, write DIR/probes.jsonl, DIR/artifact.json and
    DIR/report.html, record the run in the database, print a scorecard. With no arguments it runs the
    bundled example offline.

    Exit codes: 0 the study ran (and, with --gate, no breach); 1 a gate breach under --gate; 2 bad input
    or a failed study; 130 interrupted; 143 terminated."""
    if runtime is not None and "," in runtime:
        params = dict(locals())
        _run_across_agents(params)
        return
    from skillreach.cli._prefect_api import check_api_url

    check_api_url()  # before Prefect is imported: a URL it cannot read is one line, not its noise
    from rich.logging import RichHandler

    from skillreach.study import StudyConfig

    if catalog is not None and catalog not in ("full", "singleton", "neighborhood"):
        raise InputError(f"--catalog {catalog}: use full, singleton or neighborhood")
    if config is not None and not config.is_file():
        raise InputError(f"--config {config}: no such file")
    cfg = StudyConfig.build(
        config,
        skills=tuple(skills) or None,
        queries=queries,
        runtime=runtime,
        model=model,
        catalog=catalog,
        target=target,
        attempts=attempts,
        max_turns=max_turns,
        early_exit=False if no_early_exit else None,
        concurrency=concurrency,
        out=out,
        max_cost=max_cost,
        compliance=True if compliance else None,
        judge_model=judge_model,
        keep_errors=True if keep_errors else None,
        max_probes=max_probes,
        gate=gated,
        follow_outside=True if follow_outside else None,
    )
    if gated is None and not _config_sets(config, "gate"):
        cfg = cfg.model_copy(update={"gate": False})  # gated only when asked, never by a folder's presence
    for path in (*cfg.skills, *([cfg.queries] if cfg.queries else [])):
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
    from skillreach.runtimes import REGISTRY, check_runtime_options, get_runtime

    if cfg.runtime not in REGISTRY:
        get_runtime(cfg.runtime)  # raises the error that lists the known runtimes
    cfg = cfg.model_copy(update={"runtime_options": agent_options(cfg.runtime_options, cfg.runtime)})
    if target is not None and cfg.catalog == "full":
        raise InputError(
            f"--target {target}: a target is measured in its own catalog; "
            "add --catalog singleton or --catalog neighborhood"
        )
    if batch or cfg.runtime_options.get("batch"):
        if not has_batch_mode(cfg.runtime):
            where = "--batch" if batch else f"{config}: runtime_options.batch"
            raise InputError(
                f"{where}: the {cfg.runtime} runtime has no batch mode; use --runtime anthropic "
                "(Message Batches API, half price) or drop it"
            )
        cfg = cfg.model_copy(update={"runtime_options": {**cfg.runtime_options, "batch": True}})
    if bool(cfg.skills) != (cfg.queries is not None):
        missing = "--queries FILE" if cfg.queries is None else "--skills DIR"
        raise InputError(
            f"a study needs both --skills and --queries; pass {missing} (or neither, for the bundled example)"
        )
    if not force:  # the study's fingerprint is checked against the folder's probes once it is known
        cfg = cfg.model_copy(update={"exclusive_out": True})
    check_planned_probes(cfg, cfg.max_probes)
    try:  # a misspelt runtime option stops the run before anything starts, the file named
        check_runtime_options(cfg.runtime, cfg.runtime_options)
    except ConfigError as exc:
        raise ConfigError(f"{config}: {exc.message}" if config is not None else exc.message) from exc
    from skillreach._io.paths import ensure_folder

    if cfg.out is not None:  # else a folder derived from the study's fingerprint (a re-run resumes)
        ensure_folder(cfg.out, flag="--out")
    _check_store()
    other = None if force or cfg.out is None else other_configuration(cfg.out, cfg.runtime, cfg.model)
    if other is not None:
        raise InputError(
            f"--out {cfg.out}: holds probes of {other}, not runtime {cfg.runtime!r}"
            + (f" model {cfg.model!r}" if cfg.model else "")
            + "; pass another --out, or --force to add this configuration beside them"
        )
    console = make_console(stderr=True)
    log = logging.getLogger("skillreach")
    if not any(isinstance(h, RichHandler) for h in log.handlers):
        from skillreach._io.redact import RedactingFilter

        shown = RichHandler(console=console, show_time=False, show_path=False)
        shown.addFilter(RedactingFilter())
        log.addHandler(shown)
        log.propagate = False  # Prefect's console handler on the root logger would print it again
    for handler in log.handlers:
        if isinstance(handler, RichHandler):
            handler.console = console  # this command's stderr (a console holds its stream)
            handler.setLevel(logging.DEBUG if debug else logging.WARNING)
    log.setLevel(logging.DEBUG)
    progress = _Progress(console)
    progress.log_handler = _log_file(cfg.out)
    log.addHandler(progress.log_handler)
    if cfg.is_example:
        console.print(
            f"[dim]no --skills/--queries: running the bundled example (runtime {cfg.runtime})"
        )
    server = prefect_server_up()
    if server is not None:
        console.print(f"[dim]Prefect server at {server}: the study is a tracked flow run")
        _quiet_our_errors_on_prefects_console()
    elif os.environ.get("PREFECT_API_URL"):
        console.print("[dim]PREFECT_API_URL is set but no server answers there: running in-process")
    if cfg.gate:
        for line in _smallest_breaches(cfg):
            console.print(line, markup=False, highlight=False)
    from skillreach.runtimes import watch_retries

    try:
        with watch_retries(progress.retried):
            result = run_study(cfg, progress=progress, use_prefect=server is not None)
    finally:
        progress.stop()
        if progress.log_handler is not None:
            log.removeHandler(progress.log_handler)
            progress.log_handler.close()
    out_console = make_console()
    try:
        from skillreach.reports import print_scorecard
        from skillreach.reports.gate_file import read_gate

        gate, not_compared = read_gate(result.out, result.artifact.digest) or (None, [])
        print_scorecard(result.artifact, out_console, gate=gate, not_compared=not_compared)
    except ImportError:  # pragma: no cover - only while the reports package is being written
        out_console.print(result.artifact.metrics)
    cost = f", ${result.cost_usd:.4f}" if result.cost_usd else ""
    out_console.print(
        f"\n[bold]study[/] {result.study_id}  "
        f"[dim]({result.probes_run} probed, {result.probes_resumed} resumed{cost})[/]"
    )
    for label, path in (
        ("probes", result.probes_path),
        ("artifact", result.artifact_path),
        ("report", result.report_path),
    ):
        out_console.print(f"  {label:9} {path}")
    errors = result.artifact.outcomes.errors if result.artifact is not None else {}
    if errors:
        console.print(errored_line(len(errors), errors[min(errors)]), markup=False, highlight=False)
    from skillreach.service.alerts import GATE_BREACHED

    breached = [b for b in result.breaches if b.get("event", GATE_BREACHED) == GATE_BREACHED]
    if cfg.gate and breached:  # the scorecard's gate report said how many; this is the exit code
        from skillreach.errors import GateFailed

        where = ", ".join(sorted({f"{b.get('skill')} {b.get('metric')}" for b in breached}))
        raise GateFailed(f"run: gate breached: {where}; see {result.out / 'gate.json'}")


def _smallest_breaches(cfg: Any) -> list[str]:
    """Before probing a gated study: per skill with positive cases, the smallest change its cases can
    show as a breach of its activation gate (one run per case, every case at its best now)."""
    from skillreach.baselines.gates import smallest_breach_text
    from skillreach.queries.sets import load_query_set

    if cfg.queries is None:
        return []
    counts: dict[str, int] = {}
    for q in load_query_set(cfg.queries).queries:
        if q.expected_skill:
            counts[q.expected_skill] = counts.get(q.expected_skill, 0) + 1
    gate = float(cfg.gates.activation)
    return [
        f"  {name}: smallest breach of activation ({gate:+.2f}): "
        f"{smallest_breach_text('activation', gate, k)}"
        for name, k in sorted(counts.items())
    ]


def agent_options(options: dict[str, Any], runtime: str) -> dict[str, Any]:
    """A cross-agent config's ``runtime_options``: the keys shared by every agent, with the table named
    after ``runtime`` (``[runtime_options.gemini-cli]``) over them; the other agents' tables left out."""
    from skillreach.runtimes import REGISTRY

    tables = {k for k, v in options.items() if k in REGISTRY and isinstance(v, dict)}
    if not tables:
        return options
    shared = {k: v for k, v in options.items() if k not in tables}
    return {**shared, **options.get(runtime, {})}


def _run_across_agents(params: dict[str, Any]) -> None:
    """``--runtime a,b,…``: one study per agent into ``OUT/<runtime>`` (the same sealed query set and
    catalog), then their matrix: printed, written to ``OUT/agents.html`` and ``OUT/agents.md``. Each
    agent's options are the config's ``runtime_options`` with its own table over them
    (``[runtime_options.opencode]``)."""
    names = [n.strip() for n in str(params["runtime"]).split(",") if n.strip()]
    if len(names) < 2 or len(set(names)) != len(names):
        raise InputError(f"--runtime {params['runtime']}: name two or more different runtimes")
    base = Path(params["out"]) if params["out"] is not None else Path(".skillreach") / "agents"
    for name in names:
        run_cmd(**{**params, "runtime": name, "out": base / name})
    from skillreach.author.agents import agent_matrix
    from skillreach.author.diff import load_arm
    from skillreach.reports.agents import (
        print_agent_matrix,
        render_agent_matrix_html,
        render_agent_matrix_markdown,
    )

    matrix = agent_matrix([load_arm(base / name, name) for name in names])
    console = make_console()
    console.print()
    print_agent_matrix(matrix, console)
    page = base / "agents.html"
    page.write_text(render_agent_matrix_html(matrix), encoding="utf-8")
    (base / "agents.md").write_text(render_agent_matrix_markdown(matrix), encoding="utf-8")
    console.print(f"\n  matrix    {page}\n  markdown  {base / 'agents.md'}")


def _config_sets(config: Path | None, key: str) -> bool:
    """Whether the config file gives ``key`` (a study key: only the file or a flag can set it)."""
    if config is None:
        return False
    from skillreach.settings import read_config_file

    return key in read_config_file(config)


def errored_line(count: int, first: str) -> str:
    """The one line a run prints about its errored probes (the records hold each error)."""
    first_line = first.strip().splitlines()[0] if first.strip() else "no message"
    return f"{count} probe{'s' if count != 1 else ''} errored: {first_line[:300]} (all in probes.jsonl)"


class _OurErrorsOnce(logging.Filter):
    """Drops Prefect's report of a study stopped by one of our errors (the cost cap, a bad file): the
    command prints that error as its one line (and the flow run's state in the Prefect UI carries its
    message). Any other failure is still logged by Prefect as before."""

    def __init__(self) -> None:
        super().__init__()
        from skillreach.errors import SkillreachError

        self.ours = SkillreachError
        names: set[str] = set()
        todo: list[type] = [SkillreachError]
        while todo:
            cls = todo.pop()
            names.add(cls.__name__)
            todo.extend(cls.__subclasses__())
        self.names = tuple(f"{n}: " for n in names) + tuple(f"{n}(" for n in names)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], self.ours):
            return False
        if record.levelno >= logging.ERROR:
            return not any(n in record.getMessage() for n in self.names)
        return True


def _quiet_our_errors_on_prefects_console() -> None:
    """Filter Prefect's flow- and task-run loggers with :class:`_OurErrorsOnce` (once per process; on
    the loggers, not their handlers: Prefect may configure its handlers again when a run starts)."""
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _OurErrorsOnce) for f in logger.filters):
            logger.addFilter(_OurErrorsOnce())


def _log_file(out: Path | None) -> logging.Handler:
    """``DIR/skillreach.log``: every log line of the run, tracebacks included (appended across runs);
    a buffer while the folder is not known yet (see :meth:`_Progress.folder`)."""
    from skillreach._io.redact import RedactingFilter

    if out is None:
        from logging.handlers import MemoryHandler

        buffer = MemoryHandler(capacity=1_000_000, flushLevel=logging.CRITICAL + 1)
        buffer.addFilter(RedactingFilter())  # secrets masked before they are held
        return buffer
    out.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out / "skillreach.log", encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())  # no key, URL password or token reaches the file
    return handler


def serve_cmd(
    port: int = typer.Option(4200, "--port", help="Port of the local Prefect server (127.0.0.1)."),
    pool: str | None = typer.Option(
        None, "--pool", metavar="NAME",
        help="Process work pool to create and serve (default: $SKILLREACH_WORK_POOL, else skillreach).",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address the Prefect server binds (0.0.0.0: all)."),
) -> None:
    """Start the Prefect deployments of prefect.yaml locally: server, work pool, deployments,
    automations, and a supervised worker in the foreground (restarted if it dies; schedules and event
    triggers live). Ctrl-C stops all."""
    from skillreach.deployments.serve import serve

    raise typer.Exit(serve(port=port, pool=pool, host=host, log=lambda m: print(m, file=sys.stderr)))


def register(app: typer.Typer) -> None:
    app.command("run")(run_cmd)
    app.command("serve")(serve_cmd)


# Prefect must never phone home from a CLI run (it fails offline and costs time).
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
