"""Gates and baselines of a study: gate every skill against its stored baseline (or report drift across
a model snapshot), then — when the study re-baselines — record what was measured in one commit.

The stored baselines are the files under ``baselines/`` in the skills' git repository
(:class:`skillreach.baselines.record_store.BaselineRepo`, on the service branch); the database mirrors them.
Skills outside git (the bundled example) keep their baselines in the database and the study folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.baselines.rebaseline import SkillGate, gate_report_markdown, not_compared, undecided
from skillreach.baselines.record_store import BaselineRepo
from skillreach.baselines.records import BaselineRecord
from skillreach.errors import SkillreachError
from skillreach.service.alerts import (
    BASELINE_EXPIRED,
    GATE_BREACHED,
    GATE_INCONCLUSIVE,
    MODEL_DRIFT,
    NO_QUERIES,
    breaches_from_comparison,
    notice_payload,
)
from skillreach.study.config import StudyConfig
from skillreach.study.grading import judge_model_of
from skillreach.study.plan import StudyInputs, StudyPlan
from skillreach.tasks._context import in_prefect_run, logger, store_for

__all__ = [
    "EVERY_SKILL",
    "FIRST_NIGHTLY_KINDS",
    "GateOutcome",
    "baseline_config",
    "baseline_repo",
    "gate_study",
    "record_baselines",
    "run_link",
]


EVERY_SKILL = "*"
"""The ``skill`` of the one alert of a nightly that finds no baseline at all (a fresh install): its
``skillreach.baseline.expired`` event starts ``rebaseline-all`` for every skill."""
FIRST_NIGHTLY_KINDS = frozenset({"compliance"})
"""The study kinds that are the service's nightly: only they start the first re-baselining."""


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
    waiting: tuple[str, ...] = ()
    """Skills whose candidate record waited (for ``skillreach baseline accept``) when the study started."""
    not_compared: str | None = None
    """Why the study is not the gating one (another runtime, model or rubric judge than the stored
    baselines'): then nothing is gated, alerted or re-recorded."""

    @property
    def gate_breaches(self) -> int:
        """How many of the alerts are breached gates (not notices, not drift)."""
        return sum(1 for a in self.breaches if a.get("event", GATE_BREACHED) == GATE_BREACHED)


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


def baseline_repo(config: StudyConfig) -> BaselineRepo | None:
    """The skills' git repository holding the baselines (on the service branch), or ``None``."""
    if config.is_example or not config.skills:
        return None
    return BaselineRepo.find(config.skills[0], folder=config.baselines_dir, branch=config.baselines_branch)


def _new_records(config: StudyConfig, inputs: StudyInputs, artifact: Any) -> dict[str, BaselineRecord]:
    from skillreach.baselines.records import record_baseline

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


def _on_parent_cases(
    inputs: StudyInputs, judge: str | None, new: dict[str, BaselineRecord],
    stored: dict[str, BaselineRecord | None],
) -> dict[str, BaselineRecord]:
    """When the study's query set was grown from the set a stored baseline was recorded on (its
    provenance ``lineage`` names that digest: every query of it is still there, verbatim), the skill is
    gated on those cases (:func:`~skillreach.baselines.records.restrict_record`) — the same pins, the same
    cases —
    instead of being refused as expired. So a skill added with generated queries is gated like any other,
    and a breach left waiting as a candidate is still a breach the next night."""
    lineage = set(getattr(inputs.query_set.provenance, "lineage", None) or [])
    if not lineage:
        return new
    from skillreach.baselines.records import restrict_record
    from skillreach.models import Provenance, QuerySet

    out = dict(new)
    for skill, rec in new.items():
        base = stored.get(skill)
        if base is None or base.corpus_version not in lineage:
            continue
        parent = QuerySet(catalog_id=inputs.query_set.catalog_id,
                          queries=tuple(q for q in inputs.query_set.queries if q.id in base.per_case),
                          provenance=Provenance(digest=base.corpus_version))
        out[skill] = restrict_record(rec, parent, judge_model=judge)
    return out


def _grown_files(config: StudyConfig, repo: BaselineRepo) -> dict[str, str]:
    """The grown query set, at the repository path of the set it grew from (one commit with the records
    made from it); nothing when the study did not grow its set."""
    if config.grown_from is None or config.queries is None:
        return {}
    rel = repo.relative(config.queries_origin or config.grown_from)
    if rel is None:
        logger().warning("%s is outside %s: the grown query set %s is not committed with the records",
                         config.queries_origin or config.grown_from, repo.top, config.queries)
        return {}
    return {rel: config.queries.read_text(encoding="utf-8")}


