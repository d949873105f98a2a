"""Tasks of ``skillreach uplift``: probe the skill's cases with and without the skill in the catalog.

Both arms run in compliance mode (the agent keeps working after it loaded a skill), with the study's
runtime; records stay in memory. The report is :func:`skillreach.author.uplift.uplift_report`.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.author.uplift import UpliftReport, uplift_cases, uplift_report
from skillreach.models import ProbeRecord
from skillreach.study import StudyConfig

__all__ = ["probe_arm", "report_uplift"]


@task(name="uplift-probe-arm", cache_policy=NO_CACHE)
async def probe_arm(config: StudyConfig, skill: str, with_skill: bool) -> list[ProbeRecord]:
    """Every attempt of the skill's cases against the catalog with (or without) the skill."""
    from dataclasses import replace

    from skillreach.errors import InputError
    from skillreach.study.plan import probe_options
    from skillreach.study.runner import ListSink, run_probes
    from skillreach.tasks._context import runtime_for
    from skillreach.tasks.study import assemble_catalog

    inputs = await assemble_catalog.fn(config)
    if skill not in inputs.catalog:
        raise InputError(f"skill {skill!r}: not in the catalog of {inputs.source}; check --skills")
    catalog = inputs.catalog
    if not with_skill:
        catalog = catalog.model_copy(update={"skills": tuple(s for s in catalog.skills if s.name != skill)})
    cases = uplift_cases(inputs.query_set, skill)
    pairs = [(q, a) for q in cases for a in range(1, config.attempts + 1)]
    runtime = runtime_for(config)
    try:
        return await run_probes(
            runtime,
            catalog,
            pairs,
            options=replace(probe_options(config), compliance=True, keep_answer=True),
            sink=ListSink(),
            concurrency=config.concurrency,
            fingerprint=f"uplift:{skill}:{'with' if with_skill else 'without'}",
            cost_cap=config.max_cost,
        )
    finally:
        await runtime.aclose()


@task(name="uplift-report", cache_policy=NO_CACHE)
async def report_uplift(
    config: StudyConfig,
    skill: str,
    with_records: list[ProbeRecord],
    without_records: list[ProbeRecord],
    margin: float,
) -> UpliftReport:
    from skillreach.queries.sets import load_query_set

    assert config.queries is not None
    return uplift_report(load_query_set(config.queries), skill, with_records, without_records, margin=margin,
                         runtime=config.runtime, model=config.model, attempts=config.attempts)
