"""One message per open verdict: when an alert is said, and when it is not (pure rules).

A *verdict* is what an alert is about, whichever flow found it (the nightly, a re-baselining, the
live discriminator): the family of its event (a gate — breached or undecided —, drift, a missing
baseline, a skill without queries, a live verdict, a run that ended badly), the skill and the metric —
its :func:`verdict_key`. A verdict is said

- once when it **opens** (the first time it is found, or again after it closed),
- once when it **changes**: worse (an undecided drop becomes a breach; the delta falls further than the
  gate's width below what was said), or its cause changes (another skill takes the cases),
- once when it **closes** (the gate passes again: :func:`closing_message`),
- and, while it stays open and unchanged, at most once per ``alert_repeat_after`` (a **reminder**).

Everything else is a *repeat*: stored, not sent. :func:`decide` is the rule; the store keeps each
verdict's state (``skillreach.store.alert_log``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from skillreach.service.alerts import (
    GATE_BREACHED,
    GATE_INCONCLUSIVE,
    MODEL_DRIFT,
    VERDICT_CLOSED,
    notice_payload,
)

__all__ = ["CLOSING_FAMILIES", "Finding", "Seen", "closing_message", "decide", "finding_of", "verdict_key"]

_FAMILIES: dict[str, tuple[str, int]] = {
    GATE_INCONCLUSIVE: ("gate", 1),
    GATE_BREACHED: ("gate", 2),
    MODEL_DRIFT: ("drift", 2),
}
"""Events that share a verdict, and their severity within it (an undecided drop, then a breach)."""
_SEVERITY_WORDS = {("gate", 1): "an undecided drop", ("gate", 2): "a breach"}
CLOSING_FAMILIES = frozenset({"gate", "drift"})
"""Verdicts a passing gate closes (a gate one with a message, a drift one silently)."""
KEY_CHARS = 400


@dataclass(frozen=True)
class Finding:
    """What one alert payload says about its verdict."""

    key: str
    family: str
    skill: str
    metric: str
    severity: int
    cause: str | None
    delta: float | None
    gate: float | None


@dataclass(frozen=True)
class Seen:
    """A verdict as the store keeps it: open or closed, and what was last said of it."""

    open: bool
    severity: int
    cause: str | None
    delta: float | None
    opened_at: datetime
    said_at: datetime | None


def _num(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def verdict_key(payload: Mapping[str, Any]) -> str:
    """``family:skill:metric`` (``gate:gamma:activation``); a run's alert adds the run's id (each run is
    its own)."""
    event = str(payload.get("event") or GATE_BREACHED)
    family = _FAMILIES.get(event, (event.removeprefix("skillreach."), 1))[0]
    parts = [family, str(payload.get("skill") or "-"), str(payload.get("metric") or "-")]
    if payload.get("instance"):
        parts.append(str(payload["instance"]))
    return ":".join(parts)[:KEY_CHARS]


def finding_of(payload: Mapping[str, Any]) -> Finding:
    event = str(payload.get("event") or GATE_BREACHED)
    family, severity = _FAMILIES.get(event, (event.removeprefix("skillreach."), 1))
    cause = payload.get("cause")
    return Finding(key=verdict_key(payload), family=family, skill=str(payload.get("skill") or "-"),
                   metric=str(payload.get("metric") or "-"), severity=severity,
                   cause=str(cause) if cause else None, delta=_num(payload.get("delta")),
                   gate=_num(payload.get("gate")))


def _day(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _worse_delta(found: Finding, seen: Seen) -> bool:
    """The delta moved further past the gate than the gate's own width since it was said (the
    direction of "worse" is the gate's sign: a fall for activation, a rise for false activation)."""
    if found.delta is None or seen.delta is None or not found.gate:
        return False
    return (found.delta - seen.delta) * math.copysign(1.0, found.gate) > abs(found.gate)


def decide(seen: Seen | None, found: Finding, now: datetime,
           repeat_after: timedelta) -> tuple[str | None, str]:
    """``(change, note)``: ``opened``, ``changed``, ``reminder`` or ``None`` (a repeat: not said), and
    the note the message carries about it."""
    if seen is None or not seen.open or seen.said_at is None:
        return "opened", ""
    if found.severity > seen.severity:
        was = _SEVERITY_WORDS.get((found.family, seen.severity), f"severity {seen.severity}")
        return "changed", f"worse than said at {_day(seen.said_at)} (it was {was})"
    if (found.cause or None) != (seen.cause or None):
        return "changed", f"the cause changed (said at {_day(seen.said_at)}: {seen.cause or 'none named'})"
    if _worse_delta(found, seen):
        return "changed", f"worse than said at {_day(seen.said_at)} (delta {seen.delta:+.3f} then)"
    if now - seen.said_at >= repeat_after:
        return "reminder", f"reminder: open since {_day(seen.opened_at)}"
    return None, ""


def closing_message(key: str, seen: Seen, *, run_link: str, study_id: str | None,
                    baseline_id: str | None = None) -> dict[str, Any]:
    """The one message of a gate verdict that closed: the skill's metric passes its gate again."""
    _family, skill, metric = [*key.split(":", 2), "-", "-"][:3]
    message = (f"{metric} is back within its gate; the verdict open since {_day(seen.opened_at)} is "
               "closed")
    return notice_payload(VERDICT_CLOSED, skill=skill, metric=metric, message=message, run_link=run_link,
                          study_id=study_id, baseline_id=baseline_id, closes=key)
