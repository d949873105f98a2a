"""``skillreach check --changed``: the merge gate. What a change can affect is re-probed and gated
against the baseline records of the base revision (see :mod:`skillreach.baselines.scope`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from skillreach._io.console import make_console, strip_control
from skillreach.cli.baseline_cmds import (
    _corpus_path,
    _find_skill_folder,
    _gates,
    _read_artifact_any,
    _record_expiry,
)

if TYPE_CHECKING:
    from skillreach.baselines.records import BaselineRecord
    from skillreach.study import StudyConfig

__all__ = ["register"]


def _adaptive(
    cfg: Any,
    members: list[tuple[str, BaselineRecord]],
    art: Any,
    qpath: Path,
    gates: Any,
    *,
    strict: bool,
    dirs: list[Path],
    budget: int,
    console: Any,
    in_process: bool,
) -> Any:
    """``check --adaptive``: while a member's gate is undecided, double the attempts per case (the study
    folder keeps the probes it has and probes only the attempts it adds), until every gate is decided or
    the next stage would pass ``budget`` probes in all. Returns the last stage's artifact."""
    from skillreach.baselines.gates import Verdict, compare
    from skillreach.baselines.records import record_baseline
    from skillreach.errors import RefusedError

    def undecided() -> list[str]:
        out = []
        for name, rec in members:
            new = record_baseline(art, qpath, name, skill_folder=_find_skill_folder(name, dirs),
                                  judge_model=rec.judge_model)
            try:
                cmp = compare(rec, new, gates, strict)
            except RefusedError:
                continue
            if any(g.verdict is Verdict.inconclusive for g in cmp.results):
                out.append(name)
        return out

    queries = len(art.outcomes) // max(1, cfg.attempts)
    spent = len(art.outcomes)
    waiting = undecided()
    while waiting:
        more = cfg.attempts
        if spent + queries * more > budget:
            console.print(
                f"adaptive: still undecided: {', '.join(waiting)}; the next stage ({queries * more} probes, "
                f"{cfg.attempts + more} attempts per case) would pass --max-probes {budget} ({spent} spent)",
                markup=False, highlight=False,
            )
            break
        cfg = cfg.model_copy(update={"attempts": cfg.attempts + more})
        console.print(
            f"adaptive: {', '.join(waiting)} undecided: {cfg.attempts} attempts per case "
            f"(+{queries * more} probes, {spent + queries * more} of {budget})",
            markup=False, highlight=False,
        )
        art = _run_study(cfg, members[0][1].judge_model, in_process, fresh=False)
        spent += queries * more
        waiting = undecided()
    return art


def _neighbourhood_file(qpath: Path, members: list[str], out: Path | None) -> Path:
    """The query set ``--scope neighbours`` probes (:func:`~skillreach.baselines.scope.neighbourhood_cases`),
    written beside the check's study folder."""
    from skillreach.baselines.scope import neighbourhood_cases
    from skillreach.queries.sets import load_query_set, write_query_set

    folder = (out or Path(".skillreach") / "check").with_name((out or Path("check")).name + "-scope")
    return write_query_set(neighbourhood_cases(load_query_set(qpath), members), folder / "queries.json")


def _victim_line(name: str, cmp: Any, loss: Any) -> str | None:
    """``algorithmic-art: activation 0.500 → 0.000 (lost 2 of 2 cases to canvas-design) — breach`` when
    the skill's activation fell past its gate (breach or inconclusive), else ``None``."""
    from skillreach.reports.gates import fmt_value

    drop = next(
        (
            r
            for r in cmp.results
            if r.metric == "activation" and r.verdict.value in ("breach", "inconclusive")
        ),
        None,
    )
    if drop is None:
        return None
    return (
        f"{name}: activation {fmt_value(drop.base)} → {fmt_value(drop.new)} ({loss.sentence()}) — "
        f"{drop.verdict.value}"
    )


