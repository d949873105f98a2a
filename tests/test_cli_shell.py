"""The CLI shell: exit codes survive, user errors are one line without a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer

from skillreach.cli import app, main
from skillreach.errors import InputError


@app.command("_test-exit", hidden=True)
def _test_exit(code: int = 0, fail: bool = False) -> None:
    if fail:
        raise InputError("queries.json:3: expected_skill 'nope' is not in the catalog; fix the query")
    raise typer.Exit(code)


def test_exit_code_of_a_command_is_returned() -> None:
    assert main(["_test-exit", "--code", "3"]) == 3
    assert main(["_test-exit", "--code", "0"]) == 0


def test_user_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["_test-exit", "--fail"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "skillreach: error: queries.json:3: expected_skill 'nope' is not in the catalog; fix the query"
    ]


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["_test-exit", "--bogus"]) == 2
    assert "No such option" in capsys.readouterr().err


def test_console_script_entry_point() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from skillreach.cli import main; raise SystemExit(main(['--help']))"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0
    assert "Usage" in out.stdout
    assert "Traceback" not in out.stderr
