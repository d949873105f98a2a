"""What follows a crashed flow run of a skillreach deployment: its child runs (the study subflow) are
marked Crashed too, and the studies they were running are marked ``crashed`` in the store.

Run by the ``resolve-crashed`` deployment, which prefect.yaml triggers on ``prefect.flow-run.Crashed``
(the zombie automation of ``deployments/automations.py`` sets it when heartbeats stop).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.study.config import StudyConfig
from skillreach.tasks._context import logger, store_for
from skillreach.tasks._prefect_adapter import force_flow_run_state, force_task_run_state

__all__ = ["crash_children", "crash_studies", "crash_task_runs", "reconcile_finished", "resume_once",
           "run_tree"]

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
                    await force_flow_run_state(client, child.id, Crashed(message=message))
                    logger().warning("child run %s (%s) marked Crashed", child.name, child.id)
    return seen


@task(name="run_tree", cache_policy=NO_CACHE)
async def run_tree(flow_run_id: str) -> list[str]:
    """``flow_run_id`` and every run below it (its subflows, theirs …)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    seen, todo = [flow_run_id], [UUID(flow_run_id)]
    async with get_client() as client:
        while todo:
            children = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=todo)))
            todo = [child.id for child in children]
            seen += [str(i) for i in todo]
    return seen


@task(name="reconcile_finished", cache_policy=NO_CACHE)
async def reconcile_finished(config: StudyConfig, flow_run_ids: list[str]) -> list[str]:
    """When every study those runs ran is finished in the store (``done``: the work was over when the
    run was lost — a server restart, a heartbeat missed at the very end), mark the runs still open and
    the crashed run itself Completed instead of Crashed; the finished studies (empty: nothing done)."""
    from prefect.client.orchestration import get_client
    from prefect.states import Completed

    from skillreach.store import studies_of_runs

    with store_for(config) as store:
        rows = studies_of_runs(store, flow_run_ids)
    if not rows or any(r.status != "done" for r in rows):
        return []
    done = sorted(r.id for r in rows)
    message = f"reconciled from the store: study {', '.join(done)} finished before the run was lost"
    async with get_client() as client:
        for run_id in flow_run_ids:
            run = await client.read_flow_run(UUID(run_id))
            if run.state is None or run.state.type.value != "COMPLETED":
                await force_flow_run_state(client, run.id, Completed(message=message))
    logger().warning("%s", message)
    return done


@task(name="crash_task_runs", cache_policy=NO_CACHE)
async def crash_task_runs(flow_run_ids: list[str], message: str) -> int:
    """Every task run of those flow runs still unfinished, marked Crashed (they never end by
    themselves once their flow run's process is gone); how many."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.states import Crashed

    n = 0
    async with get_client() as client:
        runs = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(i) for i in flow_run_ids])))
        for run in runs:
            if run.state is None or run.state.type.value not in _FINAL:
                await force_task_run_state(client, run.id, Crashed(message=message))
                n += 1
    if n:
        logger().warning("%d task run(s) of the crashed runs marked Crashed", n)
    return n


@task(name="crash_studies", cache_policy=NO_CACHE)
async def crash_studies(config: StudyConfig, flow_run_ids: list[str], message: str) -> list[str]:
    """The studies those runs were running, marked ``crashed`` in the store."""
    with store_for(config) as store:
        crashed = store.crash_studies(flow_run_ids, error=message)
    for study_id in crashed:
        logger().warning("study %s marked crashed", study_id)
    return crashed


@task(name="resume_once", cache_policy=NO_CACHE)
async def resume_once(flow_run_id: str) -> str:
    """Schedule the crashed run ``flow_run_id`` again when the service resumes it by itself
    (:func:`skillreach.service.resume.resumes_automatically`: a nightly or re-baselining that crashed for
    the first time): the same flow run, as ``prefect flow-run retry`` does it, so its study resumes from
    its probes. Returns what was done (``resumed`` or why not)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.responses import SetStateStatus
    from prefect.states import AwaitingRetry

    from skillreach.service.resume import RESUMES, resumes_automatically

    async with get_client() as client:
        run = await client.read_flow_run(UUID(flow_run_id))
        deployment = await client.read_deployment(run.deployment_id) if run.deployment_id else None
        name = deployment.name if deployment is not None else None
        if run.state is None or run.state.type.value != "CRASHED":
            return f"not resumed: the run is {run.state.type.value if run.state else 'without a state'}"
        if not resumes_automatically(name, run.run_count):
            why = ("it crashed again after its automatic resume" if run.run_count > RESUMES
                   else f"{name or 'a run without a deployment'} is not resumed by itself")
            logger().warning("run %s (%s) not resumed: %s", run.name, flow_run_id, why)
            return f"not resumed: {why}"
        message = (f"resumed automatically after a crash ({(run.state.message or '').strip()[:200]}); "
                   "its study goes on from its probes")
        result: Any = await client.set_flow_run_state(run.id, AwaitingRetry(message=message), force=True)
    if result.status != SetStateStatus.ACCEPT:
        logger().warning("run %s not resumed: the server said %s", flow_run_id, result.status)
        return f"not resumed: the server said {result.status.value}"
    logger().warning("run %s (%s of %s) resumed after its crash", run.name, flow_run_id, name)
    return "resumed"
