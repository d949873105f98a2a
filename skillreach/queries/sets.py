"""Query sets: load (JSON, JSONL, CSV, YAML), validate, seal, write and verify.

A *sealed* query set is the JSON file of ``spec/interfaces.md``: ``catalog_id``, ``queries`` and a
``provenance`` whose ``digest`` covers the catalog id and every query in canonical form
(:meth:`~skillreach.models.QuerySet.compute_digest`). Sealing also records one digest per query
(``provenance.query_digests``, ``{id: "sha256:<hex>"}``) so that :func:`verify_query_set` can name the
first query that was changed, added or removed; a file without them is refused with "the digest does
not match" alone.

Hand-written sets may be JSON (the sealed shape without a digest, or a bare list of queries), JSONL (one
query a line), CSV (columns ``id,text,expected_skill,acceptable_skills,kind,notes,checks``;
``acceptable_skills`` ``;``-separated, ``checks`` a JSON cell) or YAML (a list, or a mapping with
``queries``). Every problem is reported as one line naming the file, the line (JSONL/CSV line, YAML
line, JSON query index and id) or field, and what to do.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skillreach import __version__
from skillreach._io.csv import iter_csv, json_cell
from skillreach._io.json import decode_utf8, iter_jsonl, load_json
from skillreach._io.yaml import YamlProblem, load_limited
from skillreach.errors import InputError, NotFoundError, TamperedError
from skillreach.models import Catalog, Provenance, Query, QueryKind, QuerySet, sha256_hex
from skillreach.queries.compliance import validate_checks

__all__ = [
    "QUERY_FIELDS",
    "dump_query_set",
    "grow_query_set",
    "id_problem",
    "kind_counts",
    "load_query_set",
    "query_digest",
    "read_query_file",
    "seal",
    "validate_against_catalog",
    "verify_query_set",
    "write_query_set",
]

QUERY_FIELDS = ("id", "text", "expected_skill", "acceptable_skills", "kind", "notes", "checks")
"""The keys of one query, in the order files are written (and the CSV columns)."""

MAX_QUERY_FILE_BYTES = 64 * 2**20
"""A query file larger than this is refused before it is read."""
MAX_QUERY_NODES = 2_000_000
"""YAML nodes a query set may hold (about 100,000 queries); aliases are refused."""

_KINDS = ", ".join(k.value for k in QueryKind)
_KIND_VALUES = frozenset(k.value for k in QueryKind)
_TOP_KEYS = ("catalog_id", "queries", "provenance")
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_SEAL_HINT = "re-seal it with `skillreach queries seal` if the edit was intended"


@dataclass(frozen=True)
class _Row:
    """One raw query record and where it came from (for error messages)."""

    data: Any
    where: str  # "path:12" or "path: query #3 (id 'q-003')"


# ------------------------------------------------------------------------------------------- digests


def query_digest(query: Query) -> str:
    """``sha256:<hex>`` of one query's canonical form (the same JSON rules as the set's digest)."""
    payload = json.dumps(query.canonical(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + sha256_hex(payload)


# ------------------------------------------------------------------------------------------- loading


def load_query_set(path: str | Path, *, catalog: Catalog | Iterable[str] | None = None) -> QuerySet:
    """Load a query set. A sealed JSON set is verified (:class:`TamperedError` when it does not match);
    hand-written JSON/JSONL/CSV/YAML sets are accepted unsealed. With ``catalog`` every expected and
    acceptable skill must be resident in it.
    """
    path = Path(path)
    qs, computed = _read(path)
    _check_texts(qs, str(path))
    if qs.provenance.digest:
        _check_digest(qs, path, computed)
    if catalog is not None:
        validate_against_catalog(qs, catalog, source=str(path))
    return qs


_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""What a YAML query file may not hold (PyYAML's reader refuses it): control characters such as ESC,
BEL or NUL, and lone surrogates. A JSON file spells them as escapes (``"\\u001b"``); refused the same."""


