"""The ``watch`` flow's tasks: snapshot the catalog and the model alias, emit what changed; and what the
service's studies do about catalog changes (cases of a skill gone from the catalog left out, a renamed
skill's baseline carried to its new name)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.errors import SkillreachError
from skillreach.service.watch import (
    CatalogDiff,
    ModelChange,
    WatchEvent,
    body_digest,
    diff_catalog,
    diff_model,
    diff_recorded,
    find_renames,
)
from skillreach.study import StudyConfig
from skillreach.study.plan import SkillsFound, probe_options
from skillreach.tasks._context import api_url, in_prefect_run, logger, runtime_for, store_for

__all__ = [
    "StudySkills",
    "carry_renamed",
    "emit_watch_events",
    "pending_renames",
    "snapshot_catalog",
    "snapshot_model",
    "snapshot_pins",
    "without_gone_skills",
]


def _recorded_versions(config: StudyConfig, store: Any, found: SkillsFound) -> dict[str, str]:
    """Skill → the skill version its stored baseline pins: the baselines on the service branch, else
    (outside git) the store's newest record of each discovered skill."""
    from skillreach.baselines.records import BaselineRecord
    from skillreach.tasks.baselines import baseline_repo

    repo = baseline_repo(config)
    out: dict[str, str] = {}
    if repo is not None:
        for skill in repo.skills():
            rec = repo.read(skill)
            if rec is not None:
                out[skill] = rec.skill_version
        return out
    for s in found.skills:
        row = store.latest_baseline(s.name)
        if row is not None:
            out[s.name] = BaselineRecord.model_validate(row.record).skill_version
    return out


@task(name="snapshot_catalog", cache_policy=NO_CACHE)
async def snapshot_catalog(config: StudyConfig, found: SkillsFound) -> CatalogDiff:
    """Compare every discovered skill (name → content digest) with the last snapshot of the same
    folders — or, on the first watch of a service that has baselines, each skill's version with the one
    its baseline pins (a skill added before the first watch is ``added``) —; a skill removed and one added
    with the same description and body is a rename. A new snapshot is stored when anything changed (or
    when there was none)."""
    from skillreach.baselines.records import skill_version
    from skillreach.models import Catalog

    current = {s.name: s.content_digest for s in found.skills}
    bodies = {s.name: body_digest(s.description, s.body) for s in found.skills}
    with store_for(config) as store:
        previous = store.last_catalog_snapshot(found.source)
        if previous is None:
            recorded = _recorded_versions(config, store, found)
            versions = {s.name: skill_version(s.folder)[0] for s in found.skills} if recorded else {}
            diff = diff_recorded(recorded, versions)
            if diff.from_baselines:
                logger().info("first watch: the catalog compared with %d recorded baselines", len(recorded))
        else:
            diff = diff_catalog(previous, current)
        diff = find_renames(diff, store.last_catalog_snapshot(f"{found.source}#bodies") or {}, bodies)
        if diff.first or diff.from_baselines or not diff.empty:
            digest = Catalog(id="watch", skills=found.skills).digest
            store.snapshot_catalog(found.source, current, digest)
            store.snapshot_catalog(f"{found.source}#bodies", bodies, digest)
        if diff.renamed:  # kept: whichever re-baselining runs next carries them (pending_renames)
            known = store.last_catalog_snapshot(f"{found.source}#renamed") or {}
            store.snapshot_catalog(f"{found.source}#renamed", {**known, **diff.renamed}, digest)
    return diff


@task(name="pending_renames", cache_policy=NO_CACHE)
async def pending_renames(config: StudyConfig, found: SkillsFound) -> dict[str, str]:
    """Every rename the watch saw (old → new name) whose new name is in the catalog: the service's
    studies carry the old name's baseline to it (:func:`carry_renamed`, which does nothing once it is
    carried) — whichever re-baselining runs first, since two triggered at once keep one."""
    names = {s.name for s in found.skills}
    with store_for(config) as store:
        seen = store.last_catalog_snapshot(f"{found.source}#renamed") or {}
    return {old: new for new, old in seen.items() if new in names and old not in names}


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


@dataclass(frozen=True)
class StudySkills:
    """What the service's study measures once the catalog's changes are accounted for."""

    config: StudyConfig
    notices: list[dict[str, Any]] = field(default_factory=list)
    """One alert per skill gone from the catalog whose cases are left out (and per carried baseline)."""
    gone: dict[str, list[str]] = field(default_factory=dict)


def _shown(config: StudyConfig, path: Path) -> str:
    from skillreach.tasks.baselines import baseline_repo

    repo = baseline_repo(config)
    rel = repo.relative(path) if repo is not None else None
    return rel or str(path)


