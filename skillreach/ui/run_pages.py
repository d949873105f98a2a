"""Runs (the list with its filters), a run's page (``skillreach report``'s page with the gate, and its
probes), a probe's trajectory, two runs compared (``skillreach diff``) and the agents' matrix
(``skillreach run --runtime a,b,…``): their views, each figure from the function the command calls."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from skillreach.errors import InputError, NotFoundError, SkillreachError
from skillreach.store.dashboard import (
    StudyFilter,
    agent_folders,
    alerts_of,
    probe_page,
    probe_row,
    studies_in,
    studies_page,
    study_alert_counts,
    study_kinds,
)
from skillreach.ui.context import DEPLOYMENTS, UiContext, embed_report, when

__all__ = ["PAGE", "agents_view", "compare_view", "probe_view", "run_view", "runs_view"]

PAGE = 50
"""Rows a list shows at a time."""
VERDICTS = ("breached", "ok", "running", "failed", "crashed")
FILTERS = ("deployment", "verdict", "runtime", "since", "until")


def _day(text: str | None, name: str) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.combine(date.fromisoformat(text), time(0), tzinfo=UTC)
    except ValueError:
        raise InputError(f"{name}={text[:40]!r}: not a date; write YYYY-MM-DD") from None


def _offset(text: str | None) -> int:
    try:
        n = int(text or 0)
    except ValueError:
        raise InputError(f"offset={str(text)[:20]!r}: not a number") from None
    return max(0, min(n, 10**9))


@dataclass(frozen=True)
class RunRow:
    study: Any
    deployment: str
    verdict: str
    breaches: int
    alerts: int

    @property
    def folder(self) -> str:
        """The study folder's last two parts (``runs/study-fake-…``)."""
        parts = Path(self.study.out_dir).parts
        return "/".join(parts[-2:])


def verdict_of(row: Any, breaches: int) -> str:
    """As ``skillreach status`` says it: breached or ok when done, else the study's status."""
    return ("breached" if breaches else "ok") if row.status == "done" else row.status


def runs_view(ctx: UiContext, params: dict[str, str]) -> dict[str, Any]:
    deployment = params.get("deployment") or ""
    kinds = {v: k for k, v in DEPLOYMENTS.items()}
    kind = kinds.get(deployment, deployment) or params.get("kind") or None
    verdict = params.get("verdict") or None
    if verdict is not None and verdict not in VERDICTS:
        raise InputError(f"verdict={verdict[:40]!r}: one of {', '.join(VERDICTS)}")
    until = _day(params.get("until"), "until")
    f = StudyFilter(kind=kind, verdict=verdict, runtime=params.get("runtime") or None,
                    since=_day(params.get("since"), "since"),
                    until=until + timedelta(days=1) if until is not None else None)
    offset = _offset(params.get("offset"))
    rows, total = studies_page(ctx.store, f, offset=offset, limit=PAGE)
    counts = study_alert_counts(ctx.store, [r.id for r in rows])
    out = []
    for r in rows:
        b, n = counts.get(r.id, (0, 0))
        out.append(RunRow(r, DEPLOYMENTS.get(r.kind, r.kind), verdict_of(r, b), b, n))
    keep = {k: v for k, v in params.items() if k in FILTERS and v}
    return {"title": "Runs", "rows": out, "total": total, "offset": offset, "page": PAGE, "filters": keep,
            "deployments": [*DEPLOYMENTS.values(),
                            *(k for k in study_kinds(ctx.store) if k not in DEPLOYMENTS)],
            "verdicts": VERDICTS,
            "prev": max(0, offset - PAGE) if offset else None,
            "next": offset + PAGE if offset + PAGE < total else None}


# --------------------------------------------------------------------------------------------- a run


def _study(ctx: UiContext, study_id: str) -> Any:
    row = ctx.store.get_study(study_id)
    if row is None:
        raise NotFoundError(f"study {study_id[:80]!r}: not in the store; see the runs list")
    return row


def _report(folder: Any) -> tuple[str, str] | None:
    """``skillreach report DIR``'s page (with the gate and the skills' uplift), scoped for embedding."""
    from skillreach.reports.html import render_html
    from skillreach.reports.uplift_file import read_uplift_reports

    if folder.artifact is None:
        return None
    gate, not_compared = folder.gate or (None, [])
    try:
        uplift = read_uplift_reports(folder.path, folder.artifact.queries_digest)
    except SkillreachError:
        uplift = []
    return embed_report(render_html(folder.artifact, gate=gate, not_compared=not_compared, uplift=uplift))


