"""Baselines from a study, and the gates of a new study against the stored baselines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.alerts import breaches_from_comparison
from skillreach.errors import RefusedError, SkillreachError
from skillreach.study import StudyConfig
from skillreach.study.grading import judge_model_of
from skillreach.study.plan import StudyInputs, StudyPlan
from skillreach.tasks._context import in_prefect_run, logger, store_for

__all__ = ["GateOutcome", "gate_report_markdown", "gate_study", "record_baselines", "run_link"]


@dataclass(frozen=True)
class GateOutcome:
    rows: tuple[dict[str, Any], ...] = ()
    """One row per (skill, metric) compared."""
    breaches: tuple[dict[str, Any], ...] = ()
    """Alert payloads (skillreach.alerts.breach_payload), one per breached gate."""
    skipped: tuple[str, ...] = field(default_factory=tuple)
    """Skills with a baseline that could not be compared, and why (an expired pin)."""
    report: str = ""
    comparisons: tuple[dict[str, Any], ...] = ()
    """Each compared skill's :class:`skillreach.gates.Comparison` as JSON (power advice, cohorts)."""


def run_link(plan: StudyPlan) -> str:
    """The Prefect UI page of the current flow run when there is one, else the HTML report."""
    if in_prefect_run():
        from prefect.context import FlowRunContext
        from prefect.settings import get_current_settings

        ctx = FlowRunContext.get()
        ui = get_current_settings().ui_url
        if ctx is not None and ctx.flow_run is not None and ui:
            return f"{str(ui).rstrip('/')}/runs/flow-run/{ctx.flow_run.id}"
    return (plan.out / "report.html").resolve().as_uri()


def _queried_skills(inputs: StudyInputs) -> list[str]:
    """Skills of the catalog with at least one positive query (only they get a baseline)."""
    expected = {q.expected_skill for q in inputs.query_set.queries if q.expected_skill}
    return sorted(s for s in inputs.catalog.names if s in expected)


def _folder(inputs: StudyInputs, skill: str) -> str | None:
    s = inputs.catalog.get(skill)
    return s.folder or None if s is not None else None


def _fmt(x: Any) -> str:
    return "–" if x is None else f"{x:+.3f}" if isinstance(x, float) else str(x)


def gate_report_markdown(outcome_rows: list[dict[str, Any]], skipped: list[str], study_id: str) -> str:
    lines = [f"# Gate report — study `{study_id}`", ""]
    if not outcome_rows and not skipped:
        lines.append("No stored baseline matches this study: nothing was gated. "
                     "Record baselines with the `rebaseline-all` deployment or `skillreach baseline record`.")
        return "\n".join(lines) + "\n"
    breaches = sum(1 for r in outcome_rows if r["verdict"] == "breach")
    plural = "es" if breaches != 1 else ""
    lines.append(f"**{breaches} breach{plural}** over {len(outcome_rows)} gated metrics.")
    lines += ["", "| skill | metric | baseline | new | Δ (paired) | 95 % CI | gate | verdict |",
              "|---|---|---|---|---|---|---|---|"]
    for r in outcome_rows:
        ci = r.get("ci95")
        ci_s = "–" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"
        mark = "**breach**" if r["verdict"] == "breach" else r["verdict"]
        lines.append(f"| {r['skill']} | {r['metric']} | {_fmt(r.get('base'))} | {_fmt(r.get('new'))} | "
                     f"{_fmt(r.get('delta'))} | {ci_s} | {_fmt(r.get('gate'))} | {mark} |")
    if skipped:
        lines += ["", "Not compared:", *[f"- {s}" for s in skipped]]
    return "\n".join(lines) + "\n"


@task(name="gate_study", tags=["skillreach", "gates"], cache_policy=NO_CACHE)
async def gate_study(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, artifact: Any
) -> GateOutcome:
    """Compare this study with the newest stored baseline of each queried skill (same runtime)."""
    with store_for(config) as store:
        stored = [(s, store.latest_baseline(s, runtime=config.runtime)) for s in _queried_skills(inputs)]
    bases = [(skill, row.record) for skill, row in stored if row is not None]
    if not bases:  # nothing to gate (and no need to import the statistics)
        return GateOutcome(report=gate_report_markdown([], [], plan.study_id))
    from skillreach.baselines import BaselineRecord, record_baseline
    from skillreach.gates import compare

    gates = config.gates
    link = run_link(plan)
    rows: list[dict[str, Any]] = []
    breaches: list[dict[str, Any]] = []
    skipped: list[str] = []
    comparisons: list[dict[str, Any]] = []
    for skill, record in bases:
        base = BaselineRecord.model_validate(record)
        new = record_baseline(artifact, inputs.queries_path, skill, skill_folder=_folder(inputs, skill),
                              query_set=inputs.query_set, judge_model=judge_model_of(config, live=False))
        try:
            comparison = compare(base, new, gates)
        except RefusedError as exc:
            skipped.append(f"{skill}: {exc.message}")
            continue
        comparisons.append(comparison.model_dump(mode="json"))
        for r in comparison.results:
            rows.append({"skill": skill, "metric": r.metric, "base": r.base, "new": r.new,
                         "delta": r.mean_diff, "ci95": list(r.ci95) if r.ci95 else None,
                         "gate": r.gate, "verdict": str(r.verdict), "baseline_id": base.baseline_id})
        breaches += breaches_from_comparison(
            comparison, baseline_id=base.baseline_id, run_link=link, study_id=plan.study_id,
            runtime=config.runtime, model=plan.resolved_model or config.model,
        )
    if breaches:
        logger().warning("%d gate breach(es): %s", len(breaches),
                         ", ".join(f"{b['skill']}/{b['metric']}" for b in breaches))
    return GateOutcome(tuple(rows), tuple(breaches), tuple(skipped),
                       gate_report_markdown(rows, skipped, plan.study_id), tuple(comparisons))


@task(name="record_baselines", tags=["skillreach", "baselines"], cache_policy=NO_CACHE)
async def record_baselines(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, artifact: Any
) -> list[str]:
    """Record (store + ``DIR/baselines/<skill>.json``) the baseline of every queried skill."""
    from skillreach.baselines import record_baseline, write_baseline

    ids: list[str] = []
    with store_for(config) as store:
        for skill in _queried_skills(inputs):
            try:
                rec = record_baseline(artifact, inputs.queries_path, skill,
                                      skill_folder=_folder(inputs, skill), query_set=inputs.query_set,
                                      judge_model=judge_model_of(config, live=False))
            except SkillreachError as exc:
                logger().warning("no baseline for %s: %s", skill, exc.message)
                continue
            write_baseline(rec, plan.out / "baselines" / f"{skill}.json")
            store.add_baseline(rec.model_dump(mode="json"), study_id=plan.study_id)
            ids.append(rec.baseline_id)
    logger().info("recorded %d baselines", len(ids))
    return ids