def _check_texts(qs: QuerySet, source: str) -> None:
    """A lone surrogate (JSON's ``"\\ud800"``) in a query's id or text is refused: no UTF-8 file,
    database row or API request can carry it; so is a control character (ESC, BEL, NUL…: it would reach
    a terminal, a report or an agent raw), as a YAML query file refuses it."""
    if not _CONTROL.search("\n".join(q.id + "\n" + q.text for q in qs.queries)):
        return
    for q in qs.queries:
        for what, value in (("id", q.id), ("text", q.text)):
            m = _CONTROL.search(value)
            if m is None:
                continue
            qid = q.id.encode("utf-8", "backslashreplace").decode().encode("unicode_escape").decode()
            if _SURROGATE.fullmatch(m.group()):
                raise InputError(
                    f"{source}: query {qid!r}: {what} holds a "
                    f"lone surrogate (U+{ord(m.group()):04X}) at character {m.start() + 1:,}, which no "
                    "UTF-8 file or API request can carry; remove it"
                )
            raise InputError(
                f"{source}: query {qid!r}: {what} holds the control character U+{ord(m.group()):04X} at "
                f"character {m.start() + 1:,}, which a YAML query file refuses too; remove it"
            )


def id_problem(qid: str) -> str | None:
    """What makes ``qid`` unfit for a sealed set, or ``None``: space at either end, or a character that
    does not print (a newline, a tab, a zero-width space, a direction mark, a lone surrogate) — ids that
    differ only by one look the same and would be two cases."""
    if qid.isprintable() and qid == qid.strip():
        return None
    if qid != qid.strip() and qid.strip().isprintable():
        return "begins or ends with white space"
    bad = next(c for c in qid if not c.isprintable())
    return f"holds U+{ord(bad):04X}, a character that does not print"


def read_query_file(path: str | Path) -> QuerySet:
    """Parse and validate a query file of any supported format, without checking a recorded digest."""
    qs = _read(Path(path))[0]
    _check_texts(qs, str(path))
    return qs


def _read(path: Path) -> tuple[QuerySet, str | None]:
    """The query set and, when the fast JSON reader read it (:mod:`skillreach.queries._fastjson`), its
    digest as :meth:`QuerySet.compute_digest` gives it."""
    if not path.is_file():
        raise NotFoundError(
            f"{path}: no such query file; pass a JSON, JSONL, CSV or YAML query set"
            if not path.exists()
            else f"{path}: is a folder, not a query file; pass a JSON, JSONL, CSV or YAML file"
            if path.is_dir()
            else f"{path}: not a regular file (a FIFO, device or socket); pass a JSON, JSONL, CSV or YAML "
            "file"
        )
    try:
        size = path.stat().st_size
        if size > MAX_QUERY_FILE_BYTES:
            raise InputError(
                f"{path}: {size:,} bytes, more than the {MAX_QUERY_FILE_BYTES // 2**20} MiB a query set may "
                "hold; split it"
            )
        text = decode_utf8(path.read_bytes(), source=str(path))
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror}); check the path and permissions") from exc
    suffix = path.suffix.lower()
    if suffix == ".json":
        from skillreach.queries._fastjson import read_json_fast

        fast = read_json_fast(text)
        if fast is not None:
            return fast
    if suffix == ".jsonl":
        catalog_id, rows, provenance = "all", _rows_from_jsonl(text, path), None
    elif suffix == ".csv":
        catalog_id, rows, provenance = "all", _rows_from_csv(text, path), None
    elif suffix in (".yaml", ".yml"):
        catalog_id, rows, provenance = _rows_from_yaml(text, path)
    elif suffix == ".json":
        catalog_id, rows, provenance = _rows_from_json(text, path)
    else:
        raise InputError(
            f"{path}: unknown query file type {suffix or '(no extension)'!r}; "
            "use .json, .jsonl, .csv, .yaml or .yml"
        )
    return _build(path, catalog_id, rows, provenance), None


def _build(path: Path, catalog_id: Any, rows: list[_Row], provenance: Any) -> QuerySet:
    if not isinstance(catalog_id, str) or not catalog_id.strip():
        raise InputError(f"{path}: catalog_id must be a non-empty string (got {catalog_id!r})")
    if not rows:
        raise InputError(f"{path}: holds no queries; add at least one query")
    queries: list[Query] = []
    first_seen: dict[str, str] = {}
    for row in rows:
        query = _make_query(row)
        if query.id in first_seen:
            raise InputError(
                f"{row.where}: duplicate id {query.id!r} (first at "
                f"{_short_where(first_seen[query.id], path)}); give every query its own id"
            )
        first_seen[query.id] = row.where
        queries.append(query)
    prov = Provenance()
    if provenance is not None:
        if not isinstance(provenance, Mapping):
            raise InputError(f"{path}: provenance must be an object (got {type(provenance).__name__})")
        try:
            prov = Provenance.model_validate(dict(provenance))
        except ValidationError as exc:
            raise InputError(f"{path}: provenance.{_first_error(exc)}") from exc
    return QuerySet(catalog_id=catalog_id, queries=tuple(queries), provenance=prov)


