"""Alembic migrations of the skillreach store, applied by :func:`skillreach.store.database.migrate`."""
