"""A columnar reader of a whole probes.jsonl: pyarrow decodes it straight into Arrow columns (on its own
threads, no Python object per row), and every rule of the validating reader is checked on the columns.

:func:`read_columns` returns the same :class:`~skillreach.scoring.core.ProbeTable` as the msgspec reader
(``ProbeTable.from_lines``) or ``None``: on any line that reader would refuse or read specially (a
parse error, a wrong type, a value out of range, a blank line, a line judged on more than routing, a
missing or null ``attempt`` or ``invoked``), the caller reads the log again with that reader, so the
user still gets its one-line ``file:line: field`` message. ``None`` is never an error by itself.

What pyarrow accepts that the JSON grammar does not (``NaN``, ``Infinity``, blank lines, several
objects on one line, a byte-order mark) is refused here before or after parsing. Keys spelt with
escapes are decoded by both readers alike. pyarrow is imported only when a log is read this way.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from skillreach.models import NO_SKILL

if TYPE_CHECKING:
    from skillreach.scoring.core import ProbeTable

__all__ = ["read_columns"]

_SLICE = 1 << 22
_NL, _OPEN = ord("\n"), ord("{")
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_EXACT_FLOAT = 2.0**53
"""Costs below this in magnitude are the same number as a double and as the JSON integer msgspec reads."""
_MAX_DURATION = 2.0**31
"""Durations below this (24 days in ms) add up exactly in int64 over any log; larger: the other reader."""
_MAX_COUNT = 1 << 32
"""Token counts below this add up exactly in int64 over any log; larger ones: the other reader."""


def _schema() -> Any:
    import pyarrow as pa

    text = pa.string()
    return pa.schema(
        [
            ("query_id", text),
            ("attempt", pa.int64()),
            ("invoked", pa.list_(text)),
            ("error", text),
            ("usage", pa.struct([(k, pa.int64()) for k in _USAGE_KEYS])),
            ("cost_usd", pa.float64()),
            ("duration_ms", pa.float64()),
            ("runtime", text),
            ("model", text),
            ("resolved_model", text),
            ("fingerprint", text),
            # judged on more than routing when set: a value other than null (or [] for tool_calls) fails
            # to parse against these types, and the other reader keeps such a line whole
            ("tool_calls", pa.list_(pa.null())),
            ("final_text", pa.null()),
            ("rubric_grade", pa.null()),
        ]
    )


def _plain_lines(data: bytes) -> int | None:
    """The number of lines when every line is one JSON object starting at its first byte (no blank line,
    no leading space, no carriage return) and nothing pyarrow reads beyond JSON (``NaN``, ``Infinity``)
    appears; else ``None``. Single bytes are looked for first (``memchr``), newlines by numpy in slices."""
    if not data.startswith(b"{") or b"\r" in data:
        return None
    for letter, word in ((b"N", b"NaN"), (b"I", b"Inf")):
        if letter in data and word in data:
            return None
    arr = np.frombuffer(data, dtype=np.uint8)
    n, n_nl = len(arr), 0
    for a in range(0, n, _SLICE):
        newline = arr[a : a + _SLICE] == _NL
        n_nl += int(np.count_nonzero(newline))
        after = arr[a + 1 : a + _SLICE + 1]
        if np.count_nonzero(newline[: len(after)] & (after != _OPEN)):
            return None  # a line not starting with "{": blank, indented or torn
    return n_nl + (not data.endswith(b"\n"))


def _parse(data: bytes) -> Any:
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        return pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=True, block_size=1 << 24),
            parse_options=pj.ParseOptions(
                explicit_schema=_schema(), unexpected_field_behavior="ignore", newlines_in_values=False
            ),
        )
    except (pa.ArrowException, ValueError):
        return None


def _names(column: Any) -> set[Any]:
    import pyarrow.compute as pc

    return set(pc.unique(column).to_pylist())


def read_columns(data: bytes, *, source: str, query_ids: Sequence[str] | None = None) -> ProbeTable | None:
    """The probe table of a whole log's bytes, or ``None`` when the validating reader must read it.

    ``query_ids``: as ``ProbeTable.query_ids`` (the sorted ids of a query set without repeats): rows are
    coded by their place among them, ids outside them after, in the order first seen."""
    import pyarrow.compute as pc

    from skillreach.scoring._arrow import view
    from skillreach.scoring.core import ProbeTable, _offsets

    n_lines = _plain_lines(data)
    if n_lines is None:
        return None
    table = _parse(data)
    if table is None or table.num_rows != n_lines:
        return None
    cols = {name: table.column(name) for name in table.column_names}  # chunked: few are joined
    del table
    qcol, acol, icol = cols["query_id"], cols["attempt"], cols["invoked"].combine_chunks()
    if qcol.null_count or acol.null_count or icol.null_count:
        return None  # missing or null: only the other reader tells the two apart
    if pc.max(pc.list_value_length(cols["tool_calls"])).as_py():
        return None  # tool calls: compliance judges the line, kept whole by the other reader
    attempt = view(acol, np.int64).copy()
    if len(attempt) and int(attempt.min()) < 1:
        return None
    skills = pc.list_flatten(icol)
    if skills.null_count:
        return None
    coded_skills = pc.dictionary_encode(skills)
    skill_vocab: list[str] = coded_skills.dictionary.to_pylist()
    if NO_SKILL in skill_vocab or "" in skill_vocab:
        return None
    usage = _usage(cols["usage"])
    costs = _finite(cols["cost_usd"], _EXACT_FLOAT)
    durations = _finite(cols["duration_ms"], _MAX_DURATION)
    if usage is None or costs is None or durations is None:
        return None
    coded = _query_codes(qcol, query_ids)
    if coded is None:
        return None
    q, query_vocab, query_codes = coded
    lengths = view(pc.list_value_length(icol), np.int32)
    off = _offsets(lengths)
    ecol = cols["error"]
    errors: dict[int, str] = {}
    if ecol.null_count < len(ecol):
        rows = view(pc.indices_nonzero(pc.is_valid(ecol)), np.uint64)
        errors = dict(zip(rows.tolist(), ecol.drop_null().to_pylist(), strict=True))
    return ProbeTable(
        query_vocab=query_vocab,
        query_codes=query_codes,
        query_ids=query_ids,
        q=q,
        attempt=attempt,
        skill_vocab=skill_vocab,
        inv_flat=view(coded_skills.indices, np.int32).astype(np.int64),
        inv_off=off,
        inv_len=lengths,
        errors=errors,
        lines=np.arange(1, len(attempt) + 1, dtype=np.int64),
        usage=usage,
        cost_usd=math.fsum(costs.tolist()),  # exactly rounded, as the other reader's
        priced=len(costs),
        duration_ms=int(np.trunc(durations).astype(np.int64).sum()),
        runtimes={r or "" for r in _names(cols["runtime"])},
        models={m for m in _names(cols["model"]) if m},
        resolved_models={m for m in _names(cols["resolved_model"]) if m},
        fingerprints={m for m in _names(cols["fingerprint"]) if m},
        source=source,
    )


def _usage(column: Any) -> dict[str, int] | None:
    """The four token totals (a null usage or count: 0); ``None`` for a negative or huge count."""
    import pyarrow.compute as pc

    sums = {}
    for key, counts in zip(_USAGE_KEYS, column.flatten(), strict=True):  # parent nulls applied
        low, high = pc.min_max(counts).values()  # nulls skipped: counted as 0
        if low.as_py() is not None and (low.as_py() < 0 or high.as_py() >= _MAX_COUNT):
            return None
        sums[key] = pc.sum(counts).as_py() or 0  # exact: fewer than 2**31 rows of counts below 2**32
    return sums


def _finite(column: Any, bound: float) -> np.ndarray | None:
    """The column's non-null values; ``None`` when one is not finite or not below ``bound`` in magnitude."""
    from skillreach.scoring._arrow import view

    values = view(column.drop_null(), np.float64)
    if len(values) and not bool((np.abs(values) < bound).all()):  # NaN compares False too
        return None
    return values