def _short_where(where: str, path: Path) -> str:
    prefix = f"{path}:"
    rest = where[len(prefix) :].strip() if where.startswith(prefix) else where
    return f"line {rest}" if rest.isdigit() else rest


def _rows_from_jsonl(text: str, path: Path) -> list[_Row]:
    return [_Row(data, f"{path}:{lineno}") for lineno, data in iter_jsonl(text, source=str(path))]


def _rows_from_csv(text: str, path: Path) -> list[_Row]:
    rows_in = iter_csv(text, source=str(path))
    try:
        _, header = next(rows_in)
    except StopIteration:
        return []
    columns = [h.strip() for h in header]
    unknown = [c for c in columns if c not in QUERY_FIELDS]
    if unknown:
        raise InputError(
            f"{path}:1: unknown column {unknown[0]!r}; the columns are {', '.join(QUERY_FIELDS)}"
        )
    for required in ("id", "text"):
        if required not in columns:
            raise InputError(f"{path}:1: missing column {required!r}; the header needs at least id,text")
    dupes = sorted({c for c in columns if columns.count(c) > 1})
    if dupes:
        raise InputError(f"{path}:1: column {dupes[0]!r} appears twice; keep one")
    rows = []
    for start, cells in rows_in:
        where = f"{path}:{start}"
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(columns):
            raise InputError(
                f"{where}: {len(cells)} cells for {len(columns)} columns; quote cells that contain commas"
            )
        record: dict[str, Any] = {}
        for column, cell in zip(columns, cells, strict=True):
            value: Any = cell
            if column in ("expected_skill", "kind", "checks") and not cell.strip():
                continue  # an empty cell means the default (null / implicit / no checks)
            if column == "acceptable_skills":
                value = [s.strip() for s in cell.split(";") if s.strip()]
            elif column == "expected_skill":
                value = cell.strip()
            elif column == "checks":
                value = json_cell(
                    cell,
                    source=str(path),
                    line=start,
                    column="checks",
                    example='{"requires": [{"tool": "Bash", "pattern": "x"}]}',
                )
            record[column] = value
        rows.append(_Row(record, where))
    return rows


def _rows_from_yaml(text: str, path: Path) -> tuple[Any, list[_Row], Any]:
    try:
        data, node = load_limited(text, max_bytes=MAX_QUERY_FILE_BYTES, max_nodes=MAX_QUERY_NODES)
    except YamlProblem as exc:
        raise InputError(f"{path}:{exc.line}: invalid YAML ({exc.what}); fix the syntax") from exc
    catalog_id: Any = "all"
    provenance: Any = None
    seq_node: Any = node
    if isinstance(data, Mapping):
        _check_top_keys(data, path)
        if "queries" not in data:
            raise InputError(f"{path}: no 'queries' key; write a list of queries or a mapping with queries:")
        catalog_id = data.get("catalog_id", "all")
        provenance = data.get("provenance")
        seq_node = next(v for k, v in getattr(node, "value", []) if k.value == "queries")
        data = data["queries"]
    if data is None:
        return catalog_id, [], provenance
    if not isinstance(data, list):
        raise InputError(f"{path}: queries must be a YAML list (got {type(data).__name__})")
    rows = []
    for i, item in enumerate(data):
        line = seq_node.value[i].start_mark.line + 1
        rows.append(_Row(item, f"{path}:{line}"))
    return catalog_id, rows, provenance


