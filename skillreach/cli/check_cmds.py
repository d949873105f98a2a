"""``skillreach check --changed``: the merge gate. What a change can affect is re-probed and gated
against the baseline records of the base revision (see :mod:`skillreach.baselines.scope`)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from skillreach._io.console import make_console
from skillreach.cli.baseline_cmds import (
    _corpus_path,
    _find_skill_folder,
    _gates,
    _read_artifact_any,
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
    queries: Path | None = typer.Option(
        None,
        "--queries",
        help="The query set of skills without a record yet (an added skill's cases); default: the sets "
        "the base records name.",
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Study/settings file (runtime options, gates)."
    ),
    runtime: str | None = typer.Option(None, "--runtime", help="Override the baselines' runtime."),
    model: str | None = typer.Option(None, "--model", help="Override the baselines' model."),
    out: Path | None = typer.Option(None, "--out", help="Study folder (default: .skillreach/check)."),
    max_cost: float | None = typer.Option(
        None,
        "--max-cost",
        metavar="USD",
        help="Stop the check's studies once they spent this many USD (beats max_cost_usd in --config).",
    ),
    strict: bool = typer.Option(
        False, "--strict", help="An inconclusive gate fails (the default for check; kept for scripts)."
    ),
    lenient: bool = typer.Option(
        False,
        "--lenient",
        help="An inconclusive gate passes (exit 0); a breach, or a significant take of neighbours' cases, "
        "still fails.",
    ),
    accept: list[str] = typer.Option(
        [],
        "--accept",
        metavar="SKILL",
        help="A person accepts this pull request's change of SKILL's yardstick (relabelled or removed "
        "cases, its record deleted or edited); repeatable, '*' for all. Also a 'Skillreach-Accept: SKILL' "
        "commit trailer.",
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
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Print everything (every table); by default only what is not ok."
    ),
    staged: bool = typer.Option(
        False,
        "--staged",
        help="Probe in stages and stop when the verdict is known (group-sequential gate).",
    ),
    looks: int = typer.Option(4, "--looks", min=1, help="Planned looks of --staged."),
    scope: str = typer.Option(
        "affected",
        "--scope",
        help="What a change re-probes: affected (default: the edited skills' cases and every case the "
        "change can reach — BM25 top-k of the new and the old descriptions, the base records' confusion "
        "pairs), all (every case, every skill with a baseline, one study) or neighbours (the edited "
        "skills, their BM25 rivals both ways and the skills the confusion pairs link to them).",
    ),
    rivals_k: int = typer.Option(
        3, "--rivals", min=1, help="BM25 top-k of a case (affected) or rivals per edited skill (neighbours)."
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
        help="An edited skill without a baseline at the base revision passes (record it after the merge). "
        "A skill the change adds never needs it: it is scored, not gated.",
    ),
) -> None:
    """Re-probe what a change can affect and gate it against the baselines of the base revision.

    The yardstick — query sets, labels and baseline records — is read as it is at the base revision;
    a change that relabels or removes cases, or deletes or edits a record, fails unless a person
    accepts it (--accept, or a Skillreach-Accept trailer). An edited description or an added skill is
    gated on what it can reach, its neighbours against their records, and its take of their cases is
    tested pooled; an added skill is scored (its baseline is recorded on merge).

    Exit codes: 0 every gate ok; 1 a breach, an inconclusive gate (unless --lenient), a significant
    take, a yardstick change not accepted, an edited skill without a baseline (unless --allow-missing)
    or a SKILL.md that does not parse; 2 bad input (a shallow clone without the base revision
    included); 3 not compared (pins differ, or records or their query set unreadable).
    """
    from skillreach.baselines.records import changed_skills, git_toplevel, resolve_since
    from skillreach.baselines.scope import base_records, classify_edits, confusion_links, skills_to_gate
    from skillreach.baselines.yardstick import TRAILER, accepted_by_trailers
    from skillreach.cli._check_output import annotate, failing, not_ok_lines, step_summary, undecided
    from skillreach.cli._check_plan import Group, merge_pins, read_yardstick
    from skillreach.errors import GateFailed, InputError, RefusedError
    from skillreach.skills.discovery import discover

    if scope not in ("affected", "all", "neighbours", "neighbors"):
        raise InputError(f"--scope {scope!r}: pass affected, all or neighbours")
    if adaptive and staged:
        raise InputError("--adaptive adds attempts after a full stage; --staged stops early: pass one")
    if adaptive and max_probes is None:
        raise InputError("--adaptive needs a budget: pass --max-probes N (the probes the check may spend)")
    if not changed:
        raise InputError("skillreach check needs --changed (the only mode so far)")
    if strict and lenient:
        raise InputError("--strict and --lenient contradict each other; pass one")
    strict = not lenient  # a merge gate: an inconclusive result is not a pass unless asked for
    console = make_console(stderr=as_json)

    def say(text: str, *, always: bool = False) -> None:
        if verbose or always:
            console.print(text, markup=False, highlight=False)

    dirs = list(skills) or [Path("skills")]
    for d in dirs:
        if not d.is_dir():
            raise InputError(f"{d}: no such folder of skills; pass --skills DIR")
    rev, how = resolve_since(dirs[0], since)
    top = git_toplevel(dirs[0].resolve())
    assert top is not None  # resolve_since refused a folder outside git
    changes = changed_skills(dirs, rev)
    base = base_records(top, rev, baselines_dir)
    edits = classify_edits(changes, top, rev)
    trailers = accepted_by_trailers(top, rev)
    accepted = sorted({*accept, *trailers})
    accepted_how = " and ".join(
        w for w, on in (("--accept", bool(accept)), (f"a {TRAILER} trailer", bool(trailers))) if on
    )
    ys, sets = read_yardstick(top, rev, base, queries=queries, accepted=accepted, accepted_how=accepted_how)
    agreed = ys.skills_accepted()
    routing = [e for e in edits if e.routing]
    found = discover(dirs).skills
    present = {s.name for s in found}
    added = sorted(e.name for e in edits if e.how == "added" and e.name in present)
    records = {n: r for n, r in base.records.items() if n not in agreed}
    what = "; ".join(
        f"{kind}: {', '.join(e.name for e in edits if e.how == kind)}"
        for kind in ("description", "added", "removed", "body")
        if any(e.how == kind for e in edits)
    )
    say(f"check: compared with {rev[:12]} ({how})" + (f"; {what}" if what else "; no skill changed"),
        always=True)
    taken_from = confusion_links(records)
    if scope in ("neighbours", "neighbors", "all"):
        candidates = skills_to_gate(
            edits, records, scope="all" if scope == "all" else "neighbours", skills=found, rivals_k=rivals_k,
            taken_from=taken_from,
        )
    else:  # affected: every skill with a record; who is gated is known once the cases are chosen
        candidates = sorted(set(records) & present) if routing else sorted(
            e.name for e in edits if e.name in present
        )
    if routing:
        kinds = "; ".join(
            f"{k}: {', '.join(e.name for e in routing if e.how == k)}"
            for k in ("description", "added", "removed")
            if any(e.how == k for e in routing)
        )
        whom = {
            "all": f"every skill with a baseline is re-gated ({len(candidates)})",
            "affected": "re-probing the edited skills' cases and every case the change can reach",
        }.get(scope, f"re-gating the edited skills and their neighbours: {', '.join(candidates) or 'none'}")
        say(f"routing table changed ({kinds}) — {whom}")
        edited_names = {e.name for e in routing}
        pairs = sorted(
            f"{truth} → {taker}" for truth, takers in taken_from.items() for taker in takers
            if truth in edited_names or taker in edited_names
        )
        if scope != "all" and pairs:
            say(f"confusion pairs in the records at {rev[:12]} linking the edited skills (cases of → taken "
                f"by): {', '.join(pairs)}")
    if base.changed_here:
        say(f"this change touches the baseline records ({', '.join(base.changed_here)}): the gate reads them "
            f"as they are at {rev[:12]}, never from the change")
    gates = _gates(config, gate)
    do_annotate = annotations if annotations is not None else os.environ.get("GITHUB_ACTIONS") == "true"
    results: list[dict[str, Any]] = [
        {"skill": path, "status": "unparseable", "message": f"{path}:{line}: {what_}"}
        for path, line, what_ in changes.problems
    ]
    results += [{"skill": base.folder, "status": "refused", "message": msg} for msg in base.problems]
    lines: list[str] = [
        annotate("error", path, "skillreach: SKILL.md does not parse", f"line {line}: {what_}")
        for path, line, what_ in changes.problems
    ]
    for fail in ys.failures():
        file = fail.split(":", 1)[0]
        msg = f"{fail}: the base revision's yardstick is the judge; " + (
            "if a person asked for it, pass --accept SKILL (or a Skillreach-Accept: SKILL trailer) and "
            "re-record the baseline in this pull request"
        )
        results.append({"skill": file, "status": "yardstick", "message": msg})
        lines.append(annotate("error", file, "skillreach: the yardstick changed", msg))
    for name in sorted(agreed):
        results.append({"skill": name, "status": "accepted", "message": f"its yardstick changes in this pull "
                        f"request, accepted by {accepted_how or 'a person'}; not gated against the base"})
    rebaseline_hint = f"skillreach baseline rebaseline --rev {rev[:12]} --commit"
    for name in sorted(e.name for e in edits if e.how in ("description", "body") and e.name not in records
                       and e.name not in agreed):
        if not any(q.expected_skill == name for qs_ in sets.values() for q in qs_.queries):
            # no case of its own anywhere: no baseline can ever be recorded, so none is demanded (its
            # neighbours are gated and what it takes from them is tested, as for an added skill)
            results.append({"skill": name, "status": "no cases", "message": (
                f"edited, with no case in {', '.join(sets) or 'any query set'}: nothing of its own to gate "
                "(its neighbours are gated against their baselines and what it takes from them is tested); "
                "add its cases and record its baseline to gate it")})
            lines.append(annotate("notice", changes.skill_files.get(name), "skillreach: no cases",
                                  results[-1]["message"]))
            continue
        level = "warning" if allow_missing else "error"
        msg = (
            f"no baseline for {name} at {rev[:12]}"
            + ("" if base.records else f" (no record under {base.folder}/ at all)")
            + f": after the merge, record it with `skillreach baseline rebaseline --rev main --skills {name} "
            "--commit`" + ("" if allow_missing else "; --allow-missing lets it pass until then")
        )
        results.append({"skill": name, "status": "no baseline", "message": msg})
        lines.append(annotate(level, changes.skill_files.get(name), "skillreach: no baseline", msg))
    groups: dict[tuple[str, str, str, int], Group] = {}
    stale: list[str] = []
    for name in candidates:
        rec = records.get(name)
        if rec is None:
            continue
        skill_file = changes.skill_files.get(name)
        qrel = rec.corpus_path or _corpus_path(rec, top).as_posix()
        if qrel not in sets:
            msg = (
                f"{name}: the query set its baseline names, {rec.corpus_path}, is missing in this checkout; "
                "commit it, or re-record the baseline with --queries FILE"
            )
            results.append({"skill": name, "status": "refused", "message": msg})
            lines.append(annotate("error", skill_file, "skillreach: query set missing", msg))
            continue
        reasons, stale_here = _expiry(rec, sets[qrel], model=model)
        if reasons:
            msg = (
                f"baseline {rec.baseline_id} is expired ({'; '.join(reasons)}); not compared: "
                f"re-baseline with `{rebaseline_hint} --skills {name}`"
            )
            results.append({"skill": name, "status": "expired", "message": msg})
            lines.append(annotate("error", skill_file, "skillreach: baseline expired", msg))
            continue
        if stale_here:
            stale.append(f"{name} ({'; '.join(stale_here)})")
        key = (qrel, runtime or rec.runtime.name, model or rec.model, rec.runs_per_case)
        merge_pins(groups, key).members.append((name, rec))
    for name in added:
        home = next(
            (g for g in groups.values() if any(q.expected_skill == name for q in sets[g.qrel].queries)), None
        )
        if home is None:
            home = _home_for_added(name, sets, groups, queries=queries, top=top, runtime=runtime, model=model)
        if home is None:
            results.append({"skill": name, "status": "new", "message": (
                f"{name}: a new skill with no case in "
                f"{', '.join(sets) or 'any query set (pass --queries FILE)'}: nothing to score; add its "
                "cases, its baseline is recorded on merge")})
            continue
        home.added.append(name)
    probes_spent = 0
    cases_probed = 0
    cases_all = 0
    for index, g in enumerate(groups.values()):
        spent, probed, every = _check_group(
            index, g, sets[g.qrel], ctx=_Ctx(
                config=config, dirs=dirs, out=out, max_cost=max_cost, edits=edits, found=found,
                records=records, scope=scope, rivals_k=rivals_k, gates=gates, strict=strict, staged=staged,
                looks=looks, adaptive=adaptive, max_probes=max_probes, in_process=in_process, as_json=as_json,
                verbose=verbose, console=console, say=say, skill_files=changes.skill_files, added=set(added),
                top=top,
            ), results=results, lines=lines,
        )
        probes_spent += spent
        cases_probed += probed
        cases_all += every
    statuses = [r["status"] for r in results]
    if any(failing(st, strict=strict, allow_missing=allow_missing) for st in statuses):
        code = 1
    elif "refused" in statuses or "expired" in statuses:
        code = 3
    else:
        code = 0
    gated = [r["skill"] for r in results if "comparison" in r or "staged" in r]
    probes_line = (
        f"{len(gated)} skill{'' if len(gated) == 1 else 's'} gated on {cases_probed} of {cases_all} cases "
        f"({probes_spent} probes, --scope {scope})" if groups else "nothing probed"
    )
    if do_annotate:
        for line in lines:
            print(line)
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        with open(summary_path, "a", encoding="utf-8") as fh:
            fh.write(step_summary(
                rev=rev, how=how, headline=ys.headline(), routing=f"Changed: {what}." if what else "",
                stale=stale, tampered=ys.tampered(), results=results, probes=f"{probes_line}.", code=code,
                verbose=verbose,
            ))
    if as_json:
        payload = {"since": rev, "how": how, "checked": gated, "yardstick": ys.model_dump(mode="json"),
                   "accepted": sorted(agreed), "stale": stale, "results": results, "probes": probes_spent,
                   "exit_code": code}
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    # what is not ok, one line each (on stderr beside --json)
    if ys.changed:
        say(ys.headline(), always=True)
    if stale:
        say(f"baselines stale: {'; '.join(stale)} (gated on the cases they share with the base)", always=True)
    if ys.tampered():
        say(f"tampered: {', '.join(ys.tampered())} (digest does not match the content; never read)",
            always=True)
    for line in not_ok_lines(results):
        say(line, always=True)
    say(f"check: {probes_line} → exit {code}", always=True)
    failed = sorted({str(r["skill"]) for r in results
                     if failing(r["status"], strict=strict, allow_missing=allow_missing)})
    if code == 1:
        pending = undecided(results)
        raise GateFailed(
            f"check: gate failed for {', '.join(failed)}"
            + (f"; inconclusive: {pending}; pass --lenient to let an inconclusive gate pass"
               if pending else "")
        )
    if code == 3:
        held = [f"{r['skill']} ({r['status']})" for r in results if r["status"] in ("refused", "expired")]
        raise RefusedError(f"check: not compared: {', '.join(held)}; re-baseline with `{rebaseline_hint}`")


@dataclass
class _Ctx:
    """What every group of a check shares."""

    config: Path | None
    dirs: list[Path]
    out: Path | None
    max_cost: float | None
    edits: list[Any]
    found: list[Any]
    records: dict[str, BaselineRecord]
    scope: str
    rivals_k: int
    gates: Any
    strict: bool
    staged: bool
    looks: int
    adaptive: bool
    max_probes: int | None
    in_process: bool
    as_json: bool
    verbose: bool
    console: Any
    say: Any
    skill_files: dict[str, str]
    added: set[str]
    top: Path


def _expiry(rec: BaselineRecord, qs: Any, *, model: str | None) -> tuple[list[str], list[str]]:
    """(why ``rec`` is expired against the set the check probes, what makes it stale)."""
    from skillreach.baselines.records import current_rubric_version, expiry, staleness

    rubric = current_rubric_version(qs, rec.skill, rec.judge_model)
    return expiry(rec, query_set=qs, model=model, rubric=rubric), staleness(rec, qs)


def _home_for_added(
    name: str, sets: dict[str, Any], groups: dict[tuple[str, str, str, int], Any], *, queries: Path | None,
    top: Path, runtime: str | None, model: str | None,
) -> Any:
    """The group an added skill's cases are probed in when no gated skill's study holds them: a group of
    the set that has its cases, on the pins of the first group (or --runtime/--model)."""
    from skillreach.cli._check_plan import merge_pins

    qrel = next((r for r, qs in sets.items() if any(q.expected_skill == name for q in qs.queries)), None)
    if qrel is None:
        return None
    pins = next(iter(groups.values()), None)
    rt = runtime or (pins.runtime if pins is not None else None)
    mdl = model or (pins.model if pins is not None else None)
    if rt is None:
        return None
    return merge_pins(groups, (qrel, rt, mdl or rt, pins.runs if pins is not None else 1))


def _check_group(
    index: int, g: Any, qs: Any, *, ctx: _Ctx, results: list[dict[str, Any]], lines: list[str]
) -> tuple[int, int, int]:
    """Probe one group's cases and gate its members; returns (probes, cases probed, cases in its set)."""
    from skillreach.baselines.gates import compare
    from skillreach.baselines.records import record_baseline
    from skillreach.baselines.scope import losses, within
    from skillreach.cli._check_output import annotate, victim_line
    from skillreach.cli._check_plan import group_out, scope_cases
    from skillreach.errors import RefusedError
    from skillreach.queries.sets import write_query_set
    from skillreach.reports.gates import print_comparison
    from skillreach.study import StudyConfig

    out = group_out(ctx.out, index)
    names = [n for n, _ in g.members]
    probe_set, why = scope_cases(ctx.scope, qs, ctx.edits, names + g.added, skills_now=ctx.found,
                                 records=ctx.records, rivals_k=ctx.rivals_k)
    probed = {q.id for q in probe_set.queries}
    owners = {q.expected_skill for q in probe_set.queries}
    edited = {e.name for e in ctx.edits}
    if ctx.scope == "affected":  # gated: the edited skills, and every skill whose cases the change reaches
        g.members = [(n, r) for n, r in g.members if n in edited or n in owners]
    if not probed or not (g.members or g.added):
        ctx.say(f"nothing of {g.qrel} within the change's reach: not probed")
        return 0, 0, len(qs.queries)
    folder = out.with_name(out.name + "-scope")
    qpath = write_query_set(probe_set, folder / f"{Path(g.qrel).stem}.json")
    needs_compliance = any(
        r.metrics.get("compliance") is not None or r.metrics.get("task_quality") is not None
        for _, r in g.members
    )
    model_flag = None if g.runtime in ("fake", "keyword", "retriever") and g.model == g.runtime else g.model
    cfg = StudyConfig.build(
        ctx.config, skills=tuple(ctx.dirs), queries=qpath, runtime=g.runtime, model=model_flag,
        attempts=g.runs, compliance=needs_compliance or None, out=out, gate=False,
        **({"max_cost": ctx.max_cost} if ctx.max_cost is not None else {}),
    )
    ctx.say(f"probing {len(probed)} of {len(qs.queries)} cases of {g.qrel} (runtime {g.runtime}, model "
            f"{g.model}, {g.runs} runs per case) for {', '.join(names + g.added)}")
    for qid in sorted(why) if ctx.verbose else ():
        ctx.say(f"  {qid}: {why[qid]}")
    for name, rec in g.members:
        ctx.say(f"  {name}: smallest breach {_smallest_breaches(rec, ctx.gates)}")
    judge = next((r.judge_model for _, r in g.members), None)
    if ctx.staged and g.members:
        from skillreach.cli._staged import staged_annotations, staged_check_group

        screen = _screen(probe_set, ctx)
        ctx.say(f"staged: the screen probes first the {len(screen)} cases most at risk; the rest only when "
                "one of them moves")
        for name, entry, st in staged_check_group(
            cfg, g.members, qpath, ctx.gates, looks=ctx.looks, strict=ctx.strict,
            folder_of=lambda n: _find_skill_folder(n, ctx.dirs), console=ctx.console,
            quiet=ctx.as_json or not ctx.verbose, in_process=ctx.in_process, screen=screen,
        ):
            results.append(entry)
            for level, title, msg in staged_annotations(name, st, strict=ctx.strict):
                lines.append(annotate(level, ctx.skill_files.get(name), title, msg))
        staged_out = cfg.out or Path(".skillreach") / "check"
        log = staged_out / "probes.jsonl"  # the group's probes, once (each skill's entry counts them all)
        lines_ = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
        spent = sum(1 for ln in lines_ if ln.strip())
        if (staged_out / "artifact.json").is_file():  # what the stages probed: the take is tested on it
            art = _read_artifact_any(staged_out / "artifact.json")
            _score_added(art, qpath, g.added, judge, ctx=ctx, results=results)
            _takes(art, probe_set, ctx, results, lines)
        return spent, len(probed), len(qs.queries)
    art = _run_study(cfg, judge, ctx.in_process)
    if ctx.adaptive:
        assert ctx.max_probes is not None
        art = _adaptive(cfg, g.members, art, qpath, ctx.gates, strict=ctx.strict, dirs=ctx.dirs,
                        budget=ctx.max_probes, console=ctx.console, in_process=ctx.in_process)
    comparisons = []
    for name, rec in g.members:
        new = record_baseline(art, qpath, name, skill_folder=_find_skill_folder(name, ctx.dirs),
                              judge_model=rec.judge_model)
        skill_file = ctx.skill_files.get(name)
        left = [c for c in rec.per_case if c not in {q.id for q in qs.queries}]
        against = within(rec, probed, keep=left) if probed != {q.id for q in qs.queries} else rec
        try:
            cmp = compare(against, new, ctx.gates, ctx.strict)
        except RefusedError as exc:
            results.append({"skill": name, "status": "refused", "message": exc.message})
            lines.append(annotate("error", skill_file, "skillreach: comparison refused", exc.message))
            continue
        comparisons.append(cmp)
        loss = losses(against, new, art.outcomes)
        victim = victim_line(name, cmp, loss)
        if victim is not None:
            for taker in loss.taken_by:
                if ctx.skill_files.get(taker) and taker in edited:
                    title = "skillreach: takes a neighbour's cases"
                    lines.append(annotate("error", ctx.skill_files[taker], title, victim))
        if ctx.verbose and not ctx.as_json:
            print_comparison(cmp, ctx.console)
        results.append({"skill": name, "status": cmp.verdict.value, "comparison": cmp.model_dump(mode="json")}
                       | ({"victim": victim} if victim else {}))
        for gr in cmp.results:
            if gr.verdict.value in ("breach", "inconclusive"):
                level = "error" if gr.verdict.value == "breach" or ctx.strict else "warning"
                ci = f"[{gr.ci95[0]:+.3f}, {gr.ci95[1]:+.3f}]" if gr.ci95 else ""
                msg = (
                    f"{name}: {gr.metric} ({gr.cohort}) {gr.verdict.value}: Δ {gr.mean_diff:+.3f}, "
                    f"95% CI {ci}, gate {gr.gate:+.2f}, {gr.k} cases" + (f". {gr.note}" if gr.note else "")
                )
                lines.append(annotate(level, skill_file, f"skillreach gate: {gr.verdict.value}", msg))
    _score_added(art, qpath, g.added, judge, ctx=ctx, results=results)
    _takes(art, probe_set, ctx, results, lines)
    _gate_report(out, art, comparisons)
    return len(art.outcomes), len(probed), len(qs.queries)


