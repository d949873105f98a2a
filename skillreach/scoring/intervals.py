"""Interval estimates of spec/metrics.md: Wilson, clustered Wilson, Newcombe's paired-proportion
interval (method 10), paired t. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "Z95",
    "clustered_wilson",
    "icc_anova",
    "newcombe_interval",
    "newcombe_paired",
    "newcombe_phi",
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


def clustered_wilson(
    groups: Sequence[Sequence[float]], z: float = Z95, *, rate: float | None = None
) -> tuple[float, float] | None:
    """Wilson interval on the effective sample size of clustered observations in [0, 1].

    ``groups`` holds one sequence per case (its probes' outcomes, 0/1 or a score in [0, 1]). ``rate``:
    the interval at that rate instead of the pooled one (a paired comparison's mean case rate).
    """
    groups = [list(g) for g in groups if len(g) > 0]
    k = len(groups)
    n_total = sum(len(g) for g in groups)
    if n_total == 0:
        return None
    p_hat = sum(sum(g) for g in groups) / n_total if rate is None else rate
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
    from scipy.stats import t as student_t  # ~1 s to import: loaded where a t interval is asked for

    t = float(student_t.ppf(0.5 + confidence / 2.0, k - 1))
    half = t * sd / math.sqrt(k)
    return mean, mean - half, mean + half


def newcombe_phi(x: Sequence[float], y: Sequence[float]) -> float:
    """Newcombe's continuity-corrected correlation φ of paired case rates (spec/metrics.md): with
    S = Σ(xᵢ − x̄)(yᵢ − ȳ), φ = (S − ½)/√(Sxx·Syy) when S > ½; 0 when 0 ≤ S ≤ ½ or Sxx·Syy = 0;
    S/√(Sxx·Syy) when S < 0."""
    k = len(x)
    if k == 0 or len(y) != k:
        raise ValueError("newcombe_phi needs two equally long, non-empty sequences")
    mx, my = sum(x) / k, sum(y) / k
    s = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx * syy <= 0:
        return 0.0
    root = math.sqrt(sxx * syy)
    if s > 0.5:
        return (s - 0.5) / root
    if s >= 0:
        return 0.0
    return s / root


def newcombe_paired(
    new: Sequence[Sequence[float]],
    base: Sequence[Sequence[float]] | None = None,
    *,
    base_interval: tuple[float, float, float] | None = None,
    z: float = Z95,
) -> tuple[float, float, float]:
    """(d̂, lo, hi): Newcombe's hybrid score interval (1998, method 10) for p_new − p_base.

    ``new[i]`` and ``base[i]`` are case i's probe outcomes (0/1 or scores in [0, 1]) on each side; each
    side's rate is its mean case rate, its interval the clustered interval at that rate (plain Wilson
    with n = k at one run per case), φ the continuity-corrected correlation of the case rates
    (:func:`newcombe_phi`). ``base_interval`` = (p, l, u) instead of ``base``: an independent side (a
    cohort of cases the baseline never rated, against its pooled value), φ = 0. Clipped to [−1, 1];
    never of zero width.
    """
    groups_new = [list(g) for g in new]
    if not groups_new or any(len(g) == 0 for g in groups_new):
        raise ValueError("newcombe_paired needs at least one case, each with at least one outcome")
    rates_new = [sum(g) / len(g) for g in groups_new]
    p1 = sum(rates_new) / len(rates_new)
    ci_new = clustered_wilson(groups_new, z, rate=p1)
    assert ci_new is not None
    l1, u1 = min(ci_new[0], p1), max(ci_new[1], p1)
    if base is not None:
        groups_base = [list(g) for g in base]
        if len(groups_base) != len(groups_new) or any(len(g) == 0 for g in groups_base):
            raise ValueError("newcombe_paired needs the same cases, each with an outcome, on both sides")
        rates_base = [sum(g) / len(g) for g in groups_base]
        p2 = sum(rates_base) / len(rates_base)
        ci_base = clustered_wilson(groups_base, z, rate=p2)
        assert ci_base is not None
        l2, u2 = min(ci_base[0], p2), max(ci_base[1], p2)
        phi = newcombe_phi(rates_new, rates_base)
    elif base_interval is not None:
        p2, l2, u2 = base_interval
        l2, u2 = min(l2, p2), max(u2, p2)
        phi = 0.0
    else:
        raise ValueError("newcombe_paired needs base or base_interval")
    lower, upper = newcombe_interval((p1, l1, u1), (p2, l2, u2), phi)
    return p1 - p2, lower, upper


def newcombe_interval(
    new: tuple[float, float, float], base: tuple[float, float, float], phi: float
) -> tuple[float, float]:
    """Newcombe's (lo, hi) for p_new − p_base from each side's (p, l, u) and φ (spec/metrics.md):
    lower = d̂ − √((p_new − l_new)² − 2φ(p_new − l_new)(u_base − p_base) + (u_base − p_base)²),
    upper = d̂ + √((u_new − p_new)² − 2φ(u_new − p_new)(p_base − l_base) + (p_base − l_base)²),
    clipped to [−1, 1]."""
    (p1, l1, u1), (p2, l2, u2) = new, base
    d = p1 - p2
    a, b = p1 - l1, u2 - p2
    lower = d - math.sqrt(max(0.0, a * a - 2.0 * phi * a * b + b * b))
    a, b = u1 - p1, p2 - l2
    upper = d + math.sqrt(max(0.0, a * a - 2.0 * phi * a * b + b * b))
    return max(-1.0, lower), min(1.0, upper)
