"""The baseline record and the study's report carry the skill's uplift with its interval (issue 18):
``baseline record --uplift UPLIFT_JSON`` (or ``uplift-SKILL.json`` beside the artifact) seals it into
the record, ``baseline show`` and ``skillreach report`` show it; a record without it keeps the digest
it had before the field existed; a tampered uplift is refused; a wrong uplift file is one line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from skillreach.author.uplift import uplift_report
from skillreach.baselines.records import baseline_digest, read_baseline
from skillreach.cli import main
from skillreach.models import Checks, OutputCheck, ProbeRecord, Query, QuerySet
from skillreach.queries.sets import seal, write_query_set
from tests.helpers import hang
from tests.helpers.world import SKILLS, make_skills

SKILLREACH = Path(sys.executable).parent / "skillreach"
CHECKS = Checks(output=(OutputCheck(contains="canary"),))


def _query_set() -> QuerySet:
    qs = [
        Query(id=f"{name}-{i}", text=f"please help with {name} task {i}", expected_skill=name,
              checks=CHECKS if name == "alpha" else None)
        for name in SKILLS
        for i in range(4)
    ]
    return seal(QuerySet(catalog_id="all", queries=tuple(qs)), source="test")


def _rec(qid: str, *, invoked: tuple[str, ...], good: bool, attempt: int = 1) -> ProbeRecord:
    return ProbeRecord(query_id=qid, attempt=attempt, invoked=invoked,
                       final_text="rolled out with a canary" if good else "pushed it")


def _uplift_json(qs: QuerySet, path: Path, skill: str = "alpha") -> dict[str, object]:
    """What ``skillreach uplift alpha --json`` prints for a scripted agent: with the skill it answers
    well when it loads it; alpha-0 and alpha-1 also load it on attempt 1 only (a routing miss on
    attempt 2); without the skill alpha-0 is answered as well (didn't need it), the others badly."""
    with_arm = []
    for i in range(4):
        qid = f"alpha-{i}"
        with_arm.append(_rec(qid, invoked=("alpha",), good=True))
        with_arm.append(_rec(qid, invoked=("alpha",) if i >= 2 else (), good=i >= 2, attempt=2))
    without = [_rec(f"alpha-{i}", invoked=(), good=i == 0) for i in range(4)]
    report = uplift_report(qs, skill, with_arm, without, runtime="anthropic", model="claude-sonnet-4-6",
                           attempts=2)
    path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, QuerySet]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    make_skills(tmp_path / "skills")
    qs = _query_set()
    write_query_set(qs, tmp_path / "queries.json")
    code = main(["run", "--skills", "skills", "--queries", "queries.json", "--runtime", "keyword",
                 "--out", "run"])
    assert code == 0
    return tmp_path, qs


