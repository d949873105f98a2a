"""Grading rubrics: which probes need the judge, the grades that are still valid, putting them on.

The judge reads each probe's final answer against its query's ``checks.rubric``; it runs between the
probes and the score, only when the query set has a rubric and the study ran in compliance mode (or its
probes carry a final answer). Each grade is written as it arrives — to ``graded.jsonl`` in the study
folder and then to the store — so a grade paid for survives whatever fails next. A re-run reuses every
grade that belongs to the same probe (query, attempt, fingerprint, finish time) under the same rubric
version (template + rubric + judge model); only the rest go to the judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from skillreach.errors import ConfigError
from skillreach.models import ProbeRecord, Query
from skillreach.study.config import StudyConfig
from skillreach.study.probe_log import latest_records, read_probes

__all__ = [
    "GRADED_FILE",
    "OFFLINE_RUNTIMES",
    "GradeKey",
    "apply_grades",
    "grade_key",
    "graded_records",
    "has_rubrics",
    "judge_model_of",
    "needs_grading",
    "pending_grades",
    "valid_grades",
]

GRADED_FILE = "graded.jsonl"

OFFLINE_RUNTIMES = frozenset({"fake", "keyword", "retriever"})
"""Runtimes that make no model call: their studies are graded by the offline fake judge by default."""

GradeKey = tuple[str, int, str | None, str | None]


def grade_key(record: ProbeRecord) -> GradeKey:
    """Which probe a grade belongs to: (query id, attempt, fingerprint, finished_at). A probe re-run
    after an error is another probe (another ``finished_at``), so an old grade never sticks to it."""
    return (record.query_id, record.attempt, record.fingerprint, record.finished_at)


def has_rubrics(queries: Iterable[Query]) -> bool:
    return any(q.checks is not None and q.checks.rubric for q in queries)


def needs_grading(queries: Iterable[Query], records: Iterable[ProbeRecord], *, compliance: bool) -> bool:
    """Whether a study has rubrics to grade: some query has ``checks.rubric`` and the study ran in
    compliance mode or some probe carries a final answer (the judge grades answers, nothing else)."""
    if not has_rubrics(queries):
        return False
    return compliance or any(r.final_text is not None for r in records)


def judge_model_of(config: StudyConfig, *, queries: Sequence[Query] = (), live: bool | None = None) -> str:
    """The study's judge: its own ``judge_model``; else, for an offline runtime, the offline fake judge.

    A live study (``live``, default: the runtime is not offline) that has rubrics to grade and no judge
    model is refused before anything is spent: a keyword-overlap judge must not grade a real agent
    without anyone saying so.
    """
    from skillreach.study.judge import FAKE_JUDGE_MODEL

    if config.judge_model:
        return config.judge_model
    live = config.runtime not in OFFLINE_RUNTIMES if live is None else live
    if live and config.compliance and has_rubrics(queries):
        raise ConfigError(
            f"the query set has rubric checks and the {config.runtime} study has no judge model; set "
            "one with --judge-model MODEL (or judge_model in --config, or SKILLREACH_JUDGE_MODEL), or "
            f"--judge-model {FAKE_JUDGE_MODEL} for the offline keyword-overlap judge"
        )
    return FAKE_JUDGE_MODEL


def valid_grades(
    graded: Iterable[ProbeRecord], queries: Iterable[Query], judge_model: str
) -> dict[GradeKey, ProbeRecord]:
    """The graded records (``graded.jsonl``) still valid: graded under the rubric version the study's
    queries and ``judge_model`` give now (a changed rubric, template or judge is graded again); the last
    one per probe wins."""
    from skillreach.study.judge import rubric_version

    versions = {
        q.id: rubric_version(q.checks.rubric, judge_model)
        for q in queries
        if q.checks is not None and q.checks.rubric
    }
    out: dict[GradeKey, ProbeRecord] = {}
    for g in graded:
        if g.rubric_grade is not None and g.rubric_version is not None and (
            versions.get(g.query_id) == g.rubric_version
        ):
            out[grade_key(g)] = g
    return out


def apply_grades(records: Iterable[ProbeRecord], grades: dict[GradeKey, ProbeRecord]) -> list[ProbeRecord]:
    """``records`` with each probe's grade (``rubric_grade``, ``rubric_version``) put on, when it has one."""
    out: list[ProbeRecord] = []
    for r in records:
        g = grades.get(grade_key(r))
        out.append(
            r if g is None else r.model_copy(
                update={"rubric_grade": g.rubric_grade, "rubric_version": g.rubric_version}
            )
        )
    return out


def graded_records(
    probes_path: Path, fingerprint: str, queries: Sequence[Query], judge_model: str
) -> list[ProbeRecord]:
    """A study's current records (one per query × attempt), each with its valid grade when it has one."""
    records = latest_records(read_probes(probes_path, missing_ok=True), fingerprint)
    graded_path = probes_path.parent / GRADED_FILE
    if not graded_path.exists():
        return records
    return apply_grades(records, valid_grades(read_probes(graded_path), queries, judge_model))


def pending_grades(
    probes_path: Path, fingerprint: str, queries: Sequence[Query], judge_model: str
) -> tuple[list[ProbeRecord], list[ProbeRecord]]:
    """(records still to grade, records whose valid grade is already in ``graded.jsonl``, graded)."""
    records = latest_records(read_probes(probes_path, missing_ok=True), fingerprint)
    done = valid_grades(read_probes(probes_path.parent / GRADED_FILE, missing_ok=True), queries, judge_model)
    todo = [r for r in records if grade_key(r) not in done]
    reused = apply_grades([r for r in records if grade_key(r) in done], done)
    return todo, reused