def _run_study(cfg: StudyConfig, judge_model: str | None, in_process: bool, *, fresh: bool = True) -> Any:
    """One study of ``check``, by the study flow (tracked by Prefect when a server answers and
    ``in_process`` is off). A check probes afresh: the folder's earlier probes and grades are dropped
    (``fresh=False``: an adaptive stage keeps them and probes only the attempts it adds)."""
    from skillreach.cli.run_cmds import run_study
    from skillreach.study.grading import GRADED_FILE

    out = cfg.out or Path(".skillreach") / "check"
    from skillreach._io.paths import ensure_folder

    ensure_folder(out, flag="--out")
    cfg = cfg.model_copy(update={"out": out, "judge_model": judge_model or cfg.judge_model})
    for stale in ("probes.jsonl", GRADED_FILE) if fresh else ():
        (out / stale).unlink(missing_ok=True)
    result = run_study(cfg, use_prefect=False if in_process else None, kind="check")
    return result.artifact if result.artifact is not None else _read_artifact_any(result.artifact_path)


def _annotate(level: str, file: str | None, title: str, message: str) -> str:
    """A GitHub workflow command (``::error file=…,title=…::message``), values escaped as GitHub asks;
    control characters (a carriage return included) are dropped, not escaped."""

    def prop(v: str) -> str:
        return (
            strip_control(v)
            .replace("%", "%25")
            .replace("\n", "%0A")
            .replace(":", "%3A")
            .replace(",", "%2C")
        )

    msg = strip_control(message).replace("%", "%25").replace("\n", "%0A")
    props = ([f"file={prop(file)}"] if file else []) + [f"title={prop(title)}"]
    return f"::{level} {','.join(props)}::{msg}"


