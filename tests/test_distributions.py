"""The distributions of an install without scipy (skillreach/scoring/distributions.py) against scipy's,
on grids wider than the comparisons use; and the Kneedle port against kneed."""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
from scipy import optimize, stats

from skillreach.scoring import distributions as dist
from tests.conftest import hide_scipy, restore_modules

DFS = (1, 2, 3, 4, 5, 7, 10, 19, 30, 50, 99, 200, 1000)


@pytest.fixture
def fallback() -> Iterator[None]:
    """scipy hidden: every function of the module takes its own path."""
    saved = hide_scipy()
    try:
        assert dist.scipy_stats() is None
        yield
    finally:
        restore_modules(saved)


def test_normal(fallback: None) -> None:
    xs = np.linspace(-40, 40, 801)
    for x in xs.tolist():
        assert dist.norm_cdf(x) == pytest.approx(float(stats.norm.cdf(x)), rel=1e-12, abs=1e-300)
        assert dist.norm_sf(x) == pytest.approx(float(stats.norm.sf(x)), rel=1e-12, abs=1e-300)
        assert dist.norm_pdf(x) == pytest.approx(float(stats.norm.pdf(x)), rel=1e-12, abs=1e-300)
    grid = np.outer(np.linspace(-9, 9, 61), np.ones(3))
    assert np.allclose(dist.norm_cdf(grid), stats.norm.cdf(grid), rtol=1e-13, atol=0)
    assert np.allclose(dist.norm_sf(grid), stats.norm.sf(grid), rtol=1e-13, atol=0)
    assert np.allclose(dist.norm_pdf(grid), stats.norm.pdf(grid), rtol=1e-13, atol=0)
    for p in (1e-300, 1e-12, 1e-6, 0.0125, 0.025, 0.5, 0.9, 0.999999):
        assert dist.norm_ppf(p) == pytest.approx(float(stats.norm.ppf(p)), rel=1e-14)
        assert dist.norm_isf(p) == pytest.approx(float(stats.norm.isf(p)), rel=1e-14)
    assert dist.norm_ppf(0.0) == -math.inf
    assert dist.norm_ppf(1.0) == math.inf


@pytest.mark.parametrize("df", DFS)
def test_student_t_quantiles(fallback: None, df: int) -> None:
    for q in (1e-10, 1e-6, 0.001, 0.0125, 0.025, 0.05, 0.3, 0.5, 0.7, 0.95, 0.975, 0.999):
        assert dist.t_ppf(q, df) == pytest.approx(float(stats.t.ppf(q, df)), rel=1e-11, abs=1e-14)
        assert dist.t_isf(q, df) == pytest.approx(float(stats.t.isf(q, df)), rel=1e-11, abs=1e-14)
    assert dist.t_ppf(1.0, df) == math.inf
    assert dist.t_isf(1.0, df) == -math.inf


@pytest.mark.parametrize("df", DFS)
def test_noncentral_t_cdf(fallback: None, df: int) -> None:
    for nc in (0, 0.1, 0.5, 1, 2, 3.5, 5, 8, 12, 20, 40, 60):
        for t in (-15, -5, -2.5, -1, -0.1, 0, 0.1, 1, 2, 2.26, 4, 8, 15, 40, 100):
            for delta in (nc, -nc):
                got, want = dist.nct_cdf(t, df, delta), float(stats.nct.cdf(t, df, delta))
                assert 0.0 <= got <= 1.0
                if math.isnan(want):  # scipy's own series fails far in a tail: ours is ~0 or ~1 there
                    assert min(got, 1 - got) < 1e-12, (t, df, delta, got)
                    continue
                assert got == pytest.approx(want, abs=1e-10), (t, df, delta)


def test_binomial_test_at_one_half(fallback: None) -> None:
    for n in range(121):
        for k in range(n + 1):
            want = float(stats.binomtest(k, n, 0.5).pvalue) if n else 1.0
            assert dist.binom_test_half(k, n) == pytest.approx(want, rel=1e-12), (k, n)
    for n, k in ((1000, 400), (5000, 2400), (2000, 1000), (2001, 1000), (3000, 0)):
        assert dist.binom_test_half(k, n) == pytest.approx(
            float(stats.binomtest(k, n, 0.5).pvalue), rel=1e-12
        )


