"""The gate of spec/metrics.md: pins, cases pinned by content, Newcombe's paired interval, verdicts,
exit codes, cohorts, "rules out", smallest breach, advice."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from skillreach.baselines.gates import (
    Verdict,
    advise,
    compare,
    gate_verdict,
    parse_gate_overrides,
    required_cases,
    smallest_breach,
    smallest_breach_text,
    t_test_power,
)
from skillreach.baselines.records import (
    BaselineRecord,
    CaseCounts,
    CaseOutcomes,
    baseline_digest,
    metric_value,
    write_baseline,
)
from skillreach.cli import main
from skillreach.errors import ConfigError, RefusedError
from skillreach.scoring.intervals import newcombe_paired, paired_t_interval
from skillreach.settings import GateConfig
from tests.helpers import hang

SKILL = "deploy"


def make_record(
    activated: dict[str, list[int]],
    *,
    negatives: dict[str, list[int]] | None = None,
    compliance: dict[str, list[bool]] | None = None,
    quality: dict[str, list[float]] | None = None,
    corpus: str = "queries.json@sha256:" + "a" * 64,
    model: str = "claude-sonnet-4-5-20250929",
    rubric: str | None = None,
    skill_version: str = "git:1111",
    bid: str = "deploy@base",
    digests: dict[str, str] | None = None,
) -> BaselineRecord:
    """A record whose case digests are ``sha256:<id>`` (the same content in every record) unless
    ``digests`` says otherwise."""
    per_case: dict[str, CaseOutcomes] = {}
    for qid, acts in activated.items():
        per_case[qid] = CaseOutcomes(
            role="positive",
            kind="implicit",
            probes=len(acts),
            activated=tuple(acts),
            compliance=tuple((compliance or {}).get(qid, ())),
            quality=tuple((quality or {}).get(qid, ())),
            digest=(digests or {}).get(qid, f"sha256:{qid}"),
        )
    for qid, acts in (negatives or {}).items():
        per_case[qid] = CaseOutcomes(
            role="negative", kind="out_of_scope", probes=len(acts), activated=tuple(acts),
            digest=(digests or {}).get(qid, f"sha256:{qid}"),
        )
    runs = max(len(v) for v in activated.values())
    return BaselineRecord(
        baseline_id=bid,
        skill=SKILL,
        created_at="2026-11-30T00:00:00Z",
        skill_version=skill_version,
        skill_version_origin="git",
        corpus_version=corpus,
        model=model,
        runtime="fake",
        runs_per_case=runs,
        cases=CaseCounts(
            positive=len(activated),
            negative=len(negatives or {}),
        ),
        rubric_version=rubric,
        metrics={
            m: metric_value(per_case, m)
            for m in ("activation", "false_activation", "compliance", "task_quality")
        },
        per_case=per_case,
    )


def _result(cmp, metric: str, cohort: str = "paired"):  # type: ignore[no-untyped-def]
    return next(r for r in cmp.results if r.metric == metric and r.cohort == cohort)


# ------------------------------------------------------------------------------------- worked cases


def test_large_consistent_activation_drop_across_20_cases_is_a_breach() -> None:
    cases = [f"q{i:02d}" for i in range(20)]
    base = make_record({c: [1, 1, 1, 1, 1] for c in cases})
    # every case falls by 0.4 or 0.6: mean −0.5, tight spread
    new = make_record(
        {c: ([1, 1, 0, 0, 0] if i % 2 else [1, 1, 1, 0, 0]) for i, c in enumerate(cases)}, bid="n"
    )
    cmp = compare(base, new)
    r = _result(cmp, "activation")
    assert r.k == 20
    assert r.mean_diff == pytest.approx(-0.5)
    assert r.ci95 is not None
    assert r.ci95[1] < 0
    assert r.verdict is Verdict.breach
    assert cmp.verdict is Verdict.breach
    assert cmp.exit_code == 1


def test_drop_past_the_gate_with_wide_spread_is_inconclusive() -> None:
    cases = [f"q{i:02d}" for i in range(10)]
    base = make_record({c: [1, 0, 1, 0, 1] for c in cases})  # each 0.6
    # half the cases fall to 0, half rise to 1: differences ±0.6 / +0.4 — mean −0.1, sd ≈ 0.53
    new_acts = {c: ([0, 0, 0, 0, 0] if i % 2 == 0 else [1, 1, 1, 1, 1]) for i, c in enumerate(cases)}
    new = make_record(new_acts, bid="n")
    cmp = compare(base, new)
    r = _result(cmp, "activation")
    assert r.mean_diff == pytest.approx(-0.1)
    assert r.mean_diff < -0.05
    assert r.ci95 is not None
    assert r.ci95[0] < 0 < r.ci95[1]
    assert r.verdict is Verdict.inconclusive
    assert cmp.exit_code == 0
    assert compare(base, new, strict=True).exit_code == 1
    # the advice is in units a team controls: the cases at which this change would be decided
    assert r.advice is not None
    assert r.advice.cases_needed is not None
    assert r.advice.cases_needed > 10
    assert r.advice.attempts_needed is None  # the spread is between cases (the new side's ICC is 1)
    assert r.note.startswith(f"add about {r.advice.cases_needed - 10} positive cases for deploy")


def test_no_change_is_ok_and_small_drop_inside_gate_is_ok() -> None:
    cases = [f"q{i}" for i in range(8)]
    base = make_record({c: [1, 1, 1, 1] for c in cases})
    same = make_record({c: [1, 1, 1, 1] for c in cases}, bid="n")
    assert compare(base, same).verdict is Verdict.ok
    # one case loses one of four runs: mean drop 0.031 — less than the gate 0.05
    small = make_record({c: ([1, 1, 1, 0] if c == "q0" else [1, 1, 1, 1]) for c in cases}, bid="n")
    cmp = compare(base, small)
    assert _result(cmp, "activation").mean_diff == pytest.approx(-0.25 / 8)
    assert _result(cmp, "activation").verdict is Verdict.ok


def test_false_activation_gate_mirrors() -> None:
    pos = {f"p{i}": [1, 1] for i in range(4)}
    negs = {f"n{i}": [0, 0, 0, 0] for i in range(12)}
    base = make_record(pos, negatives=negs)
    worse = make_record(pos, negatives={k: [1, 1, 0, 0] for k in negs}, bid="n")
    cmp = compare(base, worse)
    r = _result(cmp, "false_activation")
    assert r.mean_diff == pytest.approx(0.5)
    assert r.verdict is Verdict.breach
    better = make_record(pos, negatives=negs, bid="n")
    assert _result(compare(worse, better), "false_activation").verdict is Verdict.ok


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("model", {"model": "claude-opus-4-1-20250805"}),
        ("rubric_version", {"rubric": "sha256:" + "c" * 64}),
    ],
)
def test_differing_pins_are_refused_naming_the_field(field: str, kwargs: dict[str, str]) -> None:
    base = make_record({"q1": [1, 1]})
    new = make_record({"q1": [1, 1]}, bid="n", **kwargs)
    with pytest.raises(RefusedError, match=f"^{field} differs") as info:
        compare(base, new)
    assert info.value.exit_code == 3


def test_a_differing_corpus_version_alone_is_not_refused() -> None:
    """corpus_version is information: the comparison pairs the identical cases."""
    base = make_record({"q1": [1, 1]})
    new = make_record({"q1": [1, 1]}, bid="n", corpus="sha256:" + "b" * 64)
    assert compare(base, new).verdict is Verdict.ok


def test_no_identical_positive_case_is_refused_naming_the_field() -> None:
    base = make_record({"q1": [1, 1], "q2": [1, 1]})
    new = make_record({"q1": [1, 1], "q2": [1, 1]}, bid="n", digests={"q1": "sha256:x", "q2": "sha256:y"})
    with pytest.raises(RefusedError, match=r"^corpus_version: no positive case of deploy is identical") as i:
        compare(base, new)
    assert i.value.exit_code == 3


def test_a_legacy_record_is_refused_and_asks_for_rebaselining() -> None:
    base = make_record({"q1": [1, 1]}).model_copy(update={"schema_version": 1})
    with pytest.raises(RefusedError, match="schema_version: the baseline deploy@base was recorded before"):
        compare(base, make_record({"q1": [1, 1]}, bid="n"))


def test_edited_cases_are_not_paired_and_are_listed() -> None:
    """q2 edited (another digest), q3 removed, q4 and n9 added: only q1 and n1 are paired."""
    base = make_record({"q1": [1], "q2": [1], "q3": [1]}, negatives={"n1": [0]})
    new = make_record(
        {"q1": [1], "q2": [0], "q4": [0]}, negatives={"n1": [0], "n9": [1]}, bid="n",
        digests={"q2": "sha256:edited"},
    )
    cmp = compare(base, new)
    assert _result(cmp, "activation").k == 1
    assert _result(cmp, "false_activation").k == 1
    assert cmp.cases.identical == 2
    assert cmp.cases.added == ("n9", "q4")
    assert cmp.cases.added_positive == ("q4",)
    assert cmp.cases.changed == ("q2",)
    assert cmp.cases.changed_positive == ("q2",)
    assert cmp.cases.removed == ("q3",)
    assert any("compared over the identical cases only" in w for w in cmp.warnings)


def test_added_and_changed_positive_cases_form_the_new_cases_cohort() -> None:
    base = make_record({f"q{i}": [1] for i in range(6)}, compliance={f"q{i}": [True] for i in range(6)})
    new = make_record(
        {**{f"q{i}": [1] for i in range(6)}, "q6": [1]},
        compliance={**{f"q{i}": [True] for i in range(6)}, "q0": [False], "q6": [False]},
        digests={"q0": "sha256:edited"}, bid="n",
    )
    cmp = compare(base, new)
    assert _result(cmp, "compliance").k == 5
    fresh = _result(cmp, "compliance", "new cases")
    assert fresh.k == 2  # q0 changed, q6 added
    assert fresh.mean_diff == pytest.approx(-1.0)


def test_records_of_different_skills_are_refused() -> None:
    base = make_record({"q1": [1]})
    other = base.model_copy(update={"skill": "pdf"})
    with pytest.raises(RefusedError, match="skill differs"):
        compare(base, other)


# ------------------------------------------------------------------------------------------ verdict


@pytest.mark.parametrize(
    ("metric", "gate", "mean", "lo", "hi", "verdict"),
    [
        ("activation", -0.05, -0.10, -0.20, -0.01, Verdict.breach),
        ("activation", -0.05, -0.10, -0.20, 0.00, Verdict.inconclusive),  # upper end ≥ 0
        ("activation", -0.05, -0.05, -0.20, -0.01, Verdict.ok),  # d̂ not below the gate
        ("activation", -0.05, 0.10, 0.0, 0.2, Verdict.ok),
        ("false_activation", 0.03, 0.10, 0.01, 0.2, Verdict.breach),
        ("false_activation", 0.03, 0.10, 0.0, 0.2, Verdict.inconclusive),
        ("false_activation", 0.03, 0.02, 0.01, 0.03, Verdict.ok),
    ],
)
def test_gate_verdict_table(
    metric: str, gate: float, mean: float, lo: float, hi: float, verdict: Verdict
) -> None:
    assert gate_verdict(metric, gate, mean, lo, hi) is verdict


def test_gate_overrides_and_signs() -> None:
    g = parse_gate_overrides(GateConfig(), ["activation=-0.1", "false_activation=0.05"])
    assert (g.activation, g.false_activation, g.compliance) == (-0.1, 0.05, -0.05)
    with pytest.raises(ConfigError, match="activation may only fall"):
        parse_gate_overrides(GateConfig(), ["activation=0.1"])
    with pytest.raises(ConfigError, match="expected METRIC=VALUE"):
        parse_gate_overrides(GateConfig(), ["recall=-0.1"])
    with pytest.raises(ConfigError, match="not a number"):
        parse_gate_overrides(GateConfig(), ["activation=lots"])


def test_gates_are_applied() -> None:
    cases = [f"q{i:02d}" for i in range(20)]
    base = make_record({c: [1, 1, 1, 1, 1] for c in cases})
    new = make_record(
        {c: ([1, 1, 1, 1, 0] if i % 2 else [1, 1, 1, 1, 1]) for i, c in enumerate(cases)}, bid="n"
    )
    # mean −0.1: a breach at the default −0.05, ok at −0.2
    assert compare(base, new).verdict is Verdict.breach
    assert compare(base, new, {"activation": -0.2}).verdict is Verdict.ok


# ------------------------------------------------------------------------------ t interval vs scipy


def test_paired_t_interval_matches_scipy() -> None:
    rng = random.Random(7)
    for k in (2, 3, 5, 20, 57):
        diffs = [rng.uniform(-1, 1) for _ in range(k)]
        mean, lo, hi = paired_t_interval(diffs)
        ci = sps.ttest_1samp(diffs, 0.0).confidence_interval(0.95)
        assert mean == pytest.approx(sum(diffs) / k)
        assert lo == pytest.approx(ci.low, rel=1e-9)
        assert hi == pytest.approx(ci.high, rel=1e-9)
        lo2, hi2 = sps.t.interval(0.95, k - 1, loc=mean, scale=sps.sem(diffs))
        assert (lo, hi) == (pytest.approx(lo2), pytest.approx(hi2))


def test_comparison_interval_is_newcombes_over_the_cases() -> None:
    rng = random.Random(3)
    cases = [f"q{i}" for i in range(15)]
    base_acts = {c: [rng.randint(0, 1) for _ in range(4)] for c in cases}
    new_acts = {c: [rng.randint(0, 1) for _ in range(4)] for c in cases}
    cmp = compare(make_record(base_acts), make_record(new_acts, bid="n"))
    d, lo, hi = newcombe_paired(
        [[float(v) for v in new_acts[c]] for c in sorted(cases)],
        [[float(v) for v in base_acts[c]] for c in sorted(cases)],
    )
    r = _result(cmp, "activation")
    assert r.mean_diff == pytest.approx(d)
    assert r.ci95 == (pytest.approx(lo), pytest.approx(hi))


def test_one_case_lost_of_one_is_inconclusive_and_unmoved_cases_rule_out_a_drop() -> None:
    """The spec's worked values: the t interval said [−1, −1] (a certain breach) and [0, 0]."""
    r = _result(compare(make_record({"q": [1]}), make_record({"q": [0]}, bid="n")), "activation")
    assert r.ci95 is not None
    assert r.ci95[1] == pytest.approx(0.122, abs=5e-4)
    assert r.verdict is Verdict.inconclusive
    four = {f"q{i}": [1] for i in range(4)}
    r = _result(compare(make_record(four), make_record(four, bid="n")), "activation")
    assert r.ci95 == (pytest.approx(-0.490, abs=5e-4), pytest.approx(0.490, abs=5e-4))
    assert r.verdict is Verdict.ok
    assert r.rules_out == pytest.approx(0.490, abs=5e-4)
    assert r.note == "rules out a drop larger than 49 points"
    lost = _result(compare(make_record(four), make_record({c: [0] for c in four}, bid="n")), "activation")
    assert lost.ci95 is not None
    assert lost.ci95[1] == pytest.approx(-0.307, abs=5e-4)
    assert lost.verdict is Verdict.breach


