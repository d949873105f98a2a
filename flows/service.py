"""The service's entry flows besides ``study``: ``rebaseline_all``, ``nightly_compliance``, ``watch``.

Each resolves its configuration (a StudyConfig parameter, a config file, ``$SKILLREACH_STUDY_CONFIG`` or
the bundled example) and composes tasks; no SQL, HTTP or file I/O in the flow bodies.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from prefect import flow

from skillreach.flows._compose import call
from skillreach.flows._names import nightly_name, rebaseline_name, watch_name
from skillreach.flows.generate_queries import generate_queries
from skillreach.flows.study import study
from skillreach.service.alerts import GATE_BREACHED
from skillreach.service.watch import MODEL_SNAPSHOT_CHANGED, SKILL_ADDED, SKILL_RENAMED, events_for
from skillreach.study import StudyConfig, StudyResult
from skillreach.tasks.alerts import deliver_alerts
from skillreach.tasks.baselines import EVERY_SKILL
from skillreach.tasks.config import resolve_config
from skillreach.tasks.corpus import generation_for, grow_corpus
from skillreach.tasks.crashes import (
    crash_children,
    crash_studies,
    crash_task_runs,
    reconcile_finished,
    resume_once,
    run_tree,
)
from skillreach.tasks.study import discover_skills
from skillreach.tasks.watch import (
    carry_renamed,
    emit_watch_events,
    pending_renames,
    snapshot_catalog,
    snapshot_model,
    snapshot_pins,
    without_gone_skills,
)

__all__ = ["nightly_compliance", "rebaseline_all", "resolve_crashed", "watch"]


async def _catalog_changes(cfg: StudyConfig, renamed: dict[str, str] | None = None) -> StudyConfig:
    """The service's study after the catalog's changes: a renamed skill's baseline carried to its new
    name (``renamed``: old → new, and every rename the watch saw), the cases of a skill gone from the
    catalog left out — each said in one alert — so the study runs on the rest."""
    found = await call(discover_skills, cfg)
    renamed = {**await call(pending_renames, cfg, found), **(renamed or {})}
    notices = []
    for old, new in renamed.items():
        carried = await call(carry_renamed, cfg, found, old, new)
        if carried is not None:
            notices.append(carried)
    kept = await call(without_gone_skills, cfg, found, renamed)
    notices += kept.notices
    if notices:
        await call(deliver_alerts, cfg, None, notices)
    config: StudyConfig = kept.config
    return config


async def _run_study(cfg: StudyConfig, kind: str, slot: str | None = None) -> StudyResult:
    # a subflow (a child run) inside a Prefect run; plain code otherwise
    result: StudyResult = await call(study, cfg, kind, slot)
    return result


def _slot(given: str | None, fmt: str) -> str | None:
    """The schedule slot of this flow run (its expected start, e.g. ``2026-12-01``): part of the
    study's default folder, so a retry or a re-run in the same slot resumes and the next starts fresh.
    ``None`` outside a Prefect run (the study's folder is then its fingerprint's alone)."""
    from prefect.context import FlowRunContext

    if given:
        return given
    ctx = FlowRunContext.get()
    start = getattr(ctx.flow_run, "expected_start_time", None) if ctx and ctx.flow_run else None
    return start.astimezone(UTC).strftime(fmt) if start is not None else None


@flow(name="rebaseline-all", flow_run_name=rebaseline_name)
async def rebaseline_all(
    config: StudyConfig | None = None,
    config_file: str | None = None,
    reason: str = "manual",
    skill: str | None = None,
    model_snapshot: str | None = None,
    *,
    renamed_from: str | None = None,
    slot: str | None = None,
) -> dict[str, Any]:
    """Re-probe every skill, gate each against its stored baseline, then re-record — never silently.

    Gate before re-record, and a baseline only goes down when a person says so: a breach alerts (one
    per skill and metric), an inconclusive drop (past the gate, the interval undecided) alerts once per
    skill with how many cases would decide it, and either skill's new record waits as a candidate for
    ``skillreach baseline accept``; the ok ones are recorded, all in one commit. After
    ``skillreach.model.snapshot.changed`` the pins differ by design: the same paired differences are a
    drift report (``skillreach.model.drift`` for each skill that moved past its gate) and every record is
    re-recorded under the new pin — except a skill whose candidate waits: it keeps waiting, its new
    record a candidate under the new pin (the drift report lists them; so after a runtime version
    change). A study on another runtime, model or rubric judge than the stored baselines' re-records
    nothing (*not compared*). ``skillreach.skill.changed`` (an edit) re-gates every skill, as
    ``skill.added`` does; ``skill`` ``"*"`` (the first nightly of a fresh install) is every skill.
    A skill added without queries gets them from the
    generation flow when a generator model is configured: the grown set is a new corpus version, every
    skill is gated on the old set's cases, and the grown set is committed with the records made from it.
    ``skillreach.skill.renamed`` (``renamed_from``: the old name) carries the old name's baseline to the
    new one first, in a commit that says so; a skill removed from the catalog (``skill.removed``) leaves its
    cases out of the study, with one alert naming what to do about them.
    ``reason``, ``skill``, ``model_snapshot`` and ``renamed_from`` come from the triggering event; the
    study's folder is per hour of the run's expected start (``slot``), so a retried or re-run
    re-baselining resumes.
    """
    drift = reason == MODEL_SNAPSHOT_CHANGED
    if skill == EVERY_SKILL:
        skill = None
    why = reason if not skill else f"{reason} ({skill})"
    if model_snapshot:
        why += f" → {model_snapshot}"
    cfg = await call(resolve_config, config, config_file, record_baselines=True, gate=True, drift=drift,
                     reason=why)
    renamed = {renamed_from: skill} if reason == SKILL_RENAMED and skill and renamed_from else None
    cfg = await _catalog_changes(cfg, renamed)
    grown = False
    if skill and reason == SKILL_ADDED:  # a skill added without queries: generate them when configured
        options = await call(generation_for, cfg, skill)
        if options is not None:
            outcome = await call(generate_queries, options)
            cfg = await call(grow_corpus, cfg, skill, outcome)
            grown = True
    result = await _run_study(cfg, "rebaseline", _slot(slot, "%Y-%m-%dT%H"))
    return {"reason": reason, "skill": skill or None, "model_snapshot": model_snapshot or None,
            "study_id": result.study_id, "out": str(result.out), "statuses": result.statuses,
            "alerts": len(result.breaches), "queries_grown": grown, "gate_report": result.gate_report}


@flow(name="nightly-compliance", flow_run_name=nightly_name)
async def nightly_compliance(
    config: StudyConfig | None = None, config_file: str | None = None, slot: str | None = None
) -> Any:
    """The nightly study with compliance checks on (the agent goes on after the target), gated
    against the stored baselines; a breach alerts, and a tracked run with a breach ends ``Failed(name=
    "Breached")`` (its data the same summary). The study's folder is per night (``slot``, the
    run's expected start date in UTC): re-running a crashed nightly the same day resumes it."""
    cfg = await call(resolve_config, config, config_file, compliance=True, gate=True)
    cfg = await _catalog_changes(cfg)
    result = await _run_study(cfg, "compliance", _slot(slot, "%Y-%m-%d"))
    breached = [b for b in result.breaches if b.get("event", GATE_BREACHED) == GATE_BREACHED]
    summary = {"study_id": result.study_id, "breaches": len(breached), "alerts": len(result.breaches),
               "out": str(result.out), "statuses": result.statuses, "gate_report": result.gate_report}
    return _breached(summary, result, breached) if breached else summary


