from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from skillreach.models import NO_SKILL, Catalog, Checks, OutputCheck, Query, QueryKind, Skill


def _skill(name: str, body: str = "body", description: str = "does a thing well") -> Skill:
    return Skill(name=name, description=description, body=body)


def test_expected_skill_null_exactly_for_out_of_scope() -> None:
    Query(id="a", text="t", expected_skill=None, kind=QueryKind.out_of_scope)
    Query(id="b", text="t", expected_skill="pdf", kind=QueryKind.implicit)
    with pytest.raises(ValidationError, match="must be null"):
        Query(id="c", text="t", expected_skill="pdf", kind=QueryKind.out_of_scope)
    with pytest.raises(ValidationError, match="required"):
        Query(id="d", text="t", expected_skill=None, kind=QueryKind.contextual)
    with pytest.raises(ValidationError, match="empty"):
        Query(id="e", text="   ", expected_skill="pdf")


def test_catalog_digest_covers_bodies_and_ignores_order() -> None:
    a, b = _skill("a"), _skill("b")
    c1 = Catalog(id="x", skills=(a, b))
    c2 = Catalog(id="x", skills=(b, a))
    assert c1.digest == c2.digest
    c3 = Catalog(id="x", skills=(a, _skill("b", body="other body")))
    assert c3.digest != c1.digest
    c4 = Catalog(id="x", skills=(a, _skill("b", description="does another thing")))
    assert c4.digest != c1.digest


def test_catalog_refuses_duplicates_and_reserved_label() -> None:
    with pytest.raises(ValidationError, match="twice"):
        Catalog(id="x", skills=(_skill("a"), _skill("a")))
    with pytest.raises(ValidationError, match="may not be named"):
        Catalog(id="x", skills=(_skill(NO_SKILL),))


def test_checks_canonical_drops_defaults() -> None:
    checks = Checks(output=(OutputCheck(contains="done"),))
    assert checks.canonical() == {"output": [{"contains": "done"}]}
    assert checks.has_quality
    assert not checks.has_compliance
    with pytest.raises(ValidationError, match="exactly one"):
        OutputCheck(contains="a", regex="b")


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_canonical_json_is_the_stdlib_form_digests_are_defined_on(value: object) -> None:
    """Control characters, non-ASCII keys (sorted by code point), astral characters and ints beyond
    64 bits all give the bytes of ``json.dumps(sort_keys, compact, ensure_ascii=False)``."""
    import json

    from skillreach.models import canonical_json

    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == expected.encode()
