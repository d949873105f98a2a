"""The database behind the service (SQLite or PostgreSQL): probe records, artifacts, baselines and
catalog snapshots (``database``), changed only by the numbered Alembic migrations in ``migrations``;
``live``: the events agents recorded in production and the per-file cursors of ``skillreach ingest``;
``dashboard``: what ``skillreach ui`` reads (per-study skill points, the pages' indexed queries);
``limits``: every wait with an end (PostgreSQL connect and statement timeouts, a bounded retry of disk
errors, one line for a database error).
"""

from __future__ import annotations

from skillreach.store.alert_log import alert_key, mute, muted_by, mutes, sent_within, unmute
from skillreach.store.copy import copy_store, upgrade_store
from skillreach.store.dashboard import IndexedStudyRow, SkillPointRow
from skillreach.store.database import (
    AlertMuteRow,
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
from skillreach.store.live import load_events, save_events
from skillreach.store.retention import forget_before, studies_before, studies_of_runs

__all__ = [
    "AlertMuteRow",
    "AlertRow",
    "ArtifactRow",
    "Base",
    "BaselineRow",
    "CatalogEntryRow",
    "CatalogSnapshotRow",
    "IndexedStudyRow",
    "ModelSnapshotRow",
    "ProbeRow",
    "SkillPointRow",
    "Store",
    "StudyLock",
    "StudyRow",
    "alert_key",
    "copy_store",
    "forget_before",
    "load_events",
    "lock_study",
    "mute",
    "muted_by",
    "mutes",
    "open_store",
    "save_events",
    "sent_within",
    "studies_before",
    "studies_of_runs",
    "unmute",
    "upgrade_store",
]
