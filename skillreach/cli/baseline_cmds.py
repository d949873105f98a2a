"""``skillreach baseline record|compare|status`` and ``skillreach check --changed``.

- ``baseline record``: the baseline record of one skill from one study's artifact (spec/interfaces.md);
  ``--commit`` writes ``baselines/<skill>.json`` and commits that file alone, the message naming what
  changed since the previous record (model, corpus, rubric, skill).
- ``baseline compare BASE NEW``: the gate of spec/metrics.md; exit 0 pass, 1 breach (or inconclusive
  under ``--strict``), 3 refused (pins differ).
- ``baseline status``: every stored baseline, current or expired against the current configuration.
- ``check --changed``: for CI on a pull request — re-probe the skills changed in git since a revision
  (every skill when one was added or removed), compare each with its stored baseline, GitHub
  annotations and a step summary.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from skillreach._io.console import make_console, strip_control

if TYPE_CHECKING:
    from rich.console import Console

    from skillreach.baselines.records import BaselineRecord
    from skillreach.study import StudyConfig

__all__ = ["register"]

baseline_app = typer.Typer(
    name="baseline",
    help="Baseline records of skills, and the statistical gate between two of them.",
    no_args_is_help=True,
)


def _err_console() -> Console:

    return make_console(stderr=True)


def _read_artifact_any(path: Path) -> Any:
    from skillreach.scoring.artifact import read_artifact

    return read_artifact(path)


def _find_skill_folder(skill: str, skills_dirs: Sequence[Path]) -> Path | None:
    from skillreach.skills.discovery import discover

    roots = [d for d in skills_dirs if d.exists()]
    if not roots:
        return None
    found = discover(roots)
    for s in found.skills:
        if s.name == skill:
            return Path(s.folder or Path(s.path).parent)
    return None


def _guess_queries(artifact_path: Path) -> Path | None:
    """A study folder written by ``skillreach run`` holds the query set it ran (``study.json`` names it)."""
    from skillreach.errors import SkillreachError
    from skillreach.study.folder import read_study_file

    try:
        return read_study_file(artifact_path.parent).query_set_path(artifact_path.parent)
    except SkillreachError:
        pass  # an older folder: look for the copies it may hold
    for name in ("queries.json", "query_set.json"):
        cand = artifact_path.parent / name
        if cand.is_file():
            return cand
    cfg = artifact_path.parent / "config.json"
    if cfg.is_file():
        try:
            q = json.loads(cfg.read_text(encoding="utf-8")).get("queries")
        except (OSError, ValueError, AttributeError):
            q = None
        if isinstance(q, str) and Path(q).is_file():
            return Path(q)
    return None


def _study_judge(artifact_path: Path) -> str:
    """The judge the study folder says graded its rubrics, else the default judge."""
    from skillreach.errors import SkillreachError
    from skillreach.study.folder import read_study_file

    try:
        judge = read_study_file(artifact_path.parent).judge_model
    except SkillreachError:
        judge = None
    return _judge_model_default(judge)


def _judge_model_default(given: str | None) -> str:
    from skillreach.study.judge import default_judge_model

    return given or default_judge_model()


# ------------------------------------------------------------------------------------------- record


def record_cmd(  # noqa: PLR0917 - a typer command: one parameter per option
    artifact: Path = typer.Option(..., "--artifact", help="artifact.json of the study."),
    skill: str = typer.Option(..., "--skill", help="The skill to record."),
    queries: Path | None = typer.Option(
        None, "--queries", help="The query set the study ran (default: found beside the artifact)."
    ),
    skills: list[Path] = typer.Option(
        [], "--skills", help="Folder(s) holding the skill, for its git version (default: ./skills)."
    ),
    out: Path | None = typer.Option(None, "--out", help="Write the record here (default: stdout)."),
    commit: bool = typer.Option(
        False, "--commit", help="Write <baselines>/<skill>.json and commit that file alone."
    ),
    baselines_dir: Path = typer.Option(Path("baselines"), "--baselines", help="Folder of stored baselines."),
    judge_model: str | None = typer.Option(
        None,
        "--judge-model",
        help="The judge that graded rubrics (default: $SKILLREACH_JUDGE_MODEL or fake).",
    ),
    uplift: Path | None = typer.Option(
        None,
        "--uplift",
        metavar="UPLIFT_JSON",
        help="The skill's uplift report (skillreach uplift SKILL --json) to carry in the record "
        "(default: uplift-SKILL.json beside the artifact, when there is one).",
    ),
) -> None:
    """Build the baseline record of one skill from one study (spec/interfaces.md)."""
    from skillreach.baselines.records import (
        changes_between,
        cohort_split,
        metrics_line,
        read_baseline,
        record_baseline,
        write_baseline,
    )
    from skillreach.errors import InputError
    from skillreach.reports.gates import fmt_value

    art = _read_artifact_any(artifact)
    qpath = queries or _guess_queries(artifact)
    if qpath is None:
        raise InputError(f"{artifact}: cannot tell which query set the study ran; pass --queries FILE")
    dirs = list(skills) or [Path("skills")]
    folder = _find_skill_folder(skill, dirs)
    if folder is None and skills:
        raise InputError(
            f"skill {skill!r}: no SKILL.md with that name under {', '.join(map(str, dirs))}; "
            "pass --skills DIR"
        )
    from skillreach.author.uplift import read_uplift_report, recorded_uplift, uplift_file

    beside = uplift_file(artifact if artifact.is_dir() else artifact.parent, skill)
    if uplift is None and beside.is_file():
        uplift = beside
    lift = recorded_uplift(read_uplift_report(uplift, skill), uplift) if uplift is not None else None
    record = record_baseline(
        art, qpath, skill, skill_folder=folder, judge_model=judge_model or _study_judge(artifact), uplift=lift
    )
    console = _err_console()
    if folder is None:
        console.print(
            f"[yellow]note:[/] no folder found for {skill!r} under {', '.join(map(str, dirs))}: "
            "skill_version is a digest of its description (pass --skills DIR for the git version)"
        )
    if record.skill_version_origin == "uncommitted":
        console.print(
            f"[yellow]note:[/] {record.skill_path} has uncommitted changes: skill_version is a content digest"
        )
    target = baselines_dir / f"{skill}.json" if commit else out
    if commit:
        _require_git(target if target is not None else baselines_dir)
    previous: BaselineRecord | None = None
    if commit and target is not None and target.is_file():
        from skillreach.errors import TamperedError

        try:
            previous = read_baseline(target)
        except TamperedError as exc:  # re-recording is the remedy: replace it, and say so
            console.print(f"[yellow]note:[/] replacing an unsealed or edited record: {exc.message}")
    if target is None:
        sys.stdout.write(record.model_dump_json(indent=2) + "\n")
        return
    from skillreach._io.paths import ensure_parent

    write_baseline(record, ensure_parent(target, flag="--baselines" if commit else "--out"))
    console.print(f"baseline {record.baseline_id} → {target}")
    console.print(f"  {metrics_line(record)}")
    if record.uplift is not None:
        console.print(f"  uplift {record.uplift.line()}", markup=False)
    if previous is not None:
        split = cohort_split(record, previous, "compliance")
        old, new = split["baseline_cases"], split["new_cases"]
        if new is not None:
            console.print(
                f"  compliance by cohort: baseline cases {fmt_value(old.value if old else None)} "
                f"({old.cases if old else 0} cases), new cases {fmt_value(new.value)} ({new.cases} cases)"
            )
    if commit:
        repo = _work_tree_repo(baselines_dir)
        changes = "; ".join(changes_between(previous, record))
        done = repo.commit([record], subject=f"baseline {skill}: {changes}")
        if done.sha is None:
            raise InputError(f"{target}: the baseline is unchanged; nothing to commit")
        console.print(f"  committed {done.sha[:12]}: {', '.join(changes_between(previous, record))}")


def _work_tree_repo(baselines_dir: Path, branch: str | None = None) -> Any:
    """The baseline store of the repository holding ``baselines_dir`` (its folder relative to the top)."""
    from skillreach.baselines.record_store import BaselineRepo

    top = _require_git(baselines_dir)
    anchor = baselines_dir.resolve()
    folder = os.path.relpath(anchor, top.resolve()) if anchor.is_relative_to(top.resolve()) else "baselines"
    return BaselineRepo(top, folder=Path(folder).as_posix(), branch=branch)


def _require_git(path: Path) -> Path:
    """The git top of ``path`` (or of its nearest existing parent); InputError when not in a work tree."""
    from skillreach.baselines.records import git_toplevel
    from skillreach.errors import InputError

    anchor = path.resolve()
    while not anchor.exists() and anchor != anchor.parent:
        anchor = anchor.parent
    top = git_toplevel(anchor)
    if top is None:
        raise InputError(f"{path}: not inside a git work tree; --commit needs one (or use --out FILE)")
    return top


# ------------------------------------------------------------------------------------------- compare


def _gates(config: Path | None, overrides: Sequence[str]) -> Any:
    """Gates from the settings (config file > environment > defaults), then ``--gate`` overrides.

    The config file may be a study file: its study-only keys (runtime options, …) are left to the study.
    """
    from skillreach.baselines.gates import parse_gate_overrides
    from skillreach.study import StudyConfig

    return parse_gate_overrides(StudyConfig.build(config).gates, overrides)


def compare_cmd(  # noqa: PLR0917 - a typer command
    base: Path = typer.Argument(..., metavar="BASE", help="The stored baseline record."),
    new: Path = typer.Argument(..., metavar="NEW", help="The new record."),
    strict: bool = typer.Option(False, "--strict", help="An inconclusive result fails too (exit 1)."),
    as_json: bool = typer.Option(False, "--json", help="The comparison as JSON on stdout alone."),
    gate: list[str] = typer.Option(
        [], "--gate", metavar="METRIC=VALUE", help="Override a gate, e.g. activation=-0.1 (repeatable)."
    ),
    config: Path | None = typer.Option(None, "--config", help="Settings file with a [gates] table."),
    staged: bool = typer.Option(
        False,
        "--staged",
        help="Group-sequential gate over planned looks (docs/spec/metrics.md): its verdict and the probes "
        "a staged run saves decide the exit code.",
    ),
    looks: int = typer.Option(4, "--looks", min=1, help="Planned looks of --staged."),
) -> None:
    """Gate NEW against BASE: exit 0 pass, 1 breach, 3 refused (pins differ)."""
    from skillreach.baselines.gates import compare
    from skillreach.baselines.records import read_baseline
    from skillreach.reports.gates import print_comparison

    base_rec, new_rec = read_baseline(base), read_baseline(new)
    gates = _gates(config, gate)
    cmp = compare(base_rec, new_rec, gates, strict)
    if staged:
        from skillreach.cli._staged import staged_outcome

        staged_outcome(base_rec, new_rec, gates, cmp, strict=strict, looks=looks, as_json=as_json)
        return
    if as_json:
        sys.stdout.write(cmp.model_dump_json(indent=2) + "\n")
    else:
        print_comparison(cmp, make_console())
    failure = cmp.failure()
    if failure is not None:
        raise failure  # exit 1, one line on stderr


# ---------------------------------------------------------------------------------------------- show


def show_cmd(
    record: Path = typer.Argument(..., metavar="RECORD", help="A baseline record."),
) -> None:
    """A baseline record's pins and metrics (value, 95 % clustered interval, probes, cases)."""
    from rich.table import Table

    from skillreach.baselines.records import METRICS, read_baseline

    rec = read_baseline(record)
    console = make_console(soft_wrap=True)  # hashes stay on one line
    console.print(f"[bold]{rec.baseline_id}[/]  ({rec.created_at})")
    origin = {"git": "", "uncommitted": " (uncommitted changes: content digest)", "content": " (outside git)"}
    console.print(f"  skill    {rec.skill} {rec.skill_version}{origin[rec.skill_version_origin]}")
    commit = f" (commit {rec.corpus_commit[:12]})" if rec.corpus_commit else ""
    console.print(f"  corpus   {rec.corpus_version}{commit}")
    console.print(f"  model    {rec.model}   runtime {rec.runtime}   runs per case {rec.runs_per_case}")
    console.print(
        f"  rubric   {rec.rubric_version or 'none'}"
        + (f" (judge {rec.judge_model})" if rec.judge_model else "")
    )
    console.print(f"  cases    {rec.cases.positive} positive, {rec.cases.negative} negative")
    table = Table(title_justify="left")
    for col, just in (
        ("metric", "left"),
        ("value", "right"),
        ("95% CI", "right"),
        ("probes", "right"),
        ("cases", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for m in METRICS:
        mv = rec.metrics.get(m)
        if mv is None:
            table.add_row(m, "–", "–", "0", "0")
        else:
            table.add_row(
                m, f"{mv.value:.3f}", f"[{mv.ci95[0]:.3f}, {mv.ci95[1]:.3f}]", str(mv.n), str(mv.cases)
            )
    console.print(table)
    u = rec.uplift
    if u is None:
        console.print("  uplift   not measured (skillreach uplift SKILL --json, then record --uplift)")
    else:
        runs = f"{u.attempts} runs per case" if u.attempts else None
        how = ", ".join(x for x in (u.runtime, u.model, runs) if x)
        console.print(f"  uplift   {u.line()}" + (f" ({how})" if how else ""), markup=False)


# -------------------------------------------------------------------------------------------- status


def status_cmd(
    baselines_dir: Path = typer.Option(Path("baselines"), "--baselines", help="Folder of stored baselines."),
    model: str | None = typer.Option(None, "--model", help="The model now configured (alias or snapshot)."),
    judge_model: str | None = typer.Option(None, "--judge-model", help="The judge now configured."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout alone."),
    branch: str = typer.Option(
        "skillreach/baselines", "--branch", help="The service's baseline branch (what waits there is shown)."
    ),
) -> None:
    """Every stored baseline: pins, age, current or expired (model, corpus, rubric or runtime changed),
    candidates waiting for `baseline accept`, and the service's commits not merged yet."""
    from datetime import UTC, datetime

    from rich.table import Table

    from skillreach.baselines.record_store import BaselineRepo
    from skillreach.errors import InputError, NotFoundError

    files = sorted(baselines_dir.glob("*.json")) if baselines_dir.is_dir() else []
    try:
        service: BaselineRepo | None = _work_tree_repo(baselines_dir, branch=branch)
    except InputError:  # not in git: the files alone
        service = None
    candidates = service.skills(candidates=True) if service is not None else []
    waiting = service.waiting() if service is not None else []
    if not files and not candidates and not waiting:
        raise NotFoundError(
            f"{baselines_dir}: no baseline records; record one with skillreach baseline record"
        )
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for f in files:
        rec, reasons = _current_expiry(f, model=model, judge_model=judge_model)
        created = datetime.fromisoformat(rec.created_at.replace("Z", "+00:00"))
        rows.append({"file": str(f), "skill": rec.skill, "baseline_id": rec.baseline_id,
                     "model": rec.model, "runtime": str(rec.runtime), "corpus_version": rec.corpus_version,
                     "age_days": round((now - created).total_seconds() / 86400, 1),
                     "expired": bool(reasons), "reasons": reasons})
    if as_json:
        sys.stdout.write(json.dumps({"baselines": rows, "candidates": candidates, "waiting": waiting},
                                    indent=2, ensure_ascii=False) + "\n")
        return
    console = make_console()
    table = Table(title=f"baselines in {baselines_dir}", title_justify="left")
    for col in ("baseline", "model", "runtime", "age (days)", "status", "why"):
        table.add_column(col, overflow="fold")  # never cut a value (CI logs are read, not hovered)
    for r in rows:
        status = "[red]expired[/]" if r["expired"] else "[green]current[/]"
        table.add_row(str(r["baseline_id"]), r["model"], r["runtime"], f"{r['age_days']:g}", status,
                      "; ".join(r["reasons"]) or "")
    console.print(table)
    for r in rows:  # the reasons whole, one line each: a table cell may fold them
        if r["expired"]:
            console.print(f"{r['baseline_id']}: expired — {'; '.join(r['reasons'])}", markup=False,
                          highlight=False, soft_wrap=True)
    if candidates:
        console.print(f"candidates waiting on {branch} (a gate breached or left a drop undecided; "
                      f"accept with skillreach baseline accept NAME): {', '.join(candidates)}")
    if waiting:
        console.print(f"{len(waiting)} commit(s) on {branch} not merged yet:")
        for line in waiting:
            console.print(f"  {line}", markup=False, highlight=False)


def accept_cmd(
    name: str = typer.Argument(..., metavar="NAME", help="The skill whose candidate record to accept."),
    baselines_dir: Path = typer.Option(Path("baselines"), "--baselines", help="Folder of stored baselines."),
    branch: str = typer.Option(
        "skillreach/baselines", "--branch", help="The service's baseline branch, where candidates wait."
    ),
) -> None:
    """Accept a skill's candidate record (one a gate breached during re-baselining) as its baseline, in
    its own commit: on the service branch when the candidate waits there, else in the working tree."""
    from skillreach.errors import NotFoundError

    service = _work_tree_repo(baselines_dir, branch=branch)
    repo = service if service.read(name, candidate=True) is not None else _work_tree_repo(baselines_dir)
    if repo.read(name, candidate=True) is None:
        raise NotFoundError(f"skill {name!r}: no candidate record on {branch} or under "
                            f"{baselines_dir}/candidates; see skillreach baseline status")
    cand = repo.read(name, candidate=True)
    done = repo.commit(subject=f"baseline accept {name}: candidate {cand.baseline_id} becomes the baseline",
                       why=["accepted by a person after a gate breached during re-baselining"], accept=[name])
    where = branch if repo.branch else "the working tree"
    _err_console().print(f"accepted {cand.baseline_id} as {name}'s baseline on {where} "
                         f"(commit {(done.sha or '')[:12]})")


def _corpus_path(record: BaselineRecord, anchor: Path) -> Path:
    """The query set a record was measured on (``corpus_path``), resolved against the git top of
    ``anchor``; records of the older form name it in ``corpus_version`` (``path@digest``)."""
    from skillreach.baselines.records import git_toplevel

    shown = record.corpus_path or record.corpus_version.rsplit("@", 1)[0]
    p = Path(shown)
    if p.is_absolute():
        return p
    top = git_toplevel(anchor.resolve())
    return (top / p) if top is not None else p


def _current_expiry(
    path: Path, *, model: str | None, judge_model: str | None
) -> tuple[BaselineRecord, list[str]]:
    from skillreach.baselines.records import corpus_version, current_rubric_version, expiry, read_baseline
    from skillreach.errors import SkillreachError
    from skillreach.queries.sets import load_query_set

    rec = read_baseline(path)
    qpath = _corpus_path(rec, path.parent)
    try:
        qs = load_query_set(qpath)
    except SkillreachError as exc:
        return rec, [f"corpus {qpath} unreadable: {exc.message}"]
    corpus = corpus_version(qs)
    rubric = current_rubric_version(qs, rec.skill, judge_model or rec.judge_model)
    return rec, expiry(rec, corpus=corpus, model=model, rubric=rubric)


# --------------------------------------------------------------------------------------------- check


def _run_study(cfg: StudyConfig, judge_model: str | None, in_process: bool) -> Any:
    """One study of ``check``, by the study flow (tracked by Prefect when a server answers and
    ``in_process`` is off). A check probes afresh: the folder's earlier probes and grades are dropped."""
    from skillreach.cli.run_cmds import run_study
    from skillreach.study.grading import GRADED_FILE

    out = cfg.out or Path(".skillreach") / "check"
    from skillreach._io.paths import ensure_folder

    ensure_folder(out, flag="--out")
    cfg = cfg.model_copy(update={"out": out, "judge_model": judge_model or cfg.judge_model})
    for stale in ("probes.jsonl", GRADED_FILE):
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
) -> None:
    """Re-probe changed skills and gate them against their stored baselines (exit 1 on a breach or an
    inconclusive gate; ``--lenient`` lets an inconclusive gate pass)."""
    from skillreach.baselines.gates import compare
    from skillreach.baselines.records import changed_skills, read_baseline, record_baseline, resolve_since
    from skillreach.errors import GateFailed, InputError, RefusedError
    from skillreach.reports.gates import print_comparison
    from skillreach.study import StudyConfig

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
    changes = changed_skills(dirs, rev)
    console.print(f"comparing with {rev[:12]} ({how})")
    if changes.added or changes.removed:
        console.print(
            "routing table changed"
            + (f": added {', '.join(changes.added)}" if changes.added else "")
            + (f"; removed {', '.join(changes.removed)}" if changes.removed else "")
            + " — every skill is re-checked"
        )
    to_check = changes.to_check
    gates = _gates(config, gate)
    broken = [
        {"skill": path, "status": "unparseable", "message": f"{path}:{line}: {what}"}
        for path, line, what in changes.problems
    ]
    do_annotate = annotations if annotations is not None else os.environ.get("GITHUB_ACTIONS") == "true"
    results: list[dict[str, Any]] = list(broken)
    lines: list[str] = [
        _annotate("error", path, "skillreach: SKILL.md does not parse", f"line {line}: {what}")
        for path, line, what in changes.problems
    ]
    if not to_check and not broken:
        console.print("no skill changed; nothing to check")
    # group by the pins a study needs
    groups: dict[tuple[str, str, str, int], list[tuple[str, BaselineRecord]]] = {}
    for name in to_check:
        bpath = baselines_dir / f"{name}.json"
        skill_file = changes.skill_files.get(name)
        if not bpath.is_file():
            msg = (
                f"no baseline for {name}: record one with skillreach baseline record --skill {name} --commit"
            )
            results.append({"skill": name, "status": "no baseline", "message": msg})
            lines.append(_annotate("warning", skill_file, "skillreach: no baseline", msg))
            continue
        rec = read_baseline(bpath)
        _, reasons = _current_expiry(bpath, model=model, judge_model=None)
        if reasons:
            msg = f"baseline {rec.baseline_id} is expired ({'; '.join(reasons)}); re-record it, not compared"
            results.append({"skill": name, "status": "expired", "message": msg})
            lines.append(_annotate("error", skill_file, "skillreach: baseline expired", msg))
            continue
        qpath = _corpus_path(rec, bpath.parent)
        key = (str(qpath), runtime or rec.runtime.name, model or rec.model, rec.runs_per_case)
        groups.setdefault(key, []).append((name, rec))
    for (qpath_s, rt, mdl, runs), members in groups.items():
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
            if not as_json:
                print_comparison(cmp, console)
            results.append(
                {"skill": name, "status": cmp.verdict.value, "comparison": cmp.model_dump(mode="json")}
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
    if "breach" in statuses or "unparseable" in statuses or (strict and "inconclusive" in statuses):
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
            fh.write(strip_control(_step_summary(rev, how, changes, results, code)))
    if as_json:
        payload = {"since": rev, "how": how, "checked": to_check, "results": results, "exit_code": code}
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    else:
        for r in results:
            if r["status"] in ("no baseline", "expired", "refused", "unparseable"):
                console.print(f"[yellow]{r['skill']}: {r['status']}[/]: {r['message']}")
        console.print(f"check: exit {code}")
    failed = [
        str(r["skill"])
        for r in results
        if r["status"] in ("breach", "unparseable") or (strict and r["status"] == "inconclusive")
    ]
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
        raise RefusedError(f"check: not compared: {', '.join(held)}; re-record their baselines")


def _undecided(results: list[dict[str, Any]]) -> str:
    """What would decide each inconclusive gate, e.g. ``demo activation: 12 cases at 1 runs each (now 7)``."""
    parts: list[str] = []
    for r in results:
        for g in (r.get("comparison") or {}).get("results", []):
            if g["verdict"] != "inconclusive":
                continue
            power = g.get("power") or {}
            need = power.get("cases_needed")
            runs = power.get("runs_per_case_needed")
            how = [f"{need} cases at {power.get('runs_per_case')} runs each (now {g['k']})"] if need else []
            if runs:
                how.append(f"{runs} runs per case (now {power.get('runs_per_case')})")
            parts.append(
                f"{r['skill']} {g['metric']}"
                + (f" ({g['cohort']})" if g["cohort"] != "paired" else "")
                + (": " + " or ".join(how) + " would decide it" if how else ": no feasible study decides it")
            )
    return "; ".join(parts)


def _step_summary(rev: str, how: str, changes: Any, results: list[dict[str, Any]], code: int) -> str:
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
    if changes.added or changes.removed:
        out.append(
            f"Routing table changed (added: {', '.join(changes.added) or '–'}; removed: "
            f"{', '.join(changes.removed) or '–'}): every skill re-checked.\n"
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
    baseline_app.command("record")(record_cmd)
    baseline_app.command("compare")(compare_cmd)
    baseline_app.command("status")(status_cmd)
    baseline_app.command("accept")(accept_cmd)
    baseline_app.command("show")(show_cmd)
    app.add_typer(baseline_app, name="baseline")
    app.command("check")(check_cmd)
