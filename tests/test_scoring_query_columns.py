"""Differential tests of the columnar query side of scoring (``_query_fields`` / ``_query_columns``)
against a plain per-query reference, and of the whole score against the order of the query set and
against a probe table read for its query set (query ids coded by their place in it)."""

from __future__ import annotations

import gc
import io
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillreach.errors import InputError
from skillreach.models import NO_SKILL, Checks, ProbeRecord, Query, QueryKind, QuerySet
from skillreach.scoring import ProbeTable, prepare_queries, score
from skillreach.scoring import _queries as query_side
from skillreach.scoring._queries import _query_columns, _query_fields

SKILLS = ["alpha", "beta", "gamma", "delta", "eps"]
IN_SCOPE = [k for k in QueryKind if k is not QueryKind.out_of_scope]


def _query(rng: random.Random, qid: str) -> Query:
    kind = rng.choice(list(QueryKind))
    expected = None if kind is QueryKind.out_of_scope else rng.choice(SKILLS)
    others = [s for s in [*SKILLS, "outside-1", "outside-2"] if s != expected]
    acceptable = tuple(rng.sample(others, rng.choice([0, 0, 0, 1, 2, 3])))
    checks = Checks(rubric="is it right?") if rng.random() < 0.2 else None
    return Query(id=qid, text=f"request {qid}", expected_skill=expected, acceptable_skills=acceptable,
                 kind=kind, checks=checks)  # fmt: skip


def _queries(seed: int, n: int) -> tuple[Query, ...]:
    rng = random.Random(seed)
    ids = [f"q{rng.randrange(10**6):06d}-{i}" for i in range(n)]
    rng.shuffle(ids)
    return tuple(_query(rng, qid) for qid in ids)


def _reference(queries: tuple[Query, ...], ext: dict[str, int]) -> dict[str, object]:
    """The query columns, one query at a time (what the columnar passes must equal)."""
    items = sorted(queries, key=lambda x: x.id)
    width = max((len(x.acceptable_skills) for x in items), default=0)
    acc = np.full((len(items), width), -1, dtype=np.int64)
    for i, x in enumerate(items):
        for j, a in enumerate(x.acceptable_skills):
            acc[i, j] = ext.setdefault(a, len(ext))
    kinds = list(QueryKind)
    return {
        "items": items,
        "ids": [x.id for x in items],
        "truth": [ext[x.truth] for x in items],
        "in_scope": [x.expected_skill is not None for x in items],
        "acceptable": acc,
        "checked": [x.checks is not None for x in items],
        "kind": [kinds.index(x.kind) for x in items],
        "info": [(x.id, x.kind.value, x.truth, x.acceptable_skills) for x in items],
    }


def _check(queries: tuple[Query, ...]) -> None:
    labels = [*SKILLS, NO_SKILL]
    ext_new = {s: i for i, s in enumerate(labels)}
    ext_ref = dict(ext_new)
    got = _query_columns(_query_fields(QuerySet(queries=queries)), ext_new)
    want = _reference(queries, ext_ref)
    assert ext_new == ext_ref  # acceptable skills outside the labels are coded in the same order
    assert got.items == want["items"]
    assert list(got.ids) == want["ids"]
    assert got.truth.tolist() == want["truth"]
    assert got.in_scope.tolist() == want["in_scope"]
    assert np.array_equal(got.acceptable, _array(want["acceptable"]))
    assert got.checked.tolist() == want["checked"]
    assert got.kind.tolist() == want["kind"]
    assert [tuple(i) for i in got.info] == want["info"]
    assert len(got) == len(queries)


def _array(x: object) -> np.ndarray:
    assert isinstance(x, np.ndarray)
    return x


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 40))
def test_query_columns_equal_the_per_query_reference(seed: int, n: int) -> None:
    _check(_queries(seed, n))


@pytest.mark.parametrize("seed", range(3))
def test_query_columns_equal_the_reference_on_a_large_shuffled_set(seed: int) -> None:
    queries = _queries(seed, 5000)
    _check(queries)
    _check(tuple(sorted(queries, key=lambda x: x.id)))  # the already-sorted path


