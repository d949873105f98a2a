"""The database behind the service (SQLite or PostgreSQL): probe records, artifacts, baselines and
catalog snapshots (``database``), changed only by the numbered Alembic migrations in ``migrations``;
``alert_log``: the alerts' outbox (one send per webhook until a 2xx), their verdicts and the mutes;
``live``: the events agents recorded in production and the per-file cursors of ``skillreach ingest``;
``dashboard``: what ``skillreach ui`` reads (per-study skill points, the pages' indexed queries);
``limits``: every wait with an end (PostgreSQL connect and statement timeouts, a bounded retry of disk
errors, one line for a database error).
"""

from __future__ import annotations

from skillreach.store.alert_log import (
    AlertSendRow,
    AlertVerdictRow,
    Claim,
    Failing,
    alert_key,
    claim_due,
    delivery_counts,
    drop_channels,
    failing_channels,
    latest_alerts,
    mute,
    muted_by,
    mutes,
    next_due,
    open_once,
    open_verdicts,
    queue_alert,
    record_try,
    save_verdict,
    sends_of,
    sent_within,
    unmute,
    verdict_of,
)
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
    "AlertSendRow",
    "AlertVerdictRow",
    "ArtifactRow",
    "Base",
    "BaselineRow",
    "CatalogEntryRow",
    "CatalogSnapshotRow",
    "Claim",
    "Failing",
    "IndexedStudyRow",
    "ModelSnapshotRow",
    "ProbeRow",
    "SkillPointRow",
    "Store",
    "StudyLock",
    "StudyRow",
    "alert_key",
    "claim_due",
    "copy_store",
    "delivery_counts",
    "drop_channels",
    "failing_channels",
    "forget_before",
    "latest_alerts",
    "load_events",
    "lock_study",
    "mute",
    "muted_by",
    "mutes",
    "next_due",
    "open_once",
    "open_store",
    "open_verdicts",
    "queue_alert",
    "record_try",
    "save_events",
    "save_verdict",
    "sends_of",
    "sent_within",
    "studies_before",
    "studies_of_runs",
    "unmute",
    "upgrade_store",
    "verdict_of",
]
