"""Import other tools' trigger-eval sets as skillreach query sets.

Formats (``--format``):

- ``should-trigger``: a JSON array (or JSONL) of ``{"query", "should_trigger", "id"?, "note"?,
  "split"?}`` for one skill (Anthropic skill-creator, CopilotAtelier ``trigger-queries.<skill>.json``).
- ``waza``: waza's ``trigger_tests.yaml``: ``{skill, should_trigger_prompts, should_not_trigger_prompts}``
  (items ``{prompt, reason?, confidence?}`` or plain strings; the camelCase keys are accepted too).
- ``csv``: the should-trigger shape as CSV (columns ``query``, ``should_trigger``, optional ``id``,
  ``note``, ``split``, ``neighbour``).
- ``cases``: multi-skill routing cases, JSONL ``{suite_skill, case, category, input,
  expected_activation, expected_skill_primary, expected_skill_raw}`` (dtsong/data-engineering-skills).
- ``labels``: JSONL rows naming the expected skill: a text in ``prompt|query|input|text`` and a skill in
  ``expected_skill|skill|skill_dir|skills_field|skills`` (obra/superpowers, openai/skills notion).
- ``openai-evals``: one evaluation JSON ``{name, skills, query, context?, expected_behavior,
  success_criteria}`` or a folder of them; the success criteria become the query's rubric.
- ``auto``: pick one of the above from the file's name and content.

Mapping: a positive becomes an ``implicit`` query (``contextual`` when the row carries context) for the
skill; a negative becomes ``neighbor_negative`` with ``expected_skill`` = the neighbour when the row names
one (a ``neighbour`` field, or a note that names a skill), else ``out_of_scope``. With a catalog,
neighbours and acceptable skills that are not resident are dropped (and the drop noted), skill names
are matched up to a shared prefix (``knowledge-capture`` ⇄ ``notion-knowledge-capture``), and the
result is validated against it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from skillreach._io.csv import iter_csv
from skillreach._io.json import decode_utf8, load_json, read_bytes_limited
from skillreach._io.yaml import YamlProblem, load_limited
from skillreach.errors import InputError, NotFoundError
from skillreach.models import Catalog, Checks, Query, QueryKind, QuerySet
from skillreach.queries.sets import MAX_QUERY_FILE_BYTES, MAX_QUERY_NODES, seal, validate_against_catalog

__all__ = ["FORMATS", "ImportResult", "detect_format", "import_queries", "read_trigger_set"]

Format = Literal["should-trigger", "waza", "csv", "cases", "labels", "openai-evals"]
FORMATS: tuple[str, ...] = ("should-trigger", "waza", "csv", "cases", "labels", "openai-evals")

_KEBAB = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)+$")
_TRUE = {"true", "yes", "y", "1", "t"}
_FALSE = {"false", "no", "n", "0", "f"}
_TEXT_KEYS = ("query", "prompt", "input", "text")
_NOTE_KEYS = ("note", "notes", "reason")
_NEIGHBOUR_KEYS = ("neighbour", "neighbor", "expected_skill")
_WRAPPER_KEYS = ("evals", "queries", "items", "cases")


@dataclass
class ImportResult:
    """An imported, sealed set and what the import changed or dropped on the way."""

    query_set: QuerySet
    format: str
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Ctx:
    path: Path
    names: frozenset[str] | None  # resident skills, when a catalog was given
    warnings: list[str] = field(default_factory=list)

    def resolve(self, name: str) -> str | None:
        """The resident skill ``name`` refers to (exact, or up to a shared prefix); None if none."""
        if self.names is None or name in self.names:
            return name
        near = sorted(n for n in self.names if n.endswith("-" + name) or name.endswith("-" + n))
        if len(near) == 1:
            return near[0]
        return None


# ------------------------------------------------------------------------------------------- public


def import_queries(
    path: str | Path,
    *,
    fmt: str = "auto",
    skill: str | None = None,
    catalog: Catalog | Iterable[str] | None = None,
    catalog_id: str | None = None,
) -> ImportResult:
    """Read ``path`` in ``fmt`` and return it sealed with origin ``imported`` and ``source`` = the file."""
    path = Path(path)
    if not path.exists():
        raise NotFoundError(f"{path}: no such file; pass the trigger-eval file to import")
    if catalog is not None and not isinstance(catalog, Catalog):
        catalog = frozenset(catalog)  # read twice below
    fmt = detect_format(path) if fmt == "auto" else fmt
    queries, warnings = read_trigger_set(path, fmt, skill=skill, catalog=catalog)
    qs = QuerySet(catalog_id=catalog_id or "all", queries=tuple(queries))
    if catalog is not None:
        validate_against_catalog(qs, catalog, source=str(path))
    sealed = seal(qs, source=str(path), origin="imported", import_format=fmt)
    return ImportResult(sealed, fmt, warnings)


def read_trigger_set(
    path: str | Path,
    fmt: str,
    *,
    skill: str | None = None,
    catalog: Catalog | Iterable[str] | None = None,
) -> tuple[list[Query], list[str]]:
    """Parse one trigger-eval file into queries (unsealed) and the warnings of the mapping."""
    path = Path(path)
    if not path.exists():
        raise NotFoundError(f"{path}: no such file; pass the trigger-eval file to import")
    if fmt not in FORMATS:
        raise InputError(f"unknown --format {fmt!r}; use one of {', '.join(FORMATS)} or auto")
    if path.is_dir() and fmt != "openai-evals":
        raise InputError(f"{path}: is a directory; only --format openai-evals reads a folder")
    names: frozenset[str] | None = None
    if catalog is not None:
        names = frozenset(catalog.names if isinstance(catalog, Catalog) else catalog)
    ctx = _Ctx(path, names)
    readers = {
        "should-trigger": _read_should_trigger,
        "waza": _read_waza,
        "csv": _read_csv,
        "cases": _read_cases,
        "labels": _read_labels,
        "openai-evals": _read_openai_evals,
    }
    queries = readers[fmt](ctx, skill)
    if not queries:
        raise InputError(f"{path}: no queries found for --format {fmt}; check the format and --skill")
    seen: dict[str, int] = {}
    for q in queries:
        seen[q.id] = seen.get(q.id, 0) + 1
    dupes = [i for i, n in seen.items() if n > 1]
    if dupes:
        raise InputError(f"{path}: the rows give duplicate ids ({', '.join(dupes[:5])}); make the ids unique")
    return queries, ctx.warnings


def detect_format(path: str | Path) -> str:
    """Guess the format of a trigger-eval file from its name and first record."""
    path = Path(path)
    if path.is_dir():
        return "openai-evals"
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".yaml", ".yml"):
        return "waza"
    text = _read_text(path)
    first: Any = None
    if suffix == ".jsonl":
        line = next((ln for ln in text.splitlines() if ln.strip()), "")
        first = _loads(line, path)
    elif suffix == ".json":
        data = _loads(text, path)
        if isinstance(data, Mapping):  # {"evals": [...]} (skill-creator's format B) and similar wrappers
            data = next((data[k] for k in _WRAPPER_KEYS if isinstance(data.get(k), list)), data)
        first = data[0] if isinstance(data, list) and data else data
    if isinstance(first, Mapping):
        if "should_trigger" in first:
            return "should-trigger"
        if "expected_activation" in first:
            return "cases"
        if "success_criteria" in first or "expected_behavior" in first:
            return "openai-evals"
        if any(k in first for k in _TEXT_KEYS):
            return "labels"
    raise InputError(f"{path}: cannot tell the format; pass --format {'|'.join(FORMATS)}")


# ---------------------------------------------------------------------------------------- helpers


def _read_text(path: Path) -> str:
    raw = read_bytes_limited(path, max_bytes=MAX_QUERY_FILE_BYTES, what="trigger-eval file")
    return decode_utf8(raw, source=str(path))


def _loads(text: str, path: Path, line: int | None = None) -> Any:
    return load_json(text, source=str(path), line=line or 0)


def _json_rows(ctx: _Ctx) -> list[tuple[str, Any]]:
    """Rows of a JSON array or a JSONL file, each with where it came from."""
    text = _read_text(ctx.path)
    if ctx.path.suffix.lower() == ".jsonl":
        return [
            (f"{ctx.path}:{n}", _loads(line, ctx.path, n))
            for n, line in enumerate(text.splitlines(), start=1)
            if line.strip()
        ]
    data = _loads(text, ctx.path)
    if isinstance(data, Mapping):  # {"skill": ..., "queries"|"evals": [...]} wrappers
        data = next((data[k] for k in _WRAPPER_KEYS if k in data), data)
    if not isinstance(data, list):
        raise InputError(f"{ctx.path}: expected a JSON array of rows (got {type(data).__name__})")
    return [(f"{ctx.path}: row #{i}", row) for i, row in enumerate(data, start=1)]


def _text_of(row: Mapping[str, Any], where: str) -> str:
    for key in _TEXT_KEYS:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
    raise InputError(f"{where}: no query text (expected one of {', '.join(_TEXT_KEYS)}); add it")


def _note_of(row: Mapping[str, Any]) -> str:
    for key in _NOTE_KEYS:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InputError(f"{where}: should_trigger must be true or false (got {value!r})")


def _target(ctx: _Ctx, skill: str | None, declared: str | None = None) -> str:
    """The skill a single-skill set is about: --skill, else the file's own, else its file name."""
    name = skill or declared
    if not name:
        stem = ctx.path.stem
        if "." in stem:  # trigger-queries.<skill>.json
            name = stem.rsplit(".", 1)[1]
    if not name:
        raise InputError(f"{ctx.path}: cannot tell which skill this set is about; pass --skill NAME")
    resolved = ctx.resolve(name)
    if resolved is None:
        raise InputError(
            f"{ctx.path}: skill {name!r} is not in the catalog; pass --skill with a resident name "
            "or --skills with the folder that holds it"
        )
    return resolved


