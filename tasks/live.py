"""The live flows' tasks: ingest what the agents recorded, check the live gate and emit
``skillreach.live.dropped``, set up the frozen set's re-run for a dropped skill, judge it and file the
verdict (an alert and a Prefect artifact).

The logic is the core's (:mod:`skillreach.live`): these wrap it with the store, git and Prefect.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.baselines.records import BaselineRecord
from skillreach.errors import ConfigError, InputError, SkillreachError
from skillreach.live.gate import LiveDrop
from skillreach.live.verdict import LiveVerdict
from skillreach.study.config import StudyConfig
from skillreach.tasks._context import api_url, in_prefect_run, logger, store_for

__all__ = [
    "FrozenSet",
    "check_live_gate",
    "emit_live_drops",
    "frozen_set",
    "ingest_live",
    "judge_live_drop",
    "live_drop_of",
    "publish_live_verdict",
    "verdict_alert",
]

OFFLINE = ("fake", "keyword", "retriever")


def _until(value: str | None) -> datetime:
    from skillreach.live.readers import EARLIEST, LATEST

    if not value:
        return datetime.now(UTC)
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
        at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    except ValueError:
        raise InputError(
            f"until {value!r}: not an ISO date and time; write 2026-12-01T00:00:00+00:00"
        ) from None
    except OverflowError:  # 0001-01-01T00:00+01:00 is in year 0 in UTC
        at = datetime.min.replace(tzinfo=UTC)
    if not EARLIEST <= at < LATEST:
        raise InputError(f"until {value!r}: out of range; give a time between 1970 and 2200")
    return at


@task(name="ingest_live", cache_policy=NO_CACHE)
async def ingest_live(config: StudyConfig, sources: list[str] | None = None) -> dict[str, Any]:
    """Read every source (``sources``, else the configuration's ``live_sources``,
    ``SKILLREACH_LIVE_SOURCES``) into the store, incrementally; what was read and added."""
    from skillreach.live.ingest import ingest_sources

    given = sources or [p for p in config.live_sources.split(os.pathsep) if p.strip()]
    paths = [Path(s).expanduser() for s in given]
    if not paths:
        logger().warning("no live source configured (SKILLREACH_LIVE_SOURCES); nothing ingested")
        return {"sources": [], "added": 0}
    root = config.skills[0] if config.skills else None
    with store_for(config) as store:
        summary = ingest_sources(paths, store, skills_root=root)
    data = summary.as_dict()
    for line in summary.lines():  # what was skipped, counted and named, readable in the run's log
        (logger().warning if line.startswith("  skipped") else logger().info)("%s", line.strip())
    logger().debug("ingested %s", data)
    return {"sources": [str(p) for p in paths], **data}


def _catalog_names(config: StudyConfig) -> list[str] | None:
    if not config.skills:
        return None
    from skillreach.skills.discovery import discover

    return [s.name for s in discover(config.skills).skills]


@task(name="check_live_gate", cache_policy=NO_CACHE)
async def check_live_gate(config: StudyConfig, until: str | None = None) -> list[LiveDrop]:
    """Every skill (of the catalog, when the configuration names one) whose live share fell past
    ``live_gates`` over the recent window ending ``until`` (default now)."""
    from skillreach.live.gate import check_live_gate as gate_check
    from skillreach.live.gate import windows_for
    from skillreach.store.live import load_events

    end = _until(until)
    windows = windows_for(config.live_gates, end)
    with store_for(config) as store:
        events = load_events(store, since=windows.reference_start, until=end)
    drops = gate_check(events, config.live_gates, end, skills=_catalog_names(config))
    for d in drops:
        logger().warning("live gate: %s", d.sentence())
    if not drops:
        logger().info("live gate: no skill past it (%d events read)", len(events))
    return drops


@task(name="live_drop_of", cache_policy=NO_CACHE)
async def live_drop_of(config: StudyConfig, skill: str, until: str | None = None) -> LiveDrop | None:
    """The skill's live drop as the gate sees it at ``until`` (the event's), ``None`` when it is not
    past the gate."""
    drops: list[LiveDrop] = await check_live_gate.fn(config, until)
    return next((d for d in drops if d.skill == skill), None)


@task(name="emit_live_drops", cache_policy=NO_CACHE)
async def emit_live_drops(config: StudyConfig, drops: list[LiveDrop]) -> int:
    """One ``skillreach.live.dropped`` event per drop (resource ``skillreach.skill.<name>``): the
    ``live-dropped`` deployment's trigger. Each drop is stored as an alert row first (``skillreach alerts
    list`` shows it): a skill's drop already said within ``alert_repeat_after`` (the hourly ingest sees
    the same fall again) or muted (``skillreach alerts mute live.dropped:SKILL``) is stored as a repeat and
    emits nothing, so its frozen set is not re-run every hour. Without a Prefect run and server nothing is
    emitted; returns the events emitted."""
    from skillreach.live.verdict import drop_payload
    from skillreach.store import alert_key, muted_by, sent_within
    from skillreach.tasks.alerts import repeat_window

    if not drops:
        return 0
    tracked = bool(in_prefect_run() and api_url())
    window = repeat_window(config)
    sent = 0
    with store_for(config) as store:
        for d in drops:
            payload = drop_payload(d)
            key = alert_key(payload)
            silenced = (
                "muted"
                if muted_by(store, key) is not None
                else "repeat"
                if sent_within(store, key, window)
                else None
            )
            store.add_alert(
                payload,
                key=key,
                delivery=silenced or ("event" if tracked else "none"),
                delivered=tracked and silenced is None,
            )
            if silenced:
                logger().info("%s: drop already said (%s); no event, no re-run", d.skill, silenced)
                continue
            if tracked:
                from prefect.events import emit_event

                from skillreach.live.gate import LIVE_DROPPED

                ev = emit_event(
                    LIVE_DROPPED,
                    resource={
                        "prefect.resource.id": f"skillreach.skill.{d.skill}",
                        "prefect.resource.name": d.skill,
                    },
                    payload=payload,
                )
                sent += ev is not None
    return sent


@dataclass(frozen=True)
class FrozenSet:
    """The frozen set's re-run of one skill: its baseline, and the study that re-runs its cases against
    the current catalog."""

    skill: str
    baseline: BaselineRecord
    queries: Path
    """The baseline's cases (the skill's positive cases and the out-of-scope and neighbour-negative
    ones), sealed beside the study."""
    config: StudyConfig


def _stored_baseline(config: StudyConfig, skill: str) -> tuple[BaselineRecord | None, Path | None]:
    """The skill's stored baseline (the skills' git repository on the service branch, else the store's
    newest) and the git top its query set path is relative to."""
    from skillreach.tasks.baselines import baseline_repo

    repo = baseline_repo(config)
    if repo is not None:
        rec = repo.read(skill)
        if rec is not None:
            return rec, repo.top
    with store_for(config) as store:
        row = store.latest_baseline(skill)
    return (BaselineRecord.model_validate(row.record), None) if row is not None else (None, None)


@task(name="frozen_set", cache_policy=NO_CACHE)
async def frozen_set(config: StudyConfig, skill: str, until: str | None = None) -> FrozenSet:
    """The study that re-runs ``skill``'s baseline cases against the current catalog, on the baseline's
    runtime, model and runs per case; never gated or re-recorded (the verdict is judged apart)."""
    from skillreach.baselines.scope import neighbourhood_cases
    from skillreach.queries.sets import load_query_set, write_query_set

    rec, top = _stored_baseline(config, skill)
    if rec is None:
        raise ConfigError(
            f"{skill}: no baseline to re-run its frozen set; record one "
            f"(skillreach baseline record --skill {skill})"
        )
    shown = Path(rec.corpus_path or rec.corpus_version.rsplit("@", 1)[0])
    qpath = shown if shown.is_absolute() or top is None else top / shown
    if not qpath.is_file():
        raise ConfigError(f"{skill}: the query set of its baseline {rec.baseline_id}, {shown}, is missing")
    stamp = re.sub(r"[^0-9A-Za-z]+", "-", until or datetime.now(UTC).isoformat()).strip("-")
    out = config.home / "live" / f"{skill}-{stamp}"
    cases = write_query_set(neighbourhood_cases(load_query_set(qpath), [skill]), out / "frozen-cases.json")
    model = None if rec.runtime.name in OFFLINE and rec.model == rec.runtime.name else rec.model
    study = config.model_copy(
        update={
            "queries": cases,
            "runtime": rec.runtime.name,
            "model": model,
            "attempts": rec.runs_per_case,
            "out": out / "study",
            "gate": False,
            "record_baselines": False,
            "compliance": False,
            "judge_model": rec.judge_model or config.judge_model,
            "reason": f"live drop of {skill}",
        }
    )
    return FrozenSet(skill=skill, baseline=rec, queries=cases, config=study)


@task(name="judge_live_drop", cache_policy=NO_CACHE)
async def judge_live_drop(
    config: StudyConfig, frozen: FrozenSet, artifact: Any, drop: LiveDrop, study_id: str | None = None
) -> LiveVerdict:
    """The frozen set's re-run gated against the baseline (activation, paired over the same cases),
    the cases it lost and to whom, the catalog's changes from git: the verdict."""
    from skillreach.baselines.gates import compare
    from skillreach.baselines.rebaseline import undecided
    from skillreach.baselines.records import record_baseline
    from skillreach.baselines.scope import losses
    from skillreach.live.catalog import catalog_changes
    from skillreach.live.verdict import FrozenResult, decide

    skill = frozen.skill
    found = {s.name: s for s in _found(config)}
    folder = found[skill].folder if skill in found else None
    new = record_baseline(
        artifact, frozen.queries, skill, skill_folder=folder or None, judge_model=frozen.baseline.judge_model
    )
    try:
        cmp = compare(frozen.baseline, new, config.gates, strict=False)
    except SkillreachError as exc:  # pins differ (another model snapshot, runtime): the set cannot settle it
        logger().warning("%s: the frozen set is not comparable with its baseline: %s", skill, exc.message)
        refused = FrozenResult(
            verdict="inconclusive",
            baseline_id=frozen.baseline.baseline_id,
            base=None,
            new=None,
            needed=f"not compared: {exc.message}",
            study_id=study_id,
        )
        return decide(drop, refused, catalog_changes(list(config.skills)))
    act = next((g for g in cmp.results if g.metric == "activation"), None)
    verdict = str(act.verdict.value) if act is not None else "inconclusive"
    loss = losses(frozen.baseline, new, artifact.outcomes)
    result = FrozenResult(
        verdict=verdict if verdict in ("breach", "ok") else "inconclusive",
        baseline_id=frozen.baseline.baseline_id,
        base=act.base if act else None,
        new=act.new if act else None,
        delta=act.mean_diff if act else None,
        interval=act.ci95 if act else None,
        gate=act.gate if act else None,
        lost=loss.lost,
        cases=loss.cases,
        taken_by=loss.taken_by,
        needed=undecided(cmp) if verdict == "inconclusive" else None,
        study_id=study_id,
    )
    changes = catalog_changes(list(config.skills))
    out = decide(drop, result, changes)
    logger().warning("%s", out.message)
    return out


