"""``skillreach run --out DIR`` where DIR holds probes of another configuration is refused in one line
naming what differs (issue 19): the study fingerprint (catalog, query set, runtime, model snapshot,
options) and the attempts are compared, not only runtime and model; ``--force`` adds it anyway; a
re-run of the same configuration resumes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.models import ProbeRecord
from skillreach.study.out_guard import out_conflict
from skillreach.study.probe_log import read_probes
from tests.helpers import hang
from tests.helpers.world import make_skills

SKILLREACH = Path(sys.executable).parent / "skillreach"


def _study(root: Path, *, queries: str = "queries.json", extra: str = "") -> Path:
    path = root / "study.toml"
    path.write_text(
        f'skills = ["skills"]\nqueries = "{queries}"\nruntime = "fake"\n{extra}'
        f'[runtime_options]\nscript = "{root / "good.json"}"\n',
        encoding="utf-8",
    )
    return path


def _refusal(capfd: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["run", "--config", "study.toml", "--out", "out", *args]) == 2
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err
    assert len(lines) == 1, err
    assert lines[0].count("holds probes of another configuration") == 1, err
    assert "--force" in lines[0]
    return lines[0]


def test_another_query_set_catalog_or_attempts_is_refused_and_force_adds_it(
    world: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    root = world["root"]
    _study(root)
    assert main(["run", "--config", "study.toml", "--out", "out"]) == 0
    probes = root / "out" / "probes.jsonl"
    first = len(read_probes(probes))
    capfd.readouterr()

    # the same configuration resumes: nothing probed again, nothing refused
    assert main(["run", "--config", "study.toml", "--out", "out"]) == 0
    assert "holds probes" not in capfd.readouterr().err
    assert len(read_probes(probes)) == first

    # another number of attempts (not part of the fingerprint; study.json says it)
    line = _refusal(capfd, "--attempts", "2")
    assert "attempts 1 → 2" in line

    # another query set: one query fewer
    data = json.loads(world["queries"].read_text(encoding="utf-8"))
    data["queries"] = data["queries"][:-1]
    (root / "fewer.json").write_text(json.dumps(data), encoding="utf-8")
    _study(root, queries="fewer.json")
    line = _refusal(capfd)
    assert "query-set digest" in line

    # the same configuration, but a skill's description edited: another catalog
    _study(root)
    make_skills(root / "skills", {"gamma": "Translate text between languages, and nothing else."})
    line = _refusal(capfd)
    assert "catalog digest" in line
    assert "query-set" not in line
    assert "attempts" not in line
    assert len(read_probes(probes)) == first  # nothing was probed by a refused run

    # another runtime option (the fingerprint's options)
    make_skills(root / "skills")
    _study(root, extra="max_turns = 5\n")
    assert "max_turns 3 → 5" in _refusal(capfd)

    # --force adds the configuration beside the first
    _study(root, queries="fewer.json")
    assert main(["run", "--config", "study.toml", "--out", "out", "--force"]) == 0
    records = read_probes(probes)
    assert len({r.fingerprint for r in records}) == 2
    assert len(records) == first + first - 1  # the new configuration's 12 queries, 1 canary-free each


def test_the_command_a_user_runs_refuses_in_one_line(world: dict[str, Path]) -> None:
    root = world["root"]
    _study(root)
    args = [str(SKILLREACH), "run", "--config", "study.toml", "--out", "out"]
    first = hang.finish(args, limit_s=120, cwd=root)
    assert first.returncode == 0, first.stderr
    again = hang.finish([*args, "--attempts", "3"], limit_s=120, cwd=root)
    assert again.returncode == 2, again.stderr
    assert "Traceback" not in again.stderr
    lines = [line for line in again.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, again.stderr
    assert "holds probes of another configuration (attempts 1 → 3)" in lines[0]


def _rec(fp: str | None, **kw: object) -> ProbeRecord:
    return ProbeRecord(query_id="q", fingerprint=fp, **kw)  # type: ignore[arg-type]


def test_without_study_json_the_records_say_what_they_can(tmp_path: Path) -> None:
    """An interrupted first run leaves probes.jsonl but no study.json: the records' own runtime and
    model snapshot are named, else the fingerprints; records without a fingerprint never conflict."""
    common = {"config": {"runtime": "anthropic", "attempts": 1}, "catalog_digest": "sha256:c",
              "queries_digest": "sha256:q"}
    other = [_rec("sha256:old", runtime="anthropic", resolved_model="claude-a-1")]
    what = out_conflict(tmp_path, other, fingerprint="sha256:new", resolved_model="claude-b-2", **common)
    assert what == "model snapshot 'claude-a-1' → 'claude-b-2'"
    same_pins = [_rec("sha256:old", runtime="anthropic", resolved_model="claude-b-2")]
    what = out_conflict(tmp_path, same_pins, fingerprint="sha256:new", resolved_model="claude-b-2", **common)
    assert what == "fingerprint sha256:old → sha256:new"
    assert out_conflict(tmp_path, [_rec(None, runtime="keyword")], fingerprint="sha256:new",
                        resolved_model=None, **common) is None
    assert out_conflict(tmp_path, [_rec("sha256:new")], fingerprint="sha256:new", resolved_model=None,
                        **common) is None
