"""The few distribution functions the comparisons need — the normal, Student's t, the noncentral t, the
exact binomial test at ½ — and Brent's root finder: scipy's when it is installed (the ``fast`` extra),
else these implementations in the standard library and numpy, held to scipy's within 1e-9 by
``tests/test_distributions.py``.

The fallbacks: the normal from :func:`math.erfc` and :class:`statistics.NormalDist` (Wichura's AS 241
quantile); Student's t from the regularized incomplete beta (Lentz's continued fraction) and its
quantile by Brent's method on the tail; the noncentral t by Lenth's AS 243 series; the binomial test at
½ summed exactly in integers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from statistics import NormalDist
from types import ModuleType
from typing import Any

import numpy as np

__all__ = [
    "binom_test_half",
    "brentq",
    "nct_cdf",
    "norm_cdf",
    "norm_isf",
    "norm_pdf",
    "norm_ppf",
    "norm_sf",
    "scipy_stats",
    "t_isf",
    "t_ppf",
]

_STD = NormalDist()
_SQRT2 = math.sqrt(2.0)
_EPS = 2.220446049250313e-16


def scipy_stats() -> ModuleType | None:
    """``scipy.stats`` when scipy is installed, else ``None`` (the fallbacks below). Asked each call
    (a dictionary look-up once imported), so a test can hide scipy."""
    try:
        from scipy import stats
    except ImportError:
        return None
    return stats


# ------------------------------------------------------------------------------------------- normal

_erfc = np.frompyfunc(math.erfc, 1, 1)


def _erfc_any(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return np.asarray(_erfc(x.astype(np.float64)), dtype=np.float64)
    return math.erfc(x)


def norm_cdf(x: Any) -> Any:
    """Φ(x), for a number or an array."""
    sps = scipy_stats()
    if sps is not None:
        return sps.norm.cdf(x)
    return 0.5 * _erfc_any(-x / _SQRT2)


def norm_sf(x: Any) -> Any:
    """1 − Φ(x), for a number or an array (no cancellation in the upper tail)."""
    sps = scipy_stats()
    if sps is not None:
        return sps.norm.sf(x)
    return 0.5 * _erfc_any(x / _SQRT2)


def norm_pdf(x: Any) -> Any:
    """φ(x), for a number or an array."""
    sps = scipy_stats()
    if sps is not None:
        return sps.norm.pdf(x)
    if isinstance(x, np.ndarray):
        return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def norm_ppf(p: float) -> float:
    """Φ⁻¹(p): ±inf at 0 and 1."""
    sps = scipy_stats()
    if sps is not None:
        return float(sps.norm.ppf(p))
    if p <= 0.0:
        return -math.inf if p == 0.0 else math.nan
    if p >= 1.0:
        return math.inf if p == 1.0 else math.nan
    return _STD.inv_cdf(p)


def norm_isf(p: float) -> float:
    """The upper-tail quantile: Φ⁻¹(1 − p), without rounding 1 − p."""
    sps = scipy_stats()
    if sps is not None:
        return float(sps.norm.isf(p))
    return -norm_ppf(p)


# ---------------------------------------------------------------------------------------- Student's t


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta (modified Lentz), for x < (a + 1)/(a + b + 2)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta I_x(a, b) (a, b > 0, 0 ≤ x ≤ 1)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def _t_sf(t: float, df: float) -> float:
    """P(T > t) of Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * betainc(0.5 * df, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_isf(p: float, df: float) -> float:
    """The t with P(T > t) = p."""
    sps = scipy_stats()
    if sps is not None:
        return float(sps.t.isf(p, df))
    if not 0.0 <= p <= 1.0:
        return math.nan
    if p == 0.0:
        return math.inf
    if p == 1.0:
        return -math.inf
    if p > 0.5:
        return -t_isf(1.0 - p, df)
    if p == 0.5:
        return 0.0
    hi = 1.0
    while _t_sf(hi, df) > p:
        hi *= 2.0
        if hi > 1e300:
            return math.inf
    return brentq(lambda t: _t_sf(t, df) - p, 0.0, hi, xtol=1e-300, rtol=4 * _EPS, maxiter=500)


def t_ppf(q: float, df: float) -> float:
    """The t with P(T ≤ t) = q."""
    sps = scipy_stats()
    if sps is not None:
        return float(sps.t.ppf(q, df))
    if not 0.0 <= q <= 1.0:
        return math.nan
    return -t_isf(q, df) if q < 0.5 else t_isf(1.0 - q, df)


def nct_cdf(t: float, df: float, nc: float) -> float:
    """P(T ≤ t) of the noncentral t with ``df`` degrees of freedom and noncentrality ``nc``."""
    sps = scipy_stats()
    if sps is not None:
        return float(sps.nct.cdf(t, df, nc))
    if math.isnan(t) or math.isnan(nc):
        return math.nan
    if t < 0:  # P(T ≤ −t; δ) = 1 − P(T ≤ t; −δ)
        return 1.0 - _nct_cdf_upper(-t, df, -nc)
    return _nct_cdf_upper(t, df, nc)


def _nct_cdf_upper(t: float, df: float, delta: float) -> float:
    """P(T ≤ t; δ) for t ≥ 0: Φ(−δ) + ½ Σⱼ [Pⱼ·I_x(j + ½, ν/2) + δ/√2·Qⱼ·I_x(j + 1, ν/2)], x = t²/(t² + ν),
    Pⱼ = e^{−λ}λʲ/j!, Qⱼ = e^{−λ}λʲ/Γ(j + 3/2), λ = δ²/2 (Lenth's AS 243 series), summed outwards from
    the Poisson weights' mode, so a large δ neither underflows nor needs thousands of terms before it."""
    total = norm_sf(delta)
    if math.isinf(t):
        return 1.0
    x = t * t / (t * t + df)
    if x <= 0:
        return min(max(total, 0.0), 1.0)
    lam = 0.5 * delta * delta
    b = 0.5 * df
    log_x, log_1x = math.log(x), math.log1p(-x)
    log_lam = math.log(lam) if lam > 0 else -math.inf

    def weight(j: int, half: bool) -> float:
        """Pⱼ (half=False) or Qⱼ (half=True)."""
        if lam == 0:
            return (1.0 / math.gamma(1.5) if half else 1.0) if j == 0 else 0.0
        return math.exp(-lam + j * log_lam - math.lgamma(j + (1.5 if half else 1.0)))

    def step(a: float) -> float:
        """I_x(a, b) − I_x(a + 1, b)."""
        return math.exp(math.lgamma(a + b) - math.lgamma(a + 1) - math.lgamma(b) + a * log_x + b * log_1x)

    scale = delta / math.sqrt(2.0)
    j0 = int(lam)
    i_odd0, i_even0 = betainc(j0 + 0.5, b, x), betainc(j0 + 1.0, b, x)
    series = 0.0
    i_odd, i_even = i_odd0, i_even0
    for j in range(j0, j0 + 1_000_000):  # outwards, up
        p, q = weight(j, False), weight(j, True)
        series += p * i_odd + scale * q * i_even
        if j > lam and p < 1e-18 and abs(scale) * q < 1e-18:
            break
        i_odd -= step(j + 0.5)
        i_even -= step(j + 1.0)
    i_odd, i_even = i_odd0, i_even0
    for j in range(j0 - 1, -1, -1):  # and down
        i_odd += step(j + 0.5)
        i_even += step(j + 1.0)
        p, q = weight(j, False), weight(j, True)
        series += p * i_odd + scale * q * i_even
        if p < 1e-18 and abs(scale) * q < 1e-18:
            break
    return min(max(total + 0.5 * series, 0.0), 1.0)


# --------------------------------------------------------------------------------------- binomial


def binom_test_half(k: int, n: int) -> float:
    """Two-sided exact p of ``k`` successes in ``n`` trials at probability ½ (scipy's ``binomtest``:
    the outcomes no likelier than ``k``, which at ½ are the two tails as far out as ``k``)."""
    if n == 0:
        return 1.0
    sps = scipy_stats()
    if sps is not None:
        return float(sps.binomtest(k, n, 0.5).pvalue)
    low = min(k, n - k)
    if 2 * low == n:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(low + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


# ------------------------------------------------------------------------------------------ roots


def brentq(
    f: Callable[[float], float],
    a: float,
    b: float,
    *,
    xtol: float = 2e-12,
    rtol: float = 4 * _EPS,
    maxiter: int = 100,
) -> float:
    """A root of ``f`` in [a, b] (f(a), f(b) of opposite signs) by Brent's method: scipy's when
    installed, else the same algorithm (scipy's ``brentq.c``), converged to ``xtol + rtol·|x|``."""
    try:
        from scipy import optimize
    except ImportError:
        pass
    else:
        return float(optimize.brentq(f, a, b, xtol=xtol, rtol=rtol, maxiter=maxiter))
    xpre, xcur = a, b
    fpre, fcur = f(xpre), f(xcur)
    if fpre * fcur > 0:
        raise ValueError("f(a) and f(b) must have different signs")
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    xblk = fblk = spre = scur = 0.0
    for _ in range(maxiter):
        if fpre != 0 and fcur != 0 and (fpre < 0) != (fcur < 0):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:  # interpolate
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:  # extrapolate
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
                spre, scur = scur, stry  # good short step
            else:
                spre, scur = sbis, sbis  # bisect
        else:
            spre, scur = sbis, sbis
        xpre, fpre = xcur, fcur
        if abs(scur) > delta:
            xcur += scur
        else:
            xcur += delta if sbis > 0 else -delta
        fcur = f(xcur)
    return xcur
