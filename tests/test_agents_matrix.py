"""``skillreach run --runtime a,b``: one study per agent on the same sealed query set and catalog, and their
matrix (activation and false activation per skill and agent with intervals, the skills routed
significantly differently, paired as ``diff`` does, and each agent's collisions): terminal and HTML."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillreach.cli import main


def test_the_bundled_example_across_two_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--runtime", "keyword,retriever", "--out", "agents"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "agents" / "keyword" / "artifact.json").is_file()
    assert (tmp_path / "agents" / "retriever" / "artifact.json").is_file()
    assert "Skill routing across agents" in out
    assert "keyword act." in out
    assert "retriever false" in out
    assert "keyword collisions: " in out
    assert "retriever collisions: " in out
    row = next(line for line in out.splitlines() if "incident-triage" in line and "[" in line)
    assert row.count("[") == 4  # activation and false activation, with intervals, for each agent
    page = (tmp_path / "agents" / "agents.html").read_text()
    assert page.startswith("<!doctype html>")
    assert "Skills routed significantly differently" in page
    assert "<script" not in page
    assert page.count("<tr><th>") >= 13
    markdown = (tmp_path / "agents" / "agents.md").read_text()
    assert markdown.startswith("### Skill routing across agents\n\n| skill | keyword activation |")
    assert "| incident-triage | 1.00 [0.57, 1.00] |" in markdown


def test_agent_matrix_finds_a_skill_routed_differently(tmp_path: Path) -> None:
    from skillreach.author.agents import agent_matrix
    from skillreach.author.diff import load_arm

    assert main(["run", "--runtime", "keyword", "--out", str(tmp_path / "a")]) == 0
    assert main(["run", "--runtime", "keyword", "--out", str(tmp_path / "b")]) == 0
    a, b = load_arm(tmp_path / "a", "a"), load_arm(tmp_path / "b", "b")
    m = agent_matrix([a, b])
    assert m.gaps == []  # the same agent twice: nothing differs
    assert m.agents == ["a", "b"]
    cell = m.cells["incident-triage"]["a"]
    assert cell.activation == 1.0
    assert cell.false_activation_ci is not None


def test_two_agents_that_routed_alike_make_no_gap_and_no_refusal(tmp_path: Path) -> None:
    """The same artifact twice (two agents that routed every probe alike): the matrix says nothing
    differs, where ``diff`` refuses "an arm compared with itself"."""
    import shutil

    from skillreach.author.agents import agent_matrix
    from skillreach.author.diff import load_arm

    assert main(["run", "--runtime", "keyword", "--out", str(tmp_path / "a")]) == 0
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    a, b = load_arm(tmp_path / "a", "a"), load_arm(tmp_path / "b", "b")
    assert a.artifact.digest == b.artifact.digest
    m = agent_matrix([a, b])
    assert m.gaps == []
    assert m.cells["incident-triage"]["b"].activation == 1.0


def test_one_runtime_twice_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--runtime", "keyword,keyword"]) == 2
    assert "name two or more different runtimes" in capsys.readouterr().err


def test_each_agent_takes_its_own_table_of_runtime_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.chdir(tmp_path)
    (tmp_path / "study.toml").write_text("[runtime_options.retriever]\nk = 1\n", encoding="utf-8")
    assert main(["run", "--config", "study.toml", "--runtime", "keyword,retriever", "--out", "agents"]) == 0
    capsys.readouterr()
    study = json.loads((tmp_path / "agents" / "retriever" / "study.json").read_text())
    assert '"k": 1' in json.dumps(study) or "'k': 1" in str(study)
    (tmp_path / "study.toml").write_text("[runtime_options.retriever]\nkk = 1\n", encoding="utf-8")
    assert main(["run", "--config", "study.toml", "--runtime", "keyword,retriever", "--out", "again"]) == 2
    assert "runtime_options.kk: the retriever runtime has no option 'kk'" in capsys.readouterr().err
