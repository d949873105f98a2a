"""The one reader of JSON and JSONL a user hands us.

The rules, each failure one :class:`JsonProblem` line naming the file and line:

- a key given twice is refused (the later value would silently win);
- nesting deeper than :data:`MAX_DEPTH` levels is refused (and ``[[[[…`` thousands deep, which the
  parser cannot hold, is the same error, never a ``RecursionError``);
- an integer literal of more than :data:`MAX_INT_DIGITS` digits is refused (Python's ``int()`` of a
  5,000-digit literal raises ``ValueError``; the check does not depend on
  ``sys.set_int_max_str_digits``);
- ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON and are refused;
- the bytes must be UTF-8 (a byte order mark is allowed);
- a file larger than the caller's byte limit is refused before it is read (its size is the one the
  file system gives, so a 20 GiB sparse file costs nothing).

:func:`loads_strict` keeps the older rule set (duplicate keys, deep nesting as a
:class:`json.JSONDecodeError`) for the callers that handle that error themselves.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skillreach.errors import InputError, NotFoundError

__all__ = [
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "DuplicateKey",
    "JsonProblem",
    "check_depth",
    "check_values",
    "decode_utf8",
    "iter_jsonl",
    "load_json",
    "loads_strict",
    "no_duplicate_keys",
    "read_bytes_limited",
    "read_json_file",
]

MAX_DEPTH = 64
"""Levels of nesting a document (or one JSONL line) may hold."""
MAX_INT_DIGITS = 100
"""Digits an integer literal may have (a count or a seed never needs more)."""

_BIG_INT = re.compile(rf"-?\d{{{MAX_INT_DIGITS + 1},}}")


class DuplicateKey(ValueError):
    """A JSON object that gives one key twice (the later value would silently win)."""


class JsonProblem(InputError):
    """JSON we refuse: ``str()`` is ``source:line: what``; ``line`` is 1-based (0: unknown)."""

    def __init__(self, source: str, line: int, what: str) -> None:
        super().__init__(f"{source}:{line}: {what}" if line else f"{source}: {what}")
        self.source = source
        self.line = line
        self.what = what


class _BigInt(ValueError):
    pass


class _NotJson(ValueError):
    pass


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads` that refuses a key given twice."""
    out = dict(pairs)
    if len(out) != len(pairs):  # rare: find the key given twice
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return out


def _parse_int(literal: str) -> int:
    digits = len(literal) - (literal[0] == "-")
    if digits > MAX_INT_DIGITS:
        raise _BigInt(literal)
    return int(literal)


def _parse_constant(name: str) -> Any:
    raise _NotJson(name)


def loads_strict(text: str) -> Any:
    """``json.loads`` refusing duplicate keys; ``[[[[…`` thousands deep is a :class:`json.JSONDecodeError`."""
    try:
        return json.loads(text, object_pairs_hook=no_duplicate_keys)
    except RecursionError as exc:
        raise json.JSONDecodeError("nested too deeply", text, 0) from exc


def check_depth(data: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether ``data`` (lists and dicts) nests at most ``max_depth`` levels; iterative."""
    return check_values(data, max_depth) != "deep"


_INT_LIMIT = 10**MAX_INT_DIGITS


def check_values(data: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """``"deep"`` when ``data`` (lists and dicts) nests more than ``max_depth`` levels, ``"int"`` when
    it holds an integer of more than :data:`MAX_INT_DIGITS` digits, else ``None``; iterative."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        elif type(item) is int and not -_INT_LIMIT < item < _INT_LIMIT:
            return "int"
        else:
            continue
        if depth > max_depth:
            return "deep"
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list, int)))
    return None


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, max(0, pos)) + 1


