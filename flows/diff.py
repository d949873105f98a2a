"""The ``diff`` flow: load two study folders (arms) → compare them paired over queries → write reports.

Thin and async: it composes tasks (``tasks/diff.py``); ``diff.fn(...)`` runs the same steps in-process.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from skillreach.diff import DiffResult
from skillreach.flows._compose import call
from skillreach.tasks.diff import compare_arms, load_arms, write_diff_reports

__all__ = ["diff"]


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
    """Did B's change help over A? Paired over the queries both arms ran (see :mod:`skillreach.diff`);
    with ``looks``, where a staged comparison would have stopped."""
    arms = await call(load_arms, a, b, queries)
    result: DiffResult = await call(
        compare_arms, arms, vary=vary, force=force, skill=skill, resamples=resamples, seed=seed, looks=looks
    )
    await call(write_diff_reports, result, html=html, markdown=markdown)
    return result
