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
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillreach.deployments.setup import MARK
from skillreach.deployments.setup import why as _why

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


WORKER_POLL_S = 2
"""How often serve's worker asks the server for runs that are due (``PREFECT_WORKER_QUERY_SECONDS``)."""
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
    # the worker asks for due runs every WORKER_POLL_S (Prefect's default, 10 s, kept a triggered run
    # waiting 5 s on average before its process even started)
    env.setdefault("PREFECT_WORKER_QUERY_SECONDS", str(WORKER_POLL_S))
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


def stop_group(proc: subprocess.Popen[Any] | None, grace_s: float = 15.0) -> None:
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
              on_exit: Callable[[], object] | None = None,
              on_restart: Callable[[int, int | None, int], object] | None = None) -> subprocess.Popen[bytes]:
    """Run ``start()``'s process in the foreground and restart it whenever it exits (``restarts``: how
    many times, ``None`` for ever); ``on_exit`` runs after each exit, before the restart;
    ``on_restart(old pid, its exit code, new pid)`` after each restart. Returns the last process (for the
    caller to stop)."""
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
        old = proc.pid
        proc = start()
        done += 1
        log(f"serve: worker restarted (pid {proc.pid})")
        if on_restart is not None:
            on_restart(old, code, proc.pid)
    return proc


def keep_alive(start: Callable[[], subprocess.Popen[bytes]], proc: subprocess.Popen[bytes],
               healthy: Callable[[subprocess.Popen[bytes]], bool], log: Callable[[str], None], *,
               stop: threading.Event, on_fail: Callable[[], None], every_s: float = 2.0,
               what: str = "the Prefect server",
               on_restart: Callable[[int, int | None, int], object] | None = None) -> threading.Thread:
    """A daemon thread watching ``proc`` (the server ``serve`` started): when it exits (``<defunct>``
    no more), one line, then ``start()`` again until ``healthy``; when it does not come back, one line
    and ``on_fail()`` (``serve`` then stops, exit 1); ``on_restart(old pid, its exit code, new pid)``
    when it did. Ends when ``stop`` is set."""

    def run() -> None:
        current = proc
        while not stop.wait(every_s):
            code = current.poll()
            if code is None:
                continue
            log(f"serve: {what} (pid {current.pid}) exited with code {code}; restarting it")
            old = current.pid
            current = start()
            if not healthy(current):
                log(f"serve: {what} did not come back; stopping (run `prefect server start` to see why)")
                on_fail()
                return
            log(f"serve: {what} restarted (pid {current.pid})")
            if on_restart is not None:
                on_restart(old, code, current.pid)

    thread = threading.Thread(target=run, name="serve-keep-alive", daemon=True)
    thread.start()
    return thread


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def service_config(workdir: Path) -> Any:
    """The study configuration the service's flow runs read (``$SKILLREACH_STUDY_CONFIG``, else the
    bundled example), as ``tasks/config.py`` resolves it; a bad one is a ConfigError (serve stops)."""
    from skillreach.tasks.config import CONFIG_ENV, example_config, service_environment

    return service_environment() if os.environ.get(CONFIG_ENV) else example_config()


def describe(workdir: Path, env: dict[str, str], pool: str, cfg: Any) -> Any:
    """What ``service.json`` says of this service (:class:`skillreach.service.instance.ServiceInfo`)."""
    from skillreach.baselines.record_store import BaselineRepo
    from skillreach.service.instance import ServiceInfo, mask_url
    from skillreach.tasks.config import CONFIG_ENV

    home = cfg.home if cfg.home.is_absolute() else workdir / cfg.home
    url = (cfg.database_url.get_secret_value() if cfg.database_url
           else f"sqlite:///{(home / 'skillreach.db').as_posix()}")
    store, secret = mask_url(url)
    repo = BaselineRepo.find(Path(cfg.skills[0])) if cfg.skills and not cfg.is_example else None
    return ServiceInfo(
        folder=str(workdir), pid=os.getpid(), api=env["PREFECT_API_URL"], pool=pool,
        started_at=_utc_now(),
        prefect_home=env["PREFECT_HOME"], config_file=os.environ.get(CONFIG_ENV) or None,
        skills=tuple(str(Path(p).resolve()) for p in cfg.skills),
        queries=str(Path(cfg.queries).resolve()) if cfg.queries else None,
        repository=str(repo.top) if repo is not None else None, baselines_dir=cfg.baselines_dir,
        baselines_branch=cfg.baselines_branch, home=str(home.resolve()), store=store, store_secret=secret,
    )


