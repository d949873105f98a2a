"""The staged (group-sequential) gate of docs/spec/metrics.md "Staged comparison"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillreach.baselines.gates import Verdict, gate_verdict
from skillreach.baselines.sequential import (
    obf_boundaries,
    obf_spent,
    plan_stages,
    stage_order,
    staged_compare,
    staged_from_records,
)
from skillreach.cli import main
from skillreach.models import Query, QuerySet
from skillreach.scoring.intervals import paired_t_interval
from tests.helpers import hang
from tests.helpers.staged import GIT_ENV, commit_baseline, git, make_record, run_study, write_skill

# ------------------------------------------------------------------------------------- boundaries


@pytest.mark.parametrize(
    ("fractions", "published"),
    [
        # Lan–DeMets O'Brien–Fleming-type spending, two-sided α = 0.05 (gsDesign sfLDOF / ldbounds tables)
        ((0.5, 1.0), (2.9626, 1.9686)),
        ((0.25, 0.5, 0.75, 1.0), (4.3326, 2.9631, 2.3590, 2.0141)),
        ((0.2, 0.4, 0.6, 0.8, 1.0), (4.8769, 3.3569, 2.6803, 2.2898, 2.0310)),
    ],
)
def test_boundaries_equal_published_tables(
    fractions: tuple[float, ...], published: tuple[float, ...]
) -> None:
    assert obf_boundaries(fractions) == pytest.approx(published, abs=2e-3)


def test_spending_reaches_alpha_and_one_look_is_the_fixed_test() -> None:
    assert obf_spent(1.0) == pytest.approx(0.05)
    assert obf_spent(0.5) < obf_spent(0.75) < obf_spent(1.0)
    assert obf_boundaries((1.0,)) == pytest.approx((1.959963984540054,))


def test_boundaries_cross_with_probability_alpha_under_brownian_motion() -> None:
    """Differential check by simulation: the chance of crossing any look is α, and each look spends
    what the spending function says."""
    fractions = (0.3, 0.55, 0.8, 1.0)
    c = np.array(obf_boundaries(fractions))
    rng = np.random.default_rng(3)
    n = 400_000
    steps = np.diff((0.0, *fractions))
    s = np.cumsum(rng.standard_normal((n, 4)) * np.sqrt(steps), axis=1)
    z = np.abs(s / np.sqrt(fractions))
    crossed = (z >= c).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.002)
    first = (z[:, 0] >= c[0]).mean()
    assert first == pytest.approx(obf_spent(0.3), abs=5e-4)


def test_plan_stages() -> None:
    assert plan_stages(60, 4) == [15, 30, 45, 60]
    assert plan_stages(10, 4) == [3, 5, 8, 10]
    assert plan_stages(3, 4) == [3]  # too few cases for two per stage: one look, the fixed test
    assert plan_stages(0) == []


# ------------------------------------------------------------------------------------- simulation

N_SIMS, CASES, RUNS, GATE = 2000, 60, 3, -0.05


def _simulate(drop: float, seed: int) -> tuple[float, float, float]:
    """(fixed breach rate, staged breach rate, mean probes staged / fixed) over N_SIMS comparisons.

    Each comparison: 60 cases of 3 runs, case activation rates p ~ Beta(8, 2), the baseline and the
    new record drawn independently, the new one with p − drop.
    """
    rng = np.random.default_rng(seed)
    ids = [f"case-{i:02d}" for i in range(CASES)]
    probes = dict.fromkeys(ids, RUNS)
    fixed = staged = used = 0
    for _ in range(N_SIMS):
        p = rng.beta(8, 2, CASES)
        base = rng.binomial(RUNS, p) / RUNS
        new = rng.binomial(RUNS, np.clip(p - drop, 0, 1)) / RUNS
        d = new - base
        mean, lo, hi = paired_t_interval(list(d))
        fixed += gate_verdict("activation", GATE, mean, lo, hi) is Verdict.breach
        st = staged_compare({"activation": dict(zip(ids, d, strict=True))}, {"activation": GATE}, ids, probes)
        assert st.finished
        staged += st.verdict is Verdict.breach
        used += st.probes_used
    return fixed / N_SIMS, staged / N_SIMS, used / (N_SIMS * CASES * RUNS)


def test_simulation_false_breach_rate_savings_and_power() -> None:
    mc_se = (0.05 * 0.95 / N_SIMS) ** 0.5
    _, false_breach, _ = _simulate(0.0, seed=11)
    assert false_breach <= 0.05 + 2 * mc_se, false_breach
    fixed_power, staged_power, probe_share = _simulate(0.2, seed=12)
    print(
        f"false breach {false_breach:.4f}; drop 0.2: power fixed {fixed_power:.4f} staged "
        f"{staged_power:.4f}, probes {100 * (1 - probe_share):.1f} % fewer"
    )
    assert probe_share <= 0.70, probe_share
    assert abs(staged_power - fixed_power) <= 0.02


# ------------------------------------------------------------------------------------- comparisons


def test_staged_compare_stops_at_a_clear_breach_and_counts_probes() -> None:
    ids = [f"q{i:02d}" for i in range(40)]
    rng = np.random.default_rng(0)
    diffs = {i: float(v) for i, v in zip(ids, -0.6 + 0.1 * rng.standard_normal(40), strict=True)}
    st = staged_compare({"activation": diffs}, {"activation": -0.05}, ids, dict.fromkeys(ids, 2))
    assert st.verdict is Verdict.breach
    assert st.looks_taken == 1
    assert (st.cases_used, st.probes_used, st.probes_planned, st.probes_saved) == (10, 20, 80, 60)
    assert "60 probes saved" in st.sentence()


def test_staged_compare_waits_for_every_metric_and_reports_partial_plans() -> None:
    ids = [f"q{i:02d}" for i in range(40)]
    rng = np.random.default_rng(1)
    act = {i: float(v) for i, v in zip(ids[:20], 0.02 * rng.standard_normal(20), strict=True)}
    fa = {i: (0.6 if j % 2 else -0.4) for j, i in enumerate(ids[20:])}  # Δ +0.1 (gate +0.03), sd 0.51
    gates = {"activation": -0.05, "false_activation": 0.03}
    order = stage_order(ids, seed=5)
    st = staged_compare({"activation": act, "false_activation": fa}, gates, order, dict.fromkeys(ids, 1))
    by = {m.metric: m for m in st.metrics}
    assert by["activation"].verdict is Verdict.ok
    assert by["false_activation"].verdict is Verdict.inconclusive  # noisy: decided only at the end
    assert st.looks_taken == 4
    assert st.verdict is Verdict.inconclusive
    # only two stages probed so far: not finished, no verdict yet
    seen = set(order[:20])
    partial = staged_compare(
        {
            "activation": {k: v for k, v in act.items() if k in seen},
            "false_activation": {k: v for k, v in fa.items() if k in seen},
        },
        gates,
        order,
        dict.fromkeys(ids, 1),
        planned={"activation": list(act), "false_activation": list(fa)},
        probed_looks=2,
    )
    assert not partial.finished
    assert partial.verdict is None
    assert partial.looks_taken == 2


def test_plan_stages_with_a_screen() -> None:
    # the screen's cases in looks − 1 stages, the rest in one last stage
    assert plan_stages(12, 4, screen=5) == [3, 5, 12]
    assert plan_stages(48, 4, screen=12) == [4, 8, 12, 48]
    assert plan_stages(12, 4, screen=12) == plan_stages(12, 4)  # a screen of every case is no screen
    assert plan_stages(12, 1, screen=5) == [12]  # one look: the fixed test


SCREEN_IDS = [f"s{i}" for i in range(5)] + [f"r{i:02d}" for i in range(20)]
"""Five cases at risk (the screen, probed first), then twenty more."""


def _screened(diffs: dict[str, float], *, quiet_elsewhere: bool = True, probed_looks: int | None = None):  # type: ignore[no-untyped-def]
    return staged_compare(
        {"activation": diffs},
        {"activation": -0.05},
        SCREEN_IDS,
        dict.fromkeys(SCREEN_IDS, 1),
        planned={"activation": SCREEN_IDS},
        screen=5,
        quiet_elsewhere=quiet_elsewhere,
        probed_looks=probed_looks,
    )


def test_a_quiet_screen_decides_ok_before_the_rest_is_probed() -> None:
    st = _screened(dict.fromkeys(SCREEN_IDS[:5], 0.0), probed_looks=2)
    assert st.stages == [3, 5, 25]
    assert st.screen == 5
    assert st.screen_moved is False
    assert st.finished
    assert st.verdict is Verdict.ok
    assert (st.looks_taken, st.cases_used, st.probes_used, st.probes_saved) == (2, 5, 5, 20)
    (m,) = st.metrics
    assert (m.decided_at, m.looks[-1].decision) == (2, "ok (screen quiet)")
    assert "the screen was quiet" in st.sentence()
    # the first look alone (3 of the 5 at risk) decides nothing: the screen is not complete
    assert not _screened(dict.fromkeys(SCREEN_IDS[:3], 0.0), probed_looks=1).finished


def test_a_screen_that_moved_probes_the_rest_and_the_fixed_rule_decides() -> None:
    # one case of five at risk lost (a steal of one case): the rest is probed, then the fixed rule
    diffs = dict.fromkeys(SCREEN_IDS, 0.0) | {"s0": -1.0}
    partial = _screened({k: v for k, v in diffs.items() if k.startswith("s")}, probed_looks=2)
    assert partial.screen_moved is True
    assert not partial.finished
    st = _screened(diffs)
    assert st.looks_taken == 3
    assert st.probes_saved == 0
    assert st.verdict is Verdict.ok  # 1 of 25 lost: Δ −0.04 ≥ the gate, as the fixed gate says
    # two of five lost: a breach or inconclusive, never ok
    worse = _screened(dict.fromkeys(SCREEN_IDS, 0.0) | {"s0": -1.0, "s1": -1.0})
    assert worse.verdict in (Verdict.breach, Verdict.inconclusive)
    # another skill's screened case moved: this one is not decided by the screen either
    other = _screened(dict.fromkeys(SCREEN_IDS[:5], 0.0), quiet_elsewhere=False, probed_looks=2)
    assert other.screen_moved is False
    assert not other.finished


def test_the_screen_is_the_edited_skills_cases_and_the_rankings_the_edit_moved() -> None:
    from skillreach.baselines.scope import SkillEdit, screen_cases
    from skillreach.models import Skill

    def skill(name: str, description: str) -> Skill:
        return Skill(name=name, description=description, path=f"/s/{name}/SKILL.md")

    base = [skill("art", "generative art with p5.js"), skill("poster", "design a poster as a png"),
            skill("badge", "conference badge designs")]
    qs = QuerySet(catalog_id="c", queries=(
        Query(id="p1", text="a poster for the lobby", expected_skill="poster"),
        Query(id="a1", text="generative art in p5.js", expected_skill="art"),
        Query(id="b1", text="a conference badge", expected_skill="badge"),
        Query(id="b2", text="badge printing for a conference", expected_skill="badge"),
    ))
    edit = [SkillEdit(name="poster", how="description", base_description="design a poster as a png")]
    kw = {"skills_base": base, "k": 2}
    # the same words in another order: no ranking moved, the screen is the skill's own cases
    same = [skill("poster", "as a png, design a poster"), *base[0::2]]
    assert screen_cases(qs, edit, skills_now=same, taken_from={}, **kw) == ["p1"]  # type: ignore[arg-type]
    # what a base record says poster took is at risk too
    taken = {"art": {"a1": {"poster"}}}
    assert screen_cases(qs, edit, skills_now=same, taken_from=taken, **kw) == ["a1", "p1"]  # type: ignore[arg-type]
    # new words that reach the badge cases move their rankings: screened
    steal = [skill("poster", "design a poster as a png, and conference badge designs"), *base[0::2]]
    assert screen_cases(qs, edit, skills_now=steal, taken_from={}, **kw) == ["b1", "b2", "p1"]  # type: ignore[arg-type]


def _records(drop_cases: int) -> tuple[object, object]:
    """60 positive cases of 3 runs; the new record loses activation on ``drop_cases`` cases."""
    base = {f"q{i:02d}": [1, 1, 1] for i in range(60)}
    base.update({f"q{i:02d}": [1, 0, 1] for i in range(0, 60, 7)})
    new = {k: list(v) for k, v in base.items()}
    for i in range(drop_cases):
        new[f"q{i:02d}"] = [0, 0, 0]
    for i in range(40, 44):
        new[f"q{i:02d}"] = [1, 1, 0]
    return make_record(base), make_record(new, skill_version="git:2222", bid="deploy@new")


def test_staged_from_records_replays_the_plan() -> None:
    base, new = _records(drop_cases=30)
    st = staged_from_records(base, new, {"activation": -0.05})  # type: ignore[arg-type]
    assert st.verdict is Verdict.breach
    assert st.looks_taken < st.looks_planned
    assert st.probes_planned == 180
    assert st.probes_saved > 0


def _write(rec: object, path: Path) -> Path:
    from skillreach.baselines.records import write_baseline

    return write_baseline(rec, path)  # type: ignore[arg-type]


def test_cli_compare_staged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, new = _records(drop_cases=30)
    b, n = _write(base, tmp_path / "base.json"), _write(new, tmp_path / "new.json")
    assert main(["baseline", "compare", str(b), str(n), "--staged", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    st = out["staged"]
    assert st["verdict"] == "breach"
    assert st["probes_saved"] == st["probes_planned"] - st["probes_used"] > 0
    assert main(["baseline", "compare", str(b), str(n), "--staged"]) == 1
    captured = capsys.readouterr()
    assert "probes saved" in captured.out
    assert "staged verdict: breach → exit 1" in captured.out
    assert "staged gate failed" in captured.err
    assert "Traceback" not in captured.err
    same, _ = _records(drop_cases=0)
    s2 = _write(
        make_record(
            {k: list(v.activated) for k, v in same.per_case.items()},  # type: ignore[attr-defined]
            skill_version="git:3",
            bid="deploy@same",
        ),
        tmp_path / "same.json",
    )
    assert main(["baseline", "compare", str(b), str(s2), "--staged", "--looks", "3"]) == 0
    assert "staged verdict: ok → exit 0" in capsys.readouterr().out
    assert main(["baseline", "compare", str(b), str(n), "--staged", "--looks", "0"]) == 2


# ------------------------------------------------------------------------------- check --changed --staged


def test_check_changed_staged_stops_early_on_a_clear_drop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """40 web cases always reach ``deploy``; a rewritten description loses two in three of them. The
    staged check stops before the plan is exhausted, says breach, and reports the probes it saved."""
    import yaml

    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    from skillreach.models import Query, QuerySet
    from skillreach.queries.sets import seal, write_query_set

    web = [f"web{i:02d}" for i in range(40)]
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write_skill(repo / "skills", "deploy", "Deploy the web service to production.", "# deploy\n")
    write_skill(repo / "skills", "pdf", "Merge, split and fill PDF files.", "# pdf\n")
    qs = [Query(id=c, text=f"ship the web app {c}", expected_skill="deploy") for c in web]
    qs += [Query(id=f"pdf{i}", text=f"merge the pdfs {i}", expected_skill="pdf") for i in range(4)]
    write_query_set(seal(QuerySet(catalog_id="s", queries=tuple(qs)), source="t"), repo / "q.json")
    (repo / "evals").mkdir()
    (repo / "q.json").rename(repo / "evals" / "queries.json")
    (repo / "ci").mkdir()
    for name, lost in (("narrow", False), ("broad", True)):
        script = {c: ([] if lost and i % 3 else ["deploy"]) for i, c in enumerate(web)}
        script.update({f"pdf{i}": ["pdf"] for i in range(4)})
        script.update({f"canary-{i}": ["pdf"] for i in (1, 2, 3)})  # the study flow's canary
        (repo / "ci" / f"{name}.json").write_text(json.dumps(script), encoding="utf-8")
        (repo / "ci" / f"{name}.yaml").write_text(
            yaml.safe_dump(
                {
                    "runtime": "fake",
                    "attempts": 2,
                    "runtime_options": {"script": str(repo / "ci" / f"{name}.json")},
                }
            ),
            encoding="utf-8",
        )
    (repo / ".gitignore").write_text(".skillreach/\nout/\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "skills and corpus")
    monkeypatch.chdir(repo)
    commit_baseline(repo, run_study(repo, repo / "ci" / "narrow.yaml", repo / "out" / "narrow"), "deploy")
    write_skill(repo / "skills", "deploy", "Deploy things.", "# deploy\n")
    git(repo, "commit", "-q", "-am", "deploy: shorter description")
    capsys.readouterr()
    args = ["check", "--changed", "--since", "HEAD~1", "--skills", "skills", "--in-process"]
    args += ["--config", str(repo / "ci" / "broad.yaml"), "--out", str(repo / "out" / "check")]
    code = main([*args, "--staged", "--json", "--annotations"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    lines = captured.out.splitlines()
    payload = json.loads("\n".join(line for line in lines if not line.startswith("::")))
    (entry,) = payload["results"]
    assert entry["status"] == "breach"
    st = entry["staged"]
    assert st["looks_taken"] < st["looks_planned"]
    assert st["probes_saved"] > 0
    assert st["probes_planned"] == 80  # deploy's 40 cases × 2 runs: the pdf cases are out of the edit's reach
    assert any("activation (staged) breach at look" in line for line in lines if line.startswith("::error"))
    assert "staged: probed" in captured.err
    probes = (repo / "out" / "check" / "probes.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(probes) == st["probes_used"] < 80  # the later stages were never probed
    assert main([*args, "--staged", "--verbose"]) == 1  # for a person: tables, the saving, one line
    captured = capsys.readouterr()
    assert "deploy: staged gate" in captured.out  # each table names the skill it gates
    assert f"{st['probes_saved']} probes saved" in captured.out
    assert "check: gate failed for deploy" in captured.err


def test_staged_gate_carries_the_cohorts_by_corpus_history() -> None:
    """A broadened description reaches cases the baseline listed but never activated on, and breaks the
    rules there: the staged gate breaches on ``compliance (baseline corpus)`` as the fixed gate does;
    cases added since the record are ``compliance (new cases)``."""
    old = {f"web{i:02d}": [1, 1] for i in range(20)}
    infra = {f"inf{i:02d}": [0, 0] for i in range(20)}
    base = make_record({**old, **infra}, compliance={c: [True, True] for c in old}, bid="deploy@base")
    new = make_record(
        {**old, **{c: [1, 1] for c in infra}},
        compliance={**{c: [True, True] for c in old}, **{c: [False, False] for c in infra}},
        skill_version="git:2",
        bid="deploy@new",
    )
    st = staged_from_records(base, new, {"activation": -0.05, "compliance": -0.05})  # type: ignore[arg-type]
    by = {m.metric: m for m in st.metrics}
    assert by["compliance (baseline corpus)"].planned_cases == 20
    assert by["compliance (baseline corpus)"].verdict is Verdict.breach
    assert "compliance (new cases)" not in by
    assert st.verdict is Verdict.breach
    # the same twenty cases added to the corpus since the record: the new cases cohort
    grown = make_record(old, compliance={c: [True, True] for c in old}, bid="deploy@base")
    st = staged_from_records(grown, new, {"activation": -0.05, "compliance": -0.05})  # type: ignore[arg-type]
    by = {m.metric: m for m in st.metrics}
    assert by["compliance (new cases)"].planned_cases == 20
    assert by["compliance (new cases)"].verdict is Verdict.breach
    assert "compliance (baseline corpus)" not in by


def test_a_metric_whose_cases_all_came_early_is_decided_at_its_own_last_look() -> None:
    """A check group's stages split every member's cases: a skill whose cases all fall in the first
    looks is decided by the fixed rule once they are all probed, never left undecided (the issue: a
    benign rewording failed on ten unchanged skills "inconclusive")."""
    from skillreach.baselines.sequential import staged_compare

    order = [f"c{i:02d}" for i in range(40)]
    mine = order[:8]  # all in the first of four stages
    st = staged_compare({"activation": dict.fromkeys(mine, 0.0)}, {"activation": -0.05}, order,
                        dict.fromkeys(order, 1), looks=4)
    (act,) = st.metrics
    assert act.verdict is Verdict.ok
    assert act.decided_at == 1
    assert st.verdict is Verdict.ok


def test_real_entry_point_staged_compare(tmp_path: Path) -> None:
    import sys

    exe = Path(sys.executable).parent / "skillreach"
    base, new = _records(drop_cases=30)
    b, n = _write(base, tmp_path / "base.json"), _write(new, tmp_path / "new.json")
    proc = hang.finish(
        [str(exe), "baseline", "compare", str(b), str(n), "--staged", "--looks", "4"],
        limit_s=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert "staged verdict: breach → exit 1" in proc.stdout
    assert proc.stderr.startswith("skillreach: error: deploy: staged gate failed: activation breach at look")
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------- cases pinned by content (staged too)

_ids = [f"q{i}" for i in range(10)]
_acts = st.dictionaries(
    st.sampled_from(_ids), st.lists(st.integers(0, 1), min_size=2, max_size=2), min_size=1
)
_digests = st.dictionaries(st.sampled_from(_ids), st.sampled_from(["A", "B"]))


@settings(max_examples=80, deadline=None)
@given(_acts, _acts, _digests, _digests)
def test_a_staged_comparison_never_pairs_cases_whose_digests_differ(
    a: dict[str, list[int]], b: dict[str, list[int]], da: dict[str, str], db: dict[str, str]
) -> None:
    """Replayed with one look (the fixed gate's test at its end), the staged gate pairs exactly the
    cases of the same id and digest, as the fixed gate does."""
    base = make_record(a, digests={k: f"sha256:{da.get(k, 'A')}" for k in a})
    new = make_record(
        b, digests={k: f"sha256:{db.get(k, 'A')}" for k in b}, skill_version="git:2", bid="deploy@new"
    )
    same = sorted(k for k in set(a) & set(b) if base.per_case[k].digest == new.per_case[k].digest)
    st_ = staged_from_records(base, new, {"activation": -0.05}, looks=1)  # type: ignore[arg-type]
    by = {m.metric: m for m in st_.metrics}
    if not same:
        assert "activation" not in by  # nothing planned to pair
        return
    act = by["activation"]
    assert act.planned_cases == len(same)
    (look,) = act.looks
    assert look.cases == len(same)
    expected = sum(sum(b[k]) / 2 - sum(a[k]) / 2 for k in same) / len(same)
    assert look.mean_diff == pytest.approx(expected)


def test_a_staged_check_plans_on_the_cases_identical_in_the_set_it_probes() -> None:
    """While probing (``new`` holds the first stage only), the plan comes from the query set probed: a
    case edited since the baseline is not planned to pair (it is a new case), a case added is probed
    with the last stage, and a case the set no longer holds is not planned."""
    ids = [f"q{i}" for i in range(8)]
    texts = {q: f"deploy the service, case {q}" for q in ids}

    def digest(q: str, text: str) -> str:
        return Query(id=q, text=text, expected_skill="deploy").case_digest()

    base = make_record(
        {q: [1, 1] for q in ids},
        compliance={q: [True, True] for q in ids},
        digests={q: digest(q, texts[q]) for q in ids},
    )
    edited = {**texts, "q1": "deploy it on Fridays too"}
    del edited["q7"]
    edited["q9"] = "roll the deploy back"
    probed = QuerySet(queries=tuple(Query(id=q, text=t, expected_skill="deploy") for q, t in edited.items()))
    first = stage_order(ids)[:2]  # the first of four stages of the eight cases
    new = make_record(
        {q: [1, 1] for q in first},
        compliance={q: [True, True] for q in first},
        digests={q: digest(q, edited[q]) for q in first},
        skill_version="git:2",
        bid="deploy@new",
    )
    gates = {"activation": -0.05, "compliance": -0.05}
    st_ = staged_from_records(base, new, gates, query_set=probed, probed_looks=1)  # type: ignore[arg-type]
    by = {m.metric: m for m in st_.metrics}
    assert by["activation"].planned_cases == 6  # q1 edited, q7 gone
    assert by["compliance (new cases)"].planned_cases == 2  # q1 edited, q9 added
    assert st_.cases_planned == 9  # the eight cases of the baseline, and q9 with the last stage
    assert not st_.finished
    assert by["activation"].looks[0].cases == len([q for q in first if q not in ("q1", "q7")])