@task(name="baseline_config", cache_policy=NO_CACHE)
async def baseline_config(config: StudyConfig, inputs: StudyInputs) -> StudyConfig:
    """A re-baselining measures every metric of a record: compliance (and rubric grading) whenever the
    query set has checks."""
    if config.compliance or not any(q.checks is not None for q in inputs.query_set.queries):
        return config
    return config.model_copy(update={"compliance": True})


def _stored(
    config: StudyConfig, inputs: StudyInputs
) -> tuple[dict[str, BaselineRecord | None], tuple[str, ...]]:
    """The stored baseline of every skill of the catalog, and the skills whose candidate waits. Outside
    git, the database's newest record of the study's runtime — or, when the runtime has none at all,
    of any runtime (so a study on another runtime is told apart, never taken for a fresh install)."""
    repo = baseline_repo(config)
    stored: dict[str, BaselineRecord | None] = {}

    def latest(store: Any, skill: str, runtime: str | None) -> BaselineRecord | None:
        row = store.latest_baseline(skill, runtime=runtime)
        return BaselineRecord.model_validate(row.record) if row is not None else None

    with store_for(config) as store:
        for skill in inputs.catalog.names:
            stored[skill] = repo.read(skill) if repo is not None else latest(store, skill, config.runtime)
        if repo is None and not any(stored.values()):
            stored = {skill: latest(store, skill, None) for skill in inputs.catalog.names}
    waiting = tuple(repo.skills(candidates=True)) if repo is not None else ()
    return stored, waiting


def _skill_file(inputs: StudyInputs, skill: str) -> str | None:
    s = inputs.catalog.get(skill)
    return (s.path or None) if s is not None else None


class _Advice:
    """The next step an alert names: accept the new bar, or fix the SKILL.md files that changed since the
    baseline's revision among the skill that lost cases and the skills that took them — read from git
    (:func:`~skillreach.baselines.rebaseline.changed_since`), as ``check`` reads a change; never a guess.
    When none of them changed, or the revision is not known, no file is named and the step says why."""

    def __init__(self, config: StudyConfig, inputs: StudyInputs) -> None:
        self.config, self.inputs = config, inputs
        self.repo = baseline_repo(config)
        self.revision: str | None = None

    def _changed(self, r: SkillGate, names: list[str]) -> tuple[list[str], str]:
        """(the skills among ``names`` whose SKILL.md changed since ``r``'s baseline, what was compared)."""
        from skillreach.baselines.rebaseline import baseline_revision, changed_since

        if r.base is None:
            return [], "no baseline"
        if self.repo is None:  # outside git: only the skill's own version is known at the baseline
            own = r.new is not None and r.new.skill_version != r.base.skill_version
            return ([r.skill] if own else []), f"{r.skill}'s version at its baseline"
        revision = baseline_revision(self.repo.top, r.base, branch=self.repo.branch, folder=self.repo.folder)
        self.revision = revision
        if revision is None:
            return [], ""
        folders = {}
        for name in names:
            skill = self.inputs.catalog.get(name)
            rel = self.repo.relative(Path(skill.folder)) if skill is not None and skill.folder else None
            if rel:
                folders[name] = rel
        return changed_since(self.repo.top, revision, folders), f"the baseline's revision {revision[:12]}"

    def _others(self, names: list[str]) -> list[str]:
        """The catalog's other SKILL.md files changed since the revision just read (what moved the routing
        when neither the skill nor a taker changed), at most five."""
        from skillreach.baselines.rebaseline import changed_since

        if self.repo is None or self.revision is None:
            return []
        folders = {}
        for skill in self.inputs.catalog.skills:
            rel = self.repo.relative(Path(skill.folder)) if skill.folder and skill.name not in names else None
            if rel:
                folders[skill.name] = rel
        changed = changed_since(self.repo.top, self.revision, folders)
        return [p for p in (_skill_file(self.inputs, n) for n in changed[:5]) if p]

    def __call__(self, r: SkillGate, cause: dict[str, Any]) -> dict[str, Any]:
        takers = [t for t in (cause.get("taken_by") or {}) if t != r.skill]
        names = [r.skill, *takers]
        changed, since = self._changed(r, names)
        step = f"skillreach baseline accept {r.skill} if this is intended"
        files = [p for p in (_skill_file(self.inputs, n) for n in changed) if p]
        if files:
            step += f", else fix {' or '.join(files)} (changed since {since})"
        elif since:
            others = self._others(names)
            step += (f" (no SKILL.md of {', '.join(names)} changed since {since}"
                     + (f"; changed since then: {', '.join(others)})" if others else ")"))
        else:
            step += (" (which SKILL.md changed is not known: the baseline's revision is not in this "
                     "repository's history)")
        return {**cause, "next_step": step}


