"""The service as an operator installs and runs it, for the alert tests: the wheel of this checkout
installed into a clean venv, ``skillreach serve`` from that venv in a working folder of its own, and
what an operator types against it (``prefect deployment run``, ``skillreach alerts list``)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REPO
from tests.helpers import hang

__all__ = ["Served", "free_port", "install_wheel"]

ACTIVE = ["SCHEDULED", "PENDING", "RUNNING", "CANCELLING", "PAUSED"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def install_wheel(base: Path, extras: str = "") -> Path:
    """The wheel of this checkout (built from a copy of the tree), installed into a new venv under
    ``base`` with its ``extras`` (``anthropic``); returns the venv's ``bin`` folder. ``uv pip`` installs
    it (from its cache: seconds), the venv's own pip where uv is missing; skips when the package index
    cannot be reached."""
    src, dist, venv = base / "src", base / "dist", base / "venv"
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".skillreach", ".prefect",
        "runs", ".hypothesis"))
    uv = Path(sys.executable).with_name("uv")
    builder = [str(uv), "build", "--wheel", "--quiet", "-o", str(dist), str(src)] if uv.is_file() else [
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(src)]
    hang.finish(builder, limit_s=600, check=True)
    wheel = f"{next(dist.glob('skillreach-*.whl'))}{f'[{extras}]' if extras else ''}"
    hang.finish([sys.executable, "-m", "venv", str(venv)], limit_s=300, check=True)
    python = venv / "bin" / "python"
    if uv.is_file():
        args = [str(uv), "pip", "install", "--quiet", "--python", str(python), wheel]
    else:
        args = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "UV_PYTHON"))}
    done = hang.finish(args, env=env, limit_s=900)
    if done.returncode != 0 and re.search(r"(?i)connect|network|dns|resolve host|offline", done.stderr):
        pytest.skip(f"the package index cannot be reached: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return venv / "bin"


def _pids_with(*words: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if all(w in cmd for w in words):
                out.append(int(entry.name))
    return out


class Served:
    """``skillreach serve`` of the installed wheel in ``folder``, on ``port`` and work pool ``pool``."""

    def __init__(self, bin_dir: Path, folder: Path, env: dict[str, str], port: int, pool: str) -> None:
        self.bin, self.folder, self.port, self.pool = bin_dir, folder, port, pool
        self.env = {**env, "PATH": os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"])}
        self.api = f"http://127.0.0.1:{port}/api"
        self.log = folder / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None

    # -- the service -----------------------------------------------------------------------------------

    def start(self, timeout_s: float = 420) -> float:
        """Start it; returns the seconds until its worker was up."""
        began = time.monotonic()
        out = self.log.open("ab")
        args = [str(self.bin / "skillreach"), "serve", "--port", str(self.port), "--pool", self.pool]
        self.proc = subprocess.Popen(args, env=self.env, cwd=self.folder, start_new_session=True, stdout=out,
                                     stderr=subprocess.STDOUT)
        mark = self.said().count("serve: worker on pool")
        while self.said().count("serve: worker on pool") <= mark:
            assert self.proc.poll() is None, f"serve exited: {self.said()[-3000:]}"
            assert time.monotonic() - began < timeout_s, f"serve did not come up: {self.said()[-3000:]}"
            time.sleep(1)
        return time.monotonic() - began

    def said(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        """Ctrl-C, as an operator stops it; then nothing of it may be left (server, worker, flow runs)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        for pid in _pids_with("--port", str(self.port)) + _pids_with("--pool", self.pool):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    # -- what an operator types --------------------------------------------------------------------------

    def cli(self, *args: str, home: Path | None = None) -> hang.Outcome:
        env = {**self.env, **({"SKILLREACH_HOME": str(home)} if home else {})}
        return hang.finish([str(self.bin / "skillreach"), *args], env=env, cwd=self.folder, limit_s=300)

    def deployment_run(self, name: str) -> str:
        done = hang.finish([str(self.bin / "python"), "-m", "prefect", "deployment", "run", name],
                           env={**self.env, "PREFECT_API_URL": self.api}, cwd=self.folder, limit_s=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        found = re.search(r"UUID:\s*([0-9a-f-]{36})", done.stdout)
        assert found, done.stdout
        return found.group(1)

    # -- the Prefect API, as the UI reads it --------------------------------------------------------------

    def post(self, path: str, body: dict[str, Any]) -> Any:
        for attempt in range(30):  # across a restart of the server
            try:
                resp = httpx.post(f"{self.api}{path}", json=body, timeout=30)
                resp.raise_for_status()
                return resp.json()
            except httpx.HTTPError:
                if attempt == 29:
                    raise
                time.sleep(2)
        return None

    def runs(self, deployment: str | None = None, **flow_runs: Any) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"sort": "EXPECTED_START_TIME_ASC", "limit": 200,
                                "flow_runs": {"deployment_id": {"is_null_": False}, **flow_runs}}
        if deployment:
            body["deployments"] = {"name": {"any_": [deployment]}}
        rows: list[dict[str, Any]] = self.post("/flow_runs/filter", body)
        return rows

    def state(self, run_id: str) -> tuple[str, str]:
        [run] = self.post("/flow_runs/filter", {"flow_runs": {"id": {"any_": [run_id]}}})
        st = run.get("state") or {}
        return st.get("type", ""), st.get("name", "")

    def quiet_schedules(self) -> None:
        """The deployments' own schedules off and their scheduled runs gone (the test is the clock); runs
        scheduled by a flow (the outbox's retries) stay."""
        for dep in self.post("/deployments/filter", {"limit": 50}):
            for sched in dep.get("schedules") or []:
                resp = httpx.patch(f"{self.api}/deployments/{dep['id']}/schedules/{sched['id']}",
                                   json={"active": False}, timeout=30)
                assert resp.status_code < 300, resp.text
        for run in self.runs(state={"type": {"any_": ["SCHEDULED"]}}):
            if run.get("auto_scheduled"):
                httpx.delete(f"{self.api}/flow_runs/{run['id']}", timeout=30)

    def wait_done(self, *deployments: str, timeout_s: float = 420, since: datetime | None = None) -> None:
        """Until no run of ``deployments`` (expected to start after ``since``, when given) is due or
        running (a triggered one appears ~1 s after its event on a quiet machine: calm for 8 s of the
        machine's share of a CPU, :class:`hang.Calm`). Runs a stopped service left
        ``Pending`` stay so in Prefect (the worker that took them is gone): ``since`` passes over them —
        those expected before it, and those its worker took ahead of their time (a worker takes runs due
        in the next 10 s: PREFECT_WORKER_PREFETCH_SECONDS) before it was stopped."""
        deadline = hang.Deadline(timeout_s)
        calm = hang.Calm(8)
        while not calm.reached():
            soon = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
            window = {"before_": soon, **({"after_": since.isoformat()} if since else {})}
            due = {"state": {"type": {"any_": ACTIVE}}, "expected_start_time": window}
            busy = [r for d in deployments for r in self.runs(d, **due)
                    if not (since and _left_pending(r, since))]
            if busy:
                calm.restart()
            deadline.check(lambda b=busy: f"still busy: {[(r['name'], r['state_type']) for r in b]}\n"  # type: ignore[misc]
                                     + self.said()[-3000:])
            time.sleep(1)


def _left_pending(run: dict[str, Any], since: datetime) -> bool:
    """A run a stopped worker took (``Pending`` since before ``since``) and never started."""
    state = run.get("state") or {}
    stamp = state.get("timestamp")
    return state.get("type") == "PENDING" and bool(stamp) and datetime.fromisoformat(stamp) < since
