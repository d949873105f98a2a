"""The pull-request gate a team can make required (issue 38), as a team lives with it: a git repository of
26 real public skills and 48 sealed hand-written queries, baselines recorded and committed on ``main``,
and each pull request checked in a fresh clone of its branch by the GitHub Action's own steps run as a
script (``tests/helpers/action.py``; lint, verify, check, step summary — the skillreach under test on
PATH instead of the install step).

The five pull requests of the issue, and a benign one:

1. an added skill that overlaps a neighbour passes when it takes nothing (scored, not gated) and fails
   naming its victim when it takes its cases;
2. a relabel of the stolen cases to the thief, re-sealed, fails naming the cases (a person's accept
   lets it through, and the summary says so);
3. a baseline record deleted alone fails;
4. a steal of two of five cases from each of two neighbours fails on the pooled take although each
   victim alone is inconclusive — with ``lenient: true`` too;
5. a description broadened over a grown corpus fails on compliance of the new cases (an agent stand-in
   that does what the loaded body says) and passes once the body gains the missing branch;
6. a benign rewording passes on a fraction of the probes, in a short log.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.action import run_action
from tests.helpers.pr_gate import (
    ADDED_OVERLAP,
    ADDED_QUIET,
    BENIGN,
    STEAL_TWO_OF_FIVE,
    BodyFollower,
    add_skill,
    corpora_present,
    edit_description,
    git,
    make_release_repo,
    make_repo,
    query_yaml,
    record_baselines,
    release_skill,
    release_yaml,
    reseal,
    skillreach,
)

pytestmark = pytest.mark.skipif(not corpora_present(), reason="../shared/corpora is not present")

CHECK = "Check changed skills against their baselines"
FULL_STUDY = 48
"""Probes of a full study of the team's sealed set (48 cases, one attempt)."""


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The team's repository, its baselines recorded from one study and committed on main."""
    repo = make_repo(tmp_path_factory.mktemp("pr-gate"))
    record_baselines(repo)
    assert (
        git(repo, "log", "-1", "--format=%s") == "baselines: 8 skills recorded from runs/base/artifact.json"
    )
    return repo


def pull_request(
    team: Path, name: str, edit: Callable[[Path], None], dest: Path, *, message: str = ""
) -> Path:
    """The branch ``name`` off main with ``edit`` committed; CI's fresh clone of it (origin/main the base)."""
    git(team, "checkout", "-q", "-f", "-B", name, "main")
    edit(team)
    git(team, "add", "-A")
    git(team, "commit", "-q", "-m", message or name)
    git(team, "checkout", "-q", "-f", "main")
    git(dest.parent, "clone", "-q", str(team), dest.name)
    git(dest, "checkout", "-q", name)
    return dest