def _cause(inputs: StudyInputs, r: SkillGate, artifact: Any, advise: _Advice) -> dict[str, Any]:
    """Why an activation dropped, from the new study's probes of the skill's own cases: the skill that
    came first instead on the cases it lost (``cause``; ``taken_by``: every taker → cases) and the
    sentence (``lost 4 of 4 cases to delta``), plus the next step. Empty when the probes name no taker
    (the cases went to no skill: then ``cause_detail`` only)."""
    from skillreach.baselines.scope import losses

    if r.base is None or r.new is None:
        return advise(r, {})
    try:
        loss = losses(r.base, r.new, getattr(artifact, "outcomes", ()))
    except (KeyError, ValueError, TypeError) as exc:  # a record without per-case rates: no cause known
        logger().info("no cause for %s: %s", r.skill, exc)
        return advise(r, {})
    if not loss.lost:
        return advise(r, {})
    takers = {k: v for k, v in loss.taken_by.items() if k != r.skill and inputs.catalog.get(k) is not None}
    detail = loss.model_copy(update={"taken_by": takers}).sentence()
    if not takers and loss.taken_by:  # the agent chose no skill (or one outside the catalog) instead
        detail += " (no skill of the catalog activated instead)"
    cause: dict[str, Any] = {"cause_detail": detail}
    if takers:
        cause.update(cause=next(iter(takers)), taken_by=takers)
    return advise(r, cause)


