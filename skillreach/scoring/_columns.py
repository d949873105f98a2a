"""A columnar reader of a whole probes.jsonl: pyarrow decodes it straight into Arrow columns (on its own
threads, no Python object per row), and every rule of the validating reader is checked on the columns.
Here are its parsing and its checks; its entry point, which builds the table, is
:func:`skillreach.scoring.table.read_columns`.

:func:`read_columns` returns the same :class:`~skillreach.scoring.table.ProbeTable` as the msgspec reader
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
from collections.abc import Sequence
from typing import Any

import numpy as np

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
            ("turns", pa.int64()),  # a float or a string fails to parse: the other reader names the line
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


def _turns_ok(column: Any) -> bool:
    """Every ``turns`` null or an integer in [0, MAX_TURNS]: else the other reader names the line."""
    import pyarrow.compute as pc

    from skillreach.models import MAX_TURNS

    low, high = pc.min_max(column).values()
    return low.as_py() is None or (low.as_py() >= 0 and high.as_py() <= MAX_TURNS)


def _first_lines(cols: dict[str, Any]) -> dict[tuple[str, str], int]:
    """(field, value) → the 1-based line where it first appears, for the names a log may not mix
    (``runtime``, ``model``, ``resolved_model``, ``fingerprint``; null and ``""`` name nothing), looked
    up only for a field that holds two values or more."""
    import pyarrow.compute as pc

    first: dict[tuple[str, str], int] = {}
    for name in ("runtime", "model", "resolved_model", "fingerprint"):
        values = [v for v in _names(cols[name]) if v]
        if len(values) > 1:
            for v in values:
                first[(name, v)] = pc.index(cols[name], v).as_py() + 1
    return first


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
