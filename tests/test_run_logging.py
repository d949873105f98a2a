"""``skillreach run`` says each problem once (not again through Prefect's root console handler)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS


def test_a_skipped_skill_is_reported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from skillreach.cli import main

    skills = tmp_path / "skills"
    shutil.copytree(EXAMPLE_SKILLS, skills)
    (skills / "broken").mkdir()
    (skills / "broken" / "SKILL.md").write_text("no frontmatter here\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--skills", str(skills), "--queries", str(EXAMPLE_QUERIES), "--out", "out"]) == 0
    captured = capfd.readouterr()
    text = captured.out + captured.err
    assert text.count("skipped a skill") == 1, text  # rich may wrap the path itself
    assert (tmp_path / "out" / "artifact.json").is_file()
