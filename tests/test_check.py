"""``skillreach check --changed`` and the end-to-end story of a broadened description.

The story: ``deploy``'s description is narrow ("deploy the web service"); the team wants it to cover
infrastructure work too, and the corpus says so (infra cases expect ``deploy``). The baseline study runs
with the narrow description: the agent rarely reaches ``deploy`` on the infra cases, but when it does
deploy the web service it follows the skill's rules (``make preflight`` first, never ``--force``). The
description is broadened and committed; with it the agent now reaches ``deploy`` on the infra cases —
activation rises — but on that new work it skips the preflight and forces: compliance falls on the work
it newly reaches (the baseline corpus cohort: those cases were in the corpus all along). Reproduced
with the fake runtime (its script stands for the agent's behaviour under each
description), probed in process, recorded, committed, and gated by ``check --changed`` and by
``baseline compare``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillreach.baselines.records import changed_skills, read_baseline, resolve_since
from skillreach.cli import main
from skillreach.errors import InputError
from skillreach.models import Checks, OutputCheck, Query, QueryKind, QuerySet, ToolPattern
from skillreach.queries.sets import seal, write_query_set

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}

NARROW = "Deploy the web service to production. Use when asked to ship or release the web app."
BROAD = (
    "Deploy the web service to production, and provision, migrate or change any infrastructure: "
    "databases, queues, TLS certificates, DNS. Use for any ops or infra work."
)
BODY = "# deploy\n\nAlways run `make preflight` first. Never pass --force. Report with 'deployed'.\n"

OLD = [f"web{i}" for i in range(10)]  # cases the narrow description already reached
NEW = [f"infra{i}" for i in range(10)]  # cases only the broadened description reaches
PDF = [f"pdf{i}" for i in range(4)]
OOS = [f"oos{i}" for i in range(3)]
RUNS = 4

CHECKS = Checks(
    requires=(ToolPattern(tool="Bash", pattern=r"make preflight"),),
    forbids=(ToolPattern(tool="Bash", pattern=r"--force"),),
    output=(OutputCheck(contains="deployed"),),
)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def write_skill(root: Path, name: str, desc: str, body: str = "") -> None:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    front = yaml.safe_dump({"name": name, "description": desc}, sort_keys=False, width=1000)
    (folder / "SKILL.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")


def corpus() -> QuerySet:
    qs = [
        Query(id=c, text=f"ship the web app, release {c}", expected_skill="deploy", checks=CHECKS)
        for c in OLD
    ]
    qs += [
        Query(id=c, text=f"provision the {c} database", expected_skill="deploy", checks=CHECKS) for c in NEW
    ]
    qs += [Query(id=c, text=f"merge the pdfs {c}", expected_skill="pdf") for c in PDF]
    qs += [Query(id=c, text=f"tell me a joke {c}", kind=QueryKind.out_of_scope) for c in OOS]
    return seal(QuerySet(catalog_id="story", queries=tuple(qs)), source="test")


GOOD = {
    "invoked": ["deploy"],
    "tool_calls": [
        {"tool": "Bash", "input": {"command": "make preflight"}},
        {"tool": "Bash", "input": {"command": "make deploy"}},
    ],
    "final_text": "deployed v2",
}
SLOPPY = {
    "invoked": ["deploy"],
    "tool_calls": [{"tool": "Bash", "input": {"command": "terraform apply --force"}}],
    "final_text": "done",
}
SLIP = {  # an occasional lapse on the old work, the same under both descriptions
    "invoked": ["deploy"],
    "tool_calls": [{"tool": "Bash", "input": {"command": "make deploy"}}],
    "final_text": "deployed",
}


def script(broad: bool) -> dict[str, Any]:
    s: dict[str, Any] = {}
    for i, c in enumerate(OLD):
        s[c] = {"attempts": [SLIP if (i == 3 and a == 2) else GOOD for a in range(RUNS)]}
    for i, c in enumerate(NEW):
        if broad:
            # reached every time now, but mostly without the rules
            s[c] = {"attempts": [GOOD if (a == 0 and i % 3 == 0) else SLOPPY for a in range(RUNS)]}
        else:
            # the narrow description: reached once in a while, by an agent that then follows the rules
            s[c] = {"attempts": [GOOD if (a == 0 and i % 4 == 0) else {"invoked": []} for a in range(RUNS)]}
    for c in PDF:
        s[c] = ["pdf"]
    for c in OOS:
        s[c] = []
    for i in (1, 2, 3):  # the study flow's canary: skill-naming queries reach a skill
        s[f"canary-{i}"] = ["pdf"]
    return s


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write_skill(repo / "skills", "deploy", NARROW, BODY)
    write_skill(repo / "skills", "pdf", "Merge, split and fill PDF files.", "# pdf\n")
    write_query_set(corpus(), repo / "evals" / "queries.json")
    for name, broad in (("narrow", False), ("broad", True)):
        (repo / "ci").mkdir(exist_ok=True)
        spath = repo / "ci" / f"{name}.json"
        spath.write_text(json.dumps(script(broad)), encoding="utf-8")
        (repo / "ci" / f"{name}.yaml").write_text(
            yaml.safe_dump(
                {
                    "runtime": "fake",
                    "attempts": RUNS,
                    "compliance": True,
                    "concurrency": 4,
                    "runtime_options": {"script": str(spath)},
                }
            ),
            encoding="utf-8",
        )
    (repo / ".gitignore").write_text(".skillreach/\nout/\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "deploy and pdf skills, corpus")
    return repo


def run_study(repo: Path, cfg_name: str, out: str) -> Path:
    from skillreach.cli.check_cmds import _run_study
    from skillreach.study import StudyConfig

    cfg = StudyConfig.build(
        repo / "ci" / f"{cfg_name}.yaml",
        skills=(repo / "skills",),
        queries=repo / "evals" / "queries.json",
        out=repo / out,
    )
    _run_study(cfg, None, in_process=True)
    return repo / out / "artifact.json"


def record_and_commit(repo: Path, artifact: Path) -> None:
    code = main(
        [
            "baseline",
            "record",
            "--artifact",
            str(artifact),
            "--skill",
            "deploy",
            "--queries",
            str(repo / "evals" / "queries.json"),
            "--skills",
            str(repo / "skills"),
            "--commit",
        ]
    )
    assert code == 0


def test_broadened_description_raises_activation_and_lowers_compliance_on_new_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path)
    monkeypatch.chdir(repo)

    # 1. the baseline, narrow description — recorded and committed on its own
    record_and_commit(repo, run_study(repo, "narrow", "out/narrow"))
    base = read_baseline(repo / "baselines" / "deploy.json")
    assert base.skill_version == "git:" + git(repo, "rev-parse", "HEAD~1:skills/deploy")
    assert git(repo, "log", "-1", "--format=%s") == "baseline deploy: first baseline"
    act0, comp0 = base.metrics["activation"], base.metrics["compliance"]
    assert act0 is not None
    assert comp0 is not None
    assert act0.value == pytest.approx((10 * 4 + 3) / 80)  # old cases always, 3 infra probes
    assert comp0.value == pytest.approx(42 / 43)  # one slip on the old work
    assert comp0.cases == 13

    # 2. the description is broadened and committed
    write_skill(repo / "skills", "deploy", BROAD, BODY)
    git(repo, "commit", "-q", "-am", "deploy: cover infrastructure work")

    # 3. CI: check --changed re-probes deploy (the broadened agent) and gates it against the baseline
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    capsys.readouterr()
    code = main(
        [
            "check",
            "--changed",
            "--since",
            "HEAD~1",
            "--skills",
            "skills",
            "--config",
            str(repo / "ci" / "broad.yaml"),
            "--in-process",
            "--scope",
            "all",  # the whole set: step 4 records the study of it by hand
            "--annotations",
            "--out",
            str(repo / "out" / "check"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 1, captured.out + captured.err
    annotations = [line for line in captured.out.splitlines() if line.startswith("::")]
    # the infra cases were in the corpus when the baseline was recorded (it never reached them): they are
    # the baseline corpus cohort, compared unpaired with the baseline's rate (spec: cohorts by history)
    assert any(
        line.startswith(
            "::error file=skills/deploy/SKILL.md,title=skillreach gate%3A breach::"
            "deploy: compliance (baseline corpus)"
        )
        for line in annotations
    ), annotations
    assert not any("activation (paired) breach" in line for line in annotations)
    assert "gate failed for deploy" in captured.err
    # the paired compliance breaches too: three of its 13 cases now mostly break the rules, and
    # Newcombe's interval (the t interval reached 0 here) leaves 0
    assert any(
        line.startswith(
            "::error file=skills/deploy/SKILL.md,title=skillreach gate%3A breach::deploy: compliance (paired)"
        )
        for line in annotations
    ), annotations
    assert "deploy: compliance (baseline corpus) breach" in captured.out  # quiet: what is not ok
    assert "smallest breach activation " not in captured.out  # --verbose says more
    text = summary.read_text(encoding="utf-8")
    assert "## skillreach check" in text
    assert "| deploy | activation | paired |" in text
    assert "| deploy | compliance | baseline corpus |" in text
    assert text.startswith("**Yardstick unchanged")
    assert "**Exit 1**" in text

    # 4. the same by hand: record the new study, compare with the stored baseline
    new_path = repo / "out" / "new.json"
    assert (
        main(
            [
                "baseline",
                "record",
                "--artifact",
                str(repo / "out" / "check" / "artifact.json"),
                "--skill",
                "deploy",
                "--queries",
                "evals/queries.json",
                "--skills",
                "skills",
                "--out",
                str(new_path),
            ]
        )
        == 0
    )
    capsys.readouterr()
    code = main(["baseline", "compare", "baselines/deploy.json", str(new_path), "--json"])
    cmp = json.loads(capsys.readouterr().out)
    assert code == 1
    rows = {(r["metric"], r["cohort"]): r for r in cmp["results"]}
    act = rows[("activation", "paired")]
    assert act["verdict"] == "ok"
    # web cases stay at 1; infra cases rise from 0.25 (three of them) or 0 (seven) to 1
    assert act["mean_diff"] == pytest.approx((3 * 0.75 + 7 * 1.0) / 20)
    assert act["ci95"][0] > 0
    assert act["new"] > act["base"]
    comp_paired = rows[("compliance", "paired")]
    # paired: the 10 web cases (unchanged) and the 3 infra cases the narrow description reached once,
    # which now mostly break the rules — a fall past the gate whose interval leaves 0
    assert comp_paired["k"] == 13
    assert comp_paired["mean_diff"] == pytest.approx((-0.75 - 1.0 - 1.0) / 13)
    assert comp_paired["ci95"][1] == pytest.approx(-0.0404, abs=1e-4)
    assert comp_paired["verdict"] == "breach"
    fresh = rows[("compliance", "baseline corpus")]
    assert fresh["k"] == 7  # infra cases of the corpus the baseline never measured compliance on
    assert fresh["mean_diff"] < -0.5
    assert fresh["mean_diff"] == pytest.approx(3 / 28 - 42 / 43)  # against the baseline's pooled value
    assert fresh["verdict"] == "breach"
    assert ("compliance", "new cases") not in rows  # no case was added since the record
    coh = cmp["cohorts"]["compliance"]
    # every case was in the corpus when the baseline was recorded: web 39 of 40, infra0/4/8 1 of 12, the
    # seven others 3 of 28
    assert coh["baseline_cases"]["value"] == pytest.approx(43 / 80)
    assert coh["baseline_cases"]["cases"] == 20
    assert coh["new_cases"] is None
    new = read_baseline(new_path)
    assert new.skill_version == "git:" + git(repo, "rev-parse", "HEAD:skills/deploy")
    assert new.skill_version != base.skill_version
    assert new.metrics["compliance"] is not None
    assert new.metrics["compliance"].value < comp0.value

    # 5. recording the broadened baseline names what changed
    record_and_commit(repo, repo / "out" / "check" / "artifact.json")
    assert git(repo, "log", "-1", "--format=%s").startswith("baseline deploy: skill git:")


# ---------------------------------------------------------------------------------- change detection


def test_changed_skills_and_since(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    first = git(repo, "rev-parse", "HEAD")
    write_skill(repo / "skills", "deploy", BROAD, BODY)
    git(repo, "commit", "-q", "-am", "broaden")
    rev, how = resolve_since(repo / "skills", None)
    assert (rev, how) == (first, "HEAD~1 (no origin/main to take a merge-base with)")
    ch = changed_skills([repo / "skills"], rev)
    assert ch.changed == ("deploy",)
    assert ch.to_check == ["deploy"]
    assert not ch.routing_changed
    assert ch.skill_files["deploy"] == "skills/deploy/SKILL.md"
    # an uncommitted edit and an untracked new skill: a new skill re-checks every skill
    (repo / "skills" / "pdf" / "SKILL.md").write_text(
        "---\nname: pdf\ndescription: PDFs.\n---\n", encoding="utf-8"
    )
    write_skill(repo / "skills", "dns", "Change DNS records.")
    ch2 = changed_skills([repo / "skills"], "HEAD")
    assert ch2.changed == ("dns", "pdf")
    assert ch2.added == ("dns",)
    assert ch2.to_check == ["deploy", "dns", "pdf"]
    # a removed skill changes the routing table too
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "dns")
    git(repo, "rm", "-q", "-r", "skills/dns")
    ch3 = changed_skills([repo / "skills"], "HEAD")
    assert ch3.removed == ("dns",)
    assert ch3.to_check == ["deploy", "pdf"]
    # origin/main merge-base wins when present
    git(repo, "update-ref", "refs/remotes/origin/main", first)
    assert resolve_since(repo, None) == (first, "merge-base with origin/main")
    with pytest.raises(InputError, match="--since nope: no such revision"):
        resolve_since(repo, "nope")


def test_check_new_skill_without_baseline_and_nothing_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path)
    monkeypatch.chdir(repo)
    record_and_commit(repo, run_study(repo, "narrow", "out/narrow"))
    capsys.readouterr()
    # nothing changed since HEAD
    assert main(["check", "--changed", "--since", "HEAD", "--skills", "skills", "--in-process"]) == 0
    assert "; no skill changed" in capsys.readouterr().out
    # a new skill has a way through: scored (here it has no case yet), never "missing a baseline"; its
    # neighbours are gated against theirs. pdf, edited, has no baseline at the base revision: not a pass
    # unless --allow-missing
    # notes, at the base with no case in any query set, is edited: no baseline can ever be recorded for
    # it, so none is demanded (bench/merge_gate.py seeds 7 and 18 failed on exactly that, with no victim)
    write_skill(repo / "skills", "notes", "Take meeting notes.")
    git(repo, "add", "skills/notes")
    git(repo, "commit", "-q", "-m", "notes skill, no cases yet")
    write_skill(repo / "skills", "notes", "Take meeting notes and action items.")
    write_skill(repo / "skills", "dns", "Change DNS records.")
    write_skill(repo / "skills", "pdf", "Merge PDF files.", "# pdf\n\nOne more rule.\n")
    args = [
        "check",
        "--changed",
        "--since",
        "HEAD",
        "--skills",
        "skills",
        "--config",
        "ci/narrow.yaml",
        "--in-process",
        "--annotations",
        "--json",
        "--out",
        "out/c",
    ]
    for extra, expected, level in (([], 1, "error"), (["--allow-missing"], 0, "warning")):
        code = main([*args, *extra])
        captured = capsys.readouterr()
        lines = captured.out.splitlines()
        annotations = [x for x in lines if x.startswith("::")]
        payload = json.loads("\n".join(x for x in lines if not x.startswith("::")))
        assert code == expected, captured.err
        status = {r["skill"]: r["status"] for r in payload["results"]}
        assert status.pop("deploy", "ok") == "ok"  # gated when the new skill's description reaches it
        assert status == {"dns": "new", "pdf": "no baseline", "notes": "no cases"}
        notes = next(r for r in payload["results"] if r["skill"] == "notes")
        assert "nothing of its own to gate" in notes["message"]
        assert any(a.startswith("::notice file=skills/notes/SKILL.md,title=skillreach%3A no cases::")
                   for a in annotations), annotations
        new = next(r for r in payload["results"] if r["skill"] == "dns")
        assert "nothing to score; add its cases, its baseline is recorded on merge" in new["message"]
        assert any(
            a.startswith(f"::{level} file=skills/pdf/SKILL.md,title=skillreach%3A no baseline::")
            and "baseline rebaseline --rev main --skills pdf" in a
            for a in annotations
        ), annotations
        assert not any("skills/dns" in a for a in annotations)


def test_check_expired_baseline_is_not_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path)
    monkeypatch.chdir(repo)
    record_and_commit(repo, run_study(repo, "narrow", "out/narrow"))
    # every case of deploy's corpus is edited on main after the record: none of the baseline's positive
    # cases survives, so the stored baseline is expired (a case added would only make it stale, and it
    # would still be gated). A pull request's own edit of the cases is never the judge: they are read at
    # the base revision.
    qs = corpus()
    edited = tuple(
        q.model_copy(update={"text": q.text + ", now"}) if q.expected_skill == "deploy" else q
        for q in qs.queries
    )
    write_query_set(
        seal(QuerySet(catalog_id="story", queries=edited), source="t"), repo / "evals" / "queries.json"
    )
    git(repo, "commit", "-q", "-am", "evals: every deploy case reworded")
    write_skill(repo / "skills", "deploy", BROAD, BODY)
    capsys.readouterr()
    code = main(["check", "--changed", "--since", "HEAD", "--skills", "skills", "--in-process", "--json"])
    captured = capsys.readouterr()
    assert code == 3
    assert "not compared: deploy (expired)" in captured.err
    result = json.loads(captured.out)["results"][0]
    assert result["status"] == "expired"
    assert "positive cases is in the query set unchanged" in result["message"]


def test_check_gates_a_stale_baseline_on_the_cases_it_shares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A query added for deploy (and one for pdf) makes deploy's record stale, not expired: check still
    gates it, over the identical cases, and lists the case added."""
    repo = make_repo(tmp_path)
    monkeypatch.chdir(repo)
    record_and_commit(repo, run_study(repo, "narrow", "out/narrow"))
    qs = corpus()
    extra = (
        Query(id="web99", text="ship the web app now", expected_skill="deploy", checks=CHECKS),
        Query(id="pdf99", text="merge these pdfs", expected_skill="pdf"),
    )
    write_query_set(
        seal(QuerySet(catalog_id="story", queries=(*qs.queries, *extra)), source="t"),
        repo / "evals" / "queries.json",
    )
    broad = script(True)
    broad["web99"], broad["pdf99"] = {"attempts": [GOOD] * RUNS}, ["pdf"]
    (repo / "ci" / "broad.json").write_text(json.dumps(broad), encoding="utf-8")
    write_skill(repo / "skills", "deploy", BROAD, BODY)
    capsys.readouterr()
    code = main(["check", "--changed", "--since", "HEAD", "--skills", "skills", "--config",
                 str(repo / "ci" / "broad.yaml"), "--in-process", "--json", "--scope", "all"])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    result = next(r for r in json.loads(captured.out)["results"] if r["skill"] == "deploy")
    assert result["status"] in ("ok", "inconclusive", "breach"), result
    assert "baselines stale: deploy (1 case added since recorded)" in captured.err
    assert "Yardstick changed: evals/queries.json: 2 cases added (1 for deploy, 1 for pdf)." in captured.err
    cases = result["comparison"]["cases"]
    assert "web99" in cases["added_positive"]
    assert "pdf99" in cases["added"]
    assert cases["changed"] == []
    assert cases["identical"] == len(qs.queries)


