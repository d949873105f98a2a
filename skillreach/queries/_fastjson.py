"""The fast path for reading a JSON query set (a sealed one: 100,000 queries in a fraction of a second).

msgspec decodes the file straight into light structs (:class:`_Lite`), the query rules are checked on
them column by column, and the :class:`~skillreach.models.Query` models are built without a pydantic
validation per query. Anything this path is not certain to read exactly as the general reader of
:mod:`skillreach.queries.sets` would — a key given twice, an unknown field, a wrong type, an empty id,
out-of-scope rules broken, duplicate ids, compliance checks, a bare list — makes it return ``None``,
and the general reader reads the file and gives its one-line error naming the file and the query.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec
import orjson

from skillreach.models import Provenance, Query, QueryKind, QuerySet, sha256_hex

__all__ = ["read_json_fast"]

_ABSENT = msgspec.Raw(b"")
"""The value of a ``Raw`` field whose key is absent (``null`` decodes to a new ``Raw(b"null")``)."""
_NULL = msgspec.Raw(b"null")
_UNSET = msgspec.UNSET
_KIND = {k.value: k for k in QueryKind}
_VALUE = {k: k.value for k in QueryKind}
_Kind = Literal["implicit", "contextual", "neighbor_negative", "out_of_scope"]
assert set(_Kind.__args__) == set(_KIND)  # type: ignore[attr-defined]


class _Lite(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One query as written; ``UNSET`` marks a key that is absent (so keys can be counted)."""

    id: str
    text: str
    expected_skill: str | msgspec.UnsetType | None = _UNSET
    acceptable_skills: list[str] | msgspec.UnsetType = _UNSET
    kind: _Kind | msgspec.UnsetType = _UNSET
    notes: str | msgspec.UnsetType | None = _UNSET
    checks: msgspec.Raw = _ABSENT


class _LiteSet(msgspec.Struct, forbid_unknown_fields=True):
    queries: list[_Lite]
    catalog_id: str | msgspec.UnsetType = _UNSET
    provenance: msgspec.Raw = _ABSENT


_DECODER = msgspec.json.Decoder(_LiteSet)
_SPACED_KEY = re.compile(r'"\s+:')
_FIELDS = tuple(Query.model_fields)
"""Query's fields in declaration order (the order of a validated model's ``__dict__``)."""
_get = {name: operator.attrgetter(name) for name in _LiteSet.__struct_fields__ + _Lite.__struct_fields__}


def read_json_fast(text: str) -> tuple[QuerySet, str] | None:
    """(query set, its computed digest) of a JSON query set in the sealed shape, or ``None`` when the
    general reader must read it (see the module doc)."""
    from skillreach._gc import cyclic_gc_paused

    with cyclic_gc_paused():  # 100,000 models and their dicts: no collector passes over them meanwhile
        return _read(text)


def _read(text: str) -> tuple[QuerySet, str] | None:
    try:
        doc = _DECODER.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    lites = doc.queries
    n = len(lites)
    if not n or not _keys_once(text, doc):
        return None
    catalog_id = "all" if doc.catalog_id is _UNSET else doc.catalog_id
    if not isinstance(catalog_id, str) or not catalog_id.strip():
        return None
    checks = list(map(_get["checks"], lites))
    if any(c is not _ABSENT and c != _NULL for c in checks):
        return None  # compliance checks: validated by the general reader
    prov = _provenance(doc.provenance)
    if prov is None:
        return None
    columns = _columns(lites, checks)
    if columns is None:
        return None
    queries = _build(columns, lites[0])
    if queries is None:
        return None
    # the models are built as validation builds them: not validated again one by one
    qs = QuerySet.model_construct(catalog_id=catalog_id, queries=queries, provenance=prov)
    return qs, _digest(catalog_id, columns)


def _keys_once(text: str, doc: _LiteSet) -> bool:
    """No key given twice in a query or at the top (msgspec would keep the last silently): the text
    holds ``"key":`` exactly as often as keys were decoded. A key spelled another way (a ``\\u``
    escape, blanks before its colon) would not be counted, and its twin's value silently lost, so a
    text with either goes to the general reader; so does one where the counts differ for any other
    reason (a provenance key of the same name, say)."""
    if "\\u" in text or _SPACED_KEY.search(text):
        return False  # a key spelled otherwise than ``"key":`` would escape the counts
    lites = doc.queries
    n = len(lites)
    present = {
        "queries": 1,
        "catalog_id": doc.catalog_id is not _UNSET,
        "provenance": doc.provenance is not _ABSENT,
        "id": n,
        "text": n,
        "checks": n - list(map(_get["checks"], lites)).count(_ABSENT),
    }
    absent = [_UNSET] * n
    for key in _OPTIONAL:
        present[key] = sum(map(operator.is_not, map(_get[key], lites), absent))
    return all(text.count(f'"{key}":') == count for key, count in present.items())


def _provenance(raw: msgspec.Raw) -> Provenance | None:
    """The provenance object read by the general reader's rules (a key given twice refused)."""
    if raw is _ABSENT:
        return Provenance()
    from skillreach._io.json import loads_strict  # the one JSON reading rule for these files

    try:
        data = loads_strict(bytes(raw).decode("utf-8"))
        if data is None:
            return Provenance()
        if not isinstance(data, Mapping):
            return None
        return Provenance.model_validate(dict(data))
    except (ValueError, UnicodeDecodeError):  # JSONDecodeError, DuplicateKey, ValidationError
        return None