def test_a_repeated_id_is_refused_whatever_the_order() -> None:
    rng = random.Random(1)
    queries = [_query(rng, f"q{i}") for i in range(50)]
    queries.append(_query(rng, "q7"))
    rng.shuffle(queries)
    with pytest.raises(InputError, match="query id 'q7' appears twice"):
        _query_columns(_query_fields(QuerySet.model_construct(queries=tuple(queries))), {NO_SKILL: 0})


def _probes(queries: tuple[Query, ...], seed: int) -> list[ProbeRecord]:
    rng = random.Random(seed)
    out = []
    for a in (1, 2, 3):
        order = list(queries)
        rng.shuffle(order)  # probes finish in any order
        for x in order:
            invoked = tuple(rng.sample([*SKILLS, "outside-1"], rng.choice([0, 1, 1, 2, 3])))
            out.append(ProbeRecord(query_id=x.id, attempt=a, invoked=invoked,
                                   error="boom" if rng.random() < 0.05 else None))  # fmt: skip
    return out


@pytest.mark.parametrize("seed", range(4))
def test_score_is_the_same_whatever_the_query_order_and_vocabulary_path(seed: int) -> None:
    queries = tuple(x.model_copy(update={"checks": None}) for x in _queries(seed, 300))
    probes = _probes(queries, seed)
    table = ProbeTable.from_records(probes)
    assert table.query_codes is not None
    shuffled = score(QuerySet(queries=queries), table)
    ordered = score(QuerySet(queries=tuple(sorted(queries, key=lambda x: x.id))), table)
    table.query_codes = None  # the inverse built at scoring time
    rebuilt = score(QuerySet(queries=queries), table)
    a = shuffled.model_dump(mode="json")
    assert a == ordered.model_dump(mode="json") == rebuilt.model_dump(mode="json")
    # and each probe's truth is its own query's, whatever the order
    by_id = {x.id: x for x in queries}
    for o in shuffled.outcomes:
        assert o.truth == by_id[o.query_id].truth


def test_a_probe_of_a_query_outside_the_set_is_still_refused() -> None:
    queries = _queries(5, 20)
    probes = [*_probes(queries, 5), ProbeRecord(query_id="nope", attempt=1)]
    with pytest.raises(InputError, match="probe of query 'nope', which is not in the query set"):
        score(QuerySet(queries=queries), probes)


def _lines(probes: list[ProbeRecord]) -> bytes:
    return b"".join(p.to_json_line().encode() + b"\n" for p in probes)


@pytest.mark.parametrize("seed", range(3))
def test_a_table_read_for_its_query_set_scores_as_one_read_without_it(seed: int) -> None:
    queries = tuple(x.model_copy(update={"checks": None}) for x in _queries(seed, 300))
    qs = QuerySet(queries=queries)
    data = _lines(_probes(queries, seed))
    aligned = ProbeTable.from_lines(io.BytesIO(data), queries=qs)
    plain = ProbeTable.from_lines(io.BytesIO(data))
    assert aligned.query_ids is not None
    assert plain.query_ids is None
    assert list(aligned.query_vocab[: len(queries)]) == sorted(x.id for x in queries)
    want = score(qs, plain).model_dump(mode="json")
    assert score(qs, aligned).model_dump(mode="json") == want
    # another query set object with the same queries (not the one it was read for) maps the vocabulary
    assert score(QuerySet(queries=queries), aligned).model_dump(mode="json") == want


def test_a_table_read_for_its_query_set_still_refuses_a_query_outside_it_by_line() -> None:
    queries = _queries(6, 20)
    qs = QuerySet(queries=queries)
    probes = [*_probes(queries, 6), ProbeRecord(query_id="nope", attempt=1)]
    table = ProbeTable.from_lines(io.BytesIO(_lines(probes)), source="p.jsonl", queries=qs)
    with pytest.raises(InputError, match=rf"p.jsonl:{len(probes)}: probe of query 'nope', which is not"):
        score(qs, table)


def test_the_query_side_is_built_once_per_query_set_and_let_go_with_it() -> None:
    qs = QuerySet(queries=_queries(7, 50))
    prepare_queries(qs)
    first = _query_fields(qs)
    assert _query_fields(qs) is first
    assert _query_fields(QuerySet(queries=qs.queries)) is not first  # another object: its own
    key = id(qs)
    del qs, first
    gc.collect()
    assert key not in query_side._PREPARED
