"""The ``diff`` flow: load two study folders (arms) → compare them paired over queries → write reports.

Thin and async: it composes tasks (``tasks/diff.py``); ``diff.fn(...)`` runs the same steps in-process.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from skillreach.author.diff import DiffResult
from skillreach.baselines.sequential import StagedDiff
from skillreach.flows._compose import call
from skillreach.flows.staged import probe_stage
from skillreach.study import StudyConfig
from skillreach.tasks.diff import arm_b, compare_arms, diff_look, diff_stages, load_arms, write_diff_reports
from skillreach.tasks.grade import grade_study
from skillreach.tasks.score import fail_study, score_study
from skillreach.tasks.study import (
    assemble_catalog,
    canary,
    estimate_spend,
    prepare_study,
    release_study,
)

__all__ = ["diff", "probed_diff"]


@flow(name="diff", log_prints=False)
async def diff(
    a: Path,
    b: Path,
    *,
    vary: str | None = None,
    force: bool = False,
    skill: str | None = None,
    queries: Path | None = None,
    html: Path | None = None,
    markdown: Path | None = None,
    resamples: int = 2000,
    seed: int = 0,
    looks: int | None = None,
) -> DiffResult:
    """Did B's change help over A? Paired over the queries both arms ran (see :mod:`skillreach.author.diff`);
    with ``looks``, where a staged comparison would have stopped."""
    arms = await call(load_arms, a, b, queries)
    result: DiffResult = await call(
        compare_arms, arms, vary=vary, force=force, skill=skill, resamples=resamples, seed=seed, looks=looks
    )
    await call(write_diff_reports, result, html=html, markdown=markdown)
    return result


@flow(name="probed-diff", log_prints=False)
async def probed_diff(
    a: Path,
    b: Path,
    skills: list[Path],
    *,
    secrets_from: StudyConfig | None = None,
    vary: str | None = None,
    force: bool = False,
    skill: str | None = None,
    queries: Path | None = None,
    html: Path | None = None,
    markdown: Path | None = None,
    resamples: int = 2000,
    seed: int = 0,
    looks: int = 4,
) -> DiffResult:
    """Arm B probed stage by stage — A's study with the skills in ``skills``, into folder ``b`` — with
    the staged test of Δ top-1 after each stage; the probing stops as soon as it is decided. A re-run
    into the same ``b`` resumes."""
    arm_a, config = await call(arm_b, a, skills, b, secrets_from or StudyConfig())
    inputs = await call(assemble_catalog, config)
    plan = await call(prepare_study, config, inputs, "diff")  # takes the study's lock
    spent, batch = plan.spent_usd, 0
    staged: StagedDiff | None = None
    try:
        planned, stages = await call(diff_stages, arm_a, inputs, plan, looks, seed)
        await call(estimate_spend, config, inputs, plan)  # said before anything is spent
        await call(canary, config, inputs)
        for look, pairs in enumerate(stages, 1):
            batch, spent = await probe_stage(config, inputs, plan, pairs, batch=batch, spent=spent)
            await call(grade_study, config, inputs, plan)
            scored = await call(score_study, config, inputs, plan, "diff")
            staged = await call(diff_look, arm_a, scored.artifact, planned, config.attempts,
                                looks=looks, look=look, seed=seed)
            if staged.finished:
                break
    except BaseException as exc:  # what was probed stays recorded
        await call(fail_study, config, plan, exc)
        raise
    finally:
        await call(release_study, plan)
    arms = await call(load_arms, a, plan.out, queries)
    result: DiffResult = await call(compare_arms, arms, vary=vary, force=force, skill=skill,
                                    resamples=resamples, seed=seed, partial_b=True)
    result = result.model_copy(update={"staged": staged})
    await call(write_diff_reports, result, html=html, markdown=markdown)
    return result
