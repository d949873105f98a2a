"""``check --changed --adaptive --max-probes N``: extra attempts on an undecided gate, in stages, until it
is decided or the budget is spent — through the command, on a git repository, with the fake runtime
standing for an agent that now misses two of four cases on some attempts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from skillreach.cli import main

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}
CASES = [f"ship{i}" for i in range(4)]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def skill(root: Path, name: str, desc: str) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    front = yaml.safe_dump({"name": name, "description": desc}, sort_keys=False)
    (root / name / "SKILL.md").write_text(f"---\n{front}---\n# {name}\n", encoding="utf-8")


def config(repo: Path, name: str, script: dict[str, object]) -> Path:
    spath = repo / "ci" / f"{name}.json"
    spath.parent.mkdir(exist_ok=True)
    spath.write_text(json.dumps(script), encoding="utf-8")
    cfg = repo / "ci" / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump({"runtime": "fake", "runtime_options": {"script": str(spath)}}))
    return cfg


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    skill(repo / "skills", "ship", "Ship a release of the web app.")
    skill(repo / "skills", "notes", "Write release notes.")
    queries = [{"id": c, "text": f"ship it, take {i}", "expected_skill": "ship", "kind": "implicit"}
               for i, c in enumerate(CASES)]
    queries += [{"id": "notes0", "text": "write the notes", "expected_skill": "notes", "kind": "implicit"}]
    (repo / "evals").mkdir()
    (repo / "evals" / "queries.json").write_text(json.dumps({"queries": queries}), encoding="utf-8")
    canary = {f"canary-{i}": ["notes"] for i in (1, 2, 3)}
    base = config(repo, "base", {**{c: ["ship"] for c in CASES}, "notes0": ["notes"], **canary})
    # after the edit every case goes to notes on one attempt in two: two cases on odd attempts, two on
    # even ones — one attempt sees two of four cases lost (undecided), two attempts see the drop as it is
    odd, even = {"attempts": [["notes"], ["ship"]]}, {"attempts": [["ship"], ["notes"]]}
    new = {**{c: (odd if i < 2 else even) for i, c in enumerate(CASES)}, "notes0": ["notes"], **canary}
    config(repo, "new", new)
    (repo / ".gitignore").write_text(".skillreach/\nout/\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "skills and cases")
    monkeypatch.chdir(repo)
    run = ["run", "--config", str(base), "--skills", "skills", "--queries", "evals/queries.json"]
    assert main([*run, "--out", "out/b"]) == 0
    assert main(["baseline", "record", "--artifact", "out/b/artifact.json", "--all", "--commit"]) == 0
    skill(repo / "skills", "ship", "Ship a release of the web app, or write notes about it.")
    git(repo, "commit", "-q", "-am", "ship: broader")
    return repo


def check(repo: Path, *extra: str) -> list[str]:
    return ["check", "--changed", "--since", "HEAD~1", "--skills", "skills", "--in-process",
            "--config", str(repo / "ci" / "new.yaml"), "--out", "out/check", *extra]


def probes(repo: Path) -> int:
    return len((repo / "out" / "check" / "probes.jsonl").read_text().splitlines())


def test_adaptive_adds_attempts_until_the_gate_is_decided(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(check(repo, "--lenient")) == 0  # one attempt: two of four cases lost, undecided
    first = capsys.readouterr().out
    assert "ship: activation 1.000 → 0.500 (lost 2 of 4 cases to notes) — inconclusive" in first
    code = main(check(repo, "--adaptive", "--max-probes", "200"))
    out = capsys.readouterr().out
    stages = [line for line in out.splitlines() if line.startswith("adaptive: ")]
    assert stages == [
        f"adaptive: notes, ship undecided: {2 * n} attempts per case (+{5 * n} probes, {10 * n} of 200)"
        for n in (1, 2, 4, 8, 16)
    ]
    assert code == 1  # decided at 32 attempts: the drop is a breach, no longer undecided
    assert "ship: activation 1.000 → 0.500 (fell on 4 of 4 cases, to notes) — breach" in out
    assert probes(repo) == 160


def test_adaptive_stops_at_its_budget(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    code = main(check(repo, "--adaptive", "--max-probes", "12"))
    out = capsys.readouterr().out
    assert "adaptive: notes, ship undecided: 2 attempts per case (+5 probes, 10 of 12)" in out
    assert (
        "adaptive: still undecided: notes, ship; the next stage (10 probes, 4 attempts per case) would pass "
        "--max-probes 12 (10 spent)" in out
    )
    assert code == 1  # still inconclusive: a merge gate fails on it
    assert probes(repo) == 10


def test_adaptive_needs_a_budget(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(check(repo, "--adaptive")) == 2
    assert "--adaptive needs a budget: pass --max-probes N" in capsys.readouterr().err
