"""Interval estimates of spec/metrics.md: Wilson, clustered Wilson, paired t. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "Z95",
    "clustered_wilson",
    "icc_anova",
    "paired_t_interval",
    "wilson",
]

Z95 = 1.959963984540054


def wilson(hits: float, n: float, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for ``hits`` of ``n`` (reals allowed); ``None`` when n = 0."""
    if n <= 0:
        return None
    z2 = z * z
    centre = (hits + z2 / 2.0) / (n + z2)
    inner = max(0.0, hits * (n - hits) / n + z2 / 4.0)
    half = z / (n + z2) * math.sqrt(inner)
    # At h = 0 (or h = n) the bound is exactly 0 (or 1); the subtraction leaves ~1e-17 of noise.
    lo = 0.0 if hits <= 0 else max(0.0, centre - half)
    hi = 1.0 if hits >= n else min(1.0, centre + half)
    return (lo, hi)


def icc_anova(groups: Sequence[Sequence[float]]) -> float:
    """One-way ANOVA intra-class correlation across groups, clamped to [0, 1].

    0 when there are fewer than two groups, when N ≤ k, or when the denominator is 0.
    """
    groups = [list(g) for g in groups if len(g) > 0]
    k = len(groups)
    n_total = sum(len(g) for g in groups)
    if k < 2 or n_total <= k:
        return 0.0
    grand = sum(sum(g) for g in groups) / n_total
    ssb = sum(len(g) * (sum(g) / len(g) - grand) ** 2 for g in groups)
    ssw = sum(sum((y - sum(g) / len(g)) ** 2 for y in g) for g in groups)
    msb = ssb / (k - 1)
    msw = ssw / (n_total - k)
    m0 = (n_total - sum(len(g) ** 2 for g in groups) / n_total) / (k - 1)
    denom = msb + (m0 - 1.0) * msw
    if denom == 0:
        return 0.0
    rho = (msb - msw) / denom
    return min(1.0, max(0.0, rho))


def clustered_wilson(groups: Sequence[Sequence[float]], z: float = Z95) -> tuple[float, float] | None:
    """Wilson interval on the effective sample size of clustered observations in [0, 1].

    ``groups`` holds one sequence per case (its probes' outcomes, 0/1 or a score in [0, 1]).
    """
    groups = [list(g) for g in groups if len(g) > 0]
    k = len(groups)
    n_total = sum(len(g) for g in groups)
    if n_total == 0:
        return None
    p_hat = sum(sum(g) for g in groups) / n_total
    rho = icc_anova(groups)
    m_bar = n_total / k
    deff = 1.0 + (m_bar - 1.0) * rho
    n_eff = n_total / deff
    return wilson(p_hat * n_eff, n_eff, z)


def paired_t_interval(diffs: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, lo, hi) of the paired differences; [d̂, d̂] when k < 2 or sd = 0."""
    k = len(diffs)
    if k == 0:
        raise ValueError("paired_t_interval needs at least one difference")
    mean = sum(diffs) / k
    if k < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (k - 1))
    if sd == 0:
        return mean, mean, mean
    from scipy import stats as sps  # scipy.stats costs ~1 s to import; only comparisons need it

    t = float(sps.t.ppf(0.5 + confidence / 2.0, k - 1))
    half = t * sd / math.sqrt(k)
    return mean, mean - half, mean + half
