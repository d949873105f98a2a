"""Baseline records: shape, metrics with clustered intervals, git pins, --commit, expiry, cohorts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillreach.baselines.records import (
    BaselineRecord,
    changes_between,
    cohort_split,
    corpus_digest,
    corpus_location,
    corpus_version,
    expiry,
    metric_value,
    model_matches,
    read_baseline,
    record_baseline,
    skill_version,
    staleness,
    write_baseline,
)
from skillreach.cli import main
from skillreach.errors import InputError, NotFoundError
from skillreach.models import Checks, ProbeRecord, Query, QuerySet, ToolCall, ToolPattern
from skillreach.queries.sets import seal, write_query_set
from skillreach.scoring import score
from skillreach.scoring.artifact import Artifact, write_artifact
from skillreach.scoring.intervals import clustered_wilson, wilson
from skillreach.study.judge import FAKE_JUDGE_MODEL, rubric_version
from tests.helpers import hang

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return path


SKILL_MD = "---\nname: {name}\ndescription: {desc}\n---\n# {name}\n\nRun make preflight before deploying.\n"


def write_skill(root: Path, name: str, desc: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(SKILL_MD.format(name=name, desc=desc), encoding="utf-8")
    return folder


DEPLOY_CHECKS = Checks(
    requires=(ToolPattern(tool="Bash", pattern="make preflight"),),
    forbids=(ToolPattern(tool="Bash", pattern="--force"),),
    rubric="mention the rollback plan",
)


def query_set() -> QuerySet:
    qs = [
        Query(id="d1", text="ship the api", expected_skill="deploy", checks=DEPLOY_CHECKS),
        Query(id="d2", text="release to prod", expected_skill="deploy", checks=DEPLOY_CHECKS),
        Query(id="d3", text="roll out v2", expected_skill="deploy"),
        Query(id="p1", text="fill the form", expected_skill="pdf"),
        Query(id="p2", text="merge two pdfs", expected_skill="pdf"),
        Query(id="o1", text="what's the weather", kind="out_of_scope"),  # type: ignore[arg-type]
    ]
    return seal(QuerySet(catalog_id="t", queries=tuple(qs)), source="test")


def probe(
    qid: str,
    attempt: int,
    invoked: list[str],
    calls: list[str] | None = None,
    text: str | None = None,
    grade: float | None = None,
) -> ProbeRecord:
    return ProbeRecord(
        query_id=qid,
        attempt=attempt,
        invoked=tuple(invoked),
        runtime="fake",
        model="fake-model",
        resolved_model="fake-model-20260101",
        tool_calls=tuple(ToolCall(tool="Bash", input={"command": c}) for c in (calls or [])),
        final_text=text,
        rubric_grade=grade,
    )


def probes() -> list[ProbeRecord]:
    return [
        # d1: activated both times, compliant once
        probe("d1", 1, ["deploy"], ["make preflight", "make deploy"], "rollback plan ready", 1.0),
        probe("d1", 2, ["deploy"], ["make deploy --force"], "done", 0.0),
        # d2: activated once
        probe("d2", 1, ["pdf"], [], "x", 0.0),
        probe("d2", 2, ["deploy"], ["make preflight"], "rollback plan", 1.0),
        probe("d3", 1, ["deploy"]),
        probe("d3", 2, []),
        probe("p1", 1, ["pdf"]),
        probe("p1", 2, ["deploy"]),  # false activation
        probe("p2", 1, ["pdf"]),
        probe("p2", 2, ["pdf"]),
        probe("o1", 1, []),
        ProbeRecord(query_id="o1", attempt=2, error="boom", runtime="fake"),
    ]


def make_artifact(
    tmp_path: Path, qs: QuerySet | None = None, recs: list[ProbeRecord] | None = None
) -> tuple[Artifact, Path]:
    qs = qs or query_set()
    qpath = write_query_set(qs, tmp_path / "queries.json")
    art = score(qs, recs or probes(), None, attempts=2)
    art = write_artifact(art, tmp_path / "artifact.json")
    return art, qpath


# ------------------------------------------------------------------------------------------- record


def test_record_shape_matches_the_spec(tmp_path: Path) -> None:
    art, qpath = make_artifact(tmp_path)
    rec = record_baseline(art, qpath, "deploy", judge_model=FAKE_JUDGE_MODEL)
    data = json.loads(rec.model_dump_json())
    for key in (
        "baseline_id",
        "skill",
        "skill_version",
        "corpus_version",
        "model",
        "runtime",
        "runs_per_case",
        "cases",
        "rubric_version",
        "metrics",
        "per_case",
    ):
        assert key in data, key
    assert data["baseline_id"].startswith("deploy@")
    assert data["skill"] == "deploy"
    assert data["skill_version"].startswith("sha256:")
    assert data["schema_version"] == 2
    assert data["corpus_version"] == corpus_version(query_set(), "deploy")  # its own positive cases
    assert data["corpus_version"] != query_set().compute_digest()
    assert data["model"] == "fake-model-20260101"
    assert data["runtime"] == {"name": "fake", "version": None}  # spec: runtime {name, version}
    assert data["runs_per_case"] == 2
    assert data["cases"] == {"positive": 3, "negative": 3}
    assert set(data["metrics"]) == {"activation", "false_activation", "compliance", "task_quality"}
    for m in data["metrics"].values():
        assert set(m) == {"value", "ci95", "n", "cases"}
        assert 0.0 <= m["ci95"][0] <= m["value"] <= m["ci95"][1] <= 1.0
    assert set(data["per_case"]) == {"d1", "d2", "d3", "p1", "p2", "o1"}
    by_id = query_set().by_id()
    for qid, entry in data["per_case"].items():  # spec: per_case {id: {digest, outcomes}}
        assert set(entry) == {"digest", "outcomes"}
        assert entry["digest"] == by_id[qid].case_digest()
        assert "role" in entry["outcomes"]


def test_record_metric_values(tmp_path: Path) -> None:
    art, qpath = make_artifact(tmp_path)
    rec = record_baseline(art, qpath, "deploy", judge_model=FAKE_JUDGE_MODEL)
    act = rec.metrics["activation"]
    assert act is not None
    assert (act.value, act.n, act.cases) == (pytest.approx(4 / 6), 6, 3)
    fa = rec.metrics["false_activation"]
    assert fa is not None
    # negatives: p1 ×2, p2 ×2, o1 ×1 scored (the errored probe is not scored)
    assert (fa.value, fa.n, fa.cases) == (pytest.approx(1 / 5), 5, 3)
    comp = rec.metrics["compliance"]
    assert comp is not None
    # d1: compliant, forced → not; d2 attempt 2 compliant (attempt 1 did not activate)
    assert (comp.value, comp.n, comp.cases) == (pytest.approx(2 / 3), 3, 2)
    tq = rec.metrics["task_quality"]
    assert tq is not None
    assert tq.n == 4  # every positive probe with a final answer on a case with quality checks
    assert rec.per_case["d1"].compliance == (True, False)
    assert rec.per_case["o1"].errors == 1
    assert rec.per_case["o1"].activated == (0,)
    assert rec.rubric_version == rubric_version(
        {"d1": "mention the rollback plan", "d2": "mention the rollback plan"}, FAKE_JUDGE_MODEL
    )
    assert rec.judge_model == FAKE_JUDGE_MODEL
    # a skill with no rubric on its cases pins no rubric
    assert record_baseline(art, qpath, "pdf", judge_model=FAKE_JUDGE_MODEL).rubric_version is None


def test_clustered_interval_is_used(tmp_path: Path) -> None:
    art, qpath = make_artifact(tmp_path)
    rec = record_baseline(art, qpath, "deploy")
    act = rec.metrics["activation"]
    assert act is not None
    assert act.ci95 == pytest.approx(clustered_wilson([[1, 1], [0, 1], [1, 0]]))


def test_clustered_interval_extremes() -> None:
    from skillreach.baselines.records import CaseOutcomes

    # perfectly correlated within cases (ICC 1): the effective sample is the number of cases
    pc = {
        f"q{i}": CaseOutcomes(role="positive", kind="implicit", probes=5, activated=(i % 2,) * 5)
        for i in range(10)
    }
    mv = metric_value(pc, "activation")
    assert mv is not None
    assert mv.ci95 == pytest.approx(wilson(5, 10))
    # no correlation (every case the same mix): plain Wilson over all probes
    pc2 = {
        f"q{i}": CaseOutcomes(role="positive", kind="implicit", probes=4, activated=(1, 0, 1, 0))
        for i in range(10)
    }
    mv2 = metric_value(pc2, "activation")
    assert mv2 is not None
    assert mv2.ci95 == pytest.approx(wilson(20, 40))
    assert metric_value(pc2, "compliance") is None


def test_record_refuses_wrong_queries_and_unknown_skill(tmp_path: Path) -> None:
    art, qpath = make_artifact(tmp_path)
    other = seal(
        QuerySet(catalog_id="t", queries=(Query(id="z", text="z", expected_skill="deploy"),)), source="t"
    )
    opath = write_query_set(other, tmp_path / "other.json")
    with pytest.raises(InputError, match="is not the artifact's queries_digest"):
        record_baseline(art, opath, "deploy")
    with pytest.raises(NotFoundError, match="'nope' is not in the study's catalog"):
        record_baseline(art, qpath, "nope")


# ---------------------------------------------------------------------------------------------- git


def test_skill_version_is_the_git_tree_hash_then_a_digest_when_dirty(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    folder = write_skill(repo / "skills", "deploy", "Deploy services.")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    version, origin = skill_version(folder)
    assert origin == "git"
    assert version == "git:" + git(repo, "rev-parse", "HEAD:skills/deploy")
    # uncommitted edit → content digest, marked
    (folder / "SKILL.md").write_text(
        SKILL_MD.format(name="deploy", desc="Deploy anything."), encoding="utf-8"
    )
    v2, o2 = skill_version(folder)
    assert o2 == "uncommitted"
    assert v2.startswith("sha256:")
    # an untracked file also counts
    git(repo, "checkout", "-q", "--", ".")
    assert skill_version(folder) == (version, "git")
    (folder / "notes.md").write_text("x", encoding="utf-8")
    assert skill_version(folder)[1] == "uncommitted"
    # committed again: a new tree hash
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "notes")
    v3, o3 = skill_version(folder)
    assert o3 == "git"
    assert v3 != version


def test_skill_version_outside_git_is_a_content_digest(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "plain", "deploy", "Deploy services.")
    v1, origin = skill_version(folder)
    assert origin == "content"
    assert v1.startswith("sha256:")
    assert skill_version(folder)[0] == v1
    (folder / "SKILL.md").write_text("changed", encoding="utf-8")
    assert skill_version(folder)[0] != v1
    with pytest.raises(NotFoundError):
        skill_version(tmp_path / "missing")


def test_corpus_version_in_git(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    qs = query_set()
    qpath = write_query_set(qs, repo / "evals" / "queries.json")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "corpus")
    assert corpus_version(qs, "deploy") == corpus_digest(
        (q.id, q.case_digest()) for q in qs.queries if q.expected_skill == "deploy"
    )  # the pin is the content of the skill's own cases
    shown, commit = corpus_location(qpath)
    assert shown == "evals/queries.json"  # the path is information
    assert commit == git(repo, "rev-parse", "HEAD")
    qpath.write_text(qpath.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert corpus_location(qpath) == (shown, None)  # modified: no commit to name


def test_the_same_sealed_set_at_another_path_pins_the_same(tmp_path: Path) -> None:
    """Pins by content: a copy of the query set elsewhere is the same corpus, and the gate compares."""
    art, qpath = make_artifact(tmp_path)
    copy = tmp_path / "elsewhere" / "renamed.json"
    copy.parent.mkdir()
    copy.write_bytes(qpath.read_bytes())
    a = record_baseline(art, qpath, "deploy")
    b = record_baseline(art, copy, "deploy")
    assert a.corpus_version == b.corpus_version == corpus_version(query_set(), "deploy")
    assert a.corpus_path != b.corpus_path
    from skillreach.baselines.gates import compare

    assert compare(a, b).results  # not refused


# ------------------------------------------------------------------------------------------- --commit


def _study_repo(tmp_path: Path) -> tuple[Path, Path, Path]:
    repo = init_repo(tmp_path / "repo")
    write_skill(repo / "skills", "deploy", "Deploy services.")
    write_skill(repo / "skills", "pdf", "Work with PDF files.")
    _art, qpath = make_artifact(repo)
    git(repo, "add", "skills", "queries.json")
    git(repo, "commit", "-q", "-m", "init")
    return repo, repo / "artifact.json", qpath


def test_record_commit_writes_and_commits_only_the_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, art, qpath = _study_repo(tmp_path)
    monkeypatch.chdir(repo)
    (repo / "unrelated.txt").write_text("staged but not mine", encoding="utf-8")
    git(repo, "add", "unrelated.txt")
    args = [
        "baseline",
        "record",
        "--artifact",
        str(art),
        "--skill",
        "deploy",
        "--queries",
        str(qpath),
        "--commit",
    ]
    assert main(args) == 0
    rec = read_baseline(repo / "baselines" / "deploy.json")
    assert rec.skill_version == "git:" + git(repo, "rev-parse", "HEAD~1:skills/deploy")
    assert rec.corpus_version.startswith("sha256:")
    assert rec.corpus_path == "queries.json"
    assert git(repo, "log", "-1", "--format=%s") == "baseline deploy: first baseline"
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "baselines/deploy.json"
    assert "unrelated.txt" in git(repo, "diff", "--cached", "--name-only")  # still staged, not committed
    # change the skill, commit it, record again: the message names the change
    git(repo, "reset", "-q", "unrelated.txt")
    write_skill(repo / "skills", "deploy", "Deploy services, infrastructure and anything else.")
    git(repo, "commit", "-q", "-am", "broaden deploy")
    capsys.readouterr()
    assert main(args) == 0
    subject = git(repo, "log", "-1", "--format=%s")
    assert subject.startswith("baseline deploy: skill git:")
    body = git(repo, "log", "-1", "--format=%b")
    assert "activation 0.667" in body
    assert len(git(repo, "log", "--format=%H", "--", "baselines/deploy.json").splitlines()) == 2


def test_record_to_stdout_and_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _art, qpath = make_artifact(tmp_path)
    assert (
        main(
            [
                "baseline",
                "record",
                "--artifact",
                str(tmp_path / "artifact.json"),
                "--skill",
                "deploy",
                "--queries",
                str(qpath),
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["skill"] == "deploy"
    out = tmp_path / "b" / "deploy.json"
    assert (
        main(
            [
                "baseline",
                "record",
                "--artifact",
                str(tmp_path / "artifact.json"),
                "--skill",
                "deploy",
                "--queries",
                str(qpath),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert read_baseline(out).skill == "deploy"
    # no --queries and nothing beside the artifact names it... here queries.json sits beside it
    assert (
        main(["baseline", "record", "--artifact", str(tmp_path / "artifact.json"), "--skill", "deploy"]) == 0
    )


def test_record_commit_outside_git_is_refused_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, qpath = make_artifact(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["baseline", "record", "--artifact", "artifact.json", "--skill", "deploy", "--queries", str(qpath)]
    assert main([*args, "--commit"]) == 2
    assert "not inside a git work tree; --commit needs one" in capsys.readouterr().err
    assert not (tmp_path / "baselines").exists()


def test_record_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _art, qpath = make_artifact(tmp_path)
    code = main(
        [
            "baseline",
            "record",
            "--artifact",
            str(tmp_path / "artifact.json"),
            "--skill",
            "nope",
            "--queries",
            str(qpath),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("skillreach: error: skill 'nope' is not in the study's catalog")
    assert (
        main(["baseline", "record", "--artifact", str(tmp_path / "missing.json"), "--skill", "deploy"]) == 2
    )
    assert "no such artifact" in capsys.readouterr().err
    (tmp_path / "queries.json").unlink()
    assert (
        main(["baseline", "record", "--artifact", str(tmp_path / "artifact.json"), "--skill", "deploy"]) == 2
    )
    assert "pass --queries FILE" in capsys.readouterr().err


# -------------------------------------------------------------------------------------------- expiry


def _rec(tmp_path: Path) -> tuple[BaselineRecord, Path]:
    art, qpath = make_artifact(tmp_path)
    return record_baseline(art, qpath, "deploy", judge_model=FAKE_JUDGE_MODEL), qpath


def test_expiry_reasons(tmp_path: Path) -> None:
    rec, _ = _rec(tmp_path)
    assert expiry(rec, query_set=query_set(), model=rec.model, rubric=rec.rubric_version) == []
    assert expiry(rec, model="fake-model") == []  # the alias of the recorded snapshot
    assert expiry(rec, model="other-model") == ["model changed: fake-model-20260101 → other-model"]
    # every positive case edited: nothing left to pair → expired
    edited = QuerySet(catalog_id="t", queries=tuple(
        q.model_copy(update={"text": q.text + "!"}) if q.expected_skill == "deploy" else q
        for q in query_set().queries
    ))
    reasons = expiry(rec, query_set=edited)
    assert reasons == ["none of its 3 positive cases is in the query set unchanged"]
    # one left: still current (stale)
    kept = tuple(q for q in edited.queries if q.id != "d1")
    one = QuerySet(catalog_id="t", queries=(*kept, query_set().by_id()["d1"]))
    assert expiry(rec, query_set=one) == []
    assert staleness(rec, one) == ["2 cases changed since recorded"]
    assert expiry(rec, rubric=rubric_version("another rubric", FAKE_JUDGE_MODEL))[0].startswith(
        "rubric changed:"
    )
    assert model_matches("claude-sonnet-4-5-20250929", "claude-sonnet-4-5")
    assert not model_matches("claude-sonnet-4-5-20250929", "claude-sonnet-4")


def test_status_reports_expired(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec, qpath = _rec(tmp_path)
    bdir = tmp_path / "baselines"
    bdir.mkdir()
    # the corpus path in the record is relative to the cwd outside git; write the record beside it
    write_baseline(rec, bdir / "deploy.json")
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["baseline", "status", "--baselines", str(bdir)]) == 0
        assert "current" in capsys.readouterr().out
        # spec: status reports (exit 0); check and compare are the gates that refuse an expired record
        assert main(["baseline", "status", "--baselines", str(bdir), "--model", "claude-opus-4-1"]) == 0
        out = capsys.readouterr()
        assert "expired" in out.out
        assert "model changed" in out.out
        # cases added to the skill's corpus: stale, not expired (still gated)
        qs = query_set()
        extra = tuple(
            Query(id=f"d{i}", text=f"deploy on day {i}", expected_skill="deploy") for i in (7, 8, 9)
        )
        write_query_set(seal(QuerySet(catalog_id="t", queries=(*qs.queries, *extra)), source="t"), qpath)
        assert main(["baseline", "status", "--baselines", str(bdir), "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["baselines"]
        assert rows[0]["expired"] is False
        assert rows[0]["stale"] == ["3 cases added since recorded"]
        assert main(["baseline", "status", "--baselines", str(bdir)]) == 0
        assert "3 cases added since recorded" in capsys.readouterr().out
        # another skill's query added: nothing changes for deploy
        other = Query(id="p9", text="split a pdf", expected_skill="pdf")
        write_query_set(seal(QuerySet(catalog_id="t", queries=(*qs.queries, other)), source="t"), qpath)
        assert main(["baseline", "status", "--baselines", str(bdir), "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["baselines"]
        assert (rows[0]["expired"], rows[0]["stale"]) == (False, [])
    finally:
        os.chdir(cwd)


def test_changes_between_names_model_corpus_rubric_skill(tmp_path: Path) -> None:
    rec, _ = _rec(tmp_path)
    assert changes_between(None, rec) == ["first baseline"]
    assert changes_between(rec, rec) == ["re-measured (same pins)"]
    other = rec.model_copy(
        update={
            "model": "m2",
            "corpus_version": "q.json@sha256:" + "1" * 64,
            "rubric_version": None,
            "skill_version": "git:" + "2" * 40,
        }
    )
    changes = changes_between(rec, other)
    assert [c.split()[0] for c in changes] == ["model", "corpus", "rubric", "skill"]
    assert "→ git:222222222222" in changes[3]


# ------------------------------------------------------------------------------------------- cohorts


def test_cohort_split_against_a_reference(tmp_path: Path) -> None:
    rec, _ = _rec(tmp_path)
    only_d1 = rec.model_copy(update={"per_case": {k: v for k, v in rec.per_case.items() if k != "d2"}})
    split = cohort_split(rec, only_d1, "compliance")
    assert split["baseline_cases"] is not None
    assert split["new_cases"] is not None
    assert (split["baseline_cases"].cases, split["new_cases"].cases) == (1, 1)
    assert split["baseline_cases"].value == 0.5
    assert split["new_cases"].value == 1.0
    # no reference: every case is new
    assert cohort_split(rec, None)["baseline_cases"] is None


def test_show_prints_pins_and_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec, _ = _rec(tmp_path)
    path = tmp_path / "deploy.json"
    write_baseline(rec, path)
    assert main(["baseline", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert rec.baseline_id in out
    assert "fake-model-20260101" in out
    assert "activation" in out
    assert "0.667" in out
    assert "(outside git)" in out


# ---------------------------------------------------------------------------- cases pinned by content


def test_a_legacy_record_is_read_and_reported_as_needing_rebaselining(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record of schema 1 (flat per_case, corpus_version of the whole set) is read, never crashes,
    and says it must be re-baselined: expired in status, refused by compare."""
    from skillreach.baselines.records import baseline_digest

    rec, _ = _rec(tmp_path)
    data = json.loads(rec.model_dump_json())
    data["schema_version"] = 1
    data["corpus_version"] = query_set().compute_digest()
    data["per_case"] = {k: v["outcomes"] for k, v in data["per_case"].items()}
    data["digest"] = baseline_digest(data)
    bdir = tmp_path / "baselines"
    bdir.mkdir()
    path = bdir / "deploy.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    old = read_baseline(path)
    assert old.legacy
    assert old.per_case["d1"].digest is None
    assert expiry(old, query_set=query_set())[0].startswith("recorded before cases were pinned by content")
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["baseline", "status", "--baselines", str(bdir), "--json"]) == 0
        row = json.loads(capsys.readouterr().out)["baselines"][0]
        assert row["expired"] is True
        assert "re-baseline it" in row["reasons"][0]
    finally:
        os.chdir(cwd)
    new = tmp_path / "new.json"
    write_baseline(rec, new)
    assert main(["baseline", "compare", str(path), str(new)]) == 3
    err = capsys.readouterr().err
    assert "schema_version" in err
    assert "re-baseline it" in err
    assert len(err.strip().splitlines()) == 1