def test_the_record_carries_uplift_and_show_and_report_print_it(
    study: tuple[Path, QuerySet], capsys: pytest.CaptureFixture[str]
) -> None:
    root, qs = study
    report = _uplift_json(qs, root / "uplift.json")
    lift = report["uplift"]
    assert isinstance(lift, dict)
    assert lift["cases"] == 4
    assert report["misses"] == {"didn't need it": 1, "wrongly skipped": 1, "unclear": 0}
    capsys.readouterr()

    args = ["baseline", "record", "--artifact", "run/artifact.json", "--skill", "alpha"]
    assert main([*args, "--uplift", "uplift.json", "--out", "rec.json"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"uplift \+0\.750 \[[-+]\d\.\d{3}, [-+]\d\.\d{3}\] over 4 cases", err), err
    rec = read_baseline(root / "rec.json")  # the digest verifies
    assert rec.uplift is not None
    assert rec.uplift.value == pytest.approx(0.75)
    assert rec.uplift.ci95 == pytest.approx(tuple(lift["ci95"]))
    assert rec.uplift.n == 4
    assert rec.uplift.misses == {"didn't need it": 1, "wrongly skipped": 1, "unclear": 0}
    assert rec.uplift.queries_digest == qs.compute_digest()  # the query set the study ran
    pins = (rec.uplift.runtime, rec.uplift.model, rec.uplift.attempts)
    assert pins == ("anthropic", "claude-sonnet-4-6", 2)

    show = hang.finish([str(SKILLREACH), "baseline", "show", "rec.json"], limit_s=60, cwd=root)
    assert show.returncode == 0, show.stderr
    line = next(x for x in show.stdout.splitlines() if x.strip().startswith("uplift"))
    lo, hi = lift["ci95"]
    assert f"+0.750 [{lo:+.3f}, {hi:+.3f}] over 4 cases" in line
    assert "didn't need it 1, wrongly skipped 1, unclear 0" in line
    assert "anthropic, claude-sonnet-4-6, 2 runs per case" in line

    # a tampered uplift is refused, never shown
    data = json.loads((root / "rec.json").read_text(encoding="utf-8"))
    data["uplift"]["value"] = 0.99
    (root / "bad.json").write_text(json.dumps(data), encoding="utf-8")
    assert main(["baseline", "show", "bad.json"]) == 2
    assert "digest does not match" in capsys.readouterr().err

    # the study's report shows the uplift kept beside the artifact
    (root / "run" / "uplift-alpha.json").write_text((root / "uplift.json").read_text(encoding="utf-8"),
                                                     encoding="utf-8")
    assert main(["report", "run", "--markdown", "summary.md", "--html", "page.html", "-q"]) == 0
    md = (root / "summary.md").read_text(encoding="utf-8")
    assert "**Uplift**" in md
    assert f"| alpha | +0.750 [{lo:+.3f}, {hi:+.3f}] | 4 | 1 | 1 | 0 |" in md
    page = (root / "page.html").read_text(encoding="utf-8")
    assert '<table id="uplift">' in page
    assert 'data-uplift="alpha"' in page
    assert 'data-field="uplift" data-value="0.75"' in page
    out = hang.finish([str(SKILLREACH), "report", "run"], limit_s=60, cwd=root)
    assert out.returncode == 0, out.stderr
    assert "uplift of alpha: +0.750" in out.stdout

    # ... and baseline record picks it up from there without --uplift
    assert main([*args, "--out", "rec2.json"]) == 0
    rec2 = read_baseline(root / "rec2.json")
    assert rec2.uplift is not None
    assert rec2.uplift.value == pytest.approx(0.75)


def test_a_record_without_uplift_keeps_its_old_form_and_digest(
    study: tuple[Path, QuerySet], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = study
    assert main(["baseline", "record", "--artifact", "run/artifact.json", "--skill", "beta",
                 "--out", "rec.json"]) == 0
    data = json.loads((root / "rec.json").read_text(encoding="utf-8"))
    assert "uplift" not in data  # the JSON of a record written before the field existed
    assert baseline_digest(data) == data["digest"]
    rec = read_baseline(root / "rec.json")
    assert rec.uplift is None
    assert baseline_digest(rec.model_dump(mode="json")) == data["digest"]  # re-dumped: the same digest
    capsys.readouterr()
    assert main(["baseline", "show", "rec.json"]) == 0
    assert "uplift   not measured" in capsys.readouterr().out


def test_a_wrong_uplift_file_is_one_line(
    study: tuple[Path, QuerySet], capsys: pytest.CaptureFixture[str]
) -> None:
    root, qs = study
    base = ["baseline", "record", "--artifact", "run/artifact.json", "--skill", "alpha", "--out", "r.json"]
    _uplift_json(qs, root / "u.json")
    other = seal(QuerySet(catalog_id="all", queries=(*qs.queries[:3], *qs.queries[4:])), source="other")
    _uplift_json(other, root / "other.json")
    (root / "broken.json").write_text('{"skill": "alpha",\n "margin": }', encoding="utf-8")
    no_pairs = json.loads((root / "u.json").read_text(encoding="utf-8"))
    no_pairs["uplift"] = None
    (root / "none.json").write_text(json.dumps(no_pairs), encoding="utf-8")
    cases = {
        "other.json": "not the study's",
        "broken.json": "broken.json:2: invalid JSON",
        "none.json": "no uplift to record",
        "missing.json": "no such uplift report",
    }
    for name, words in cases.items():
        assert main([*base, "--uplift", name]) == 2, name
        err = capsys.readouterr().err
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1, err
        assert words in lines[0], err
    assert main([*base[:5], "beta", *base[6:], "--uplift", "u.json"]) == 2
    assert "the uplift of 'alpha', not of 'beta'" in capsys.readouterr().err
    assert not (root / "r.json").exists()
