"""The shared hang limit (``tests/helpers/hang.py``) fails real hangs and passes slow machines."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.hang import (
    DEADLINE_WALL_FACTOR,
    Calm,
    Deadline,
    communicate,
    cpu_share,
    run,
    tree_cpu_s,
    wait,
)

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


@contextlib.contextmanager
def _busy_loops(n: int) -> Iterator[None]:
    """``n`` CPU-bound processes on the machine while the block runs (runnable when it starts)."""
    spinners = [subprocess.Popen([PY, "-c", "while True: pass"], start_new_session=True) for _ in range(n)]
    try:
        time.sleep(0.5)  # the loops are runnable
        yield
    finally:
        for s in spinners:
            s.kill()
            s.wait()


def test_a_deadline_runs_at_the_machines_share_of_a_cpu() -> None:
    """A wait on a service (no one child to judge) is limited by a :class:`Deadline` whose clock runs
    at this machine's share of a CPU: with eight busy loops on the machine (at most a quarter of a CPU
    each on two cores, at most half on four) a 1 s budget is not spent after 1.5 s of wall time, and
    the wall backstop still ends the wait. On its own the clock never runs faster than the wall."""
    with _busy_loops(8):
        assert cpu_share() <= min(1.0, (os.cpu_count() or 1) / 8 * 1.5), cpu_share()
        deadline = Deadline(1.0)
        start = time.monotonic()
        while not deadline.expired():
            time.sleep(0.05)
        took = time.monotonic() - start
    assert took > 1.5, took  # a wall-clock limit would have ended it at 1 s
    assert took <= 1.0 * DEADLINE_WALL_FACTOR + 1, took  # the backstop
    # the budget spent — or, when the machine gave this process less than 1/6 of a CPU (eight loops
    # beside stress-ng and the rest of the suite on two cores), the wall backstop ended it first
    assert deadline.used_s == pytest.approx(1.0, abs=0.3) or took >= 1.0 * DEADLINE_WALL_FACTOR, (
        deadline.used_s, took)
    quiet = Deadline(0.3)
    while not quiet.expired():
        time.sleep(0.05)
    assert time.monotonic() - quiet.start >= 0.3  # never faster than the wall
    with pytest.raises(AssertionError, match=r"the run never finished \(waited \d+ s wall"):
        quiet.check(lambda: "the run never finished")


def test_a_quiet_period_is_measured_at_the_machines_share_of_a_cpu() -> None:
    """"Nothing more happened for 1 s" (:class:`Calm`) is 1 s of the machine's share of a CPU: with four
    busy loops per core beside it, not reached after 1.5 s of wall time (a run a service creates ~1 s
    after its event on a quiet machine comes later on a loaded one, and a wall window would already have
    called the service calm); a change starts it again; the wall backstop still ends it."""
    with _busy_loops(4 * (os.cpu_count() or 1)):
        calm = Calm(1.0)
        start = time.monotonic()
        changed = False
        while not calm.reached():
            if not changed and time.monotonic() - start > 0.5:
                calm.restart()  # something happened half a second in
                changed = True
            time.sleep(0.05)
        took = time.monotonic() - start
    assert changed
    assert took > 0.5 + 1.5, took  # a wall window would have ended it at 1.5 s
    assert took <= 0.5 + 1.0 * DEADLINE_WALL_FACTOR + 1, took  # the backstop, after the change
    quiet = Calm(0.3)
    start = time.monotonic()
    while not quiet.reached():
        time.sleep(0.05)
    assert 0.3 <= time.monotonic() - start < 0.3 * DEADLINE_WALL_FACTOR + 1  # never faster than the wall


def test_wait_and_communicate_end_a_child_at_the_deadline() -> None:
    """``wait``/``communicate`` are ``Popen.wait``/``communicate`` on a :class:`Deadline`: a child that
    never ends is killed with its group and fails the test naming itself; one that ends gives its exit
    code and output."""
    proc = subprocess.Popen([PY, "-c", "import time; time.sleep(600)"], start_new_session=True)
    start = time.monotonic()
    with pytest.raises(AssertionError, match="did not end"):
        wait(proc, 0.5)
    assert proc.returncode == -9
    assert time.monotonic() - start < 0.5 * DEADLINE_WALL_FACTOR + 5
    proc = subprocess.Popen([PY, "-c", "print('x' * 200_000); raise SystemExit(4)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, _ = communicate(proc, 60)  # 200 kB through a pipe: read all along, never blocked
    assert (proc.returncode, len(out)) == (4, 200_001)
    proc = subprocess.Popen([PY, "-c", "raise SystemExit(5)"])
    assert wait(proc, 60) == 5
