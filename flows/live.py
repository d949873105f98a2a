"""The live flows: ``ingest`` (scheduled: read what the agents recorded, then check the live gate and
emit ``skillreach.live.dropped`` for each skill past it) and ``live_dropped`` (triggered by that event:
re-run the skill's frozen set against the current catalog and file the verdict — *routing change* or
*request mix* — as an alert and a Prefect artifact).

Thin: they compose tasks (``tasks/live.py``) and the ``study`` flow; no SQL, HTTP or file I/O here.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from skillreach.flows._compose import call
from skillreach.flows._names import ingest_name, live_dropped_name
from skillreach.flows.study import study
from skillreach.study import StudyConfig, StudyResult
from skillreach.tasks.alerts import deliver_alerts
from skillreach.tasks.config import resolve_config
from skillreach.tasks.live import (
    check_live_gate,
    emit_live_drops,
    frozen_set,
    ingest_live,
    judge_live_drop,
    live_drop_of,
    publish_live_verdict,
    verdict_alert,
)

__all__ = ["ingest", "live_dropped"]


@flow(name="ingest", flow_run_name=ingest_name)
async def ingest(
    config: StudyConfig | None = None,
    config_file: str | None = None,
    sources: list[str] | None = None,
    until: str | None = None,
) -> dict[str, Any]:
    """Ingest the live sources (``sources``, else ``SKILLREACH_LIVE_SOURCES``) into the store, then check
    the live gate (``live_gates``) at ``until`` (default now): each skill past it emits
    ``skillreach.live.dropped``, which starts ``live-dropped``."""
    cfg = await call(resolve_config, config, config_file)
    read = await call(ingest_live, cfg, sources)
    drops = await call(check_live_gate, cfg, until)
    emitted = await call(emit_live_drops, cfg, drops)
    return {
        "ingested": read,
        "dropped": [d.skill for d in drops],
        "messages": [d.sentence() for d in drops],
        "emitted": emitted,
    }


@flow(name="live-dropped", flow_run_name=live_dropped_name)
async def live_dropped(
    skill: str,
    until: str | None = None,
    config: StudyConfig | None = None,
    config_file: str | None = None,
) -> dict[str, Any]:
    """The discriminator: ``skill``'s live share fell past the live gate (at ``until``, the event's
    time). Re-run its frozen set — its baseline's cases, the current catalog, the baseline's runtime and
    model — and file the verdict: *routing change* (the frozen set breached too: the skills that now take
    its cases, the catalog change nearest in time) or *request mix* (the frozen set holds: the live share
    of the skills that rose), as an alert and a Prefect artifact."""
    cfg = await call(resolve_config, config, config_file)
    drop = await call(live_drop_of, cfg, skill, until)
    if drop is None:
        return {
            "skill": skill,
            "verdict": None,
            "message": f"{skill} is not past the live gate at {until or 'now'}",
        }
    frozen = await call(frozen_set, cfg, skill, until)
    result: StudyResult = await call(study, frozen.config, "live")
    verdict = await call(judge_live_drop, cfg, frozen, result.artifact, drop, result.study_id)
    payload = await call(verdict_alert, verdict, result.out, result.study_id)
    delivered = await call(deliver_alerts, cfg, result.study_id, [payload])
    published = await call(publish_live_verdict, verdict)
    return {
        "skill": skill,
        "verdict": verdict.verdict,
        "message": verdict.message,
        "takers": list(verdict.takers),
        "nearest_change": verdict.nearest.model_dump(mode="json") if verdict.nearest else None,
        "study_id": result.study_id,
        "out": str(result.out),
        "alerts": delivered,
        "artifact": published,
    }
