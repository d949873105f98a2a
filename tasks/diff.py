"""The ``diff`` flow's tasks: load two arms, compare them, write the reports.

Each wraps a core function of :mod:`skillreach.author.diff` / :mod:`skillreach.reports.diff`; the file I/O is
here, never in the flow.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.author.diff import Arm, DiffResult
from skillreach.baselines.sequential import StagedDiff
from skillreach.study.config import StudyConfig
from skillreach.study.plan import StudyInputs, StudyPlan

__all__ = ["Arms", "arm_b", "compare_arms", "diff_look", "diff_stages", "load_arms", "write_diff_reports"]


@dataclass(frozen=True)
class Arms:
    a: Arm
    b: Arm
    texts: dict[str, str] = field(default_factory=dict)


@task(name="load_arms", cache_policy=NO_CACHE)
async def load_arms(a: Path, b: Path, queries: Path | None = None) -> Arms:
    """Both arms' artifacts (digests verified) and, with ``queries``, the query texts."""
    from skillreach.author.diff import load_arm, query_texts

    arm_a, arm_b = load_arm(Path(a), "A"), load_arm(Path(b), "B")
    texts = query_texts(queries, arm_a.artifact.queries_digest, arm_a)
    return Arms(a=arm_a, b=arm_b, texts=texts)


@task(name="compare_arms", cache_policy=NO_CACHE)
async def compare_arms(
    arms: Arms,
    *,
    vary: str | None = None,
    force: bool = False,
    skill: str | None = None,
    resamples: int = 2000,
    seed: int = 0,
    looks: int | None = None,
    partial_b: bool = False,
) -> DiffResult:
    """The paired diff B − A (with ``looks``, its staged replay too); walls and corroboration refuse
    with exit 3."""
    from skillreach.author.diff import diff_arms

    return diff_arms(
        arms.a,
        arms.b,
        vary=vary,
        force=force,
        skill=skill,
        texts=arms.texts,
        resamples=resamples,
        seed=seed,
        looks=looks,
        partial_b=partial_b,
    )


def _write(path: Path, text: str) -> Path:
    """Write to a temporary name beside ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return path


@task(name="write_diff_reports", cache_policy=NO_CACHE)
async def write_diff_reports(
    result: DiffResult,
    *,
    html: Path | None = None,
    markdown: Path | None = None,
    json_out: Path | None = None,
) -> list[Path]:
    """The HTML page, the markdown summary and the JSON, where asked for."""
    from skillreach.reports.diff import render_diff_html, render_diff_markdown

    written: list[Path] = []
    if html is not None:
        written.append(_write(Path(html), render_diff_html(result)))
    if markdown is not None:
        written.append(_write(Path(markdown), render_diff_markdown(result)))
    if json_out is not None:
        written.append(_write(Path(json_out), result.model_dump_json(indent=2) + "\n"))
    return written


@task(name="arm_b", cache_policy=NO_CACHE)
async def arm_b(a: Path, skills: list[Path], out: Path, secrets_from: StudyConfig) -> tuple[Arm, StudyConfig]:
    """Arm A (read) and the configuration of arm B (probed): A's study with ``skills``, into ``out``."""
    from skillreach.author.diff import arm_b_config, load_arm

    arm_a = load_arm(Path(a), "A")
    return arm_a, arm_b_config(arm_a, skills, Path(out), secrets_from)


@task(name="diff_stages", cache_policy=NO_CACHE)
async def diff_stages(
    arm_a: Arm, inputs: StudyInputs, plan: StudyPlan, looks: int, seed: int
) -> tuple[list[str], list[list[tuple[str, int]]]]:
    """The queries tested (B's plan ∩ A's scored queries) and B's pending pairs by stage, in the seeded
    order the staged test reads them."""
    from skillreach.author.diff import diff_plan
    from skillreach.baselines.sequential import stage_order, stage_pairs

    pairs = [p for batch in plan.batches for p in batch]
    planned = diff_plan(arm_a.artifact, [(q.id, 0) for q in inputs.query_set.queries])
    return planned, stage_pairs(pairs, stage_order(planned, seed), looks)


@task(name="diff_look", cache_policy=NO_CACHE)
async def diff_look(
    arm_a: Arm, artifact_b: object, planned: list[str], attempts: int, *, looks: int, look: int, seed: int
) -> StagedDiff:
    """The staged test after stage ``look`` of B's probing."""
    from skillreach.author.diff import probed_staged_diff

    return probed_staged_diff(arm_a.artifact, artifact_b, planned, attempts,  # type: ignore[arg-type]
                              looks=looks, look=look, seed=seed)
