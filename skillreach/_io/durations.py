"""The one reader of durations a user writes (``--since 30d``, ``gc --keep 12w``, ``alerts mute --for
24h``, ``alert_repeat_after``, ``live_gates.recent``): a number and a unit, bounded.

``30s``, ``15m``, ``24h``, ``7d``, ``2w`` (or plain seconds); at most :data:`MAX_DURATION` (a hundred
years: any window back from now, or a mute forward, still lands on a date), never negative, NaN or
infinite. Anything else is a :class:`DurationError` (a ``ValueError``) whose message says what was
wrong and how to write one; callers put the flag or setting in front.
"""

from __future__ import annotations

import math
from datetime import timedelta

__all__ = ["MAX_DURATION", "DurationError", "parse_duration"]

MAX_DURATION = timedelta(days=36_500)
"""A hundred years: the longest duration read."""
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_MAX_TEXT = 64
"""Characters a duration may have (``1e12d`` is short; a 5,000-digit number is not a duration)."""
_HOW = "write e.g. 30m, 24h, 7d"


class DurationError(ValueError):
    """A text that is not a duration of :func:`parse_duration`'s forms, or one out of its bounds."""


def parse_duration(text: str) -> timedelta:
    """``30s``, ``15m``, ``24h``, ``7d``, ``2w`` (or plain seconds) as a timedelta; a
    :class:`DurationError` naming the forms otherwise, or the bound when it is longer than a hundred
    years."""
    raw = str(text)
    value = raw.strip().lower()
    shown = repr(raw) if len(raw) <= _MAX_TEXT else f"{raw[:20]!r}… ({len(raw):,} characters)"
    if len(value) > _MAX_TEXT:
        raise DurationError(f"{shown} is not a duration; {_HOW}")
    unit = value[-1:] if value[-1:] in _UNITS else "s"
    number = value[:-1] if value[-1:] in _UNITS else value
    try:
        amount = float(number)
    except ValueError:
        amount = math.nan
    if math.isnan(amount) or amount < 0:
        raise DurationError(f"{shown} is not a duration; {_HOW}")
    seconds = amount * _UNITS[unit]
    if seconds > MAX_DURATION.total_seconds():  # inf included
        raise DurationError(f"{shown} is longer than a hundred years (36500d); {_HOW}")
    return timedelta(seconds=seconds)
