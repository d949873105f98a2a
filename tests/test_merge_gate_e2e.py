"""The merge gate as a team lives with it, through the commands a user types: a git repository of 26
real public skills, a hand-written query set (8 positive cases for each gated skill), baselines recorded
with one ``--all`` command and committed, pull requests checked with ``check --changed`` in a fresh
clone, as CI does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import hang
from tests.helpers.merge_gate import (
    EXPORT_BUGS,
    EXPORTS,
    GATED,
    STEAL,
    corpora_present,
    edit_description,
    git,
    make_team_repo,
    query_set_yaml,
    skillreach,
)

pytestmark = pytest.mark.skipif(not corpora_present(), reason="../shared/corpora is not present")

CHECK = (
    "check", "--changed", "--since", "origin/main", "--skills", "skills", "--in-process", "--annotations"
)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The team's repository with its baselines recorded and committed on main."""
    repo = make_team_repo(tmp_path_factory.mktemp("merge-gate"))
    run = skillreach(repo, "run", "--skills", "skills", "--queries", "evals/queries.yaml", "--runtime",
                     "keyword", "--out", "runs/base")
    assert run.returncode == 0, run.stderr
    rec = skillreach(repo, "baseline", "record", "--artifact", "runs/base/artifact.json", "--all", "--commit")
    assert rec.returncode == 0, rec.stderr
    subject = git(repo, "log", "-1", "--format=%s")
    assert subject == "baselines: 4 skills recorded from runs/base/artifact.json"
    assert sorted(p.stem for p in (repo / "baselines").glob("*.json")) == sorted(GATED)
    for name in GATED:
        record = json.loads((repo / "baselines" / f"{name}.json").read_text())
        assert record["corpus_path"] == "evals/queries.yaml"  # the set the repository holds, not runs/
    return repo


def branch(team: Path, name: str) -> None:
    git(team, "checkout", "-q", "-B", name, "main")


def fresh_clone(team: Path, name: str, dest: Path) -> Path:
    """CI's checkout of the pull request: a new clone, the branch checked out, origin/main the base."""
    git(dest.parent, "clone", "-q", str(team), dest.name)
    git(dest, "checkout", "-q", name)
    return dest


def annotations(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("::")]


def test_an_edit_that_takes_a_neighbours_cases_fails_naming_the_neighbour(
    team: Path, tmp_path: Path
) -> None:
    branch(team, "steal")
    edit_description(team / "skills" / "canvas-design" / "SKILL.md", STEAL)
    git(team, "commit", "-q", "-am", "canvas-design: cover generative art too")
    git(team, "checkout", "-q", "main")
    clone = fresh_clone(team, "steal", tmp_path / "ci")
    victim = "algorithmic-art: activation 1.000 → 0.375 (lost 5 of 8 cases to canvas-design) — breach"
    take = (
        "canvas-design takes 5 cases from its neighbours (5 of algorithmic-art's 8; none given back) of "
    )
    for scope in ("affected", "all", "neighbours"):
        res = skillreach(clone, *CHECK, "--scope", scope)
        assert res.returncode == 1, res.stdout + res.stderr
        assert victim in res.stdout
        assert any(
            a.startswith("::error file=skills/canvas-design/SKILL.md,title=")
            and "takes a neighbour's cases" in a
            and victim in a
            for a in annotations(res.stdout)
        ), annotations(res.stdout)
        assert "Traceback" not in res.stderr
        # the take fails in its own right, naming the thief's SKILL.md and how to narrow it
        assert take in res.stdout
        assert "one-sided McNemar mid-p 0.016 — a significant take" in res.stdout
        assert (
            "narrow the description in skills/canvas-design/SKILL.md: add 'Not for particle, randomness, "
            "seeded — use algorithmic-art.'" in res.stdout
        )
    gated = "every skill with a baseline is re-gated (4)"
    assert gated in skillreach(clone, *CHECK, "--scope", "all", "-v").stdout
    near = skillreach(clone, *CHECK, "--scope", "neighbours", "-v")
    assert "their neighbours: algorithmic-art, canvas-design" in near.stdout
    cheap = skillreach(clone, *CHECK)  # the default: what the change reaches
    assert "check: 2 skills gated on 16 of 38 cases (16 probes, --scope affected) → exit 1" in cheap.stdout


