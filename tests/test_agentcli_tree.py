"""Nothing an agent CLI starts outlives its probe: ``run_json_lines`` runs the program under the supervisor
(``runtimes/_reaper.py``, a child subreaper), which ends the whole tree — processes in sessions of their
own, whose parents have died, included (Codex's ``codex-linux-sandbox`` and ``bwrap`` escaped the process
group kill). Real executables (shell scripts), the tree walked in ``/proc`` from the test process, itself
a subreaper (``tests.helpers.clis.Orphans``), so a process left behind cannot hide under ``init``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from skillreach.runtimes._agentcli import end_group, run_command, run_json_lines, supervised
from tests.helpers.clis import Orphans, hold_hooks_left

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc and prctl")

LEAVER = """#!/bin/bash
# a daemon in a session of its own, one that double-forks, and a child of a child that exits at once
setsid sleep 300 &
( setsid bash -c 'sleep 301 & exec sleep 302' & )
bash -c 'setsid sleep 303 & exit 0'
echo '{"type": "ready"}'
sleep "${1:-0}"
echo '{"type": "done"}'
"""


def leaver(tmp_path: Path) -> str:
    path = tmp_path / "leaver"
    path.write_text(LEAVER)
    path.chmod(0o755)
    return str(path)


async def test_a_program_that_exits_leaves_nothing_behind(tmp_path: Path) -> None:
    seen: list[str] = []
    with Orphans() as orphans:
        result = await run_json_lines(
            [leaver(tmp_path), "0"],
            env={"PATH": os.environ["PATH"]},
            cwd=tmp_path,
            on_event=lambda e: seen.append(str(e["type"])) is None,
            timeout_s=30,
        )
        left = orphans.left(within_s=5.0)
    assert seen == ["ready", "done"]
    assert result.returncode == 0
    assert not result.stopped_early
    assert left == []


async def test_a_program_stopped_early_leaves_nothing_behind(tmp_path: Path) -> None:
    stop = asyncio.Event()

    def on_event(event: dict[str, Any]) -> bool:
        if event["type"] == "ready":
            stop.set()  # as a stream does when the target is loaded (e.g. from a receiver's thread)
        return True

    with Orphans() as orphans:
        t0 = time.monotonic()
        result = await run_json_lines(
            [leaver(tmp_path), "120"], env={"PATH": os.environ["PATH"]}, cwd=tmp_path, on_event=on_event,
            timeout_s=60, kill_grace_s=0.0, stop=stop,
        )  # fmt: skip
        took = time.monotonic() - t0
        left = orphans.left(within_s=5.0)
    assert result.stopped_early
    assert result.killed
    assert took < 20  # not the program's 120 s
    assert left == []


async def test_a_timeout_and_a_helper_command_leave_nothing_behind(tmp_path: Path) -> None:
    with Orphans() as orphans:
        result = await run_json_lines(
            [leaver(tmp_path), "120"], env={"PATH": os.environ["PATH"]}, cwd=tmp_path,
            on_event=lambda e: True, timeout_s=3, kill_grace_s=0.5,
        )  # fmt: skip
        ran = await run_command(
            [leaver(tmp_path), "120"], env={"PATH": os.environ["PATH"]}, cwd=tmp_path, timeout_s=2
        )
        left = orphans.left(within_s=5.0)
    assert result.timed_out
    assert ran is None
    assert left == []


async def test_the_supervisor_passes_the_exit_code_and_a_signal_through(tmp_path: Path) -> None:
    script = tmp_path / "code"
    script.write_text("#!/bin/sh\necho '{}'\nexit 7\n")
    script.chmod(0o755)
    result = await run_json_lines(
        [str(script)], env={"PATH": os.environ["PATH"]}, cwd=tmp_path, on_event=lambda e: True, timeout_s=30
    )
    assert result.returncode == 7
    killed = tmp_path / "killed"
    killed.write_text("#!/bin/sh\necho '{}'\nkill -KILL $$\n")
    killed.chmod(0o755)
    result = await run_json_lines(
        [str(killed)], env={"PATH": os.environ["PATH"]}, cwd=tmp_path, on_event=lambda e: True, timeout_s=30
    )
    assert result.returncode == -9
    missing = await run_json_lines(
        [str(tmp_path / "nope")], env={"PATH": os.environ["PATH"]}, cwd=tmp_path, on_event=lambda e: True,
        timeout_s=30,
    )  # fmt: skip
    assert missing.returncode == 127
    assert "cannot run it" in missing.stderr


async def test_end_group_ends_a_supervisor_that_does_not_answer(tmp_path: Path) -> None:
    """The fallback: a supervisor stopped (SIGSTOP) cannot end its tree; the runtime kills every
    process of it found in /proc."""
    with Orphans() as orphans:
        proc = await asyncio.create_subprocess_exec(
            *supervised([leaver(tmp_path), "120"], 0.0),
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdout is not None
        await proc.stdout.readline()
        os.kill(proc.pid, 19)  # SIGSTOP
        await end_group(proc, 0.0)
        left = orphans.left(within_s=5.0)
    assert proc.returncode is not None
    assert left == []


def _left_behind(code: str) -> int:
    """``python -c code`` in a session of its own whose parent exits at once (a leaked process): its pid."""
    start = (f"import subprocess as s, sys; p = s.Popen([sys.executable, '-c', {code!r}], "
             "start_new_session=True, stdin=s.DEVNULL, stdout=s.DEVNULL, stderr=s.DEVNULL); print(p.pid)")
    return int(subprocess.run([sys.executable, "-c", start], capture_output=True, text=True, check=True,
                              timeout=60).stdout)


def test_the_hold_hook_check_sees_its_own_leak_and_not_another_tests_hook() -> None:
    """``hold_hooks_left`` (what the real-Claude-Code tests assert empty) counts a hook this test leaked —
    orphaned, so handed to the test process by :class:`Orphans` — and not a hook of the same interpreter
    that is not below the test (another pytest-xdist worker's probe, running beside it: counting those
    failed a real-CLI test under three workers)."""
    hook = "import time; time.sleep(120)  # the hook's script names 'hold-%d'"
    others = _left_behind(hook)  # outside Orphans: handed to init, like another worker's hook
    mine = 0
    try:
        with Orphans() as orphans:
            assert hold_hooks_left(orphans, within_s=0.2) == []
            mine = _left_behind(hook)
            assert [int(line.split()[0]) for line in hold_hooks_left(orphans, within_s=0.2)] == [mine]
            os.kill(mine, signal.SIGKILL)
            assert hold_hooks_left(orphans) == []  # killed, reaped: gone
    finally:
        for pid in (others, mine):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
