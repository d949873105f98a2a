"""The alerts' outbox, their verdicts, and muted keys.

- **Outbox** (``alert_sends``): an alert is stored with one *send* per webhook (its ``channel``: label
  and digest, never the URL) before anything is posted. A send is ``pending`` until a 2xx makes it
  ``delivered``; a failed try sets its next try (``next_try_at``) and its reason; after the last try it
  is ``failed``. Whoever posts first *claims* the send (its try counted, its next try moved past the
  post's deadline) with a compare-and-set on the try count, so two processes never post the same try.
  The alert row's ``delivery`` sums its sends up: ``pending``, ``delivered`` (every webhook took it),
  ``failed``; ``repeat`` and ``muted`` are alerts stored and not sent, ``none`` one with no webhook.
- **Verdicts** (``alert_verdicts``): per :func:`skillreach.service.verdicts.verdict_key`, open or closed,
  with what was last said of it (severity, cause, delta, when).
- **Keys and mutes**: an alert's key is ``kind:skill:metric[:cause]``
  (``gate.breached:pdf-documents:activation:ship-it``); a key muted (``skillreach alerts mute KEY --for
  7d``; a key's prefix at a ``:`` mutes every key under it, ``gate.breached:pdf-documents``) is stored
  as ``muted``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Float, ForeignKey, Integer, String, UniqueConstraint, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from skillreach.store.database import AlertMuteRow, AlertRow, Base, Store, _now, alert_row

__all__ = [
    "SILENT",
    "AlertSendRow",
    "AlertVerdictRow",
    "Claim",
    "Failing",
    "alert_key",
    "claim_due",
    "delivery_counts",
    "drop_channels",
    "failing_channels",
    "latest_alerts",
    "mute",
    "muted_by",
    "mutes",
    "next_due",
    "open_once",
    "open_verdicts",
    "queue_alert",
    "record_try",
    "save_verdict",
    "sends_of",
    "sent_within",
    "unmute",
    "verdict_of",
]

SILENT = ("repeat", "muted")
"""Deliveries of an alert that was stored but not sent."""
KEY_CHARS = 400


class AlertSendRow(Base):
    """One alert to one webhook: pending, delivered (a 2xx) or failed (after the last try)."""

    __tablename__ = "alert_sends"
    __table_args__ = (UniqueConstraint("alert_id", "channel", name="uq_alert_send"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"), index=True)
    channel: Mapped[str] = mapped_column(String(200))
    """``http://host:port/…#digest`` (:func:`skillreach.service.delivery.channel_of`): never the URL."""
    state: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_try_at: Mapped[datetime | None] = mapped_column(default=None, index=True)
    first_failed_at: Mapped[datetime | None] = mapped_column(default=None)
    last_error: Mapped[str | None] = mapped_column(String(300), default=None)
    done_at: Mapped[datetime | None] = mapped_column(default=None)


class AlertVerdictRow(Base):
    """What an alert is about (``gate:gamma:activation``), open or closed, and what was last said."""

    __tablename__ = "alert_verdicts"

    key: Mapped[str] = mapped_column(String(400), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), default="open")  # open|closed
    severity: Mapped[int] = mapped_column(Integer, default=1)
    cause: Mapped[str | None] = mapped_column(String(200), default=None)
    delta: Mapped[float | None] = mapped_column(Float, default=None)
    opened_at: Mapped[datetime] = mapped_column(default=_now)
    said_at: Mapped[datetime | None] = mapped_column(default=None)
    closed_at: Mapped[datetime | None] = mapped_column(default=None)
    alert_id: Mapped[int | None] = mapped_column(Integer, default=None)
    """The last alert said of it (``alerts.id``)."""


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


# ---------------------------------------------------------------------------------------- the outbox


@dataclass(frozen=True)
class Claim:
    """A send claimed for one try: post ``payload`` to the webhook of ``channel``."""

    send_id: int
    alert_id: int
    channel: str
    attempt: int
    payload: dict[str, Any]


def queue_alert(store: Store, payload: Mapping[str, Any], *, key: str, channels: Sequence[str],
                study_id: str | None = None, claim_for: timedelta | None = None,
                now: datetime | None = None) -> tuple[AlertRow, list[Claim]]:
    """Store an alert as pending, one send per channel (none: ``delivery="none"``). With ``claim_for``
    the caller holds the first try of every send for that long (it posts at once); without, the sends are
    due now (the outbox posts them)."""
    at = now or _now()
    claims: list[Claim] = []
    with store.writing() as s:  # the alert and its sends in one transaction: never one without the other
        row = alert_row(payload, study_id=study_id, key=key[:KEY_CHARS],
                        delivery="pending" if channels else "none")
        s.add(row)
        s.flush()
        for channel in dict.fromkeys(channels):
            send = AlertSendRow(alert_id=row.id, channel=channel[:200], state="pending",
                                attempts=1 if claim_for is not None else 0,
                                next_try_at=at + claim_for if claim_for is not None else at)
            s.add(send)
            s.flush()
            if claim_for is not None:
                claims.append(Claim(send.id, row.id, send.channel, 1, dict(row.payload or {})))
    return row, claims


