"""A study folder describes itself (study.json + a copy of the query set): the commands that read a study
need nothing else, and no secret reaches it. Through the commands a user runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.helpers import hang

REPO = Path(__file__).resolve().parents[1]
SKILLREACH = str(Path(sys.executable).parent / "skillreach")


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> hang.Outcome:
    full = {**os.environ, "PREFECT_API_URL": "", **(env or {})}
    return hang.finish([SKILLREACH, *args], limit_s=300, cwd=cwd, env=full)


def test_run_then_record_from_the_folder_alone(tmp_path: Path) -> None:
    here, elsewhere = tmp_path / "a", tmp_path / "b"
    here.mkdir()
    elsewhere.mkdir()
    secret_db = f"sqlite:///{(tmp_path / 'db.sqlite').as_posix()}"
    hook = "https://hooks.example.invalid/services/T0/B0/SECRETTOKEN"
    env = {"SKILLREACH_DATABASE_URL": secret_db, "SKILLREACH_ALERT_WEBHOOKS": json.dumps([hook])}
    run = cli("run", "--out", str(here / "study"), cwd=here, env=env)
    assert run.returncode == 0, run.stderr
    folder = here / "study"
    study = json.loads((folder / "study.json").read_text(encoding="utf-8"))
    sealed = json.loads((folder / "query_set.json").read_text(encoding="utf-8"))
    assert study["query_set"]["digest"] == sealed["provenance"]["digest"]
    assert study["runtime"]["name"] == "keyword"
    assert study["catalog"]["digest"].startswith("sha256:")
    assert study["config"]["attempts"] == 1
    assert study["config"]["gates"]["activation"] == -0.05
    text = (folder / "study.json").read_text(encoding="utf-8")
    assert "SECRETTOKEN" not in text
    assert "db.sqlite" not in text  # the database URL is a secret: only "***" says there was one
    assert study["config"]["database_url"] == "***"
    # the spec: --artifact and --skill suffice, from any folder
    rec = cli("baseline", "record", "--artifact", str(folder / "artifact.json"), "--skill", "release-deploy",
              "--out", str(elsewhere / "rec.json"), cwd=elsewhere)
    assert rec.returncode == 0, rec.stderr
    record = json.loads((elsewhere / "rec.json").read_text(encoding="utf-8"))
    # pinned by content: the skill's own positive cases of the sealed set the study ran
    from skillreach.baselines.records import corpus_version
    from skillreach.queries.sets import load_query_set

    ran = load_query_set(folder / "query_set.json")
    assert record["corpus_version"] == corpus_version(ran, "release-deploy")
    assert record["runtime"]["name"] == "keyword"


def test_a_live_study_with_rubrics_and_no_judge_stops_before_spending(tmp_path: Path) -> None:
    """A keyword-overlap judge must not grade a real agent silently: one line, nothing probed."""
    from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS

    data = json.loads(Path(EXAMPLE_QUERIES).read_text(encoding="utf-8"))
    data["queries"][0].setdefault("checks", {})["rubric"] = "Names the change ticket."
    data["provenance"] = {}
    qpath = tmp_path / "q.json"
    qpath.write_text(json.dumps(data), encoding="utf-8")
    out = cli("run", "--skills", str(EXAMPLE_SKILLS), "--queries", str(qpath), "--runtime", "anthropic",
              "--model", "claude-sonnet-4-6", "--compliance", "--out", str(tmp_path / "s"), cwd=tmp_path,
              env={"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
    assert out.returncode == 2, out.stderr
    assert "no judge model" in out.stderr
    assert "--judge-model" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "s" / "probes.jsonl").exists()


