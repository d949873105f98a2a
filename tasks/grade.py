"""Grading rubrics: the judge reads each probe's final answer against its query's ``checks.rubric``.

Runs between the probes and the score, only when the query set has a rubric and the study ran in
compliance mode (or its probes carry a final answer). Each grade is written as it arrives — to
``graded.jsonl`` in the run folder (appended, fsynced) and then to the store's probe row — so a grade
paid for survives whatever fails next. The probe log itself stays what the runtime did.

A re-run (resume) reuses every grade in ``graded.jsonl`` that belongs to the same probe (query,
attempt, fingerprint, finish time) under the same rubric version (template + rubric + judge model);
only the rest go to the judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.models import ProbeRecord
from skillreach.study import StudyConfig
from skillreach.tasks._context import logger
from skillreach.tasks.store import store_for
from skillreach.tasks.study import StudyInputs, StudyPlan, _TeeSink

if TYPE_CHECKING:
    from skillreach.judge import Judge

__all__ = ["GRADED_FILE", "check_judge", "grade_study", "graded_records", "judge_for", "judge_model_of"]

GRADED_FILE = "graded.jsonl"


def judge_model_of(config: StudyConfig) -> str:
    """The study's judge model: its own, else ``$SKILLREACH_JUDGE_MODEL``, else the offline fake judge."""
    from skillreach.judge import default_judge_model

    return config.judge_model or default_judge_model()


def judge_for(model: str) -> Judge:
    """The fake judge for its model name, else the Messages API judge for ``model``."""
    from skillreach.judge import FAKE_JUDGE_MODEL, FakeJudge, get_judge

    return FakeJudge(model) if model == FAKE_JUDGE_MODEL else get_judge("anthropic", model=model)


def graded_records(config: StudyConfig, inputs: StudyInputs, plan: StudyPlan) -> list[ProbeRecord]:
    """The study's current records (one per query × attempt), each with its valid grade when it has one."""
    from skillreach.probing import latest_records, read_probes
    from skillreach.study import apply_grades, valid_grades

    records = latest_records(read_probes(plan.probes_path, missing_ok=True), plan.fingerprint)
    graded_path = plan.out / GRADED_FILE
    if not graded_path.exists():
        return records
    grades = valid_grades(read_probes(graded_path), inputs.query_set.queries, judge_model_of(config))
    return apply_grades(records, grades)


@task(name="check_judge", tags=["skillreach", "judge"], cache_policy=NO_CACHE)
async def check_judge(config: StudyConfig, inputs: StudyInputs) -> str | None:
    """Before any probe is paid for: the judge a compliance study with rubrics will need can be reached
    (an API key for the Messages API judge). Returns the judge model, or ``None`` when none is needed."""
    from skillreach.errors import ConfigError
    from skillreach.judge import FAKE_JUDGE_MODEL

    rubrics = any(q.checks is not None and q.checks.rubric for q in inputs.query_set.queries)
    if not config.compliance or not rubrics:
        return None
    model = judge_model_of(config)
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
            f"offline with SKILLREACH_JUDGE_MODEL={FAKE_JUDGE_MODEL}"
        )
    return model


@task(name="grade_rubrics", tags=["skillreach", "judge"], cache_policy=NO_CACHE)
async def grade_study(config: StudyConfig, inputs: StudyInputs, plan: StudyPlan) -> dict[str, Any]:
    """Grade the study's rubric probes not graded yet; return counts (graded, reused, failed, judge)."""
    from skillreach.errors import ProbeFailed, SkillreachError
    from skillreach.judge import grade_probes
    from skillreach.probing import JsonlSink, latest_records, read_probes
    from skillreach.study import apply_grades, grade_key, needs_grading, valid_grades

    queries = inputs.query_set.queries
    records = latest_records(read_probes(plan.probes_path, missing_ok=True), plan.fingerprint)
    summary: dict[str, Any] = {"graded": 0, "reused": 0, "failed": 0, "judge": None}
    if not needs_grading(queries, records, compliance=config.compliance):
        return summary
    model = judge_model_of(config)
    summary["judge"] = model
    graded_path: Path = plan.out / GRADED_FILE
    done = valid_grades(read_probes(graded_path, missing_ok=True), queries, model)
    todo = [r for r in records if grade_key(r) not in done]
    reused = apply_grades([r for r in records if grade_key(r) in done], done)
    graded_now: list[ProbeRecord] = []
    failures: list[tuple[str, int, str]] = []
    with store_for(config) as store:
        if reused:  # the store's rows were brought level with probes.jsonl (ungraded) when the run began
            store.add_probes(plan.study_id, reused)
        sink = _TeeSink(JsonlSink(graded_path), store, plan.study_id)

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
            sink.jsonl.close()
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
