"""Catalog strategies: full, singleton, neighborhood (BM25 rivals + seeded filler)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillreach.errors import InputError
from skillreach.models import Skill
from skillreach.skills.bm25 import rivals
from skillreach.skills.catalog import build_catalog, catalogs_for
from skillreach.skills.discovery import discover


def ops_skills() -> list[Skill]:
    texts = {
        "release-deploy": "Deploy a release to production and verify the deploy health checks.",
        "release-rollback": "Roll back a failed release deploy to the previous production version.",
        "config-push": "Push configuration changes to running production services safely.",
        "schema-migration": "Write and apply database schema migrations with rollback scripts.",
        "query-performance": "Diagnose slow database queries, read query plans, add an index.",
        "pdf-extract": "Extract text and tables from PDF documents.",
        "docx-edit": "Edit Word documents: tracked changes, comments, styles.",
        "spreadsheet": "Build spreadsheets with formulas and charts.",
        "email-draft": "Draft an email reply in the user's tone.",
        "calendar": "Find a free slot in the calendar and book a meeting.",
    }
    return [Skill(name=n, description=d, body=f"# {n}\n") for n, d in texts.items()]


def test_full() -> None:
    skills = ops_skills()
    cat = build_catalog(skills)
    assert cat.id == "full"
    assert cat.strategy == "full"
    assert cat.names == [s.name for s in skills]
    assert catalogs_for(skills, "full") == [cat]


def test_singleton() -> None:
    cat = build_catalog(ops_skills(), "singleton", target="pdf-extract")
    assert cat.id == "singleton:pdf-extract"
    assert cat.names == ["pdf-extract"]
    assert cat.target == "pdf-extract"


def test_neighborhood_holds_target_rivals_and_filler() -> None:
    skills = ops_skills()
    cat = build_catalog(skills, "neighborhood", target="release-deploy", k=2, size=5, seed=0)
    assert cat.id == "neighborhood:release-deploy:k2:n5:s0"
    assert len(cat.skills) == 5
    deploy = next(r for r in rivals(skills, top=2) if r.name == "release-deploy")
    top2 = [v.name for v in deploy.rivals]
    assert len(top2) == 2
    assert {"release-deploy", *top2} <= set(cat.names)
    assert "release-rollback" in cat.names
    # the order of the given skills is kept
    order = [s.name for s in skills]
    assert cat.names == sorted(cat.names, key=order.index)


def test_neighborhood_deterministic_for_a_seed_and_order_free() -> None:
    skills = ops_skills()
    a = build_catalog(skills, "neighborhood", target="pdf-extract", k=1, size=6, seed=3)
    b = build_catalog(skills, "neighborhood", target="pdf-extract", k=1, size=6, seed=3)
    assert a == b
    reversed_names = set(
        build_catalog(skills[::-1], "neighborhood", target="pdf-extract", k=1, size=6, seed=3).names
    )
    assert reversed_names == set(a.names)
    others = {
        frozenset(build_catalog(skills, "neighborhood", target="pdf-extract", k=1, size=6, seed=s).names)
        for s in range(8)
    }
    assert len(others) > 1  # the filler really is drawn at random


def test_neighborhood_defaults_and_small_catalogs() -> None:
    skills = ops_skills()
    cat = build_catalog(skills, "neighborhood", target="calendar")
    assert cat.id == "neighborhood:calendar:k10:n20:s0"
    assert set(cat.names) == {s.name for s in skills}  # fewer skills than the size: all of them


def test_neighborhood_on_real_corpora(corpora: Path) -> None:
    skills = discover([corpora]).skills
    cat = build_catalog(skills, "neighborhood", target="pdf-to-markdown")
    assert len(cat.skills) == 20
    names = set(cat.names)
    assert "pdf-to-markdown" in names
    assert {"docx-to-markdown", "markitdown"} <= names  # its lexical neighbours
    top10 = next(r for r in rivals(skills, top=10) if r.name == "pdf-to-markdown")
    assert {v.name for v in top10.rivals} <= names


def test_catalogs_for_targets() -> None:
    skills = ops_skills()
    cats = catalogs_for(skills, "neighborhood", ["release-deploy", "pdf-extract"], k=2, size=4)
    assert [c.id for c in cats] == [
        "neighborhood:release-deploy:k2:n4:s0",
        "neighborhood:pdf-extract:k2:n4:s0",
    ]
    assert cats[0] == build_catalog(skills, "neighborhood", target="release-deploy", k=2, size=4)
    singles = catalogs_for(skills, "singleton")
    assert [c.names for c in singles] == [[s.name] for s in skills]


def test_digest_covers_bodies_and_is_order_free() -> None:
    skills = ops_skills()
    base = build_catalog(skills)
    assert build_catalog(skills[::-1]).digest == base.digest
    edited = [s.model_copy(update={"body": s.body + "x"}) if s.name == "calendar" else s for s in skills]
    assert build_catalog(edited).digest != base.digest
    renamed = [
        s.model_copy(update={"description": s.description + "!"}) if s.name == "pdf-extract" else s
        for s in skills
    ]
    assert build_catalog(renamed).digest != base.digest


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "random"}, "--catalog: unknown strategy 'random'"),
        ({"strategy": "singleton"}, "needs --target"),
        ({"strategy": "neighborhood"}, "needs --target"),
        ({"strategy": "singleton", "target": "nope"}, "--target: no skill named 'nope'"),
        ({"strategy": "neighborhood", "target": "calendar", "k": 5, "size": 3}, "--neighborhood-size 3"),
        ({"strategy": "neighborhood", "target": "calendar", "k": -1}, "--neighborhood-k"),
    ],
)
def test_bad_options(kwargs: dict, message: str) -> None:
    with pytest.raises(InputError) as err:
        build_catalog(ops_skills(), **kwargs)
    assert message in str(err.value)


def test_duplicate_names_and_empty() -> None:
    skills = ops_skills()
    with pytest.raises(InputError, match="two skills are named 'calendar'"):
        build_catalog([*skills, skills[-1]])
    with pytest.raises(InputError, match="no skills"):
        build_catalog([])
    with pytest.raises(InputError, match="--target: no skill named 'zzz'"):
        catalogs_for(skills, "singleton", ["zzz"])