def test_check_needs_changed_and_git(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check"]) == 2
    assert "needs --changed" in capsys.readouterr().err
    (tmp_path / "skills").mkdir()
    assert main(["check", "--changed", "--skills", str(tmp_path / "skills")]) == 2
    assert "not inside a git work tree" in capsys.readouterr().err


def test_check_fails_on_a_changed_skill_that_does_not_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path)
    monkeypatch.chdir(repo)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    # an unquoted colon in the description: YAML refuses it, so the skill drops out of the catalog
    (repo / "skills" / "deploy" / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Deploy: anything at all\n---\nbody\n", encoding="utf-8"
    )
    code = main(
        ["check", "--changed", "--since", "HEAD", "--skills", "skills", "--in-process", "--annotations"]
    )
    captured = capsys.readouterr()
    assert code == 1
    assert "check: gate failed for skills/deploy/SKILL.md" in captured.err
    assert any(
        line.startswith(
            "::error file=skills/deploy/SKILL.md,title=skillreach%3A SKILL.md does not parse::line "
        )
        for line in captured.out.splitlines()
    )
    assert "unparseable" in summary.read_text(encoding="utf-8")


def test_annotation_escaping() -> None:
    from skillreach.cli._check_output import annotate

    line = annotate("warning", "skills/a,b/SKILL.md", "t: x", "50% done\nnext")
    assert line == "::warning file=skills/a%2Cb/SKILL.md,title=t%3A x::50%25 done%0Anext"
    assert annotate("error", None, "t", "m") == "::error title=t::m"


