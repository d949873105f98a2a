"""The project's own database: studies, probe records, artifacts, baselines, snapshots and alerts.

SQLAlchemy 2 (typed ORM) over SQLite by default (``<home>/skillreach.db``, WAL journal, a busy timeout,
so several flows may write at once) or PostgreSQL by URL (``postgresql+psycopg://…``). The schema is
changed only by numbered Alembic migrations in ``skillreach/migrations/versions``, applied when a store
is opened (no ``alembic.ini`` needed). Nothing secret is ever written here: configurations are
redacted before they are stored and alert payloads carry no webhook URL.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, sessionmaker
from sqlalchemy.types import TypeDecorator

from skillreach.errors import ConfigError
from skillreach.models import ProbeRecord
from skillreach.store.limits import OPENED, pg_timeouts
from skillreach.store.limits import retry_lost_connection as _retry_lost_connection
from skillreach.store.schema_guard import refuse_newer

__all__ = [
    "AlertRow",
    "ArtifactRow",
    "Base",
    "BaselineRow",
    "CatalogEntryRow",
    "CatalogSnapshotRow",
    "ModelSnapshotRow",
    "ProbeRow",
    "Store",
    "StudyLock",
    "StudyRow",
    "alert_row",
    "lock_study",
    "open_store",
]

log = logging.getLogger("skillreach.store.database")

HEAD = "0005"
MIGRATIONS = Path(__file__).with_name("migrations")


def _now() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps none)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
    }


class StudyRow(Base):
    __tablename__ = "studies"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=_now)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    status: Mapped[str] = mapped_column(String(16), default="running")  # running|done|failed|crashed
    kind: Mapped[str] = mapped_column(String(32), default="study")  # study|rebaseline|compliance
    out_dir: Mapped[str] = mapped_column(Text)
    runtime: Mapped[str] = mapped_column(String(64))
    model: Mapped[str | None] = mapped_column(String(128), default=None)
    resolved_model: Mapped[str | None] = mapped_column(String(128), default=None)
    catalog_id: Mapped[str] = mapped_column(String(128))
    catalog_digest: Mapped[str] = mapped_column(String(80))
    queries_digest: Mapped[str] = mapped_column(String(80))
    fingerprint: Mapped[str] = mapped_column(String(128), index=True)
    attempts: Mapped[int] = mapped_column(Integer)
    flow_run_id: Mapped[str | None] = mapped_column(String(64), default=None)
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    headline: Mapped[dict[str, Any]] = mapped_column(default=dict)
    error: Mapped[str | None] = mapped_column(Text, default=None)

    probes: Mapped[list[ProbeRow]] = relationship(back_populates="study", cascade="all, delete-orphan")


class ProbeRow(Base):
    __tablename__ = "probe_records"
    __table_args__ = (UniqueConstraint("study_id", "query_id", "attempt", name="uq_probe_pair"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    study_id: Mapped[str] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    query_id: Mapped[str] = mapped_column(String(200))
    attempt: Mapped[int] = mapped_column(Integer)
    fingerprint: Mapped[str | None] = mapped_column(String(128), default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    cost_usd: Mapped[float | None] = mapped_column(Float, default=None)
    record: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=_now)

    study: Mapped[StudyRow] = relationship(back_populates="probes")


class ArtifactRow(Base):
    __tablename__ = "artifacts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    study_id: Mapped[str] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    digest: Mapped[str] = mapped_column(String(80), index=True)
    path: Mapped[str] = mapped_column(Text)
    schema_version: Mapped[int] = mapped_column(Integer, default=1)
    body: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=_now)


class BaselineRow(Base):
    __tablename__ = "baselines"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    baseline_id: Mapped[str] = mapped_column(String(200), index=True)
    skill: Mapped[str] = mapped_column(String(200), index=True)
    model: Mapped[str | None] = mapped_column(String(128), default=None)
    runtime: Mapped[str | None] = mapped_column(String(64), default=None)
    corpus_version: Mapped[str | None] = mapped_column(Text, default=None)
    skill_version: Mapped[str | None] = mapped_column(String(128), default=None)
    study_id: Mapped[str | None] = mapped_column(
        ForeignKey("studies.id", ondelete="SET NULL"), default=None
    )
    record: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=_now)


class CatalogSnapshotRow(Base):
    __tablename__ = "catalog_snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(Text, index=True)
    """What was scanned (the skills folders, joined); snapshots are compared per source."""
    digest: Mapped[str] = mapped_column(String(80))
    taken_at: Mapped[datetime] = mapped_column(default=_now)

    entries: Mapped[list[CatalogEntryRow]] = relationship(
        back_populates="snapshot", cascade="all, delete-orphan", order_by="CatalogEntryRow.skill"
    )

    def as_mapping(self) -> dict[str, str]:
        return {e.skill: e.content_digest for e in self.entries}


class CatalogEntryRow(Base):
    __tablename__ = "catalog_snapshot_entries"
    __table_args__ = (UniqueConstraint("snapshot_id", "skill", name="uq_snapshot_skill"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    snapshot_id: Mapped[int] = mapped_column(
        ForeignKey("catalog_snapshots.id", ondelete="CASCADE"), index=True
    )
    skill: Mapped[str] = mapped_column(String(200))
    content_digest: Mapped[str] = mapped_column(String(80))

    snapshot: Mapped[CatalogSnapshotRow] = relationship(back_populates="entries")


class ModelSnapshotRow(Base):
    __tablename__ = "model_snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    runtime: Mapped[str] = mapped_column(String(64))
    alias: Mapped[str] = mapped_column(String(128), index=True)
    resolved_id: Mapped[str] = mapped_column(String(128))
    seen_at: Mapped[datetime] = mapped_column(default=_now)


class AlertRow(Base):
    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(default=_now)
    event: Mapped[str] = mapped_column(String(80))
    skill: Mapped[str | None] = mapped_column(String(200), default=None)
    metric: Mapped[str | None] = mapped_column(String(64), default=None)
    delta: Mapped[float | None] = mapped_column(Float, default=None)
    interval_lo: Mapped[float | None] = mapped_column(Float, default=None)
    interval_hi: Mapped[float | None] = mapped_column(Float, default=None)
    baseline_id: Mapped[str | None] = mapped_column(String(200), default=None)
    run_link: Mapped[str | None] = mapped_column(Text, default=None)
    study_id: Mapped[str | None] = mapped_column(
        ForeignKey("studies.id", ondelete="SET NULL"), default=None, index=True
    )
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)
    delivery: Mapped[str] = mapped_column(String(32), default="pending")  # …|repeat|muted
    delivered: Mapped[bool] = mapped_column(Boolean, default=False)
    key: Mapped[str | None] = mapped_column(String(400), default=None, index=True)
    """kind:skill:metric:cause (:func:`skillreach.store.alert_log.alert_key`): the same alert's rows."""


