"""The query set as the service grows it: queries generated for a skill added without any, sealed as a
new corpus version, and that version used by the service's later runs.

- :func:`generation_for` says whether the added skill needs queries (no positive query names it) and a
  generator model is configured, and gives the generation flow's options (target: that skill only);
- :func:`grow_corpus` merges what the generation flow wrote into the study's query set
  (:func:`skillreach.queries.sets.grow_query_set`: every old query verbatim, provenance naming the parent and
  the generation) and points the study at it, with ``grown_from`` so the gate compares every skill on the
  parent's cases; the grown set is committed with the records made from it (``record_baselines``);
- :func:`adopt_grown_corpus`: until a person merges the service branch, the service's runs read the
  grown set from that branch (when it descends from the working tree's set), so the records it holds stay
  comparable.
"""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.errors import SkillreachError
from skillreach.queries.generation import GenerationParams
from skillreach.queries.sets import grow_query_set, load_query_set, verify_query_set, write_query_set
from skillreach.study.config import StudyConfig
from skillreach.tasks._context import logger
from skillreach.tasks.baselines import baseline_repo
from skillreach.tasks.generate import GenerateOptions, GenerationOutcome

__all__ = ["adopt_grown_corpus", "generation_for", "grow_corpus", "grown_path"]


def grown_path(config: StudyConfig, digest: str) -> Path:
    """Where a grown corpus version is kept beside the service's other state."""
    return config.home / "corpus" / f"{digest.removeprefix('sha256:')[:16]}.json"


@task(name="generation_for", cache_policy=NO_CACHE)
async def generation_for(config: StudyConfig, skill: str) -> GenerateOptions | None:
    """The generation flow's options for ``skill`` when it has no positive query and a generator model
    is configured; ``None`` otherwise (the study then reports the skill as "no queries")."""
    if not config.generator_model or config.queries is None or not config.skills:
        return None
    qs = load_query_set(config.queries)
    if any(q.expected_skill == skill for q in qs.queries):
        return None
    logger().info("%s has no queries: generating them with %s", skill, config.generator_model)
    return GenerateOptions(
        skills=config.skills,
        out=config.home / "generated" / skill / "queries.json",
        params=GenerationParams(model=config.generator_model),
        targets=(skill,),
        concurrency=1,
        max_retries=config.max_retries,
        timeout_s=config.timeout_s,
    )


@task(name="grow_corpus", cache_policy=NO_CACHE)
async def grow_corpus(config: StudyConfig, skill: str, outcome: GenerationOutcome) -> StudyConfig:
    """The study's query set grown by the generated queries for ``skill``, sealed and written under
    ``home/corpus/``; the returned configuration studies it (``grown_from``: the parent set)."""
    assert config.queries is not None
    parent = load_query_set(config.queries)
    generated = verify_query_set(outcome.out)
    grown = grow_query_set(parent, generated, target=skill, parent_source=str(config.queries))
    path = write_query_set(grown, grown_path(config, grown.provenance.digest))
    added = len(grown.queries) - len(parent.queries)
    logger().info("grew the query set by %d queries for %s: %s (%s)", added, skill, path,
                  grown.provenance.digest[:19])
    return config.model_copy(update={"queries": path, "grown_from": config.queries,
                                     "queries_origin": config.queries_origin or config.queries})


def adopt_grown_corpus(config: StudyConfig) -> StudyConfig:
    """``config`` reading the service branch's grown version of its query set, when the branch holds one
    that descends from the working tree's set (its provenance ``lineage`` names that set's digest)."""
    if config.queries is None or config.grown_from is not None:
        return config
    repo = baseline_repo(config)
    if repo is None or not repo.branch:
        return config
    rel = repo.relative(config.queries)
    text = repo.read_file(rel) if rel else None
    if text is None:
        return config
    try:
        if text == config.queries.read_text(encoding="utf-8"):
            return config
        current = load_query_set(config.queries)
    except (OSError, UnicodeDecodeError, SkillreachError):
        return config  # the study itself will say what is wrong with it
    if '"grown_for"' not in text:
        return config  # not a set the service grew: the working tree's is the truth
    digest = current.provenance.digest or current.compute_digest()
    staging = config.home / "corpus" / ".adopt.json"
    staging.parent.mkdir(parents=True, exist_ok=True)
    staging.write_text(text, encoding="utf-8")
    try:
        branch_set = verify_query_set(staging)
    except SkillreachError as exc:
        logger().warning("%s on %s is not a sealed query set (%s); using the working tree's", rel,
                         repo.branch, exc.message)
        return config
    lineage = getattr(branch_set.provenance, "lineage", None) or []
    if branch_set.provenance.digest == digest or digest not in lineage:
        return config
    path = grown_path(config, branch_set.provenance.digest)
    staging.replace(path)
    logger().info("using the grown query set on %s (%s) until it is merged", repo.branch,
                  branch_set.provenance.digest[:19])
    return config.model_copy(update={"queries": path, "queries_origin": config.queries})
