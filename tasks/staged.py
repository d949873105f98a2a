"""Tasks of the staged check (``check --changed --staged``): which pairs each stage probes, and the
staged gate after each stage (:mod:`skillreach.baselines.sequential`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.baselines.records import BaselineRecord, record_baseline
from skillreach.baselines.sequential import StagedComparison, stage_order, stage_pairs, staged_from_records
from skillreach.study.plan import StudyPlan

__all__ = ["plan_stages_of", "staged_look"]


@task(name="plan_stages", cache_policy=NO_CACHE)
async def plan_stages_of(
    plan: StudyPlan, members: list[tuple[str, BaselineRecord]], looks: int
) -> list[list[tuple[str, int]]]:
    """The plan's pairs by stage, in the order :func:`staged_from_records` replays (every member's
    baseline holds the cases of the one corpus)."""
    return stage_pairs([p for batch in plan.batches for p in batch], _order(members), looks)


def _order(members: list[tuple[str, BaselineRecord]]) -> list[str]:
    """The order the group's cases are probed in: every member's baseline cases, shuffled once."""
    return stage_order(sorted({c for _, rec in members for c in rec.per_case}))


@task(name="staged_look", cache_policy=NO_CACHE)
async def staged_look(
    artifact: Any,
    queries: Path,
    members: list[tuple[str, BaselineRecord]],
    folders: dict[str, str | None],
    gates: dict[str, float],
    *,
    looks: int,
    look: int,
    previous: dict[str, tuple[BaselineRecord, StagedComparison]],
) -> dict[str, tuple[BaselineRecord, StagedComparison]]:
    """After stage ``look``: each member not finished yet gets its record of the stages probed and its
    staged gate; finished members keep theirs."""
    from skillreach.queries.sets import load_query_set

    out = dict(previous)
    probed = load_query_set(queries)  # the cases pair by content with those the study probes
    order = _order(members)  # the stages as plan_stages_of split them
    for name, base in members:
        if name in out and out[name][1].finished:
            continue
        new = record_baseline(
            artifact, queries, name, skill_folder=folders.get(name), judge_model=base.judge_model
        )
        out[name] = (
            new,
            staged_from_records(
                base, new, gates, looks=looks, probed_looks=look, query_set=probed, order=order
            ),
        )
    return out
