"""``skillreach diff A B --probe-skills DIR --staged`` (issue 18): arm B is not read but probed — A's
study (its study.json: query set, runtime, model, attempts, options) with the edited skills — stage by
stage, Δ top-1 tested against the O'Brien–Fleming boundary after each stage, and the probing stops as
soon as the verdict is known: the probes saved are never paid. Through the CLI with the offline
``keyword`` runtime, whose routing follows the descriptions, so the edit truly routes better."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.study.probe_log import read_probes
from tests.helpers import hang

SKILLREACH = Path(sys.executable).parent / "skillreach"
PER_SKILL = 16
# skill → (description of A, words its queries use; B's description adds them)
SKILLS = {
    "charts": ("Turn tables into visual summaries.", "plot quarterly revenue dashboard"),
    "containers": ("Work with container tooling.", "repair broken image layers"),
    "languages": ("Help with multilingual text.", "render letter french german"),
}


def _skills(root: Path, *, edited: bool) -> Path:
    for name, (desc, words) in SKILLS.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        text = f"{desc} Use to {words}." if edited else desc
        (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {text}\n---\n# {name}\n")
    return root


@pytest.fixture
def study_a(tmp_path: Path) -> Path:
    queries = []
    for name, (_, words) in SKILLS.items():
        for i in range(PER_SKILL):  # one query in four reads like nothing either arm describes
            text = f"{words} please, case {i}" if i % 4 != 3 else f"something unusual zq{i} qz{i}"
            queries.append({"id": f"{name}-{i:02d}", "text": text, "expected_skill": name,
                            "kind": "implicit"})
    (tmp_path / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": queries}))
    _skills(tmp_path / "skills-a", edited=False)
    _skills(tmp_path / "skills-b", edited=True)
    (tmp_path / "a.toml").write_text(
        f'skills = ["{tmp_path / "skills-a"}"]\nqueries = "{tmp_path / "queries.json"}"\n'
        'runtime = "keyword"\nattempts = 2\n'
    )
    assert main(["run", "--config", str(tmp_path / "a.toml"), "--out", str(tmp_path / "A")]) == 0
    return tmp_path


def test_a_probed_diff_stops_probing_b_once_the_edit_is_known_to_help(
    study_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = study_a
    capsys.readouterr()
    args = ["diff", str(root / "A"), str(root / "B"), "--probe-skills", str(root / "skills-b"),
            "--staged", "--looks", "4", "--vary", "description", "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    st = result["staged"]
    assert st["verdict"] == "better"
    assert st["decided_at"] is not None
    assert st["decided_at"] < st["looks_planned"]  # decided before the plan ran out
    assert st["probes_planned"] == 48 * 2  # B's probes: 48 queries × 2 attempts
    # B paid for exactly the stages it probed, nothing more
    probes_b = read_probes(root / "B" / "probes.jsonl")
    assert len(probes_b) == st["probes_used"] == 2 * st["cases_used"]
    assert st["probes_used"] < st["probes_planned"]
    assert result["pairs"] == st["cases_used"]  # the fixed diff reads the queries probed so far
    assert result["verdict"] == "better"
    # B is A's study with the edited skills: same query set, runtime and attempts
    study_b = json.loads((root / "B" / "study.json").read_text())
    study_a_file = json.loads((root / "A" / "study.json").read_text())
    assert study_b["query_set"]["digest"] == study_a_file["query_set"]["digest"]
    assert study_b["runtime"]["name"] == "keyword"
    assert study_b["config"]["attempts"] == 2
    assert study_b["config"]["skills"] == [str(root / "skills-b")]

    # a re-run resumes: nothing is probed again, the same verdict
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)["staged"]
    assert again["decided_at"] == st["decided_at"]
    assert len(read_probes(root / "B" / "probes.jsonl")) == len(probes_b)


def test_the_command_a_user_runs_and_an_edit_that_changes_nothing(study_a: Path) -> None:
    root = study_a
    same = _skills(root / "skills-c", edited=False)
    (same / "charts" / "SKILL.md").write_text(
        "---\nname: charts\ndescription: Turn tables into visual summaries, neatly.\n---\n# charts\n")
    out = hang.finish(
        [str(SKILLREACH), "diff", str(root / "A"), str(root / "C"), "--probe-skills", str(same), "--staged",
         "--looks", "3", "--vary", "description", "--skill", "charts"],
        limit_s=180,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert "staged: no detectable change at look 3 of 3" in out.stdout
    assert len(read_probes(root / "C" / "probes.jsonl")) == 48 * 2  # no early stop without a change
    # bad input: one line, exit 2
    bad = hang.finish(
        [str(SKILLREACH), "diff", str(root / "A"), str(root / "D"), "--probe-skills", str(root / "nope"),
         "--staged"],
        limit_s=60,
    )
    assert bad.returncode == 2
    assert "--probe-skills" in bad.stderr
    assert "Traceback" not in bad.stderr
