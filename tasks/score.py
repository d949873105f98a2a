"""Scoring a study: the artifact, the HTML report, the store, the Prefect artifacts of a run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.study.config import StudyConfig
from skillreach.study.plan import StudyInputs, StudyPlan
from skillreach.study.summary import HEADLINE_METRICS, describe, headline
from skillreach.tasks._context import in_prefect_run, logger, store_for

__all__ = ["Scored", "fail_study", "publish_report", "publish_run", "score_study"]


@dataclass(frozen=True)
class Scored:
    artifact: Any  # skillreach.scoring.artifact.Artifact
    artifact_path: Path
    report_path: Path


@task(name="score", cache_policy=NO_CACHE)
async def score_study(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, kind: str = "study"
) -> Scored:
    """Score the study's probes (with their rubric grades, ``graded.jsonl``); write ``artifact.json``,
    ``study.json`` (with a copy of the query set) and ``report.html``; record them in the store."""
    from skillreach.reports import render_html
    from skillreach.scoring import score
    from skillreach.scoring.artifact import RuntimeInfo, write_artifact
    from skillreach.study.grading import graded_records, judge_model_of, needs_grading

    # probes.jsonl, with the judge's grades put on
    judge = judge_model_of(config, live=False)
    records = graded_records(plan.probes_path, plan.fingerprint, inputs.query_set.queries, judge)
    # a folder shared with a study of more attempts: this one reads its own subset
    records = [r for r in records if r.attempt <= config.attempts]
    needs_judge = needs_grading(inputs.query_set.queries, records, compliance=config.compliance)
    artifact = score(
        inputs.query_set,
        records,
        inputs.catalog,
        runtime_info=RuntimeInfo(
            name=config.runtime,
            model=config.model,
            resolved_model=plan.resolved_model,
            max_turns=config.max_turns,
            early_exit=config.early_exit,
            # the version the probes report (CLI or SDK), the newest one when a resume spans an upgrade
            version=next((v for r in reversed(records) if (v := getattr(r, "runtime_version", None))), None),
            judge_model=judge,
        ),
        attempts=config.attempts,
    )
    from skillreach.runtimes import forced_choice_note
    from skillreach.study.folder import write_study_file

    note = forced_choice_note(config.runtime, config.runtime_options)
    if note is not None:  # one line in the scorecard and the reports: abstention was not measured
        artifact = artifact.model_copy(update={"warnings": [note, *artifact.warnings]})
    artifact_path = plan.out / "artifact.json"
    artifact = write_artifact(artifact, artifact_path)
    write_study_file(
        plan.out,
        study_id=plan.study_id,
        kind=kind,
        config=config.public_dict(),
        query_set=inputs.query_set,
        query_set_source=str(inputs.queries_path),
        catalog_id=inputs.catalog.id,
        catalog_digest=inputs.catalog.digest,
        runtime=config.runtime,
        runtime_version=artifact.runtime.version,
        model=config.model,
        resolved_model=plan.resolved_model,
        judge_model=judge if needs_judge else None,
        fingerprint=plan.fingerprint,
    )
    report_path = plan.out / "report.html"
    report_path.write_text(render_html(artifact), encoding="utf-8")
    with store_for(config) as store:
        body = artifact.model_dump(mode="json", exclude={"outcomes"})  # the probes are stored apiece
        store.save_artifact(plan.study_id, body, str(artifact_path.resolve()))
        store.finish_study(plan.study_id, headline=headline(artifact), resolved_model=plan.resolved_model)
    logger().info("scored %d probes into %s", artifact.counts.probes, artifact_path)
    return Scored(artifact, artifact_path, report_path)


@task(name="fail_study", cache_policy=NO_CACHE)
async def fail_study(config: StudyConfig, plan: StudyPlan, error: BaseException | str) -> None:
    """Mark the study failed (the probes already written stay; a re-run resumes)."""
    with store_for(config) as store:
        store.finish_study(plan.study_id, status="failed", error=describe(error))


def _as_drift(comparison: Any) -> dict[str, Any]:
    """A drift report's comparison as JSON, its moved metrics called ``drift``: information across a
    model change, never a gate breach."""
    data = comparison.model_dump(mode="json")
    for r in data["results"]:
        if r["verdict"] == "breach":
            r["verdict"] = "drift"
    return dict(data)


@task(name="publish_report", cache_policy=NO_CACHE)
async def publish_report(scored: Scored, gates: Any) -> Path:
    """Re-render ``report.html`` with the gate report (``gates``: a ``GateOutcome``) once the study is
    gated, and keep the gate beside the artifact (``gate.json``) for ``skillreach report DIR``.

    Every skill is in it: the compared ones with their comparison, the others with their status."""
    from skillreach.reports import render_html
    from skillreach.reports.gate_file import write_gate

    artifact = scored.artifact
    comparisons = [_as_drift(r.comparison) if r.status == "drift" else r.comparison
                   for r in gates.results if r.comparison is not None]
    not_compared = [
        f"{r.skill}: {r.status}" + (f" — {r.reason}" if r.reason else "")
        for r in gates.results
        if r.comparison is None
    ] or list(gates.skipped)
    write_gate(scored.artifact_path.parent, artifact.digest, comparisons, not_compared)
    html = render_html(artifact, gate=comparisons, not_compared=not_compared)
    scored.report_path.write_text(html, encoding="utf-8")
    return scored.report_path


def artifact_key(config: StudyConfig | None, kind: str, study_id: str) -> str:
    """A Prefect artifact key that stays the same from run to run of what is measured — the kind of
    study and the skill set (skill folders, query set, runtime, model) — so the UI shows a history
    (one study's key changes with its fingerprint, every night)."""
    import hashlib
    import json

    if config is None:
        return f"skillreach-{kind}-" + study_id.lower()
    what = json.dumps([sorted(str(p) for p in config.skills), str(config.queries or ""), config.runtime,
                       config.model or "", config.target or ""])
    slug = "".join(c if c.isalnum() else "-" for c in kind.lower())
    return f"skillreach-{slug}-{hashlib.sha256(what.encode()).hexdigest()[:12]}"


@task(name="publish_run", cache_policy=NO_CACHE)
async def publish_run(
    plan: StudyPlan, artifact: Any, gate_report: str, config: StudyConfig | None = None, kind: str = "study"
) -> bool:
    """Prefect artifacts of the run: a table of headline figures and the markdown gate report, under
    keys stable per kind and skill set (:func:`artifact_key`). The gate artifact always says something:
    why nothing was gated when nothing was.

    Outside a Prefect run (the CLI without a server) there is nowhere to publish: returns False.
    """
    if not in_prefect_run():
        return False
    from prefect.artifacts import acreate_link_artifact, acreate_markdown_artifact, acreate_table_artifact

    figures = headline(artifact)
    rows = []
    for name in HEADLINE_METRICS:
        ci = figures[f"{name}_ci"]
        shown = "" if ci is None else f"[{ci[0]}, {ci[1]}]"
        rows.append({"metric": name, "value": figures[name], "ci95": shown})
    rows += [
        {"metric": k, "value": figures[k], "ci95": ""} for k in ("probes", "scored", "errors", "cost_usd")
    ]
    key = artifact_key(config, kind, plan.study_id)
    if not gate_report.strip():
        why = ("gating is off for this study (gate = false)" if config is not None and not config.gate
               else "no skill has a stored baseline to gate against yet")
        gate_report = f"# Gate report — study `{plan.study_id}`\n\nNothing was gated: {why}.\n"
    await acreate_table_artifact(
        table=rows, key=f"{key}-headline", description=f"Headline figures of study {plan.study_id}"
    )
    await acreate_markdown_artifact(
        markdown=gate_report, key=f"{key}-gates", description=f"Gate report of study {plan.study_id}"
    )
    report = (plan.out / "report.html").resolve()
    await acreate_link_artifact(
        link=report.as_uri(), link_text=f"report.html of study {plan.study_id}", key=f"{key}-report",
        description=f"The run's report; its folder (probes, artifact, study.json): {report.parent}",
    )
    return True