def load_json(
    text: str, *, source: str, line: int = 0, max_depth: int = MAX_DEPTH, allow_nan: bool = False
) -> Any:
    """Parse one JSON document under the module's rules; :class:`JsonProblem` names ``source`` and
    the line (``line``: the file line the text sits on, e.g. a JSONL line or a CSV cell; 0 when the
    text is a whole file and lines are counted in it)."""

    def where(pos: int) -> int:
        return line or _line_of(text, pos)

    try:
        data = json.loads(
            text,
            object_pairs_hook=no_duplicate_keys,
            parse_int=_parse_int,
            parse_constant=None if allow_nan else _parse_constant,
        )
    except json.JSONDecodeError as exc:
        raise JsonProblem(
            source, line or exc.lineno, f"invalid JSON at column {exc.colno} ({exc.msg}); fix the syntax"
        ) from exc
    except DuplicateKey as exc:
        key = exc.args[0]
        at = text.find(json.dumps(key))
        at = text.find(json.dumps(key), at + 1) if at >= 0 else -1
        raise JsonProblem(source, where(at), f"key {key!r} is given twice in one object; keep one") from exc
    except _BigInt as exc:
        m = _BIG_INT.search(text)
        raise JsonProblem(
            source,
            where(m.start() if m else 0),
            f"an integer of {len(exc.args[0]):,} digits (more than {MAX_INT_DIGITS}); "
            "is this the right file?",
        ) from exc
    except _NotJson as exc:
        at = text.find(exc.args[0])
        raise JsonProblem(
            source, where(at), f"{exc.args[0]} is not a JSON number; write a finite number or null"
        ) from exc
    except RecursionError as exc:
        raise JsonProblem(source, line or 1, f"nested more than {max_depth} levels deep") from exc
    except ValueError as exc:  # anything else int()/float() refuse
        raise JsonProblem(source, line or 1, f"invalid JSON ({exc}); fix the syntax") from exc
    if not check_depth(data, max_depth):
        raise JsonProblem(source, line or 1, f"nested more than {max_depth} levels deep")
    return data


def read_bytes_limited(path: Path, *, max_bytes: int, what: str) -> bytes:
    """The bytes of the regular file ``path`` when it holds at most ``max_bytes``; one line otherwise.

    ``what`` names the file for the messages (``"query set"``, ``"uplift report"``, …).
    """
    import stat

    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise NotFoundError(f"{path}: no such {what}") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror})") from exc
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a folder; pass the {what} file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: not a regular file (a FIFO, device or socket); pass the {what}")
    if st.st_size > max_bytes:
        raise InputError(
            f"{path}: {st.st_size:,} bytes, more than the {_size(max_bytes)} a {what} may hold; "
            "is this the right file?"
        )
    try:
        with path.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror})") from exc
    if len(raw) > max_bytes:  # it grew since
        raise InputError(
            f"{path}: more than the {_size(max_bytes)} a {what} may hold; is this the right file?"
        )
    return raw


def decode_utf8(raw: bytes, *, source: str) -> str:
    """``raw`` as text (a UTF-8 byte order mark dropped, ``\r\n`` and ``\r`` read as ``\n`` as
    :meth:`Path.read_text` does); :class:`JsonProblem` naming the line of the first byte that is not
    UTF-8."""
    try:
        text = raw.decode("utf-8-sig")
        return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise JsonProblem(
            source,
            line,
            f"not UTF-8 text (byte {exc.start:,}: {raw[exc.start]:#04x}); save the file as UTF-8",
        ) from exc


def read_json_file(
    path: str | os.PathLike[str], *, max_bytes: int, what: str, allow_nan: bool = False
) -> Any:
    """The JSON document in ``path`` under the module's rules (size, UTF-8, depth, digits, keys);
    ``allow_nan``: ``NaN`` and ``Infinity`` are read (a file we wrote with :func:`json.dumps`)."""
    p = Path(path)
    raw = read_bytes_limited(p, max_bytes=max_bytes, what=what)
    return load_json(decode_utf8(raw, source=str(p)), source=str(p), allow_nan=allow_nan)


def iter_jsonl(text: str, *, source: str) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of a JSONL text, each under the module's rules."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield lineno, load_json(line, source=source, line=lineno)


def _size(n: int) -> str:
    if n >= 2**30 and n % 2**30 == 0:
        return f"{n // 2**30} GiB"
    if n >= 2**20 and n % 2**20 == 0:
        return f"{n // 2**20} MiB"
    if n >= 2**10 and n % 2**10 == 0:
        return f"{n // 2**10} KiB"
    return f"{n:,} bytes"