class _Columns(msgspec.Struct):
    ids: list[str]
    texts: list[str]
    expected: list[str | None]
    acceptable: list[tuple[str, ...]]
    kinds: list[QueryKind]
    notes: list[str]
    keys: list[frozenset[str]]


def _columns(lites: Sequence[_Lite], checks: Sequence[msgspec.Raw]) -> _Columns | None:
    """The fields by column with the defaults of an absent key filled in, or ``None`` when one breaks
    a rule of :class:`~skillreach.models.Query` (empty id or text, out-of-scope rules, duplicate ids)."""
    n = len(lites)
    ids = list(map(_get["id"], lites))
    texts = list(map(_get["text"], lites))
    if not all(map(str.strip, ids)) or not all(map(str.strip, texts)) or len(set(ids)) != n:
        return None
    unset = [_UNSET] * n
    expected = list(map(_get["expected_skill"], lites))
    acceptable = list(map(_get["acceptable_skills"], lites))
    kinds = list(map(_get["kind"], lites))
    notes = list(map(_get["notes"], lites))
    # the keys a validated model was given (``notes: null`` is dropped first, as the general reader does)
    given_notes = [x is not _UNSET and x is not None for x in notes]
    given_checks = map(operator.is_not, checks, [_ABSENT] * n)
    keys: list[frozenset[str]] = []
    patterns: dict[tuple[bool, ...], frozenset[str]] = {}
    columns = (map(operator.is_not, expected, unset), map(operator.is_not, acceptable, unset),
               map(operator.is_not, kinds, unset), given_notes, given_checks)  # fmt: skip
    for present in zip(*columns, strict=True):
        got = patterns.get(present)
        if got is None:
            got = patterns[present] = frozenset(
                ("id", "text", *(k for k, p in zip((*_OPTIONAL, "checks"), present, strict=True) if p))
            )
        keys.append(got)
    expected = [None if e is _UNSET else e for e in expected]
    acc = [() if a is _UNSET else tuple(a) for a in acceptable]
    kind = [_KIND["implicit" if k is _UNSET else k] for k in kinds]
    note = ["" if x is _UNSET or x is None else x for x in notes]
    oos = QueryKind.out_of_scope
    for k, e, a in zip(kind, expected, acc, strict=True):
        if (k is oos) != (e is None) or (e is not None and e in a):
            return None
    return _Columns(ids, texts, expected, acc, kind, note, keys)


_OPTIONAL = ("expected_skill", "acceptable_skills", "kind", "notes")


def _build(c: _Columns, first: _Lite) -> tuple[Query, ...] | None:
    """The models, each as ``Query.model_validate`` of its record would give it (checked on the first:
    ``None`` if this pydantic lays a model out otherwise)."""
    new = Query.__new__
    put = object.__setattr__
    out = []
    for qid, text, exp, acc, kind, note, keys in zip(
        c.ids, c.texts, c.expected, c.acceptable, c.kinds, c.notes, c.keys, strict=True
    ):
        q = new(Query)
        put(q, "__dict__", {"id": qid, "text": text, "expected_skill": exp, "acceptable_skills": acc,
                            "kind": kind, "notes": note, "checks": None})  # fmt: skip
        # a validated model's set of the keys given (``notes: null`` is dropped, as the reader does)
        put(q, "__pydantic_fields_set__", set(keys))
        put(q, "__pydantic_extra__", None)
        put(q, "__pydantic_private__", None)
        out.append(q)
    if not _same_layout(out[0], first):
        return None
    return tuple(out)


def _same_layout(fast: Query, lite: _Lite) -> bool:
    record = {k: getattr(lite, k) for k in _FIELDS if k != "checks" and getattr(lite, k) is not _UNSET}
    if record.get("notes", "") is None:
        record.pop("notes")
    if lite.checks is not _ABSENT:
        record["checks"] = None
    slow = Query.model_validate(record)
    attrs = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
    return all(getattr(fast, a) == getattr(slow, a) for a in attrs) and list(fast.__dict__) == list(
        slow.__dict__
    )


def _digest(catalog_id: str, c: _Columns) -> str:
    """:meth:`QuerySet.compute_digest` from the columns: the same canonical JSON (queries in id order),
    each object built with its keys already in sorted order, so orjson writes it without sorting keys
    (the values are strings, ``null`` and lists of strings: no number, so no fallback encoder)."""
    columns: tuple[Sequence[object], ...] = (
        c.acceptable, c.expected, c.ids, list(map(_VALUE.__getitem__, c.kinds)), c.notes, c.texts
    )  # fmt: skip
    ids = c.ids
    if any(map(operator.ge, ids, ids[1:])):
        order = sorted(range(len(ids)), key=ids.__getitem__)
        columns = tuple([col[i] for i in order] for col in columns)
    docs = [
        {"acceptable_skills": a, "checks": None, "expected_skill": e, "id": i, "kind": k, "notes": n,
         "text": t}
        for a, e, i, k, n, t in zip(*columns, strict=True)
    ]
    return "sha256:" + sha256_hex(orjson.dumps({"catalog_id": catalog_id, "queries": docs}))
