"""Retention (``skillreach gc --keep 30d``): the store's rows of studies finished before a cutoff.

Never a baseline: baseline rows stay, and a study a baseline row was recorded from stays with its
probes (the bar's evidence). Running studies stay whatever their age; alerts go with their age — except
one still waiting to be delivered (``pending``), whatever its age; expired mutes go.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, delete, func, or_, select

from skillreach.store.database import (
    AlertMuteRow,
    AlertRow,
    ArtifactRow,
    BaselineRow,
    ProbeRow,
    Store,
    StudyRow,
)

__all__ = ["forget_before", "studies_before", "studies_of_runs"]


def studies_before(store: Store, cutoff: datetime) -> list[StudyRow]:
    """Studies that ended (or, never ended and not running, began) before ``cutoff``, no baseline's."""
    kept = select(BaselineRow.study_id).where(BaselineRow.study_id.is_not(None))
    stmt = select(StudyRow).where(
        StudyRow.status != "running",
        func.coalesce(StudyRow.finished_at, StudyRow.created_at) < cutoff,
        StudyRow.id.not_in(kept),
    )
    with store.session() as s:
        return list(s.scalars(stmt))


def forget_before(store: Store, cutoff: datetime, *, dry_run: bool = False) -> dict[str, int]:
    """Delete the rows of :func:`studies_before` (probes, artifacts, the study), alerts older than
    ``cutoff`` and mutes that ended before it; the counts (what would go, with ``dry_run``)."""
    ids = [row.id for row in studies_before(store, cutoff)]
    old_alerts = and_(or_(AlertRow.created_at < cutoff, AlertRow.study_id.in_(ids)),
                      AlertRow.delivery != "pending")  # not delivered yet: kept for the outbox
    with store.writing() as s:
        counts = {
            "studies": len(ids),
            "probes": s.scalar(select(func.count()).select_from(ProbeRow)
                               .where(ProbeRow.study_id.in_(ids))) or 0,
            "artifacts": s.scalar(select(func.count()).select_from(ArtifactRow)
                                  .where(ArtifactRow.study_id.in_(ids))) or 0,
            "alerts": s.scalar(select(func.count()).select_from(AlertRow).where(old_alerts)) or 0,
        }
        if not dry_run:
            s.execute(delete(AlertRow).where(old_alerts))
            s.execute(delete(ProbeRow).where(ProbeRow.study_id.in_(ids)))
            s.execute(delete(ArtifactRow).where(ArtifactRow.study_id.in_(ids)))
            s.execute(delete(StudyRow).where(StudyRow.id.in_(ids)))
            s.execute(delete(AlertMuteRow).where(AlertMuteRow.until < cutoff))
    return counts


def studies_of_runs(store: Store, flow_run_ids: list[str]) -> list[StudyRow]:
    """The studies the flow runs ``flow_run_ids`` ran (``StudyRow.flow_run_id``)."""
    with store.session() as s:
        ids = [str(i) for i in flow_run_ids]
        return list(s.scalars(select(StudyRow).where(StudyRow.flow_run_id.in_(ids))))