def _screen(probe_set: Any, ctx: _Ctx) -> list[str]:
    """The probed cases most at risk from the change (:func:`~skillreach.baselines.scope.screen_cases`)."""
    from skillreach.baselines.scope import case_takers, screen_cases
    from skillreach.cli._check_plan import base_catalog

    return screen_cases(
        probe_set, ctx.edits, skills_now=ctx.found, skills_base=base_catalog(ctx.found, ctx.edits),
        taken_from=case_takers(ctx.records), k=ctx.rivals_k,
    )


def _score_added(
    art: Any, qpath: Path, added: list[str], judge: str | None, *, ctx: _Ctx, results: list[dict[str, Any]]
) -> None:
    """Each added skill scored on its own cases, not gated (its baseline is recorded on merge)."""
    from skillreach.baselines.records import record_baseline
    from skillreach.cli._check_plan import metrics_sentence

    for name in added:
        where = _find_skill_folder(name, ctx.dirs)
        rec = record_baseline(art, qpath, name, skill_folder=where, judge_model=judge)
        msg = (f"{name}: a new skill, scored, not gated: {metrics_sentence(rec)}; its baseline is recorded "
               "on merge")
        figures = {m: v.model_dump(mode="json") if v else None for m, v in rec.metrics.items()}
        results.append({"skill": name, "status": "new", "message": msg, "metrics": figures})