def _neighbour_from_note(ctx: _Ctx, note: str, target: str) -> tuple[str | None, str | None]:
    """(resident neighbour, named-but-not-resident) found in a free-text note.

    With a catalog: the earliest resident skill name (other than the target) in the note. Without one:
    the note's leading clause when it is a single kebab-case skill name ("sampler-build-debug, the…").
    """
    lead = re.split(r"[;,:(]| - | — ", note, maxsplit=1)[0].strip()
    lead_name = lead if _KEBAB.match(lead) and lead != target else None
    if ctx.names is None:
        return lead_name, None
    best: tuple[int, str] | None = None
    for name in ctx.names:
        if name == target:
            continue
        m = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", note)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), name)
    if best is not None:
        return best[1], None
    return None, lead_name


def _negative(ctx: _Ctx, qid: str, text: str, *, target: str, row: Mapping[str, Any], notes: str) -> Query:
    """A row that must not trigger ``target``: a neighbour negative when it names the neighbour."""
    explicit = next((row[k] for k in _NEIGHBOUR_KEYS if isinstance(row.get(k), str) and row[k]), None)
    neighbour: str | None
    stray: str | None = None
    if explicit:
        neighbour = ctx.resolve(explicit)
        if neighbour is None:
            stray = explicit
    else:
        neighbour, stray = _neighbour_from_note(ctx, _note_of(row), target)
    if neighbour == target:
        neighbour = None
    if stray:
        ctx.warnings.append(f"{qid}: neighbour {stray!r} is not in the catalog; imported as out_of_scope")
    if neighbour is None:
        return Query(id=qid, text=text, kind=QueryKind.out_of_scope, notes=_join(f"not {target}", notes))
    return Query(
        id=qid,
        text=text,
        expected_skill=neighbour,
        kind=QueryKind.neighbor_negative,
        notes=_join(f"not {target}", notes),
    )


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _row_id(target: str, row: Mapping[str, Any], positive: bool, counters: dict[bool, int]) -> str:
    counters[positive] = counters.get(positive, 0) + 1
    rid = row.get("id")
    if isinstance(rid, str | int) and not isinstance(rid, bool) and str(rid).strip():
        return f"{target}-{rid}"
    return f"{target}-{'pos' if positive else 'neg'}-{counters[positive]:02d}"


