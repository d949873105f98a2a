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


def _skill(root: Path, name: str, description: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody.\n")


@pytest.mark.parametrize(
    ("precedence", "winner"), [("first", "from the first root"), ("last", "from the second root")]
)
async def test_study_precedence_for_duplicate_names_is_configurable_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, precedence: str, winner: str
) -> None:
    from prefect.logging import disable_run_logger

    from skillreach.study import StudyConfig
    from skillreach.tasks.study import discover_skills

    _skill(tmp_path / "a", "deploy", "Deploy a release from the first root.")
    _skill(tmp_path / "b", "deploy", "Deploy a release from the second root.")
    _skill(tmp_path / "b", "rollback", "Roll a release back to the previous version.")
    monkeypatch.setenv("SKILLREACH_SKILL_PRECEDENCE", precedence)
    config = StudyConfig.build(
        None, skills=(tmp_path / "a", tmp_path / "b"), queries=tmp_path / "queries.json"
    )
    assert config.skill_precedence == precedence
    with disable_run_logger():
        found = await discover_skills.fn(config)
    by_name = {s.name: s for s in found.skills}
    assert sorted(by_name) == ["deploy", "rollback"]
    assert winner in by_name["deploy"].description
    assert any("is shadowed by" in p for p in found.problems)
