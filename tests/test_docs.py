"""Docs that cannot drift: every command the README shows exists and every flag it shows is real."""

from __future__ import annotations

import re
import shlex

import typer.main

from skillreach.cli import app
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _invocations() -> list[list[str]]:
    """``skillreach …`` in inline code, and ``skillreach …`` lines of code blocks."""
    texts = re.findall(r"`skillreach ([^`]+)`", README)
    texts += re.findall(r"^(?:\.venv/bin/| {4})skillreach ([^#\n]+)", README, flags=re.MULTILINE)
    return [shlex.split(t.replace("...", "")) for t in texts]


def _resolve(words: list[str]):  # type: ignore[no-untyped-def]
    cmd = typer.main.get_command(app)
    path = []
    for w in words:
        sub = getattr(cmd, "commands", {}).get(w) if not w.startswith("-") else None
        if sub is None:
            break
        cmd = sub
        path.append(w)
    return cmd, path


def test_readme_has_the_two_commands_first() -> None:
    first_block = README.split("```")[1]
    assert "make demo" in first_block
    assert "make test" in first_block


def test_every_readme_command_and_flag_exists() -> None:
    invocations = [w for w in _invocations() if w]
    assert len(invocations) >= 10, "the README should show the commands"
    root = {o for p in typer.main.get_command(app).params for o in p.opts}
    for words in invocations:
        if words[0] in root:  # skillreach --version
            continue
        cmd, path = _resolve(words)
        assert path, f"README shows an unknown command: skillreach {' '.join(words)}"
        assert not hasattr(cmd, "commands"), f"README shows a group without a command: {path}"
        flags = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for w in words[len(path):]:
            if w.startswith("--"):
                assert w.split("=")[0] in flags, f"skillreach {' '.join(path)} has no option {w}"
