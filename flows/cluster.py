"""The ``cluster`` flow: read the skills → communities over the BM25 similarity graph (a split of a
large catalog into subagent scopes). ``cluster.fn(...)`` runs the same steps in-process."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from skillreach.author.cluster import Clustering
from skillreach.flows._compose import call
from skillreach.tasks.cluster import find_communities, read_skills

__all__ = ["cluster"]


@flow(name="cluster", log_prints=False)
async def cluster(
    dirs: list[Path],
    *,
    target_size: int = 20,
    seed: int = 0,
    resolution: float = 1.0,
    top: int = 10,
    min_ratio: float = 0.05,
) -> Clustering:
    """Communities of the skills under ``dirs`` (see :func:`skillreach.author.cluster.cluster_skills`)."""
    skills = await call(read_skills, dirs)
    result: Clustering = await call(find_communities, skills, target_size=target_size, seed=seed,
                                    resolution=resolution, top=top, min_ratio=min_ratio)
    return result
