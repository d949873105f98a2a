"""The ``sweep`` flow: plan the sizes → for each size, stage it and run it as a ``study`` (a subflow) →
measure → stop early once the metric cannot reach the floor → knee, SLA sizes, report.

Thin and async: it composes tasks (``tasks/sweep.py``) and the study flow, and branches on the early
stop; ``sweep.fn(config)`` runs the same steps in-process.
"""

from __future__ import annotations

from prefect import flow

from skillreach.author.sweep import SizePoint, SweepConfig, SweepResult, should_stop
from skillreach.flows._compose import call
from skillreach.flows.study import study
from skillreach.tasks.sweep import finish_sweep, measure_size, plan_capacity, stage_size

__all__ = ["sweep"]


@flow(name="sweep", log_prints=False)
async def sweep(config: SweepConfig) -> SweepResult:
    """How many skills can the agent hold? One study per catalog size (see :mod:`skillreach.author.sweep`)."""
    stage = await call(plan_capacity, config)
    points: list[SizePoint] = []
    stopped_at: int | None = None
    for size in stage.plan.sizes:
        study_config = await call(stage_size, config, stage, size)
        ran = await call(study, study_config, "sweep")
        point = await call(measure_size, config, size, ran.artifact_path)
        points.append(point)
        if config.stop_below is not None and should_stop(point, config.stop_below, config.metric):
            stopped_at = size
            break
    result: SweepResult = await call(finish_sweep, config, stage, points, stopped_at)
    return result
