"""``skillreach serve`` / ``make up``: the whole service on one machine, in one command.

1. a Prefect server on 127.0.0.1 (reused when one already answers on the port; else started, with its
   state in ``PREFECT_HOME``, by default ``.skillreach/prefect`` in the working folder — never beside
   the installed package —, watched — restarted with a line when it exits; when it does not come back,
   one line and exit 1 — and stopped again on exit);
2. wait for ``/api/health``;
3. the process work pool (created when missing);
4. ``prefect --no-prompt deploy --all`` on prefect.yaml (idempotent): the file ships in the package
   (``skillreach/deployments/prefect.yaml``); serve writes a copy into the state folder whose
   entrypoints name the installed flows by absolute path, and whose flow runs work in the working
   folder (their ``runs/`` and ``.skillreach/`` land there, as with ``skillreach run``);
5. the automations (``deployments/automations.py``, delete-by-name then create);
6. a process worker on the pool, in the foreground, supervised: a worker that dies (kill -9, a crash)
   is restarted with a log line, and the server stays up; the flow-run processes it leaves are ended
   first (SIGTERM, then SIGKILL 3 s later: ``end_left_runs``). Ctrl-C stops the worker, then the server.

A step that fails prints the line of Prefect's own output that says why.
The service log: the server's output in ``.skillreach/logs/server.log`` of the working folder (or
``$SKILLREACH_HOME/logs``), the worker's (echoed to the terminal too) in ``worker.log``, every deployment
run's in ``runs.log`` (``deployments/logs.py``).
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "PREFECT_FILE", "REPO", "StepFailed", "deploy_file", "prefect_env", "serve", "stop_group", "wait_healthy",
]

REPO = Path(__file__).resolve().parents[1]
"""Where ``flows/`` is: the checkout, or the installed ``skillreach`` package (``skillreach/flows``)."""
PREFECT_FILE = Path(__file__).with_name("prefect.yaml")
"""The deployments, shipped in the package (in a checkout, a link to the top-level prefect.yaml)."""


NIGHTLY_CRON_ENV, NIGHTLY_TZ_ENV = "SKILLREACH_NIGHTLY_CRON", "SKILLREACH_NIGHTLY_TIMEZONE"
NIGHTLY_DEFAULTS = {NIGHTLY_CRON_ENV: "0 2 * * *", NIGHTLY_TZ_ENV: "UTC"}
"""When the nightly compliance run starts: prefect.yaml's schedule reads these (``{{ $NAME }}``)."""


def nightly_schedule(env: dict[str, str]) -> tuple[str, str]:
    """The nightly cron and timezone ``env`` gives (defaults filled in), checked as Prefect checks them;
    :class:`~skillreach.errors.ConfigError` naming the variable when one is not valid."""
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    from skillreach.errors import ConfigError

    cron = env.get(NIGHTLY_CRON_ENV) or NIGHTLY_DEFAULTS[NIGHTLY_CRON_ENV]
    tz = env.get(NIGHTLY_TZ_ENV) or NIGHTLY_DEFAULTS[NIGHTLY_TZ_ENV]
    try:
        CronSchedule(cron=cron, timezone=tz)
    except ValidationError as exc:
        name = NIGHTLY_TZ_ENV if "timezone" in str(exc).lower() else NIGHTLY_CRON_ENV
        what = "timezone" if name == NIGHTLY_TZ_ENV else "cron expression"
        raise ConfigError(f"{name}={env.get(name)!r}: not a valid {what} ({exc.errors()[0]['msg']}); "
                          f"e.g. {NIGHTLY_DEFAULTS[name]!r}") from exc
    return cron, tz


POOL_ENV = "SKILLREACH_WORK_POOL"
"""The process work pool the deployments of prefect.yaml run on (``{{ $SKILLREACH_WORK_POOL }}``)."""


