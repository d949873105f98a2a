"""Alembic environment, driven from code: the store passes an open connection in ``config.attributes``.

New migrations: ``alembic -x url=sqlite:///tmp.db revision -m "what" --rev-id 0002`` is not needed;
copy the newest file in ``versions/``, number it, and never edit a migration after it has landed.
"""

from __future__ import annotations

from alembic import context

from skillreach.store import alert_log as _alert_log  # noqa: F401  (its tables are in Base.metadata)
from skillreach.store import live as _live  # noqa: F401  (its tables are in Base.metadata)
from skillreach.store.database import Base

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - always called through skillreach.store.database.migrate
    raise RuntimeError("skillreach migrations run through skillreach.store.database.migrate(engine)")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