def test_case_digest_is_content_without_the_id() -> None:
    q = Query(id="a", text="ship it", expected_skill="deploy", acceptable_skills=("b", "a2"))
    assert q.case_digest() == q.model_copy(update={"id": "zzz", "notes": "n"}).case_digest()
    assert q.case_digest() == q.model_copy(update={"acceptable_skills": ("a2", "b")}).case_digest()
    assert q.case_digest() != q.model_copy(update={"text": "ship it!"}).case_digest()
    assert q.case_digest() != Query.model_validate({**q.model_dump(), "kind": "contextual"}).case_digest()
    assert q.case_digest() != q.model_copy(update={"checks": DEPLOY_CHECKS}).case_digest()


_skills = st.sampled_from(["deploy", "pdf", "lint"])
_queries = st.lists(
    st.tuples(st.text("abcdefgh ", min_size=1, max_size=12).filter(str.strip), _skills),
    min_size=1,
    max_size=12,
)


@settings(max_examples=80, deadline=None)
@given(_queries, st.text("xyz ", min_size=1, max_size=8).filter(str.strip), _skills, st.sampled_from(
    ["add", "edit", "remove"]))
def test_another_skills_query_never_changes_a_corpus_version(
    texts: list[tuple[str, str]], extra: str, skill: str, how: str
) -> None:
    """Adding, editing or removing one skill's query leaves every other skill's corpus_version."""
    queries = tuple(Query(id=f"q{i}", text=t, expected_skill=s) for i, (t, s) in enumerate(texts))
    before = QuerySet(catalog_id="t", queries=queries)
    if how == "add":
        added = Query(id="new", text=extra, expected_skill=skill)
        after = QuerySet(catalog_id="t", queries=(*queries, added))
    else:
        own = [q for q in queries if q.expected_skill == skill]
        if not own:
            return
        target = own[0]
        kept = tuple(q for q in queries if q.id != target.id)
        changed = (target.model_copy(update={"text": target.text + extra}),) if how == "edit" else ()
        after = QuerySet(catalog_id="t", queries=kept + changed)
    for other in ("deploy", "pdf", "lint"):
        if other != skill:
            assert corpus_version(before, other) == corpus_version(after, other)
    assert corpus_version(before, skill) != corpus_version(after, skill)


