"""``skillreach worker``: a Prefect task worker for a study's probe batches, on this machine.

Any number of them, on any number of machines, given the same Prefect server (``PREFECT_API_URL``) and
the same PostgreSQL store (``SKILLREACH_DATABASE_URL``): a study run tracked by that server sends its
batches to them (``skillreach.tasks.study.probe_on_workers``). Each worker resolves its settings once
when it starts; the batches it receives carry no secret.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from skillreach.errors import ConfigError

__all__ = ["check_worker_environment", "register", "worker_lines"]


SERVER_PATIENCE_S = 60.0
"""How long a starting worker waits for its Prefect server to answer its health check. A worker is often
started beside its server (compose, systemd, ``serve``'s machine) or on a busy machine, where one 1.5 s
check misses a server that is there (under ``stress-ng``, a worker started beside a fresh server exited
"no server")."""


def _server_within(patience_s: float) -> str | None:
    """The server's API URL once it answers (the health check, retried every second for ``patience_s``;
    one line on stderr after the first miss); ``None`` at once when no server is configured."""
    import sys
    import time

    from skillreach.cli._prefect_api import api_from_settings
    from skillreach.cli.run_cmds import prefect_server_up

    if not api_from_settings():
        return None
    give_up = time.monotonic() + patience_s
    said = False
    while (url := prefect_server_up()) is None and time.monotonic() < give_up:
        if not said:
            print(f"worker: waiting up to {patience_s:.0f} s for the Prefect server (PREFECT_API_URL) to "
                  "answer", file=sys.stderr)
            said = True
        time.sleep(1)
    return url


def check_worker_environment(config_file: Any = None) -> Any:
    """The worker's resolved configuration, or one ConfigError saying which variable is missing."""
    from skillreach.study import StudyConfig

    cfg = StudyConfig.build(config_file)
    import importlib.util

    if importlib.util.find_spec("psycopg") is None:  # the wheel without its postgres extra
        raise ConfigError(
            "the PostgreSQL driver (psycopg) is not installed; a worker writes to the shared PostgreSQL "
            "store: pip install 'skillreach[postgres]'"
        )
    if _server_within(SERVER_PATIENCE_S) is None:
        raise ConfigError(
            f"PREFECT_API_URL: no Prefect server answered there within {SERVER_PATIENCE_S:.0f} s; set it to "
            "the server the studies run on (e.g. http://HOST:4200/api, started by `skillreach serve`)"
        )
    url = cfg.database_url.get_secret_value() if cfg.database_url else ""
    if not url.startswith("postgresql"):
        raise ConfigError(
            "SKILLREACH_DATABASE_URL: a worker needs the shared PostgreSQL store "
            "(postgresql+psycopg://USER:PASSWORD@HOST/DB); every worker and the study write there"
        )
    from skillreach.store.database import Store

    Store(url, origin="database_url (SKILLREACH_DATABASE_URL)").close()  # reachable, migrated: now, not later
    return cfg


def worker_lines() -> list[str]:
    """What ``skillreach doctor`` can print about distributed probing: the server, the task workers it
    sees for probe batches, the store they share (never a password)."""
    import asyncio

    from skillreach.cli.run_cmds import prefect_server_up
    from skillreach.settings import load_settings

    lines: list[str] = []
    server = prefect_server_up()
    lines.append(f"prefect server: {server or 'none answering (studies probe in-process)'}")
    if server is not None:
        from skillreach.tasks.prefect_api import ApiProblem
        from skillreach.tasks.study import task_workers_seen

        try:
            n = asyncio.run(task_workers_seen())
            lines.append(f"batch workers: {n} seen" + ("" if n else " (start one: skillreach worker)"))
        except Exception as exc:  # an old server: say so, do not fail doctor
            why = str(exc) if isinstance(exc, ApiProblem) else type(exc).__name__
            lines.append(f"batch workers: unknown ({why})")
    url = load_settings().database_url or ""
    if url.startswith("postgresql"):
        from sqlalchemy.engine import make_url

        lines.append(f"shared store: {make_url(url).render_as_string(hide_password=True)}")
    else:
        lines.append("shared store: none (SQLite: batches run on this machine only)")
    return lines