def _gate_rows(folder: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The study's gate (``gate.json``), one row per skill compared: its verdict and each metric's paired
    difference — the report's gate section, in short, at the top of the page."""
    if folder.gate is None:
        return [], []
    comparisons, not_compared = folder.gate
    rows = []
    for c in comparisons:
        if not isinstance(c, dict):
            continue
        results = [r for r in c.get("results") or []
                   if isinstance(r, dict) and r.get("cohort", "paired") == "paired"]
        seen = {str(r.get("verdict")) for r in results}
        worst = next((v for v in ("breach", "drift", "inconclusive") if v in seen), None)
        verdict = worst or str(c.get("verdict") or "")
        rows.append({"skill": c.get("skill"), "verdict": verdict, "base": c.get("base_id"),
                     "metrics": [(r.get("metric"), r.get("mean_diff"), r.get("ci95"), str(r.get("verdict")))
                                 for r in results]})
    order = {"breach": 0, "drift": 1, "inconclusive": 2}
    return sorted(rows, key=lambda r: (order.get(r["verdict"], 3), str(r["skill"]))), list(not_compared)


def run_view(ctx: UiContext, study_id: str, params: dict[str, str]) -> dict[str, Any]:
    row = _study(ctx, study_id)
    folder = ctx.sources.run_folder(row.out_dir)
    offset = _offset(params.get("offset"))
    probes, total = probe_page(ctx.store, study_id, offset=offset, limit=PAGE)
    counts = study_alert_counts(ctx.store, [study_id]).get(study_id, (0, 0))
    flow = (f"{ctx.prefect_ui.rstrip('/')}/runs/flow-run/{row.flow_run_id}"
            if ctx.prefect_ui and row.flow_run_id else None)
    shown = []
    for p in probes:
        rec = p.record or {}
        usage = rec.get("usage") or {}
        tokens = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                      "cache_read_input_tokens", "output_tokens"))
        shown.append({"query_id": p.query_id, "attempt": p.attempt, "invoked": rec.get("invoked") or [],
                      "turns": rec.get("turns"), "tokens": tokens, "cost": p.cost_usd, "error": p.error})
    gate, not_compared = _gate_rows(folder)
    return {"title": f"Run {study_id}", "study": row, "folder": folder, "report": _report(folder),
            "gate": gate, "not_compared": not_compared,
            "deployment": DEPLOYMENTS.get(row.kind, row.kind), "verdict": verdict_of(row, counts[0]),
            "alerts": alerts_of(ctx.store, study_id=study_id, limit=50), "probes": shown, "total": total,
            "offset": offset, "page": PAGE, "flow": flow,
            "prev": max(0, offset - PAGE) if offset else None,
            "next": offset + PAGE if offset + PAGE < total else None}


# ------------------------------------------------------------------------------------------- a probe


@dataclass(frozen=True)
class Check:
    what: str
    passed: bool | None
    detail: str = ""


def _checks(query: Any, record: Any) -> tuple[Any, list[Check]]:
    """The probe's judgement (:func:`skillreach.queries.compliance.evaluate_probe`, as scoring judges it)
    and each check of its case, passed or not, by the same matchers."""
    from skillreach.queries.compliance import assertion_score, evaluate_probe, matches

    judgement = evaluate_probe(query, record)
    checks = query.checks
    out: list[Check] = []
    if checks is None:
        return judgement, out
    judged = judgement.compliance is not None
    for p in checks.requires:
        hit = [i for i, c in enumerate(record.tool_calls, 1) if matches(p, c)]
        out.append(Check(f"requires {p.tool} /{p.pattern}/", bool(hit) if judged else None,
                         f"call #{hit[0]}" if hit else ""))
    for p in checks.forbids:
        hit = [i for i, c in enumerate(record.tool_calls, 1) if matches(p, c)]
        out.append(Check(f"forbids {p.tool} /{p.pattern}/", (not hit) if judged else None,
                         ("calls " + ", ".join(f"#{i}" for i in hit)) if hit else ""))
    text = record.final_text
    for o in checks.output:
        what = ("contains " + repr(o.contains) if o.contains is not None else
                "does not contain " + repr(o.not_contains) if o.not_contains is not None else
                "matches /" + str(o.regex) + "/")
        passed = None if text is None or judgement.quality is None else assertion_score([o], text)[0] == 1
        out.append(Check(f"answer {what}", passed))
    if checks.rubric:
        grade = record.rubric_grade
        out.append(Check("rubric", None if grade is None else grade >= 0.5,
                         "not graded" if grade is None else f"grade {grade:.2f}"))
    return judgement, out


def _listing(artifact: Any, record: Any) -> dict[str, Any]:
    """What the agent was shown: the catalog as that agent lists it (``skillreach listing --agent``)."""
    from skillreach.models import Skill
    from skillreach.skills.agent_listing import AGENTS, listing_for

    desc = dict(artifact.catalog.descriptions) if artifact is not None else {}
    names = list(record.retrieved) if record.retrieved is not None else sorted(desc)
    skills = [Skill(name=n, description=desc.get(n, "")) for n in names]
    agent = record.runtime or (artifact.runtime.name if artifact is not None else "")
    if agent in AGENTS:
        listing = listing_for(agent, skills, model=record.resolved_model or record.model)
        return {"agent": agent, "summary": listing.summary(), "lines": list(listing.lines),
                "dropped": listing.dropped, "as_agent": True}
    lines = [f"- {s.name}: {s.description}" for s in skills]
    note = (f"{agent} is given the catalog in full (name and description)"
            + (f"; the retriever pre-selected {len(names)} skills" if record.retrieved is not None else ""))
    return {"agent": agent, "summary": note, "lines": lines, "dropped": [], "as_agent": False}