def test_scope_neighbours_regates_a_skill_a_base_confusion_pair_links(tmp_path: Path) -> None:
    """A skill that is no BM25 rival of the edited one, either way, but whose case the edited skill took
    in the study the baselines were recorded from, is re-gated under ``--scope neighbours`` — and here it
    is the victim. Records written before cases said who took them read, and link nothing."""
    repo = make_team_repo(tmp_path / "main", EXPORT_BUGS)
    run = skillreach(repo, "run", "--skills", "skills", "--queries", "evals/queries.yaml", "--runtime",
                     "keyword", "--out", "runs/base")
    assert run.returncode == 0, run.stderr
    rec = skillreach(repo, "baseline", "record", "--artifact", "runs/base/artifact.json", "--all", "--commit")
    assert rec.returncode == 0, rec.stderr
    debugging = json.loads((repo / "baselines" / "systematic-debugging.json").read_text())
    cases = debugging["per_case"].items()
    taken = {k: c["outcomes"]["taken_by"] for k, c in cases if "taken_by" in c["outcomes"]}
    assert taken == {"systematic-debugging-9": {"canvas-design": 1}}  # the confusion pair, in the record

    def pull_request(name: str) -> Path:
        git(repo, "checkout", "-q", "-B", name, "main")
        edit_description(repo / "skills" / "canvas-design" / "SKILL.md", EXPORTS)
        git(repo, "commit", "-q", "-am", "canvas-design: exports too")
        git(repo, "checkout", "-q", "main")
        return fresh_clone(repo, name, tmp_path / name)

    clone = pull_request("exports")
    overlap = skillreach(clone, "overlap", "skills", "--top", "3", "--json")
    assert overlap.returncode == 0, overlap.stderr
    rivals = {s["name"]: {r["name"] for r in s["rivals"]} for s in json.loads(overlap.stdout)["skills"]}
    assert "systematic-debugging" not in rivals["canvas-design"]
    assert "canvas-design" not in rivals["systematic-debugging"]
    res = skillreach(clone, *CHECK, "--scope", "neighbours", "-v")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "their neighbours: algorithmic-art, canvas-design, systematic-debugging" in res.stdout
    assert "(cases of → taken by): systematic-debugging → canvas-design" in res.stdout
    victim = "systematic-debugging: activation 0.929 → 0.571 (lost 5 of 14 cases to canvas-design) — breach"
    assert victim in res.stdout
    assert any(
        a.startswith("::error file=skills/canvas-design/SKILL.md,title=") and victim in a
        for a in annotations(res.stdout)
    ), annotations(res.stdout)

    # the same records as written before cases said who took them: they read, and link nothing
    from skillreach.baselines.records import baseline_digest

    for path in sorted((repo / "baselines").glob("*.json")):
        data = json.loads(path.read_text())
        for case in data["per_case"].values():
            case["outcomes"].pop("taken_by", None)
        data["digest"] = baseline_digest(data)
        path.write_text(json.dumps(data, indent=2) + "\n")
    git(repo, "commit", "-q", "-am", "baselines: as written before taken_by")
    old = pull_request("exports-old-records")
    res = skillreach(old, *CHECK, "--scope", "neighbours", "-v")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "their neighbours: algorithmic-art, canvas-design\n" in res.stdout
    assert "confusion pairs" not in res.stdout
    assert re.search(r"^probing \d+ of 44 cases of evals/queries.yaml .* for algorithmic-art, canvas-design$",
                     res.stdout, re.M), res.stdout
    every = skillreach(old, *CHECK, "--scope", "all")  # --scope all still re-gates it
    assert every.returncode == 1, every.stdout + every.stderr
    assert victim in every.stdout
    # and so does the default: the new description's BM25 reach finds the export cases
    reach = skillreach(old, *CHECK)
    assert reach.returncode == 1, reach.stdout + reach.stderr
    # gated on the cases the change reaches: the five lost are among them
    assert re.search(r"^systematic-debugging: activation [01]\.\d+ → 0\.\d+ \(lost 5 of \d+ cases to "
                     r"canvas-design\) — breach$", reach.stdout, re.M), reach.stdout