def test_brent(fallback: None) -> None:
    for c in (0.1, 1, 2, 3.7, 10):

        def f(x: float, c: float = c) -> float:
            return math.tanh(x) * x**3 - c

        assert dist.brentq(f, 0.0, 40.0, xtol=1e-10) == pytest.approx(
            optimize.brentq(f, 0.0, 40.0, xtol=1e-10), abs=2e-10
        )
    with pytest.raises(ValueError, match="different signs"):
        dist.brentq(lambda x: x * x + 1, -1.0, 1.0)


def test_with_scipy_the_functions_are_scipys() -> None:
    assert dist.scipy_stats() is stats
    assert dist.t_ppf(0.975, 7) == float(stats.t.ppf(0.975, 7))
    assert dist.nct_cdf(2.0, 7, 1.5) == float(stats.nct.cdf(2.0, 7, 1.5))


def test_power_and_staged_boundaries_agree_without_scipy() -> None:
    """What the gates compute from these (a t-test's power, the O'Brien-Fleming boundaries, the paired-t
    interval) is the same with and without scipy."""
    from skillreach.baselines import gates
    from skillreach.baselines.sequential import _boundaries, _t_critical, obf_boundaries
    from skillreach.scoring.intervals import paired_t_interval

    cases = [(0.05, 0.2, k) for k in (2, 3, 5, 10, 40, 200)] + [(0.3, 0.1, 6), (-0.1, 0.5, 30)]
    diffs = [0.1, -0.2, 0.35, 0.0, 0.05, 0.4, -0.1]
    with_scipy = (
        [gates.t_test_power(*c) for c in cases],
        obf_boundaries([0.25, 0.5, 0.75, 1.0]),
        [_t_critical(z, df) for z in (1.96, 2.5, 4.3) for df in (3, 9, 60)],
        paired_t_interval(diffs),
    )
    _boundaries.cache_clear()
    _t_critical.cache_clear()
    saved = hide_scipy()
    try:
        without = (
            [gates.t_test_power(*c) for c in cases],
            obf_boundaries([0.25, 0.5, 0.75, 1.0]),
            [_t_critical(z, df) for z in (1.96, 2.5, 4.3) for df in (3, 9, 60)],
            paired_t_interval(diffs),
        )
    finally:
        restore_modules(saved)
        _boundaries.cache_clear()
        _t_critical.cache_clear()
    assert without[0] == pytest.approx(with_scipy[0], abs=1e-10)
    assert without[1] == pytest.approx(with_scipy[1], abs=1e-8)
    assert without[2] == pytest.approx(with_scipy[2], rel=1e-11)
    assert without[3] == pytest.approx(with_scipy[3], rel=1e-12)


def test_kneedle_port_equals_kneed() -> None:
    kneed = pytest.importorskip("kneed")
    from skillreach.author.sweep import kneedle_decreasing_concave

    rng = random.Random(1)
    found = 0
    for trial in range(1500):
        n = rng.randint(3, 12)
        sizes = sorted(rng.sample(range(2, 5000), n))
        x = [math.log(s) for s in sizes]
        if trial % 3 == 0:
            y = sorted((rng.random() for _ in range(n)), reverse=True)
        elif trial % 3 == 1:
            y = [1 - (s / 5000) ** rng.uniform(0.3, 4) + rng.gauss(0, 0.02) for s in sizes]
        else:
            y = [round(rng.random(), 2) for _ in range(n)]
        if max(y) == min(y):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = kneed.KneeLocator(x, y, curve="concave", direction="decreasing", S=1.0).knee
        got = kneedle_decreasing_concave(x, y)
        assert got == want, (x, y)
        found += got is not None
    assert found > 1000  # most curves have a knee: the comparison is not of Nones
