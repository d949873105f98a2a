"""Per-query tables of one scored study, and the paired bootstrap helpers over queries.

Shared by the A/B diff (:mod:`skillreach.author.diff`) and the capacity sweep
(:mod:`skillreach.author.sweep`): a
query's attempts are averaged, so each query weighs the same; F1 per class is 2·tp / (2·tp + fp + fn)
(= 2PR/(P + R) of spec/metrics.md), the macro mean over classes with support.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from skillreach.models import NO_SKILL
from skillreach.scoring.artifact import ProbeOutcome

__all__ = ["ArmQueries", "bootstrap_weights", "clip", "f1_macro", "precision", "quantiles"]

Interval = tuple[float, float]


def clip(lo: float, hi: float) -> Interval:
    return (max(-1.0, lo), min(1.0, hi))


class ArmQueries:
    """Per paired query: attempt-averaged top-1, reachability, and fractional tp/fp/fn by label."""

    def __init__(self, rows: Mapping[str, list[ProbeOutcome]], qids: Sequence[str], labels: Sequence[str]):
        index = {label: i for i, label in enumerate(labels)}
        k, n = len(qids), len(labels)
        self.top1 = np.zeros(k)
        self.reach = np.full(k, np.nan)
        self.tp = np.zeros((k, n))
        self.fp = np.zeros((k, n))
        self.fn = np.zeros((k, n))
        self.pred_share = np.zeros((k, n))
        self.mode: list[str] = []
        self.attempts: list[int] = []
        for i, qid in enumerate(qids):
            scored = rows[qid]
            m = len(scored)
            self.attempts.append(m)
            truth = scored[0].truth
            t = index[truth]
            counts = Counter(str(o.predicted) for o in scored)
            self.mode.append(min(counts, key=lambda p: (-counts[p], p)))
            for label, c in counts.items():
                self.pred_share[i, index[label]] = c / m
            hit = counts.get(truth, 0) / m
            self.top1[i] = hit
            self.tp[i, t] = hit
            self.fn[i, t] = 1.0 - hit
            self.fp[i] = self.pred_share[i]
            self.fp[i, t] = 0.0
            if truth != NO_SKILL:
                self.reach[i] = sum(1 for o in scored if truth in o.scored_inv) / m


def f1_macro(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """Macro F1 over classes with support, on the last axis (leading axes: resamples)."""
    support = tp + fn
    denom = 2 * tp + fp + fn
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    has = support > 0
    count = has.sum(axis=-1)
    total = np.where(has, f1, 0.0).sum(axis=-1)
    return np.divide(total, count, out=np.full_like(total, np.nan), where=count > 0)


def precision(tp: np.ndarray, pred: np.ndarray) -> np.ndarray:
    return np.divide(tp, pred, out=np.zeros_like(tp), where=pred > 0)


def quantiles(values: np.ndarray) -> Interval | None:
    good = values[~np.isnan(values)]
    if good.size == 0:
        return None
    lo, hi = np.quantile(good, [0.025, 0.975])
    return clip(float(lo), float(hi))


def bootstrap_weights(k: int, resamples: int, seed: int) -> np.ndarray:
    """``resamples × k`` multinomial counts: each row one resample of the ``k`` queries (paired: the same
    rows weigh both arms)."""
    if k == 0:
        return np.zeros((0, 0))
    rng = np.random.default_rng(seed)
    return rng.multinomial(k, np.full(k, 1.0 / k), size=resamples).astype(float)
