"""Hang limits that tell a hang from a slow machine: one helper for every test that runs a child.

A wall-clock limit fails a test whenever the machine is busy (a fresh-clone ``.ci/run`` at load 20–29
failed 63 "no answer within 30 s" limits). A child is judged by its progress instead:

- **spinning**: the child and its descendants consumed more than ``limit_s`` seconds of CPU time (a
  loop that never ends burns CPU however loaded the machine is; a slow machine does not make the same
  work cost more CPU);
- **blocked**: neither CPU time nor output advanced for ``stall_s`` seconds of wall time (a child
  waiting on a FIFO, a socket that never answers or a lock: a runnable process on a loaded machine
  still gets some CPU every few seconds);
- a last wall-clock backstop of ``limit_s × WALL_FACTOR`` (so a suite never waits forever on a child
  that makes some tiny progress for ever).

CPU time is read from ``/proc/<pid>/stat`` (utime + stime + the reaped children's cutime + cstime) for
the child and every live descendant. :func:`run` is a drop-in for ``subprocess.run(..., timeout=…)``;
its :class:`Outcome` says whether and why the child was judged hung.

A wait on a *service* (a Prefect server, ``serve`` and its worker's processes reaching a state) has no
one child to judge: :class:`Deadline` is its limit. Its clock runs at this machine's share of a CPU
(``cores / runnable tasks``, sampled at every check, never faster than the wall): 300 s of budget is
300 s on a quiet machine and ~900 s while three runnable tasks compete for each core — the same work,
not the same wall time. A wall backstop of ``budget × DEADLINE_WALL_FACTOR`` still ends a true hang.
A wait for a service to *stay* quiet (nothing more due, no alert more) is a :class:`Calm`: the same
clock, started again at every change.
:func:`wait` is the drop-in for ``Popen.wait(timeout=…)`` and ``Popen.communicate(timeout=…)``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WALL_FACTOR = 20.0
"""The wall-clock backstop, in units of ``limit_s``."""

DEADLINE_WALL_FACTOR = 6.0
""":class:`Deadline`'s wall-clock backstop, in units of its budget."""

POLL_S = 0.1
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Outcome:
    """What became of a child: ``code`` None when it was judged hung (then killed)."""

    code: int | None
    stdout: str
    stderr: str
    seconds: float
    """Wall time."""
    cpu_s: float
    """CPU time of the child and its descendants (the last reading)."""
    hung: bool = False
    why: str = ""
    """Why it was judged hung: ``spinning``, ``blocked`` or ``wall``."""

    @property
    def returncode(self) -> int | None:
        return self.code


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds including reaped children) of a live process, None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()  # after "pid (comm) "
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime + cutime + cstime) / _TICK


def _children(pid: int) -> list[int] | None:
    """The children of ``pid`` from ``/proc/<pid>/task/*/children`` (no scan of every process); ``None``
    when the kernel does not keep that file (then :func:`tree_cpu_s` scans ``/proc``)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone
    found: list[int] = []
    for tid in tasks:
        try:
            found.extend(int(x) for x in Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended meanwhile
            return None
        except OSError:
            continue
    return found


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (reaped ones count in their parent's). Walks the
    tree down from ``pid`` (≈ 0.2 ms), or scans every process where the kernel keeps no child lists."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        kids = _children(p)
        if kids is None:
            return _scan_cpu_s(pid)
        got = _stat(p)
        if got is not None:
            total += got[1]
        todo.extend(kids)
    return total


def _scan_cpu_s(pid: int) -> float:
    """:func:`tree_cpu_s` by a scan of every process's parent."""
    parents: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        got = _stat(int(entry.name))
        if got is None:
            continue
        parents.setdefault(got[0], []).append(int(entry.name))
        cpu[int(entry.name)] = got[1]
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += cpu.get(p, 0.0)
        todo.extend(parents.get(p, []))
    return total


