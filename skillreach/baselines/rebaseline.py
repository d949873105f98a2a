"""Gate before re-record: what the service does with a fresh study of every skill.

For each skill of the catalog, one status — ``ok``, ``inconclusive``, ``breach``, ``expired`` (its
stored baseline's pins no longer match), ``no baseline``, ``no queries`` (no positive query: it cannot
have a baseline) — or, after a model snapshot change, ``drift`` / ``ok`` from the paired differences
across the two snapshots (information, never a gate). Then which new records are written
(:func:`records_to_write`): a baseline only goes down when a person says so (``skillreach baseline
accept``). A breached *or inconclusive* skill's record waits as a *candidate*; a skill whose candidate
already waits keeps waiting across a model-snapshot or runtime-version change (its new record is a
candidate under the new pin, never the baseline). Only the gating study gates: a study whose runtime,
model or rubric judge is not the stored baselines' is *not compared* at all (:func:`not_compared`). Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillreach.baselines.gates import Advice, Comparison, Verdict, compare, gated_count
from skillreach.baselines.records import BaselineRecord
from skillreach.errors import RefusedError
from skillreach.settings import GateConfig

__all__ = [
    "HELD",
    "REVISION_LINE",
    "STATUSES",
    "SkillGate",
    "baseline_revision",
    "carry_record",
    "changed_since",
    "gate_report_markdown",
    "gate_skills",
    "not_compared",
    "records_to_write",
    "undecided",
]

STATUSES = ("ok", "inconclusive", "breach", "drift", "expired", "no baseline", "no queries")
HELD = ("breach", "inconclusive")
"""The gate's verdicts that keep a skill's new record waiting as a candidate: it would lower the bar."""


@dataclass(frozen=True)
class SkillGate:
    skill: str
    status: str
    new: BaselineRecord | None = None
    base: BaselineRecord | None = None
    comparison: Comparison | None = None
    reason: str = ""


def gate_skills(
    skills: Iterable[str],
    stored: Mapping[str, BaselineRecord | None],
    new: Mapping[str, BaselineRecord],
    gates: GateConfig,
    *,
    drift: bool = False,
) -> list[SkillGate]:
    """One :class:`SkillGate` per skill, in name order."""
    out: list[SkillGate] = []
    for skill in sorted(set(skills)):
        rec, base = new.get(skill), stored.get(skill)
        if rec is None:
            out.append(SkillGate(skill, "no queries", reason="no positive query names it; add queries"))
            continue
        if base is None:
            out.append(SkillGate(skill, "no baseline", rec))
            continue
        try:
            cmp = compare(base, rec, gates, drift=drift)
        except RefusedError as exc:
            out.append(SkillGate(skill, "expired", rec, base, reason=exc.message))
            continue
        status = cmp.verdict.value
        if drift:
            status = "drift" if status == "breach" else "ok"
        elif status == "n/a":
            status = "ok"
        out.append(SkillGate(skill, status, rec, base, cmp))
    return out


def records_to_write(
    results: Iterable[SkillGate], *, waiting: Collection[str] = (), drift: bool = False
) -> tuple[list[BaselineRecord], list[BaselineRecord]]:
    """(records to write, candidates). A skill is recorded only when nothing says its bar would go down:
    a breach or an inconclusive drop (:data:`HELD`) waits as a candidate for ``skillreach baseline
    accept``. A skill whose candidate already waits (``waiting``) keeps waiting when the pins moved — a
    model-snapshot change (``drift``) or an expired pin (a runtime version): its new record is a candidate
    under the new pin, never the baseline. A waiting skill whose gate says ok against its baseline is
    recorded (the drop did not hold), superseding the candidate."""
    records: list[BaselineRecord] = []
    candidates: list[BaselineRecord] = []
    for r in results:
        if r.new is None:
            continue
        held = r.status in HELD or (r.skill in waiting and (drift or r.status in ("expired", "drift")))
        (candidates if held else records).append(r.new)
    return records, candidates


def carry_record(
    record: BaselineRecord, new_name: str, query_set: Any, *, skill_path: str | None = None
) -> tuple[BaselineRecord, int]:
    """A renamed skill's baseline under its new name: ``record`` (of the old name) with ``skill`` and
    ``skill_path`` the new ones, and each case translated — a case of ``query_set`` (today's set) that is
    the recorded one with the old name read as the new (its expected and acceptable skills relabelled,
    nothing else) keeps its outcomes under today's digest, so the next gate pairs it; any other change
    leaves the recorded digest (not paired, as any edited case). Sealed again. Returns the record and how
    many cases were translated. The model, runtime, rubric and skill version pins stay the record's."""
    from skillreach.baselines.records import corpus_digest, seal_baseline

    old = record.skill
    by_id = {q.id: q for q in query_set.queries}
    per_case = {}
    moved = 0
    for qid, case in record.per_case.items():
        q = by_id.get(qid)
        kept = case
        if q is not None and case.digest is not None:
            back = q.model_copy(update={
                "expected_skill": old if q.expected_skill == new_name else q.expected_skill,
                "acceptable_skills": tuple(old if a == new_name else a for a in q.acceptable_skills),
            })
            if back.case_digest() == case.digest:
                kept = case.model_copy(update={"digest": q.case_digest()})
                moved += 1
        per_case[qid] = kept
    corpus = corpus_digest((k, c.digest) for k, c in per_case.items() if c.role == "positive")
    carried = record.model_copy(update={"skill": new_name, "skill_path": skill_path or record.skill_path,
                                        "per_case": per_case, "corpus_version": corpus, "digest": None})
    return seal_baseline(carried), moved


REVISION_LINE = "revision: "
"""How a re-baselining's commit message names the skills repository's commit it measured."""


def baseline_revision(top: Path, record: BaselineRecord, *, branch: str | None, folder: str) -> str | None:
    """The commit of the skills repository (at ``top``) that ``record`` measured: the ``revision:`` line of
    the commit that wrote it on ``branch`` (the service's re-baselinings say it); else the newest commit
    before the record was made whose tree holds the skill's folder exactly as the record pins it (a
    ``git:`` skill version). ``None`` when neither is found: no file can be named without a guess."""
    from skillreach.baselines.records import git_output

    path = f"{folder.rstrip('/')}/{record.skill}.json"
    if branch:
        body = git_output(["log", "-1", "--format=%B", f"refs/heads/{branch}", "--", path], top) or ""
        for line in body.splitlines():
            if line.startswith(REVISION_LINE):
                named = line[len(REVISION_LINE):].strip()
                sha = git_output(["rev-parse", "--verify", "-q", f"{named}^{{commit}}"], top)
                if sha:
                    return sha
    if record.skill_version_origin != "git" or not record.skill_path:
        return None
    tree = record.skill_version.removeprefix("git:")
    listed = git_output(["rev-list", "-50", f"--before={record.created_at}", "HEAD"], top) or ""
    for sha in listed.split():
        if git_output(["rev-parse", "-q", "--verify", f"{sha}:{record.skill_path}"], top) == tree:
            return sha
    return None


def changed_since(top: Path, revision: str, folders: Mapping[str, str]) -> list[str]:
    """The skills (name → folder, relative to ``top``) whose folder differs now — committed or not, a file
    added, edited or removed, or the whole folder new — from ``revision``."""
    from skillreach.baselines.records import git_output

    out = []
    for name, folder in folders.items():
        diff = git_output(["diff", "--name-only", revision, "--", folder], top)
        untracked = git_output(["ls-files", "--others", "--exclude-standard", "--", folder], top)
        if diff or untracked:
            out.append(name)
    return out


_PINS: tuple[tuple[str, Callable[[BaselineRecord], str | None]], ...] = (
    ("runtime", lambda r: r.runtime.name),
    ("model", lambda r: r.model),
    ("rubric", lambda r: r.judge_model),
)


def not_compared(
    stored: Iterable[BaselineRecord | None], new: Iterable[BaselineRecord], *, drift: bool = False
) -> str | None:
    """Why a study is not the gating study, or ``None`` when it is: its runtime, its model (except across
    a model-snapshot change, ``drift``) and its rubric judge (when both sides have one) must be among the
    stored baselines'. ``"different runtime: baselines keyword, this study fake"``. With no stored
    baseline or no new record there is nothing to tell apart (``None``)."""
    base = [b for b in stored if b is not None]
    fresh = list(new)
    if not base or not fresh:
        return None
    for what, pin in _PINS:
        if what == "model" and drift:
            continue
        have = sorted({v for v in map(pin, base) if v})
        got = sorted({v for v in map(pin, fresh) if v})
        if have and got and not set(got) <= set(have):
            return f"different {what}: baselines {', '.join(have)}, this study {', '.join(got)}"
    return None


def _decide(advice: Advice | None) -> str:
    """The gate's advice in units a team controls (cases to add, or attempts per case)."""
    return "more cases would decide it" if advice is None else advice.sentence()


def undecided(comparison: Comparison) -> str:
    """Each inconclusive metric of a comparison: its paired change, interval, gate, and how many cases
    (or runs per case) would decide it — the gate's power advice."""
    parts = []
    for g in comparison.results:
        if g.verdict is not Verdict.inconclusive:
            continue
        d = g.mean_diff or 0.0
        lo, hi = g.ci95 or (d, d)
        cohort = "" if g.cohort == "paired" else " (new cases)"
        parts.append(f"{g.metric}{cohort} changed {d:+.3f} (95% CI {lo:+.3f} to {hi:+.3f}; "
                     f"gate {g.gate:+.3f}): {_decide(g.advice)}")
    return "; ".join(parts)


def _fmt(x: Any) -> str:
    return "–" if x is None else f"{x:+.3f}" if isinstance(x, float) else str(x)


def gate_report_markdown(
    outcome_rows: list[dict[str, Any]], skipped: list[str], study_id: str,
    statuses: dict[str, str] | None = None, *, drift: bool = False, not_compared: str | None = None,
    kept_waiting: Iterable[str] = (), first: bool = False,
) -> str:
    """The gate (or drift) report. ``not_compared``: why this study is not the gating one (said once, and
    nothing else); ``kept_waiting``: skills whose candidate keeps waiting under the new pin; ``first``: no
    baseline at all yet, re-baselining every skill."""
    title = "Drift report" if drift else "Gate report"
    lines = [f"# {title} — study `{study_id}`", ""]
    if not_compared:
        lines.append(f"Not compared: {not_compared}. Only the service's gating study (the stored baselines' "
                     "runtime, model and rubric judge) gates: nothing was gated, no alert was sent and no "
                     "baseline is re-recorded.")
        return "\n".join(lines) + "\n"
    if first:
        lines += ["No baselines yet: re-baselining every skill (`rebaseline-all`).", ""]
    if statuses:
        counts = {s: sum(1 for v in statuses.values() if v == s) for s in dict.fromkeys(statuses.values())}
        summary = ", ".join(f"{n} {s}" for s, n in counts.items())
        lines.append(f"**{summary}** over {len(statuses)} skills.")
        lines += ["", "| skill | status |", "|---|---|",
                  *[f"| {k} | {v} |" for k, v in sorted(statuses.items())], ""]
    waiting = sorted(kept_waiting)
    if waiting:
        lines += [f"Candidates kept waiting under the new pin (a model or runtime change never promotes one; "
                  f"`skillreach baseline accept NAME` decides): {', '.join(waiting)}.", ""]
    if not outcome_rows and not skipped:
        if not statuses:
            lines.append("No stored baseline matches this study: nothing was gated. Record baselines with "
                         "the `rebaseline-all` deployment or `skillreach baseline record`.")
        return "\n".join(lines) + "\n"
    breaches = sum(1 for r in outcome_rows if r["verdict"] == "breach")
    plural = "es" if breaches != 1 else ""
    what = "moved past their gate" if drift else f"breach{plural}"
    how = "compared" if drift else "gated"
    counted = gated_count(r["verdict"] for r in outcome_rows)
    listed = len(outcome_rows) - counted
    lines.append(f"**{breaches} {what}** over {counted} {how} metric{'s' if counted != 1 else ''}"
                 + (f" ({listed} with nothing to compare)." if listed else "."))
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
