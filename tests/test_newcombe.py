"""Newcombe's hybrid score interval for paired proportions (spec/metrics.md "Comparing …", method 10):
the spec's worked values, never of zero width, and a differential check against a reference written
here from Newcombe's 2×2-table form (one run per case), independently of the product code."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillreach.scoring.intervals import newcombe_paired, newcombe_phi
from tests.helpers.newcombe import newcombe_reference


def _cases(values: list[int]) -> list[list[float]]:
    return [[float(v)] for v in values]


@pytest.mark.parametrize(
    ("new", "base", "lo", "hi"),
    [
        ([0] * 4, [1] * 4, -1.0, -0.307),
        ([0], [1], -1.0, 0.122),
        ([1] * 4, [1] * 4, -0.490, 0.490),
        ([1] * 4 + [0] * 4, [1] * 4 + [0] * 4, -0.201, 0.201),
    ],
)
def test_worked_values(new: list[int], base: list[int], lo: float, hi: float) -> None:
    d, got_lo, got_hi = newcombe_paired(_cases(new), _cases(base))
    assert d == pytest.approx(sum(new) / len(new) - sum(base) / len(base))
    assert got_lo == pytest.approx(lo, abs=5e-4)
    assert got_hi == pytest.approx(hi, abs=5e-4)


def test_phi_of_the_worked_value() -> None:
    x = [1.0] * 4 + [0.0] * 4
    assert newcombe_phi(x, x) == pytest.approx(0.75)
    assert newcombe_phi([1.0] * 4, [1.0] * 4) == 0.0  # no spread: 0


pairs_strategy = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(pairs_strategy)
def test_matches_the_reference(pairs: list[tuple[int, int]]) -> None:
    got = newcombe_paired(_cases([x for x, _ in pairs]), _cases([y for _, y in pairs]))
    want = newcombe_reference(pairs)
    assert got == pytest.approx(want, abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.25]), min_size=1, max_size=4),
            st.lists(st.sampled_from([0.0, 1.0, 0.75]), min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_never_of_zero_width_and_holds_the_estimate(cases: list[tuple[list[float], list[float]]]) -> None:
    d, lo, hi = newcombe_paired([n for n, _ in cases], [b for _, b in cases])
    assert -1.0 <= lo <= d <= hi <= 1.0
    assert hi - lo > 1e-6


def test_an_independent_side() -> None:
    """A cohort against a pooled value: φ = 0, the base side's own interval."""
    d, lo, hi = newcombe_paired(_cases([1, 1, 0, 1]), base_interval=(0.9, 0.7, 0.97))
    assert d == pytest.approx(0.75 - 0.9)
    assert lo < d < hi