def claim_due(store: Store, *, claim_for: timedelta, now: datetime | None = None,
              limit: int = 200) -> list[Claim]:
    """The pending sends whose next try is due, each claimed for ``claim_for`` (its try counted): a send
    another process claimed in between is left to it."""
    at = now or _now()
    stmt = (select(AlertSendRow.id, AlertSendRow.attempts).where(AlertSendRow.state == "pending",
                                                                 AlertSendRow.next_try_at <= at)
            .order_by(AlertSendRow.next_try_at, AlertSendRow.id).limit(limit))
    with store.session() as s:
        due = list(s.execute(stmt))
    claimed: list[int] = []
    with store.writing() as s:
        for send_id, seen in due:
            done = s.execute(update(AlertSendRow).where(
                AlertSendRow.id == send_id, AlertSendRow.state == "pending", AlertSendRow.attempts == seen,
                AlertSendRow.next_try_at <= at,
            ).values(attempts=seen + 1, next_try_at=at + claim_for))
            if done.rowcount == 1:  # type: ignore[attr-defined]
                claimed.append(send_id)
    if not claimed:
        return []
    rows = (select(AlertSendRow, AlertRow.payload).join(AlertRow, AlertRow.id == AlertSendRow.alert_id)
            .where(AlertSendRow.id.in_(claimed)).order_by(AlertSendRow.alert_id, AlertSendRow.id))
    with store.session() as s:
        return [Claim(send.id, send.alert_id, send.channel, send.attempts, dict(payload or {}))
                for send, payload in s.execute(rows)]


def record_try(store: Store, claim: Claim, *, ok: bool, error: str | None = None,
               retry_at: datetime | None = None, now: datetime | None = None) -> tuple[str, str]:
    """What one try did: ``delivered`` (a 2xx), ``pending`` again until ``retry_at``, or ``failed`` (no
    ``retry_at``: the last try, or an answer a retry will not change). The alert's own ``delivery``
    follows its sends. Returns ``(the send's state, the alert's delivery)``."""
    at = now or _now()
    with store.writing() as s:
        send = s.get(AlertSendRow, claim.send_id)
        if send is None:  # its alert was deleted (gc) meanwhile
            return "gone", "gone"
        if ok:
            send.state, send.done_at, send.next_try_at = "delivered", at, None
        else:
            send.last_error = (error or "failed")[:300]
            send.first_failed_at = send.first_failed_at or at
            if retry_at is None:
                send.state, send.done_at, send.next_try_at = "failed", at, None
            else:
                send.state, send.next_try_at = "pending", retry_at
        s.flush()
        return send.state, _sum_up(s, send.alert_id)


def _sum_up(s: Session, alert_id: int) -> str:
    """The alert's ``delivery`` from its sends' states, stored and returned."""
    states = set(s.scalars(select(AlertSendRow.state).where(AlertSendRow.alert_id == alert_id)))
    alert = s.get(AlertRow, alert_id)
    if alert is None or not states:
        return "gone"
    if states == {"delivered"}:
        alert.delivery, alert.delivered = "delivered", True
    elif "pending" in states:
        alert.delivery, alert.delivered = "pending", False
    else:
        alert.delivery, alert.delivered = "failed", False
    return alert.delivery


def drop_channels(store: Store, keep: Iterable[str], *, now: datetime | None = None) -> int:
    """Pending sends to a webhook no longer configured become ``failed`` (its URL is gone: nothing can
    post them); returns how many."""
    at = now or _now()
    kept = list(keep)
    with store.writing() as s:
        stmt = select(AlertSendRow).where(AlertSendRow.state == "pending")
        if kept:
            stmt = stmt.where(AlertSendRow.channel.not_in(kept))
        rows = list(s.scalars(stmt))
        for send in rows:
            send.state, send.done_at, send.next_try_at = "failed", at, None
            send.last_error = "the webhook is no longer configured (SKILLREACH_ALERT_WEBHOOKS)"
        s.flush()
        for alert_id in {r.alert_id for r in rows}:
            _sum_up(s, alert_id)
    return len(rows)


def next_due(store: Store) -> datetime | None:
    """When the next pending send is due (``None``: nothing pending)."""
    with store.session() as s:
        when = s.scalar(select(func.min(AlertSendRow.next_try_at)).where(AlertSendRow.state == "pending"))
    return _aware(when) if when is not None else None


@dataclass(frozen=True)
class Failing:
    """A webhook whose oldest undelivered alert first failed at ``since``."""

    channel: str
    since: datetime
    pending: int
    last_error: str


def failing_channels(store: Store, *, since_before: datetime) -> list[Failing]:
    """Webhooks with pending sends that have been failing since before ``since_before``."""
    stmt = (select(AlertSendRow.channel, func.min(AlertSendRow.first_failed_at), func.count(),
                   func.max(AlertSendRow.last_error))
            .where(AlertSendRow.state == "pending", AlertSendRow.first_failed_at.is_not(None))
            .group_by(AlertSendRow.channel))
    with store.session() as s:
        rows = list(s.execute(stmt))
    return [Failing(channel, _aware(first), int(n), str(err or "")) for channel, first, n, err in rows
            if first is not None and _aware(first) <= since_before]


