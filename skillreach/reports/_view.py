"""What every report shows, computed once from an artifact (no formatting of markup here)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from skillreach.baselines.records import MetricValue, metric_value, per_case_outcomes
from skillreach.models import NO_SKILL
from skillreach.reports._format import METRIC_HELP, METRIC_TITLES, fmt_rate
from skillreach.scoring.artifact import RUN_METRICS, Artifact, ClassStats

__all__ = [
    "COHORTS",
    "COHORT_TITLES",
    "QUALITY_METRICS",
    "ErrorGroup",
    "GateRow",
    "GateView",
    "Headline",
    "SkillQuality",
    "class_rows",
    "error_groups",
    "gate_view",
    "headlines",
    "judge_name",
    "quality_rows",
]

HEADLINE_ORDER = (*RUN_METRICS, "macro_precision", "macro_recall", "macro_f1")


@dataclass(frozen=True)
class Headline:
    name: str
    title: str
    help: str
    value: float | None
    ci: tuple[float, float] | None
    n: int | None
    text: str
    is_rate: bool
    """A proportion in [0, 1] (redundancy is a count per probe)."""


def headlines(artifact: Artifact) -> list[Headline]:
    out = []
    for name in HEADLINE_ORDER:
        value = artifact.metric(name)
        ci = artifact.intervals.get(name)
        out.append(
            Headline(
                name=name,
                title=METRIC_TITLES[name],
                help=METRIC_HELP[name],
                value=value,
                ci=ci,
                n=artifact.denominators.get(name),
                text=fmt_rate(value, ci),
                is_rate=name != "redundancy",
            )
        )
    return out


def class_rows(artifact: Artifact) -> tuple[list[ClassStats], list[ClassStats]]:
    """(active classes worst-first by F1 with NO_SKILL last, inactive catalog skills by name)."""
    active = [c for c in artifact.classes if c.active and c.label != NO_SKILL]
    active.sort(key=lambda c: (c.f1 if c.f1 is not None else 2.0, c.recall or 0.0, c.label))
    none = [c for c in artifact.classes if c.label == NO_SKILL and c.active]
    inactive = [c for c in artifact.classes if not c.active and c.label != NO_SKILL]
    return [*active, *none], inactive


@dataclass
class ErrorGroup:
    message: str
    count: int = 0
    probes: list[str] = field(default_factory=list)


def error_groups(artifact: Artifact, samples: int = 5) -> list[ErrorGroup]:
    """Errored probes grouped by message, most frequent first, with a few ``query#attempt`` samples."""
    groups: dict[str, ErrorGroup] = defaultdict(lambda: ErrorGroup(""))
    for row in sorted(artifact.outcomes.errors):
        o = artifact.outcomes[row]
        assert o.error is not None
        g = groups[o.error]
        g.message = o.error
        g.count += 1
        if len(g.probes) < samples:
            g.probes.append(f"{o.query_id}#{o.attempt}")
    return sorted(groups.values(), key=lambda g: (-g.count, g.message))


# ------------------------------------------------------------------ compliance and task quality


QUALITY_METRICS = ("compliance", "task_quality")
COHORTS = ("baseline_cases", "new_cases")
COHORT_TITLES = {"baseline_cases": "baseline corpus", "new_cases": "new cases"}


@dataclass(frozen=True)
class SkillQuality:
    """Compliance and task quality of one skill (spec/metrics.md "Baseline metrics"), clustered
    intervals; ``cohorts``: metric → {baseline_cases, new_cases} when a baseline was compared."""

    skill: str
    compliance: MetricValue | None
    task_quality: MetricValue | None
    cohorts: dict[str, dict[str, MetricValue | None]] = field(default_factory=dict)

    def metric(self, name: str) -> MetricValue | None:
        return self.compliance if name == "compliance" else self.task_quality


OFFLINE_RUNTIMES = {
    "keyword": "a lexical baseline (word overlap with the descriptions), not an agent",
    "retriever": (
        "BM25 retrieval in front of an inner runtime (keyword by default: then a lexical baseline, "
        "not an agent)"
    ),
    "fake": "a scripted stand-in that replays fixed answers, not an agent",
}


def offline_note(artifact: Artifact) -> str | None:
    """One line saying that an offline runtime measured this study (what its figures are not), or
    ``None`` for an agent runtime."""
    what = OFFLINE_RUNTIMES.get(artifact.runtime.name or "")
    if what is None:
        return None
    return (
        f"runtime {artifact.runtime.name} is {what}: these figures say how separable the descriptions "
        "are, not which skill a model picks"
    )


