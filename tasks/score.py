"""Scoring a study: the artifact, the HTML report, the store, the Prefect artifacts of a run."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.study.config import StudyConfig
from skillreach.study.plan import StudyInputs, StudyPlan
from skillreach.tasks._context import in_prefect_run, logger, store_for

__all__ = ["HEADLINE_METRICS", "Scored", "describe", "fail_study", "headline", "publish_run", "score_study"]

HEADLINE_METRICS = (
    "top1_accuracy",
    "trajectory_reachability",
    "false_abstention_rate",
    "oos_detection",
    "consistency",
    "macro_f1",
)


@dataclass(frozen=True)
class Scored:
    artifact: Any  # skillreach.artifacts.Artifact
    artifact_path: Path
    report_path: Path


def headline(artifact: Any) -> dict[str, Any]:
    """The figures a run is summed up by (stored with the study, published as a Prefect table)."""
    out: dict[str, Any] = {}
    for name in HEADLINE_METRICS:
        value = artifact.metric(name)
        ci = artifact.interval(name)
        out[name] = None if value is None else round(float(value), 4)
        out[f"{name}_ci"] = None if ci is None else [round(float(ci[0]), 4), round(float(ci[1]), 4)]
    out["probes"] = artifact.counts.probes
    out["scored"] = artifact.counts.scored
    out["errors"] = artifact.counts.errors
    out["cost_usd"] = artifact.usage.cost_usd
    return out


@task(name="score", tags=["skillreach", "score"], cache_policy=NO_CACHE)
async def score_study(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, kind: str = "study"
) -> Scored:
    """Score the study's probes (with their rubric grades, ``graded.jsonl``); write ``artifact.json``,
    ``study.json`` (with a copy of the query set) and ``report.html``; record them in the store."""
    from skillreach.artifacts import RuntimeInfo, write_artifact
    from skillreach.reports import render_html
    from skillreach.scoring import score
    from skillreach.study.grading import graded_records, judge_model_of, needs_grading

    # probes.jsonl, with the judge's grades put on
    records = graded_records(plan.probes_path, plan.fingerprint, inputs.query_set.queries,
                             judge_model_of(config, live=False))
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
        ),
        attempts=config.attempts,
    )
    from skillreach.study.folder import write_study_file

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
        judge_model=judge_model_of(config, live=False) if needs_judge else None,
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


def describe(error: BaseException | str) -> str:
    """One line for the study row: our errors' messages as they are, others as type: text, redacted."""
    from skillreach.errors import SkillreachError
    from skillreach.study.config import redact

    if isinstance(error, str):
        text = error
    elif isinstance(error, SkillreachError):
        text = error.message
    elif isinstance(error, KeyboardInterrupt | asyncio.CancelledError):
        text = "interrupted"
    else:
        text = f"{type(error).__name__}: {error}"
    return str(redact(" ".join(text.split())))[:2000]


@task(name="fail_study", tags=["skillreach", "store"], cache_policy=NO_CACHE)
async def fail_study(config: StudyConfig, plan: StudyPlan, error: BaseException | str) -> None:
    """Mark the study failed (the probes already written stay; a re-run resumes)."""
    with store_for(config) as store:
        store.finish_study(plan.study_id, status="failed", error=describe(error))


@task(name="publish_run", tags=["skillreach", "report"], cache_policy=NO_CACHE)
async def publish_run(plan: StudyPlan, artifact: Any, gate_report: str) -> bool:
    """Prefect artifacts of the run: a table of headline figures and the markdown gate report.

    Outside a Prefect run (the CLI without a server) there is nowhere to publish: returns False.
    """
    if not in_prefect_run():
        return False
    from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact

    figures = headline(artifact)
    rows = []
    for name in HEADLINE_METRICS:
        ci = figures[f"{name}_ci"]
        shown = "" if ci is None else f"[{ci[0]}, {ci[1]}]"
        rows.append({"metric": name, "value": figures[name], "ci95": shown})
    rows += [
        {"metric": k, "value": figures[k], "ci95": ""} for k in ("probes", "scored", "errors", "cost_usd")
    ]
    key = "skillreach-" + plan.study_id.lower()
    await acreate_table_artifact(
        table=rows, key=f"{key}-headline", description=f"Headline figures of study {plan.study_id}"
    )
    await acreate_markdown_artifact(
        markdown=gate_report, key=f"{key}-gates", description=f"Gate report of study {plan.study_id}"
    )
    return True
