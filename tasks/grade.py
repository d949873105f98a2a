"""Grading rubrics as tasks: the judge is checked before any probe, then grades the probes that need it
(:mod:`skillreach.study.grading` says which, and which grades are still valid)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.models import ProbeRecord
from skillreach.study.config import StudyConfig
from skillreach.study.grading import GRADED_FILE, judge_model_of
from skillreach.study.plan import StudyInputs, StudyPlan
from skillreach.tasks._context import logger, store_for

if TYPE_CHECKING:
    from skillreach.study.judge import Judge

__all__ = ["GRADED_FILE", "check_judge", "grade_study", "judge_for"]


def judge_for(model: str) -> Judge:
    """The fake judge for its model name, else the Messages API judge for ``model``."""
    from skillreach.runtimes import get_judge
    from skillreach.study.judge import FAKE_JUDGE_MODEL, FakeJudge

    return FakeJudge(model) if model == FAKE_JUDGE_MODEL else get_judge("anthropic", model=model)


@task(name="check_judge", cache_policy=NO_CACHE)
async def check_judge(config: StudyConfig, inputs: StudyInputs) -> str | None:
    """Before any probe is paid for: a compliance study with rubrics has a judge (a live study names
    one), and the Messages API judge has its key. Returns the judge model, or ``None`` when none is needed."""
    from skillreach.errors import ConfigError
    from skillreach.study.grading import has_rubrics
    from skillreach.study.judge import FAKE_JUDGE_MODEL

    queries = inputs.query_set.queries
    if not config.compliance or not has_rubrics(queries):
        return None
    model = judge_model_of(config, queries=queries)
    if model == FAKE_JUDGE_MODEL:
        return model
    import anthropic  # the judge's SDK (runtimes/judge_anthropic.py); only its credentials are read here

    client = anthropic.AsyncAnthropic()
    try:
        has_key = bool(client.api_key or client.auth_token)
    finally:
        await client.close()
    if not has_key:
        raise ConfigError(
            f"the rubric judge {model} needs ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN); set it, or grade "
            f"offline with --judge-model {FAKE_JUDGE_MODEL}"
        )
    return model


@task(name="grade_rubrics", cache_policy=NO_CACHE)
async def grade_study(config: StudyConfig, inputs: StudyInputs, plan: StudyPlan) -> dict[str, Any]:
    """Grade the study's rubric probes not graded yet; return counts (graded, reused, failed, judge)."""
    from skillreach.errors import ProbeFailed, SkillreachError
    from skillreach.study.grading import needs_grading, pending_grades
    from skillreach.study.judge import grade_probes
    from skillreach.study.probe_log import JsonlSink, latest_records, read_probes
    from skillreach.study.runner import TeeSink

    queries = inputs.query_set.queries
    summary: dict[str, Any] = {"graded": 0, "reused": 0, "failed": 0, "judge": None}
    records = latest_records(read_probes(plan.probes_path, missing_ok=True), plan.fingerprint)
    if not needs_grading(queries, records, compliance=config.compliance):
        return summary
    model = judge_model_of(config, queries=queries)
    summary["judge"] = model
    graded_path = plan.out / GRADED_FILE
    todo, reused = pending_grades(plan.probes_path, plan.fingerprint, queries, model)
    graded_now: list[ProbeRecord] = []
    failures: list[tuple[str, int, str]] = []
    with store_for(config) as store, JsonlSink(graded_path) as graded_log:
        if reused:  # the store's rows were brought level with probes.jsonl (ungraded) when the run began
            store.add_probes(plan.study_id, reused)
        sink = TeeSink(graded_log, store, plan.study_id)

        def keep(record: ProbeRecord) -> None:
            sink.write(record)  # graded.jsonl (fsynced), then the store: paid for, so on disk first
            graded_now.append(record)

        judge = judge_for(model)
        try:
            _, failures = await grade_probes(
                judge, queries, todo, concurrency=min(config.concurrency, 16), on_graded=keep
            )
        except Exception as exc:
            if isinstance(exc, SkillreachError):
                raise
            why = " ".join(str(exc).split())[:200]
            raise ProbeFailed(
                f"the rubric judge {model} failed ({type(exc).__name__}: {why}); {len(graded_now)} grades "
                f"kept in {graded_path}; re-run the study to grade the rest"
            ) from exc
        finally:
            sink.flush()
            await judge.aclose()
    for qid, attempt, message in failures[:5]:
        logger().warning("judge: %s attempt %d not graded: %s", qid, attempt, message[:200])
    if len(failures) > 5:
        logger().warning("judge: %d more probes not graded", len(failures) - 5)
    summary.update(graded=len(graded_now), reused=len(reused), failed=len(failures))
    if graded_now or reused or failures:
        logger().info("judge %s: %d graded, %d reused from %s, %d failed", model, len(graded_now),
                      len(reused), graded_path, len(failures))
    return summary
