"""Uplift: does a skill make the work better, and were its routing misses harmless? Pure.

Two arms probe the skill's cases (its positive queries that carry quality checks) in compliance mode:
**with** the skill in the catalog and **without** it (the same catalog minus the skill). Per probe the
task quality is :func:`skillreach.queries.compliance.evaluate_probe`'s (assertions, blended with a rubric
grade
where one was given).

- Per case i: q_with,i = mean quality of the with-arm probes that **activated** the skill (S ∈
  scored_inv); q_without,i = mean quality of the without-arm probes; uplift dᵢ = q_with,i − q_without,i.
- **Uplift** = mean dᵢ over the cases where both are known, with the paired 95 % t interval
  (:func:`skillreach.scoring.intervals.paired_t_interval`, clipped to [−1, 1]).
- Each case with a **routing miss** (a with-arm probe that did not activate the skill) is classified:
  *didn't need it* when q_without,i ≥ q_with,i − margin (quality without the skill is as good);
  *wrongly skipped* when q_without,i < q_with,i − margin (quality drops without it); *unclear* when
  either is unknown (the skill was never activated on that case, or no probe carries a quality score).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from skillreach.baselines.records import RecordedUplift
from skillreach.errors import InputError
from skillreach.models import ProbeRecord, Query, QuerySet
from skillreach.queries.compliance import evaluate_probe
from skillreach.scoring.intervals import paired_t_interval

__all__ = [
    "UPLIFT_FILE",
    "CaseUplift",
    "MissClass",
    "UpliftReport",
    "read_uplift_report",
    "recorded_uplift",
    "uplift_cases",
    "uplift_file",
    "uplift_report",
]

UPLIFT_FILE = "uplift-{skill}.json"
MAX_UPLIFT_BYTES = 16 * 2**20
"""Bytes an uplift report may hold (a few hundred cases take a few KiB)."""
"""Where a study folder keeps a skill's uplift report (``skillreach uplift SKILL --json > DIR/…``): the
baseline record and the study's report pick it up from there."""

MissClass = Literal["didn't need it", "wrongly skipped", "unclear"]
DEFAULT_MARGIN = 0.1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CaseUplift(_Frozen):
    case: str
    probes_with: int
    activated: int
    missed: int
    quality_with: float | None
    """Mean quality of the with-arm probes that activated the skill."""
    quality_without: float | None
    uplift: float | None
    miss: MissClass | None
    """The class of this case's routing misses (``None``: no miss)."""


class UpliftValue(_Frozen):
    value: float
    ci95: tuple[float, float]
    cases: int


class UpliftReport(_Frozen):
    skill: str
    margin: float
    uplift: UpliftValue | None
    cases: list[CaseUplift]
    misses: dict[str, int]
    """Cases with a routing miss, by class."""
    queries_digest: str | None = None
    """The sealed query set both arms ran (provenance; ``None`` in reports written before it)."""
    runtime: str | None = None
    model: str | None = None
    attempts: int | None = None