def check_cmd(  # noqa: PLR0917 - a typer command
    changed: bool = typer.Option(False, "--changed", help="Check the skills changed in git since --since."),
    since: str | None = typer.Option(
        None,
        "--since",
        metavar="REV",
        help="Base revision (default: merge-base with origin/main, else HEAD~1).",
    ),
    skills: list[Path] = typer.Option([], "--skills", help="Folder(s) of skills (default: ./skills)."),
    baselines_dir: Path = typer.Option(Path("baselines"), "--baselines", help="Folder of stored baselines."),
    config: Path | None = typer.Option(
        None, "--config", help="Study/settings file (runtime options, gates)."
    ),
    runtime: str | None = typer.Option(None, "--runtime", help="Override the baselines' runtime."),
    model: str | None = typer.Option(None, "--model", help="Override the baselines' model."),
    out: Path | None = typer.Option(None, "--out", help="Study folder (default: .skillreach/check)."),
    strict: bool = typer.Option(
        False, "--strict", help="An inconclusive gate fails (the default for check; kept for scripts)."
    ),
    lenient: bool = typer.Option(
        False, "--lenient", help="An inconclusive gate passes (exit 0); a breach still fails."
    ),
    gate: list[str] = typer.Option(
        [], "--gate", metavar="METRIC=VALUE", help="Override a gate (repeatable)."
    ),
    in_process: bool = typer.Option(
        False, "--in-process", help="Run the study in this process, without Prefect."
    ),
    annotations: bool | None = typer.Option(
        None,
        "--annotations/--no-annotations",
        help="GitHub annotations (default: when GITHUB_ACTIONS is set).",
    ),
    as_json: bool = typer.Option(False, "--json", help="The results as JSON on stdout alone."),
    staged: bool = typer.Option(
        False,
        "--staged",
        help="Probe in stages and stop when the verdict is known (group-sequential gate).",
    ),
    looks: int = typer.Option(4, "--looks", min=1, help="Planned looks of --staged."),
    scope: str = typer.Option(
        "all",
        "--scope",
        help="What an edited description re-gates: all (every skill with a baseline, one study) or "
        "neighbours (the edited skills, their BM25 rivals both ways and the skills the base records' "
        "confusion pairs link to them).",
    ),
    rivals_k: int = typer.Option(
        3, "--rivals", min=1, help="Rivals per edited skill under --scope neighbours."
    ),
    adaptive: bool = typer.Option(
        False,
        "--adaptive",
        help="Spend extra attempts on undecided gates, in stages (doubling the attempts), until each is "
        "decided or --max-probes is spent.",
    ),
    max_probes: int | None = typer.Option(
        None, "--max-probes", min=1, help="With --adaptive: the probes the whole check may spend."
    ),
    allow_missing: bool = typer.Option(
        False,
        "--allow-missing",
        help="A changed skill without a baseline at the base revision passes (record it after the merge).",
    ),
) -> None:
    """Re-probe what a change can affect and gate it against the baselines of the base revision.

    An edited description, an added or a removed skill changes the routing table: every skill with a
    baseline is re-gated (--scope neighbours: the edited skills, their rivals and the skills the base
    records' confusion pairs link to them); a body-only edit
    re-gates that skill. The records are read as they are at the base revision, never from the change.

    Exit codes: 0 every gate ok; 1 a breach, an inconclusive gate (unless --lenient), a changed skill
    without a baseline (unless --allow-missing) or a SKILL.md that does not parse; 2 bad input; 3 not
    compared (pins differ, or records or their query set unreadable).
    """
    from skillreach.baselines.gates import compare
    from skillreach.baselines.records import changed_skills, git_toplevel, record_baseline, resolve_since
    from skillreach.baselines.scope import (
        base_records,
        classify_edits,
        confusion_links,
        losses,
        skills_to_gate,
    )
    from skillreach.errors import GateFailed, InputError, RefusedError
    from skillreach.reports.gates import print_comparison
    from skillreach.skills.discovery import discover
    from skillreach.study import StudyConfig

    if scope not in ("all", "neighbours", "neighbors"):
        raise InputError(f"--scope {scope!r}: pass all or neighbours")
    if adaptive and staged:
        raise InputError("--adaptive adds attempts after a full stage; --staged stops early: pass one")
    if adaptive and max_probes is None:
        raise InputError("--adaptive needs a budget: pass --max-probes N (the probes the check may spend)")

    if not changed:
        raise InputError("skillreach check needs --changed (the only mode so far)")
    if strict and lenient:
        raise InputError("--strict and --lenient contradict each other; pass one")
    # A merge gate: an inconclusive result is not a pass unless asked for.
    strict = not lenient
    console = make_console(stderr=as_json)
    dirs = list(skills) or [Path("skills")]
    for d in dirs:
        if not d.is_dir():
            raise InputError(f"{d}: no such folder of skills; pass --skills DIR")
    rev, how = resolve_since(dirs[0], since)
    top = git_toplevel(dirs[0].resolve())
    assert top is not None  # resolve_since refused a folder outside git
    changes = changed_skills(dirs, rev)
    console.print(f"comparing with {rev[:12]} ({how})")
    base = base_records(top, rev, baselines_dir)
    edits = classify_edits(changes, top, rev)
    edited_files = {e.name: e.file for e in edits}
    routing = [e for e in edits if e.routing]
    found = discover(dirs).skills
    taken_from = confusion_links(base.records)
    to_check = skills_to_gate(
        edits,
        base.records,
        scope="all" if scope == "all" else "neighbours",
        skills=found,
        rivals_k=rivals_k,
        taken_from=taken_from,
    )
    if routing:
        what = "; ".join(
            f"{how_}: {', '.join(e.name for e in routing if e.how == how_)}"
            for how_ in ("description", "added", "removed")
            if any(e.how == how_ for e in routing)
        )
        whom = (
            f"every skill with a baseline is re-gated ({len(to_check)})"
            if scope == "all"
            else f"re-gating the edited skills and their neighbours: {', '.join(to_check) or 'none'}"
        )
        console.print(f"routing table changed ({what}) — {whom}")
        edited = {e.name for e in routing}
        pairs = sorted(
            f"{truth} → {taker}"
            for truth, takers in taken_from.items()
            for taker in takers
            if truth in edited or taker in edited
        )
        if scope != "all" and pairs:
            console.print(
                f"confusion pairs in the records at {rev[:12]} linking the edited skills (cases of → taken "
                f"by): {', '.join(pairs)}",
                markup=False,
                highlight=False,
            )
    if base.changed_here:
        console.print(
            f"this change touches the baseline records ({', '.join(base.changed_here)}): the gate reads "
            f"them as they are at {rev[:12]}, never from the change"
        )
    gates = _gates(config, gate)
    broken = [
        {"skill": path, "status": "unparseable", "message": f"{path}:{line}: {what}"}
        for path, line, what in changes.problems
    ]
    broken += [{"skill": base.folder, "status": "refused", "message": msg} for msg in base.problems]
    do_annotate = annotations if annotations is not None else os.environ.get("GITHUB_ACTIONS") == "true"
    results: list[dict[str, Any]] = list(broken)
    lines: list[str] = [
        _annotate("error", path, "skillreach: SKILL.md does not parse", f"line {line}: {what}")
        for path, line, what in changes.problems
    ]
    if not edits and not broken:
        console.print("no skill changed; nothing to check")
    rebaseline_hint = f"skillreach baseline rebaseline --rev {rev[:12]} --commit"
    missing = sorted(e.name for e in edits if e.how != "removed" and e.name not in base.records)
    for name in missing:
        level = "warning" if allow_missing else "error"
        msg = (
            f"no baseline for {name} at {rev[:12]}"
            + ("" if base.records else f" (no record under {base.folder}/ at all)")
            + f": after the merge, record it with `skillreach baseline rebaseline --rev main --skills {name} "
            "--commit`" + ("" if allow_missing else "; --allow-missing lets it pass until then")
        )
        results.append({"skill": name, "status": "no baseline", "message": msg})
        lines.append(_annotate(level, changes.skill_files.get(name), "skillreach: no baseline", msg))
    # group by the pins a study needs
    groups: dict[tuple[str, str, str, int], list[tuple[str, BaselineRecord]]] = {}
    for name in to_check:
        if name not in base.records:
            continue
        rec = base.records[name]
        skill_file = changes.skill_files.get(name)
        qpath = _corpus_path(rec, top)
        if not qpath.is_file():
            msg = (
                f"{name}: the query set its baseline names, {rec.corpus_path}, is missing in this checkout; "
                "commit it, or re-record the baseline with --queries FILE"
            )
            results.append({"skill": name, "status": "refused", "message": msg})
            lines.append(_annotate("error", skill_file, "skillreach: query set missing", msg))
            continue
        reasons, stale = _record_expiry(rec, qpath, model=model, judge_model=None)
        if reasons:
            msg = (
                f"baseline {rec.baseline_id} is expired ({'; '.join(reasons)}); not compared: "
                f"re-baseline with `{rebaseline_hint} --skills {name}`"
            )
            results.append({"skill": name, "status": "expired", "message": msg})
            lines.append(_annotate("error", skill_file, "skillreach: baseline expired", msg))
            continue
        if stale:
            console.print(f"{name}: {'; '.join(stale)} (gated on the cases it shares with the baseline)",
                          markup=False, highlight=False)
        key = (str(qpath), runtime or rec.runtime.name, model or rec.model, rec.runs_per_case)
        groups.setdefault(key, []).append((name, rec))
    for (full_qpath, rt, mdl, runs), members in groups.items():
        qpath_s = full_qpath
        if scope != "all" and routing:
            qpath_s = str(_neighbourhood_file(Path(full_qpath), [n for n, _ in members], out))
        needs_compliance = any(
            r.metrics.get("compliance") is not None or r.metrics.get("task_quality") is not None
            for _, r in members
        )
        model_flag = None if rt in ("fake", "keyword", "retriever") and mdl == rt else mdl
        cfg = StudyConfig.build(
            config,
            skills=tuple(dirs),
            queries=Path(qpath_s),
            runtime=rt,
            model=model_flag,
            attempts=runs,
            compliance=needs_compliance or None,
            out=out or Path(".skillreach") / "check",  # the documented default, with or without Prefect
            gate=False,  # gated here, against the committed baselines
        )
        console.print(
            f"probing {', '.join(n for n, _ in members)}: {qpath_s}, runtime {rt}, model {mdl}, "
            f"{runs} runs per case"
        )
        for name, rec in members:
            console.print(f"  {name}: smallest breach {_smallest_breaches(rec, gates)}", markup=False,
                          highlight=False)
        if staged:
            from skillreach.cli._staged import staged_annotations, staged_check_group

            for name, entry, st in staged_check_group(
                cfg,
                members,
                Path(qpath_s),
                gates,
                looks=looks,
                strict=strict,
                folder_of=lambda n: _find_skill_folder(n, dirs),
                console=console,
                quiet=as_json,
                in_process=in_process,
            ):
                results.append(entry)
                for level, title, msg in staged_annotations(name, st, strict=strict):
                    lines.append(_annotate(level, changes.skill_files.get(name), title, msg))
            continue
        art = _run_study(cfg, members[0][1].judge_model, in_process)
        if adaptive:
            assert max_probes is not None
            art = _adaptive(
                cfg, members, art, Path(qpath_s), gates, strict=strict, dirs=dirs, budget=max_probes,
                console=console, in_process=in_process,
            )
        for name, rec in members:
            folder = _find_skill_folder(name, dirs)
            new = record_baseline(art, Path(qpath_s), name, skill_folder=folder, judge_model=rec.judge_model)
            skill_file = changes.skill_files.get(name)
            try:
                cmp = compare(rec, new, gates, strict)
            except RefusedError as exc:
                results.append({"skill": name, "status": "refused", "message": exc.message})
                lines.append(_annotate("error", skill_file, "skillreach: comparison refused", exc.message))
                continue
            loss = losses(rec, new, art.outcomes)
            victim = _victim_line(name, cmp, loss)
            if victim is not None:
                for taker in loss.taken_by:
                    if edited_files.get(taker):
                        title = "skillreach: takes a neighbour's cases"
                        lines.append(_annotate("error", edited_files[taker], title, victim))
            if not as_json:
                print_comparison(cmp, console)
            results.append(
                {"skill": name, "status": cmp.verdict.value, "comparison": cmp.model_dump(mode="json")}
                | ({"victim": victim} if victim else {})
            )
            for g in cmp.results:
                if g.verdict.value in ("breach", "inconclusive"):
                    level = "error" if g.verdict.value == "breach" or strict else "warning"
                    ci = f"[{g.ci95[0]:+.3f}, {g.ci95[1]:+.3f}]" if g.ci95 else ""
                    msg = (
                        f"{name}: {g.metric} ({g.cohort}) {g.verdict.value}: Δ {g.mean_diff:+.3f}, "
                        f"95% CI {ci}, gate {g.gate:+.2f}, {g.k} cases" + (f". {g.note}" if g.note else "")
                    )
                    lines.append(_annotate(level, skill_file, f"skillreach gate: {g.verdict.value}", msg))
    statuses = [r["status"] for r in results]

    def failing(st: str) -> bool:
        return st in ("breach", "unparseable") or (strict and st == "inconclusive") or (
            st == "no baseline" and not allow_missing
        )

    if any(failing(st) for st in statuses):
        code = 1
    elif "refused" in statuses or "expired" in statuses:
        code = 3
    else:
        code = 0
    if do_annotate:
        for line in lines:
            print(line)
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        with open(summary_path, "a", encoding="utf-8") as fh:
            fh.write(strip_control(_step_summary(rev, how, edits, base.changed_here, results, code=code)))
    if as_json:
        payload = {"since": rev, "how": how, "checked": to_check, "results": results, "exit_code": code}
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    else:
        for r in results:
            if r.get("victim"):
                console.print(r["victim"], markup=False, highlight=False)
        for r in results:
            if r["status"] in ("no baseline", "expired", "refused", "unparseable"):
                console.print(f"[yellow]{r['skill']}: {r['status']}[/]: {r['message']}")
        console.print(f"check: exit {code}")
    failed = [str(r["skill"]) for r in results if failing(r["status"])]
    if code == 1:
        undecided = _undecided(results)
        raise GateFailed(
            f"check: gate failed for {', '.join(failed)}"
            + (
                f"; inconclusive: {undecided}; pass --lenient to let an inconclusive gate pass"
                if undecided
                else ""
            )
        )
    if code == 3:
        held = [f"{r['skill']} ({r['status']})" for r in results if r["status"] in ("refused", "expired")]
        raise RefusedError(f"check: not compared: {', '.join(held)}; re-baseline with `{rebaseline_hint}`")