def sends_of(store: Store, alert_ids: Iterable[int]) -> dict[int, list[AlertSendRow]]:
    """Each alert's sends (for ``alerts list``)."""
    ids = list(alert_ids)
    out: dict[int, list[AlertSendRow]] = {i: [] for i in ids}
    if not ids:
        return out
    with store.session() as s:
        for send in s.scalars(select(AlertSendRow).where(AlertSendRow.alert_id.in_(ids))
                              .order_by(AlertSendRow.id)):
            out[send.alert_id].append(send)
    return out


def latest_alerts(store: Store, limit: int, *, delivery: str | None = None) -> list[AlertRow]:
    """The newest ``limit`` alerts (of one ``delivery`` when given), oldest first."""
    stmt = select(AlertRow).order_by(AlertRow.created_at.desc(), AlertRow.id.desc()).limit(limit)
    if delivery is not None:
        stmt = stmt.where(AlertRow.delivery == delivery)
    with store.session() as s:
        return list(reversed(list(s.scalars(stmt))))


def delivery_counts(store: Store) -> dict[str, int]:
    """Alerts still ``pending`` and alerts that ``failed`` (``skillreach status``)."""
    stmt = (select(AlertRow.delivery, func.count()).where(AlertRow.delivery.in_(("pending", "failed")))
            .group_by(AlertRow.delivery))
    with store.session() as s:
        found = {str(k): int(n) for k, n in s.execute(stmt)}
    return {"pending": found.get("pending", 0), "failed": found.get("failed", 0)}


# ------------------------------------------------------------------------------------------ verdicts


def verdict_of(store: Store, key: str) -> AlertVerdictRow | None:
    with store.session() as s:
        return s.get(AlertVerdictRow, key[:KEY_CHARS])


def open_verdicts(store: Store, prefix: str = "") -> list[AlertVerdictRow]:
    stmt = select(AlertVerdictRow).where(AlertVerdictRow.state == "open").order_by(AlertVerdictRow.key)
    if prefix:
        stmt = stmt.where(AlertVerdictRow.key.startswith(prefix, autoescape=True))
    with store.session() as s:
        return list(s.scalars(stmt))


def open_once(store: Store, key: str, **fields: Any) -> bool:
    """Open the verdict ``key`` unless it is open already — atomically, so two processes that find it at
    once open (and say) it once: ``True`` for the one that opened it."""
    at = fields.pop("opened_at", None) or _now()
    try:
        with store.writing() as s:
            s.add(AlertVerdictRow(key=key[:KEY_CHARS], state="open", opened_at=at, **fields))
        return True
    except IntegrityError:  # it exists: reopen it only if it is closed
        with store.writing() as s:
            done = s.execute(update(AlertVerdictRow).where(AlertVerdictRow.key == key[:KEY_CHARS],
                                                           AlertVerdictRow.state == "closed")
                             .values(state="open", opened_at=at, closed_at=None, **fields))
            return bool(done.rowcount == 1)  # type: ignore[attr-defined]


def save_verdict(store: Store, key: str, **fields: Any) -> None:
    """Create or update the verdict ``key`` with ``fields`` (state, severity, cause, delta, opened_at,
    said_at, closed_at, alert_id)."""
    with store.writing() as s:
        row = s.get(AlertVerdictRow, key[:KEY_CHARS])
        if row is None:
            s.add(AlertVerdictRow(key=key[:KEY_CHARS], **fields))
            return
        for name, value in fields.items():
            setattr(row, name, value)


# ------------------------------------------------------------------------------------- keys and mutes


def alert_key(payload: Mapping[str, Any]) -> str:
    """``kind:skill:metric[:cause]`` of an alert payload (the event without ``skillreach.``)."""
    kind = str(payload.get("event") or "skillreach.gate.breached").removeprefix("skillreach.")
    cause = payload.get("cause") or payload.get("taken_by") or ""
    parts = [kind, str(payload.get("skill") or "-"), str(payload.get("metric") or "-")]
    return ":".join([*parts, str(cause)] if cause else parts)[:KEY_CHARS]


def sent_within(store: Store, key: str, window: timedelta, now: datetime | None = None, *,
                trigger: str | None = None) -> bool:
    """Was an alert of ``key`` sent (stored and not silenced) within ``window`` before ``now`` — for the
    same ``trigger`` (the event a re-baselining ran for; ``""`` a nightly) when one is given?"""
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
        if muted.strip() and (key == muted or key.startswith(muted + ":")):
            return muted
    return None


def mute(store: Store, key: str, until: datetime) -> None:
    """Mute ``key`` (a key or a prefix of one) until ``until``; an empty or blank key is refused
    (``ValueError``): it would be a prefix of nothing, or read as one of everything."""
    if not key.strip():
        raise ValueError("an empty key mutes nothing")
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
