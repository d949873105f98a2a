"""The database behind the service (SQLite or PostgreSQL): probe records, artifacts, baselines and
catalog snapshots (``database``), changed only by the numbered Alembic migrations in ``migrations``;
``limits``: every wait with an end (PostgreSQL connect and statement timeouts, a bounded retry of disk
errors, one line for a database error).
"""

from __future__ import annotations

from skillreach.store.database import (
    AlertRow,
    ArtifactRow,
    Base,
    BaselineRow,
    CatalogEntryRow,
    CatalogSnapshotRow,
    ModelSnapshotRow,
    ProbeRow,
    Store,
    StudyLock,
    StudyRow,
    lock_study,
    open_store,
)

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
    "lock_study",
    "open_store",
]