def _make(where: str, **fields: Any) -> Query:
    try:
        return Query(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{where}: {str(err['msg']).removeprefix('Value error, ')}") from exc


# ----------------------------------------------------------------------------------------- readers


def _binary_rows(ctx: _Ctx, target: str, rows: list[tuple[str, Any]]) -> list[Query]:
    queries: list[Query] = []
    counters: dict[bool, int] = {}
    for where, row in rows:
        if not isinstance(row, Mapping):
            raise InputError(f"{where}: a row must be an object with query and should_trigger; fix the row")
        if "should_trigger" not in row:
            raise InputError(f"{where}: missing should_trigger; mark each row true or false")
        text = _text_of(row, where)
        positive = _bool(row["should_trigger"], where)
        qid = _row_id(target, row, positive, counters)
        split = row.get("split")
        notes = _join(f"split {split}" if isinstance(split, str) and split else "", _note_of(row))
        if positive:
            queries.append(_make(where, id=qid, text=text, expected_skill=target, notes=notes))
        else:
            queries.append(_negative(ctx, qid, text, target=target, row=row, notes=notes))
    return queries


def _read_should_trigger(ctx: _Ctx, skill: str | None) -> list[Query]:
    rows = _json_rows(ctx)
    declared = None
    if ctx.path.suffix.lower() == ".json":
        data = _loads(_read_text(ctx.path), ctx.path)
        if isinstance(data, Mapping) and isinstance(data.get("skill"), str):
            declared = data["skill"]  # {"skill": ..., "evals": [...]}
    return _binary_rows(ctx, _target(ctx, skill, declared), rows)


def _read_csv(ctx: _Ctx, skill: str | None) -> list[Query]:
    text = _read_text(ctx.path)
    rows_in = iter_csv(text, source=str(ctx.path))
    try:
        header = [h.strip().lower() for h in next(rows_in)[1]]
    except StopIteration:
        return []
    if "should_trigger" not in header or not any(k in header for k in _TEXT_KEYS):
        raise InputError(
            f"{ctx.path}:1: the header needs a query column and a should_trigger column "
            f"(got {', '.join(header)})"
        )
    rows: list[tuple[str, Any]] = []
    for start, cells in rows_in:
        where = f"{ctx.path}:{start}"
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise InputError(
                f"{where}: {len(cells)} cells for {len(header)} columns; quote cells with commas"
            )
        rows.append((where, {k: v for k, v in zip(header, cells, strict=True) if v.strip()}))
    return _binary_rows(ctx, _target(ctx, skill), rows)


def _read_waza(ctx: _Ctx, skill: str | None) -> list[Query]:
    text = _read_text(ctx.path)
    try:
        data, _ = load_limited(text, max_bytes=MAX_QUERY_FILE_BYTES, max_nodes=MAX_QUERY_NODES)
    except YamlProblem as exc:
        raise InputError(f"{ctx.path}:{exc.line}: invalid YAML ({exc.what})") from exc
    if not isinstance(data, Mapping):
        raise InputError(
            f"{ctx.path}: expected a mapping with should_trigger_prompts (waza trigger_tests.yaml)"
        )
    pos = data.get("should_trigger_prompts", data.get("shouldTriggerPrompts"))
    neg = data.get("should_not_trigger_prompts", data.get("shouldNotTriggerPrompts"))
    if pos is None and neg is None:
        raise InputError(
            f"{ctx.path}: no should_trigger_prompts or should_not_trigger_prompts; "
            "is this a waza trigger_tests.yaml?"
        )
    declared = data.get("skill") if isinstance(data.get("skill"), str) else None
    target = _target(ctx, skill, declared)
    rows: list[tuple[str, Any]] = []
    for key, items, flag in (
        ("should_trigger_prompts", pos, True),
        ("should_not_trigger_prompts", neg, False),
    ):
        if items is None:
            continue
        if not isinstance(items, list):
            raise InputError(f"{ctx.path}: {key} must be a list of prompts; write one item per prompt")
        for i, raw_item in enumerate(items, start=1):
            where = f"{ctx.path}: {key}[{i}]"
            item = {"prompt": raw_item} if isinstance(raw_item, str) else raw_item
            if not isinstance(item, Mapping):
                raise InputError(f"{where}: expected a prompt string or a mapping with prompt")
            row = dict(item)
            confidence = row.get("confidence")
            note = _note_of(row)
            if confidence:
                row["reason"] = _join(note, f"confidence {confidence}")
            row["should_trigger"] = flag
            rows.append((where, row))
    return _binary_rows(ctx, target, rows)


def _skills_named(raw: str, known: Iterable[str]) -> list[str]:
    """Skills named in a free-text label like "a (primary), b (possible secondary)", in order,
    leaving out those marked "not involved"."""
    found: list[tuple[int, str]] = []
    for name in known:
        for m in re.finditer(rf"(?<![\w-]){re.escape(name)}(?![\w-])", raw):
            tail = raw[m.end() : m.end() + 40]
            if re.match(r"\s*\(\s*not involved", tail):
                continue
            found.append((m.start(), name))
    ordered: list[str] = []
    for _, name in sorted(found):
        if name not in ordered:
            ordered.append(name)
    return ordered


def _read_cases(ctx: _Ctx, skill: str | None) -> list[Query]:
    rows = _json_rows(ctx)
    known: set[str] = set(ctx.names or ())
    for _, row in rows:
        if isinstance(row, Mapping):
            for key in ("suite_skill", "expected_skill_primary"):
                if isinstance(row.get(key), str) and row[key] != "__none__":
                    known.add(row[key])
    queries: list[Query] = []
    per_suite: dict[str, int] = {}
    for where, row in rows:
        if not isinstance(row, Mapping):
            raise InputError(f"{where}: a case must be a JSON object (one per line); fix the line")
        for key in ("suite_skill", "input", "expected_activation"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise InputError(f"{where}: missing {key!r}; is this a cases file (--format cases)?")
        suite = row["suite_skill"]
        if skill is not None and suite != skill:
            continue
        per_suite[suite] = per_suite.get(suite, 0) + 1
        m = re.match(r"\s*Case\s+(\d+)", str(row.get("case", "")))
        qid = f"{suite}-case-{int(m.group(1)) if m else per_suite[suite]:02d}"
        activation = row["expected_activation"].strip()
        raw = str(row.get("expected_skill_raw") or "")
        primary = row.get("expected_skill_primary")
        named = _skills_named(raw, known)
        if not isinstance(primary, str) or not primary:
            primary = named[0] if named else None
        if primary == "__none__":
            primary = None
        notes = _join(str(row.get("category") or ""), str(row.get("case") or ""), f"activation: {activation}")
        negative = activation.lower().startswith("no")
        expected = primary
        if expected is not None:
            resolved = ctx.resolve(expected)
            if resolved is None:
                ctx.warnings.append(f"{qid}: expected skill {expected!r} is not in the catalog; skipped")
                continue
            expected = resolved
        acceptable = []
        for name in named:
            resolved = ctx.resolve(name)
            if resolved is None or resolved == expected or (negative and resolved == suite):
                continue
            acceptable.append(resolved)
        if expected is None:
            kind = QueryKind.out_of_scope
        elif negative or expected != suite:
            kind = QueryKind.neighbor_negative
        else:
            kind = QueryKind.implicit
        queries.append(
            _make(
                where,
                id=qid,
                text=row["input"],
                expected_skill=expected,
                acceptable_skills=tuple(acceptable) if expected is not None else (),
                kind=kind,
                notes=notes if kind is QueryKind.implicit else _join(f"not {suite}", notes),
            )
        )
    return queries


def _skill_of_label(ctx: _Ctx, row: Mapping[str, Any], where: str, skill: str | None) -> str:
    for key in ("expected_skill", "skill", "skill_dir", "skills_field", "skills"):
        value = row.get(key)
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, str) and v), None)
        if isinstance(value, str) and value:
            resolved = ctx.resolve(value)
            if resolved is None:
                raise InputError(
                    f"{where}: skill {value!r} is not in the catalog; pass --skills with the folder "
                    "that holds it"
                )
            return resolved
    if skill:
        return skill
    raise InputError(f"{where}: the row names no skill (expected_skill, skill or skill_dir); pass --skill")


