"""The ``watch`` flow's tasks: snapshot the catalog and the model alias, emit what changed."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.errors import SkillreachError
from skillreach.service.watch import CatalogDiff, ModelChange, WatchEvent, diff_catalog, diff_model
from skillreach.study import StudyConfig
from skillreach.study.plan import SkillsFound, probe_options
from skillreach.tasks._context import api_url, in_prefect_run, logger, runtime_for, store_for

__all__ = ["emit_watch_events", "snapshot_catalog", "snapshot_model", "snapshot_pins"]


@task(name="snapshot_catalog", cache_policy=NO_CACHE)
async def snapshot_catalog(config: StudyConfig, found: SkillsFound) -> CatalogDiff:
    """Compare every discovered skill (name → content digest) with the last snapshot of the same
    folders; store a new snapshot when anything changed (or when there was none)."""
    from skillreach.models import Catalog

    current = {s.name: s.content_digest for s in found.skills}
    with store_for(config) as store:
        previous = store.last_catalog_snapshot(found.source)
        diff = diff_catalog(previous, current)
        if diff.first or not diff.empty:
            digest = Catalog(id="watch", skills=found.skills).digest
            store.snapshot_catalog(found.source, current, digest)
    return diff


@task(name="snapshot_model", cache_policy=NO_CACHE)
async def snapshot_model(config: StudyConfig) -> ModelChange | None:
    """Resolve the configured model alias to its snapshot now; a change from the last one is returned."""
    from skillreach.study.runner import resolve_model

    try:
        runtime = runtime_for(config)
        try:
            current = await resolve_model(runtime, probe_options(config))
        finally:
            await runtime.aclose()
    except SkillreachError as exc:  # no key, no network: the catalog half of the watch still counts
        logger().warning("could not resolve the model %r of runtime %s: %s", config.model, config.runtime,
                         exc.message)
        return None
    if current is None:
        return None
    alias = config.model or "(default)"
    with store_for(config) as store:
        previous = store.last_model_snapshot(config.runtime, alias)
        if previous != current:
            store.record_model_snapshot(config.runtime, alias, current)
    return diff_model(config.runtime, alias, previous, current)


@task(name="snapshot_pins", cache_policy=NO_CACHE)
async def snapshot_pins(config: StudyConfig, found: SkillsFound) -> list[WatchEvent]:
    """Compare the query set's digest, every skill's rubric version and the runtime's version with their
    last snapshot; the changes are events (``skillreach.corpus.changed``, ``.rubric.changed``,
    ``.runtime.version.changed``) that re-baseline with the same gate-first rules."""
    from skillreach.baselines.records import current_rubric_version
    from skillreach.service.watch import diff_catalog, pin_events, pin_snapshot
    from skillreach.study.grading import judge_model_of
    from skillreach.study.plan import assemble_inputs

    try:
        inputs = assemble_inputs(config, found, logger())
    except SkillreachError as exc:
        logger().warning("could not read the query set to watch its pins: %s", exc.message)
        return []
    qs = inputs.query_set
    judge = judge_model_of(config, live=False)
    rubrics = {s: current_rubric_version(qs, s, judge) for s in inputs.catalog.names}
    runtime = runtime_for(config)
    try:
        version = await runtime.version()
    finally:
        await runtime.aclose()
    current = pin_snapshot(qs.provenance.digest or qs.compute_digest(), rubrics, config.runtime,
                           str(version) if version else None)
    key = f"{found.source}#pins"
    with store_for(config) as store:
        previous = store.last_catalog_snapshot(key)
        diff = diff_catalog(previous, current)
        if diff.first or not diff.empty:
            store.snapshot_catalog(key, current, current["corpus"])
    # the service's own growth of the set (queries generated for an added skill) is no change to react to
    lineage = getattr(qs.provenance, "lineage", None) or []
    own = previous is not None and previous.get("corpus") in lineage
    grown_for = getattr(qs.provenance, "grown_for", None) if own else None
    return pin_events(found.source, diff, grown_for=grown_for)


@task(name="emit_watch_events", cache_policy=NO_CACHE)
async def emit_watch_events(events: list[WatchEvent]) -> int:
    """Emit the events to Prefect (they fire the ``rebaseline-all`` triggers). Without a Prefect run and
    server there is no one to tell: they are logged, and 0 is returned."""
    log = logger()
    for ev in events:
        log.info("%s %s", ev.event, ev.payload)
    if not events or not (in_prefect_run() and api_url()):
        return 0
    from prefect.events import emit_event

    sent = 0
    for ev in events:
        if emit_event(ev.event, resource=ev.resource, payload=ev.payload) is not None:
            sent += 1
    return sent