def run(
    args: Sequence[str],
    *,
    limit_s: float,
    stall_s: float | None = None,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    started: Callable[[subprocess.Popen[bytes]], None] | None = None,
    preexec_fn: Callable[[], object] | None = None,
) -> Outcome:
    """Run ``args`` to its end, or until it is judged hung (then killed with its process group).

    ``limit_s``: CPU seconds the child may burn (and, times :data:`WALL_FACTOR`, the wall backstop);
    ``stall_s`` (default ``limit_s``): wall seconds without CPU or output progress that make it
    blocked. ``started``: called with the process once it runs (e.g. to send it a signal later); it
    runs in this thread, so keep it short. ``preexec_fn``: as :class:`subprocess.Popen`'s (a resource
    limit set in the child before exec). Output is captured to files (no pipe to fill), decoded as
    UTF-8 with replacement."""
    stall = limit_s if stall_s is None else stall_s
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            list(args),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            preexec_fn=preexec_fn,  # noqa: PLW1509 - a test's own resource limit, set before exec
        )
        if input is not None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(input.encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
        if started is not None:
            started(proc)
        cpu, why = 0.0, ""
        last_progress, last_mark = start, (-1.0, -1)
        while proc.poll() is None:
            time.sleep(POLL_S)
            now = time.monotonic()
            cpu = max(cpu, tree_cpu_s(proc.pid))
            mark = (cpu, os.fstat(out.fileno()).st_size + os.fstat(err.fileno()).st_size)
            if mark != last_mark:
                last_mark, last_progress = mark, now
            if cpu > limit_s:
                why = "spinning"
            elif now - last_progress > stall:
                why = "blocked"
            elif now - start > limit_s * WALL_FACTOR:
                why = "wall"
            if why and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            why = ""
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    if why:
        return Outcome(None, stdout, stderr, seconds, cpu, hung=True, why=why)
    return Outcome(proc.returncode, stdout, stderr, seconds, cpu)


def describe(res: Outcome, limit_s: float) -> str:
    """The assertion message of a hung child: why, after how long, what it printed."""
    return (
        f"no answer within {limit_s:.0f} s of progress (a hang: {res.why}, {res.cpu_s:.1f} s CPU in "
        f"{res.seconds:.1f} s wall)\n--- stdout\n{res.stdout[-2000:]}\n--- stderr\n{res.stderr[-2000:]}"
    )


def finish(
    args: Sequence[str],
    *,
    limit_s: float,
    check: bool = False,
    **kw: object,
) -> Outcome:
    """:func:`run` for a child that must end: a hang fails the test with :func:`describe`'s message;
    ``check``: so does an exit other than 0 (as ``subprocess.run(check=True)``, with the output shown).
    The drop-in for ``subprocess.run(args, capture_output=True, text=True, timeout=…)``."""
    res = run(args, limit_s=limit_s, **kw)  # type: ignore[arg-type]
    assert not res.hung, f"{' '.join(map(str, args))[:300]}: {describe(res, limit_s)}"
    if check:
        assert res.code == 0, (
            f"{' '.join(map(str, args))[:300]}: exit {res.code}\n--- stdout\n{res.stdout[-2000:]}\n"
            f"--- stderr\n{res.stderr[-2000:]}"
        )
    return res


def cpu_share() -> float:
    """The share of a CPU a runnable task gets right now: ``cores / runnable`` from ``/proc/loadavg``'s
    instantaneous count of runnable tasks (the reader itself not counted), at most 1."""
    cores = os.cpu_count() or 1
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0]) - 1
    except (OSError, ValueError, IndexError):
        return 1.0
    return min(1.0, cores / max(running, 1))


class Deadline:
    """A limit on a wait for a service, in the machine's CPU time rather than wall time.

    ``budget_s`` seconds of *work* time: each :meth:`expired` adds the wall time since the last check
    times :func:`cpu_share` sampled now. A hang (nothing ever happens) still ends: at ``budget_s`` on a
    quiet machine, at the wall backstop ``budget_s × DEADLINE_WALL_FACTOR`` however busy it is."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self.start = self._last = time.monotonic()
        self.used_s = 0.0

    def expired(self) -> bool:
        now = time.monotonic()
        self.used_s += (now - self._last) * cpu_share()
        self._last = now
        return self.used_s > self.budget_s or now - self.start > self.budget_s * DEADLINE_WALL_FACTOR

    def check(self, what: str | Callable[[], str]) -> None:
        """Fail the test when expired, saying ``what`` did not happen (a callable: read only then) and
        how long was waited."""
        if self.expired():
            raise AssertionError(f"{what() if callable(what) else what} ({self})")

    def __str__(self) -> str:
        wall = time.monotonic() - self.start
        return (f"waited {wall:.0f} s wall, {self.used_s:.0f} s of the machine's share of a CPU, "
                f"of a {self.budget_s:.0f} s budget")


class Calm:
    """A wait for *nothing more to happen* (no run due or running, no new alert): ``quiet_s`` seconds of
    the machine's share of a CPU without a change — a :class:`Deadline` of ``quiet_s`` started again at
    every change (:meth:`restart`). A quiet period on the wall clock fails under load the way a hang
    limit does, the other way round: a run an automation creates ~1 s after its event on a quiet machine
    was created 10 s after it at load 5.5 (``.ci/run`` beside ``stress-ng --cpu 2``), after an 8 s wall
    window had already called the service calm. Ends at most ``quiet_s × DEADLINE_WALL_FACTOR`` of wall
    time after the last change."""

    def __init__(self, quiet_s: float) -> None:
        self.quiet_s = quiet_s
        self.restart()

    def restart(self) -> None:
        """Something happened: the quiet period starts again."""
        self._clock = Deadline(self.quiet_s)

    def reached(self) -> bool:
        """``quiet_s`` of the machine's share of a CPU (or the wall backstop) since the last change."""
        return self._clock.expired()


def _kill(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL ``proc`` with its process group when it leads one, else alone (its own group is the test's)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()


def wait(proc: subprocess.Popen[Any], budget_s: float) -> int:
    """``proc.wait(timeout=…)`` on a :class:`Deadline`: its exit code; a child still running when the
    deadline expires is killed with its process group (when it leads one) and fails the test."""
    deadline = Deadline(budget_s)
    while proc.poll() is None:
        if deadline.expired():
            _kill(proc)
            proc.wait()
            raise AssertionError(f"{proc.args!r} did not end ({deadline})")
        time.sleep(POLL_S)
    return proc.returncode


def communicate(proc: subprocess.Popen[Any], budget_s: float) -> tuple[Any, Any]:
    """``proc.communicate(timeout=…)`` on a :class:`Deadline` (reads its pipes all along, so a child
    that writes much never blocks): its (stdout, stderr); killed and failing the test when it expires."""
    deadline = Deadline(budget_s)
    while True:
        try:
            return proc.communicate(timeout=1)
        except subprocess.TimeoutExpired:
            if deadline.expired():
                _kill(proc)
                out, err = proc.communicate()
                raise AssertionError(f"{proc.args!r} did not end ({deadline})\n--- stdout\n"
                                     f"{str(out)[-2000:]}\n--- stderr\n{str(err)[-2000:]}") from None