# ------------------------------------------------------------------------ git's index lock (issue 30)


def _record_args(art: Path, qpath: Path, skill: str) -> list[str]:
    return [
        "baseline", "record", "--artifact", str(art), "--skill", skill, "--queries", str(qpath), "--commit"
    ]


def test_record_commit_waits_for_another_git_commands_index_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    repo, art, qpath = _study_repo(tmp_path)
    monkeypatch.chdir(repo)
    lock = repo / ".git" / "index.lock"
    lock.write_text("", encoding="utf-8")
    threading.Timer(1.0, lock.unlink).start()  # the other git command finishes a second later
    start = time.monotonic()
    assert main(_record_args(art, qpath, "deploy")) == 0
    assert 0.9 < time.monotonic() - start < 30
    assert git(repo, "show", "--name-only", "--format=", "HEAD") == "baselines/deploy.json"


def test_record_commit_says_who_holds_the_index_lock_after_its_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillreach.baselines import record_store

    repo, art, qpath = _study_repo(tmp_path)
    monkeypatch.chdir(repo)
    monkeypatch.setattr(record_store, "INDEX_LOCK_WAIT_S", 0.5)
    (repo / ".git" / "index.lock").write_text("", encoding="utf-8")
    capsys.readouterr()
    assert main(_record_args(art, qpath, "deploy")) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("skillreach: error:")]
    assert len(lines) == 1, err
    assert "index.lock is taken" in lines[0]
    assert "remove the file" in lines[0] or "held by pid" in lines[0]
    assert "Traceback" not in err