@task(name="gate_study", cache_policy=NO_CACHE)
async def gate_study(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, artifact: Any, kind: str = "study"
) -> GateOutcome:
    """Compare every skill with its stored baseline: one status per skill, one alert per breached gate
    (per drifted metric after a model change), per expired or missing baseline, per skill without queries,
    and — when re-baselining — one per skill whose drop the interval leaves undecided (kept as a
    candidate; the alert says how many cases would decide it). Nothing is silent: a skill that cannot be
    compared says why.

    Only the gating study gates: a study on another runtime, model or rubric judge than the stored
    baselines' is reported once as *not compared* — no alert, no re-baselining. A nightly (``kind``) that
    finds no baseline at all alerts once and starts ``rebaseline-all`` for every skill."""
    from skillreach.baselines.rebaseline import gate_skills

    stored, waiting = _stored(config, inputs)
    new = _new_records(config, inputs, artifact)
    why = not_compared(stored.values(), new.values(), drift=config.drift)
    if why is not None:
        logger().warning("not compared: %s; nothing gated, no alert, nothing re-recorded", why)
        return GateOutcome(report=gate_report_markdown([], [], plan.study_id, not_compared=why),
                           waiting=waiting, not_compared=why)
    link = run_link(plan)
    if not any(stored.values()) and not config.record_baselines:
        if kind not in FIRST_NIGHTLY_KINDS or not new:
            return GateOutcome(report=gate_report_markdown([], [], plan.study_id), waiting=waiting)
        statuses = {s: "no baseline" if s in new else "no queries" for s in inputs.catalog.names}
        first = notice_payload(BASELINE_EXPIRED, skill=EVERY_SKILL, run_link=link, study_id=plan.study_id,
                               message="no baselines yet: re-baselining every skill")
        logger().warning("no baselines yet: re-baselining every skill")
        return GateOutcome((), (first,), statuses, (),
                           gate_report_markdown([], [], plan.study_id, statuses, first=True),
                           waiting=waiting)
    gated = _on_parent_cases(inputs, judge_model_of(config, live=False), new, stored)
    results = gate_skills(inputs.catalog.names, stored, gated, config.gates, drift=config.drift)
    if gated is not new:  # gated on the parent's cases; what is recorded is the grown set's record
        results = [replace(r, new=new[r.skill]) if r.new is not None else r for r in results]
    model = plan.resolved_model or config.model
    advise = _Advice(config, inputs)
    rows: list[dict[str, Any]] = []
    alerts: list[dict[str, Any]] = []
    skipped: list[str] = []
    for r in results:
        if r.comparison is not None and r.base is not None:
            for g in r.comparison.results:
                rows.append({"skill": r.skill, "metric": g.metric, "base": g.base, "new": g.new,
                             "delta": g.mean_diff, "ci95": list(g.ci95) if g.ci95 else None, "gate": g.gate,
                             "verdict": str(g.verdict), "baseline_id": r.base.baseline_id})
            why = _cause(inputs, r, artifact, advise)
            alerts += [{**a, **why} if a["metric"] == "activation" else {**a, **advise(r, {})}
                       for a in breaches_from_comparison(
                           r.comparison, baseline_id=r.base.baseline_id, run_link=link,
                           study_id=plan.study_id, runtime=config.runtime, model=model,
                           **({"event": MODEL_DRIFT} if config.drift else {}))]
            if r.status == "inconclusive" and config.record_baselines:  # kept as a candidate: said once
                metrics = sorted({g.metric for g in r.comparison.results if str(g.verdict) == "inconclusive"})
                cause = why if "activation" in metrics else advise(r, {})
                lost = f"; {cause['cause_detail']}" if cause.get("cause_detail") else ""
                alerts.append(notice_payload(
                    GATE_INCONCLUSIVE, skill=r.skill, run_link=link, study_id=plan.study_id,
                    baseline_id=r.base.baseline_id, metric=", ".join(metrics), verdict="inconclusive",
                    message=f"drop past the gate, interval undecided: {undecided(r.comparison)}{lost}; the "
                            f"baseline {r.base.baseline_id} stays, the new record waits as a candidate "
                            f"(skillreach baseline accept {r.skill} lowers the bar)", **cause))
        elif r.status == "expired" and r.skill in waiting:  # a person decides, not a re-baselining
            skipped.append(f"{r.skill}: {r.reason}; its candidate waits "
                           f"(skillreach baseline accept {r.skill})")
        elif r.status == "expired":
            skipped.append(f"{r.skill}: {r.reason}")
            if not config.record_baselines:  # a re-baselining is what this alert would start
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
    kept = [r.skill for r in results if r.new is not None and r.skill in waiting
            and (config.drift or r.status in ("expired", "drift"))] if config.record_baselines else []
    if alerts:
        logger().warning("%d alert(s): %s", len(alerts),
                         ", ".join(f"{a['skill']}/{a['metric']}" for a in alerts))
    return GateOutcome(tuple(rows), tuple(alerts), statuses, tuple(skipped),
                       gate_report_markdown(rows, skipped, plan.study_id, statuses, drift=config.drift,
                                            kept_waiting=kept),
                       tuple(results), waiting=waiting)


@task(name="record_baselines", cache_policy=NO_CACHE)
async def record_baselines(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, outcome: GateOutcome
) -> dict[str, Any]:
    """Record what the gate let through in one commit (a breached or inconclusive skill's record waits
    as a candidate, and so does a waiting candidate's across a model or runtime change); mirror every
    record into the database. A study that is not the gating one records nothing. Returns what was
    recorded and the commit."""
    from skillreach.baselines.rebaseline import records_to_write
    from skillreach.baselines.records import write_baseline

    if outcome.not_compared is not None:
        logger().info("not compared (%s): nothing re-recorded", outcome.not_compared)
        return {"recorded": [], "candidates": [], "commit": None, "ids": [],
                "not_compared": outcome.not_compared}
    records, candidates = records_to_write(outcome.results, waiting=outcome.waiting, drift=config.drift)
    repo = baseline_repo(config)
    sha: str | None = None
    if repo is not None and (records or candidates):
        from skillreach.baselines.rebaseline import REVISION_LINE
        from skillreach.baselines.records import git_output

        head = git_output(["rev-parse", "--verify", "-q", "HEAD^{commit}"], repo.top)
        why = [f"reason: {config.reason or 'manual re-baselining'}",
               f"study {plan.study_id}: runtime {config.runtime}, "
               f"model {plan.resolved_model or config.model}",
               *([f"{REVISION_LINE}{head}"] if head else []),
               *[f"{s}: {st}" for s, st in sorted(outcome.statuses.items())]]
        what = "drift report, all re-recorded" if config.drift else "gated, then re-recorded"
        grown = _grown_files(config, repo)
        if grown:
            what += f"; query set grown: {', '.join(sorted(grown))}"
            why.insert(1, f"query set grown from {config.grown_from} to a new corpus version")
        done = repo.commit(records, candidates=candidates, why=why, files=grown,
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