def _rows_from_json(text: str, path: Path) -> tuple[Any, list[_Row], Any]:
    data = load_json(text, source=str(path))
    catalog_id: Any = "all"
    provenance: Any = None
    if isinstance(data, Mapping):
        _check_top_keys(data, path)
        if "queries" not in data:
            raise InputError(f"{path}: no 'queries' key; write a list of queries or an object with queries")
        catalog_id = data.get("catalog_id", "all")
        provenance = data.get("provenance")
        data = data["queries"]
    if not isinstance(data, list):
        raise InputError(f"{path}: queries must be a JSON array (got {type(data).__name__})")
    rows = []
    for i, item in enumerate(data, start=1):
        qid = item.get("id") if isinstance(item, Mapping) else None
        label = f"query #{i}" + (f" (id {qid!r})" if isinstance(qid, str) and qid else "")
        rows.append(_Row(item, f"{path}: {label}"))
    return catalog_id, rows, provenance


def _check_top_keys(data: Mapping[str, Any], path: Path) -> None:
    unknown = [k for k in data if k not in _TOP_KEYS]
    if unknown:
        raise InputError(f"{path}: unknown top-level key {unknown[0]!r}; the keys are {', '.join(_TOP_KEYS)}")


def _make_query(row: _Row) -> Query:
    data = row.data
    if not isinstance(data, Mapping):
        raise InputError(f"{row.where}: a query must be an object with id and text (got {_kind_of(data)})")
    record = dict(data)
    unknown = [k for k in record if k not in QUERY_FIELDS]
    if unknown:
        hint = difflib.get_close_matches(str(unknown[0]), QUERY_FIELDS, n=1)
        did = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise InputError(
            f"{row.where}: unknown field {unknown[0]!r}{did}; the fields are {', '.join(QUERY_FIELDS)}"
        )
    for key in ("id", "text"):
        if key not in record or record[key] is None:
            raise InputError(f"{row.where}: missing {key!r}; every query needs an id and a text")
    if isinstance(record["id"], int) and not isinstance(record["id"], bool):
        record["id"] = str(record["id"])  # YAML/CSV-born numeric ids
    if isinstance(record.get("acceptable_skills"), str):
        record["acceptable_skills"] = [s.strip() for s in record["acceptable_skills"].split(";") if s.strip()]
    if record.get("notes") is None:
        record.pop("notes", None)
    if "kind" in record and (not isinstance(record["kind"], str) or record["kind"] not in _KIND_VALUES):
        raise InputError(f"{row.where}: unknown kind {record['kind']!r}; use one of {_KINDS}")
    try:
        query = Query.model_validate(record)
    except ValidationError as exc:
        raise InputError(f"{row.where}: {_first_error(exc)}") from exc
    try:
        validate_checks(query)  # every regex of the checks must compile
    except InputError as exc:
        raise InputError(f"{row.where}: {exc.message}") from exc
    return query