def _found(config: StudyConfig) -> list[Any]:
    if not config.skills:
        return []
    from skillreach.skills.discovery import discover

    return list(discover(config.skills).skills)


def _artifact_key(skill: str) -> str:
    """Prefect artifact keys are lowercase letters, digits and dashes."""
    return "live-verdict-" + (re.sub(r"[^a-z0-9-]+", "-", skill.lower()).strip("-") or "skill")


@task(name="publish_live_verdict", cache_policy=NO_CACHE)
async def publish_live_verdict(verdict: LiveVerdict) -> bool:
    """The verdict as a Markdown artifact of the run (key ``live-verdict-<skill>``); outside a Prefect
    run there is nowhere to publish: ``False``."""
    if not in_prefect_run():
        return False
    from prefect.artifacts import acreate_markdown_artifact

    from skillreach._io.redact import redact_text
    from skillreach.live.verdict import verdict_markdown

    await acreate_markdown_artifact(
        markdown=redact_text(verdict_markdown(verdict)),
        key=_artifact_key(verdict.skill),
        description=f"Live drop of {verdict.skill}: {verdict.verdict}",
    )
    return True


@task(name="verdict_alert", cache_policy=NO_CACHE)
async def verdict_alert(verdict: LiveVerdict, out: Path, study_id: str | None = None) -> dict[str, Any]:
    """The verdict's alert payload; its link: the Prefect UI page of this run when there is one, else
    the frozen set's report."""
    from skillreach.live.verdict import verdict_payload

    link = (Path(out) / "report.html").resolve().as_uri()
    if in_prefect_run():
        from prefect.context import FlowRunContext
        from prefect.settings import get_current_settings

        ctx = FlowRunContext.get()
        ui = get_current_settings().ui_url
        if ctx is not None and ctx.flow_run is not None and ui:
            link = f"{str(ui).rstrip('/')}/runs/flow-run/{ctx.flow_run.id}"
    return verdict_payload(verdict, run_link=link, study_id=study_id)
