"""The ``study`` flow: assemble the catalog → plan → cost estimate → canary → probe batches → grade
rubrics → score → gate/alert → record.

Thin and async: it composes tasks (``tasks/``) and branches; no SQL, HTTP or file I/O here. Called
as a Prefect flow it is tracked by the server; ``study.fn(config)`` runs the same steps in-process
with no Prefect server at all (the CLI's fast path, see ``flows/_compose.py``).
"""

from __future__ import annotations

from prefect import flow

from skillreach.flows._compose import call
from skillreach.flows._names import study_name
from skillreach.study import StudyConfig, StudyResult
from skillreach.tasks.alerts import deliver_alerts
from skillreach.tasks.baselines import GateOutcome, baseline_config, gate_study, record_baselines
from skillreach.tasks.config import resolve_config, service_secrets
from skillreach.tasks.grade import check_judge, grade_study
from skillreach.tasks.score import fail_study, publish_report, publish_run, score_study
from skillreach.tasks.study import (
    assemble_catalog,
    canary,
    estimate_spend,
    prepare_study,
    probe_batch,
    probe_here,
    probe_on_workers,
    release_study,
    use_task_workers,
)

__all__ = ["study"]


@flow(name="study", log_prints=False, flow_run_name=study_name)
async def study(
    config: StudyConfig | None = None,
    kind: str = "study",
    slot: str | None = None,
    config_file: str | None = None,
) -> StudyResult:
    """One study of one catalog and query set: ``config`` (a StudyConfig, the keys of a config file),
    else the file ``config_file`` names, else ``$SKILLREACH_STUDY_CONFIG``, else the bundled example; see
    :class:`skillreach.study.StudyConfig`. The store and the alert webhooks are always the service
    environment's (``SKILLREACH_DATABASE_URL``, ``SKILLREACH_ALERT_WEBHOOKS``), never a parameter's.
    ``kind`` names the study in its folder (``study``); ``slot`` (a scheduled run's slot) is part of the
    default output folder's name."""
    if config is None:
        config = await call(resolve_config, None, config_file)
    else:  # a parameter (JSON through the API: no secrets) or a caller's object
        config = await call(service_secrets, config)
    inputs = await call(assemble_catalog, config)
    if config.record_baselines:  # a re-baselining measures every metric: compliance when there are checks
        config = await call(baseline_config, config, inputs)
    await call(check_judge, config, inputs)  # a judge that cannot be reached fails before any probe
    plan = await call(prepare_study, config, inputs, kind, slot)  # takes the study's lock
    spent = plan.spent_usd
    ran = 0
    try:
        await call(estimate_spend, config, inputs, plan)  # said before anything is spent
        await call(canary, config, inputs)
        workers = await use_task_workers(config) if plan.batches else 0
        if workers:  # task workers on any machine, shared store
            summary = await probe_on_workers(config, inputs, plan, workers=workers)
            spent += summary["cost_usd"]
            ran += summary["probes"]
        else:  # one machine: the batches in this process, the next starting as the previous drains
            summary = await probe_here(config, inputs, plan, spent, batch_task=probe_batch)
            spent += summary["cost_usd"]
            ran += summary["probes"]
        await call(grade_study, config, inputs, plan)
        scored = await call(score_study, config, inputs, plan, kind)
        gates = GateOutcome()
        if config.gate or config.record_baselines:  # gate before re-record, always
            gates = await call(gate_study, config, inputs, plan, scored.artifact, kind)
            await call(publish_report, scored, gates)  # report.html again, with the gate report
        if gates.breaches or gates.rows:  # said once per verdict; a verdict the gate now passes closes
            await call(deliver_alerts, config, plan.study_id, list(gates.breaches), gates, kind)
        if config.record_baselines:
            await call(record_baselines, config, inputs, plan, gates)
        await call(publish_run, plan, scored.artifact, gates.report, config, kind)
    except BaseException as exc:  # the cost cap, a broken set-up, Ctrl-C: what was probed stays recorded
        await call(fail_study, config, plan, exc)
        raise
    finally:
        await call(release_study, plan)
    return StudyResult(
        study_id=plan.study_id,
        out=plan.out,
        probes_path=plan.probes_path,
        artifact_path=scored.artifact_path,
        report_path=scored.report_path,
        artifact=scored.artifact,
        gate_report=gates.report,
        breaches=gates.breaches,
        statuses=gates.statuses,
        probes_run=ran,
        probes_resumed=plan.done,
        cost_usd=round(spent, 6),
    )