def action(
    clone: Path, tmp: Path, *, runner: bool = False, **inputs: str
) -> tuple[dict[str, dict[str, Any]], str]:
    """The action's steps in ``clone`` (inputs by their names, ``_`` for ``-``): each step by name, and
    the step summary the run wrote. ``runner``: no git identity anywhere, as on a fresh GitHub runner."""
    summary = tmp / f"summary-{len(list(tmp.glob('summary-*')))}.md"
    temp = tmp / "runner-temp"
    temp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "GITHUB_", "PREFECT_API"))}
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        GITHUB_ACTIONS="true",
        GITHUB_STEP_SUMMARY=str(summary),
        GIT_AUTHOR_NAME="ci",
        GIT_AUTHOR_EMAIL="ci@example.invalid",
        GIT_COMMITTER_NAME="ci",
        GIT_COMMITTER_EMAIL="ci@example.invalid",
    )
    if runner:
        for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
            env.pop(k)
        home = tmp / "runner-home"
        home.mkdir(exist_ok=True)
        env.update(HOME=str(home), GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    given = {"skills": "skills", "queries": "evals/queries.json"} | {
        k.replace("_", "-"): v for k, v in inputs.items()
    }
    steps = run_action(given, clone, env, temp, skip={"Install skillreach"})
    by = {s["name"]: s for s in steps}
    return by, summary.read_text(encoding="utf-8") if summary.is_file() else ""


def annotations(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("::")]


def probes_of(clone: Path) -> int:
    log = clone / ".skillreach" / "check" / "probes.jsonl"
    return sum(1 for line in log.read_text(encoding="utf-8").splitlines() if line.strip())


# -- 1. an added skill -------------------------------------------------------------------------------


def _add(spec: tuple[str, str, list[str]]) -> Callable[[Path], None]:
    name, description, cases = spec

    def edit(repo: Path) -> None:
        add_skill(repo, name, description)
        extra = [(f"{name}-{i}", text, name) for i, text in enumerate(cases, 1)]
        (repo / "evals" / "queries.yaml").write_text(query_yaml(extra=extra), encoding="utf-8")
        reseal(repo)

    return edit


def test_an_added_skill_passes_when_it_takes_nothing_and_fails_naming_its_victim(
    team: Path, tmp_path: Path
) -> None:
    quiet = pull_request(team, "add-quiet", _add(ADDED_QUIET), tmp_path / "quiet")
    steps, summary = action(quiet, tmp_path)
    check = steps[CHECK]
    assert check["rc"] == 0, check["out"]
    # scored, with intervals, never "missing a baseline"; recorded on merge
    assert (
        "p5-classroom: a new skill, scored, not gated: activation 1.000 [0.439, 1.000] over 3 cases, false "
        "activation 0.000 [" in check["out"]
    ), check["out"]
    assert "its baseline is recorded on merge" in check["out"]
    assert "no baseline" not in check["out"]
    assert "🆕 p5-classroom: a new skill, scored, not gated" in summary
    assert summary.startswith(
        "**Yardstick changed: evals/queries.json: 3 cases added (3 for p5-classroom).**"
    )

    overlap = pull_request(team, "add-overlap", _add(ADDED_OVERLAP), tmp_path / "overlap")
    steps, summary = action(overlap, tmp_path)
    check = steps[CHECK]
    assert check["rc"] == 1, check["out"]
    victim = "algorithmic-art: activation 1.000 → 0.200 (lost 4 of 5 cases to p5-classroom) — breach"
    assert victim in check["out"]
    assert (
        "p5-classroom takes 4 cases from its neighbours (4 of algorithmic-art's 5; none given back)"
        in check["out"]
    )
    # the annotation is on the new skill's SKILL.md, with the sentence that would narrow it
    assert any(
        a.startswith("::error file=skills/p5-classroom/SKILL.md,title=skillreach%3A takes its neighbours")
        and "use algorithmic-art." in a
        for a in annotations(check["stdout"])
    ), annotations(check["stdout"])
    assert f"**{victim}**" in summary


def test_after_the_merge_the_added_skills_baselines_are_recorded_in_one_commit(
    team: Path, tmp_path: Path
) -> None:
    """``init``'s workflow, after a merge: the action with ``record-added: true`` records the baselines of
    the skills the merge added, in one commit (the workflow pushes it)."""
    clone = pull_request(team, "add-quiet-merge", _add(ADDED_QUIET), tmp_path / "merged")
    git(clone, "checkout", "-q", "-B", "main", "origin/main")
    git(clone, "merge", "-q", "--no-ff", "-m", "merge add-quiet", "origin/add-quiet-merge")
    head = git(clone, "rev-parse", "HEAD")
    steps, _ = action(clone, tmp_path, runner=True, record_added="true", runtime="keyword")
    step = steps["Record the added skills' baselines"]
    assert step["rc"] == 0, step["out"]
    # a runner has no git identity: the commit is the workflow's bot's
    assert git(clone, "log", "-1", "--format=%an") == "github-actions[bot]"
    assert not steps[CHECK]["ran"]
    assert not steps["Lint skills"]["ran"]
    assert git(clone, "rev-list", "--count", f"{head}..HEAD") == "1"
    assert git(clone, "show", "--name-only", "--format=", "HEAD").split() == ["baselines/p5-classroom.json"]
    record = json.loads((clone / "baselines" / "p5-classroom.json").read_text(encoding="utf-8"))
    assert record["cases"]["positive"] == 3
    assert record["corpus_path"] == "evals/queries.json"
    # run again: nothing is missing any more, nothing is committed
    steps, _ = action(clone, tmp_path, record_added="true", runtime="keyword")
    assert steps["Record the added skills' baselines"]["rc"] == 0
    assert git(clone, "rev-list", "--count", f"{head}..HEAD") == "1"


# -- 2. relabel + re-seal ----------------------------------------------------------------------------

TAKEN = {
    "algorithmic-art-4": "canvas-design",
    "algorithmic-art-5": "canvas-design",
    "brand-guidelines-4": "canvas-design",
    "brand-guidelines-5": "canvas-design",
}


def _steal_and_relabel(repo: Path) -> None:
    edit_description(repo / "skills" / "canvas-design" / "SKILL.md", STEAL_TWO_OF_FIVE)
    (repo / "evals" / "queries.yaml").write_text(query_yaml(relabel=TAKEN), encoding="utf-8")
    reseal(repo)


def test_relabelling_the_stolen_cases_and_resealing_fails_naming_the_cases(
    team: Path, tmp_path: Path
) -> None:
    clone = pull_request(team, "relabel", _steal_and_relabel, tmp_path / "relabel")
    steps, summary = action(clone, tmp_path, lenient="true")
    assert steps["Verify the query set"]["rc"] == 0  # the seal is fine: the yardstick moved
    check = steps[CHECK]
    assert check["rc"] == 1, check["out"]
    moved = (
        "evals/queries.json: 2 cases relabelled from algorithmic-art to canvas-design (algorithmic-art-4, "
        "algorithmic-art-5); evals/queries.json: 2 cases relabelled from brand-guidelines to canvas-design "
        "(brand-guidelines-4, brand-guidelines-5) — not accepted"
    )
    assert f"Yardstick changed: {moved}." in " ".join(check["stdout"].split())
    assert summary.splitlines()[0] == f"**Yardstick changed: {moved}.**"  # the summary's first line
    assert any(
        a.startswith("::error file=evals/queries.json,title=skillreach%3A the yardstick changed::")
        for a in annotations(check["stdout"])
    )
    # and the victims do not vanish: they are gated on the base's labels
    assert re.search(
        r"^algorithmic-art: activation 1\.000 → 0\.\d+ \(lost 2 of \d cases to canvas-design\)",
        check["stdout"],
        re.M,
    ), check["stdout"]

    # a person asked for it: the trailer accepts it, the summary says so
    git(
        clone,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "evals: these cases are canvas-design's\n\nSkillreach-Accept: algorithmic-art, brand-guidelines",
    )
    steps, summary = action(clone, tmp_path)
    assert steps[CHECK]["rc"] == 0, steps[CHECK]["out"]
    assert summary.splitlines()[0] == (
        "**Yardstick changed: evals/queries.json: 2 cases relabelled from algorithmic-art to "
        "canvas-design (algorithmic-art-4, algorithmic-art-5); evals/queries.json: 2 cases relabelled from "
        "brand-guidelines to canvas-design (brand-guidelines-4, brand-guidelines-5) — accepted by a "
        "Skillreach-Accept trailer.**"
    )
    assert (
        "✍️ algorithmic-art: its yardstick changes in this pull request, accepted by a Skillreach-Accept "
        "trailer" in summary
    )


# -- 3. a record deleted alone ------------------------------------------------------------------------


def test_a_record_deleted_alone_fails(team: Path, tmp_path: Path) -> None:
    clone = pull_request(
        team, "drop-record", lambda r: (r / "baselines" / "theme-factory.json").unlink(), tmp_path / "drop"
    )
    steps, summary = action(clone, tmp_path)
    check = steps[CHECK]
    assert check["rc"] == 1, check["out"]
    assert "Yardstick changed: baselines/theme-factory.json: deleted — not accepted." in check["stdout"]
    assert (
        summary.splitlines()[0]
        == "**Yardstick changed: baselines/theme-factory.json: deleted — not accepted.**"
    )
    assert check["stderr"].strip().endswith("check: gate failed for baselines/theme-factory.json")
    # accepted with the action's input, it passes
    steps, summary = action(clone, tmp_path, accept="theme-factory")
    assert steps[CHECK]["rc"] == 0, steps[CHECK]["out"]
    assert "— accepted by --accept.**" in summary.splitlines()[0]


def test_a_record_edited_by_hand_is_named_tampered_and_fails(team: Path, tmp_path: Path) -> None:
    """A pull request that lowers a bar in a record without its digest: the base's record is the judge,
    and the change is named twice — the yardstick line and the tampered line."""

    def lower(repo: Path) -> None:
        path = repo / "baselines" / "theme-factory.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["metrics"]["activation"]["value"] = 0.2
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")

    clone = pull_request(team, "lower-bar", lower, tmp_path / "lower")
    steps, summary = action(clone, tmp_path)
    check = steps[CHECK]
    assert check["rc"] == 1, check["out"]
    line = "baselines/theme-factory.json: edited — and its digest does not match its content"
    assert f"Yardstick changed: {line} — not accepted." in check["stdout"], check["out"]
    assert "tampered: baselines/theme-factory.json" in check["stdout"]
    assert summary.splitlines()[0].startswith(f"**Yardstick changed: {line}")
    assert "- Tampered: baselines/theme-factory.json" in summary
    assert "Traceback" not in check["out"]


# -- 4. a steal of two of five from each of two neighbours --------------------------------------------


def test_a_steal_of_two_of_five_from_two_neighbours_fails_pooled_even_lenient(
    team: Path, tmp_path: Path
) -> None:
    clone = pull_request(
        team,
        "steal",
        lambda r: edit_description(r / "skills" / "canvas-design" / "SKILL.md", STEAL_TWO_OF_FIVE),
        tmp_path / "steal",
    )
    take = (
        "canvas-design takes 4 cases from its neighbours (2 of algorithmic-art's 5, 2 of brand-guidelines' "
        "5; none given back) of 35 pooled: one-sided McNemar mid-p 0.031 — a significant take"
    )
    # every skill re-gated (--scope all), lenient; then the default scope (what the change reaches), strict:
    # both fail on the pooled take, name both victims and advise narrowing the thief, never --lenient
    for scope, lenient in (("all", "true"), ("affected", "false")):
        steps, summary = action(clone, tmp_path, scope=scope, lenient=lenient)
        check = steps[CHECK]
        assert check["rc"] == 1, check["out"]
        out = check["stdout"]
        # each victim alone: two of its five cases lost is inconclusive (the default scope gates each on
        # the cases the change reaches: two of four, two of three)
        lost = {"algorithmic-art": "0.600 (lost 2 of 5", "brand-guidelines": "0.600 (lost 2 of 5"}
        if scope == "affected":
            lost = {"algorithmic-art": "0.500 (lost 2 of 4", "brand-guidelines": "0.333 (lost 2 of 3"}
        for victim, figures in lost.items():
            line = f"{victim}: activation 1.000 → {figures} cases to canvas-design) — inconclusive"
            assert line in out, out
        if scope == "all":  # pooled over every other skill's cases
            assert take in out
            assert f"**{take}**" in summary
        else:  # on fewer probes
            assert (
                "canvas-design takes 4 cases from its neighbours (2 of algorithmic-art's 4, 2 of "
                "brand-guidelines' 3; none given back) of 8 pooled: one-sided McNemar mid-p 0.031 — a "
                "significant take" in out
            )
            assert probes_of(clone) <= 0.6 * FULL_STUDY
        assert (
            "narrow the description in skills/canvas-design/SKILL.md: add 'Not for exhibition, catalogue, "
            "museum — use algorithmic-art.' 'Not for badge, conference, follow — use brand-guidelines.'"
            in out
        )
        assert "--lenient" not in out  # the advice is to narrow the thief, never to be lenient
        failed = check["stderr"].strip().splitlines()[-1]
        assert "canvas-design" in failed
    # staged, lenient: the take is tested on what the stages probed, and fails all the same
    staged = skillreach(
        clone, "check", "--changed", "--skills", "skills", "--staged", "--lenient", "--in-process", "--json"
    )
    assert staged.returncode == 1, staged.stdout + staged.stderr
    results = json.loads(staged.stdout)["results"]
    assert [r["skill"] for r in results if r["status"] == "takes"] == ["canvas-design"], results


# -- 5. a broadened description over a grown corpus ---------------------------------------------------


def test_a_broadened_description_fails_on_new_cases_until_the_body_follows(tmp_path: Path) -> None:
    from tests.fakes.messages_api import MessagesAPI

    with MessagesAPI(BodyFollower(), latency=0.0) as api:
        keys = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-key", "ANTHROPIC_BASE_URL": api.base_url}
        saved = {k: os.environ.get(k) for k in keys}
        os.environ.update(keys)
        try:
            repo = make_release_repo(tmp_path / "main")
            base = skillreach(
                repo,
                "run",
                "--skills",
                "skills",
                "--queries",
                "evals/queries.json",
                "--runtime",
                "anthropic",
                "--model",
                "claude-sonnet-4-5",
                "--compliance",
                "--out",
                "runs/base",
            )
            assert base.returncode == 0, base.stdout + base.stderr
            rec = skillreach(
                repo, "baseline", "record", "--artifact", "runs/base/artifact.json", "--all", "--commit"
            )
            assert rec.returncode == 0, rec.stderr
            record = json.loads((repo / "baselines" / "release-notes.json").read_text(encoding="utf-8"))
            assert record["metrics"]["compliance"]["value"] == 1.0
            assert record["metrics"]["compliance"]["cases"] == 9

            def broaden(r: Path) -> None:
                release_skill(r, broad=True, hotfix_rule=False)
                (r / "evals" / "queries.yaml").write_text(release_yaml(grown=True), encoding="utf-8")
                reseal(r)

            clone = pull_request(repo, "broaden", broaden, tmp_path / "ci")
            env_keys = {"anthropic_api_key": keys["ANTHROPIC_API_KEY"]}
            os.environ["ANTHROPIC_BASE_URL"] = api.base_url
            # the action's max-cost input beats max_cost_usd in the config file (a cap far too small): the
            # check runs in full (the other way round is below)
            (tmp_path / "cap.toml").write_text("max_cost_usd = 0.000001\n", encoding="utf-8")
            cap = str(tmp_path / "cap.toml")
            steps, summary = action(clone, tmp_path, config=cap, max_cost="100", **env_keys)
            check = steps[CHECK]
            assert check["ran"], {k: (v["rc"], v["out"][-800:]) for k, v in steps.items()}
            assert "--max-cost leaves" not in check["out"], check["out"]
            assert check["rc"] == 1, check["out"]
            out = check["stdout"]
            assert "release-notes: compliance (new cases) breach: Δ -1.000" in out, out
            assert "6 cases" in out
            assert "compliance (paired)" not in out  # the nine old cases still comply
            assert "baselines stale: release-notes (6 cases added since recorded)" in out
            assert "sk-ant-test-not-a-key" not in check["out"] + summary
            # the cohorts by corpus history, in the check's report.html: old cases 9 of 9, new 0 of 6
            page = (clone / ".skillreach" / "check" / "report.html").read_text(encoding="utf-8")
            row = 'data-gate-metric="compliance" data-gate-cohort="new cases" data-verdict="breach"'
            assert f'data-gate-skill="release-notes" {row}' in page
            assert ">baseline corpus<" in page  # both cohorts in the quality table
            assert ">new cases<" in page
            gate = json.loads((clone / ".skillreach" / "check" / "gate.json").read_text(encoding="utf-8"))
            (cmp,) = gate["comparisons"]
            cohorts = cmp["cohorts"]["compliance"]
            assert (cohorts["baseline_cases"]["value"], cohorts["baseline_cases"]["cases"]) == (1.0, 9)
            assert (cohorts["new_cases"]["value"], cohorts["new_cases"]["cases"]) == (0.0, 6)

            # without the input the config file's cap holds; a small input beats a roomy config file
            steps, _ = action(clone, tmp_path, config=cap, **env_keys)
            assert "--max-cost leaves" in steps[CHECK]["out"], steps[CHECK]["out"]
            (tmp_path / "roomy.toml").write_text("max_cost_usd = 100\n", encoding="utf-8")
            roomy = str(tmp_path / "roomy.toml")
            steps, _ = action(clone, tmp_path, config=roomy, max_cost="0.000001", **env_keys)
            assert "--max-cost leaves" in steps[CHECK]["out"], steps[CHECK]["out"]

            # the body gains the missing branch: the agent now does what the new cases require
            release_skill(clone, broad=True, hotfix_rule=True)
            git(clone, "commit", "-q", "-am", "release-notes: the hotfix branch")
            steps, _ = action(clone, tmp_path, **env_keys)
            assert steps[CHECK]["rc"] == 0, steps[CHECK]["out"]
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


# -- 6. a benign rewording ----------------------------------------------------------------------------


def _reword(repo: Path) -> None:
    md = repo / "skills" / "canvas-design" / "SKILL.md"
    lines = md.read_text(encoding="utf-8").split("\n")
    i = next(n for n, line in enumerate(lines) if line.startswith("description:"))
    lines[i] = BENIGN
    md.write_text("\n".join(lines), encoding="utf-8")


def test_a_benign_rewording_passes_with_few_probes_and_a_short_log(team: Path, tmp_path: Path) -> None:
    clone = pull_request(team, "reword", _reword, tmp_path / "reword")
    steps, summary = action(clone, tmp_path)
    check = steps[CHECK]
    assert check["rc"] == 0, check["out"]
    assert len(check["out"].splitlines()) < 40, check["out"]
    fixed = probes_of(clone)
    assert fixed <= 0.3 * FULL_STUDY, fixed
    assert summary.startswith("**Yardstick unchanged")
    assert "Every gated metric is ok." in summary
    # --verbose prints every table
    steps, _ = action(clone, tmp_path, verbose="true")
    assert len(steps[CHECK]["out"].splitlines()) > 40
    # staged, it never fails a skill it did not change, and it stops early: the screen (the cases most at
    # risk: canvas-design's own, the words did not change so no BM25 ranking moved) was quiet, so the rest
    # of what the change reaches is never probed
    staged = skillreach(clone, "check", "--changed", "--skills", "skills", "--staged", "--in-process")
    assert staged.returncode == 0, staged.stdout + staged.stderr
    probed = re.search(r"staged: probed (\d+) of (\d+) planned", staged.stdout + staged.stderr)
    assert probed, staged.stdout + staged.stderr
    assert int(probed.group(1)) == probes_of(clone)
    assert int(probed.group(2)) == fixed  # the plan is the fixed check's
    assert int(probed.group(1)) < fixed, staged.stdout + staged.stderr
    assert f"({probes_of(clone)} probes, --scope affected)" in staged.stdout + staged.stderr  # counted once
    wide = skillreach(clone, "check", "--changed", "--skills", "skills", "--staged", "--scope", "all",
                      "--in-process")
    # every skill gated, staged: the seven the rewording did not touch are never failed for want of a look,
    # and the full study's 48 probes are not all spent
    assert wide.returncode == 0, wide.stdout + wide.stderr
    spent = re.search(r"8 skills gated on 48 of 48 cases \((\d+) probes", wide.stdout + wide.stderr)
    assert spent, wide.stdout + wide.stderr
    assert int(spent.group(1)) < FULL_STUDY / 2, wide.stdout + wide.stderr


# -- the base revision must be there, and a record is only ever its own skill's -------------------------


def test_a_shallow_clone_is_refused_in_one_line(team: Path, tmp_path: Path) -> None:
    pull_request(team, "reword-shallow", _reword, tmp_path / "unused")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "reword-shallow", f"file://{team}", "shallow")
    res = skillreach(shallow, "check", "--changed", "--skills", "skills", "--in-process")
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert "shallow clone" in line
    assert "fetch-depth: 0" in line
    # with the base branch fetched shallow too, the merge base is still cut off: refused as well
    git(shallow, "fetch", "-q", "--depth", "1", "origin", "main:refs/remotes/origin/main")
    res = skillreach(shallow, "check", "--changed", "--skills", "skills", "--in-process")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "git fetch --unshallow" in res.stderr


def test_a_record_under_another_skills_name_is_never_its_bar(team: Path, tmp_path: Path) -> None:
    """A base whose ``baselines/canvas-design.json`` holds brand-guidelines' record: canvas-design is not
    gated against it (refused, named), and brand-guidelines keeps its own."""
    import shutil

    repo = tmp_path / "swapped"
    git(tmp_path, "clone", "-q", str(team), "swapped")
    shutil.copy(repo / "baselines" / "brand-guidelines.json", repo / "baselines" / "canvas-design.json")
    git(repo, "commit", "-q", "-am", "baselines: a copy in the wrong place")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    _reword(repo)
    git(repo, "commit", "-q", "-am", "reword")
    res = skillreach(repo, "check", "--changed", "--skills", "skills", "--in-process", "--json")
    payload = json.loads(res.stdout)
    refused = [r for r in payload["results"] if r["status"] == "refused"]
    assert any(
        "canvas-design.json: holds the record of 'brand-guidelines', not of 'canvas-design'" in r["message"]
        for r in refused
    ), payload["results"]
    assert all(r["skill"] != "canvas-design" or r["status"] != "ok" for r in payload["results"])
    assert res.returncode == 1, res.stderr  # canvas-design, edited, has no record of its own: not a pass
