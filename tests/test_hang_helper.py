"""The shared hang limit (``tests/helpers/hang.py``) fails real hangs and passes slow machines."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.hang import run, tree_cpu_s

PY = sys.executable


def test_a_child_blocked_on_a_fifo_is_a_hang(tmp_path: Path) -> None:
    """A child that truly blocks (opening a FIFO no one writes) burns no CPU and prints nothing: judged
    hung once ``stall_s`` passes without progress, killed, however long it would have waited."""
    fifo = tmp_path / "probes.jsonl"
    os.mkfifo(fifo)
    start = time.monotonic()
    res = run([PY, "-c", f"open({str(fifo)!r}).read()"], limit_s=30, stall_s=3)
    took = time.monotonic() - start
    assert res.hung
    assert res.why == "blocked"
    assert res.code is None
    assert 3 <= took < 30, took  # judged on the stall window, not the 30 s limit


def test_a_child_that_spins_is_a_hang_at_its_cpu_budget() -> None:
    res = run([PY, "-c", "while True: pass"], limit_s=2, stall_s=60)
    assert res.hung
    assert res.why == "spinning"
    assert res.cpu_s > 2


def test_a_grandchild_s_cpu_counts_and_dies_with_the_child() -> None:
    """The CPU of descendants counts (a CLI that spins in a subprocess), and the whole group is killed."""
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'while True: pass'])"
    res = run([PY, "-c", code], limit_s=2, stall_s=60)
    assert res.hung
    assert res.why == "spinning"


def test_a_child_slowed_by_a_loaded_cpu_is_not_a_hang() -> None:
    """A child that gets the CPU only half the time (as on a loaded machine: it runs 50 ms, then waits
    50 ms for its turn): its 0.7 s of work takes longer than its 1 s limit in wall time (a wall limit
    fails it), but its CPU time advances all along: not a hang. Six busy loops beside it load the
    machine on top."""
    work = ("import time; t = time.process_time()\n"
            "while time.process_time() - t < 0.7:\n"
            "    s = time.process_time()\n"
            "    while time.process_time() - s < 0.05: pass\n"
            "    time.sleep(0.05)\n"
            "print('done')")
    spinners = [subprocess.Popen([PY, "-c", "while True: pass"], start_new_session=True) for _ in range(6)]
    try:
        res = run([PY, "-c", work], limit_s=1)
    finally:
        for s in spinners:
            s.kill()
            s.wait()
    assert not res.hung, res
    assert res.code == 0
    assert res.stdout.strip() == "done"
    assert res.seconds > 1, res  # past a 1 s wall limit: a wall-clock limit would have failed it


def test_output_and_exit_code_come_back_like_subprocess_run() -> None:
    res = run([PY, "-c", "import sys; print('out'); print('é', file=sys.stderr); sys.exit(3)"], limit_s=30)
    assert (res.code, res.stdout, res.stderr, res.hung) == (3, "out\n", "é\n", False)
    res = run([PY, "-c", "import sys; print(sys.stdin.read().upper())"], limit_s=30, input="abc")
    assert res.stdout == "ABC\n"


def test_tree_cpu_of_a_gone_process_is_zero() -> None:
    proc = subprocess.Popen([PY, "-c", "pass"])
    proc.wait()
    assert tree_cpu_s(proc.pid) == pytest.approx(0.0)