def _takes(art: Any, probe_set: Any, ctx: _Ctx, results: list[dict[str, Any]], lines: list[str]) -> None:
    """The pooled take test of every edited or added skill (:mod:`skillreach.baselines.steal`)."""
    from skillreach.baselines.steal import take_test
    from skillreach.cli._check_output import annotate

    now = {s.name: s.description for s in ctx.found}
    digests = {q.id: q.case_digest() for q in probe_set.queries}
    texts = {q.id: q.text for q in probe_set.queries}
    for e in ctx.edits:
        if e.how not in ("description", "added") or e.name not in now:
            continue
        test = take_test(
            e.name, base_records=ctx.records, outcomes=art.outcomes, digests=digests, added=e.how == "added",
            file=ctx.skill_files.get(e.name), texts=texts,
            description=(e.base_description or "", now[e.name]) if e.base_description else None,
        )
        if test.moved:
            ctx.say(test.line())
        if test.significant:
            results.append({"skill": e.name, "status": "takes", "message": test.line(),
                            "advice": test.advice(), "take": test.model_dump(mode="json")})
            lines.append(annotate("error", test.file, "skillreach: takes its neighbours' cases",
                                  f"{test.line()}. {test.advice()}"))


def _gate_report(out: Path, art: Any, comparisons: list[Any]) -> None:
    """``gate.json`` and ``report.html`` with the gate section, in the check's study folder."""
    from skillreach.reports import render_html
    from skillreach.reports.gate_file import write_gate

    if not comparisons or not (out / "artifact.json").is_file():
        return
    write_gate(out, art.digest, comparisons, [])
    (out / "report.html").write_text(render_html(art, gate=comparisons), encoding="utf-8")


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


def register(app: typer.Typer) -> None:
    app.command("check")(check_cmd)