def test_rules_out_a_rise_for_false_activation() -> None:
    pos = {f"p{i}": [1] for i in range(4)}
    negs = {f"n{i}": [0] for i in range(20)}
    r = _result(compare(make_record(pos, negatives=negs), make_record(pos, negatives=negs, bid="n")),
                "false_activation")
    assert r.verdict is Verdict.ok
    assert r.ci95 is not None
    assert r.rules_out == r.ci95[1]
    assert r.note == f"rules out a rise larger than {math.ceil(r.ci95[1] * 100)} points"


# ------------------------------------------------------------------------------------------- power


def test_power_agrees_with_statsmodels() -> None:
    from statsmodels.stats.power import TTestPower

    for effect, sd in ((0.05, 0.1), (0.05, 0.3), (0.1, 0.25), (0.2, 0.5)):
        k = required_cases(-effect, sd)
        assert k is not None
        expected = TTestPower().solve_power(
            effect_size=effect / sd, alpha=0.05, power=0.8, alternative="two-sided"
        )
        assert k == math.ceil(expected)
        assert t_test_power(-effect, sd, k) >= 0.8 > t_test_power(-effect, sd, k - 1)


def test_power_is_a_probability_where_scipys_noncentral_t_answers_nan() -> None:
    """Some scipy releases (1.15, 1.16) answer nan for the noncentral t cdf in far tails (P(T ≤ c) at
    df 1, nc 70; P(T ≤ −c) once below 1.5e-14; 1.17 does not): with any of them the power stays in
    [0, 1], never falls as cases are added, and the cases needed are found where the first k already has
    the power (a nan there made the search skip to 3)."""
    for effect, sd in ((0.5, 0.01), (0.3, 0.02), (0.2, 0.05), (0.05, 0.001), (0.05, 0.3)):
        powers = [t_test_power(effect, sd, k) for k in (2, 3, 4, 5, 8, 13, 40, 150, 300, 1000, 5000)]
        assert all(0.0 <= p <= 1.0 for p in powers), powers
        assert powers == sorted(powers), powers
    assert required_cases(0.5, 0.01) == 2
    assert required_cases(0.05, 0.001) == 2


