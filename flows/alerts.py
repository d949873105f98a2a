"""The alert outbox's flow, ``deliver-alerts``: post what the webhooks have not taken yet.

Run by its deployment (prefect.yaml): at the time of the next try a pass scheduled (``run_deployment``
with a ``scheduled_time``), every 15 minutes (after a restart of the service too), and when a
skillreach deployment run ends ``Crashed`` or ``Failed`` (``flow_run_id``: that run, filed as one
alert first). Thin: the tasks of ``tasks/alerts.py`` do the work.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from skillreach.flows._compose import call
from skillreach.study import StudyConfig
from skillreach.tasks.alerts import deliver_pending, file_run_ended, schedule_retry
from skillreach.tasks.config import resolve_config

__all__ = ["alert_outbox"]


@flow(name="deliver-alerts")
async def alert_outbox(
    flow_run_id: str | None = None, config: StudyConfig | None = None, config_file: str | None = None
) -> dict[str, Any]:
    """One pass of the outbox: file the run that ended badly (``flow_run_id``, from the triggering
    event), post every send that is due, say a webhook that keeps failing, and schedule the next pass
    at the next try that is due."""
    cfg = await call(resolve_config, config, config_file)
    filed = await call(file_run_ended, cfg, flow_run_id) if flow_run_id else None
    summary: dict[str, Any] = await call(deliver_pending, cfg)
    summary["next_run"] = await schedule_retry(summary.get("next_try"))
    return {"run_ended": filed, **summary}
