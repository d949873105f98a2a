"""Signals to the real ``skillreach`` console script, in a subprocess: SIGTERM is one line and exit 143,
Ctrl-C (SIGINT) one line and exit 130 — never a traceback. The child's signal dispositions are reset to
the defaults (pytest may run in a background job, whose children start with SIGINT ignored)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import hang

EXE = Path(sys.executable).parent / "skillreach"


# exec the console script with SIGINT and SIGTERM at their defaults (an ignored signal stays ignored
# across exec; a default one is what a terminal gives)
EXEC_WITH_DEFAULT_SIGNALS = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                             "signal.signal(signal.SIGTERM, signal.SIG_DFL); "
                             "os.execv(sys.argv[1], sys.argv[1:])")


def _interrupt_a_study(tmp_path: Path, sig: signal.Signals) -> tuple[int, list[str]]:
    """Start the bundled example on the fake runtime (30 s a probe), wait until it probes, send ``sig``."""
    (tmp_path / "study.toml").write_text("[runtime_options]\nlatency_s = 30\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "PREFECT_API"))}
    env["SKILLREACH_HOME"] = str(tmp_path / "home")
    proc = subprocess.Popen(
        [sys.executable, "-c", EXEC_WITH_DEFAULT_SIGNALS,
         str(EXE), "run", "--runtime", "fake", "--config", "study.toml", "--out", "out"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # a signal to the test's own process group never reaches it
    )
    assert proc.stderr is not None
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "bundled example" in line:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert started.wait(120), "".join(lines)
        time.sleep(1.5)  # into the study: the flow's own handlers are in place, probes in flight
        proc.send_signal(sig)
        code = hang.wait(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    said = [ln.strip() for ln in "".join(lines).replace("\r", "\n").splitlines() if ln.strip()]
    return code, said


@pytest.mark.skipif(not EXE.exists(), reason="the console script is not installed")
def test_sigterm_is_one_line_and_exit_143(tmp_path: Path) -> None:
    code, said = _interrupt_a_study(tmp_path, signal.SIGTERM)
    assert code == 143, said
    assert not any("Traceback" in s for s in said), said
    assert [s for s in said if s.startswith("skillreach:")] == [
        "skillreach: terminated (SIGTERM); results written so far are kept (a re-run resumes)"]
    assert said[-1].startswith("skillreach: terminated")


@pytest.mark.skipif(not EXE.exists(), reason="the console script is not installed")
def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path) -> None:
    code, said = _interrupt_a_study(tmp_path, signal.SIGINT)
    assert code == 130, said
    assert not any("Traceback" in s for s in said), said
    assert [s for s in said if s.startswith("skillreach:")] == [
        "skillreach: interrupted; results written so far are kept (a re-run resumes)"]


_LIBRARY_LOGS_THE_INTERRUPT = """
import logging, sys
from skillreach import cli

def boom(kind: str) -> None:
    try:
        raise KeyboardInterrupt if kind == "interrupt" else ValueError("a real fault")
    except BaseException:
        # what SQLAlchemy's pool does when Ctrl-C cuts a connection's close: log it, traceback and all
        pool = logging.getLogger("sqlalchemy.pool.impl.NullPool")
        pool.error("Exception closing connection <c>", exc_info=True)
    raise KeyboardInterrupt

cli.app.command("boom")(boom)
sys.exit(cli.main(["boom", sys.argv[1]]))
"""


@pytest.mark.parametrize("kind", ["interrupt", "fault"])
def test_a_librarys_record_of_the_interrupt_is_not_printed(kind: str, tmp_path: Path) -> None:
    """Ctrl-C while SQLAlchemy closes a connection: its pool logs the KeyboardInterrupt with a traceback
    (seen under load in the ``run-ctrl-c`` case); the command says the interruption in its one line and
    nothing else. A library's record of any other fault is still printed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "PREFECT_API"))}
    done = hang.finish([sys.executable, "-c", _LIBRARY_LOGS_THE_INTERRUPT, kind], cwd=tmp_path, env=env,
                       limit_s=120)
    assert done.returncode == 130, done.stderr
    lines = done.stderr.splitlines()
    if kind == "interrupt":
        assert lines == ["skillreach: interrupted; results written so far are kept (a re-run resumes)"], lines
    else:
        assert "Exception closing connection <c>" in done.stderr
        assert "ValueError: a real fault" in done.stderr
