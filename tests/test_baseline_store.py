"""The one baseline store: files in the skills' git repository, one commit per event, a service branch
that never touches the working tree, and two writers at once losing nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from skillreach.baselines.record_store import BaselineRepo
from skillreach.baselines.records import BaselineRecord
from skillreach.errors import InputError
from tests.helpers import hang

REPO_ROOT = Path(__file__).resolve().parents[1]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def init(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "skills").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.invalid")
    git(repo, "config", "user.name", "Dev")
    (repo / "skills" / "README").write_text("skills\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def record(skill: str, activation: float = 0.5, model: str = "m-1") -> BaselineRecord:
    return BaselineRecord.model_validate({
        "baseline_id": f"{skill}@2026-12-01T00:00:00Z", "skill": skill, "created_at": "2026-12-01T00:00:00Z",
        "skill_version": "sha256:" + "0" * 64, "skill_version_origin": "content",
        "corpus_version": "sha256:" + "1" * 64, "model": model, "runtime": "fake", "runs_per_case": 1,
        "cases": {"positive": 1, "negative": 0},
        "metrics": {"activation": {"value": activation, "ci95": [0.0, 1.0], "n": 1, "cases": 1},
                    "false_activation": None, "compliance": None, "task_quality": None},
        "per_case": {"q1": {"role": "positive", "kind": "implicit", "probes": 1,
                            "activated": [int(activation >= 0.5)]}},
    })


def test_one_commit_for_all_records_of_an_event_on_the_service_branch(tmp_path: Path) -> None:
    repo = init(tmp_path)
    head = git(repo, "rev-parse", "HEAD")
    store = BaselineRepo(repo, branch="skillreach/baselines")
    done = store.commit([record("a"), record("b")], candidates=[record("c", 0.0)],
                        subject="baselines: model snapshot changed m-0 → m-1", why=["all re-recorded"])
    assert done.sha is not None
    assert git(repo, "rev-parse", "HEAD") == head  # the working tree's branch did not move
    assert git(repo, "status", "--porcelain") == ""  # nobody's working tree or index touched
    assert git(repo, "rev-list", "--count", "skillreach/baselines") == "2"  # init + one commit
    files = git(repo, "show", "--name-only", "--format=", "skillreach/baselines").splitlines()
    assert sorted(files) == ["baselines/a.json", "baselines/b.json", "baselines/candidates/c.json"]
    assert "model snapshot changed" in git(repo, "log", "-1", "--format=%B", "skillreach/baselines")
    assert store.skills() == ["a", "b"]
    assert store.skills(candidates=True) == ["c"]
    assert store.waiting()
    assert "model snapshot changed" in store.waiting()[0]
    # accepting a candidate is its own commit; an unchanged write is no commit at all
    accepted = store.commit(subject="baseline accept c", accept=["c"])
    assert accepted.accepted == ("c",)
    assert store.skills() == ["a", "b", "c"]
    assert store.skills(candidates=True) == []
    again = store.commit([record("a"), record("b")], subject="same again")
    assert again.sha is None
    with pytest.raises(InputError, match="no candidate record waits"):
        store.commit(subject="x", accept=["zzz"])


def test_the_work_tree_mode_commits_like_a_person(tmp_path: Path) -> None:
    repo = init(tmp_path)
    store = BaselineRepo(repo)
    done = store.commit([record("a")], subject="baseline a: first baseline")
    assert done.sha == git(repo, "rev-parse", "HEAD")
    assert (repo / "baselines" / "a.json").is_file()
    assert store.read("a") is not None
    assert store.read("a").skill == "a"


WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from skillreach.baselines.record_store import BaselineRepo
from test_baseline_store import record
store = BaselineRepo(Path({repo!r}), branch="skillreach/baselines")
for i in range(15):
    store.commit([record(f"{{sys.argv[1]}}-{{i}}")], subject=f"writer {{sys.argv[1]}} record {{i}}")
"""


def test_two_processes_committing_at_once_lose_nothing(tmp_path: Path) -> None:
    repo = init(tmp_path)
    code = WRITER.format(tests=str(REPO_ROOT / "tests"), repo=str(repo))
    procs = [subprocess.Popen([sys.executable, "-c", code, name], cwd=REPO_ROOT) for name in ("x", "y")]
    assert [hang.wait(p, 240) for p in procs] == [0, 0]
    store = BaselineRepo(repo, branch="skillreach/baselines")
    assert store.skills() == sorted(f"{w}-{i}" for w in "xy" for i in range(15))  # all 30 records kept
    assert git(repo, "rev-list", "--count", "skillreach/baselines") == "31"  # one commit each, none lost


def test_baseline_status_reads_the_records_the_service_keeps_on_its_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from skillreach.cli import main

    repo = init(tmp_path)
    BaselineRepo(repo, branch="skillreach/baselines").commit(
        [record("a"), record("b")], candidates=[record("c", 0.0)], subject="baselines: first nightly")
    monkeypatch.chdir(repo)
    assert not (repo / "baselines").exists()  # the working tree has none: they sit on the branch
    assert main(["baseline", "status", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(r["skill"], r["file"]) for r in shown["baselines"]] == [
        ("a", "skillreach/baselines:baselines/a.json"), ("b", "skillreach/baselines:baselines/b.json")]
    assert shown["candidates"] == ["c"]
    assert main(["baseline", "status"]) == 0
    assert "read from the service's branch skillreach/baselines" in capsys.readouterr().out
