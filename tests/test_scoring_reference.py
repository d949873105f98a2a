"""Scoring against a plain per-probe reference of spec/metrics.md, on logs in any order.

The columnar scorer orders probes by keys, gathers their invocations, finds ranks among the
invocations after each probe's first, and counts by ``bincount``; the reference below does the same
one probe at a time, in Python, straight from the spec. Logs are shuffled (a study run at concurrency
> 1 writes them in finishing order), carry superseded records (a resumed study's retries), errored
probes, acceptable skills, a skill outside the catalog and attempt numbers that take each of the
ways the latest record of a (query, attempt) is found (a table by key, a sort, keys by rank).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillreach.models import NO_SKILL, Catalog, ProbeRecord, Query, QueryKind, QuerySet, Skill
from skillreach.scoring import _counting, score
from skillreach.scoring.artifact import Artifact, artifact_digest

SKILLS = ("a", "b", "c", "d")
INVOKABLE = (*SKILLS, "z")  # "z" is outside the catalog: a label with a warning
ATTEMPTS = (1, 2, 3, 7, 70_000, 2**61 + 3)
"""Small ones (a table by key); 70,000 (more slots than a table may take: a sort); 2**61 + 3 (no room in
a 63-bit key: keyed by rank)."""


def _catalog() -> Catalog:
    return Catalog(id="ref", skills=tuple(Skill(name=n, description=f"does {n}") for n in SKILLS))


@st.composite
def logs(draw: st.DrawFn) -> tuple[QuerySet, list[ProbeRecord]]:
    n = draw(st.integers(1, 7))
    attempts = draw(st.lists(st.sampled_from(ATTEMPTS), min_size=1, max_size=3, unique=True))
    queries = []
    for i in range(n):
        expected = draw(st.sampled_from([None, *SKILLS]))
        others = [s for s in SKILLS if s != expected]
        acceptable = tuple(draw(st.lists(st.sampled_from(others), max_size=2, unique=True)))
        queries.append(
            Query(
                id=f"q{draw(st.integers(0, 99)):02d}-{i}",
                text=f"request {i}",
                expected_skill=expected,
                acceptable_skills=acceptable,
                kind=QueryKind.out_of_scope if expected is None else QueryKind.implicit,
            )
        )
    records = []
    for qu in queries:
        for attempt in attempts:
            for _ in range(draw(st.integers(0, 2))):  # 0: missing; 2: the first one superseded
                error = "boom" if draw(st.integers(0, 3)) == 0 else None
                invoked = tuple(draw(st.lists(st.sampled_from(INVOKABLE), max_size=4)))
                records.append(ProbeRecord(query_id=qu.id, attempt=attempt, invoked=invoked, error=error))
    return QuerySet(queries=tuple(queries)), draw(st.permutations(records))


def _reference(qs: QuerySet, records: list[ProbeRecord]) -> dict[str, Any]:
    """Every figure compared below, one probe at a time, as spec/metrics.md words it."""
    latest: dict[tuple[str, int], ProbeRecord] = {}
    for r in records:
        latest[(r.query_id, r.attempt)] = r  # a later record supersedes an earlier one
    queries = {x.id: x for x in qs.queries}
    rows = []
    for key in sorted(latest):
        r, qu = latest[key], queries[key[0]]
        scored_inv = () if r.error else tuple(s for s in r.invoked if s not in qu.acceptable_skills)
        rows.append(
            {
                "query_id": r.query_id,
                "attempt": r.attempt,
                "invoked": r.invoked,
                "scored_inv": scored_inv,
                "predicted": None if r.error else (scored_inv[0] if scored_inv else NO_SKILL),
                "raw_predicted": r.invoked[0] if r.invoked else NO_SKILL,
                "truth": qu.expected_skill or NO_SKILL,
                "error": r.error,
            }
        )
    scored = [o for o in rows if o["error"] is None]
    inside = [o for o in scored if o["truth"] != NO_SKILL]
    oos = [o for o in scored if o["truth"] == NO_SKILL]

    def rate(hits: float, n: int) -> float | None:
        return None if n == 0 else hits / n

    def rank(o: dict[str, Any]) -> float:
        inv = o["scored_inv"]
        return 1 / (inv.index(o["truth"]) + 1) if o["truth"] in inv else 0.0

    by_query: dict[str, set[str]] = {}
    for o in scored:
        by_query.setdefault(o["query_id"], set()).add(o["raw_predicted"])
    metrics = {
        "top1_accuracy": rate(sum(o["predicted"] == o["truth"] for o in scored), len(scored)),
        "trajectory_reachability": rate(sum(o["truth"] in o["scored_inv"] for o in inside), len(inside)),
        "step_efficiency": rate(math.fsum(map(rank, inside)), len(inside)),
        "redundancy": rate(sum(max(0, len(o["scored_inv"]) - 1) for o in inside), len(inside)),
        "abstention_rate": rate(sum(o["predicted"] == NO_SKILL for o in scored), len(scored)),
        "false_abstention_rate": rate(sum(o["predicted"] == NO_SKILL for o in inside), len(inside)),
        "oos_detection": rate(sum(o["predicted"] == NO_SKILL for o in oos), len(oos)),
        "consistency": rate(sum(len(v) == 1 for v in by_query.values()), len(by_query)),
    }
    confusion = Counter((o["truth"], o["predicted"]) for o in scored)
    # the catalog, every skill a query expects and every skill a record names (superseded or not)
    named = {s for r in records for s in r.invoked}
    named |= {x.expected_skill for x in qs.queries if x.expected_skill}
    labels = [*sorted(set(SKILLS) | named), NO_SKILL]
    classes = {}
    for lab in labels:
        support = sum(o["truth"] == lab for o in scored)
        traj = sum(
            o["truth"] == lab and (lab in o["scored_inv"] if lab != NO_SKILL else not o["scored_inv"])
            for o in scored
        )
        tp = confusion[(lab, lab)]
        predicted = sum(o["predicted"] == lab for o in scored)
        classes[lab] = {
            "support": support,
            "predicted": predicted,
            "tp": tp,
            "fp": predicted - tp,
            "fn": support - tp,
            "trajectory_recall": traj / support if support else None,
        }
    collisions = []
    for (t, p), k in confusion.items():
        if p not in (t, NO_SKILL):
            ids = sorted({o["query_id"] for o in scored if (o["truth"], o["predicted"]) == (t, p)})
            collisions.append((t, p, k, len(ids), ids[:3]))
    collisions.sort(key=lambda c: (-c[2], c[0], c[1]))
    attractors = []
    for lab, c in classes.items():
        if lab != NO_SKILL and c["fp"] > 0:
            pulled = sorted((k, t) for (t, p), k in confusion.items() if p == lab != t)
            pulled.sort(key=lambda x: (-x[0], x[1]))
            attractors.append((lab, c["fp"], [(t, k) for k, t in pulled[:3]]))
    attractors.sort(key=lambda a: (-a[1], a[0]))
    return {
        "rows": rows,
        "counts": (len(rows), len(scored), len(rows) - len(scored), len(records) - len(rows)),
        "metrics": metrics,
        "classes": classes,
        "confusion": sorted(confusion.items()),
        "collisions": collisions,
        "attractors": attractors,
    }


def _check(art: Artifact, ref: dict[str, Any]) -> None:
    got = [
        {
            "query_id": o.query_id,
            "attempt": o.attempt,
            "invoked": o.invoked,
            "scored_inv": o.scored_inv,
            "predicted": o.predicted,
            "raw_predicted": o.invoked[0] if o.invoked else NO_SKILL,
            "truth": o.truth,
            "error": o.error,
        }
        for o in art.outcomes
    ]
    assert got == ref["rows"]
    c = art.counts
    assert (c.probes, c.scored, c.errors, c.superseded) == ref["counts"]
    for name, value in ref["metrics"].items():
        mine = art.metric(name)
        assert (mine is None) == (value is None), name
        if value is not None:
            assert mine == pytest.approx(value, rel=1e-12, abs=1e-15), name
    assert art.metric("entrypoint_accuracy") == art.metric("top1_accuracy")
    mine_classes = {
        x.label: {k: getattr(x, k) for k in ("support", "predicted", "tp", "fp", "fn", "trajectory_recall")}
        for x in art.classes
    }
    assert mine_classes == ref["classes"]
    assert sorted(((x.expected, x.predicted), x.count) for x in art.confusion) == ref["confusion"]
    assert [
        (x.expected, x.predicted, x.count, x.queries, [s.query_id for s in x.samples]) for x in art.collisions
    ] == ref["collisions"]
    assert [
        (a.skill, a.fp, [(s.expected, s.count) for s in a.pulled_from]) for a in art.top_attractors
    ] == ref["attractors"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs())
def test_score_equals_the_per_probe_reference_on_any_log(log: tuple[QuerySet, list[ProbeRecord]]) -> None:
    qs, records = log
    _check(score(qs, records, _catalog()), _reference(qs, records))


@pytest.mark.parametrize(
    "limits",
    [{"_MAX_DENSE_COUNTS": 0}, {"_MAX_DENSE_COUNTS": 0, "_MAX_DENSE_CONFUSION": 0}],
    ids=["counted-apart", "sparse-confusion"],
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=logs())
def test_the_paths_for_many_labels_equal_the_reference(
    limits: dict[str, int], log: tuple[QuerySet, list[ProbeRecord]]
) -> None:
    """As with more labels than one combined count (≈ 510) or a dense confusion (2,048) may hold."""
    qs, records = log
    with pytest.MonkeyPatch.context() as mp:
        for name, value in limits.items():
            mp.setattr(_counting, name, value)
        art = score(qs, records, _catalog())
    _check(art, _reference(qs, records))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs(), st.randoms(use_true_random=False))
def test_log_order_changes_no_byte_of_the_artifact(log: tuple[QuerySet, list[ProbeRecord]], rng: Any) -> None:
    """Records of different (query, attempt) pairs in any order (a superseded one before its successor)."""
    qs, records = log
    keyed: dict[tuple[str, int], list[ProbeRecord]] = {}
    for r in records:
        keyed.setdefault((r.query_id, r.attempt), []).append(r)
    slots = [(r.query_id, r.attempt) for r in records]
    rng.shuffle(slots)
    taken: Counter[tuple[str, int]] = Counter()
    shuffled = []
    for k in slots:
        shuffled.append(keyed[k][taken[k]])
        taken[k] += 1
    a = score(qs, records, _catalog())
    b = score(qs, shuffled, _catalog())
    assert artifact_digest(a) == artifact_digest(b)