def test_more_spread_needs_more_cases() -> None:
    cases_needed = [required_cases(-0.05, sd) for sd in (0.05, 0.1, 0.2, 0.4)]
    assert all(c is not None for c in cases_needed)
    assert cases_needed == sorted(cases_needed)
    assert cases_needed[0] < cases_needed[-1]  # type: ignore[operator]


def _groups(rates: list[int], runs: int = 1) -> list[list[float]]:
    return [[float(r)] * runs for r in rates]


def test_advice_is_the_number_of_cases_that_decides_the_observed_change() -> None:
    """4 cases, 2 lost (1 → 0): inconclusive; at the same rates, the cases that make it a breach."""
    new, base = _groups([0, 0, 1, 1]), _groups([1, 1, 1, 1])
    adv = advise("activation", -0.05, new, base, skill="deploy")
    assert adv.attempts_needed is None  # one run per case: no within-case spread to measure
    assert adv.cases_needed is not None
    assert adv.cases_needed > 4
    assert adv.sentence() == f"add about {adv.cases_needed - 4} positive cases for deploy (now 4)"
    # the same change on that many cases is decided (a breach), one case fewer is not
    k = adv.cases_needed
    half = k // 2
    _, _, hi = newcombe_paired(_groups([0] * half + [1] * (k - half)), _groups([1] * k))
    assert hi < 0 or abs(half / k - 0.5) > 0  # rounding of the half aside, decided