def test_staged_check_reads_the_cases_at_the_base(team: Path, tmp_path: Path) -> None:
    """``check --staged`` probes the cases as they are at the base revision: a pull request that rewords
    one of algorithmic-art's cases and takes its other cases is gated on all eight as the base has them
    (the rewording is named, never the judge)."""
    git(team, "checkout", "-q", "-B", "steal-reworded", "main")
    edit_description(team / "skills" / "canvas-design" / "SKILL.md", STEAL)
    queries = team / "evals" / "queries.yaml"
    text = queries.read_text(encoding="utf-8")
    old = '"generative art with p5.js and flow fields"'
    assert old in text
    queries.write_text(text.replace(old, '"generative art in p5.js, with flow fields"'), encoding="utf-8")
    git(team, "commit", "-q", "-am", "canvas-design: generative art too; a case reworded")
    git(team, "checkout", "-q", "main")
    clone = fresh_clone(team, "steal-reworded", tmp_path / "ci")
    for scope in ("affected", "all", "neighbours"):
        res = skillreach(clone, "check", "--changed", "--since", "origin/main", "--skills", "skills",
                         "--in-process", "--staged", "--json", "--scope", scope)
        assert res.returncode == 1, res.stdout + res.stderr
        payload = json.loads(res.stdout)
        by = {r["skill"]: r for r in payload["results"]}
        staged = {m["metric"]: m for m in by["algorithmic-art"]["staged"]["metrics"]}
        assert staged["activation"]["planned_cases"] == 8  # as at the base: the rewording is not the judge
        assert staged["activation"]["verdict"] == "breach"
        assert by["algorithmic-art"]["comparison"]["cases"]["changed"] == []
        (change,) = payload["yardstick"]["query_sets"]
        assert change["changed"] == ["algorithmic-art-1"]
    quiet = skillreach(clone, *CHECK, "--staged")
    assert (
        "Yardstick changed: evals/queries.yaml: 1 case changed (algorithmic-art-1): gated as they are at the "
        "base revision." in quiet.stdout
    ), quiet.stdout


def test_a_pull_request_cannot_lower_its_own_bar(team: Path, tmp_path: Path) -> None:
    branch(team, "wreck")
    edit_description(team / "skills" / "algorithmic-art" / "SKILL.md", " Nothing else.")
    md = team / "skills" / "algorithmic-art" / "SKILL.md"
    lines = md.read_text().split("\n")
    i = next(n for n, line in enumerate(lines) if line.startswith("description:"))
    lines[i] = "description: Knits scarves."
    md.write_text("\n".join(lines))
    git(team, "rm", "-q", "baselines/algorithmic-art.json")
    # and a rewritten record for canvas-design: every activation set to 0, re-sealed
    from skillreach.baselines.records import read_baseline, seal_baseline, write_baseline

    rec = read_baseline(team / "baselines" / "canvas-design.json")
    low = rec.model_copy(
        update={"per_case": {k: c.model_copy(update={"activated": tuple(0 for _ in c.activated)})
                             for k, c in rec.per_case.items()}}
    )
    write_baseline(seal_baseline(low), team / "baselines" / "canvas-design.json")
    git(team, "commit", "-q", "-am", "algorithmic-art: new direction; its baseline goes")
    git(team, "checkout", "-q", "main")
    clone = fresh_clone(team, "wreck", tmp_path / "ci")
    res = skillreach(clone, *CHECK, "--scope", "all")
    assert res.returncode == 1, res.stdout + res.stderr
    # the yardstick change is named, in one line, and fails by itself
    assert (
        "Yardstick changed: baselines/algorithmic-art.json: deleted; baselines/canvas-design.json: edited "
        "— not accepted." in res.stdout
    ), res.stdout
    # gated against main's records: the deleted one still holds, the rewritten one is not read
    victim = r"^algorithmic-art: activation 1\.000 → 0\.\d+ \(lost \d of 8 cases to "
    assert re.search(victim, res.stdout, re.M)
    assert "no baseline" not in res.stdout
    assert res.stderr.strip() == (
        "skillreach: error: check: gate failed for algorithmic-art, baselines/algorithmic-art.json, "
        "baselines/canvas-design.json"
    )
    verbose = skillreach(clone, *CHECK, "--scope", "all", "-v")
    assert "this change touches the baseline records" in verbose.stdout
    assert "D baselines/algorithmic-art.json" in verbose.stdout


