"""The counts of scoring: the tally of scored probes by (kind, in scope, reached, abstained, correct), the
confusion and the trajectory counts (:func:`_counts`), and from them every run-level rate with its
denominator and Wilson interval, the per-class counts and macro averages, and the figures by query
kind."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from skillreach.models import QueryKind
from skillreach.scoring._probes import _Probes
from skillreach.scoring._queries import _KINDS, _Queries
from skillreach.scoring.artifact import PROPORTION_METRICS
from skillreach.scoring.intervals import wilson

_MAX_DENSE_CONFUSION = 1 << 22


def _rate(hits: float, n: int) -> float | None:
    return None if n == 0 else float(hits) / n


def _ci(hits: int, n: int) -> tuple[float, float] | None:
    """Wilson interval; at 0 of n and n of n its end is exactly 0 (1), not 5.6e-17 off by rounding."""
    ci = wilson(hits, n)
    if ci is None:
        return None
    lo, hi = ci
    return (0.0 if hits == 0 else lo, 1.0 if hits == n else hi)


class _Tally:
    """Counts of scored probes by (query kind, in scope, reached, abstained, correct): every run-level and
    per-kind count is a sum of its cells (``h``, axes in that order)."""

    def __init__(self, h: np.ndarray) -> None:
        self.h = h

    @classmethod
    def of_probes(cls, pr: _Probes, qs: _Queries, no: int) -> _Tally:
        """From one ``bincount`` over a code combining the five (the scored ones)."""
        code = qs.kind[pr.q] << 5  # int8: 4 kinds × 32
        code |= pr.in_scope.view(np.int8) << 4
        code |= pr.reach.view(np.int8) << 3  # reach, abstain and correct imply scored
        code |= (pr.predicted == no).view(np.int8) << 2  # an errored probe predicts -1
        code |= pr.correct.view(np.int8) << 1
        code |= pr.scored.view(np.int8)
        h = np.bincount(code.view(np.uint8), minlength=len(_KINDS) * 32)
        return cls(h.reshape(len(_KINDS), 2, 2, 2, 2, 2)[..., 1])  # the last axis: scored

    @classmethod
    def of_cells(cls, scored: np.ndarray, no: int) -> _Tally:
        """From the counts of scored probes by (kind, r, truth, predicted) (:func:`_counts`), r being
        "reached" for an in-scope probe: every other bit is a function of (truth, predicted)."""
        n_kinds, _, n_labels, _ = scored.shape
        t = np.arange(n_labels)[:, None]
        p = np.arange(n_labels)[None, :]
        in_scope = np.broadcast_to(t != no, (n_labels, n_labels)).astype(np.int64)
        rest = ((p == no) << 1) | (t == p)  # abstained, correct
        # the bits (in scope, reached, abstained, correct) of every (r, truth, predicted) cell
        bits = np.stack([in_scope << 3 | rest, in_scope << 3 | in_scope << 2 | rest])
        h = np.stack([np.bincount(bits.ravel(), scored[k].ravel(), minlength=16) for k in range(n_kinds)])
        return cls(h.astype(np.int64).reshape(n_kinds, 2, 2, 2, 2))

    def count(self, *, kind: int | None = None, **bits: int) -> int:
        """Scored probes with the given bits (in_scope, reach, abstain, correct) set (1) or clear (0)."""
        index: list[Any] = [slice(None) if kind is None else kind]
        index += [bits.get(name, slice(None)) for name in ("in_scope", "reach", "abstain", "correct")]
        return int(self.h[tuple(index)].sum())


_MAX_DENSE_COUNTS = 1 << 22
"""Up to this many (kind, r, truth, predicted) cells (≈ 510 labels), every count comes from one
``bincount`` of the probes (:func:`_counts`)."""


def _counts(pr: _Probes, qs: _Queries, n_labels: int) -> tuple[_Tally, _Confusion, np.ndarray]:
    """The tally, the confusion and, per truth label, the probes that reached it along their trajectory
    (``trajectory_recall``'s numerator: in scope, the expected skill in scored_inv; out of scope, nothing
    kept).

    With few enough labels, one ``bincount`` over every probe of the code (kind, r, truth, predicted + 1)
    — r being that trajectory bit, which for an in-scope probe is "reached" (an out-of-scope one never
    reaches) — gives all three: every other bit is a function of (truth, predicted), and an errored
    probe (predicted -1) falls in a column of its own. Else each is counted apart."""
    no = n_labels - 1
    n_kinds = len(_KINDS)
    traj_ok = np.where(pr.in_scope, pr.reach, pr.kept_len == 0)
    size = n_kinds * 2 * n_labels * (n_labels + 1)
    if size > _MAX_DENSE_COUNTS or n_labels * n_labels > _MAX_DENSE_CONFUSION:
        tally = _Tally.of_probes(pr, qs, no)
        conf = _confusion(pr.t, pr.p, n_labels)
        return tally, conf, np.bincount(pr.t[pr.only_scored(traj_ok)], minlength=n_labels)
    # each query's part of the code (kind, truth) once, then per probe: + r, + predicted + 1
    base = (qs.kind.astype(np.int64) * (2 * n_labels) + qs.truth) * (n_labels + 1) + 1
    code = base[pr.q]
    code += traj_ok * (n_labels * (n_labels + 1))  # (a masked add is slower)
    code += pr.predicted
    h = np.bincount(code, minlength=size).reshape(n_kinds, 2, n_labels, n_labels + 1)
    scored = h[..., 1:]  # column 0: errored probes
    dense = scored.sum(axis=(0, 1))
    cells = np.flatnonzero(dense)
    conf = _Confusion(cells, dense.ravel()[cells], dense.ravel())
    return _Tally.of_cells(scored, no), conf, scored[:, 1].sum(axis=(0, 2))


def _run_level(
    pr: _Probes, tally: _Tally
) -> tuple[dict[str, float | None], dict[str, int], dict[str, tuple[float, float] | None]]:
    """Every run-level rate of spec/metrics.md with its denominator and Wilson interval."""
    n_scored, n_in = tally.count(), tally.count(in_scope=1)
    n_oos = n_scored - n_in
    # consistency: probes are in query order, so each query's scored attempts are contiguous
    n_queries = n_consistent = 0
    if n_scored:
        # a query is inconsistent when two of its scored attempts, side by side, predict apart
        sq, rp = pr.sq, pr.only_scored(pr.raw_predicted)
        same = sq[1:] == sq[:-1]
        n_queries = len(sq) - int(np.count_nonzero(same))
        apart = sq[1:][same & (rp[1:] != rp[:-1])]
        n_consistent = n_queries - (int(np.count_nonzero(apart[1:] != apart[:-1])) + 1 if len(apart) else 0)
    correct = tally.count(correct=1)
    hits = {
        "top1_accuracy": (correct, n_scored),
        "entrypoint_accuracy": (correct, n_scored),
        "trajectory_reachability": (tally.count(reach=1, in_scope=1), n_in),
        "abstention_rate": (tally.count(abstain=1), n_scored),
        "false_abstention_rate": (tally.count(abstain=1, in_scope=1), n_in),
        "oos_detection": (tally.count(abstain=1, in_scope=0), n_oos),
        "consistency": (n_consistent, n_queries),
    }
    assert tuple(hits) == PROPORTION_METRICS
    metrics: dict[str, float | None] = {k: _rate(h, n) for k, (h, n) in hits.items()}
    # the sum of 1/rank over the probes that reached (only in-scope ones can: an out-of-scope probe's
    # truth, NO_SKILL, is never invoked), exactly rounded, so the same in any probe order
    recip = math.fsum(k / r for r, k in enumerate(pr.ranks.tolist()) if k)
    metrics["step_efficiency"] = _rate(recip, n_in)
    isc_len = pr.kept_len[pr.in_scope]  # errored probes keep nothing: length 0
    metrics["redundancy"] = _rate(float(int(isc_len.sum()) - int(np.count_nonzero(isc_len))), n_in)
    denominators = {k: n for k, (_, n) in hits.items()}
    denominators["step_efficiency"] = denominators["redundancy"] = n_in
    intervals = {k: _ci(h, n) for k, (h, n) in hits.items()}
    return metrics, denominators, intervals


def _per_class(
    labels: Sequence[str], confusion: _Confusion, trajectory: np.ndarray
) -> tuple[list[dict[str, Any]], dict[str, float | None]]:
    """Turn-1 conservation counts and rates for every label, and the macro averages."""
    n_labels = len(labels)
    support, n_pred, tp = (x.tolist() for x in confusion.margins(n_labels))
    traj = trajectory.tolist()
    classes: list[dict[str, Any]] = []
    for i, label in enumerate(labels):
        s_, pr_, tp_ = support[i], n_pred[i], tp[i]
        precision = tp_ / pr_ if pr_ else 0.0
        recall = tp_ / s_ if s_ else None
        if recall is None:
            f1 = None
        else:
            f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
        classes.append(
            {
                "label": label,
                "support": s_,
                "predicted": pr_,
                "tp": tp_,
                "fp": pr_ - tp_,
                "fn": s_ - tp_,
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "trajectory_recall": traj[i] / s_ if s_ else None,
                "recall_ci": _ci(tp_, s_),
                "precision_ci": _ci(tp_, pr_),
            }
        )
    active = [c["precision"] for c in classes if c["support"] > 0 or c["predicted"] > 0]
    supported = [c for c in classes if c["support"] > 0]
    macro = {
        "macro_precision": math.fsum(active) / len(active) if active else None,
        "macro_recall": math.fsum(c["recall"] for c in supported) / len(supported) if supported else None,
        "macro_f1": math.fsum(c["f1"] for c in supported) / len(supported) if supported else None,
    }
    return classes, macro


def _by_kind(qs: _Queries, tally: _Tally) -> list[dict[str, Any]]:
    """Top-1 accuracy, abstention and reachability per query kind present in the set."""
    queries = np.bincount(qs.kind, minlength=len(_KINDS)).tolist()
    out = []
    for i, name in enumerate(_KINDS):
        if not queries[i]:
            continue
        n_scored = tally.count(kind=i)
        correct = tally.count(kind=i, correct=1)
        out.append(
            {
                "kind": name,
                "queries": queries[i],
                "scored": n_scored,
                "top1_accuracy": _rate(correct, n_scored),
                "top1_ci": _ci(correct, n_scored),
                "abstention_rate": _rate(tally.count(kind=i, abstain=1), n_scored),
                "trajectory_reachability": None
                if name == QueryKind.out_of_scope.value
                else _rate(tally.count(kind=i, reach=1), n_scored),
            }
        )
    return out


class _Confusion(NamedTuple):
    cells: np.ndarray
    """The cells with a count, ascending; cell = truth · L + predicted."""
    counts: np.ndarray
    dense: np.ndarray | None
    """Every cell's count (L × L), when that is small enough to hold."""

    def margins(self, n_labels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(support, predicted, tp) of every label: row sums, column sums and the diagonal."""
        if self.dense is not None:
            m = self.dense.reshape(n_labels, n_labels)
            return m.sum(axis=1), m.sum(axis=0), np.diagonal(m)
        t, p = np.divmod(self.cells, n_labels)
        return (np.bincount(t, self.counts, n_labels).astype(np.int64),
                np.bincount(p, self.counts, n_labels).astype(np.int64),
                np.bincount(t[t == p], self.counts[t == p], n_labels).astype(np.int64))  # fmt: skip


def _confusion(t: np.ndarray, p: np.ndarray, n_labels: int) -> _Confusion:
    """The confusion of the scored probes' truth ``t`` and prediction ``p``."""
    cell = t * n_labels + p
    if n_labels * n_labels <= _MAX_DENSE_CONFUSION:
        dense = np.bincount(cell, minlength=n_labels * n_labels)
        cells = np.flatnonzero(dense)
        return _Confusion(cells, dense[cells], dense)
    cells, counts = np.unique(cell, return_counts=True)
    return _Confusion(cells, counts, None)
