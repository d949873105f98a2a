"""How long ``skillreach serve`` takes to be ready, and what each deployment run costs beyond its work.

Starts ``skillreach serve`` (this checkout's venv) in a fresh temporary folder twice — the first start on
an empty ``PREFECT_HOME`` (cold: the server creates its database), the second on the same home (warm) —
and prints when each of serve's steps was reached (seconds from the command's start, read from its
output as it comes) and when a worker was first online. Then it runs the ``watch`` deployment (the
bundled example, offline) ``--runs`` times, one after another, and splits each run's wall time by the
run's state history:

- ``queued``: created → Pending (the worker's poll picked it up),
- ``start``: Pending → Running (a new Python process: imports, the flow loaded, the engine set up),
- ``body``: Running → its end, of which ``tasks`` is the time its task runs took,
- ``overhead`` = the whole wall − ``tasks``.

    .venv/bin/python bench/serve_startup.py --runs 3

The machine's load average is printed beside the figures: the wall seconds move with the neighbours' load;
``cpu`` (the CPU seconds serve and every process under it had spent when a worker came online) much less.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STEPS = (
    ("server started", "serve: starting a Prefect server"),
    ("server healthy", "serve: server healthy"),
    ("deploying", "serve: deploying"),
    ("automations", "serve: alert automation"),
    ("limits", "serve: shared rate limits"),
    ("worker started", "serve: worker on pool"),
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """``skillreach serve`` in ``folder``, its output lines timestamped as they arrive."""

    def __init__(self, folder: Path, env: dict[str, str], port: int, program: str) -> None:
        self.port, self.api = port, f"http://127.0.0.1:{port}/api"
        self.began = time.monotonic()
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            [program, "serve", "--port", str(port)],
            cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self.lines.append((time.monotonic() - self.began, raw.decode("utf-8", "replace").rstrip()))

    def when(self, prefix: str) -> float | None:
        return next((t for t, line in list(self.lines) if line.startswith(prefix)), None)

    def wait_for(self, prefix: str, timeout_s: float) -> float:
        deadline = time.monotonic() + timeout_s
        while (t := self.when(prefix)) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(line for _, line in self.lines[-30:])
                raise SystemExit(f"serve never said {prefix!r}:\n{tail}")
            time.sleep(0.1)
        return t

    def cpu_s(self) -> float:
        """CPU seconds spent so far by serve and every process below it (the ones that ended included:
        their parents collected them)."""
        ticks = os.sysconf("SC_CLK_TCK")
        children: dict[int, list[int]] = {}
        stats: dict[int, list[str]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                stats[int(entry.name)] = fields
                children.setdefault(int(fields[1]), []).append(int(entry.name))
        total, todo = 0, [self.proc.pid]
        while todo:
            pid = todo.pop()
            fields = stats.get(pid)
            if fields is not None:
                total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
            todo += children.get(pid, [])
        return total / ticks

    def worker_online(self, timeout_s: float) -> float:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                pools = httpx.post(f"{self.api}/work_pools/filter", json={}, timeout=5).json()
                for pool in pools:
                    workers = httpx.post(f"{self.api}/work_pools/{pool['name']}/workers/filter", json={},
                                         timeout=5).json()
                    if any(str(w.get("status", "")).upper() == "ONLINE" for w in workers):
                        return time.monotonic() - self.began
            time.sleep(0.2)
        raise SystemExit("no worker came online")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def time_run(api: str, deployment: str, timeout_s: float = 600) -> dict[str, float]:
    """Run ``deployment`` once and split its wall time by its state history."""
    import httpx

    dep = httpx.get(f"{api}/deployments/name/{deployment}", timeout=30).json()
    run = httpx.post(f"{api}/deployments/{dep['id']}/create_flow_run", json={}, timeout=30).json()
    deadline = time.monotonic() + timeout_s
    while True:
        got = httpx.get(f"{api}/flow_runs/{run['id']}", timeout=30).json()
        state = (got.get("state") or {}).get("type")
        if state in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"run {run['id']} not finished after {timeout_s} s ({state})")
        time.sleep(0.2)
    states = httpx.get(f"{api}/flow_run_states/", params={"flow_run_id": run["id"]}, timeout=30).json()
    at = {}
    for st in sorted(states, key=lambda s: _ts(s["timestamp"])):
        at.setdefault(st["type"], _ts(st["timestamp"]))
    tasks = httpx.post(f"{api}/task_runs/filter",
                       json={"flow_runs": {"id": {"any_": [run["id"]]}}}, timeout=30).json()
    task_s = sum(float(t.get("total_run_time") or 0) for t in tasks)
    created, end = _ts(got["created"]), at.get(state, _ts(got["end_time"]) if got.get("end_time") else 0.0)
    pending, running = at.get("PENDING", created), at.get("RUNNING", created)
    return {"state": state, "wall": end - created, "queued": pending - created, "start": running - pending,
            "body": end - running, "tasks": task_s, "overhead": end - created - task_s}  # type: ignore[dict-item]


def startup(folder: Path, env: dict[str, str], label: str, program: str) -> tuple[Serve, dict[str, Any]]:
    serve = Serve(folder, env, _free_port(), program)
    ready = serve.wait_for("serve: worker on pool", 900)
    row: dict[str, Any] = {"label": label}
    for name, prefix in STEPS:
        row[name] = serve.when(prefix)
    row["worker started"] = ready
    row["worker online"] = serve.worker_online(300)
    row["cpu"] = serve.cpu_s()
    return serve, row


def _fmt(x: Any) -> str:
    return "–" if x is None else f"{x:6.1f}" if isinstance(x, float) else str(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="watch deployment runs to time (warm start)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--skillreach", default=str(Path(sys.executable).with_name("skillreach")),
                        help="the skillreach program to time (another install, e.g. of the main branch)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    folder = base / "service"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "SKILLREACH_"))}
    env.update(PREFECT_HOME=str(base / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1")
    print(f"load average {os.getloadavg()[0]:.1f} at the start; {args.skillreach}; folder {base}")
    rows = []
    try:
        for label in ("cold", "warm"):
            serve, row = startup(folder, env, label, os.path.abspath(args.skillreach))
            rows.append(row)
            if label == "warm" and args.runs:
                runs = [time_run(serve.api, "watch/watch") for _ in range(args.runs)]
            serve.stop()
    finally:
        if not args.keep:
            import shutil

            shutil.rmtree(base, ignore_errors=True)
    names = [n for n, _ in STEPS] + ["worker online", "cpu"]
    print("serve start-up, seconds from the command's start:")
    print(f"  {'':6}" + "".join(f"{n:>16}" for n in names))
    for row in rows:
        print(f"  {row['label']:6}" + "".join(f"{_fmt(row.get(n)):>16}" for n in names))
    if args.runs:
        load = os.getloadavg()[0]
        print(f"deployment runs (watch, the bundled example), seconds; load average {load:.1f}:")
        cols = ("wall", "queued", "start", "body", "tasks", "overhead")
        print("  " + "".join(f"{c:>10}" for c in cols) + "  state")
        for r in runs:
            print("  " + "".join(f"{r[c]:10.1f}" for c in cols) + f"  {r['state']}")
        mean = sum(r["overhead"] for r in runs) / len(runs)
        print(f"serve: ready (worker online) {rows[0]['worker online']:.1f} s cold, "
              f"{rows[1]['worker online']:.1f} s warm (CPU {rows[0]['cpu']:.1f} s, {rows[1]['cpu']:.1f} s); "
              f"overhead per flow run {mean:.1f} s")


if __name__ == "__main__":
    main()