def judge_name(artifact: Artifact) -> str:
    """The judge the report names: the artifact's, or a plain statement that it was not recorded."""
    return artifact.runtime.judge_model or "not recorded in the artifact"


def _metric_value(raw: Any) -> MetricValue | None:
    if raw is None or isinstance(raw, MetricValue):
        return raw
    return MetricValue.model_validate(raw)


def quality_rows(artifact: Artifact, gate: GateView | None = None) -> list[SkillQuality]:
    """Every skill with a compliance or task-quality figure, by name; cohorts from the gate's comparisons.

    The figures are those a baseline record holds (:func:`skillreach.baselines.records.metric_value` over the
    skill's positive probes), computed from the artifact's outcome rows.
    """
    judged: dict[str, list[Any]] = defaultdict(list)
    for row in artifact.outcomes.judged():
        if row.truth != NO_SKILL:
            judged[row.truth].append(row)
    cohorts = gate.cohorts if gate is not None else {}
    out = []
    for skill in sorted(judged):
        per_case = per_case_outcomes(SimpleNamespace(outcomes=judged[skill]), skill)
        values = {m: metric_value(per_case, m) for m in QUALITY_METRICS}
        if values["compliance"] is None and values["task_quality"] is None:
            continue
        split = {
            m: {c: _metric_value((cohorts[skill].get(m) or {}).get(c)) for c in COHORTS}
            for m in QUALITY_METRICS
            if skill in cohorts and cohorts[skill].get(m)
        }
        out.append(SkillQuality(skill, values["compliance"], values["task_quality"], split))
    return out


# ---------------------------------------------------------------------------------------- gates


@dataclass(frozen=True)
class GateRow:
    """One gated metric of one skill: paired difference, its interval, the verdict, power advice."""

    skill: str
    metric: str
    cohort: str
    base: float | None
    new: float | None
    delta: float | None
    ci: tuple[float, float] | None
    gate: float | None
    verdict: str
    note: str


@dataclass(frozen=True)
class GateView:
    rows: list[GateRow]
    not_compared: list[str]
    cohorts: dict[str, dict[str, Any]]
    """skill → the comparison's compliance/task-quality cohorts (``Comparison.cohorts``)."""

    @property
    def breaches(self) -> int:
        return sum(1 for r in self.rows if r.verdict == "breach")

    @property
    def gated(self) -> int:
        """Rows with a verdict (a metric with nothing to compare is listed, not gated)."""
        from skillreach.baselines.gates import gated_count

        return gated_count(r.verdict for r in self.rows)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


def _gate_row(skill: str, r: Any) -> GateRow:
    ci = _get(r, "ci95")
    verdict = _get(r, "verdict", "")
    return GateRow(
        skill=skill,
        metric=str(_get(r, "metric", "")),
        cohort=str(_get(r, "cohort") or "paired"),
        base=_opt_float(_get(r, "base")),
        new=_opt_float(_get(r, "new")),
        delta=_opt_float(_first(_get(r, "mean_diff"), _get(r, "delta"))),
        ci=None if ci is None else (float(ci[0]), float(ci[1])),
        gate=_opt_float(_get(r, "gate")),
        verdict=str(getattr(verdict, "value", verdict)),
        note=str(_get(r, "note") or ""),
    )


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def gate_view(gate: Sequence[Any] | None, not_compared: Sequence[str] = ()) -> GateView | None:
    """The gate report's rows from :class:`skillreach.baselines.gates.Comparison` objects (or their JSON), or
    from flat rows (``skill``, ``metric``, ``base``, ``new``, ``delta``, ``ci95``, ``gate``,
    ``verdict``); ``None`` when there was no gate at all."""
    if gate is None and not not_compared:
        return None
    rows: list[GateRow] = []
    cohorts: dict[str, dict[str, Any]] = {}
    for item in gate or ():
        results = _get(item, "results")
        skill = str(_get(item, "skill", ""))
        if results is None:
            rows.append(_gate_row(skill, item))
            continue
        rows.extend(_gate_row(skill, r) for r in results)
        if _get(item, "cohorts"):
            cohorts[skill] = dict(_get(item, "cohorts"))
    return GateView(rows=rows, not_compared=list(not_compared), cohorts=cohorts)
