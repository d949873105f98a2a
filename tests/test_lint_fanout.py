"""``lint`` split over forked processes (``skillreach/skills/_fanout.py``) says exactly what one process
says, and never depends on a child: one that fails has its share done by the parent."""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from skillreach.skills import _fanout
from skillreach.skills._fanout import fan_out

lint_module = importlib.import_module("skillreach.skills.lint")

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")


def _catalog(root: Path, n: int) -> None:
    for i in range(n):
        name = f"skill-{i:03d}"
        folder = root / name
        folder.mkdir(parents=True)
        kind = i % 5
        fm = {
            0: f"name: {name}\ndescription: Use when the user asks for thing number {i} today.\n",
            1: f"name: Bad_{i}\ndescription: TODO describe this skill properly please.\n",
            2: f"name: {name}\ndescription: 'quoted: with a colon, number {i} of them'\n",
            3: f"name: {name}\ndescription: short\nmetadata:\n  version: 1.{i}\n",
            4: f"name: skill-000\ndescription: a duplicate name of the first skill, number {i}\n",
        }[kind]
        (folder / "SKILL.md").write_text(f"---\n{fm}---\n\n# {name}\n", encoding="utf-8")


def test_processes_say_what_one_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _catalog(tmp_path / "skills", 40)
    monkeypatch.setattr(lint_module, "processes_for", lambda n: 1)
    one = lint_module.lint([tmp_path / "skills"])
    monkeypatch.setattr(lint_module, "processes_for", lambda n: 3)
    three = lint_module.lint([tmp_path / "skills"])
    assert one.findings == three.findings
    assert one.files == three.files
    assert (one.listed, one.listing_chars) == (three.listed, three.listing_chars)
    assert {f.code for f in one.findings} >= {"invalid-name", "duplicate-name", "placeholder"}


def test_a_failed_child_is_redone_here() -> None:
    parent = os.getpid()

    def work(chunk: Sequence[int]) -> list[int]:
        if os.getpid() != parent:
            raise RuntimeError("a child that fails")
        return [x * 2 for x in chunk]

    results = fan_out(work, list(range(10)), 3)
    assert [x for part in results for x in part] == [x * 2 for x in range(10)]


def test_children_do_the_work(tmp_path: Path) -> None:
    parent = os.getpid()

    def work(chunk: Sequence[int]) -> list[tuple[int, bool]]:
        return [(x, os.getpid() != parent) for x in chunk]

    results = fan_out(work, list(range(9)), 3)
    assert [x for part in results for x, _ in part] == list(range(9))
    assert [any(child for _, child in part) for part in results] == [False, True, True]


def test_no_fork_beside_threads() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert _fanout.processes_for(10**6) == 1
    finally:
        stop.set()
        thread.join()
