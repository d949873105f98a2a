"""The probe side of scoring: the latest record of each (query, attempt), in that order, its invocations
gathered and coded into the labels, and every probe's prediction, truth and reach
(:func:`_probe_columns`)."""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from skillreach.errors import InputError
from skillreach.scoring._csr import _csr_gather, _firsts, _offsets
from skillreach.scoring._queries import _Queries
from skillreach.scoring.table import ProbeTable


class _Latest(NamedTuple):
    """The rows that count, the last of each (query, attempt), in (query, attempt) order."""

    sel: np.ndarray
    """Position → row."""
    q: np.ndarray
    attempt: np.ndarray
    key: np.ndarray
    """Position → its key, ascending (a row's key: ``row_key``)."""
    row_key: np.ndarray
    """Row → ``query << bits | attempt``."""


def _latest(q: np.ndarray, attempt: np.ndarray) -> _Latest:
    """The last row of every (query, attempt) pair, in (query, attempt) order. The pairs are keyed
    ``query << bits | attempt``: with no more than 8 slots a row, a table indexed by key finds the last
    row of each in two passes (the keys that occur, ascending, are its filled slots), else a sort."""
    n = len(q)
    if n == 0:
        none = np.zeros(0, dtype=np.int64)
        return _Latest(none, none, none, none, none)
    bits = int(attempt.max()).bit_length()
    if int(q.max()).bit_length() + bits > 62:  # huge attempt numbers: keyed by their rank instead
        values, rank = np.unique(attempt, return_inverse=True)
        found = _latest(q, rank.astype(np.int64))
        return found._replace(attempt=values[found.attempt])
    row_key = q << bits
    row_key |= attempt
    index: type[np.signedinteger[Any]] = np.int32 if n < 1 << 31 else np.int64  # half the traffic
    size = (int(q.max()) + 1) << bits
    if size <= max(8 * n, 1 << 20):  # a direct table: O(n + size), no sort
        rows = np.arange(n, dtype=index)
        if n > 1 and bool(np.all(row_key[1:] > row_key[:-1])):
            sel, key = rows, row_key  # already in order, no repeat
        else:
            last = np.full(size, -1, dtype=index)
            last[row_key] = rows  # well defined when no key repeats: then every row fills a slot of its own
            key = np.flatnonzero(last >= 0)
            if len(key) < n:  # a key repeats (which row won its slot is not defined): the latest, exactly
                last.fill(-1)
                np.maximum.at(last, row_key, rows)
            sel = last[key]
    else:
        order = np.argsort(row_key, kind="stable")
        ks = row_key[order]
        keep = np.ones(n, dtype=bool)
        keep[:-1] = ks[1:] != ks[:-1]
        sel, key = order[keep], ks[keep]
    return _Latest(sel, key >> bits, key & ((1 << bits) - 1), key, row_key)


@dataclass
class _Probes:
    """The probes that count (superseded records dropped), in (query id, attempt) order."""

    sel: np.ndarray
    """Position → row of the table."""
    q: np.ndarray
    attempt: np.ndarray
    err: np.ndarray
    errors: dict[int, str]
    raw: np.ndarray
    raw_off: np.ndarray
    kept: np.ndarray
    """``scored_inv`` of every scored probe, CSR (errored probes have none)."""
    kept_off: np.ndarray
    kept_len: np.ndarray
    predicted: np.ndarray
    """Label code of ``predicted``; -1 for an errored probe."""
    raw_predicted: np.ndarray
    truth: np.ndarray
    in_scope: np.ndarray
    reach: np.ndarray
    """Expected skill ∈ scored_inv."""
    correct: np.ndarray
    """predicted == truth (never for an errored probe)."""
    ranks: np.ndarray
    """How many probes reached the expected skill at each rank (its 1-based position in scored_inv)."""

    @functools.cached_property
    def scored(self) -> np.ndarray:
        return ~self.err

    def only_scored(self, column: np.ndarray) -> np.ndarray:
        """``column`` restricted to scored probes (the column itself when none errored)."""
        return column[self.scored] if self.errors else column

    @functools.cached_property
    def t(self) -> np.ndarray:
        """Truth of every scored probe."""
        return self.only_scored(self.truth)

    @functools.cached_property
    def p(self) -> np.ndarray:
        """Prediction of every scored probe."""
        return self.only_scored(self.predicted)

    @functools.cached_property
    def sq(self) -> np.ndarray:
        """Query of every scored probe."""
        return self.only_scored(self.q)