def probe_view(ctx: UiContext, study_id: str, query_id: str, attempt: int) -> dict[str, Any]:
    from skillreach.models import ProbeRecord
    from skillreach.study.probe_log import read_probes

    row = _study(ctx, study_id)
    folder = ctx.sources.run_folder(row.out_dir)
    stored = probe_row(ctx.store, study_id, query_id, attempt)
    record = None
    if stored is not None:
        record = ProbeRecord.model_validate(stored.record)
    else:
        log = Path(row.out_dir) / "probes.jsonl"
        found = [r for r in read_probes(log, missing_ok=True)
                 if r.query_id == query_id and r.attempt == attempt] if log.is_file() else []
        record = found[-1] if found else None
    if record is None:
        raise NotFoundError(f"probe {query_id[:80]!r} attempt {attempt} of study {study_id}: not recorded")
    query = folder.queries.get(query_id)
    judgement, checks = _checks(query, record) if query is not None else (None, [])
    expected = query.expected_skill if query is not None else None
    steps = [{"n": i, "skill": s, "expected": s == expected,
              "acceptable": query is not None and s in query.acceptable_skills}
             for i, s in enumerate(record.invoked, 1)]
    calls = [{"tool": c.tool, "input": json.dumps(c.input, indent=2, ensure_ascii=False, sort_keys=True)}
             for c in record.tool_calls]
    return {"title": f"Probe {query_id} #{attempt}", "study": row, "record": record, "query": query,
            "steps": steps, "calls": calls, "judgement": judgement, "checks": checks,
            "listing": _listing(folder.artifact, record), "usage": record.usage}


# ------------------------------------------------------------------------------------------ compare


def compare_view(ctx: UiContext, params: dict[str, str]) -> dict[str, Any]:
    from skillreach.author.diff import diff_arms, load_arm, query_texts
    from skillreach.reports.diff import render_diff_html

    a_id, b_id = params.get("a") or "", params.get("b") or ""
    if not a_id or not b_id:
        raise InputError("pick two runs to compare (A and B) on the runs page")
    a_row, b_row = _study(ctx, a_id), _study(ctx, b_id)
    force = params.get("force") == "1"
    base = {"title": "Compare", "a": a_row, "b": b_row, "force": force, "refused": None, "report": None}
    try:
        arm_a, arm_b = load_arm(Path(a_row.out_dir), "A"), load_arm(Path(b_row.out_dir), "B")
        texts = query_texts(None, arm_a.artifact.queries_digest, arm_a)
        result = diff_arms(arm_a, arm_b, force=force, texts=texts)
    except SkillreachError as exc:
        return {**base, "refused": exc.message, "exit": exc.exit_code}
    return {**base, "result": result, "report": embed_report(render_diff_html(result))}


# ------------------------------------------------------------------------------------------- agents


def agents_view(ctx: UiContext) -> dict[str, Any]:
    """The matrix of the newest ``skillreach run --runtime a,b,…``: the folder holding ``agents.html``
    beside one study folder per agent."""
    from skillreach.author.agents import agent_matrix
    from skillreach.author.diff import load_arm
    from skillreach.reports.agents import render_agent_matrix_html

    for out_dir in agent_folders(ctx.store):
        base = Path(out_dir).parent
        if not (base / "agents.html").is_file():
            continue
        names = sorted(p.name for p in base.iterdir() if (p / "artifact.json").is_file())
        stamps = tuple((n, (base / n / "artifact.json").stat().st_mtime_ns) for n in names)
        key = ("agents", str(base), stamps)

        def make(base: Path = base, names: list[str] = names) -> Any:
            return agent_matrix([load_arm(base / n, n) for n in names])

        try:
            matrix = ctx.sources.memo.get(key, make)
        except SkillreachError as exc:
            return {"title": "Agents", "folder": base, "problem": exc.message, "report": None, "runs": []}
        studies = {Path(r.out_dir).name: r for r in studies_in(ctx.store, [str(base / n) for n in names])}
        newest = max((r.created_at for r in studies.values()), default=None)
        return {"title": "Agents", "folder": base, "problem": None, "matrix": matrix,
                "report": embed_report(render_agent_matrix_html(matrix)), "when": when(newest),
                "runs": [(n, studies.get(n)) for n in names]}
    return {"title": "Agents", "folder": None, "problem": None, "report": None, "runs": []}
