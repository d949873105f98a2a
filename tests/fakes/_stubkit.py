"""What the stand-in agent CLIs (``pi_stub/pi``, ``goose_stub/goose``, ``antigravity_cli_stub/agy``,
``claude_stub/claude``) share. They are executables, so each puts this folder on ``sys.path`` first.

Their knobs are environment variables named after the stand-in (``PREFIX`` = ``PI``, ``GOOSE``, ``AGY``):
``<PREFIX>_STUB_PLAN`` (a JSON file ``{"<substring of the prompt>": [step, ...]}``; the longest key
found in the prompt wins), ``<PREFIX>_STUB_DELAY`` (seconds before each step) and ``<PREFIX>_STUB_LOG``
(a folder for ``argv.json``, ``env.json``, ``pid`` and, at a normal end, ``finished``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["StubLog", "emit", "frontmatter", "planned_steps", "step_delay"]


def emit(obj: dict[str, Any]) -> None:
    """One event: a JSON line on stdout, flushed at once (the runtime reads it live)."""
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def frontmatter(skill_md: Path) -> dict[str, str]:
    """The flat ``key: value`` lines of a SKILL.md's frontmatter."""
    out: dict[str, str] = {}
    lines = skill_md.read_text(encoding="utf-8").splitlines()
    if lines and lines[0].strip() == "---":
        for line in lines[1:]:
            if line.strip() == "---":
                break
            if ":" in line and not line.startswith(" "):
                k, _, v = line.partition(":")
                out[k.strip()] = v.strip().strip("'\"")
    return out


def planned_steps(prefix: str, prompt: str) -> list[Any]:
    """The steps planned for ``prompt``: the longest ``<PREFIX>_STUB_PLAN`` key found in it."""
    path = os.environ.get(f"{prefix}_STUB_PLAN")
    plan: dict[str, list[Any]] = json.loads(Path(path).read_text()) if path else {}
    return next((v for k, v in sorted(plan.items(), key=lambda kv: -len(kv[0])) if k in prompt), [])


def step_delay(prefix: str) -> float:
    return float(os.environ.get(f"{prefix}_STUB_DELAY", "0"))


class StubLog:
    """The ``<PREFIX>_STUB_LOG`` folder (nothing is written without it)."""

    def __init__(self, prefix: str) -> None:
        path = os.environ.get(f"{prefix}_STUB_LOG")
        self.folder = Path(path) if path else None

    def start(self, argv: list[str], env: dict[str, Any]) -> None:
        """``argv.json``, ``env.json`` (every variable's name, plus ``env``) and ``pid``."""
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "argv.json").write_text(json.dumps(argv))
        (self.folder / "env.json").write_text(json.dumps({"names": sorted(os.environ), **env}))
        (self.folder / "pid").write_text(str(os.getpid()))

    def copy(self, source: Path) -> None:
        """Keep a copy of a file the runtime wrote for the agent (when it exists)."""
        if self.folder is not None and source.is_file():
            (self.folder / source.name).write_text(source.read_text())

    def finished(self) -> None:
        if self.folder is not None:
            (self.folder / "finished").write_text("yes")