def prefect_env(port: int, workdir: Path | None = None, pool: str | None = None) -> dict[str, str]:
    """The environment every Prefect command of the service runs with; ``workdir`` (default: the working
    folder) is where the flow runs work and, unless ``PREFECT_HOME`` is set, where Prefect keeps its state
    (``.skillreach/prefect``); ``pool``: the work pool the deployments run on (else
    ``$SKILLREACH_WORK_POOL``, else ``skillreach``)."""
    folder = (workdir or Path.cwd()).resolve()
    env = dict(os.environ)
    env[POOL_ENV] = pool or env.get(POOL_ENV) or "skillreach"
    for name, default in NIGHTLY_DEFAULTS.items():
        if not env.get(name):
            env[name] = default
    if not env.get("PREFECT_HOME"):
        env["PREFECT_HOME"] = str(folder / ".skillreach" / "prefect")
    env["PREFECT_API_URL"] = f"http://127.0.0.1:{port}/api"
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.setdefault("DO_NOT_TRACK", "1")
    # flow runs send heartbeats; the zombie automation (deployments/automations.py) marks a run whose
    # heartbeats stop as Crashed
    from skillreach.deployments.automations import HEARTBEAT_S

    env.setdefault("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", str(HEARTBEAT_S))
    env["PWD"] = str(folder)  # prefect.yaml's pull step: the flow runs work in this folder
    return env