def _kind_of(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _first_error(exc: ValidationError) -> str:
    """One readable line out of a pydantic error: ``field: what is wrong; what to do``."""
    err = exc.errors()[0]
    loc = ""
    for part in err["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
    msg = str(err["msg"]).removeprefix("Value error, ")
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown field; remove it or check its spelling"
    if loc.endswith(("id", "text")) and msg == "must not be empty":
        return f"{loc}: must not be empty; write the request the agent should receive"
    if msg.startswith(("expected_skill must be null", "expected_skill is required")):
        return f"{msg}; use kind out_of_scope for a query no skill should answer, else name the skill"
    if msg.startswith("expected_skill must not also"):
        return f"{msg}; acceptable_skills lists the other skills that may also be read"
    where = f"{loc}: " if loc else ""
    return f"{where}{msg}"


# ---------------------------------------------------------------------------------------- validation


def validate_against_catalog(
    qs: QuerySet, catalog: Catalog | Iterable[str], *, source: str | None = None
) -> None:
    """Every expected and acceptable skill must be resident; one error lists every stray with its ids."""
    names = set(catalog.names) if isinstance(catalog, Catalog) else set(catalog)
    label = f"catalog {catalog.id!r}" if isinstance(catalog, Catalog) else "the catalog"
    strays: dict[str, list[str]] = {}
    for q in qs.queries:
        for skill in ([q.expected_skill] if q.expected_skill else []) + list(q.acceptable_skills):
            if skill not in names:
                ids = strays.setdefault(skill, [])
                if q.id not in ids:
                    ids.append(q.id)
    if not strays:
        return
    parts = []
    for skill, ids in sorted(strays.items()):
        close = difflib.get_close_matches(skill, sorted(names), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
        parts.append(f"{skill!r}{hint} in {shown}")
    prefix = f"{source}: " if source else ""
    raise InputError(
        f"{prefix}{len(strays)} skill name(s) not in {label} ({len(names)} skills): {'; '.join(parts)}; "
        "fix the names or pass --skills with the folders that hold these skills"
    )


# ------------------------------------------------------------------------------------ seal and write


def seal(
    qs: QuerySet,
    *,
    source: str,
    catalog_id: str | None = None,
    origin: str = "authored",
    **provenance: Any,
) -> QuerySet:
    """Return ``qs`` with fresh provenance: origin, UTC ``created_at``, tool version, generator model,
    source, the digest of spec/interfaces.md and one digest per query (``query_digests``).
    """
    ids = [q.id for q in qs.queries]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InputError(f"{source}: duplicate id {dup!r}; give every query its own id")
    for index, qid in enumerate(ids, start=1):
        problem = id_problem(qid)
        if problem is not None:
            shown = qid.encode("utf-8", "backslashreplace").decode()
            raise InputError(
                f"{source}: query #{index:,} id {shown!r} {problem}; ids that differ only by such "
                "characters look the same — write the id in plain printing characters"
            )
    if catalog_id is not None and not catalog_id.strip():
        raise InputError("--catalog-id must not be empty")
    body = qs.model_copy(update={"catalog_id": catalog_id if catalog_id is not None else qs.catalog_id})
    extra = dict(provenance)
    created_at = extra.pop("created_at", None) or datetime.now(UTC).isoformat(timespec="seconds").replace(
        "+00:00", "Z"
    )
    prov = Provenance(
        origin=origin,
        created_at=created_at,
        tool_version=extra.pop("tool_version", __version__),
        generator_model=extra.pop("generator_model", None),
        source=source,
        digest=body.compute_digest(),
        query_digests={q.id: query_digest(q) for q in sorted(body.queries, key=lambda q: q.id)},
        **extra,
    )
    return QuerySet(catalog_id=body.catalog_id, queries=body.queries, provenance=prov)


def grow_query_set(parent: QuerySet, generated: QuerySet, *, target: str, parent_source: str) -> QuerySet:
    """``parent`` grown by the queries generated for ``target`` (a skill added without any), sealed as a
    new corpus version.

    Every query of ``parent`` is kept verbatim (so a study of the grown set measures the parent's cases
    as the parent would); a generated query whose id a parent query already has is renamed
    ``<target>-gen-<id>``; a generated text the parent already holds is dropped. The provenance names
    the parent (``parent_digest``, ``lineage``: every ancestor's digest, oldest first) and carries the
    generation's own provenance under ``generated``.
    """
    parent_digest = parent.provenance.digest or parent.compute_digest()
    ids = {q.id for q in parent.queries}
    texts = {" ".join(q.text.split()).lower() for q in parent.queries}
    added: list[Query] = []
    for q in generated.queries:
        if " ".join(q.text.split()).lower() in texts:
            continue
        qid = q.id if q.id not in ids else f"{target}-gen-{q.id}"
        ids.add(qid)
        added.append(q.model_copy(update={"id": qid}))
    gen_prov = generated.provenance.model_dump(mode="json")
    gen_prov.pop("query_digests", None)
    lineage = [*(getattr(parent.provenance, "lineage", None) or []), parent_digest]
    return seal(
        QuerySet(catalog_id=parent.catalog_id, queries=(*parent.queries, *added)),
        source=f"{parent_source} grown by {len(added)} generated queries for {target}",
        origin="grown",
        generator_model=generated.provenance.generator_model,
        parent_digest=parent_digest,
        lineage=lineage,
        grown_for=target,
        generated=gen_prov,
    )


def dump_query_set(qs: QuerySet) -> str:
    """The canonical JSON text of a query set: queries in canonical form, 2-space indent, newline."""
    prov = qs.provenance.model_dump(mode="json")
    ordered = {k: prov.pop(k) for k in ("origin", "created_at", "tool_version", "generator_model", "source")}
    digest = prov.pop("digest")
    query_digests = prov.pop("query_digests", None)
    ordered.update(prov)  # any further keys the producer recorded
    ordered["digest"] = digest
    if query_digests is not None:
        ordered["query_digests"] = query_digests
    doc = {
        "catalog_id": qs.catalog_id,
        "queries": [q.canonical() for q in qs.queries],
        "provenance": ordered,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_query_set(qs: QuerySet, path: str | Path) -> Path:
    """Write ``qs`` as canonical JSON (atomically: a temporary file renamed into place)."""
    path = Path(path)
    if path.suffix.lower() != ".json":
        raise InputError(f"{path}: a sealed query set is JSON; give the output a .json name")
    data = dump_query_set(qs).encode("utf-8")
    if len(data) > MAX_QUERY_FILE_BYTES:
        raise InputError(
            f"{path}: the sealed set would be {len(data):,} bytes, more than the "
            f"{MAX_QUERY_FILE_BYTES // 2**20} MiB a query set may hold (verify and run would refuse it); "
            "split the set"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return path


# -------------------------------------------------------------------------------------------- verify


def verify_query_set(path: str | Path) -> QuerySet:
    """Load a sealed JSON set and re-compute its digest; raise :class:`TamperedError` naming the first
    query that differs from what the digest covers when the file records per-query digests.
    """
    path = Path(path)
    if path.suffix.lower() != ".json":
        raise InputError(f"{path}: a sealed query set is a .json file; seal {path.name} first")
    qs, computed = _read(path)
    _check_texts(qs, str(path))
    if not qs.provenance.digest:
        raise InputError(
            f"{path}: not sealed (provenance.digest is missing); seal it with `skillreach queries seal`"
        )
    _check_digest(qs, path, computed)
    return qs


def _check_digest(qs: QuerySet, path: Path, computed: str | None = None) -> None:
    """``computed``: the digest of ``qs`` when the reader already has it."""
    recorded = qs.provenance.digest
    if not _DIGEST_RE.match(recorded):
        raise TamperedError(
            f"{path}: provenance.digest {recorded[:80]!r} is not 'sha256:<64 hex>'; {_SEAL_HINT}"
        )
    computed = computed or qs.compute_digest()
    if computed != recorded:
        raise TamperedError(f"{path}: tampered: {_diagnose(qs)}; {_SEAL_HINT}")
    stated = (qs.provenance.model_extra or {}).get("query_digests")
    if stated is None:
        return
    # the set's digest holds, but the provenance also states one digest a query: every one recomputed
    if not isinstance(stated, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in stated.items()
    ):
        raise TamperedError(
            f"{path}: provenance.query_digests is not a mapping of query id to 'sha256:<64 hex>'; "
            f"{_SEAL_HINT}"
        )
    lies = _digest_differences(qs, stated)
    if lies:
        more = f" ({len(lies)} queries differ)" if len(lies) > 1 else ""
        raise TamperedError(
            f"{path}: provenance.query_digests does not match the queries: {lies[0]}{more}; {_SEAL_HINT}"
        )


def _digest_differences(qs: QuerySet, recorded: Mapping[str, str]) -> list[str]:
    """Each query whose recorded digest is missing, differs or names no query of the set."""
    differences: list[str] = []
    present = set()
    for index, q in enumerate(qs.queries, start=1):
        present.add(q.id)
        if q.id not in recorded:
            differences.append(f"query {q.id!r} (#{index}) was added")
        elif recorded[q.id] != query_digest(q):
            differences.append(f"query {q.id!r} (#{index}) was changed")
    return differences + [f"query {qid!r} was removed" for qid in sorted(set(recorded) - present)]


def _diagnose(qs: QuerySet) -> str:
    """Say what differs from what the digest covers, as precisely as the file allows."""
    recorded = (qs.provenance.model_extra or {}).get("query_digests")
    plain = "the digest does not match the content"
    if not isinstance(recorded, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in recorded.items()
    ):
        return f"{plain} (the file records no per-query digests, so the changed query cannot be named)"
    differences = _digest_differences(qs, recorded)
    if not differences:
        return (
            f"{plain}, yet every query matches its recorded digest: catalog_id ({qs.catalog_id!r}) or the "
            "recorded digests were edited"
        )
    more = f" ({len(differences)} queries differ)" if len(differences) > 1 else ""
    return f"{differences[0]}{more}"


def kind_counts(queries: Sequence[Query]) -> dict[str, int]:
    """How many queries of each kind (every kind listed, in spec order)."""
    counts = {k.value: 0 for k in QueryKind}
    for q in queries:
        counts[q.kind.value] += 1
    return counts