def test_four_concurrent_record_commits_all_commit(tmp_path: Path) -> None:
    """Four ``baseline record --commit`` processes at once, through the real CLI: each waits for the
    others' index lock, none is left uncommitted (two of the same skill may find the other committed
    their file already: nothing left to commit)."""
    import sys

    repo, art, qpath = _study_repo(tmp_path)
    exe = Path(sys.executable).with_name("skillreach")
    procs = [
        subprocess.Popen(
            [str(exe), *_record_args(art, qpath, skill)],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for skill in ("deploy", "pdf", "deploy", "pdf")
    ]
    outs = [hang.communicate(p, 90) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        # a record of the same skill in the same second as another's is the same file: "unchanged"
        assert p.returncode == 0 or "the baselines are unchanged" in err, err
        assert "index.lock" not in err
        assert "Traceback" not in err
    assert git(repo, "status", "--porcelain", "--", "baselines") == ""  # nothing left uncommitted
    assert 2 <= len(git(repo, "log", "--format=%H", "--", "baselines").splitlines()) <= 4


# ------------------------------------------------------- which skill took a case (confusion pairs)


def _row(qid: str, attempt: int, truth: str, scored_inv: list[str]) -> dict[str, object]:
    return {"query_id": qid, "attempt": attempt, "kind": "implicit", "truth": truth, "scored_inv": scored_inv,
            "error": None, "compliance": None, "quality": None}


def test_a_record_says_which_skill_took_each_positive_case_and_old_records_still_read(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from skillreach.baselines.records import parse_baseline, per_case_outcomes, seal_baseline
    from skillreach.baselines.scope import confusion_links, linked_by_confusion
    from tests.helpers.staged import make_record

    art = SimpleNamespace(outcomes=[
        _row("p1", 0, "deploy", ["ship"]),
        _row("p1", 1, "deploy", ["deploy"]),
        _row("p1", 2, "deploy", ["ship"]),
        _row("p2", 0, "deploy", []),  # no skill took it
        _row("p3", 0, "deploy", ["ship", "deploy"]),  # activated, second: not taken
        _row("n1", 0, "ship", ["ship"]),  # another skill's case: its own record says who took it
    ])
    cases = per_case_outcomes(art, "deploy")
    assert cases["p1"].taken_by == {"ship": 2}
    assert cases["p1"].activated == (0, 1, 0)
    assert cases["p2"].taken_by == cases["p3"].taken_by == cases["n1"].taken_by == {}

    rec = seal_baseline(make_record({"p1": [0, 1, 0], "p2": [0]}).model_copy(update={"per_case": cases}))
    data = json.loads(rec.model_dump_json())
    assert data["per_case"]["p1"]["outcomes"]["taken_by"] == {"ship": 2}
    assert "taken_by" not in data["per_case"]["p2"]["outcomes"]  # empty: left out, as before the field
    assert parse_baseline(rec.model_dump_json(), "r.json").per_case["p1"].taken_by == {"ship": 2}

    # a record written before the field: it reads, keeps its digest, and links nothing
    old = seal_baseline(make_record({"p1": [0, 1, 0], "p2": [0]}))
    text = old.model_dump_json()
    assert "taken_by" not in text
    again = parse_baseline(text, "old.json")
    assert again.digest == old.digest == seal_baseline(again).digest
    assert confusion_links({"deploy": again}) == {}

    # both directions: the skills that took an edited skill's cases, and those whose cases it took
    links = confusion_links({"deploy": rec, "ship": rec.model_copy(update={"skill": "ship"})})
    assert links == {"deploy": {"ship"}}
    assert linked_by_confusion(["deploy"], links) == {"ship"}  # ship took deploy's cases
    assert linked_by_confusion(["ship"], links) == {"deploy"}  # ship (edited) took deploy's cases
    assert linked_by_confusion(["other"], links) == set()