def _smallest_breaches(record: BaselineRecord, gates: Any) -> str:
    """Per gated metric of ``record``: the smallest change its cases can show as a breach
    (``activation 3 of 4 cases (a change of 0.75); false_activation none``)."""
    from skillreach.baselines.gates import smallest_breach_text
    from skillreach.baselines.records import METRICS, case_rates

    values = gates.model_dump() if hasattr(gates, "model_dump") else dict(gates)
    parts = []
    for metric in METRICS:
        rates = case_rates(record.per_case, metric)
        if rates:
            text = smallest_breach_text(metric, float(values[metric]), len(rates), list(rates.values()))
            parts.append(f"{metric} {text}")
    return "; ".join(parts) or "none (no rated case)"


def _undecided(results: list[dict[str, Any]]) -> str:
    """What would decide each inconclusive gate, e.g. ``demo activation: add about 9 positive cases for
    demo (now 4)``."""
    parts: list[str] = []
    for r in results:
        for g in (r.get("comparison") or {}).get("results", []):
            if g["verdict"] != "inconclusive":
                continue
            parts.append(
                f"{r['skill']} {g['metric']}"
                + (f" ({g['cohort']})" if g["cohort"] != "paired" else "")
                + (f": {g['note']}" if g.get("note") else "")
            )
    return "; ".join(parts)


