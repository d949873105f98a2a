"""The ``staged-check`` flow: one check group's study probed stage by stage, stopping as soon as every
skill's staged gate is decided (docs/spec/metrics.md "Staged comparison"). Thin: the study's own tasks
plus the two of :mod:`skillreach.tasks.staged`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from skillreach.baselines.records import BaselineRecord
from skillreach.baselines.sequential import StagedCheck, StagedComparison
from skillreach.flows._compose import call
from skillreach.study import StudyConfig
from skillreach.tasks.grade import check_judge, grade_study
from skillreach.tasks.score import fail_study, score_study
from skillreach.tasks.staged import plan_stages_of, staged_look
from skillreach.tasks.study import (
    assemble_catalog,
    canary,
    estimate_spend,
    prepare_study,
    probe_batch,
    release_study,
)

__all__ = ["probe_stage", "staged_check"]


async def probe_stage(
    config: StudyConfig, inputs: Any, plan: Any, pairs: list[tuple[str, int]], *, batch: int, spent: float
) -> tuple[int, float]:
    """Probe one stage's pairs in batches of ``config.batch_size``; returns (next batch number, spent)."""
    for i in range(0, len(pairs), config.batch_size):
        chunk = tuple(pairs[i : i + config.batch_size])
        summary = await call(probe_batch, config, inputs, plan, chunk, batch=batch, spent_before=spent)
        spent += summary["cost_usd"]
        batch += 1
    return batch, spent


@flow(name="staged-check", log_prints=False)
async def staged_check(
    config: StudyConfig,
    members: list[tuple[str, BaselineRecord]],
    queries: Path,
    *,
    folders: dict[str, str | None],
    gates: dict[str, float],
    looks: int = 4,
    screen: list[str] | None = None,
) -> StagedCheck:
    inputs = await call(assemble_catalog, config)
    await call(check_judge, config, inputs)
    plan = await call(prepare_study, config, inputs, "check")
    outcomes: dict[str, tuple[BaselineRecord, StagedComparison]] = {}
    spent, batch, ran = plan.spent_usd, 0, 0
    try:
        stages = await call(plan_stages_of, plan, members, looks, screen)
        await call(estimate_spend, config, inputs, plan)  # said before anything is spent
        await call(canary, config, inputs)
        for look, pairs in enumerate(stages, 1):
            batch, spent = await probe_stage(config, inputs, plan, pairs, batch=batch, spent=spent)
            ran += len(pairs)
            await call(grade_study, config, inputs, plan)
            scored = await call(score_study, config, inputs, plan)
            outcomes = await call(
                staged_look,
                scored.artifact,
                queries,
                members,
                folders,
                gates,
                looks=looks,
                look=look,
                previous=outcomes,
                screen=screen,
            )
            if all(st.finished for _, st in outcomes.values()):
                break
    except BaseException as exc:  # what was probed stays recorded
        await call(fail_study, config, plan, exc)
        raise
    finally:
        await call(release_study, plan)  # prepare_study took the study's lock
    return StagedCheck(outcomes=outcomes, probes_run=ran, probes_planned=sum(len(p) for p in stages))