def _ours(pid: int, home: str) -> bool:
    """Whether ``pid`` is a Prefect server or worker of the service whose state is in ``home``."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return b"prefect" in cmd and f"PREFECT_HOME={home}".encode() in environ


def take_over(previous: Any, log: Callable[[str], None]) -> None:
    """The lock was free but a ``serve`` had run here (killed: its lock died with it). Its server and
    worker may still run, in sessions of their own: they are stopped (this serve starts its own)."""
    left = [p for p in (previous.server_pid, previous.worker_pid) if p and _ours(p, previous.prefect_home)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_ours(p, previous.prefect_home) for p in left):
        time.sleep(0.2)
    for pid in left:
        if _ours(pid, previous.prefect_home):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
    ended = end_left_runs(previous.api, log, grace_s=3.0)
    what = f"; stopped what it left: pid(s) {', '.join(map(str, left + ended))}" if left or ended else ""
    log(f"serve: took over from a serve that is gone (pid {previous.pid}, started {previous.started_at})"
        + what)


class Service:
    """This serve's lock and ``service.json``: where restarts and the processes it runs are recorded."""

    def __init__(self, info: Any, env: dict[str, str], log: Callable[[str], None]) -> None:
        self.info, self.env, self.log = info, env, log
        self._lock = threading.Lock()

    def save(self, **changes: Any) -> None:
        from dataclasses import replace

        from skillreach.service.instance import write_service

        with self._lock:
            self.info = replace(self.info, **changes)
            write_service(self.info)

    def restarted(self, what: str, old_pid: int, code: int | None, pid: int) -> None:
        """A restart said in ``service.json`` (``status`` shows it) and as one alert."""
        from dataclasses import replace

        from skillreach.service.instance import write_service

        at = _utc_now()
        with self._lock:
            self.info = self.info.with_restart(what, old_pid=old_pid, code=code, pid=pid, at=at)
            self.info = replace(self.info, **{f"{what}_pid": pid})
            write_service(self.info)
        payload = json.dumps({"what": what, "old_pid": old_pid, "code": code, "pid": pid, "at": at,
                              "folder": self.info.folder, "ui": self.info.ui})
        threading.Thread(target=self._alert, args=(payload,), name="serve-restart-alert", daemon=True).start()

    def _alert(self, payload: str) -> None:
        code = ("import json, sys; from skillreach.deployments.notice import main, restart_payload; "
                "p = json.loads(sys.argv[1]); "
                "sys.exit(main([json.dumps(restart_payload(p['what'], folder=p['folder'], ui=p['ui'], "
                "old_pid=p['old_pid'], code=p['code'], pid=p['pid'], at=p['at']))]))")
        try:
            out = subprocess.run([sys.executable, "-c", code, payload], env=self.env, cwd=self.info.folder,
                                 capture_output=True, text=True, timeout=ALERT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            self.log(f"serve: the restart alert was not filed within {ALERT_TIMEOUT_S:g} s")
            return
        if out.returncode != 0:
            self.log(f"serve: the restart alert was not filed: {_why(out.stderr + out.stdout)}")


ALERT_TIMEOUT_S = 120.0
"""How long filing one restart alert may take (a child process: imports, the store, the webhooks)."""


def run_setup(env: dict[str, str], workdir: Path, *, pool: str, spec: Path,
              variable: dict[str, Any]) -> subprocess.Popen[str]:
    """Start ``deployments/setup.py`` (it waits for the server's health itself)."""
    return subprocess.Popen(
        [sys.executable, "-m", "skillreach.deployments.setup", pool, str(spec), json.dumps(variable)],
        env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)


def finish_setup(proc: subprocess.Popen[str], log: Callable[[str], None], timeout_s: float = 900) -> None:
    """Log each step of the set-up as it ends; :class:`StepFailed` with Prefect's line when one fails."""
    assert proc.stdout is not None
    other: list[str] = []
    what = {"work pool": "serve: work pool ready", "deploy": f"serve: deployed {PREFECT_FILE.name}",
            "automations": "serve: alert automation:", "limits": "serve: shared rate limits:",
            "variable": "serve: this folder's service is named in the Prefect variable"}
    deadline = time.monotonic() + timeout_s
    for line in iter(proc.stdout.readline, ""):
        if not line.startswith(MARK):
            other.append(line)
            continue
        step = json.loads(line[len(MARK):])
        if "error" in step:
            stop_group(proc, grace_s=5)
            raise StepFailed(f"the set-up step {step['step']!r}", 1, step["error"])
        name = step["step"]
        if name in what:
            said = step.get("said")
            log(what[name] + (f" {json.dumps(said)}" if name in ("automations", "limits") else
                              " skillreach-service" if name == "variable" else ""))
        if time.monotonic() > deadline:
            break
    code = proc.wait(timeout=60)
    if code != 0:
        raise StepFailed("the service set-up", code, _why("".join(other)))


def serve(port: int = 4200, pool: str | None = None, log: Callable[[str], None] = print,
          host: str = "127.0.0.1") -> int:
    """Bring the service up and keep the worker in the foreground; returns the exit code. ``host`` is
    the address the server binds (127.0.0.1 by default; the service itself talks to it locally);
    ``pool``: the work pool (else ``$SKILLREACH_WORK_POOL``, which doctor and status read too, else
    ``skillreach``). A second serve for the same folder (or ``PREFECT_HOME``) is refused (exit 2), and so
    is a study configuration that does not load."""
    from skillreach.errors import SkillreachError
    from skillreach.service.instance import ServiceLock, ServiceRunning

    workdir = Path.cwd().resolve()
    env = prefect_env(port, workdir, pool)
    pool = env[POOL_ENV]
    try:
        lock = ServiceLock(workdir, Path(env["PREFECT_HOME"])).acquire()
    except ServiceRunning as exc:
        log(f"serve: {exc.message}")
        return 2
    try:
        cron, tz = nightly_schedule(env)  # a bad one stops here, in one line, before anything starts
    except SkillreachError as exc:
        lock.release()
        log(f"serve: {exc.message}")
        return 2
    config = os.environ.get(CONFIG_ENV)
    if config and not Path(config).is_absolute():  # the flow runs (and status) read the same file
        os.environ[CONFIG_ENV] = env[CONFIG_ENV] = str((workdir / config).resolve())
    try:
        return _serve(workdir=workdir, env=env, pool=pool, host=host, port=port, cron=cron, tz=tz,
                      lock=lock, log=log)
    finally:
        lock.release()


CONFIG_ENV = "SKILLREACH_STUDY_CONFIG"


def _serve(*, workdir: Path, env: dict[str, str], pool: str, host: str, port: int, cron: str, tz: str,
           lock: Any, log: Callable[[str], None]) -> int:
    from skillreach.errors import SkillreachError

    api = env["PREFECT_API_URL"]
    if lock.previous is not None:
        take_over(lock.previous, log)
    log(f"serve: nightly compliance on cron {cron!r} ({tz}); {NIGHTLY_CRON_ENV} / {NIGHTLY_TZ_ENV} change it")
    for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, or a service manager's stop: same clean exit
        signal.signal(sig, _interrupt)
    Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    from skillreach.deployments.logs import log_dir, pump, rotating_logger, write_logging_config

    logs = log_dir(env, workdir)
    server_log, worker_log = rotating_logger(logs / "server.log", "server"), rotating_logger(
        logs / "worker.log", "worker")
    server: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None
    setup: subprocess.Popen[str] | None = None
    service: Service | None = None
    stopping, server_lost = threading.Event(), threading.Event()
    spec = deploy_file(env)
    variable = {"folder": str(workdir), "pid": os.getpid()}
    try:
        started = None
        if wait_healthy(api, timeout_s=1):
            log(f"serve: using the Prefect server already running at {api}")
        else:
            log(f"serve: starting a Prefect server on {host}:{port} (state in {env['PREFECT_HOME']})")
            server_env = dict(env)

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

            started = start_server()
        # the set-up's imports, and the study configuration read here, overlap the server's boot
        setup = run_setup(env, workdir, pool=pool, spec=spec, variable=variable)
        env["PREFECT_LOGGING_SETTINGS_PATH"] = str(write_logging_config(logs))  # every run: runs.log
        log(f"serve: service log in {logs} (server.log, worker.log, runs.log; rotated at 10 MB)")
        try:
            cfg = service_config(workdir)
        except SkillreachError as exc:
            log(f"serve: {exc.message}")
            return 2
        service = Service(describe(workdir, env, pool, cfg), env, log)
        history = ({"restarts": lock.previous.restarts, "restart_count": lock.previous.restart_count}
                   if lock.previous is not None else {})  # the restarts said before stay its history
        service.save(server_pid=started.pid if started else None, **history)
        log(f"serve: the service of {workdir} (pid {os.getpid()}); its study: "
            f"{service.info.config_file or 'the bundled example'}; store {service.info.store}")
        if started is not None:
            if not wait_healthy(api, 180, started):
                text = (logs / "server.log").read_text(encoding="utf-8", errors="replace")
                log(f"serve: the Prefect server did not become healthy: {_why(text)} "
                    f"(all of it: {logs / 'server.log'})")
                return 1

            def lost() -> None:
                server_lost.set()
                _thread.interrupt_main()  # the foreground loop stops as on Ctrl-C; serve exits 1

            said = service
            keep_alive(start_server, started, lambda p: wait_healthy(api, 180, p), log, stop=stopping,
                       on_fail=lost, on_restart=lambda *r: said.restarted("server", *r))
        log("serve: server healthy; creating the work pool, deploying, the automations")
        finish_setup(setup, log)
        from skillreach.ui.server import dashboard_beside  # the team's dashboard, beside the Prefect UI

        dashboard_beside(env, host=host, log=log)
        log(f"serve: worker on pool {pool!r} — UI at {api.removesuffix('/api')} — Ctrl-C stops everything")
        workers: list[subprocess.Popen[bytes]] = []
        running = service

        def start_worker() -> subprocess.Popen[bytes]:
            proc = subprocess.Popen(_prefect("worker", "start", "--pool", pool, "--type", "process"),
                                    env=env, cwd=workdir, start_new_session=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            assert proc.stdout is not None
            pump(proc.stdout, worker_log, echo=sys.stderr)  # the terminal, as before, and worker.log
            workers[:] = [proc]
            running.save(worker_pid=proc.pid, ready_at=running.info.ready_at or _utc_now())
            return proc

        try:
            # a worker killed (kill -9) leaves its flow runs' processes: they end with it
            supervise(start_worker, log, on_exit=lambda: end_left_runs(api, log),
                      on_restart=lambda *r: running.restarted("worker", *r))
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
        stop_group(setup)
        stop_group(worker)
        stop_group(server)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(serve())