def _read_labels(ctx: _Ctx, skill: str | None) -> list[Query]:
    queries: list[Query] = []
    counters: dict[str, int] = {}
    mapped: dict[str, int] = {}  # labels that are not our kinds, and how many rows carried them
    for where, row in _json_rows(ctx):
        if not isinstance(row, Mapping):
            raise InputError(
                f"{where}: a row must be an object with a prompt and an expected skill; fix the row"
            )
        text = _text_of(row, where)
        target = _skill_of_label(ctx, row, where, skill)
        if skill is not None and target != (ctx.resolve(skill) or skill):
            continue  # --skill keeps the rows of that skill
        counters[target] = counters.get(target, 0) + 1
        source = row.get("file") or row.get("id")
        qid = (
            re.sub(r"\.[A-Za-z0-9]+$", "", str(source))
            if isinstance(source, str | int) and str(source)
            else f"{target}-{counters[target]:02d}"
        )
        positive = _bool(row["should_trigger"], where) if "should_trigger" in row else True
        label_kind = str(row.get("kind") or "")
        notes = _join(
            f"{label_kind} request" if label_kind and label_kind not in QueryKind.__members__ else "",
            str(row.get("label_source") or ""),
            _note_of(row),
        )
        if not positive:
            queries.append(_negative(ctx, qid, text, target=target, row=row, notes=notes))
            continue
        kind = QueryKind(label_kind) if label_kind in QueryKind.__members__ else QueryKind.implicit
        if kind is QueryKind.out_of_scope or kind is QueryKind.neighbor_negative:
            kind = QueryKind.implicit
        if label_kind and label_kind != kind.value:
            mapped[label_kind] = mapped.get(label_kind, 0) + 1
        queries.append(_make(where, id=qid, text=text, expected_skill=target, kind=kind, notes=notes))
    for label, count in sorted(mapped.items()):
        ctx.warnings.append(
            f"kind {label!r} ({count} row{'s' if count != 1 else ''}) is not a skillreach kind for a "
            "positive row; imported as implicit"
        )
    return queries


