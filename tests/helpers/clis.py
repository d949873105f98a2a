"""The real agent CLIs (npm) that ``.ci/run`` installs into ``~/.cache/skillreach/``; the ``realcli``
tests skip, never pass, without them."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

__all__ = [
    "CLAUDE_CACHE",
    "CODEX_CACHE",
    "PI_CACHE",
    "Orphans",
    "real_claude",
    "real_codex",
    "real_copilot",
    "real_gemini",
    "real_opencode",
    "real_pi",
]

CLAUDE_CACHE = Path(
    os.environ.get("SKILLREACH_CLAUDE_CACHE", Path.home() / ".cache" / "skillreach" / "claude-code")
)
PI_CACHE = Path(os.environ.get("SKILLREACH_PI_CACHE", Path.home() / ".cache" / "skillreach" / "pi"))
CODEX_CACHE = Path(os.environ.get("SKILLREACH_CODEX_CACHE", Path.home() / ".cache" / "skillreach" / "codex"))
_PI_STUB = Path(__file__).resolve().parents[1] / "fakes" / "pi_stub" / "pi"


def real_claude() -> str | None:
    """The real ``claude`` binary: ``SKILLREACH_REAL_CLAUDE``, else the npm cache."""
    explicit = os.environ.get("SKILLREACH_REAL_CLAUDE")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for arch in ("linux-x64", "linux-arm64"):
        candidate = CLAUDE_CACHE / "node_modules" / "@anthropic-ai" / f"claude-code-{arch}" / "claude"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def real_pi() -> str | None:
    """The real ``pi``: ``SKILLREACH_TEST_PI``, else ``pi`` on PATH, else the npm cache (never the stub)."""
    for candidate in (
        os.environ.get("SKILLREACH_TEST_PI"),
        shutil.which("pi"),
        str(PI_CACHE / "node_modules" / ".bin" / "pi"),
    ):
        if (
            candidate
            and Path(candidate).is_file()
            and os.access(candidate, os.X_OK)
            and Path(candidate).resolve() != _PI_STUB.resolve()
        ):
            return candidate
    return None


def real_codex() -> str | None:
    """The real ``codex`` (``@openai/codex``): ``SKILLREACH_REAL_CODEX``, else the npm cache."""
    explicit = os.environ.get("SKILLREACH_REAL_CODEX")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    candidate = CODEX_CACHE / "node_modules" / ".bin" / "codex"
    return str(candidate) if os.access(candidate, os.X_OK) else None


GEMINI_CACHE = Path(
    os.environ.get("SKILLREACH_GEMINI_CACHE", Path.home() / ".cache" / "skillreach" / "gemini-cli")
)
OPENCODE_CACHE = Path(
    os.environ.get("SKILLREACH_OPENCODE_CACHE", Path.home() / ".cache" / "skillreach" / "opencode")
)
COPILOT_CACHE = Path(
    os.environ.get("SKILLREACH_COPILOT_CACHE", Path.home() / ".cache" / "skillreach" / "copilot")
)


def _cached(variable: str, cache: Path, program: str) -> str | None:
    explicit = os.environ.get(variable)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    candidate = cache / "node_modules" / ".bin" / program
    return str(candidate) if os.access(candidate, os.X_OK) else None


def real_gemini() -> str | None:
    """The real ``gemini`` (``@google/gemini-cli``): ``SKILLREACH_REAL_GEMINI``, else the npm cache."""
    return _cached("SKILLREACH_REAL_GEMINI", GEMINI_CACHE, "gemini")


def real_opencode() -> str | None:
    """The real ``opencode`` (``opencode-ai``): ``SKILLREACH_REAL_OPENCODE``, else the npm cache."""
    return _cached("SKILLREACH_REAL_OPENCODE", OPENCODE_CACHE, "opencode")


def real_copilot() -> str | None:
    """The real ``copilot`` (``@github/copilot``): ``SKILLREACH_REAL_COPILOT``, else the npm cache."""
    return _cached("SKILLREACH_REAL_COPILOT", COPILOT_CACHE, "copilot")


def hold_hooks_left(orphans: Orphans, within_s: float = 2.0) -> list[str]:
    """Command lines of claude-code's hold hooks (and the supervisors whose command names them) below this
    test process, still alive after up to ``within_s`` (a :class:`hang.Deadline`: on a loaded machine a
    killed process can take a moment to be scheduled and die). The runtime SIGKILLs them as its probe ends.

    Only this test's own: ``orphans`` (an active :class:`Orphans`) makes this process the subreaper a
    hook is handed to when its probe's tree dies, so a leaked hook is still below it — and another
    test's hooks, running beside it from the same interpreter on another pytest-xdist worker, never are
    (matching every process of this interpreter failed a test with 15 hooks of ``test_runtime_stress``)."""
    import time

    from tests.helpers import hang

    deadline = hang.Deadline(within_s)
    while (left := orphans.hold_hooks()) and not deadline.expired():
        time.sleep(0.05)
    return left


class Orphans:
    """Every process a test starts stays findable (Linux): the test process becomes a child subreaper
    (``prctl(PR_SET_CHILD_SUBREAPER)``), so a process left behind by an agent CLI — even one in a session
    of its own whose parent has died — is handed to it instead of ``init``, and :meth:`left` finds it by
    walking the parent links in ``/proc``. Used as a context manager; the flag is cleared on exit and the
    ended orphans handed over are reaped."""

    def __enter__(self) -> Orphans:
        import ctypes
        import sys

        if not sys.platform.startswith("linux"):
            import pytest

            pytest.skip("the process tree is walked in /proc (Linux)")
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        return self

    def __exit__(self, *exc: object) -> None:
        self._libc.prctl(36, 0, 0, 0, 0)
        self._reap()

    @staticmethod
    def _reap() -> None:
        for pid, state, _ in _tree(os.getpid()):
            if state == "Z":
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)

    def hold_hooks(self) -> list[str]:
        """Full command lines of the live descendants that carry claude-code's hold hook (the hook, and a
        supervisor or agent whose arguments hold it); zombies handed over are reaped first."""
        self._reap()
        found = []
        for pid, state, _ in _tree(os.getpid()):
            if state in ("Z", "X"):
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "hold-%d" in cmd:
                found.append(f"{pid} {cmd}")
        return found

    def left(self, within_s: float = 5.0) -> list[str]:
        """Command lines of the descendants of this process still alive after up to ``within_s`` (zombies
        handed over are reaped meanwhile): what an ended probe left behind."""
        import time

        deadline = time.monotonic() + within_s
        while True:
            self._reap()
            alive = [f"{pid} {cmd}" for pid, state, cmd in _tree(os.getpid()) if state not in ("Z", "X")]
            if not alive or time.monotonic() >= deadline:
                return alive
            time.sleep(0.1)


def _tree(root: int) -> list[tuple[int, str, str]]:
    """(pid, state, command line) of every process below ``root``, from ``/proc``."""
    children: dict[int, list[tuple[int, str, str]]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            tail = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError):
            continue
        children.setdefault(int(tail[1]), []).append((int(proc.name), tail[0], cmd[:200]))
    found: list[tuple[int, str, str]] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found
