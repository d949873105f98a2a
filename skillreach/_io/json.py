"""The one rule for reading JSON a user hands us: a key given twice is refused (the later value would
silently win), and nesting too deep for the parser is a decoding error, not a ``RecursionError``."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DuplicateKey", "loads_strict", "no_duplicate_keys"]


class DuplicateKey(ValueError):
    """A JSON object that gives one key twice (the later value would silently win)."""


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


def loads_strict(text: str) -> Any:
    """``json.loads`` refusing duplicate keys; ``[[[[…`` thousands deep is a :class:`json.JSONDecodeError`."""
    try:
        return json.loads(text, object_pairs_hook=no_duplicate_keys)
    except RecursionError as exc:
        raise json.JSONDecodeError("nested too deeply", text, 0) from exc