@task(name="without_gone_skills", cache_policy=NO_CACHE)
async def without_gone_skills(
    config: StudyConfig, found: SkillsFound, renamed: dict[str, str] | None = None
) -> StudySkills:
    """The study's configuration without the cases that name a skill gone from the catalog (its own
    cases left out, the name taken off other cases' acceptable skills), written as a query set of its own
    under ``home/corpus/``, and one alert per gone skill: "remove its cases from QUERYSET or restore the
    skill" (``renamed``: old → new name — "relabel them to NEW"). The studies run on the other skills
    instead of every one failing on the stray names. Unchanged when no case names a gone skill."""
    from skillreach.models import QuerySet
    from skillreach.queries.sets import load_query_set, seal, write_query_set
    from skillreach.service.alerts import notice_payload
    from skillreach.service.watch import SKILL_GONE, gone_cases
    from skillreach.tasks.corpus import grown_path

    if config.queries is None:
        return StudySkills(config)
    qs = load_query_set(config.queries)
    names = [s.name for s in found.skills]
    gone = gone_cases(((q.id, q.expected_skill, q.acceptable_skills) for q in qs.queries), names)
    if not gone:
        return StudySkills(config)
    kept = tuple(
        q.model_copy(update={"acceptable_skills": tuple(a for a in q.acceptable_skills if a not in gone)})
        for q in qs.queries if q.expected_skill not in gone)
    origin = config.queries_origin or config.queries
    where = _shown(config, Path(origin))
    rest = seal(QuerySet(catalog_id=qs.catalog_id, queries=kept), catalog_id=qs.catalog_id,
                source=f"{where} without the cases of {', '.join(gone)} (gone from the catalog)")
    path = write_query_set(rest, grown_path(config, rest.provenance.digest))
    notices = []
    new_names = dict(renamed or {})
    for skill, ids in gone.items():
        shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
        if skill in new_names:
            what = (f"was renamed to {new_names[skill]}, but {len(ids)} case(s) of {where} still name it "
                    f"({shown}): relabel them to {new_names[skill]} in {where}")
        else:
            what = (f"is no longer in the catalog, but {len(ids)} case(s) of {where} name it ({shown}): "
                    f"remove its cases from {where} or restore the skill")
        notices.append(notice_payload(
            SKILL_GONE, skill=skill, metric="queries", run_link=where,
            message=f"{what}; until then the studies leave them out and run on the other skills"))
        logger().warning("skill %s %s", skill, what)
    updated = config.model_copy(update={"queries": path, "queries_origin": origin})
    return StudySkills(updated, notices, gone)


@task(name="carry_renamed", cache_policy=NO_CACHE)
async def carry_renamed(config: StudyConfig, found: SkillsFound, old: str, new: str) -> dict[str, Any] | None:
    """A skill renamed (same description and body, new name and folder, in one change): its baseline —
    and its candidate, if one waits — carried to the new name in one commit that says so (the old
    name's records removed), and mirrored into the store, so the re-baselining gates the skill against
    its history instead of starting over. The notice saying so; ``None`` when there is nothing to carry
    (no baseline of the old name, or one of the new name already)."""
    from skillreach.baselines.rebaseline import carry_record
    from skillreach.baselines.records import BaselineRecord
    from skillreach.queries.sets import load_query_set
    from skillreach.service.alerts import notice_payload
    from skillreach.service.watch import BASELINE_CARRIED
    from skillreach.tasks.baselines import baseline_repo

    if config.queries is None:
        return None
    repo = baseline_repo(config)
    with store_for(config) as store:
        def stored(skill: str) -> BaselineRecord | None:
            if repo is not None:
                return repo.read(skill)
            row = store.latest_baseline(skill)
            return BaselineRecord.model_validate(row.record) if row is not None else None

        base = stored(old)
        if base is None or stored(new) is not None:
            return None
        skill = next((s for s in found.skills if s.name == new), None)
        rel = repo.relative(Path(skill.folder)) if repo is not None and skill is not None else None
        qs = load_query_set(config.queries)
        carried, moved = carry_record(base, new, qs, skill_path=rel)
        waiting = repo.read(old, candidate=True) if repo is not None else None
        cand = carry_record(waiting, new, qs, skill_path=rel)[0] if waiting is not None else None
        sha = None
        if repo is not None:
            done = repo.commit(
                [carried], candidates=[cand] if cand is not None else [], remove=[old],
                subject=f"baselines: {old} renamed to {new} — its baseline {base.baseline_id} carried",
                why=[f"reason: {old} renamed to {new} (same description and body, in one change)",
                     f"{moved} of {len(base.per_case)} recorded cases relabelled from {old} to {new} and "
                     "paired; the others stay unpaired until re-baselined",
                     *([f"its candidate {waiting.baseline_id} carried too"] if waiting is not None else [])])
            sha = done.sha
        store.add_baseline(carried.model_dump(mode="json"), study_id=None)
    message = (f"{old} was renamed to {new}: its baseline {base.baseline_id} is carried to the new name "
               f"({moved} of {len(base.per_case)} cases paired under it"
               + (f"; commit {sha[:12]}" if sha else "") + f"); the re-baselining gates {new} against it")
    logger().warning("%s", message)
    return notice_payload(BASELINE_CARRIED, skill=new, metric="baseline", baseline_id=base.baseline_id,
                          run_link=str(repo.top) if repo is not None else "", message=message)
