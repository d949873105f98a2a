"""Paired intervals of rate differences stay inside [−1, 1] (spec/metrics.md "Comparing …").

The regression: three cases that every run reached under the baseline, then 0/3, 0/3 and 1/3 — the
t interval of (−1, −1, −⅔) is [−1.367, −0.411], and an alert printed −1.367 for a difference of
two rates. The gate's interval is now Newcombe's for paired proportions, which is clipped to [−1, 1]
by construction: [−0.980, −0.448] there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillreach.baselines.gates import Verdict, compare, paired_rate_interval
from skillreach.baselines.records import (
    BaselineRecord,
    CaseCounts,
    CaseOutcomes,
    metric_value,
    write_baseline,
)
from skillreach.cli import main
from skillreach.errors import RefusedError
from skillreach.scoring.intervals import paired_t_interval
from skillreach.service.alerts import breaches_from_comparison, slack_message

METRICS = ("activation", "false_activation", "compliance", "task_quality")


def _record(
    activated: dict[str, list[int]],
    *,
    negatives: dict[str, list[int]] | None = None,
    compliance: dict[str, list[bool]] | None = None,
    quality: dict[str, list[float]] | None = None,
    bid: str = "deploy@base",
) -> BaselineRecord:
    per_case = {
        qid: CaseOutcomes(
            role="positive",
            kind="implicit",
            probes=len(acts),
            activated=tuple(acts),
            compliance=tuple((compliance or {}).get(qid, ())),
            quality=tuple((quality or {}).get(qid, ())),
        )
        for qid, acts in activated.items()
    }
    for qid, acts in (negatives or {}).items():
        per_case[qid] = CaseOutcomes(
            role="negative", kind="out_of_scope", probes=len(acts), activated=tuple(acts)
        )
    return BaselineRecord(
        baseline_id=bid,
        skill="deploy",
        created_at="2026-11-30T00:00:00Z",
        skill_version="git:1111" if bid == "deploy@base" else "git:2222",
        skill_version_origin="git",
        corpus_version="sha256:" + "a" * 64,
        model="claude-sonnet-4-5-20250929",
        runtime="fake",
        runs_per_case=max(len(v) for v in activated.values()),
        cases=CaseCounts(positive=len(activated), negative=len(negatives or {})),
        metrics={m: metric_value(per_case, m) for m in METRICS},
        per_case=per_case,
    )


BASE = {"q1": [1, 1, 1], "q2": [1, 1, 1], "q3": [1, 1, 1]}
DROP = {"q1": [0, 0, 0], "q2": [0, 0, 0], "q3": [1, 0, 0]}


def test_the_unclipped_interval_of_the_regression_leaves_minus_one() -> None:
    """The precondition of the regression: the plain t interval does reach −1.367."""
    _, lo, _ = paired_t_interval([-1.0, -1.0, -2 / 3])
    assert round(lo, 3) == -1.367


def test_alert_of_a_large_drop_on_few_cases_is_clipped_to_minus_one() -> None:
    cmp = compare(_record(BASE), _record(DROP, bid="deploy@new"))
    act = next(r for r in cmp.results if r.metric == "activation")
    assert act.verdict is Verdict.breach
    assert act.mean_diff == pytest.approx(-8 / 9)
    assert act.ci95 is not None
    assert act.ci95[0] == pytest.approx(-0.9801, abs=1e-4)
    assert act.ci95[1] == pytest.approx(-0.4480, abs=1e-4)
    payloads = breaches_from_comparison(cmp, baseline_id="deploy@base", run_link="file:///r")
    assert [p["metric"] for p in payloads] == ["activation"]
    assert payloads[0]["interval"][0] >= -1.0
    text = slack_message(payloads[0])["text"]
    assert "95% CI -0.980 to -0.448" in text
    assert "1.367" not in json.dumps(slack_message(payloads[0]))


def test_cli_compare_shows_the_clipped_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table's interval column unabridged
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    write_baseline(_record(BASE), base)  # sealed, as every record on disk is
    write_baseline(_record(DROP, bid="deploy@new"), new)
    assert main(["baseline", "compare", str(base), str(new), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    act = next(r for r in data["results"] if r["metric"] == "activation")
    assert act["ci95"][0] >= -1.0
    assert main(["baseline", "compare", str(base), str(new)]) == 1
    out = capsys.readouterr().out
    assert "-0.980" in out
    assert "-1.367" not in out


def test_the_upper_end_is_clipped_to_one_for_false_activation() -> None:
    negatives_base = {"n1": [0, 0, 0], "n2": [0, 0, 0], "n3": [0, 0, 0]}
    negatives_new = {"n1": [1, 1, 1], "n2": [1, 1, 1], "n3": [1, 1, 1]}
    cmp = compare(
        _record(BASE, negatives=negatives_base), _record(BASE, negatives=negatives_new, bid="deploy@new")
    )
    fa = next(r for r in cmp.results if r.metric == "false_activation")
    assert fa.ci95 is not None
    assert fa.ci95[1] == 1.0
    assert fa.verdict is Verdict.breach  # clipping never changes a verdict: lo is still > 0


_case_runs = st.lists(st.integers(0, 1).map(float), min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_case_runs, _case_runs), min_size=1, max_size=30))
def test_paired_rate_interval_stays_in_minus_one_one_and_holds_the_mean(
    cases: list[tuple[list[float], list[float]]],
) -> None:
    new, base = [n for n, _ in cases], [b for _, b in cases]
    mean, lo, hi = paired_rate_interval(new, base)
    assert -1.0 <= lo <= mean <= hi <= 1.0
    assert lo < hi  # never of zero width
    assert mean == pytest.approx(
        sum(sum(n) / len(n) for n in new) / len(new) - sum(sum(b) / len(b) for b in base) / len(base)
    )


_runs = st.lists(st.integers(0, 1), min_size=1, max_size=4)
_ids = st.sampled_from([f"q{i}" for i in range(6)])
_scores = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(_ids, _runs, min_size=1),
    st.dictionaries(_ids, _runs, min_size=1),
    st.dictionaries(_ids, st.lists(st.booleans(), min_size=1, max_size=4)),
    st.dictionaries(_ids, st.lists(st.booleans(), min_size=1, max_size=4)),
    st.dictionaries(_ids, _scores),
    st.dictionaries(_ids, _scores),
    st.dictionaries(st.sampled_from(["n1", "n2", "n3"]), _runs),
    st.dictionaries(st.sampled_from(["n1", "n2", "n3"]), _runs),
)
def test_no_gate_interval_leaves_minus_one_one(
    acts_a: dict[str, list[int]],
    acts_b: dict[str, list[int]],
    comp_a: dict[str, list[bool]],
    comp_b: dict[str, list[bool]],
    qual_a: dict[str, list[float]],
    qual_b: dict[str, list[float]],
    neg_a: dict[str, list[int]],
    neg_b: dict[str, list[int]],
) -> None:
    """Every result — paired and new-cases cohorts, every metric — carries an interval in [−1, 1]."""
    a = _record(acts_a, negatives=neg_a, compliance=comp_a, quality=qual_a)
    b = _record(acts_b, negatives=neg_b, compliance=comp_b, quality=qual_b, bid="deploy@new")
    try:
        cmp = compare(a, b)
    except RefusedError:  # no case rated in both records: refused, never an interval
        return
    for r in cmp.results:
        if r.ci95 is None:
            continue
        assert r.mean_diff is not None
        assert -1.0 <= r.ci95[0] <= r.mean_diff <= r.ci95[1] <= 1.0, (r.metric, r.cohort, r.ci95)
    for p in breaches_from_comparison(cmp, baseline_id="b", run_link="x", strict=True):
        assert -1.0 <= p["interval"][0] <= p["interval"][1] <= 1.0
