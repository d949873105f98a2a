"""Live events and the cursors that make ``skillreach ingest`` incremental (migration 0003).

- ``live_events``: one row per :class:`~skillreach.live.events.LiveEvent`, unique on
  ``(source, event_id)``: re-reading a file adds nothing (:func:`save_events` returns how many rows were
  actually added). :func:`load_events` reads them back for ``skillreach usage`` and the live gate.
- ``live_cursors``: one row per file read: its path, its identity (device and inode, and a digest of its
  first bytes, so a file truncated or replaced under the same name is read again from the start), the
  byte offset read up to (always just past a newline: a torn last line is left for next time) and the
  lines read so far (so a bad line is named ``file:line`` on a later run too).

Rows go in through Core statements in one transaction per batch (no ORM object per event): an ingest
of a million transcript lines stores a few hundred thousand events.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Integer, String, Text, UniqueConstraint, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from skillreach.live.events import UNKNOWN_VERSION, EventKind, LiveEvent
from skillreach.store.database import Base, Store, _insert_for, _now

__all__ = [
    "Batch",
    "FileCursor",
    "LiveCursorRow",
    "LiveEventRow",
    "SkillCallUpdate",
    "count_events",
    "cursor_key",
    "fill_skill_dir",
    "load_cursors",
    "load_events",
    "save_batch",
    "save_cursors",
    "save_events",
    "save_rows",
    "unanswered_calls",
    "update_skill_calls",
]

BATCH = 5_000
"""Events per INSERT batch (each batch one statement list in the caller's transaction)."""


class LiveEventRow(Base):
    """One prompt or skill call an agent recorded (:class:`~skillreach.live.events.LiveEvent`)."""

    __tablename__ = "live_events"
    __table_args__ = (UniqueConstraint("source", "event_id", name="uq_live_event"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(512))
    event_id: Mapped[str] = mapped_column(String(256))
    kind: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime] = mapped_column(index=True)
    agent: Mapped[str] = mapped_column(String(64))
    session_id: Mapped[str] = mapped_column(String(256), default="")
    prompt_id: Mapped[str | None] = mapped_column(String(256), default=None)
    skill: Mapped[str | None] = mapped_column(String(256), default=None, index=True)
    skill_ran: Mapped[str | None] = mapped_column(String(256), default=None)
    success: Mapped[bool | None] = mapped_column(Boolean, default=None)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    invocation: Mapped[str | None] = mapped_column(String(32), default=None)
    model: Mapped[str | None] = mapped_column(String(256), default=None)
    cwd: Mapped[str | None] = mapped_column(Text, default=None)
    git_branch: Mapped[str | None] = mapped_column(String(256), default=None)
    sidechain: Mapped[bool] = mapped_column(Boolean, default=False)
    skill_dir: Mapped[str | None] = mapped_column(Text, default=None)
    skill_version: Mapped[str] = mapped_column(String(128), default=UNKNOWN_VERSION)
    prompt_text: Mapped[str | None] = mapped_column(Text, default=None)


class LiveCursorRow(Base):
    """How far one file has been read (``key``: SHA-256 of its absolute path)."""

    __tablename__ = "live_cursors"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    path: Mapped[str] = mapped_column(Text)
    identity: Mapped[str] = mapped_column(String(128))
    head_digest: Mapped[str] = mapped_column(String(80))
    head_len: Mapped[int] = mapped_column(Integer)
    offset: Mapped[int] = mapped_column(BigInteger)
    lines: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(default=_now)


# ----------------------------------------------------------------------------------------------- events

_COLUMNS = tuple(c.name for c in LiveEventRow.__table__.columns if c.name != "id")


def _row(e: LiveEvent) -> dict[str, Any]:
    at = e.at if e.at.tzinfo is not None else e.at.replace(tzinfo=UTC)
    return {
        "source": e.source,
        "event_id": e.event_id,
        "kind": str(e.kind),
        "at": at.astimezone(UTC),
        "agent": e.agent,
        "session_id": e.session_id,
        "prompt_id": e.prompt_id,
        "skill": e.skill,
        "skill_ran": e.skill_ran,
        "success": e.success,
        "hidden": e.hidden,
        "invocation": e.invocation,
        "model": e.model,
        "cwd": e.cwd,
        "git_branch": e.git_branch,
        "sidechain": e.sidechain,
        "skill_dir": e.skill_dir,
        "skill_version": e.skill_version,
        "prompt_text": e.prompt_text,
    }


def _batches(events: Iterable[LiveEvent], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for e in events:
        batch.append(_row(e))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _insert_new(store: Store) -> Any:
    table = LiveEventRow.__table__
    return (
        _insert_for(store.backend)(table)
        .on_conflict_do_nothing(index_elements=[table.c.source, table.c.event_id])
        .returning(table.c.id)
    )


def save_events(store: Store, events: Iterable[LiveEvent]) -> int:
    """Store ``events``; the number actually added (an event already stored — same ``source`` and
    ``event_id`` — is left as it is: re-saving adds 0). All in one transaction."""
    stmt = _insert_new(store)
    added = 0
    with store.writing() as s:
        conn = s.connection()
        for batch in _batches(events, BATCH):
            added += len(conn.execute(stmt, batch).all())
    return added


def save_rows(store: Store, rows: Sequence[dict[str, Any]]) -> int:
    """:func:`save_events` for rows already in the table's shape (every column of
    :class:`LiveEventRow` but ``id``; ``at`` timezone-aware): the ingest's hot path, no model per event."""
    if not rows:
        return 0
    stmt = _insert_new(store)
    added = 0
    with store.writing() as s:
        conn = s.connection()
        for i in range(0, len(rows), BATCH):
            added += len(conn.execute(stmt, rows[i : i + BATCH]).all())
    return added


@dataclass(frozen=True, slots=True)
class SkillCallUpdate:
    """What a later line says of a skill call already stored (its tool result, its skill folder)."""

    event_id: str
    skill_ran: str | None = None
    success: bool | None = None
    skill_dir: str | None = None
    skill_version: str | None = None


def _apply_updates(s: Session, source: str, updates: Sequence[SkillCallUpdate]) -> int:
    table = LiveEventRow.__table__
    changed = 0
    for u in updates:
        values = {
            k: v
            for k, v in (
                ("skill_ran", u.skill_ran),
                ("success", u.success),
                ("skill_dir", u.skill_dir),
                ("skill_version", u.skill_version),
            )
            if v is not None
        }
        if values:
            res = s.execute(
                update(LiveEventRow)
                .where(table.c.source == source, table.c.event_id == u.event_id)
                .values(**values)
            )
            changed += int(getattr(res, "rowcount", 0) or 0)
    return changed


def update_skill_calls(store: Store, source: str, updates: Sequence[SkillCallUpdate]) -> int:
    """Fill in the fields ``updates`` give (never blank one) on stored skill calls of ``source``; the
    number of rows changed."""
    if not updates:
        return 0
    with store.writing() as s:
        return _apply_updates(s, source, updates)


def _fill_dir(s: Session, source: str, session_id: str, before: datetime, folder: str) -> bool:
    table = LiveEventRow.__table__
    row_id = s.execute(
        select(table.c.id)
        .where(
            table.c.source == source,
            table.c.session_id == session_id,
            table.c.kind == "skill",
            table.c.at <= before,
            table.c.skill_dir.is_(None),
        )
        .order_by(table.c.at.desc(), table.c.id.desc())
        .limit(1)
    ).scalar()
    if row_id is None:
        return False
    s.execute(update(LiveEventRow).where(table.c.id == row_id).values(skill_dir=folder))
    return True


def fill_skill_dir(store: Store, source: str, session_id: str, before: datetime, folder: str) -> bool:
    """Give the last skill call of ``session_id`` (at or before ``before``, without a folder yet) the
    folder a later ``Base directory for this skill:`` line names; whether one was found."""
    with store.writing() as s:
        return _fill_dir(s, source, session_id, before, folder)


@dataclass(slots=True)
class Batch:
    """What an ingest stores at once, in one transaction (:func:`save_batch`): new event rows, the
    updates later lines make to stored skill calls, the folders of calls read before (``(source,
    session, time, folder)``), and the cursors of the files whose events are all in it or stored."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    updates: list[tuple[str, SkillCallUpdate]] = field(default_factory=list)
    dirs: list[tuple[str, str, datetime, str]] = field(default_factory=list)
    cursors: list[FileCursor] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows) + len(self.updates) + len(self.dirs) + len(self.cursors)


_SQLITE_COLUMNS = (*(c for c in _COLUMNS if c != "at"), "at")
_SQLITE_INSERT = (
    f"INSERT OR IGNORE INTO live_events ({', '.join(_SQLITE_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_SQLITE_COLUMNS))})"
)
_ROW_VALUES = operator.itemgetter(*_SQLITE_COLUMNS[:-1])


def _sqlite_time(at: datetime) -> str:
    """A time as SQLAlchemy's SQLite ``DateTime`` stores it (UTC, the zone dropped, as UTCDateTime does)."""
    if at.tzinfo is not None:
        at = at.astimezone(UTC).replace(tzinfo=None)
    return at.isoformat(" ", "microseconds")


def _sqlite_insert(conn: Any, rows: Sequence[dict[str, Any]], added: dict[str, int]) -> None:
    """SQLite: the rows as tuples through the driver's ``executemany`` (no statement compiled per row;
    booleans go in as the integers SQLAlchemy stores); the rows added per source from the connection's
    change count."""
    raw = conn.connection.dbapi_connection
    by_source: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        by_source.setdefault(r["source"], []).append((*_ROW_VALUES(r), _sqlite_time(r["at"])))
    for source, values_list in by_source.items():
        before = raw.total_changes
        conn.exec_driver_sql(_SQLITE_INSERT, values_list)
        added[source] = added.get(source, 0) + raw.total_changes - before


def save_batch(store: Store, batch: Batch) -> dict[str, int]:
    """Store ``batch`` in one transaction: rows first (duplicates ignored), then updates and folders,
    then cursors. The events actually added, per source."""
    added: dict[str, int] = {}
    if not len(batch):
        return added
    table = LiveEventRow.__table__
    stmt = (
        _insert_for(store.backend)(table)
        .on_conflict_do_nothing(index_elements=[table.c.source, table.c.event_id])
        .returning(table.c.source)
    )
    with store.writing() as s:
        conn = s.connection()
        if store.backend == "sqlite":
            _sqlite_insert(conn, batch.rows, added)
        else:
            for i in range(0, len(batch.rows), BATCH):
                for (source,) in conn.execute(stmt, batch.rows[i : i + BATCH]):
                    added[source] = added.get(source, 0) + 1
        for source, u in batch.updates:
            _apply_updates(s, source, [u])
        for source, session_id, at, folder in batch.dirs:
            _fill_dir(s, source, session_id, at, folder)
        if batch.cursors:
            conn.execute(_cursor_upsert(store), [_cursor_row(c) for c in batch.cursors])
    return added


def unanswered_calls(store: Store, sources: Collection[str]) -> set[bytes]:
    """Ids of the stored skill calls of ``sources`` whose result has not been read (a later line may
    still bring it), as bytes."""
    if not sources:
        return set()
    table = LiveEventRow.__table__
    stmt = select(table.c.event_id).where(
        table.c.source.in_(list(sources)),
        table.c.kind == "skill",
        table.c.skill_ran.is_(None),
        table.c.success.is_(None),
    )
    with store.session() as s:
        return {str(e).encode() for e in s.scalars(stmt)}


def _event(row: Any) -> LiveEvent:
    m = row._mapping
    at = m["at"]
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    fields = {c: m[c] for c in _COLUMNS}
    fields["at"] = at
    fields["kind"] = EventKind(m["kind"])
    fields["session_id"] = fields["session_id"] or ""
    fields["hidden"] = bool(fields["hidden"])
    fields["sidechain"] = bool(fields["sidechain"])
    fields["skill_version"] = fields["skill_version"] or UNKNOWN_VERSION
    return LiveEvent.model_construct(**fields)


def load_events(
    store: Store,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    skills: Collection[str] | None = None,
    include_sidechain: bool = False,
) -> list[LiveEvent]:
    """Stored events with ``since <= at < until``, oldest first. Prompts are always returned (they are
    the denominator); ``skills`` filters skill calls only (by the skill asked for). Subagents' events
    (``sidechain``) only with ``include_sidechain``."""
    table = LiveEventRow.__table__
    cols = [table.c[c] for c in _COLUMNS]
    stmt = select(*cols).order_by(table.c.at, table.c.id)
    if since is not None:
        stmt = stmt.where(table.c.at >= since)
    if until is not None:
        stmt = stmt.where(table.c.at < until)
    if not include_sidechain:
        stmt = stmt.where(table.c.sidechain.is_(False))
    if skills is not None:
        stmt = stmt.where((table.c.kind == str(EventKind.PROMPT)) | table.c.skill.in_(list(skills)))
    with store.session() as s:
        return [_event(r) for r in s.execute(stmt)]


def count_events(store: Store, source: str | None = None) -> int:
    """Events stored (of one source)."""
    from sqlalchemy import func

    table = LiveEventRow.__table__
    stmt = select(func.count()).select_from(table)
    if source is not None:
        stmt = stmt.where(table.c.source == source)
    with store.session() as s:
        return int(s.execute(stmt).scalar_one())


# ---------------------------------------------------------------------------------------------- cursors


@dataclass(frozen=True, slots=True)
class FileCursor:
    """How far a file was read: its identity then (``dev:inode``, digest of its first ``head_len``
    bytes) and the byte offset (just past a newline) and line count reached."""

    path: str
    identity: str
    head_digest: str
    head_len: int
    offset: int
    lines: int


def cursor_key(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()


def load_cursors(store: Store, paths: Iterable[str]) -> dict[str, FileCursor]:
    """The stored cursors of ``paths`` (absolute), by path."""
    wanted = {cursor_key(p): p for p in paths}
    if not wanted:
        return {}
    out: dict[str, FileCursor] = {}
    keys = list(wanted)
    with store.session() as s:
        for i in range(0, len(keys), 500):
            for r in s.scalars(select(LiveCursorRow).where(LiveCursorRow.key.in_(keys[i : i + 500]))):
                out[r.path] = FileCursor(r.path, r.identity, r.head_digest, r.head_len, r.offset, r.lines)
    return out


def _cursor_row(c: FileCursor) -> dict[str, Any]:
    return {
        "key": cursor_key(c.path),
        "path": c.path,
        "identity": c.identity,
        "head_digest": c.head_digest,
        "head_len": c.head_len,
        "offset": c.offset,
        "lines": c.lines,
        "updated_at": _now(),
    }


def _cursor_upsert(store: Store) -> Any:
    table = LiveCursorRow.__table__
    ins = _insert_for(store.backend)(table)
    return ins.on_conflict_do_update(
        index_elements=[table.c.key],
        set_={
            k: ins.excluded[k]
            for k in ("path", "identity", "head_digest", "head_len", "offset", "lines", "updated_at")
        },
    )


def save_cursors(store: Store, cursors: Iterable[FileCursor]) -> None:
    """Store (insert or replace) ``cursors``."""
    rows = [_cursor_row(c) for c in cursors]
    if rows:
        with store.writing() as s:
            s.connection().execute(_cursor_upsert(store), rows)