def _query_codes(
    qcol: Any, query_ids: Sequence[str] | None
) -> tuple[np.ndarray, list[str], dict[str, int] | None] | None:
    """Row codes, the query vocabulary and (unaligned) its inverse; ``None`` for a blank query id."""
    import pyarrow.compute as pc

    from skillreach.scoring._arrow import strings, view

    if query_ids is None:
        coded = pc.dictionary_encode(qcol.combine_chunks())
        vocab: list[str] = coded.dictionary.to_pylist()
        if any(not x.strip() for x in vocab):
            return None
        return view(coded.indices, np.int32).astype(np.int64), vocab, {x: i for i, x in enumerate(vocab)}
    where = pc.index_in(qcol, value_set=strings(query_ids, large=False)).combine_chunks()
    extra: list[str] = []
    if where.null_count:
        outside = pc.is_null(where)
        rows = view(pc.indices_nonzero(outside), np.uint64)
        q = np.frombuffer(where.buffers()[1], dtype=np.int32)[where.offset : where.offset + len(where)]
        q = q.astype(np.int64)
        out_ids = qcol.filter(outside)
        uniq = pc.unique(out_ids)  # in the order first seen
        extra = uniq.to_pylist()
        q[rows] = len(query_ids) + view(pc.index_in(out_ids, value_set=uniq), np.int32)
    else:
        q = view(where, np.int32).astype(np.int64)
    # the rows' ids are among the set's and ``extra``: their own strings are checked, not 1,000,000 rows'
    if any(not x.strip() for x in itertools.chain(query_ids, extra)):
        return None
    return q, [*query_ids, *extra], None
