"""The ``uplift`` flow: the skill's cases probed with and without it, then the paired report. Thin."""

from __future__ import annotations

from prefect import flow

from skillreach.author.uplift import UpliftReport
from skillreach.flows._compose import call
from skillreach.study import StudyConfig
from skillreach.tasks.uplift import probe_arm, report_uplift

__all__ = ["uplift"]


@flow(name="uplift", log_prints=False)
async def uplift(config: StudyConfig, skill: str, margin: float = 0.1) -> UpliftReport:
    with_records = await call(probe_arm, config, skill, True)
    without_records = await call(probe_arm, config, skill, False)
    return await call(report_uplift, config, skill, with_records, without_records, margin)
