"""The bundled example: sealed, verifies, lint-clean skills, all four kinds, every skill resident."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter

from skillreach.example import (
    EXAMPLE_CATALOG_ID,
    EXAMPLE_QUERIES,
    EXAMPLE_QUERIES_SOURCE,
    EXAMPLE_SKILLS,
)
from skillreach.models import QueryKind
from skillreach.queries.sets import load_query_set, read_query_file, verify_query_set
from skillreach.skills.bm25 import rank
from skillreach.skills.discovery import load_skills
from skillreach.skills.lint import lint
from tests.conftest import EXAMPLE

NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def test_paths_point_into_the_package() -> None:
    assert EXAMPLE_SKILLS == EXAMPLE / "skills"
    assert EXAMPLE_QUERIES == EXAMPLE / "queries.json"
    assert EXAMPLE_QUERIES.is_file()
    assert EXAMPLE_QUERIES_SOURCE.is_file()


def test_skills_are_lint_clean_and_compete() -> None:
    skills = load_skills([EXAMPLE_SKILLS])
    assert 10 <= len(skills) <= 14
    for s in skills:
        assert NAME.match(s.name)
        assert len(s.name) <= 64
        assert s.name == s.folder.rstrip("/").rsplit("/", 1)[-1]
        assert 20 <= len(s.description) <= 1024
        assert len(s.body) > 200  # a real body: rules a compliance check can test
    report = lint([EXAMPLE_SKILLS])
    assert report.errors == []
    assert report.warnings == []
    assert len(report.files) == len(skills)
    # the competition the example is about
    names = {s.name for s in skills}
    assert {"release-deploy", "release-rollback", "config-push"} <= names
    assert {"schema-migration", "query-performance", "pdf-documents", "word-documents", "ops-router"} <= names


def test_query_set_is_sealed_and_verifies() -> None:
    qs = verify_query_set(EXAMPLE_QUERIES)
    doc = json.loads(EXAMPLE_QUERIES.read_text(encoding="utf-8"))
    payload = json.dumps(
        {"catalog_id": doc["catalog_id"], "queries": sorted(doc["queries"], key=lambda q: q["id"])},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert doc["provenance"]["digest"] == "sha256:" + hashlib.sha256(payload.encode()).hexdigest()
    assert qs.catalog_id == EXAMPLE_CATALOG_ID
    assert qs.provenance.origin == "authored"
    assert set((qs.provenance.model_extra or {})["query_digests"]) == {q.id for q in qs.queries}


def test_sealed_set_is_the_hand_written_yaml() -> None:
    """Editing queries.yaml without re-sealing queries.json fails here (the command is in the docstring
    of ``skillreach.example``)."""
    sealed = load_query_set(EXAMPLE_QUERIES)
    source = read_query_file(EXAMPLE_QUERIES_SOURCE)
    assert source.compute_digest() == sealed.provenance.digest


def test_query_set_covers_what_the_demo_needs() -> None:
    skills = load_skills([EXAMPLE_SKILLS])
    names = {s.name for s in skills}
    qs = load_query_set(EXAMPLE_QUERIES, catalog=names)  # every expected/acceptable skill resident
    assert len(qs.queries) >= 60
    kinds = Counter(q.kind for q in qs.queries)
    assert set(kinds) == set(QueryKind)
    assert kinds[QueryKind.out_of_scope] >= 5
    assert kinds[QueryKind.neighbor_negative] >= 10
    assert sum(1 for q in qs.queries if "ops-router" in q.acceptable_skills) >= 3
    with_checks = [q for q in qs.queries if q.checks is not None]
    assert sum(1 for q in with_checks if q.checks and q.checks.requires) >= 10
    assert sum(1 for q in with_checks if q.checks and q.checks.forbids) >= 5
    assert sum(1 for q in with_checks if q.checks and q.checks.output) >= 3
    assert sum(1 for q in with_checks if q.checks and q.checks.rubric) >= 3
    # every working skill is expected by at least three queries; the router by none
    expected = Counter(q.expected_skill for q in qs.queries if q.expected_skill)
    assert all(expected[n] >= 3 for n in names - {"ops-router"})
    assert expected["ops-router"] == 0
    # neighbour negatives say which skill they must not trigger, and it is a real neighbour
    for q in qs.queries:
        if q.kind is QueryKind.neighbor_negative:
            m = re.match(r"not ([a-z-]+)", q.notes)
            assert m, q.id
            assert m.group(1) in names
            assert m.group(1) != q.expected_skill


def test_keyword_router_scores_realistically_not_perfectly() -> None:
    """An offline BM25 router gets a realistic score on the example: collisions make the report
    interesting, and a score near 0 or 1 would make it useless as a demo."""
    skills = load_skills([EXAMPLE_SKILLS])
    qs = load_query_set(EXAMPLE_QUERIES)
    hits = 0
    for q in qs.queries:
        ranked = rank(q.text, skills)
        top = ranked[0][0] if ranked and ranked[0][1] > 0 else None
        hits += top == q.expected_skill or (top is not None and top in q.acceptable_skills)
    accuracy = hits / len(qs.queries)
    assert 0.45 <= accuracy <= 0.85, accuracy
