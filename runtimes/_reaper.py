"""The supervisor every agent CLI runs under (Linux): ``python -I -S _reaper.py --grace S -- CMD …``.

It makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), starts ``CMD`` as its child with
its own standard streams, and waits. Every process ``CMD`` starts stays in its tree, whatever it does:
a descendant that moves to a session or process group of its own (Codex's ``codex-linux-sandbox`` and
``bwrap``, Claude Code's hooks) is still a descendant, and one whose parent dies is handed to the
supervisor, not to ``init``. So the tree can always be ended:

- when ``CMD`` exits, whatever it left behind is killed (SIGKILL) and reaped, and the supervisor exits
  as ``CMD`` did (its exit code, or the same signal);
- on SIGTERM (the runtime ending a probe), every descendant gets SIGTERM, those still alive after
  ``--grace`` seconds get SIGKILL, and the supervisor exits by SIGTERM once none is left.

Descendants are found by walking ``/proc/*/stat`` (parent pids) from the supervisor, again and again
until none is left, so a process started while the tree is being ended is ended too. Standard library
only, run with ``-I -S``: it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
_TERM = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def descendants(root: int) -> list[int]:
    """Pids of every process below ``root`` (parent links read from ``/proc``), ended ones included.

    A process whose main thread has ended shows as a zombie while its other threads still run, and the
    children those threads started are still its own (they are handed on only when the last thread
    ends): the walk goes through zombies, or such a child would be missed and outlive the tree."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                tail = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(tail) > 1:
            children.setdefault(int(tail[1]), []).append(int(name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def reap() -> None:
    """Collect every child that has ended (the supervisor's own and the orphans handed to it)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_all(sig: int) -> int:
    """Send ``sig`` to every descendant; how many there were (ended ones not yet collected included)."""
    pids = descendants(os.getpid())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return len(pids)


def end_tree(grace: float, limit: float = 30.0) -> None:
    """SIGTERM every descendant, SIGKILL what is left after ``grace`` s, until no descendant is left, not
    even an ended one (a process is gone for good once it is collected: then nothing it started can
    still be handed on). Gives up after ``limit`` s (a process stuck in the kernel)."""
    if grace > 0 and kill_all(signal.SIGTERM):
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            reap()
            if not descendants(os.getpid()):
                break
            time.sleep(0.01)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        reap()
        if not kill_all(signal.SIGKILL):
            break
        time.sleep(0.002)
    reap()


def main(argv: list[str]) -> int:
    grace = 0.0
    if argv[:1] == ["--grace"]:
        grace, argv = float(argv[1]), argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.stderr.write("usage: _reaper.py [--grace S] -- CMD ...\n")
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    watched = {*_TERM, signal.SIGCHLD}
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # kept pending while blocked
    before = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        try:
            os.execv(argv[0], argv) if os.sep in argv[0] else os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"{argv[0]}: cannot run it: {exc.strerror}\n")
        os._exit(127)
    devnull = os.open(os.devnull, os.O_RDWR)  # the tree alone holds the streams: EOF when it is gone
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    status: int | None = None
    ending = 0
    while status is None and not ending:
        try:
            pid, code = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == child:
            status = code
            break
        reap_others(child)
        info = signal.sigtimedwait(watched, 0.5)
        if info is not None and info.si_signo in _TERM:
            ending = info.si_signo
    if ending:
        end_tree(grace)
        return die_by(ending)
    end_tree(0.0)
    if status is None:
        return 1
    if os.WIFSIGNALED(status):
        return die_by(os.WTERMSIG(status))
    return os.WEXITSTATUS(status)


def die_by(sig: int) -> int:
    """End the supervisor by ``sig``, as its program ended (the caller sees the same status)."""
    with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP keep their default
        signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    os.kill(os.getpid(), sig)
    return 128 + sig


def reap_others(child: int) -> None:
    """Collect ended orphans handed to the supervisor (never ``child``: its status is waited for)."""
    for pid in descendants_and_zombies():
        if pid != child:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def descendants_and_zombies() -> list[int]:
    """The supervisor's own children that have ended (zombies), from ``/proc``."""
    me = str(os.getpid()).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                tail = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(tail) > 1 and tail[0] == b"Z" and tail[1] == me:
            found.append(int(name))
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