def _step_summary(
    rev: str, how: str, edits: Any, baseline_changes: Any, results: list[dict[str, Any]], *, code: int
) -> str:
    from skillreach.reports.gates import fmt_value

    icon = {
        "ok": "✅",
        "inconclusive": "⚠️",
        "breach": "❌",
        "no baseline": "➕",
        "expired": "⌛",
        "refused": "⛔",
        "unparseable": "❌",
    }
    out = ["## skillreach check", "", f"Compared with `{rev[:12]}` ({how}).", ""]
    victims = [r["victim"] for r in results if r.get("victim")]
    if victims:
        out += [f"- **{v}**" for v in victims] + [""]
    routing = [e for e in edits if e.routing]
    if routing:
        out.append(
            "Routing table changed ("
            + ", ".join(f"{e.name}: {e.how}" for e in routing)
            + "): every skill it can move re-gated.\n"
        )
    if baseline_changes:
        out.append(
            "This change touches baseline records (" + ", ".join(f"`{c}`" for c in baseline_changes)
            + f"); the gate used the records of `{rev[:12]}`.\n"
        )
    out += [
        "| skill | metric | cohort | baseline | new | Δ paired | 95% CI | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        st = r["status"]
        if "comparison" not in r:
            out.append(f"| {r['skill']} | – | – | – | – | – | – | {icon.get(st, '')} {st}: {r['message']} |")
            continue
        for g in r["comparison"]["results"]:
            ci = f"[{g['ci95'][0]:+.3f}, {g['ci95'][1]:+.3f}]" if g["ci95"] else "–"
            note = f" — {g['note']}" if g["note"] else ""
            out.append(
                f"| {r['skill']} | {g['metric']} | {g['cohort']} | {fmt_value(g['base'])} | "
                f"{fmt_value(g['new'])} | "
                f"{fmt_value(g['mean_diff'], signed=True)} | {ci} | "
                f"{icon.get(g['verdict'], '')} {g['verdict']}{note} |"
            )
    out += ["", f"**Exit {code}**", ""]
    return "\n".join(out) + "\n"


def register(app: typer.Typer) -> None:
    app.command("check")(check_cmd)