def test_in_process_study_grades_rubrics_with_the_fake_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the in-process study records to ./.skillreach; keep it out of the repo
    from skillreach.baselines.records import record_baseline
    from skillreach.cli.check_cmds import _run_study
    from skillreach.study import StudyConfig
    from skillreach.study.judge import FAKE_JUDGE_MODEL, rubric_version
    from skillreach.study.probe_log import read_probes

    write_skill(tmp_path / "skills", "deploy", NARROW, BODY)
    write_skill(tmp_path / "skills", "pdf", "Merge PDF files.")
    checks = Checks(output=(OutputCheck(contains="deployed"),), rubric="Names the rollback plan.")
    qs = seal(
        QuerySet(
            catalog_id="r",
            queries=(
                Query(id="a", text="ship it", expected_skill="deploy", checks=checks),
                Query(id="b", text="merge pdfs", expected_skill="pdf"),
            ),
        ),
        source="t",
    )
    qpath = write_query_set(qs, tmp_path / "q.json")
    spath = tmp_path / "script.json"
    spath.write_text(
        json.dumps(
            {
                "a": {
                    "attempts": [
                        {"invoked": ["deploy"], "final_text": "deployed; rollback plan: revert the tag"},
                        {"invoked": ["deploy"], "final_text": "deployed"},
                    ]
                },
                "b": ["pdf"],
                **{f"canary-{i}": ["deploy"] for i in (1, 2, 3)},  # the study flow's canary sees the harness
            }
        ),
        encoding="utf-8",
    )
    cfg = StudyConfig(
        skills=(tmp_path / "skills",),
        queries=qpath,
        runtime="fake",
        attempts=2,
        compliance=True,
        runtime_options={"script": str(spath)},
        out=tmp_path / "out",
    )
    art = _run_study(cfg, None, in_process=True)
    graded = {
        p.attempt: p.rubric_grade for p in read_probes(tmp_path / "out" / "probes.jsonl") if p.query_id == "a"
    }
    assert graded == {1: None, 2: None}  # the probe log holds what the runtime did
    judged = {p.attempt: p.rubric_grade for p in read_probes(tmp_path / "out" / "graded.jsonl")}
    assert judged == {1: pytest.approx(2 / 3), 2: 0.0}  # grades on disk as they arrive
    rec = record_baseline(art, qpath, "deploy", judge_model=FAKE_JUDGE_MODEL)
    # keywords of the rubric: "names", "rollback", "plan" → attempt 1 finds 2 of 3, attempt 2 none
    tq = rec.metrics["task_quality"]
    assert tq is not None
    assert rec.per_case["a"].quality == (pytest.approx((1.0 + 2 / 3) / 2), pytest.approx((1.0 + 0.0) / 2))
    assert tq.value == pytest.approx(((1 + 2 / 3) / 2 + 0.5) / 2)
    assert rec.rubric_version == rubric_version({"a": "Names the rollback plan."}, FAKE_JUDGE_MODEL)
