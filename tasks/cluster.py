"""The ``cluster`` flow's tasks: read the skills, find their communities
(:mod:`skillreach.author.cluster`)."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.author.cluster import Clustering, cluster_skills
from skillreach.models import Skill
from skillreach.tasks._context import logger

__all__ = ["find_communities", "read_skills"]


@task(name="read_skills", cache_policy=NO_CACHE)
async def read_skills(dirs: list[Path]) -> list[Skill]:
    """Every skill under ``dirs`` (a SKILL.md that does not parse is reported and skipped)."""
    from skillreach.skills.discovery import load_skills

    return list(load_skills(dirs, on_problem=lambda line: logger().warning("%s", line)))


@task(name="find_communities", cache_policy=NO_CACHE)
async def find_communities(
    skills: list[Skill], *, target_size: int, seed: int, resolution: float, top: int, min_ratio: float
) -> Clustering:
    return cluster_skills(skills, target_size=target_size, seed=seed, resolution=resolution, top=top,
                          min_ratio=min_ratio)