class AlertMuteRow(Base):
    """An alert key muted until ``until`` (``skillreach alerts mute KEY --for 7d``)."""

    __tablename__ = "alert_mutes"

    key: Mapped[str] = mapped_column(String(400), primary_key=True)
    until: Mapped[datetime] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=_now)


# ------------------------------------------------------------------------------------------ engine


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # Let SQLAlchemy, not the driver, say when transactions begin (SQLAlchemy's documented recipe),
    # so "BEGIN IMMEDIATE" can take the write lock up front where it matters (migrations).
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout = 30000")
    cur.execute("PRAGMA journal_mode = WAL")
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


def _sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql(conn.get_execution_options().get("sqlite_begin", "BEGIN"))


_USE = "use sqlite:///PATH or postgresql+psycopg://…"



class JsonText(str):
    """A JSON document already serialised (a probe record's own ``model_dump_json``, in pydantic's
    compiled serialiser): a JSON column stores it as it is, instead of the record being dumped to
    Python objects and those encoded again by the ``json`` module (two thirds of a probe insert's CPU)."""


def _json_dumps(value: Any) -> str:
    """Every engine's JSON serialiser: ``json.dumps``, except for :class:`JsonText`, kept as it is."""
    return str.__str__(value) if isinstance(value, JsonText) else json.dumps(value)