async def warm_up(cfg: Any) -> None:
    """What the first batch would otherwise pay for, before the worker subscribes: the store opened
    (schema checked), the probe loop and the configured runtime's module and SDK imported."""
    import skillreach.study.runner  # noqa: F401
    from skillreach.tasks import runtime_for, worker_store

    worker_store()
    try:
        runtime = runtime_for(cfg)
    except Exception:  # a runtime this machine cannot build: the batches will say so, one by one
        return
    await runtime.aclose()


async def serve_batches(*tasks: Any, limit: int) -> None:
    """Prefect's ``aserve(*tasks, limit=limit)`` through its public ``TaskWorker``, keeping the CLI's
    SIGTERM handler (``skillreach.cli``: the batches in flight are cancelled as on Ctrl-C, then one line
    and exit 143). Prefect's worker installs its ``handle_sigterm`` as the SIGTERM handler, which calls
    ``sys.exit(0)`` inside its event loop (a traceback, exit 0); ours overrides that public method to hand
    the signal to the handler installed before (an ignored SIGTERM stays ignored; none: Prefect's)."""
    import asyncio
    import signal
    from types import FrameType
    from typing import cast

    from prefect.task_worker import StopTaskWorker, TaskWorker

    before = signal.getsignal(signal.SIGTERM)

    class Worker(TaskWorker):
        def handle_sigterm(self, signum: int, frame: object) -> None:
            if callable(before):
                before(signum, cast("FrameType | None", frame))
            elif before != signal.SIG_IGN:
                super().handle_sigterm(signum, frame)

    stopped = (StopTaskWorker, asyncio.CancelledError, KeyboardInterrupt, TimeoutError)
    try:  # what aserve does around its worker: a stop or an interruption ends serving quietly
        await Worker(*tasks, limit=limit).astart()
    except BaseExceptionGroup as group:
        _, unexpected = group.split(stopped)
        if unexpected:
            raise unexpected from None
    except (StopTaskWorker, asyncio.CancelledError, KeyboardInterrupt):
        pass


def worker_cmd(
    batches: int = typer.Option(
        2, "--batches", min=1, metavar="N",
        help="Batches this worker runs at once: one starts while another probes.",
    ),
    concurrency: int = typer.Option(
        None, "--concurrency", min=1, metavar="N",
        help="Probes in flight on this worker across its batches [default: the concurrency setting].",
    ),
    config: Any = typer.Option(None, "--config", metavar="FILE", help="Settings file (TOML or YAML)."),
) -> None:
    """Serve a study's probe batches from the Prefect server at PREFECT_API_URL, writing to the PostgreSQL
    store at SKILLREACH_DATABASE_URL. Start one per machine (or more); Ctrl-C stops it."""
    from pathlib import Path

    cfg = check_worker_environment(Path(config) if config else None)
    import asyncio

    from skillreach.deployments.limits import ensure_from_settings, existing_limits, install_shared_limits
    from skillreach.tasks import close_worker, set_worker_config
    from skillreach.tasks.study import probe_batch_remote

    slots = concurrency or cfg.concurrency
    set_worker_config(cfg, slots=slots)

    async def work() -> None:  # one event loop for the limits and the worker
        await warm_up(cfg)
        await ensure_from_settings(replace=False)  # limits `serve` did not create: from this machine
        limits = await existing_limits()
        install_shared_limits(limits)
        shared = f"; shared rate limits: {', '.join(sorted(limits))}" if limits else ""
        print(f"worker: serving probe batches ({batches} at a time, {slots} probes in flight){shared}; "
              "Ctrl-C stops", file=sys.stderr)
        try:
            await serve_batches(probe_batch_remote, limit=batches)
        finally:
            close_worker()

    asyncio.run(work())


def register(app: typer.Typer) -> None:
    app.command("worker")(worker_cmd)
