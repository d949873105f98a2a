"""The same alert once: alert keys, repeats within ``alert_repeat_after``, and muted keys.

An alert's key is ``kind:skill:metric[:cause]`` (``gate.breached:pdf-documents:activation:ship-it``):
what it is about, not when or by which study. A key already sent within the repeat window is stored
as ``repeat`` and not sent again; a key muted (``skillreach alerts mute KEY --for 7d``; a key's prefix
at a ``:`` mutes every key under it, ``gate.breached:pdf-documents``) is stored as ``muted``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, select

from skillreach.store.database import AlertMuteRow, AlertRow, Store

__all__ = ["SILENT", "alert_key", "mute", "muted_by", "mutes", "sent_within", "unmute"]

SILENT = ("repeat", "muted")
"""Deliveries of an alert that was stored but not sent."""


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def alert_key(payload: Mapping[str, Any]) -> str:
    """``kind:skill:metric[:cause]`` of an alert payload (the event without ``skillreach.``)."""
    kind = str(payload.get("event") or "skillreach.gate.breached").removeprefix("skillreach.")
    cause = payload.get("cause") or payload.get("taken_by") or ""
    parts = [kind, str(payload.get("skill") or "-"), str(payload.get("metric") or "-")]
    return ":".join([*parts, str(cause)] if cause else parts)


def sent_within(store: Store, key: str, window: timedelta, now: datetime | None = None, *,
                trigger: str | None = None) -> bool:
    """Was an alert of ``key`` sent (stored and not silenced) within ``window`` before ``now`` — for the
    same ``trigger`` (the event a re-baselining ran for; ``""`` a nightly) when one is given? A new
    event (the thief's description edited after it was added) is a new situation: said again."""
    since = (now or _now()) - window
    stmt = (select(AlertRow).where(AlertRow.key == key, AlertRow.delivery.not_in(SILENT))
            .order_by(AlertRow.created_at.desc()).limit(50))
    with store.session() as s:
        rows = list(s.scalars(stmt))
    return any(_aware(r.created_at) >= since
               and (trigger is None or str((r.payload or {}).get("trigger", "")) == trigger) for r in rows)


def mutes(store: Store, now: datetime | None = None) -> list[tuple[str, datetime]]:
    """The keys muted now, with when each mute ends."""
    at = now or _now()
    with store.session() as s:
        rows = list(s.scalars(select(AlertMuteRow).order_by(AlertMuteRow.key)))
    return [(r.key, _aware(r.until)) for r in rows if _aware(r.until) > at]


def muted_by(store: Store, key: str, now: datetime | None = None) -> str | None:
    """The mute (the key itself or a prefix of it at a ``:``) that silences ``key`` now, if any."""
    for muted, _until in mutes(store, now):
        if key == muted or key.startswith(muted + ":"):
            return muted
    return None


def mute(store: Store, key: str, until: datetime) -> None:
    with store.writing() as s:
        row = s.get(AlertMuteRow, key)
        if row is None:
            s.add(AlertMuteRow(key=key, until=until))
        else:
            row.until = until


def unmute(store: Store, key: str) -> bool:
    with store.writing() as s:
        if s.get(AlertMuteRow, key) is None:
            return False
        s.execute(delete(AlertMuteRow).where(AlertMuteRow.key == key))
        return True