def uplift_cases(query_set: QuerySet, skill: str) -> list[Query]:
    """The skill's cases uplift can measure: its positive queries with quality checks."""
    cases = [
        q
        for q in query_set.queries
        if q.expected_skill == skill and q.checks is not None and q.checks.has_quality
    ]
    if not cases:
        raise InputError(
            f"no query expects {skill!r} with quality checks (output or rubric); add checks to its cases"
        )
    return cases


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def uplift_report(
    query_set: QuerySet,
    skill: str,
    with_skill: Iterable[ProbeRecord],
    without_skill: Iterable[ProbeRecord],
    *,
    margin: float = DEFAULT_MARGIN,
    runtime: str | None = None,
    model: str | None = None,
    attempts: int | None = None,
) -> UpliftReport:
    """The report of the module docstring from the two arms' probe records (``runtime``, ``model``,
    ``attempts``: the provenance it carries beside the query set's digest)."""
    if not 0 <= margin < 1:
        raise InputError(f"--margin {margin}: must lie in [0, 1)")
    queries: Mapping[str, Query] = {q.id: q for q in uplift_cases(query_set, skill)}
    with_q: dict[str, list[float]] = {}
    act: dict[str, list[int]] = {}
    without_q: dict[str, list[float]] = {}
    for r in with_skill:
        q = queries.get(r.query_id)
        if q is None or r.error is not None:
            continue
        activated = skill in [s for s in r.invoked if s not in q.acceptable_skills]
        act.setdefault(q.id, []).append(int(activated))
        quality = evaluate_probe(q, r).quality
        if activated and quality is not None:
            with_q.setdefault(q.id, []).append(quality)
    for r in without_skill:
        q = queries.get(r.query_id)
        if q is None or r.error is not None:
            continue
        quality = evaluate_probe(q, r).quality
        if quality is not None:
            without_q.setdefault(q.id, []).append(quality)
    rows: list[CaseUplift] = []
    for qid in sorted(queries):
        flags = act.get(qid, [])
        qw, qo = _mean(with_q.get(qid, [])), _mean(without_q.get(qid, []))
        d = qw - qo if qw is not None and qo is not None else None
        missed = flags.count(0)
        miss: MissClass | None = None
        if missed:
            miss = "unclear" if d is None else "wrongly skipped" if d > margin else "didn't need it"
        rows.append(
            CaseUplift(
                case=qid,
                probes_with=len(flags),
                activated=sum(flags),
                missed=missed,
                quality_with=qw,
                quality_without=qo,
                uplift=d,
                miss=miss,
            )
        )
    diffs = [row.uplift for row in rows if row.uplift is not None]
    value = None
    if diffs:
        mean, lo, hi = paired_t_interval(diffs)
        value = UpliftValue(value=mean, ci95=(max(-1.0, lo), min(1.0, hi)), cases=len(diffs))
    counts: dict[str, int] = {"didn't need it": 0, "wrongly skipped": 0, "unclear": 0}
    for row in rows:
        if row.miss is not None:
            counts[row.miss] += 1
    return UpliftReport(
        skill=skill,
        margin=margin,
        uplift=value,
        cases=rows,
        misses=counts,
        queries_digest=query_set.provenance.digest or query_set.compute_digest(),
        runtime=runtime,
        model=model,
        attempts=attempts,
    )


def uplift_file(folder: Path, skill: str) -> Path:
    return folder / UPLIFT_FILE.format(skill=skill)


def read_uplift_report(path: Path, skill: str | None = None) -> UpliftReport:
    """An uplift report written by ``skillreach uplift SKILL --json``; one-line errors naming the file."""
    from skillreach._io.json import read_json_file
    from skillreach._io.paths import refuse_special_file

    refuse_special_file(path, "uplift report (skillreach uplift SKILL --json)")
    if not path.exists():
        raise InputError(f"{path}: no such uplift report; write one with skillreach uplift SKILL --json")
    data = read_json_file(path, max_bytes=MAX_UPLIFT_BYTES, what="uplift report")
    try:
        report = UpliftReport.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "report"
        raise InputError(
            f"{path}: field {field}: {err['msg']}; write it with skillreach uplift SKILL --json"
        ) from exc
    if skill is not None and report.skill != skill:
        raise InputError(
            f"{path}: the uplift of {report.skill!r}, not of {skill!r}; pass that skill's report"
        )
    return report


def recorded_uplift(report: UpliftReport, where: Path | str = "uplift report") -> RecordedUplift:
    """What a baseline record keeps of an uplift report (refused when no case paired)."""
    if report.uplift is None:
        raise InputError(
            f"{where}: no case of {report.skill!r} has quality both with the skill activated and without "
            "it, so there is no uplift to record; add quality checks or attempts and run uplift again"
        )
    u = report.uplift
    return RecordedUplift(
        value=u.value,
        ci95=u.ci95,
        n=u.cases,
        margin=report.margin,
        misses=dict(report.misses),
        queries_digest=report.queries_digest,
        runtime=report.runtime,
        model=report.model,
        attempts=report.attempts,
    )
