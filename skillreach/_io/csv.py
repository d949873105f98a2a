"""The one reader of CSV a user hands us (query sets, trigger sets): rows with their file lines, each
failure one line naming the file and line — a row the ``csv`` module cannot read, a cell larger than
:data:`MAX_CELL` characters. A cell that holds JSON is read by :func:`skillreach._io.json.load_json`
with the row's line (see :func:`json_cell`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from skillreach._io.json import JsonProblem, load_json
from skillreach.errors import InputError

__all__ = ["FORMULA_STARTS", "MAX_CELL", "iter_csv", "json_cell", "safe_cell"]

MAX_CELL = 128 * 1024
"""Characters one cell may hold (the ``csv`` module's own default limit)."""
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as the start of a formula (OWASP's CSV injection list)."""


def safe_cell(value: Any) -> Any:
    """A cell for a CSV we write: text a spreadsheet would run as a formula (``=cmd|' /C calc'!A0``,
    ``+``, ``-``, ``@``, a tab or carriage return first) gets a leading ``'``, which shows it as text;
    numbers and other text are written as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def iter_csv(text: str, *, source: str, max_cell: int = MAX_CELL) -> Iterator[tuple[int, list[str]]]:
    """``(line of the row's start, cells)`` of every row of ``text``, the header included."""
    old = csv.field_size_limit()
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    while True:
        try:
            csv.field_size_limit(max_cell + 1)
            try:
                cells = next(reader)
            finally:
                csv.field_size_limit(old)
        except StopIteration:
            return
        except csv.Error as exc:
            what = str(exc)
            if "field larger than field limit" in what:
                what = f"a cell of more than {max_cell:,} characters"
            raise InputError(f"{source}:{start}: unreadable CSV row ({what}); check the quoting") from exc
        for cell in cells:
            if len(cell) > max_cell:
                raise InputError(
                    f"{source}:{start}: a cell of {len(cell):,} characters (more than {max_cell:,}); "
                    "check the quoting"
                )
        yield start, cells
        start = reader.line_num + 1


def json_cell(cell: str, *, source: str, line: int, column: str, example: str = "") -> Any:
    """The JSON value of a CSV cell, under the JSON reader's rules; one line naming the row and column."""
    try:
        return load_json(cell, source=source, line=line)
    except JsonProblem as exc:
        hint = f"; write it as JSON, e.g. {example}" if example else "; write it as JSON"
        raise InputError(
            f"{source}:{line}: the {column} cell is not valid JSON ({exc.what.split('; ')[0]}){hint}"
        ) from exc
