"""Gates and baselines of a study: gate every skill against its stored baseline (or report drift across
a model snapshot), then — when the study re-baselines — record what was measured in one commit.

The stored baselines are the files under ``baselines/`` in the skills' git repository
(:class:`skillreach.baseline_store.BaselineRepo`, on the service branch); the database mirrors them.
Skills outside git (the bundled example) keep their baselines in the database and the study folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.alerts import (
    BASELINE_EXPIRED,
    MODEL_DRIFT,
    NO_QUERIES,
    breaches_from_comparison,
    notice_payload,
)
from skillreach.baseline_store import BaselineRepo
from skillreach.baselines import BaselineRecord
from skillreach.errors import SkillreachError
from skillreach.rebaseline import SkillGate
from skillreach.study.config import StudyConfig
from skillreach.study.grading import judge_model_of
from skillreach.study.plan import StudyInputs, StudyPlan
from skillreach.tasks._context import in_prefect_run, logger, store_for

__all__ = [
    "GateOutcome",
    "baseline_config",
    "baseline_repo",
    "gate_report_markdown",
    "gate_study",
    "record_baselines",
    "run_link",
]


@dataclass(frozen=True)
class GateOutcome:
    rows: tuple[dict[str, Any], ...] = ()
    """One row per (skill, metric) compared."""
    breaches: tuple[dict[str, Any], ...] = ()
    """Alert payloads: one per breached gate (or drifted metric), and one per expired or missing baseline
    and per skill without queries."""
    statuses: dict[str, str] = field(default_factory=dict)
    """Every skill of the catalog → ok, inconclusive, breach, drift, expired, no baseline, no queries."""
    skipped: tuple[str, ...] = field(default_factory=tuple)
    """Skills with a baseline that could not be compared, and why (an expired pin)."""
    report: str = ""
    results: tuple[SkillGate, ...] = ()


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


def baseline_repo(config: StudyConfig) -> BaselineRepo | None:
    """The skills' git repository holding the baselines (on the service branch), or ``None``."""
    if config.is_example or not config.skills:
        return None
    return BaselineRepo.find(config.skills[0], folder=config.baselines_dir, branch=config.baselines_branch)


def gate_report_markdown(
    outcome_rows: list[dict[str, Any]], skipped: list[str], study_id: str,
    statuses: dict[str, str] | None = None, *, drift: bool = False,
) -> str:
    title = "Drift report" if drift else "Gate report"
    lines = [f"# {title} — study `{study_id}`", ""]
    if statuses:
        counts = {s: sum(1 for v in statuses.values() if v == s) for s in dict.fromkeys(statuses.values())}
        summary = ", ".join(f"{n} {s}" for s, n in counts.items())
        lines.append(f"**{summary}** over {len(statuses)} skills.")
        lines += ["", "| skill | status |", "|---|---|",
                  *[f"| {k} | {v} |" for k, v in sorted(statuses.items())], ""]
    if not outcome_rows and not skipped:
        if not statuses:
            lines.append("No stored baseline matches this study: nothing was gated. Record baselines with "
                         "the `rebaseline-all` deployment or `skillreach baseline record`.")
        return "\n".join(lines) + "\n"
    breaches = sum(1 for r in outcome_rows if r["verdict"] == "breach")
    plural = "es" if breaches != 1 else ""
    what = "moved past their gate" if drift else f"breach{plural}"
    how = "compared" if drift else "gated"
    lines.append(f"**{breaches} {what}** over {len(outcome_rows)} {how} metrics.")
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


def _new_records(config: StudyConfig, inputs: StudyInputs, artifact: Any) -> dict[str, BaselineRecord]:
    from skillreach.baselines import record_baseline

    out: dict[str, BaselineRecord] = {}
    for skill in _queried_skills(inputs):
        try:
            out[skill] = record_baseline(
                artifact, inputs.queries_path, skill, skill_folder=_folder(inputs, skill),
                query_set=inputs.query_set, judge_model=judge_model_of(config, live=False),
            )
        except SkillreachError as exc:
            logger().warning("no baseline for %s: %s", skill, exc.message)
    return out


@task(name="baseline_config", tags=["skillreach", "baselines"], cache_policy=NO_CACHE)
async def baseline_config(config: StudyConfig, inputs: StudyInputs) -> StudyConfig:
    """A re-baselining measures every metric of a record: compliance (and rubric grading) whenever the
    query set has checks."""
    if config.compliance or not any(q.checks is not None for q in inputs.query_set.queries):
        return config
    return config.model_copy(update={"compliance": True})


