"""Intervals of spec/metrics.md against statsmodels/scipy and hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from skillreach.scoring.intervals import Z95, clustered_wilson, icc_anova, paired_t_interval, wilson


def test_z_is_the_spec_constant() -> None:
    assert Z95 == 1.959963984540054
    assert pytest.approx(sps.norm.ppf(0.975), abs=1e-15) == Z95


def test_wilson_worked_example_four_of_five() -> None:
    lo, hi = wilson(4, 5)  # type: ignore[misc]
    assert (round(lo, 3), round(hi, 3)) == (0.376, 0.964)


def test_wilson_null_when_no_trials() -> None:
    assert wilson(0, 0) is None


@pytest.mark.parametrize("seed", range(5))
def test_wilson_against_statsmodels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(1, 2000))
        h = int(rng.integers(0, n + 1))
        lo, hi = proportion_confint(h, n, alpha=0.05, method="wilson")
        ours = wilson(h, n)
        assert ours is not None
        assert ours[0] == pytest.approx(lo, abs=1e-12)
        assert ours[1] == pytest.approx(hi, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_inside_unit_interval_and_around_the_estimate(hn: tuple[int, int]) -> None:
    h, n = hn
    ci = wilson(h, n)
    assert ci is not None
    lo, hi = ci
    assert 0.0 <= lo <= hi <= 1.0
    assert lo - 1e-15 <= h / n <= hi + 1e-15


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 500), st.floats(0.0, 1.0))
def test_wilson_shrinks_with_more_evidence(n: int, share: float) -> None:
    h = round(share * n)
    small, big = wilson(h, n), wilson(4 * h, 4 * n)
    assert small is not None
    assert big is not None
    assert big[1] - big[0] < small[1] - small[0]


def test_icc_and_clustered_wilson_by_hand() -> None:
    # Two cases of three probes: [1, 1, 0] and [0, 0, 0].
    # grand mean 1/3; SSB = 3(1/3)² + 3(1/3)² = 2/3, MSB = 2/3; SSW = 2/9 + 4/9 = 2/3, MSW = (2/3)/4 = 1/6;
    # m0 = (6 − 18/6)/1 = 3; ρ = (2/3 − 1/6)/(2/3 + 2·1/6) = 1/2; DEFF = 1 + 2·1/2 = 2; n_eff = 3; h_eff = 1.
    groups = [[1, 1, 0], [0, 0, 0]]
    assert icc_anova(groups) == pytest.approx(0.5)
    assert clustered_wilson(groups) == pytest.approx(wilson(1, 3))


def test_icc_unbalanced_by_hand() -> None:
    # Cases [1, 1] and [0, 0, 0, 1]: N = 6, k = 2, grand 1/2.
    # SSB = 2(1/2)² + 4(1/4)² = 3/4; MSB = 3/4. SSW = 0 + (3·(1/4)² + (3/4)²) = 3/4; MSW = 3/16.
    # m0 = (6 − (4 + 16)/6)/1 = 8/3; ρ = (3/4 − 3/16)/(3/4 + (5/3)(3/16)) = (9/16)/(17/16) = 9/17.
    groups = [[1, 1], [0, 0, 0, 1]]
    rho = 9 / 17
    assert icc_anova(groups) == pytest.approx(rho)
    deff = 1 + (3 - 1) * rho
    n_eff = 6 / deff
    assert clustered_wilson(groups) == pytest.approx(wilson(0.5 * n_eff, n_eff))


def test_icc_degenerate_cases_are_zero() -> None:
    assert icc_anova([[1, 0, 1]]) == 0.0  # k < 2
    assert icc_anova([[1], [0], [1]]) == 0.0  # N ≤ k
    assert icc_anova([[1, 1], [1, 1]]) == 0.0  # denominator 0
    assert icc_anova([[1, 0], [1, 0]]) == 0.0  # negative ρ clamped
    assert clustered_wilson([]) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=6), min_size=1, max_size=8))
def test_clustered_interval_properties(groups: list[list[int]]) -> None:
    ci = clustered_wilson(groups)
    assert ci is not None
    lo, hi = ci
    n = sum(len(g) for g in groups)
    p_hat = sum(map(sum, groups)) / n
    assert 0.0 <= lo <= hi <= 1.0
    assert lo - 1e-12 <= p_hat <= hi + 1e-12
    rho = icc_anova(groups)
    assert 0.0 <= rho <= 1.0
    plain = wilson(sum(map(sum, groups)), n)
    assert plain is not None
    # clustering never makes the interval narrower than treating every probe as independent
    assert hi - lo >= plain[1] - plain[0] - 1e-12
    if rho == 0.0:
        assert ci == pytest.approx(plain)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 1), min_size=1, max_size=30))
def test_clustered_degenerates_to_wilson_with_single_probe_cases(ys: list[int]) -> None:
    assert clustered_wilson([[y] for y in ys]) == pytest.approx(wilson(sum(ys), len(ys)))


@pytest.mark.parametrize("seed", range(5))
def test_paired_t_against_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    diffs = rng.normal(0.02, 0.1, size=int(rng.integers(2, 40))).tolist()
    mean, lo, hi = paired_t_interval(diffs)
    ci = sps.ttest_1samp(diffs, 0.0).confidence_interval(0.95)
    assert mean == pytest.approx(float(np.mean(diffs)))
    assert lo == pytest.approx(ci.low)
    assert hi == pytest.approx(ci.high)


def test_paired_t_degenerate() -> None:
    assert paired_t_interval([0.25]) == (0.25, 0.25, 0.25)
    assert paired_t_interval([0.1, 0.1, 0.1]) == pytest.approx((0.1, 0.1, 0.1))
    with pytest.raises(ValueError, match="at least one"):
        paired_t_interval([])
    assert math.isfinite(paired_t_interval([0.0, 1.0])[2])
