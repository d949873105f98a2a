"""What follows a crashed flow run of a skillreach deployment: its child runs (the study subflow) are
marked Crashed too, and the studies they were running are marked ``crashed`` in the store.

Run by the ``resolve-crashed`` deployment, which prefect.yaml triggers on ``prefect.flow-run.Crashed``
(the zombie automation of ``deployments/automations.py`` sets it when heartbeats stop).
"""

from __future__ import annotations

from uuid import UUID

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.study.config import StudyConfig
from skillreach.tasks._context import logger, store_for

__all__ = ["crash_children", "crash_studies"]

_FINAL = {"COMPLETED", "FAILED", "CANCELLED", "CRASHED"}


@task(name="crash_children", cache_policy=NO_CACHE)
async def crash_children(flow_run_id: str, message: str) -> list[str]:
    """Mark every unfinished descendant of ``flow_run_id`` Crashed; returns the run and its descendants."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.states import Crashed

    seen, todo = [flow_run_id], [UUID(flow_run_id)]
    async with get_client() as client:
        while todo:
            children = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=todo)))
            todo = []
            for child in children:
                seen.append(str(child.id))
                todo.append(child.id)
                if child.state is None or child.state.type.value not in _FINAL:
                    await client.set_flow_run_state(child.id, Crashed(message=message), force=True)
                    logger().warning("child run %s (%s) marked Crashed", child.name, child.id)
    return seen


@task(name="crash_studies", cache_policy=NO_CACHE)
async def crash_studies(config: StudyConfig, flow_run_ids: list[str], message: str) -> list[str]:
    """The studies those runs were running, marked ``crashed`` in the store."""
    with store_for(config) as store:
        crashed = store.crash_studies(flow_run_ids, error=message)
    for study_id in crashed:
        logger().warning("study %s marked crashed", study_id)
    return crashed