def _breached(summary: dict[str, Any], result: StudyResult, breaches: list[dict[str, Any]]) -> Any:
    """A tracked nightly with a breached gate ends ``Failed`` named ``Breached`` (not green in the UI; no
    flow retry: a retry would measure the same breach again); in-process, the summary as it is. Notices
    (no baseline yet, an expired one) alert by themselves and do not fail the run: one alert each."""
    from skillreach.tasks import in_prefect_run

    if not in_prefect_run():
        return summary
    from prefect.states import Failed

    skills = sorted({str(b.get("skill")) for b in breaches if b.get("skill")})
    message = (f"{len(breaches)} gate breach(es) in study {result.study_id}"
               + (f": {', '.join(skills)}" if skills else "") + f"; see {result.out}")
    return Failed(name="Breached", message=message, data=summary)


@flow(name="watch", flow_run_name=watch_name)
async def watch(config: StudyConfig | None = None, config_file: str | None = None) -> dict[str, Any]:
    """Compare the catalog, the model alias, the query set, the rubrics and the runtime's version with
    their last snapshots; emit ``skillreach.skill.added|changed|removed``,
    ``skillreach.model.snapshot.changed``, ``skillreach.corpus.changed``, ``skillreach.rubric.changed`` and
    ``skillreach.runtime.version.changed``."""
    cfg = await call(resolve_config, config, config_file)
    found = await call(discover_skills, cfg)
    catalog_diff = await call(snapshot_catalog, cfg, found)
    model_change = await call(snapshot_model, cfg)
    pin_changes = await call(snapshot_pins, cfg, found)
    events = [*events_for(found.source, catalog_diff, [model_change] if model_change else []), *pin_changes]
    emitted = await call(emit_watch_events, events)
    return {
        "first_snapshot": catalog_diff.first,
        "added": sorted(catalog_diff.added),
        "changed": sorted(catalog_diff.changed),
        "removed": sorted(catalog_diff.removed),
        "renamed": dict(sorted(catalog_diff.renamed.items())),
        "from_baselines": catalog_diff.from_baselines,
        "model_changed": model_change is not None,
        "events": [e.event for e in events],
        "emitted": emitted,
    }


@flow(name="resolve-crashed")
async def resolve_crashed(
    flow_run_id: str, config: StudyConfig | None = None, config_file: str | None = None
) -> dict[str, Any]:
    """A skillreach deployment run crashed (``flow_run_id``: its id, or the event's
    ``prefect.flow-run.<id>``): its unfinished child runs and their task runs are marked Crashed and the
    studies they ran ``crashed`` in the store, so nothing stays Running. A nightly or re-baselining that
    crashed for the first time is then resumed without a person (the same run scheduled again: its study
    goes on from its probes; :mod:`skillreach.service.resume`); one that crashes again stays Crashed and
    is alerted. When every study of the run had finished in the store (the run was lost after its work,
    e.g. across a server restart), the run is reconciled: Completed, not Crashed."""
    run_id = flow_run_id.rsplit(".", 1)[-1]
    cfg = await call(resolve_config, config, config_file)
    tree = await call(run_tree, run_id)
    finished = await call(reconcile_finished, cfg, tree)
    if finished:  # the study was over: the run is Completed, nothing crashed
        return {"flow_run_id": run_id, "runs": tree, "studies": [], "reconciled": finished}
    message = f"the parent run {run_id} crashed; re-run its deployment to resume"
    runs = await call(crash_children, run_id, message)
    tasks = await call(crash_task_runs, runs, message)
    studies = await call(crash_studies, cfg, runs, message)
    resumed = await call(resume_once, run_id)  # a nightly's or re-baselining's first crash: again, once
    return {"flow_run_id": run_id, "runs": runs, "studies": studies, "task_runs": tasks, "reconciled": [],
            "resumed": resumed}
