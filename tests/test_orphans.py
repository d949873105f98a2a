"""A worker-started flow run's process ends with its worker (issue 29, problem 8): ``kill -9`` of the
parent leaves no prober running after 10 s."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import hang

CATCHES_SIGTERM = (
    "import signal, threading, time; signal.signal(signal.SIGTERM, lambda *a: None); "
    "threading.Thread(target=time.sleep, args=(120,)).start(); "
)
"""A flow run as Prefect's engine runs one: SIGTERM caught in the main thread (the engine's handler),
a probe batch on in a worker thread that holds the interpreter open."""


@pytest.mark.parametrize("prelude", ["", CATCHES_SIGTERM], ids=["plain", "catches-sigterm"])
def test_a_flow_run_process_stops_when_its_worker_is_killed(tmp_path: Path, prelude: str) -> None:
    pid_file = tmp_path / "child.pid"
    child = (
        prelude + "import os, sys, time; from skillreach.tasks._orphans import watch_parent; "
        f"assert watch_parent(0.2); open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        "time.sleep(120)"
    )
    worker = (  # stands in for the Prefect process worker: starts the flow run, then waits
        "import os, subprocess, sys, time; "
        "env = {**os.environ, 'PREFECT__FLOW_RUN_ID': 'x'}; "
        f"subprocess.Popen([sys.executable, '-c', {child!r}], env=env); "
        "time.sleep(120)"
    )
    parent = subprocess.Popen([sys.executable, "-c", worker], start_new_session=True)
    try:
        deadline = hang.Deadline(60)
        while not pid_file.exists() or not pid_file.read_text():
            assert not deadline.expired(), "the flow run process did not start"
            time.sleep(0.1)
        flow_pid = int(pid_file.read_text())
        os.kill(parent.pid, signal.SIGKILL)  # kill -9 of the worker alone
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(flow_pid):
            assert time.monotonic() < deadline, "the flow run outlived its worker by 10 s"
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)


def test_outside_a_worker_started_run_nothing_is_watched() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT__FLOW_RUN_ID"}
    code = "from skillreach.tasks._orphans import watch_parent; print(watch_parent())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped by its new parent) is not alive
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_serve_ends_the_flow_run_processes_a_dead_worker_left() -> None:
    """`skillreach serve` after its worker died: the flow-run processes of this service (its API in their
    environment) get SIGTERM, then SIGKILL — even one that catches SIGTERM and runs a thread on."""
    from uuid import uuid4

    from skillreach.deployments.serve import end_left_runs, left_runs

    api = f"http://127.0.0.1:9/api-{uuid4().hex}"
    other = f"http://127.0.0.1:9/api-{uuid4().hex}"
    env = {**os.environ, "PREFECT__FLOW_RUN_ID": "x", "PREFECT_API_URL": api}
    mine = subprocess.Popen(
        [sys.executable, "-c", CATCHES_SIGTERM + "print('ready', flush=True); time.sleep(120)"],
        env=env,
        stdout=subprocess.PIPE,
    )
    theirs = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], env={**env, "PREFECT_API_URL": other}
    )  # another service's run: left alone
    try:
        assert mine.stdout is not None
        assert mine.stdout.readline() == b"ready\n"  # its SIGTERM handler is in place
        assert mine.pid in left_runs(api)
        lines: list[str] = []
        began = time.monotonic()
        assert end_left_runs(api, lines.append, grace_s=0.5) == [mine.pid]
        assert mine.wait(10) == -signal.SIGKILL  # it caught SIGTERM: killed after the grace
        assert time.monotonic() - began < 10
        assert lines == [f"serve: ended 1 flow-run process(es) the worker left (pids {mine.pid})"]
        assert theirs.poll() is None
        assert left_runs(api) == []
    finally:
        for p in (mine, theirs):
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait(10)
