"""The query side of scoring: the query set by columns, sorted by id, built once per query set
(:func:`prepare_queries`, kept while the set lives) and coded into a study's labels at every score
(:func:`_query_columns`)."""

from __future__ import annotations

import itertools
import operator
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple, cast

import numpy as np

from skillreach._gc import cyclic_gc_paused
from skillreach.errors import InputError
from skillreach.models import NO_SKILL, Query, QueryKind, QuerySet
from skillreach.scoring._csr import _offsets
from skillreach.scoring.artifact import QueryInfo

__all__ = ["prepare_queries"]


_KINDS = tuple(k.value for k in QueryKind)
_KIND_CODE = {k: i for i, k in enumerate(_KINDS)}
_KIND_CODE_NAME = {k: k for k in _KINDS}
"""A query's kind (a ``QueryKind``, a ``str``) → its value as a plain string."""


@dataclass
class _Queries:
    """The query set by columns, sorted by id (so that samples and outcomes come in id order)."""

    items: list[Query]
    ids: Sequence[str]
    truth: np.ndarray
    """Query → label code of its truth (``NO_SKILL`` for out of scope)."""
    in_scope: np.ndarray
    acceptable: np.ndarray
    """(queries × widest acceptable list) codes, -1 padded."""
    checked: np.ndarray
    """Query → carries compliance or quality checks."""
    any_checked: bool
    info: list[QueryInfo]
    kind: np.ndarray
    """Query → index into :data:`_KINDS` (int8)."""

    def __len__(self) -> int:
        return len(self.items)


class _QueryFields(NamedTuple):
    """The query set by columns, queries sorted by id, independent of the labels: built once per query
    set (:func:`prepare_queries`) and coded into a study's labels by :func:`_query_columns` per score."""

    items: list[Query]
    ids: tuple[str, ...]
    dup: str | None
    """An id that appears twice (refused when the set is scored), else ``None``."""
    names: list[str]
    """The skills the queries name: acceptable ones in order of first appearance (queries in id order),
    then the expected ones among no acceptable list, in name order."""
    expected: np.ndarray
    """Query → index into ``names`` of its expected skill, -1 for none (out of scope)."""
    acceptable: np.ndarray
    """(queries × widest acceptable list) indices into ``names``, -1 padded."""
    kind: np.ndarray
    checked: np.ndarray
    any_checked: bool
    info: list[QueryInfo]
    expected_names: frozenset[str]
    acceptable_names: frozenset[str]


_QUERY_FIELDS = operator.itemgetter("id", "expected_skill", "acceptable_skills", "kind", "checks")
_FIELDS_OF = attrgetter("__dict__")
_PREPARED: dict[int, tuple[weakref.ref[QuerySet], _QueryFields]] = {}
_PREPARED_LOCK = threading.Lock()


def prepare_queries(query_set: QuerySet) -> None:
    """Build the query side of scoring once, where the query set is loaded (100,000 queries: ~0.3 s):
    every later :func:`score` of this query set (a frozen model) reuses it while the set lives. A
    query set never prepared is prepared by its first score."""
    _query_fields(query_set)


def _query_fields(query_set: QuerySet) -> _QueryFields:
    """The label-independent query columns of ``query_set`` (kept, keyed by the object, while it lives)."""
    key = id(query_set)
    kept = _PREPARED.get(key)
    if kept is not None and kept[0]() is query_set:
        return kept[1]
    with cyclic_gc_paused():  # 100,000s of tuples: no collector passes over the models meanwhile
        qf = _build_query_fields(query_set)

    def forget(_: object, key: int = key) -> None:
        with _PREPARED_LOCK:
            _PREPARED.pop(key, None)

    with _PREPARED_LOCK:
        _PREPARED[key] = (weakref.ref(query_set, forget), qf)
    return qf