def test_attempts_decide_it_only_when_the_spread_is_within_cases() -> None:
    """Every case flips a coin in the new record: the spread is within cases (ICC 0), so more
    attempts shrink the interval; a case-level split (ICC 1) gets cases advice instead."""
    base = [[1.0, 1.0], [1.0, 1.0]]
    within = [[1.0, 0.0], [0.0, 1.0]]
    d, _, hi = newcombe_paired(within, base)
    assert gate_verdict("activation", -0.05, d, -1.0, hi) is Verdict.inconclusive
    adv = advise("activation", -0.05, within, base, skill="deploy")
    assert adv.attempts_needed is not None
    assert adv.attempts_needed > 2
    assert adv.sentence() == f"--attempts {adv.attempts_needed} decides it (now 2)"
    r = adv.attempts_needed + adv.attempts_needed % 2  # an even number keeps the rate at ½
    d, _, hi = newcombe_paired([[1.0, 0.0] * (r // 2)] * 2, [[1.0] * r] * 2)
    assert hi < 0  # at that many attempts the same coin flips are a breach
    between = [[1.0, 1.0], [0.0, 0.0]]
    adv = advise("activation", -0.05, between, base, skill="deploy")
    assert adv.attempts_needed is None
    assert adv.sentence().startswith("add about ")


@pytest.mark.parametrize(
    ("metric", "gate", "k", "text"),
    [
        ("activation", -0.05, 4, "3 of 4 cases (a change of 0.75)"),
        ("activation", -0.05, 1, "none"),
        ("activation", -0.05, 0, "none"),
        ("false_activation", 0.03, 4, "3 of 4 cases (a change of 0.75)"),
    ],
)
def test_smallest_breach(metric: str, gate: float, k: int, text: str) -> None:
    assert smallest_breach_text(metric, gate, k) == text


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.sampled_from([-0.01, -0.05, -0.2, -0.5]))
def test_smallest_breach_is_the_least_that_breaches(k: int, gate: float) -> None:
    m = smallest_breach("activation", gate, k)
    base = _groups([1] * k)

    def verdict(moved: int) -> Verdict:
        d, lo, hi = newcombe_paired(_groups([0] * moved + [1] * (k - moved)), base)
        return gate_verdict("activation", gate, d, lo, hi)

    if m is None:
        assert verdict(k) is not Verdict.breach
    else:
        assert verdict(m) is Verdict.breach
        assert m == 1 or verdict(m - 1) is not Verdict.breach


# ----------------------------------------------------------------------------------------- cohorts


def test_cases_of_the_baseline_corpus_it_never_rated_stay_in_that_cohort() -> None:
    """Spec "Comparing …": a broadened description now reaches eight cases the baseline listed but
    never activated on; their compliance is the *baseline corpus* cohort (unpaired against the
    baseline's rate), not new cases."""
    old = [f"old{i}" for i in range(8)]
    reached = [f"reach{i}" for i in range(8)]
    acts_base = {**{c: [1, 1, 1, 1] for c in old}, **{c: [0, 0, 0, 0] for c in reached}}
    comp_base = {c: [True, True, True, True] for c in old}
    acts_new = {c: [1, 1, 1, 1] for c in old + reached}
    comp_new = {
        **{c: [True, True, True, True] for c in old},
        **{c: [False, False, True, False] for c in reached},
    }
    base = make_record(acts_base, compliance=comp_base)
    new = make_record(acts_new, compliance=comp_new, bid="n")
    cmp = compare(base, new)
    assert _result(cmp, "activation").verdict is Verdict.ok  # activation rose
    assert _result(cmp, "activation").mean_diff == pytest.approx(0.5)
    assert _result(cmp, "compliance").verdict is Verdict.ok  # the old cases still comply
    corpus = _result(cmp, "compliance", "baseline corpus")
    assert corpus.k == 8
    assert corpus.mean_diff == pytest.approx(-0.75)
    assert corpus.verdict is Verdict.breach
    assert not [r for r in cmp.results if r.cohort == "new cases"]
    assert cmp.exit_code == 1
    coh = cmp.cohorts["compliance"]
    assert coh["baseline_cases"] is not None
    assert coh["baseline_cases"]["value"] == pytest.approx((32 + 8) / 64)
    assert coh["baseline_cases"]["cases"] == 16
    assert coh["new_cases"] is None


def test_cases_added_since_the_record_form_the_new_cases_cohort() -> None:
    """The issue's split: nine cases in the corpus when the baseline was recorded comply, six added
    since do not — a clear breach on the new cases cohort alone."""
    old = [f"old{i}" for i in range(9)]
    added = [f"added{i}" for i in range(6)]
    base = make_record({c: [1] for c in old}, compliance={c: [True] for c in old})
    new = make_record(
        {c: [1] for c in old + added},
        compliance={**{c: [True] for c in old}, **{c: [False] for c in added}},
        bid="n",
    )
    cmp = compare(base, new)
    assert _result(cmp, "compliance").verdict is Verdict.ok
    fresh = _result(cmp, "compliance", "new cases")
    assert (fresh.k, fresh.new, fresh.base) == (6, 0.0, 1.0)
    assert fresh.verdict is Verdict.breach
    assert not [r for r in cmp.results if r.cohort == "baseline corpus"]
    coh = cmp.cohorts["compliance"]
    assert coh["baseline_cases"] is not None
    assert coh["new_cases"] is not None
    assert (coh["baseline_cases"]["value"], coh["baseline_cases"]["cases"]) == (1.0, 9)
    assert (coh["new_cases"]["value"], coh["new_cases"]["cases"]) == (0.0, 6)
    assert cmp.exit_code == 1


def test_metric_without_data_is_na() -> None:
    cmp = compare(make_record({"q": [1]}), make_record({"q": [1]}, bid="n"))
    r = _result(cmp, "compliance")
    assert r.verdict is Verdict.na
    assert r.note == "no eligible probes in either record"


# --------------------------------------------------------------------------------------------- CLI


def _write(rec: BaselineRecord, path: Path) -> Path:
    return write_baseline(rec, path)


def test_cli_compare_exit_codes_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [f"q{i:02d}" for i in range(20)]
    base = _write(make_record({c: [1, 1, 1, 1, 1] for c in cases}), tmp_path / "base.json")
    same = _write(make_record({c: [1, 1, 1, 1, 1] for c in cases}, bid="n"), tmp_path / "same.json")
    drop = _write(make_record({c: [1, 1, 0, 0, 0] for c in cases}, bid="n"), tmp_path / "drop.json")
    other = _write(
        make_record({c: [1, 1, 1, 1, 1] for c in cases}, bid="n", digests=dict.fromkeys(cases, "sha256:x")),
        tmp_path / "other.json",
    )
    assert main(["baseline", "compare", str(base), str(same)]) == 0
    assert "verdict: ok" in capsys.readouterr().out
    assert main(["baseline", "compare", str(base), str(drop)]) == 1
    out = capsys.readouterr().out
    assert "breach" in out
    assert "activation" in out
    assert main(["baseline", "compare", str(base), str(drop), "--gate", "activation=-0.7"]) == 0
    capsys.readouterr()
    assert main(["baseline", "compare", str(base), str(other)]) == 3
    err = capsys.readouterr().err
    assert err.startswith("skillreach: error: corpus_version: no positive case of deploy is identical")
    assert len(err.strip().splitlines()) == 1
    assert main(["baseline", "compare", str(base), str(drop), "--json"]) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["verdict"] == "breach"
    assert data["exit_code"] == 1
    assert {r["metric"] for r in data["results"]} == {
        "activation",
        "false_activation",
        "compliance",
        "task_quality",
    }


def test_cli_compare_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert main(["baseline", "compare", str(bad), str(bad)]) == 2
    assert "bad.json:1: not a baseline record (invalid JSON at column 2" in capsys.readouterr().err
    assert main(["baseline", "compare", str(tmp_path / "none.json"), str(bad)]) == 2
    assert "no such baseline record" in capsys.readouterr().err
    rec = json.loads(make_record({"q": [1]}).model_dump_json())
    rec["metrics"]["activation"]["n"] = "many"
    rec["digest"] = baseline_digest(rec)  # sealed, so the field itself is what is wrong
    (tmp_path / "r.json").write_text(json.dumps(rec), encoding="utf-8")
    assert main(["baseline", "compare", str(tmp_path / "r.json"), str(tmp_path / "r.json")]) == 2
    assert "field metrics.activation" in capsys.readouterr().err


def test_cli_compare_gate_from_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [f"q{i:02d}" for i in range(20)]
    base = _write(make_record({c: [1, 1, 1, 1, 1] for c in cases}), tmp_path / "base.json")
    drop = _write(make_record({c: [1, 1, 1, 1, 0] for c in cases}, bid="n"), tmp_path / "drop.json")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[gates]\nactivation = -0.5\n", encoding="utf-8")
    assert main(["baseline", "compare", str(base), str(drop), "--config", str(cfg)]) == 0
    capsys.readouterr()
    assert main(["baseline", "compare", str(base), str(drop)]) == 1


# ------------------------------------------------------------------------------------------ properties

_cases = st.dictionaries(
    st.sampled_from([f"q{i}" for i in range(12)]),
    st.lists(st.integers(0, 1), min_size=1, max_size=5),
    min_size=1,
)


@settings(max_examples=60, deadline=None)
@given(_cases)
def test_a_record_compared_with_itself_is_ok(acts: dict[str, list[int]]) -> None:
    rec = make_record(acts)
    cmp = compare(rec, rec.model_copy(update={"baseline_id": "n"}))
    assert cmp.exit_code == 0
    r = _result(cmp, "activation")
    assert r.mean_diff == 0
    assert r.ci95 is not None
    assert r.ci95[0] < 0 < r.ci95[1]  # never of zero width


@settings(max_examples=60, deadline=None)
@given(_cases, _cases)
def test_interval_contains_the_mean_and_verdict_follows_the_rule(
    a: dict[str, list[int]], b: dict[str, list[int]]
) -> None:
    paired = sorted(set(a) & set(b))
    if not paired:  # nothing to gate: refused, never ok
        with pytest.raises(RefusedError, match="no positive case of deploy is identical"):
            compare(make_record(a), make_record(b, bid="n"))
        return
    cmp = compare(make_record(a), make_record(b, bid="n"))
    r = _result(cmp, "activation")
    assert r.ci95 is not None
    assert r.mean_diff is not None
    assert r.ci95[0] <= r.mean_diff <= r.ci95[1]
    if r.mean_diff >= -0.05:
        assert r.verdict is Verdict.ok
    else:
        assert r.verdict is (Verdict.breach if r.ci95[1] < 0 else Verdict.inconclusive)
    mv = make_record(b).metrics["activation"]
    assert mv is not None
    assert 0.0 <= mv.ci95[0] <= mv.value <= mv.ci95[1] <= 1.0


def test_real_entry_point_exit_codes(tmp_path: Path) -> None:
    import sys

    cases = [f"q{i:02d}" for i in range(20)]
    base = _write(make_record({c: [1, 1, 1, 1, 1] for c in cases}), tmp_path / "base.json")
    drop = _write(make_record({c: [1, 1, 0, 0, 0] for c in cases}, bid="n"), tmp_path / "drop.json")
    other = _write(make_record({c: [1] * 5 for c in cases}, bid="n", model="m-20250101"), tmp_path / "o.json")
    exe = Path(sys.executable).with_name("skillreach")

    def run(*args: str) -> hang.Outcome:
        return hang.finish([str(exe), *args], limit_s=120)

    breach = run("baseline", "compare", str(base), str(drop), "--json")
    assert breach.returncode == 1
    assert json.loads(breach.stdout)["verdict"] == "breach"
    assert breach.stderr.strip().startswith("skillreach: error: deploy: gate failed: activation breach")
    refused = run("baseline", "compare", str(base), str(other))
    assert refused.returncode == 3
    assert refused.stderr.strip() == (
        "skillreach: error: model differs: baseline claude-sonnet-4-5-20250929 vs new m-20250101; "
        "the baseline is expired — record a new one (skillreach baseline record --commit) "
        "instead of comparing"
    )


def test_a_tampered_baseline_is_refused_never_gated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Editing a value or emptying per_case breaks the seal: exit 2, even with --strict."""
    cases = [f"q{i:02d}" for i in range(20)]
    base = _write(make_record({c: [1, 1, 1, 1, 1] for c in cases}), tmp_path / "base.json")
    new = _write(make_record({c: [0, 0, 0, 0, 0] for c in cases}, bid="n"), tmp_path / "new.json")
    edited = json.loads(new.read_text(encoding="utf-8"))
    edited["metrics"]["activation"]["value"] = 1.0
    (tmp_path / "edited.json").write_text(json.dumps(edited), encoding="utf-8")
    emptied = json.loads(new.read_text(encoding="utf-8"))
    emptied["per_case"] = {}
    (tmp_path / "emptied.json").write_text(json.dumps(emptied), encoding="utf-8")
    unsealed = json.loads(new.read_text(encoding="utf-8"))
    del unsealed["digest"]
    (tmp_path / "unsealed.json").write_text(json.dumps(unsealed), encoding="utf-8")
    for name, what in (
        ("edited", "digest does not match the content"),
        ("emptied", "digest does not match the content"),
        ("unsealed", "the baseline record carries no digest"),
    ):
        for extra in ([], ["--strict"]):
            assert main(["baseline", "compare", str(base), str(tmp_path / f"{name}.json"), *extra]) == 2
            err = capsys.readouterr().err
            assert f"{name}.json: {what}" in err
            assert len(err.strip().splitlines()) == 1


def test_a_comparison_with_no_paired_case_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _write(make_record({"q01": [1, 1], "q02": [1, 1]}), tmp_path / "base.json")
    new = _write(make_record({"q03": [0, 0], "q04": [0, 0]}, bid="n"), tmp_path / "new.json")
    assert main(["baseline", "compare", str(base), str(new)]) == 3
    err = capsys.readouterr().err
    assert "no positive case of deploy is identical (same id and digest) in both records" in err


# ------------------------------------------------------------------- properties of the changed spec

_digest_of = st.dictionaries(st.sampled_from([f"q{i}" for i in range(12)]), st.sampled_from(["A", "B"]))


@settings(max_examples=80, deadline=None)
@given(_cases, _cases, _digest_of, _digest_of)
def test_a_comparison_never_pairs_cases_whose_digests_differ(
    a: dict[str, list[int]], b: dict[str, list[int]], da: dict[str, str], db: dict[str, str]
) -> None:
    base = make_record(a, digests={k: f"sha256:{v}" for k, v in da.items()})
    new = make_record(b, bid="n", digests={k: f"sha256:{v}" for k, v in db.items()})
    identical = {
        k for k in set(a) & set(b) if base.per_case[k].digest == new.per_case[k].digest
    }
    try:
        cmp = compare(base, new)
    except RefusedError:
        assert not identical  # refused exactly when no positive case is identical
        return
    assert identical
    r = _result(cmp, "activation")
    assert r.k == len(identical)
    expected = sum(sum(b[k]) / len(b[k]) - sum(a[k]) / len(a[k]) for k in identical) / len(identical)
    assert r.mean_diff == pytest.approx(expected)
    assert set(cmp.cases.changed) == {k for k in set(a) & set(b) if k not in identical}
    assert set(cmp.cases.added) == set(b) - set(a)
    assert set(cmp.cases.removed) == set(a) - set(b)


@settings(max_examples=80, deadline=None)
@given(_cases, _cases, st.sampled_from([-0.01, -0.05, -0.3]))
def test_the_rules_out_bound_is_the_interval_end(
    a: dict[str, list[int]], b: dict[str, list[int]], gate: float
) -> None:
    pos = {**a, **{k: v for k, v in b.items() if k not in a}}
    negs_a = {f"n{k}": v for k, v in a.items()}
    negs_b = {f"n{k}": v for k, v in b.items()}
    cmp = compare(make_record(pos, negatives=negs_a), make_record({**pos, **b}, negatives=negs_b, bid="n"),
                  {"activation": gate, "false_activation": -gate})
    for r in cmp.results:
        if r.verdict is not Verdict.ok:
            assert r.rules_out is None
            continue
        assert r.ci95 is not None
        lo, hi = r.ci95
        if r.metric == "false_activation":
            assert r.rules_out == (None if hi >= 1 else hi)
        else:
            assert r.rules_out == (None if lo <= -1 else -lo)
        if r.rules_out is not None and r.rules_out > 0:
            what = "rise" if r.metric == "false_activation" else "drop"
            points = math.ceil(round(r.rules_out * 100, 6))
            assert r.note == f"rules out a {what} larger than {points} points"
            assert points / 100 >= r.rules_out - 1e-9  # never claims more than the interval