def test_a_new_query_expires_nothing_and_the_next_edit_is_gated(team: Path, tmp_path: Path) -> None:
    branch(team, "more-cases")
    extra = [("systematic-debugging-9", "a flaky test failure, unexpected behavior", "systematic-debugging")]
    (team / "evals" / "queries.yaml").write_text(query_set_yaml(extra), encoding="utf-8")
    git(team, "commit", "-q", "-am", "evals: one more debugging case")
    git(team, "checkout", "-q", "main")
    clone = fresh_clone(team, "more-cases", tmp_path / "ci")
    res = skillreach(clone, *CHECK)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "; no skill changed" in res.stdout
    assert "Yardstick changed: evals/queries.yaml: 1 case added (1 for systematic-debugging)." in res.stdout
    status = skillreach(clone, "baseline", "status")
    assert status.returncode == 0, status.stderr
    assert "expired" not in status.stdout + status.stderr
    assert "1 case added since recorded" in status.stdout + status.stderr
    # the next pull request edits a body: that skill is gated, against its record, on the shared cases
    md = clone / "skills" / "test-driven-development" / "SKILL.md"
    md.write_text(md.read_text() + "\n\nOne more rule.\n", encoding="utf-8")
    git(clone, "commit", "-q", "-am", "test-driven-development: one more rule")
    res = skillreach(clone, *CHECK, "-v")
    assert res.returncode == 0, res.stdout + res.stderr
    assert (
        "probing 8 of 39 cases of evals/queries.yaml (runtime keyword, model keyword, 1 runs per case) for "
        "test-driven-development" in res.stdout
    )
    assert "routing table changed" not in res.stdout


def test_a_record_in_a_fresh_clone_finds_its_query_set_or_says_it_is_missing(
    team: Path, tmp_path: Path
) -> None:
    clone = tmp_path / "ci"
    git(tmp_path, "clone", "-q", str(team), "ci")
    status = skillreach(clone, "baseline", "status", "--json")
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)["baselines"]
    assert sorted(r["skill"] for r in rows) == sorted(GATED)
    assert all(not r["expired"] and not r["query_set_missing"] and not r["stale"] for r in rows), rows
    (clone / "evals" / "queries.yaml").unlink()  # a checkout without the query set
    status = skillreach(clone, "baseline", "status")
    assert status.returncode == 0, status.stderr
    out = " ".join(status.stdout.split())
    assert "expired" not in out
    assert (
        "its query set evals/queries.yaml is missing in this checkout; commit it, or re-record the "
        "baseline with --queries FILE" in out
    )


def test_rebaseline_from_the_base_revision_makes_one_commit(team: Path) -> None:
    branch(team, "grow")
    extra = [("systematic-debugging-9", "a flaky test failure, unexpected behavior", "systematic-debugging")]
    (team / "evals" / "queries.yaml").write_text(query_set_yaml(extra), encoding="utf-8")
    git(team, "commit", "-q", "-am", "evals: one more debugging case")
    head = git(team, "rev-parse", "HEAD")
    res = skillreach(team, "baseline", "rebaseline", "--rev", "grow", "--commit", "--in-process")
    assert res.returncode == 0, res.stdout + res.stderr
    assert git(team, "rev-list", "--count", f"{head}..HEAD") == "1"
    assert git(team, "log", "-1", "--format=%s").startswith(f"rebaseline at {head[:12]}: 4 recorded")
    record = json.loads((team / "baselines" / "systematic-debugging.json").read_text())
    assert record["cases"]["positive"] == 9
    assert git(team, "worktree", "list").count("\n") == 0  # the worktree it probed in is gone
    git(team, "checkout", "-q", "main")


