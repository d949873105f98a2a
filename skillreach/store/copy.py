"""Moving a store: every row of one database into another at the same schema (``skillreach db copy``:
SQLite → PostgreSQL when one machine's service grows into several)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Integer, func, insert, select, text

from skillreach.errors import InputError
from skillreach.store.database import HEAD, Base, Store, _current_revision, _make_engine

__all__ = ["copy_store", "upgrade_store"]

CHUNK = 1000


def copy_store(src: Store, dst: Store, *, log: Callable[[str], None] = lambda _m: None) -> dict[str, int]:
    """Copy every table of ``src`` into ``dst`` (both opened, so both at the newest migration), parents
    before children, ids kept; ``dst`` must be empty. PostgreSQL's id sequences are moved past the copied
    ids. Returns the rows copied per table."""
    tables = Base.metadata.sorted_tables
    with dst.engine.connect() as conn:
        filled = [t.name for t in tables if conn.execute(select(func.count()).select_from(t)).scalar()]
    if filled:
        raise InputError(f"{dst.safe_url}: not empty ({', '.join(filled)} hold rows); copy into a new "
                         "database")
    copied: dict[str, int] = {}
    with src.engine.connect() as read, dst.engine.begin() as write:
        for table in tables:
            n = 0
            result = read.execution_options(stream_results=True).execute(select(table))
            while rows := result.fetchmany(CHUNK):
                write.execute(insert(table), [dict(r._mapping) for r in rows])
                n += len(rows)
            copied[table.name] = n
            log(f"{table.name}: {n} row(s)")
        if dst.backend == "postgresql":
            for table in tables:
                pk = list(table.primary_key.columns)
                if len(pk) == 1 and isinstance(pk[0].type, Integer):
                    write.execute(text(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', '{pk[0].name}'), "
                        f"COALESCE(MAX({pk[0].name}), 1), MAX({pk[0].name}) IS NOT NULL) FROM {table.name}"))
    return copied


def upgrade_store(url: str, *, origin: str = "database_url") -> tuple[str | None, str]:
    """Bring the store at ``url`` to the newest migration; (its revision before, after)."""
    engine = _make_engine(url, origin)
    try:
        with engine.connect() as conn:
            before = _current_revision(conn)
    finally:
        engine.dispose()
    with Store(url, origin=origin) as store:
        after = store.revision() or HEAD
    return before, after