def _probe_columns(table: ProbeTable, qs: _Queries, ext: dict[str, int], n_labels: int) -> _Probes:
    if table.query_ids is qs.ids:  # read for this query set: its codes are the set's (module doc)
        row_q = table.q
        outside = len(table.query_vocab) > len(qs)
    else:
        # query → its code in the table's vocabulary (-1: never probed), inverted into code → query
        vocab = table.query_codes
        if vocab is None:
            vocab = dict(zip(table.query_vocab, range(len(table.query_vocab)), strict=True))
        codes = np.fromiter(map(vocab.get, qs.ids, itertools.repeat(-1)), dtype=np.int64, count=len(qs))
        probed = codes >= 0
        vq = np.full(len(table.query_vocab), -1, dtype=np.int64)
        vq[codes[probed]] = np.flatnonzero(probed)
        row_q = vq[table.q]
        outside = bool((vq < 0).any())
    if outside:
        row = int(np.flatnonzero((row_q < 0) | (row_q >= len(qs)))[0])  # the first such line of the log
        bad = int(table.q[row])
        raise InputError(
            f"{table.where(row)}: probe of query {table.query_vocab[bad]!r}, which is not in the query "
            "set; score with the query set the probes were run with"
        )
    sel, q, attempt, key, row_key = _latest(row_q, table.attempt)
    m = len(sel)
    err = np.zeros(m, dtype=bool)
    errors: dict[int, str] = {}
    if table.errors:
        # an errored row's place: its key among the sorted keys, where that row won (not superseded)
        rows = np.fromiter(table.errors, dtype=np.int64, count=len(table.errors))
        needles = row_key[rows]
        order = np.argsort(needles)  # sorted needles: each search starts where the last one ended
        at = np.empty_like(order)
        at[order] = np.searchsorted(key, needles[order])
        won = sel[np.minimum(at, m - 1)] == rows
        err[at[won]] = True
        pairs = zip(at.tolist(), table.errors.values(), strict=True)
        errors = dict(pairs if won.all() else itertools.compress(pairs, won.tolist()))

    lut = np.array([ext[s] for s in table.skill_vocab], dtype=np.int64)
    raw_flat, raw_off, raw_len, rowof = _csr_gather(table.inv_flat, table.inv_off, table.inv_len, sel)
    raw = lut[raw_flat] if len(raw_flat) else raw_flat
    drop = np.zeros(0, dtype=np.int64)
    if len(raw) and (errors or qs.acceptable.shape[1]):
        # only the invocations of errored probes and of probes whose query accepts a skill can be dropped
        special = err | (qs.acceptable[:, 0] >= 0)[q] if qs.acceptable.shape[1] else err
        cand = np.flatnonzero(special[rowof])
        cand_row = rowof[cand]
        dropped = err[cand_row]
        if qs.acceptable.shape[1]:
            acc_of = qs.acceptable[q[cand_row]]
            named = raw[cand]
            for j in range(qs.acceptable.shape[1]):
                dropped |= named == acc_of[:, j]
        drop = cand[dropped]
    if len(drop):
        keep = np.ones(len(raw), dtype=bool)
        keep[drop] = False
        kept, kept_row = raw[keep], rowof[keep]
        kept_len = raw_len.copy()
        np.subtract.at(kept_len, rowof[drop], 1)
        kept_off = _offsets(kept_len)
    else:
        kept, kept_row, kept_len, kept_off = raw, rowof, raw_len, raw_off
    no = n_labels - 1
    raw_predicted = _firsts(raw, raw_off, raw_len, no)
    predicted = raw_predicted.copy()
    if len(drop):  # only a probe that lost an invocation can predict other than its raw prediction
        fix = rowof[drop]
        fix = fix[np.r_[True, fix[1:] != fix[:-1]]]  # ascending, each once
        if len(kept):
            first = kept[np.minimum(kept_off[fix], len(kept) - 1)]
            predicted[fix] = np.where(kept_len[fix] > 0, first, no)
        else:
            predicted[fix] = no
    predicted[err] = -1
    truth = qs.truth[q]
    in_scope = qs.in_scope[q]
    correct = predicted == truth

    # the expected skill's first position in scored_inv: 1 exactly when an in-scope probe is correct (an
    # out-of-scope probe's truth, NO_SKILL, is never invoked); later ones are found among the invocations
    # after their probe's first (positions rise within a probe)
    reach = correct & in_scope
    at_first = int(np.count_nonzero(reach))
    later = np.flatnonzero(kept_row[1:] == kept_row[:-1]) + 1
    later = later[kept[later] == truth[kept_row[later]]]
    later_row = kept_row[later]
    first_hit = ~reach[later_row]  # not reached at position 1
    first_hit[1:] &= later_row[1:] != later_row[:-1]
    later, later_row = later[first_hit], later_row[first_hit]
    reach[later_row] = True
    ranks = np.bincount(later - kept_off[later_row] + 1, minlength=2)
    ranks[1] = at_first
    return _Probes(
        sel=sel,
        q=q,
        attempt=attempt,
        err=err,
        errors=errors,
        raw=raw,
        raw_off=raw_off,
        kept=kept,
        kept_off=kept_off,
        kept_len=kept_len,
        predicted=predicted,
        raw_predicted=raw_predicted,
        truth=truth,
        in_scope=in_scope,
        reach=reach,
        correct=correct,
        ranks=ranks,
    )
