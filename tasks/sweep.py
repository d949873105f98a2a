"""The ``sweep`` flow's tasks: plan the sizes, stage one size as an ordinary study, measure it, finish.

A size is staged as a study folder ``OUT/n-0050/`` whose ``skills/`` holds one symbolic link per resident
skill (built under a temporary name and renamed into place), so the study machinery runs unchanged
(``skillreach run --skills OUT/n-0050/skills --queries OUT/queries.json`` repeats it) and a re-run
resumes each size from its own ``probes.jsonl``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.author.sweep import SizePoint, SweepConfig, SweepPlan, SweepResult
from skillreach.errors import ConfigError
from skillreach.study import StudyConfig
from skillreach.tasks._context import logger

__all__ = ["SweepStage", "finish_sweep", "link_farm", "measure_size", "plan_capacity", "stage_size"]


@dataclass(frozen=True)
class SweepStage:
    plan: SweepPlan
    folders: dict[str, str]
    """Skill name → its folder (what a size's link points at)."""
    queries_path: Path
    queries_digest: str
    queries: int


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


@task(name="plan_capacity", cache_policy=NO_CACHE)
async def plan_capacity(config: SweepConfig) -> SweepStage:
    """Discover the corpus, choose anchors and the seeded filler order, seal the sweep's query set."""
    from skillreach.author.sweep import plan_sweep, restrict_queries
    from skillreach.queries.sets import dump_query_set, load_query_set, seal
    from skillreach.skills.discovery import discover

    base = config.study
    if not base.skills or base.queries is None:
        raise ConfigError("a sweep needs --skills DIR and --queries FILE")
    found = discover(list(base.skills), precedence=base.skill_precedence)
    if not found.skills:
        raise ConfigError(f"no SKILL.md under {', '.join(map(str, base.skills))}; pass --skills DIR")
    query_set = load_query_set(base.queries, catalog=[s.name for s in found.skills])
    plan = plan_sweep(
        found.skills,
        query_set,
        config.sizes,
        design=config.design,
        target=config.target,
        anchors=config.anchors,
        n_anchors=config.n_anchors,
        k=config.k,
        seed=config.seed,
    )
    kept = restrict_queries(query_set, plan)
    sealed = seal(
        kept, source=f"{base.queries} restricted to the sweep's anchors ({', '.join(plan.anchors)})"
    )
    queries_path = config.out / "queries.json"
    existing = load_query_set(queries_path) if queries_path.is_file() else None
    if existing is None or existing.provenance.digest != sealed.provenance.digest:
        _write_atomic(queries_path, dump_query_set(sealed))
    else:
        sealed = existing  # resume: keep the sealed set (and its created_at) the sizes already ran
    if plan.clipped:
        logger().warning(
            "sizes left out (outside core %d … corpus %d): %s",
            len(plan.core),
            len(plan.core) + len(plan.filler),
            ", ".join(map(str, plan.clipped)),
        )
    return SweepStage(
        plan=plan,
        folders={s.name: str(Path(s.folder or Path(s.path).parent).resolve()) for s in found.skills},
        queries_path=queries_path,
        queries_digest=sealed.provenance.digest or sealed.compute_digest(),
        queries=len(sealed.queries),
    )


def _link_tree(src: Path, dst: Path, exclude: frozenset[Path]) -> None:
    """``dst`` shows ``src`` through symbolic links, leaving out the folders in ``exclude`` (other
    skills nested inside this one, which would otherwise join the catalog through the link)."""
    if not any(src in e.parents for e in exclude):
        dst.symlink_to(src, target_is_directory=True)
        return
    dst.mkdir()
    for entry in sorted(src.iterdir()):
        if entry in exclude:
            continue
        if entry.is_dir() and not entry.is_symlink():
            _link_tree(entry, dst / entry.name, exclude)
        else:
            (dst / entry.name).symlink_to(entry)


def link_farm(folder: Path, names: list[str], folders: dict[str, str]) -> None:
    """``folder`` holds exactly the skills ``names`` (an existing farm of the same skills is kept; else it
    is built under a temporary name and renamed into place)."""
    manifest = folder / ".skills"
    wanted = "\n".join(names) + "\n"
    if manifest.is_file() and manifest.read_text(encoding="utf-8") == wanted:
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".skills-"))
    every = frozenset(Path(f) for f in folders.values())
    for name in names:
        own = Path(folders[name])
        _link_tree(own, tmp / name, frozenset(f for f in every if f != own))
    (tmp / ".skills").write_text(wanted, encoding="utf-8")
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)


@task(name="stage_size", cache_policy=NO_CACHE)
async def stage_size(config: SweepConfig, stage: SweepStage, size: int) -> StudyConfig:
    """The study of one size: its resident skills linked under ``OUT/n-XXXX/skills``, the sweep's set."""
    from skillreach.author.sweep import catalog_at, size_folder

    folder = size_folder(config.out, size)
    link_farm(folder / "skills", catalog_at(stage.plan, size), stage.folders)
    return config.study.model_copy(
        update={
            "skills": (folder / "skills",),
            "follow_outside": True,  # the farm links to the catalog's own folders
            "queries": stage.queries_path,
            "out": folder,
            "catalog": "full",
            "target": None,
            "gate": False,
            "record_baselines": False,
        }
    )


@task(name="measure_size", cache_policy=NO_CACHE)
async def measure_size(config: SweepConfig, size: int, artifact_path: Path) -> SizePoint:
    """One size's figures with intervals, from its study's artifact."""
    from skillreach.author.sweep import size_point
    from skillreach.scoring.artifact import read_artifact

    point = size_point(
        size,
        str(Path(artifact_path).parent),
        read_artifact(artifact_path),
        resamples=config.resamples,
        seed=config.seed,
    )
    f1 = "n/a" if point.f1 is None else f"{point.f1:.3f}"
    logger().info("size %d: F1 %s %s, pass rate %s", size, f1, point.f1_ci, point.pass_rate)
    return point


@task(name="finish_sweep", cache_policy=NO_CACHE)
async def finish_sweep(
    config: SweepConfig, stage: SweepStage, points: list[SizePoint], stopped_at: int | None
) -> SweepResult:
    """Knee and SLA sizes of the sweep's metric; ``OUT/sweep.json`` and ``OUT/report.html`` (the curve)."""
    from skillreach.author.sweep import analyse
    from skillreach.reports.sweep import render_sweep_html

    plan = stage.plan
    result = SweepResult(
        out=str(config.out),
        design=plan.design,
        runtime=config.study.runtime,
        model=config.study.model,
        seed=config.seed,
        anchors=plan.anchors,
        core=len(plan.core),
        corpus=len(plan.core) + len(plan.filler),
        queries=stage.queries,
        queries_digest=stage.queries_digest,
        sizes=plan.sizes,
        clipped=plan.clipped,
        points=sorted(points, key=lambda p: p.size),
        analysis=analyse(points, metric=config.metric, stopped_at=stopped_at),
    )
    _write_atomic(config.out / "sweep.json", result.model_dump_json(indent=2) + "\n")
    _write_atomic(config.out / "report.html", render_sweep_html(result))
    return result
