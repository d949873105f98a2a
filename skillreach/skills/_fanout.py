"""Split a list of independent, bounded jobs (files to check) over forked processes.

``lint`` of 100,000 skills is CPU-bound Python (read, decode, YAML, checks: ~60 µs a file), so on a
machine with several cores the list is cut into one contiguous chunk per process: this process checks
the first chunk while forked children check the others and send their results back pickled through a
pipe. The results come back in the order of the chunks, so the output is the same as one process's.

Used only where it is safe and pays: ``os.fork`` exists, this process runs no other thread (a fork
copies only the calling thread, and a lock held elsewhere would stay held in the child), and there are
at least :data:`MIN_PER_PROCESS` jobs per process. A child that dies, or sends nothing readable within
:data:`CHILD_TIMEOUT_S` of the parent finishing its own chunk, is killed and its chunk is done here
instead: the answer never depends on the children. A child never outlives its parent's interest: on
any exception in the parent (Ctrl-C, SIGTERM turned into an exception) the children are killed.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["MIN_PER_PROCESS", "fan_out", "processes_for"]

T = TypeVar("T")
R = TypeVar("R")

MIN_PER_PROCESS = 2_500
"""Jobs each process gets at least; fewer do not repay a fork (a few ms) and the pickling."""
MAX_PROCESSES = 4
CHILD_TIMEOUT_S = 300.0
"""How long the parent waits for a child's result once its own chunk is done."""


def processes_for(n_jobs: int) -> int:
    """How many processes ``n_jobs`` jobs are worth: the cores this process may run on (at most
    :data:`MAX_PROCESSES`), one per :data:`MIN_PER_PROCESS` jobs, 1 where forking is not safe."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_PROCESSES, n_jobs // MIN_PER_PROCESS))


def _chunks(items: Sequence[T], n: int) -> list[Sequence[T]]:
    size, extra = divmod(len(items), n)
    out: list[Sequence[T]] = []
    start = 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _child(work: Callable[[Sequence[T]], R], chunk: Sequence[T], fd: int) -> None:
    """In the forked child: do the chunk, write the pickled result, leave without cleanup."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C at the terminal ends it quietly
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        data = pickle.dumps(work(chunk), protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        code = 0
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _collect(pid: int, fd: int, deadline: float) -> bytes | None:
    """The child's whole output, or ``None`` when it failed or stayed silent past ``deadline`` (then
    it is killed). The child is reaped either way."""
    parts: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            _reap(pid)
            return None
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        part = os.read(fd, 1 << 20)
        if not part:
            break
        parts.append(part)
    _, status = os.waitpid(pid, 0)
    return b"".join(parts) if os.waitstatus_to_exitcode(status) == 0 else None


def _reap(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def fan_out(work: Callable[[Sequence[T]], R], items: Sequence[T], processes: int) -> list[R]:
    """``[work(chunk) for chunk in items cut into processes chunks]``, the chunks after the first done
    by forked children. ``work`` must be deterministic, touch no shared state and return picklable
    values."""
    if processes <= 1 or len(items) < 2:
        return [work(items)]
    chunks = _chunks(items, min(processes, len(items)))
    children: list[tuple[int, int]] = []  # (pid, read end)
    try:
        for chunk in chunks[1:]:
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - runs in the child, which leaves by os._exit
                os.close(read_fd)
                _child(work, chunk, write_fd)
            os.close(write_fd)
            children.append((pid, read_fd))
        results = [work(chunks[0])]
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        for chunk in chunks[1:]:
            pid, fd = children[0]
            data = _collect(pid, fd, deadline)  # reaps the child
            children.pop(0)
            os.close(fd)
            # a failed child: its chunk done here, so the answer never depends on the children
            results.append(work(chunk) if data is None else pickle.loads(data))
        return results
    finally:
        for pid, fd in children:  # an exception (Ctrl-C, SIGTERM) before all were collected
            _reap(pid)
            with contextlib.suppress(OSError):
                os.close(fd)
