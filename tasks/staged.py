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
    plan: StudyPlan, members: list[tuple[str, BaselineRecord]], looks: int, screen: list[str] | None = None
) -> list[list[tuple[str, int]]]:
    """The plan's pairs by stage, in the order :func:`staged_from_records` replays (every member's
    baseline holds the cases of the one corpus); ``screen``: the cases most at risk, probed first."""
    order, first = _order(members, screen)
    return stage_pairs([p for batch in plan.batches for p in batch], order, looks, first)


def _order(
    members: list[tuple[str, BaselineRecord]], screen: list[str] | None = None
) -> tuple[list[str], int]:
    """The order the group's cases are probed in — every member's baseline cases, shuffled once, the
    screen's (those of them most at risk) first — and how many the screen holds."""
    shuffled = stage_order(sorted({c for _, rec in members for c in rec.per_case}))
    risky = set(screen or ())
    first = [c for c in shuffled if c in risky]
    return first + [c for c in shuffled if c not in risky], len(first)


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
    screen: list[str] | None = None,
) -> dict[str, tuple[BaselineRecord, StagedComparison]]:
    """After stage ``look``: each member not finished yet gets its record of the stages probed and its
    staged gate; finished members keep theirs. The screen (the first stage) decides a member *ok* only
    when no screened case moved against any member (:func:`staged_from_records`)."""
    from skillreach.queries.sets import load_query_set

    out = dict(previous)
    probed = load_query_set(queries)  # the cases pair by content with those the study probes
    order, first = _order(members, screen)  # the stages as plan_stages_of split them
    news = {
        name: record_baseline(
            artifact, queries, name, skill_folder=folders.get(name), judge_model=base.judge_model
        )
        for name, base in members
        if not (name in out and out[name][1].finished)
    }

    def staged(quiet_elsewhere: bool) -> dict[str, StagedComparison]:
        return {
            name: staged_from_records(
                base, news[name], gates, looks=looks, probed_looks=look, query_set=probed, order=order,
                screen=first, quiet_elsewhere=quiet_elsewhere,
            )
            for name, base in members
            if name in news
        }

    now = staged(True)
    moved = [st.screen_moved for _, st in out.values()] + [st.screen_moved for st in now.values()]
    if any(moved):  # something at risk moved: no skill is decided by the screen
        now = staged(False)
    for name, st in now.items():
        out[name] = (news[name], st)
    return out
