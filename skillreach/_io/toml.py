"""The one reader of TOML a user hands us (config files): ``tomllib`` within limits.

Each failure is one :class:`~skillreach._io.json.JsonProblem` line naming the file and line: no NUL
byte, nesting at most :data:`~skillreach._io.json.MAX_DEPTH` levels (``tomllib`` recurses: a
``RecursionError`` is the same error), integers of at most :data:`~skillreach._io.json.MAX_INT_DIGITS`
digits (``int()`` of 5,000 digits raises ``ValueError``; checked on the values too, whatever
``sys.set_int_max_str_digits`` says), and the caller's byte limit. The caller decodes UTF-8.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from skillreach._io.json import MAX_DEPTH, MAX_INT_DIGITS, JsonProblem, check_values

__all__ = ["load_toml"]

_BIG_INT = re.compile(rf"[-+]?\d[\d_]{{{MAX_INT_DIGITS},}}")
_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)")
_DEEP = re.compile(rf"[\[{{](?:[^\[\]{{}}]*[\[{{]){{{MAX_DEPTH},}}")


def load_toml(text: str, *, source: str, max_bytes: int) -> dict[str, Any]:
    """The table in ``text`` (a file's text, named ``source``); :class:`JsonProblem` otherwise."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise JsonProblem(source, 0, f"{size:,} bytes of TOML, more than the {max_bytes:,} allowed")
    if "\0" in text:
        raise JsonProblem(source, _line(text, text.index("\0")), "a NUL byte (\\0) is not allowed; remove it")
    big = f"an integer of more than {MAX_INT_DIGITS} digits; is this the right file?"
    deep = f"nested more than {MAX_DEPTH} levels deep"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = _AT.search(str(exc))
        if m is not None and _DEEP.search(text):
            raise JsonProblem(source, _first(text, _DEEP), deep) from exc
        what = _AT.sub("", str(exc)).strip()
        raise JsonProblem(
            source, int(m.group(1)) if m else 0, f"not valid TOML ({what}); fix the syntax"
        ) from exc
    except RecursionError as exc:
        raise JsonProblem(source, _first(text, _DEEP), deep) from exc
    except ValueError as exc:  # int() of a literal too long for it
        raise JsonProblem(source, _first(text, _BIG_INT), big) from exc
    problem = check_values(data)
    if problem == "deep":
        raise JsonProblem(source, _first(text, _DEEP), deep)
    if problem == "int":
        raise JsonProblem(source, _first(text, _BIG_INT), big)
    return data


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _first(text: str, pattern: re.Pattern[str]) -> int:
    m = pattern.search(text)
    return _line(text, m.start()) if m else 0