def deploy_file(env: dict[str, str]) -> Path:
    """prefect.yaml with each entrypoint made absolute (``REPO/flows/…``), written into the state
    folder: a worker in any working folder loads the installed flows, and nothing is written beside
    the package."""
    import yaml

    spec = yaml.safe_load(PREFECT_FILE.read_text(encoding="utf-8"))
    for deployment in spec.get("deployments", []):
        path, sep, func = str(deployment["entrypoint"]).rpartition(":")
        if sep and not Path(path).is_absolute():
            deployment["entrypoint"] = f"{(REPO / path).as_posix()}:{func}"
    out = Path(env["PREFECT_HOME"]) / "prefect.yaml"
    out.write_text(
        "# Written by `skillreach serve` from skillreach/deployments/prefect.yaml: edit that one.\n"
        + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    return out


class StepFailed(Exception):
    """A Prefect command of the service failed; ``line`` is what Prefect said."""

    def __init__(self, what: str, code: int, line: str) -> None:
        super().__init__(f"{what} failed with exit code {code}: {line}")


def _why(text: str) -> str:
    """The line of a Prefect command's output that says what went wrong: the last one naming an error,
    else the last non-empty one."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if any(w in line.lower() for w in ("error", "exception", "failed", "invalid", "not found")):
            return line
    return lines[-1] if lines else "(no output)"


def _step(what: str, args: list[str], env: dict[str, str], cwd: Path) -> str:
    out = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise StepFailed(what, out.returncode, _why(out.stderr + "\n" + out.stdout))
    return out.stdout


def wait_healthy(api: str, timeout_s: float = 120.0, proc: subprocess.Popen[bytes] | None = None) -> bool:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


def stop_group(proc: subprocess.Popen[bytes] | None, grace_s: float = 15.0) -> None:
    """SIGINT the process group, then SIGTERM, then SIGKILL (a worker may need it: prefect-notes.md)."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, min(grace_s, 5.0)), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _prefect(*args: str) -> list[str]:
    return [sys.executable, "-m", "prefect", *args]


RESTART_DELAY_S = (1.0, 5.0, 30.0)
"""Waits before restarting a worker that died: 1 s, then 5 s, then 30 s while it keeps dying at once."""


def left_runs(api: str, proc_root: Path = Path("/proc")) -> list[int]:
    """The processes of this service's flow runs (``PREFECT__FLOW_RUN_ID`` and ``PREFECT_API_URL=api`` in
    their environment: a worker of this service started them, or they are their children) still alive;
    empty where there is no ``/proc``."""
    if not proc_root.is_dir():
        return []
    wanted = f"PREFECT_API_URL={api}".encode()
    out = []
    for entry in proc_root.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        run = any(e.startswith(b"PREFECT__FLOW_RUN_ID=") for e in environ)
        if state != "Z" and run and wanted in environ:
            out.append(int(entry.name))
    return out


def end_left_runs(api: str, log: Callable[[str], None], grace_s: float = 3.0) -> list[int]:
    """After the worker died: SIGTERM to the flow-run processes it left (Prefect's engine then reports
    its run Crashed), SIGKILL to what still runs ``grace_s`` later — no probe of a lost run goes on."""
    found = left_runs(api)
    pids = found
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline and left_runs(api):
            time.sleep(0.2)
        pids = left_runs(api)
        if not pids:
            break
    if found:
        log(f"serve: ended {len(found) - len(pids)} flow-run process(es) the worker left (pids "
            f"{', '.join(map(str, found))})" + (f"; {len(pids)} would not end" if pids else ""))
    return found


def supervise(start: Callable[[], subprocess.Popen[bytes]], log: Callable[[str], None],
              *, restarts: int | None = None,
              on_exit: Callable[[], object] | None = None) -> subprocess.Popen[bytes]:
    """Run ``start()``'s process in the foreground and restart it whenever it exits (``restarts``: how
    many times, ``None`` for ever); ``on_exit`` runs after each exit, before the restart. Returns the last
    process (for the caller to stop)."""
    proc = start()
    done = 0
    quick = 0
    while restarts is None or done < restarts:
        began = time.monotonic()
        code = proc.wait()
        if on_exit is not None:
            on_exit()
        quick = quick + 1 if time.monotonic() - began < 60 else 0
        delay = RESTART_DELAY_S[min(quick, len(RESTART_DELAY_S) - 1)]
        log(f"serve: the worker (pid {proc.pid}) exited with code {code}; restarting it in {delay:g} s")
        time.sleep(delay)
        proc = start()
        done += 1
        log(f"serve: worker restarted (pid {proc.pid})")
    return proc


def keep_alive(start: Callable[[], subprocess.Popen[bytes]], proc: subprocess.Popen[bytes],
               healthy: Callable[[subprocess.Popen[bytes]], bool], log: Callable[[str], None], *,
               stop: threading.Event, on_fail: Callable[[], None], every_s: float = 2.0,
               what: str = "the Prefect server") -> threading.Thread:
    """A daemon thread watching ``proc`` (the server ``serve`` started): when it exits (``<defunct>``
    no more), one line, then ``start()`` again until ``healthy``; when it does not come back, one line
    and ``on_fail()`` (``serve`` then stops, exit 1). Ends when ``stop`` is set."""

    def run() -> None:
        current = proc
        while not stop.wait(every_s):
            code = current.poll()
            if code is None:
                continue
            log(f"serve: {what} (pid {current.pid}) exited with code {code}; restarting it")
            current = start()
            if not healthy(current):
                log(f"serve: {what} did not come back; stopping (run `prefect server start` to see why)")
                on_fail()
                return
            log(f"serve: {what} restarted (pid {current.pid})")

    thread = threading.Thread(target=run, name="serve-keep-alive", daemon=True)
    thread.start()
    return thread


def serve(port: int = 4200, pool: str | None = None, log: Callable[[str], None] = print,
          host: str = "127.0.0.1") -> int:
    """Bring the service up and keep the worker in the foreground; returns the exit code. ``host`` is
    the address the server binds (127.0.0.1 by default; the service itself talks to it locally);
    ``pool``: the work pool (else ``$SKILLREACH_WORK_POOL``, which doctor and status read too, else
    ``skillreach``)."""
    workdir = Path.cwd().resolve()
    env = prefect_env(port, workdir, pool)
    pool = env[POOL_ENV]
    api = env["PREFECT_API_URL"]
    cron, tz = nightly_schedule(env)  # a bad one stops here, in one line, before anything starts
    log(f"serve: nightly compliance on cron {cron!r} ({tz}); {NIGHTLY_CRON_ENV} / {NIGHTLY_TZ_ENV} change it")
    for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, or a service manager's stop: same clean exit
        signal.signal(sig, _interrupt)
    Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    from skillreach.deployments.logs import log_dir, pump, rotating_logger, write_logging_config

    logs = log_dir(env, workdir)
    env["PREFECT_LOGGING_SETTINGS_PATH"] = str(write_logging_config(logs))  # every run: runs.log
    log(f"serve: service log in {logs} (server.log, worker.log, runs.log; rotated at 10 MB)")
    server_log, worker_log = rotating_logger(logs / "server.log", "server"), rotating_logger(
        logs / "worker.log", "worker")
    server: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None
    stopping, server_lost = threading.Event(), threading.Event()
    try:
        if wait_healthy(api, timeout_s=1):
            log(f"serve: using the Prefect server already running at {api}")
        else:
            log(f"serve: starting a Prefect server on {host}:{port} (state in {env['PREFECT_HOME']})")
            server_env = {k: v for k, v in env.items() if k != "PREFECT_LOGGING_SETTINGS_PATH"}

            def start_server() -> subprocess.Popen[bytes]:
                nonlocal server
                server = subprocess.Popen(
                    _prefect("server", "start", "--host", host, "--port", str(port)),
                    env=server_env, cwd=workdir, start_new_session=True,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                )
                assert server.stdout is not None
                pump(server.stdout, server_log)
                return server

            first = start_server()
            if not wait_healthy(api, 180, first):
                text = (logs / "server.log").read_text(encoding="utf-8", errors="replace")
                log(f"serve: the Prefect server did not become healthy: {_why(text)} "
                    f"(all of it: {logs / 'server.log'})")
                return 1

            def lost() -> None:
                server_lost.set()
                _thread.interrupt_main()  # the foreground loop stops as on Ctrl-C; serve exits 1

            keep_alive(start_server, first, lambda p: wait_healthy(api, 180, p), log, stop=stopping,
                       on_fail=lost)
        log("serve: server healthy; creating the work pool")
        _step("prefect work-pool create", _prefect("work-pool", "create", pool, "--type", "process",
                                                    "--overwrite"), env, workdir)
        spec = deploy_file(env)
        log(f"serve: deploying {PREFECT_FILE.name} ({spec})")
        _step("prefect deploy", _prefect("--no-prompt", "deploy", "--all", "--prefect-file", str(spec)),
              env, workdir)
        result = _upsert_in(env)
        log(f"serve: alert automation: {result}")
        log(f"serve: shared rate limits: {_limits_in(env)}")
        from skillreach.ui.server import dashboard_beside  # the team's dashboard, beside the Prefect UI

        dashboard_beside(env, host=host, log=log)
        log(f"serve: worker on pool {pool!r} — UI at {api.removesuffix('/api')} — Ctrl-C stops everything")
        workers: list[subprocess.Popen[bytes]] = []

        def start_worker() -> subprocess.Popen[bytes]:
            proc = subprocess.Popen(_prefect("worker", "start", "--pool", pool, "--type", "process"),
                                    env=env, cwd=workdir, start_new_session=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            assert proc.stdout is not None
            pump(proc.stdout, worker_log, echo=sys.stderr)  # the terminal, as before, and worker.log
            workers[:] = [proc]
            return proc

        try:
            # a worker killed (kill -9) leaves its flow runs' processes: they end with it
            supervise(start_worker, log, on_exit=lambda: end_left_runs(api, log))
        finally:
            worker = workers[0] if workers else None
        return 0
    except KeyboardInterrupt:
        if server_lost.is_set():
            return 1
        log("serve: stopping")
        return 0
    except StepFailed as exc:
        log(f"serve: {exc}")
        return 1
    finally:
        stopping.set()
        stop_group(worker)
        stop_group(server)


def _upsert_in(env: dict[str, str]) -> str:
    """Upsert the automations against the service's API (a child process: its own Prefect settings)."""
    code = (
        "import asyncio, json; from skillreach.deployments.automations import upsert_automations; "
        "print(json.dumps(asyncio.run(upsert_automations())))"
    )
    out = _step("the alert automations", [sys.executable, "-c", code], env, Path(env["PWD"]))
    return out.strip().splitlines()[-1] if out.strip() else "{}"


def _limits_in(env: dict[str, str]) -> str:
    """The provider rate limits every worker shares (deployments/limits.py), from the settings."""
    code = ("import asyncio, json; from skillreach.deployments.limits import ensure_from_settings; "
            "print(json.dumps(asyncio.run(ensure_from_settings())))")
    out = _step("the shared rate limits", [sys.executable, "-c", code], env, Path(env["PWD"]))
    return out.strip().splitlines()[-1] if out.strip() else "{}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(serve())
