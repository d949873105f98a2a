"""The Skills table, a skill's page and the Decisions page: their views, from the store's points, the
baselines in git and the live shares — each figure computed by the function the commands call."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from skillreach.errors import SkillreachError
from skillreach.models import NO_SKILL
from skillreach.store.dashboard import (
    alerts_of,
    index_progress,
    latest_points,
    skill_points,
    skill_runtimes,
    store_skills,
)
from skillreach.ui.charts import Chart, history_chart, series_chart, time_span
from skillreach.ui.context import UiContext, when
from skillreach.ui.history import (
    METRIC_TITLES,
    METRICS,
    HistoryPoint,
    Pins,
    Segment,
    markers_for,
    point_of,
    segments,
)
from skillreach.ui.sources import WEEKS

__all__ = ["decisions_view", "skill_view", "skills_view"]

PRIORITY = {"breach": 0, "candidate": 1, "inconclusive": 2, "live": 3, "no bar": 4, "drift": 5}
"""What needs a person first (the Skills table's order)."""


@dataclass(frozen=True)
class Verdict:
    kind: str
    text: str
    detail: str = ""
    """Where it was said (a study, a record), shown small."""
    href: str | None = None


@dataclass(frozen=True)
class Figure:
    value: float | None
    ci: tuple[float, float] | None


@dataclass(frozen=True)
class Bar:
    record: Any
    where: str
    pins: Pins

    @property
    def activation(self) -> Figure:
        return figure(self.record.metrics.get("activation"))


@dataclass
class SkillRow:
    name: str
    bar: Bar | None = None
    latest: HistoryPoint | None = None
    nightly: HistoryPoint | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    live: Any | None = None
    priority: int = 9


def figure(m: Any) -> Figure:
    """A record's metric (a model or its JSON) as (value, interval)."""
    if m is None:
        return Figure(None, None)
    value = m.get("value") if isinstance(m, dict) else m.value
    ci = m.get("ci95") if isinstance(m, dict) else m.ci95
    return Figure(value, (float(ci[0]), float(ci[1])) if ci else None)


def pins_of_record(rec: Any) -> Pins:
    return Pins(model=rec.model, corpus=rec.corpus_version, rubric=rec.rubric_version,
                runtime=rec.runtime.name, runtime_version=rec.runtime.version)


def _lost_line(p: HistoryPoint) -> str:
    """What a point's record says of the cases it missed: ``missed 3 of 8 probes on 2 cases (x ×3)``."""
    if not p.lost:
        return ""
    missed = sum(int(c[1]) for c in p.lost)
    probes = sum(int(c[2]) for c in p.lost)
    takers: Counter[str] = Counter()
    for c in p.lost:
        takers.update({str(k): int(v) for k, v in dict(c[3]).items()})
    who = ", ".join(f"{k} ×{v}" for k, v in takers.most_common(3))
    line = f"missed {missed} of {probes} probes on {len(p.lost)} case(s)"
    return line + (f", taken by {who}" if who else "")


def _cause(ctx: UiContext, skill: str, p: HistoryPoint) -> str:
    """Why the study's gate said what it said of the skill: the alert it sent (its metric and cause, as
    the service worded them), else what the record says of the cases it missed."""
    for a in alerts_of(ctx.store, skill=skill, study_id=p.study_id, limit=10):
        payload = a.payload or {}
        text = payload.get("cause_detail") or payload.get("message")
        if text:
            return f"{a.metric}: {text}" if a.metric else str(text)
    return _lost_line(p)


def _candidate_cause(ctx: UiContext, bar: Any, cand: Any) -> str:
    """``lost 4 of 6 cases to X`` (:func:`skillreach.baselines.scope.losses`, as the service's alert words
    it), from the candidate's study's probes when its artifact is still there."""
    from skillreach.baselines.scope import losses

    art = ctx.sources.artifact_by_digest(cand.artifact_digest)
    try:
        loss = losses(bar, cand, art.outcomes if art is not None else ())
    except (KeyError, ValueError, TypeError):
        return ""
    return loss.sentence() if loss.lost else "no case fell"


def skill_rows(ctx: UiContext, only: str | None = None) -> list[SkillRow]:
    """One row per skill (a bar, a point, a candidate or live usage), sorted by what needs a person."""
    bars = ctx.sources.baselines.bars()
    waiting = ctx.sources.baselines.candidates()
    known = store_skills(ctx.store) if only is None else [only]
    latest = latest_points(ctx.store, skills=known)
    nightly = latest_points(ctx.store, kinds=["compliance"], skills=known)
    gated = latest_points(ctx.store, skills=known, gated=True)
    live = ctx.sources.live()
    names = {only} if only is not None else (
        set(bars) | set(waiting) | set(known) | set(ctx.sources.catalog()))
    rows: list[SkillRow] = []
    for name in sorted(names):
        row = SkillRow(name)
        if name in bars:
            rec, where = bars[name]
            row.bar = Bar(rec, where, pins_of_record(rec))
        row.latest = point_of(latest[name]) if name in latest else None
        row.nightly = point_of(nightly[name]) if name in nightly else None
        g = point_of(gated[name]) if name in gated else None
        if g is not None and g.verdict in ("breach", "inconclusive", "drift"):
            row.verdicts.append(Verdict(g.verdict, _cause(ctx, name, g) or f"{g.verdict} at the last gate",
                                        f"{g.kind} {g.study_id}, {when(g.at)}", f"/runs/{g.study_id}"))
        if name in waiting:
            cand, where = waiting[name]
            cause = _candidate_cause(ctx, row.bar.record, cand) if row.bar is not None else ""
            said = f"waits for a decision: {cause}" if cause else "waits for a decision"
            row.verdicts.append(Verdict("candidate", said, f"{cand.baseline_id} on {where}", "/decisions"))
        if name in live.drops:
            row.verdicts.append(Verdict("live", live.drops[name].sentence()))
        if row.bar is None and name not in waiting:
            row.verdicts.append(Verdict("no bar", "no baseline recorded" if row.latest is not None else
                                        "not measured yet: no query expects it"))
        row.live = live.shares.get(name)
        row.priority = min([PRIORITY.get(v.kind, 8) for v in row.verdicts], default=9)
        rows.append(row)
    return sorted(rows, key=lambda r: (r.priority, r.name))


def skills_view(ctx: UiContext) -> dict[str, Any]:
    read, total = index_progress(ctx.store)
    rows = skill_rows(ctx)
    live = ctx.sources.live()
    return {"rows": rows, "read": read, "total": total, "live": live,
            "needs": sum(1 for r in rows if r.priority < 9), "title": "Skills"}


# ------------------------------------------------------------------------------------------ a skill


def _confusion(ctx: UiContext, point: HistoryPoint | None, name: str) -> tuple[list[Any], list[Any]]:
    """(taken from the skill by, taken by the skill from) the latest study's confusion cells."""
    if point is None:
        return [], []
    row = ctx.store.latest_artifact(point.study_id)
    cells = (row.body or {}).get("confusion") or [] if row is not None else []
    lost_to = sorted(((c["predicted"], c["count"]) for c in cells
                      if c.get("expected") == name and c.get("predicted") != name), key=lambda x: -x[1])
    took = sorted(((c["expected"], c["count"]) for c in cells
                   if c.get("predicted") == name and c.get("expected") != name), key=lambda x: -x[1])
    return lost_to[:20], took[:20]


def _lost_cases(ctx: UiContext, point: HistoryPoint | None) -> list[dict[str, Any]]:
    if point is None or not point.lost:
        return []
    study = ctx.store.get_study(point.study_id)
    texts = ctx.sources.run_folder(study.out_dir).queries if study is not None else {}
    out = []
    for case, missed, probes, takers in point.lost[:100]:
        q = texts.get(case)
        out.append({"case": case, "text": q.text if q is not None else None, "missed": missed,
                    "probes": probes, "takers": sorted(dict(takers).items(), key=lambda kv: -kv[1])})
    return out


def _live_series(ctx: UiContext, name: str) -> list[tuple[datetime, float | None, str]]:
    """The skill's weekly live share (``skillreach usage --by week``), as last read."""
    report = ctx.sources.weekly()
    if report is None:
        return []
    shares = report.share_series(name)
    totals = {t.period: t.prompts for t in report.totals}
    out = []
    for period, share in zip(report.periods, shares, strict=True):
        at = datetime(period.year, period.month, period.day, tzinfo=UTC)
        label = f"week of {period:%Y-%m-%d}: " + ("no prompt" if share is None else
                                                   f"{share:.1%} of {totals.get(period, 0)} prompts")
        out.append((at, share, label))
    return out


def skill_view(ctx: UiContext, name: str, runtime: str | None = None) -> dict[str, Any]:
    """A skill's page; the history of one runtime at a time (``runtime``; default: the bar's, else the
    one that measured it last): two agents measure two things, never one series."""
    from skillreach.errors import NotFoundError

    rows = skill_rows(ctx, only=name)
    row = rows[0]
    runtimes = skill_runtimes(ctx.store, name)
    known_rt = [r for r, _, _ in runtimes]
    if runtime not in known_rt:
        bar_rt = row.bar.pins.runtime if row.bar is not None else None
        runtime = bar_rt if bar_rt in known_rt else (known_rt[0] if known_rt else None)
    points = [point_of(p) for p in skill_points(ctx.store, name, runtime=runtime)] if runtime else []
    known = name in ctx.sources.catalog() or name in ctx.sources.baselines.candidates()
    if not points and row.bar is None and row.live is None and not known:
        raise NotFoundError(f"skill {name!r}: no study measured it and no baseline names it")
    segs: list[Segment] = segments(points)
    markers = markers_for(name, ctx.sources.catalog_changes())
    times = [p.at for p in points] or [m.at for m in markers] or [datetime.now(UTC)]
    span = time_span(times)
    bar = None
    if row.bar is not None:
        rec = row.bar.record
    charts: list[Chart] = []
    for metric in METRICS:
        if row.bar is not None:
            f = figure(rec.metrics.get(metric))
            bar = (row.bar.pins, f.value, f.ci, f"bar {rec.baseline_id}") if f.value is not None else None
        charts.append(history_chart(metric, METRIC_TITLES[metric], segs, span=span, markers=markers, bar=bar))
    now = datetime.now(UTC)
    recent = [t for t in times if t >= now - timedelta(weeks=WEEKS)]
    series = [p for p in _live_series(ctx, name) if p[1] is not None]
    live_span = time_span(recent + [p[0] for p in series] or [now])  # where either has something to show
    series = [p for p in _live_series(ctx, name) if live_span[0] <= p[0] <= live_span[1]]
    share = series_chart("live_share", "Live activation share (per week)", series, span=live_span,
                         markers=markers)
    frozen = history_chart("activation", "Frozen set: activation", segs, span=live_span, markers=markers)
    latest = points[-1] if points else None
    lost_to, took = _confusion(ctx, latest, name)
    return {
        "title": name, "row": row, "segments": segs, "charts": charts, "share": share, "frozen": frozen,
        "markers": markers, "latest": latest, "lost_to": lost_to, "took": took,
        "lost_cases": _lost_cases(ctx, latest), "alerts": alerts_of(ctx.store, skill=name, limit=20),
        "no_skill": NO_SKILL, "points": len(points), "runtime": runtime, "runtimes": runtimes,
    }


# ------------------------------------------------------------------------------------------ decisions


@dataclass(frozen=True)
class MetricRow:
    metric: str
    bar: Figure
    candidate: Figure
    delta: float | None
    ci: tuple[float, float] | None
    gate: float | None
    verdict: str


@dataclass
class Candidate:
    skill: str
    record: Any
    where: str
    bar: Bar | None
    rows: list[MetricRow]
    verdict: str
    cause: str
    warnings: list[str]


def _candidate(ctx: UiContext, skill: str, cand: Any, where: str, bar: Bar | None) -> Candidate:
    from skillreach.baselines.gates import compare

    rows: list[MetricRow] = []
    verdict, warnings = "no bar to compare with", []
    if bar is not None:
        try:
            cmp = compare(bar.record, cand, ctx.settings.gates, False)
        except SkillreachError as exc:
            verdict = f"not compared: {exc.message}"
            cmp = None
        if cmp is not None:
            verdict, warnings = str(cmp.verdict), list(cmp.warnings)
            results = {r.metric: r for r in cmp.results if r.cohort == "paired"}
            for m in METRICS:
                r = results.get(m)
                rows.append(MetricRow(m, figure(bar.record.metrics.get(m)), figure(cand.metrics.get(m)),
                                      r.mean_diff if r else None,
                                      (r.ci95[0], r.ci95[1]) if r and r.ci95 else None,
                                      r.gate if r else None, str(r.verdict) if r else "n/a"))
    if not rows:
        rows = [MetricRow(m, Figure(None, None), figure(cand.metrics.get(m)), None, None, None, "n/a")
                for m in METRICS]
    cause = _candidate_cause(ctx, bar.record, cand) if bar is not None else ""
    return Candidate(skill, cand, where, bar, rows, verdict, cause, warnings)


def decisions_view(ctx: UiContext) -> dict[str, Any]:
    bars = ctx.sources.baselines.bars()
    out = []
    for skill, (cand, where) in sorted(ctx.sources.baselines.candidates().items()):
        bar = Bar(bars[skill][0], bars[skill][1], pins_of_record(bars[skill][0])) if skill in bars else None
        out.append(_candidate(ctx, skill, cand, where, bar))
    repo = ctx.sources.baselines.repo
    return {"title": "Decisions", "candidates": out, "in_git": repo is not None,
            "baselines": str(ctx.sources.baselines.folder), "branch": ctx.sources.baselines.branch_name}