def test_run_gates_only_when_asked(team: Path) -> None:
    git(team, "checkout", "-q", "main")
    base = ("run", "--skills", "skills", "--queries", "evals/queries.yaml", "--runtime", "keyword")
    quiet = skillreach(team, *base, "--out", "runs/plain")
    assert quiet.returncode == 0, quiet.stderr
    assert "gate report" not in quiet.stdout  # baselines/ exists, but nobody asked for a gate
    asked = skillreach(team, *base, "--out", "runs/gated", "--gate")
    assert asked.returncode == 0, asked.stderr
    assert "gate report: 0 breaches over 8 gated metrics" in asked.stdout
    # before probing, what the cases can show: four of eight lost is the smallest breach at -0.05
    assert "algorithmic-art: smallest breach of activation (-0.05): 4 of 8 cases (a change of 0.50)" in (
        asked.stdout + asked.stderr
    )
    assert "smallest breach" not in quiet.stdout + quiet.stderr
    assert "breach(es)" not in asked.stdout + asked.stderr


@pytest.mark.parametrize("where", ["flag", "file", "environment"])
def test_a_gate_that_is_not_a_finite_number_is_refused_naming_where(
    team: Path, tmp_path: Path, where: str
) -> None:
    args = ["check", "--changed", "--since", "HEAD", "--skills", "skills", "--in-process"]
    env_gate = None
    if where == "flag":
        args += ["--gate", "activation=nan"]
        expected = "--gate 'activation=nan': a gate is a finite number in [-1, 1]"
    elif where == "file":
        cfg = tmp_path / "gates.yaml"
        cfg.write_text("gates:\n  activation: .nan\n", encoding="utf-8")
        args += ["--config", str(cfg)]
        expected = f"{cfg}: gates.activation: Input should be a finite number"
    else:
        env_gate = '{"activation": NaN}'
        expected = "environment variable SKILLREACH_GATES: gates.activation: Input should be a finite number"
    import os
    import sys

    exe = Path(sys.executable).with_name("skillreach")
    env = {**os.environ, **({"SKILLREACH_GATES": env_gate} if env_gate else {})}
    res = hang.finish([str(exe), *args], limit_s=120, cwd=team, env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip() == f"skillreach: error: {expected}"


def test_diff_names_the_skill_that_lost_and_fails_on_worse(team: Path, tmp_path: Path) -> None:
    clone = tmp_path / "steal"
    git(tmp_path, "clone", "-q", str(team), "steal")
    git(clone, "checkout", "-q", "-B", "steal-diff", "origin/main")
    edit_description(clone / "skills" / "canvas-design" / "SKILL.md", STEAL)
    base = ("run", "--skills", "skills", "--queries", "evals/queries.yaml", "--runtime", "keyword")
    assert skillreach(clone, *base, "--out", "runs/b").returncode == 0
    git(clone, "stash", "-q")
    assert skillreach(clone, *base, "--out", "runs/a").returncode == 0
    plain = skillreach(clone, "diff", "runs/a", "runs/b", "--vary", "description")
    assert plain.returncode == 0, plain.stderr
    first = plain.stdout.splitlines()[0]
    assert first.startswith("algorithmic-art: recall 1.000 → 0.375 (Δ -0.625 [")
    assert first.endswith("; 5 queries lost to canvas-design)")
    worse = skillreach(clone, "diff", "runs/a", "runs/b", "--vary", "description", "--fail-on", "worse")
    assert worse.returncode == 1
    assert worse.stderr.strip() == f"skillreach: error: diff: B is worse — {first}"


def test_lint_warns_when_a_skill_has_fewer_cases_than_its_gate_can_use(team: Path, tmp_path: Path) -> None:
    few = tmp_path / "few.yaml"
    few.write_text(
        "queries:\n  - id: a\n    text: draw generative art\n    expected_skill: algorithmic-art\n"
        "    kind: implicit\n",
        encoding="utf-8",
    )
    res = skillreach(team, "lint", "skills", "--queries", str(few))
    assert res.returncode == 0, res.stderr
    assert (
        f"warning: algorithmic-art: 1 positive case in {few}: its activation gate (-0.05) can never call a "
        "breach; it needs at least 2" in res.stdout
    )
    assert f"25 skills without a positive case in {few} cannot be gated: " in res.stdout
    full = skillreach(team, "lint", "skills", "--queries", "evals/queries.yaml")
    assert "can never call a breach" not in full.stdout  # eight cases each: a gate that can act