@task(name="gate_study", tags=["skillreach", "gates"], cache_policy=NO_CACHE)
async def gate_study(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, artifact: Any
) -> GateOutcome:
    """Compare every skill with its stored baseline: one status per skill, one alert per breached gate
    (per drifted metric after a model change), per expired or missing baseline, per skill without queries.
    Nothing is silent: a skill that cannot be compared says why."""
    from skillreach.rebaseline import gate_skills

    repo = baseline_repo(config)
    stored: dict[str, BaselineRecord | None] = {}
    with store_for(config) as store:
        for skill in inputs.catalog.names:
            if repo is not None:
                stored[skill] = repo.read(skill)
            else:
                row = store.latest_baseline(skill, runtime=config.runtime)
                stored[skill] = BaselineRecord.model_validate(row.record) if row is not None else None
    if not any(stored.values()) and not config.record_baselines:
        return GateOutcome(report=gate_report_markdown([], [], plan.study_id))
    new = _new_records(config, inputs, artifact)
    results = gate_skills(inputs.catalog.names, stored, new, config.gates, drift=config.drift)
    link = run_link(plan)
    model = plan.resolved_model or config.model
    rows: list[dict[str, Any]] = []
    alerts: list[dict[str, Any]] = []
    skipped: list[str] = []
    for r in results:
        if r.comparison is not None and r.base is not None:
            for g in r.comparison.results:
                rows.append({"skill": r.skill, "metric": g.metric, "base": g.base, "new": g.new,
                             "delta": g.mean_diff, "ci95": list(g.ci95) if g.ci95 else None, "gate": g.gate,
                             "verdict": str(g.verdict), "baseline_id": r.base.baseline_id})
            alerts += breaches_from_comparison(
                r.comparison, baseline_id=r.base.baseline_id, run_link=link, study_id=plan.study_id,
                runtime=config.runtime, model=model, **({"event": MODEL_DRIFT} if config.drift else {}),
            )
        elif r.status == "expired":
            skipped.append(f"{r.skill}: {r.reason}")
            alerts.append(notice_payload(
                BASELINE_EXPIRED, skill=r.skill, run_link=link, study_id=plan.study_id,
                baseline_id=r.base.baseline_id if r.base else None,
                message=f"baseline expired, not compared ({r.reason}); re-baselining is due"))
        elif r.status == "no queries" and config.record_baselines:  # said when it arrives; nightly lists it
            alerts.append(notice_payload(
                NO_QUERIES, skill=r.skill, run_link=link, study_id=plan.study_id,
                message="no query expects this skill, so it has no baseline and no gate; add queries "
                        "(skillreach queries generate) or configure a generator model"))
        elif r.status == "no baseline" and not config.record_baselines:
            alerts.append(notice_payload(
                BASELINE_EXPIRED, skill=r.skill, run_link=link, study_id=plan.study_id,
                message="no baseline to gate against; re-baselining is due"))
    statuses = {r.skill: r.status for r in results}
    if alerts:
        logger().warning("%d alert(s): %s", len(alerts),
                         ", ".join(f"{a['skill']}/{a['metric']}" for a in alerts))
    return GateOutcome(tuple(rows), tuple(alerts), statuses, tuple(skipped),
                       gate_report_markdown(rows, skipped, plan.study_id, statuses, drift=config.drift),
                       tuple(results))


@task(name="record_baselines", tags=["skillreach", "baselines"], cache_policy=NO_CACHE)
async def record_baselines(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, outcome: GateOutcome
) -> dict[str, Any]:
    """Record what the gate let through in one commit (a breached skill's record waits as a candidate);
    mirror every record into the database. Returns what was recorded and the commit."""
    from skillreach.baselines import write_baseline
    from skillreach.rebaseline import records_to_write

    records, candidates = records_to_write(outcome.results)
    repo = baseline_repo(config)
    sha: str | None = None
    if repo is not None and (records or candidates):
        why = [f"reason: {config.reason or 'manual re-baselining'}",
               f"study {plan.study_id}: runtime {config.runtime}, "
               f"model {plan.resolved_model or config.model}",
               *[f"{s}: {st}" for s, st in sorted(outcome.statuses.items())]]
        what = "drift report, all re-recorded" if config.drift else "gated, then re-recorded"
        done = repo.commit(records, candidates=candidates, why=why,
                           subject=f"baselines: {len(records)} re-recorded, {len(candidates)} candidate(s) — "
                                   f"{config.reason or 'manual'} ({what})")
        sha = done.sha
    with store_for(config) as store:
        for rec in records:
            if repo is None:
                write_baseline(rec, plan.out / "baselines" / f"{rec.skill}.json")
            store.add_baseline(rec.model_dump(mode="json"), study_id=plan.study_id)
    logger().info("recorded %d baselines, %d candidate(s) waiting%s", len(records), len(candidates),
                  f" (commit {sha[:12]})" if sha else "")
    return {"recorded": [r.skill for r in records], "candidates": [r.skill for r in candidates],
            "commit": sha, "ids": [r.baseline_id for r in records]}