def _build_query_fields(query_set: QuerySet) -> _QueryFields:
    """One C-level pass over the query models (an ``itemgetter`` over each model's field dict, transposed
    by ``zip``: a fifth faster than ``attrgetter`` on the models); the columns are reordered by id only
    when the set is not already in strictly ascending id order."""
    queries = query_set.queries
    n = len(queries)
    if not queries:
        none = np.zeros(0, dtype=np.int64)
        return _QueryFields([], (), None, [], none, np.zeros((0, 0), dtype=np.int64), none.astype(np.int8),
                            np.zeros(0, dtype=bool), False, [], frozenset(), frozenset())  # fmt: skip
    ids, expected, acceptable, kinds, checks = zip(*map(_QUERY_FIELDS, map(_FIELDS_OF, queries)), strict=True)
    items = list(queries)
    dup = None
    if any(map(operator.ge, ids, ids[1:])):
        # n ≥ 2 here, so ``itemgetter`` of the order gives tuples
        pick = operator.itemgetter(*sorted(range(n), key=ids.__getitem__))
        items, ids, expected, acceptable, kinds, checks = (
            list(pick(queries)), pick(ids), pick(expected), pick(acceptable), pick(kinds), pick(checks)
        )  # fmt: skip
        if any(map(operator.eq, ids, ids[1:])):  # sorted: a repeated id sits by itself
            dup = next(a for a, b in itertools.pairwise(ids) if a == b)
    # the names: acceptable skills in order of first appearance, then the other expected ones
    flat = list(itertools.chain.from_iterable(acceptable))
    code: dict[str | None, int] = dict.fromkeys(flat, 0)
    acceptable_names = frozenset(flat)
    expected_names = frozenset(expected) - {None}
    for name in sorted(cast(frozenset[str], expected_names) - acceptable_names):
        code[name] = 0
    names = cast(list[str], list(code))
    code = {name: i for i, name in enumerate(names)}
    code[None] = -1
    lengths = np.fromiter(map(len, acceptable), dtype=np.int64, count=n)
    width = int(lengths.max())
    acc = np.full((n, width), -1, dtype=np.int64)
    if width:
        off = _offsets(lengths)
        rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
        acc[rows, np.arange(len(flat), dtype=np.int64) - off[rows]] = np.fromiter(
            map(code.__getitem__, flat), dtype=np.int64, count=len(flat)
        )
    no_skill: dict[str | None, str] = {None: NO_SKILL}
    truths = cast(list[str], list(map(no_skill.get, expected, expected)))  # None → NO_SKILL, else itself
    kind_names = list(map(_KIND_CODE_NAME.__getitem__, kinds))
    checked = np.fromiter(map(operator.is_not, checks, itertools.repeat(None)), dtype=bool, count=n)
    return _QueryFields(
        items=items,
        ids=ids,
        dup=dup,
        names=names,
        expected=np.fromiter(map(code.__getitem__, expected), dtype=np.int64, count=n),
        acceptable=acc,
        kind=np.fromiter(map(_KIND_CODE.__getitem__, kinds), dtype=np.int8, count=n),
        checked=checked,
        any_checked=bool(checked.any()),
        info=list(zip(ids, kind_names, truths, acceptable, strict=True)),
        expected_names=cast(frozenset[str], expected_names),
        acceptable_names=acceptable_names,
    )


def _query_columns(qf: _QueryFields, ext: dict[str, int]) -> _Queries:
    """The query columns coded into the labels ``ext``, which gains any acceptable skill outside them
    (in order of first appearance, queries in id order)."""
    if qf.dup is not None:
        raise InputError(f"query set: query id {qf.dup!r} appears twice; ids must be unique")
    no = ext[NO_SKILL]
    lut = np.array([ext.setdefault(name, len(ext)) for name in qf.names] + [-1], dtype=np.int64)
    acc = lut[qf.acceptable]  # -1 (padding) picks the last entry: -1
    lut[-1] = no
    truth = lut[qf.expected]  # -1 (out of scope) picks NO_SKILL
    return _Queries(
        items=qf.items,
        ids=qf.ids,
        truth=truth,
        in_scope=truth != no,
        acceptable=acc,
        checked=qf.checked,
        any_checked=qf.any_checked,
        info=qf.info,
        kind=qf.kind,
    )