def _read_openai_evals(ctx: _Ctx, skill: str | None) -> list[Query]:
    files = sorted(ctx.path.rglob("*.json")) if ctx.path.is_dir() else [ctx.path]
    queries: list[Query] = []
    for file in files:
        data = _loads(_read_text(file), file)
        if not isinstance(data, Mapping) or "query" not in data:
            if ctx.path.is_dir():
                continue  # a folder may hold other JSON files
            raise InputError(f"{file}: expected an evaluation object with query and skills")
        where = str(file)
        raw_skills = data.get("skills") or []
        listed = [
            s
            for s in ([raw_skills] if isinstance(raw_skills, str) else raw_skills)
            if isinstance(s, str) and s
        ]
        folder = file.parent.name
        target_raw = skill or (listed[0] if listed else folder)
        if ctx.names is None and folder.endswith("-" + target_raw) and not skill:
            target_raw = folder  # skills: [knowledge-capture] inside notion-knowledge-capture/
        target = ctx.resolve(target_raw)
        if target is None:
            raise InputError(f"{where}: skill {target_raw!r} is not in the catalog; pass --skill or --skills")
        acceptable: list[str] = []
        for other in listed[1:] if listed and not skill else listed:
            resolved = ctx.resolve(other)
            if resolved is None:
                ctx.warnings.append(f"{file.name}: skill {other!r} is not in the catalog; dropped")
            elif resolved != target and resolved not in acceptable:
                acceptable.append(resolved)
        rubric_parts = []
        for key, title in (
            ("success_criteria", "Success criteria"),
            ("expected_behavior", "Expected behaviour"),
        ):
            items = [str(x) for x in data.get(key) or []]
            if items:
                rubric_parts.append(title + ":\n" + "\n".join(f"- {x}" for x in items))
        context = str(data.get("context") or "")
        rel = file.relative_to(ctx.path) if ctx.path.is_dir() else Path(file.parent.name) / file.name
        queries.append(
            _make(
                where,
                id=str(rel.with_suffix("")).replace("\\", "/"),
                text=str(data["query"]),
                expected_skill=target,
                acceptable_skills=tuple(acceptable),
                kind=QueryKind.contextual if context else QueryKind.implicit,
                notes=_join(str(data.get("name") or ""), f"context: {context}" if context else ""),
                checks=Checks(rubric="\n\n".join(rubric_parts)) if rubric_parts else None,
            )
        )
    return queries
