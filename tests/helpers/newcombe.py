"""An independent reference for Newcombe's hybrid score interval for paired proportions (1998, method
10), written from the paper's 2×2-table form at one run per case — not from the product code."""

from __future__ import annotations

import math

Z = 1.959963984540054


def _wilson_roots(h: int, n: int) -> tuple[float, float]:
    """Wilson bounds as the roots of (p̂ − p)² = z²·p(1 − p)/n, solved as a quadratic in p."""
    p_hat = h / n
    a = 1 + Z * Z / n
    b = -(2 * p_hat + Z * Z / n)
    c = p_hat * p_hat
    disc = math.sqrt(max(0.0, b * b - 4 * a * c))
    return (-b - disc) / (2 * a), (-b + disc) / (2 * a)


def newcombe_reference(pairs: list[tuple[int, int]]) -> tuple[float, float, float]:
    """(d̂, lo, hi) of p_new − p_base from (new, base) outcomes, one per case."""
    a = sum(1 for x, y in pairs if x == 1 and y == 1)
    b = sum(1 for x, y in pairs if x == 1 and y == 0)
    c = sum(1 for x, y in pairs if x == 0 and y == 1)
    d = sum(1 for x, y in pairs if x == 0 and y == 0)
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = _wilson_roots(a + b, n)
    l2, u2 = _wilson_roots(a + c, n)
    denom = (a + b) * (c + d) * (a + c) * (b + d)
    if denom == 0:
        phi = 0.0
    elif a * d - b * c > n / 2:
        phi = (a * d - b * c - n / 2) / math.sqrt(denom)
    elif a * d - b * c >= 0:
        phi = 0.0
    else:
        phi = (a * d - b * c) / math.sqrt(denom)
    delta = p1 - p2
    lower = delta - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    upper = delta + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return delta, max(-1.0, lower), min(1.0, upper)