def _make_engine(url: str, origin: str = "database_url", statement_timeout_s: float | None = None) -> Engine:
    """The engine of ``url``; every bad URL, missing driver or unusable folder is one ConfigError naming
    ``origin`` (the setting or variable the URL came from)."""
    scheme = url.split("://", maxsplit=1)[0] if "://" in url else url[:20]
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"{origin}: not a database URL ({scheme}://…); {_USE}") from exc
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database
        if db and db != ":memory:" and not db.startswith("file:"):
            from skillreach._io.paths import ensure_folder
            from skillreach.errors import InputError

            try:
                ensure_folder(Path(db).parent, flag=origin)
            except InputError as exc:
                raise ConfigError(exc.message) from exc
        engine = create_engine(parsed, connect_args={"timeout": 30}, json_serializer=_json_dumps)
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("psycopg2", "postgresql"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    try:
        return create_engine(
            parsed,
            pool_pre_ping=True,
            json_serializer=_json_dumps,
            connect_args=pg_timeouts(parsed, statement_timeout_s),
        )
    except NoSuchModuleError as exc:
        raise ConfigError(
            f"{origin}: no database dialect {parsed.drivername!r} ({scheme}://…); {_USE}"
        ) from exc
    except ImportError as exc:  # the dialect is known but its driver is not installed (mysql → MySQLdb)
        how = (
            "pip install 'skillreach[postgres]'"
            if parsed.get_backend_name() == "postgresql"
            else "install it"
        )
        raise ConfigError(
            f"{origin}: the driver for {parsed.drivername} ({exc.name or 'its DB-API module'}) is not "
            f"installed; {how}, or {_USE}"
        ) from exc


def _alembic_config(connection: Connection) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", MIGRATIONS.as_posix())
    cfg.attributes["connection"] = connection
    return cfg


def _current_revision(conn: Connection) -> str | None:
    """The schema's Alembic revision, read directly (importing alembic costs ~0.3 s; most opens need
    no migration at all)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    return str(rows[0]) if len(rows) == 1 else None


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest migration. Safe when several processes open the store at once.
    A schema newer than this skillreach's migrations is refused (:class:`ConfigError`), untouched."""
    with engine.connect() as conn:
        current = _current_revision(conn)
    if current == HEAD:
        return
    refuse_newer(current, engine.url.render_as_string(hide_password=False), HEAD)
    from alembic import command  # only now: importing alembic costs ~0.5 s

    backend = engine.dialect.name
    opts = {"sqlite_begin": "BEGIN IMMEDIATE"} if backend == "sqlite" else {}
    with engine.connect().execution_options(**opts) as conn, conn.begin():
        if backend == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(727311)"))  # one migrator at a time
        current = _current_revision(conn)
        if current != HEAD:
            refuse_newer(current, engine.url.render_as_string(hide_password=False), HEAD)
            command.upgrade(_alembic_config(conn), "head")


class _SessionLock:
    """A connection that holds a session-level advisory lock; ``close`` ends its database session."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.invalidate()  # the DB-API connection is closed, not pooled: the session and its lock end
        self.conn.close()


def _insert_for(backend: str) -> Any:
    """The dialect's ``insert`` (both have ``on_conflict_do_update``)."""
    if backend == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


T = TypeVar("T")

AUTOCOMMIT_ROWS = 100
"""Probe records up to this many go in one autocommitted INSERT (more: one transaction, as SQLAlchemy
may split a long VALUES list into several statements)."""

# ------------------------------------------------------------------------------------------- store


class Store:
    """The database behind the service. ``Store(url)`` opens it and applies pending migrations."""

    def __init__(
        self, url: str, *, origin: str = "database_url", statement_timeout_s: float | None = None
    ) -> None:
        self.url = url
        self.engine = _make_engine(url, origin, statement_timeout_s)
        OPENED.append(self.safe_url)
        try:
            migrate(self.engine)
        except OperationalError as exc:
            self.engine.dispose()
            raise ConfigError(
                f"cannot open the database {self.safe_url}: {str(exc.orig).splitlines()[0]}"
            ) from exc
        except DatabaseError as exc:  # SQLite: "file is not a database" (a text file, a random one)
            self.engine.dispose()
            raise ConfigError(
                f"cannot open the database {self.safe_url}: {str(exc.orig).splitlines()[0]}; "
                f"point {origin} at a database skillreach made, or at a new file"
            ) from exc
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # SQLite: a write transaction takes the write lock when it begins, so two writers queue on the
        # busy timeout instead of failing with "database is locked" when a reader turns writer.
        writer = self.engine.execution_options(sqlite_begin="BEGIN IMMEDIATE")
        self._writes = sessionmaker(writer, expire_on_commit=False)
        self._write_engine = writer
        self._probe_upserts: dict[bool, Any] = {}
        # PostgreSQL: a few probe records are one INSERT on an autocommit connection that is not pinged
        # when it leaves the pool — one round trip, where a transaction and a ping cost five (a task
        # worker inserts every probe as it finishes, before its slot goes to the next request; a lost
        # connection is retried by _retry_lost_connection)
        self._probe_engine: Engine | None = None
        if self.backend == "postgresql":
            self._probe_engine = create_engine(
                self.engine.url, isolation_level="AUTOCOMMIT", pool_size=4, max_overflow=12,
                json_serializer=_json_dumps,
                connect_args=pg_timeouts(self.engine.url, statement_timeout_s),
            )

    @property
    def safe_url(self) -> str:
        """The URL with any password hidden (for messages)."""
        return make_url(self.url).render_as_string(hide_password=True)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        if self._probe_engine is not None:
            self._probe_engine.dispose()
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A read transaction."""
        with self._sessions.begin() as s:
            yield s

    @contextmanager
    def writing(self) -> Iterator[Session]:
        """A write transaction (on SQLite it holds the write lock from its first statement)."""
        with self._writes.begin() as s:
            yield s

    def revision(self) -> str | None:
        with self.engine.connect() as conn:
            return _current_revision(conn)

    # ---------------------------------------------------------------------------------- studies

    def begin_study(
        self,
        study_id: str,
        *,
        out_dir: str,
        runtime: str,
        model: str | None,
        catalog_id: str,
        catalog_digest: str,
        queries_digest: str,
        fingerprint: str,
        attempts: int,
        config: Mapping[str, Any],
        kind: str = "study",
        flow_run_id: str | None = None,
    ) -> StudyRow:
        """Create the study row, or reopen it (same id = same fingerprint and folder: a resume)."""
        from skillreach.study import redact

        with self.writing() as s:
            row = s.get(StudyRow, study_id)
            if row is None:
                row = StudyRow(
                    id=study_id,
                    out_dir=out_dir,
                    runtime=runtime,
                    model=model,
                    catalog_id=catalog_id,
                    catalog_digest=catalog_digest,
                    queries_digest=queries_digest,
                    fingerprint=fingerprint,
                    attempts=attempts,
                    config=redact(dict(config)),
                    kind=kind,
                    flow_run_id=flow_run_id,
                )
                s.add(row)
            else:
                row.status = "running"
                row.finished_at = None
                row.error = None
                row.flow_run_id = flow_run_id or row.flow_run_id
            return row

    def finish_study(
        self,
        study_id: str,
        *,
        status: str = "done",
        headline: Mapping[str, Any] | None = None,
        resolved_model: str | None = None,
        error: str | None = None,
    ) -> None:
        with self.writing() as s:
            row = s.get(StudyRow, study_id)
            if row is None:
                raise KeyError(study_id)
            row.status = status
            row.finished_at = _now()
            if headline is not None:
                row.headline = dict(headline)
            if resolved_model is not None:
                row.resolved_model = resolved_model
            row.error = error

    def get_study(self, study_id: str) -> StudyRow | None:
        with self.session() as s:
            return s.get(StudyRow, study_id)

    def studies(self, *, kind: str | None = None, limit: int = 100) -> list[StudyRow]:
        stmt = select(StudyRow).order_by(StudyRow.created_at.desc(), StudyRow.id).limit(limit)
        if kind is not None:
            stmt = stmt.where(StudyRow.kind == kind)
        with self.session() as s:
            return list(s.scalars(stmt))

    # ----------------------------------------------------------------------------------- probes

    def _upsert_probes(self, study_id: str, records: Iterable[ProbeRecord], *, only_over_errors: bool) -> int:
        """One ``INSERT … ON CONFLICT (study, query, attempt) DO UPDATE`` for ``records`` (the study id is
        derived from the options fingerprint, so the key holds it); retried with backoff when the
        connection is lost (the statement is idempotent). Returns the rows inserted or replaced.

        A Core statement built once per store and executed with the rows as parameters (its compiled
        form cached): a task worker inserts every probe as it finishes, and the ORM's per-call
        statement building and session cost ~6 ms of CPU a record."""
        rows = [
            {"study_id": study_id, "query_id": r.query_id, "attempt": r.attempt,
             "fingerprint": r.fingerprint, "error": r.error, "cost_usd": r.cost_usd,
             "record": JsonText(r.model_dump_json()), "created_at": _now()}
            for r in records
        ]
        if not rows:
            return 0
        stmt = self._probe_upserts.get(only_over_errors)
        if stmt is None:
            table = ProbeRow.__table__
            insert = _insert_for(self.backend)(table)
            excluded = insert.excluded
            stmt = insert.on_conflict_do_update(
                index_elements=[table.c.study_id, table.c.query_id, table.c.attempt],
                set_={"fingerprint": excluded.fingerprint, "error": excluded.error,
                      "cost_usd": excluded.cost_usd, "record": excluded.record,
                      "created_at": excluded.created_at},
                where=table.c.error.is_not(None) if only_over_errors else None,
            ).returning(table.c.id)
            self._probe_upserts[only_over_errors] = stmt

        def write() -> int:
            if self._probe_engine is not None and len(rows) <= AUTOCOMMIT_ROWS:
                with self._probe_engine.connect() as conn:  # one statement: atomic by itself
                    return len(conn.execute(stmt, rows).all())
            with self._write_engine.begin() as conn:
                return len(conn.execute(stmt, rows).all())

        return _retry_lost_connection(write)

    def add_probes(self, study_id: str, records: Iterable[ProbeRecord]) -> int:
        """Insert probe records; a (query, attempt) already stored for this study is replaced (a graded
        record over its ungraded one, a resumed probe over its error)."""
        recs = list(records)
        self._upsert_probes(study_id, recs, only_over_errors=False)
        return len(recs)

    def record_probes(self, study_id: str, records: Iterable[ProbeRecord]) -> int:
        """Insert probe records **once**: a (query, attempt) already stored without error is kept and the
        new record dropped (``ON CONFLICT … DO UPDATE … WHERE error IS NOT NULL``), so a retried batch or a
        second worker never duplicates a record; an errored one is replaced. Returns the rows written."""
        return self._upsert_probes(study_id, records, only_over_errors=True)

    def finished_pairs(
        self, study_id: str, pairs: Iterable[tuple[str, int]] | None = None
    ) -> set[tuple[str, int]]:
        """The (query id, attempt) pairs the study has without error (among ``pairs`` when given)."""
        stmt = select(ProbeRow.query_id, ProbeRow.attempt).where(
            ProbeRow.study_id == study_id, ProbeRow.error.is_(None)
        )
        wanted = set(pairs) if pairs is not None else None
        if wanted is not None:
            stmt = stmt.where(ProbeRow.query_id.in_({q for q, _ in wanted}))

        def read() -> set[tuple[str, int]]:
            with self.session() as s:
                got = {(str(q), int(a)) for q, a in s.execute(stmt)}
            return got & wanted if wanted is not None else got

        return _retry_lost_connection(read)

    # one PostgreSQL advisory lock per batch run: held by the worker's connection while it probes, so a
    # worker that died (its connection closed by the kernel) is seen by the study as a free lock
    def hold_lock(self, key: str) -> Any:
        """A connection holding the session-level advisory lock ``key`` (PostgreSQL; ``None`` elsewhere).
        Its ``close()`` ends the database session, releasing the lock (it never goes back to the pool)."""
        if self.backend != "postgresql":
            return None
        conn = self.engine.connect()
        # waiting for another copy of the batch is the point here: no statement timeout on this session
        conn.execute(text("SET statement_timeout = 0"))
        conn.execute(text("SELECT pg_advisory_lock(hashtext(:k))"), {"k": key})
        conn.commit()
        return _SessionLock(conn)

    def lock_free(self, key: str) -> bool:
        """Whether nobody holds the advisory lock ``key`` (taken and released at once when free)."""
        if self.backend != "postgresql":
            return False
        with self.engine.connect() as conn:
            got = bool(conn.execute(text("SELECT pg_try_advisory_lock(hashtext(:k))"), {"k": key}).scalar())
            if got:
                conn.execute(text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": key})
            conn.commit()
            return got

    def probes(self, study_id: str) -> list[ProbeRecord]:
        stmt = (
            select(ProbeRow)
            .where(ProbeRow.study_id == study_id)
            .order_by(ProbeRow.attempt, ProbeRow.query_id)
        )
        with self.session() as s:
            return [ProbeRecord.model_validate(row.record) for row in s.scalars(stmt)]

    def probes_not_in(self, study_id: str, seen: set[int]) -> list[tuple[int, ProbeRecord]]:
        """The study's records whose row ids are not in ``seen`` (in id order): how a study run on other
        machines follows its probes as they land. Ids, not "after the last id": concurrent writers
        commit out of id order, so a smaller id can become visible after a larger one."""
        with self.session() as s:
            ids = set(s.scalars(select(ProbeRow.id).where(ProbeRow.study_id == study_id)))
            new = sorted(ids - seen)
            rows: list[tuple[int, ProbeRecord]] = []
            for start in range(0, len(new), 1000):
                chunk = new[start:start + 1000]
                found = s.execute(select(ProbeRow.id, ProbeRow.record).where(ProbeRow.id.in_(chunk)))
                rows.extend((int(i), ProbeRecord.model_validate(r)) for i, r in found)
        return sorted(rows, key=lambda row: row[0])

    def probe_ids(self, study_id: str) -> set[int]:
        """The row ids of the study's records (what following starts from)."""
        with self.session() as s:
            return set(s.scalars(select(ProbeRow.id).where(ProbeRow.study_id == study_id)))

    def spent(self, study_id: str, fingerprint: str) -> float:
        """What the study's probes under ``fingerprint`` cost so far (US dollars, as recorded)."""
        stmt = select(func.coalesce(func.sum(ProbeRow.cost_usd), 0.0)).where(
            ProbeRow.study_id == study_id, ProbeRow.fingerprint == fingerprint
        )
        with self.session() as s:
            return float(s.scalar(stmt) or 0.0)

    def count_probes(self, study_id: str) -> int:
        with self.session() as s:
            n = s.scalar(select(func.count()).select_from(ProbeRow).where(ProbeRow.study_id == study_id))
            return int(n or 0)

    # -------------------------------------------------------------------------------- artifacts

    def save_artifact(self, study_id: str, body: Mapping[str, Any], path: str) -> ArtifactRow:
        with self.writing() as s:
            row = ArtifactRow(
                study_id=study_id,
                digest=str(body.get("digest", "")),
                path=path,
                schema_version=int(body.get("schema_version", 1)),
                body=json.loads(json.dumps(body, default=str)),
            )
            s.add(row)
            return row

    def latest_artifact(self, study_id: str) -> ArtifactRow | None:
        stmt = (
            select(ArtifactRow)
            .where(ArtifactRow.study_id == study_id)
            .order_by(ArtifactRow.created_at.desc(), ArtifactRow.id.desc())
        )
        with self.session() as s:
            return s.scalars(stmt).first()

    # -------------------------------------------------------------------------------- baselines

    def add_baseline(self, record: Mapping[str, Any], *, study_id: str | None = None) -> BaselineRow:
        runtime = record.get("runtime")
        with self.writing() as s:
            row = BaselineRow(
                baseline_id=str(record["baseline_id"]),
                skill=str(record["skill"]),
                model=record.get("model"),
                runtime=runtime.get("name") if isinstance(runtime, Mapping) else runtime,
                corpus_version=record.get("corpus_version"),
                skill_version=record.get("skill_version"),
                study_id=study_id,
                record=json.loads(json.dumps(dict(record), default=str)),
            )
            s.add(row)
            return row

    def latest_baseline(
        self, skill: str, *, model: str | None = None, runtime: str | None = None
    ) -> BaselineRow | None:
        """The newest baseline of ``skill`` (optionally for one model snapshot and runtime)."""
        stmt = select(BaselineRow).where(BaselineRow.skill == skill)
        if model is not None:
            stmt = stmt.where(BaselineRow.model == model)
        if runtime is not None:
            stmt = stmt.where(BaselineRow.runtime == runtime)
        stmt = stmt.order_by(BaselineRow.created_at.desc(), BaselineRow.id.desc())
        with self.session() as s:
            return s.scalars(stmt).first()

    def baselines(self) -> list[BaselineRow]:
        """The newest baseline of every skill."""
        with self.session() as s:
            rows = s.scalars(select(BaselineRow).order_by(BaselineRow.created_at, BaselineRow.id))
            latest: dict[str, BaselineRow] = {}
            for row in rows:
                latest[row.skill] = row
            return [latest[k] for k in sorted(latest)]

    # -------------------------------------------------------------------------------- snapshots

    def snapshot_catalog(
        self, source: str, entries: Mapping[str, str], digest: str = ""
    ) -> CatalogSnapshotRow:
        """Record skill name → content digest for ``source`` as seen now."""
        with self.writing() as s:
            row = CatalogSnapshotRow(source=source, digest=digest)
            row.entries = [CatalogEntryRow(skill=k, content_digest=v) for k, v in sorted(entries.items())]
            s.add(row)
            s.flush()
            row.as_mapping()  # load the entries while the session is open
            return row

    def last_catalog_snapshot(self, source: str) -> dict[str, str] | None:
        stmt = (
            select(CatalogSnapshotRow)
            .where(CatalogSnapshotRow.source == source)
            .order_by(CatalogSnapshotRow.taken_at.desc(), CatalogSnapshotRow.id.desc())
        )
        with self.session() as s:
            row = s.scalars(stmt).first()
            return row.as_mapping() if row is not None else None

    def record_model_snapshot(self, runtime: str, alias: str, resolved_id: str) -> ModelSnapshotRow:
        with self.writing() as s:
            row = ModelSnapshotRow(runtime=runtime, alias=alias, resolved_id=resolved_id)
            s.add(row)
            return row

    def last_model_snapshot(self, runtime: str, alias: str) -> str | None:
        stmt = (
            select(ModelSnapshotRow.resolved_id)
            .where(ModelSnapshotRow.runtime == runtime, ModelSnapshotRow.alias == alias)
            .order_by(ModelSnapshotRow.seen_at.desc(), ModelSnapshotRow.id.desc())
        )
        with self.session() as s:
            return s.scalars(stmt).first()

    def crash_studies(self, flow_run_ids: Iterable[str], *, error: str) -> list[str]:
        """Studies of these flow runs still marked running become ``crashed`` (their runs died: the
        probes already written stay; a re-run resumes). Returns their ids."""
        ids = [str(i) for i in flow_run_ids]
        with self.writing() as s:
            rows = list(s.scalars(select(StudyRow).where(StudyRow.flow_run_id.in_(ids),
                                                         StudyRow.status == "running")))
            for row in rows:
                row.status, row.finished_at, row.error = "crashed", _now(), error
            return [row.id for row in rows]

    # ----------------------------------------------------------------------------------- alerts

    def add_alert(self, payload: Mapping[str, Any], *, study_id: str | None = None,
                  delivery: str = "pending", delivered: bool = False, key: str | None = None) -> AlertRow:
        """Store an alert's payload (built by :mod:`skillreach.service.alerts`, which holds no secret)."""
        with self.writing() as s:
            row = alert_row(payload, study_id=study_id, delivery=delivery, delivered=delivered, key=key)
            s.add(row)
            return row

    def mark_alert(self, alert_id: int, *, delivery: str, delivered: bool) -> None:
        with self.writing() as s:
            row = s.get(AlertRow, alert_id)
            if row is not None:
                row.delivery = delivery
                row.delivered = delivered

    def alerts(self, *, study_id: str | None = None) -> list[AlertRow]:
        stmt = select(AlertRow).order_by(AlertRow.created_at, AlertRow.id)
        if study_id is not None:
            stmt = stmt.where(AlertRow.study_id == study_id)
        with self.session() as s:
            return list(s.scalars(stmt))


def alert_row(payload: Mapping[str, Any], *, study_id: str | None = None, delivery: str = "pending",
              delivered: bool = False, key: str | None = None) -> AlertRow:
    """The row of an alert (not yet added to a session)."""
    interval = payload.get("interval") or [None, None]
    return AlertRow(event=str(payload.get("event", "skillreach.gate.breached")), skill=payload.get("skill"),
                    metric=payload.get("metric"), delta=payload.get("delta"), interval_lo=interval[0],
                    interval_hi=interval[1], baseline_id=payload.get("baseline_id"),
                    run_link=payload.get("run_link"), study_id=study_id,
                    payload=json.loads(json.dumps(dict(payload), default=str)), delivery=delivery,
                    delivered=delivered, key=key)


def open_store(settings: Any = None, *, home: Path | None = None) -> Store:
    """The store the settings name (``SKILLREACH_DATABASE_URL``), else SQLite under ``home``."""
    from skillreach.settings import load_settings

    settings = settings or load_settings()
    if settings.database_url:
        timeout = getattr(settings, "database_statement_timeout_s", None)
        return Store(settings.database_url, origin="database_url (SKILLREACH_DATABASE_URL)",
                     statement_timeout_s=timeout)
    base = home or settings.home
    return Store(f"sqlite:///{(Path(base) / 'skillreach.db').as_posix()}", origin="home (SKILLREACH_HOME)")


# -------------------------------------------------------------------------------------- study lock

LOCK_FILE = ".study-lock"
_LOCK_POLL_S = 0.5


def lock_holder(flow_run_id: str | None = None) -> str:
    """Who holds a lock, as the refused process is told: the flow run, else the process and host."""
    import os
    import socket

    return f"flow run {flow_run_id}" if flow_run_id else f"pid {os.getpid()} on {socket.gethostname()}"


def _advisory_key(study_id: str) -> int:
    import hashlib

    return int.from_bytes(hashlib.sha256(study_id.encode()).digest()[:8], "big") >> 1  # fits a bigint


class StudyLock:
    """A study's lock, held for the whole study so two processes never probe the same study.

    PostgreSQL store: a session advisory lock on its own connection (released by the server when the
    process dies); the holder's name is that connection's ``application_name``. SQLite store: an
    ``fcntl`` lock on ``<out>/.study-lock`` beside the probe log (released by the kernel when the process
    dies), the holder's name written in the file.
    """

    def __init__(self, study_id: str, *, url: str | None, folder: Path, holder: str) -> None:
        self.study_id, self.url, self.folder, self.holder = study_id, url, Path(folder), holder
        self._conn: Connection | None = None
        self._engine: Engine | None = None
        self._fh: Any = None

    def try_acquire(self) -> str | None:
        """Take the lock: ``None`` when taken, else who holds it."""
        return self._try_pg() if self.url else self._try_file()

    def acquire(self, wait_s: float = 0.0) -> StudyLock:
        """Take the lock, waiting up to ``wait_s`` seconds; :class:`StudyLocked` names the holder."""
        import time

        from skillreach.errors import StudyLocked

        deadline = time.monotonic() + max(wait_s, 0.0)
        while True:
            holder = self.try_acquire()
            if holder is None:
                return self
            if time.monotonic() >= deadline:
                raise StudyLocked(
                    f"study {self.study_id} ({self.folder}) is already running in "
                    f"{holder or 'another process'}; wait for it to finish (a re-run then resumes) or stop it"
                )
            time.sleep(_LOCK_POLL_S)

    def _try_pg(self) -> str | None:
        assert self.url is not None
        key = _advisory_key(self.study_id)
        if self._engine is None:
            self._engine = _make_engine(self.url)
        conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        conn.execute(text("SELECT set_config('application_name', :n, false)"),
                     {"n": f"skillreach {self.holder}"[:63]})
        if conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            self._conn = conn
            return None
        holder = conn.execute(
            text("SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                 "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                 "AND l.classid::bigint = :hi AND l.objid::bigint = :lo"),
            {"hi": key >> 32, "lo": key & 0xFFFFFFFF},
        ).scalar()
        conn.close()
        return str(holder or "").removeprefix("skillreach ")

    def _try_file(self) -> str | None:
        import fcntl

        self.folder.mkdir(parents=True, exist_ok=True)
        fh = (self.folder / LOCK_FILE).open("a+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            import time

            # the holder writes its name just after taking the lock: a read in between finds the file
            # empty (or truncated), so read again for a moment before saying "another process"
            deadline = time.monotonic() + 1.0
            while True:
                fh.seek(0)
                holder = fh.read(4096).strip()
                if holder or time.monotonic() >= deadline:
                    break
                time.sleep(0.02)
            fh.close()
            return holder
        fh.seek(0)
        fh.truncate()
        fh.write(self.holder + "\n")
        fh.flush()
        self._fh = fh
        return None

    def release(self) -> None:
        """Give the lock back (idempotent)."""
        if self._conn is not None:
            try:
                self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _advisory_key(self.study_id)})
            finally:
                self._conn.close()
                self._conn = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        if self._fh is not None:
            import fcntl

            fh, self._fh = self._fh, None
            fh.seek(0)
            fh.truncate()
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()

    @property
    def held(self) -> bool:
        return self._conn is not None or self._fh is not None

    def __enter__(self) -> StudyLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_study(
    settings: Any, study_id: str, folder: Path, *, holder: str, wait_s: float = 0.0
) -> StudyLock:
    """Take study ``study_id``'s lock for the store ``settings`` name (see :class:`StudyLock`)."""
    url = settings.database_url or None
    if url is not None and make_url(url).get_backend_name() != "postgresql":
        url = None  # SQLite by URL: the file lock
    return StudyLock(study_id, url=url, folder=folder, holder=holder).acquire(wait_s)
