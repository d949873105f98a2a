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

from skillreach._io.console import make_console

if TYPE_CHECKING:
    from rich.console import Console

    from skillreach.baselines.records import BaselineRecord

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
    """The query set a study ran, as the study was given it (``study.json``'s ``source``, when that file
    still holds the same set: a record then names a path that travels with the repository), else the
    study folder's own copy."""
    from skillreach.errors import NotFoundError, SkillreachError
    from skillreach.queries.sets import load_query_set
    from skillreach.study.folder import read_study_file

    try:
        study = read_study_file(artifact_path.parent)
    except NotFoundError:
        study = None  # an older folder: look for the copies it may hold (a damaged study.json is refused)
    if study is not None:
        source = study.query_set.get("source")
        if isinstance(source, str) and source and Path(source).is_file():
            try:
                same = load_query_set(Path(source)).compute_digest() == study.query_set.get("digest")
            except SkillreachError:
                same = False
            if same:
                return Path(source)
        return study.query_set_path(artifact_path.parent)
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
    from skillreach.errors import NotFoundError
    from skillreach.study.folder import read_study_file

    try:
        judge = read_study_file(artifact_path.parent).judge_model
    except NotFoundError:
        judge = None  # an older folder (a damaged study.json is refused)
    return _judge_model_default(judge)


def _judge_model_default(given: str | None) -> str:
    from skillreach.study.judge import default_judge_model

    return given or default_judge_model()


# ------------------------------------------------------------------------------------------- record


def record_cmd(  # noqa: PLR0917 - a typer command: one parameter per option
    artifact: Path = typer.Option(..., "--artifact", help="artifact.json of the study."),
    skill: list[str] = typer.Option(
        [], "--skill", help="A skill to record (repeatable); --all records every skill with cases."
    ),
    every: bool = typer.Option(False, "--all", help="Record every skill with positive cases in the study."),
    queries: Path | None = typer.Option(
        None,
        "--queries",
        help="The query set the study ran, as the repository holds it (default: the file the study was "
        "given, else the study folder's copy).",
    ),
    skills: list[Path] = typer.Option(
        [], "--skills", help="Folder(s) holding the skills, for their git version (default: ./skills)."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Write the record here (one skill; default: stdout)."
    ),
    commit: bool = typer.Option(
        False, "--commit", help="Write <baselines>/<skill>.json for each skill and commit them in one commit."
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
        "(one skill; default: uplift-SKILL.json beside the artifact, when there is one).",
    ),
) -> None:
    """Build the baseline records of skills from one study (spec/interfaces.md). Exit codes: 0 written;
    2 bad input."""
    from skillreach.baselines.records import changes_between, read_baseline, write_baseline
    from skillreach.errors import InputError

    if every and skill:
        raise InputError("--all and --skill contradict each other; pass one")
    if not every and not skill:
        raise InputError("name the skills to record: --skill NAME (repeatable) or --all")
    if len(skill) != len(set(skill)):
        raise InputError(f"--skill names {sorted({s for s in skill if skill.count(s) > 1})[0]!r} twice")
    art = _read_artifact_any(artifact)
    qpath = queries or _guess_queries(artifact)
    if qpath is None:
        raise InputError(f"{artifact}: cannot tell which query set the study ran; pass --queries FILE")
    names = _skills_with_cases(art, qpath) if every else list(skill)
    if not names:
        raise InputError(f"{qpath}: no skill has a positive case; nothing to record")
    if (len(names) > 1 or every) and out is not None:
        raise InputError("--out writes one record; with several skills pass --commit (or --baselines DIR)")
    if len(names) > 1 and uplift is not None:
        raise InputError("--uplift is one skill's report; record that skill alone with it")
    console = _err_console()
    study_copy = artifact.parent.resolve()
    if queries is None and qpath.resolve().is_relative_to(study_copy):
        console.print(
            f"[yellow]note:[/] the records name the study folder's copy of the query set ({qpath}); a fresh "
            "clone without that folder cannot read them: pass --queries FILE (the set your repository holds)"
        )
    dirs = list(skills) or [Path("skills")]
    judge = judge_model or _study_judge(artifact)
    records = [
        _record_one(
            art, artifact, qpath, name, dirs=dirs, judge=judge, uplift=uplift, explicit_dirs=bool(skills)
        )
        for name in names
    ]
    if len(records) == 1 and not commit and out is None:
        sys.stdout.write(records[0].model_dump_json(indent=2) + "\n")
        return
    if commit:
        _require_git(baselines_dir)
    from skillreach._io.paths import ensure_parent

    previous: dict[str, BaselineRecord | None] = {}
    for record in records:
        target = out if out is not None else baselines_dir / f"{record.skill}.json"
        previous[record.skill] = None
        if target.is_file():
            from skillreach.errors import TamperedError

            try:
                previous[record.skill] = read_baseline(target)
            except TamperedError as exc:  # re-recording is the remedy: replace it, and say so
                console.print(f"[yellow]note:[/] replacing an unsealed or edited record: {exc.message}")
        write_baseline(record, ensure_parent(target, flag="--out" if out is not None else "--baselines"))
        _print_recorded(record, previous[record.skill], target, console)
    if commit:
        repo = _work_tree_repo(baselines_dir)
        if len(records) == 1:
            rec = records[0]
            changes = "; ".join(changes_between(previous[rec.skill], rec))
            subject = f"baseline {rec.skill}: {changes}"
        else:
            subject = f"baselines: {len(records)} skills recorded from {artifact}"
        why = [f"{r.skill}: {'; '.join(changes_between(previous[r.skill], r))}" for r in records]
        done = repo.commit(records, subject=subject, why=why if len(records) > 1 else ())
        if done.sha is None:
            raise InputError(f"{baselines_dir}: the baselines are unchanged; nothing to commit")
        console.print(f"  committed {done.sha[:12]}: {subject}")


def _skills_with_cases(art: Any, qpath: Path) -> list[str]:
    """The skills of the study's catalog with at least one positive case in the query set."""
    from skillreach.queries.sets import load_query_set

    expected = {q.expected_skill for q in load_query_set(qpath).queries if q.expected_skill}
    catalog = getattr(getattr(art, "catalog", None), "skills", None) or sorted(expected)
    return sorted(set(catalog) & expected)


def _record_one(
    art: Any,
    artifact: Path,
    qpath: Path,
    skill: str,
    *,
    dirs: list[Path],
    judge: str,
    uplift: Path | None,
    explicit_dirs: bool,
) -> BaselineRecord:
    from skillreach.author.uplift import read_uplift_report, recorded_uplift, uplift_file
    from skillreach.baselines.records import record_baseline
    from skillreach.errors import InputError

    folder = _find_skill_folder(skill, dirs)
    if folder is None and explicit_dirs:
        raise InputError(
            f"skill {skill!r}: no SKILL.md with that name under {', '.join(map(str, dirs))}; "
            "pass --skills DIR"
        )
    beside = uplift_file(artifact if artifact.is_dir() else artifact.parent, skill)
    if uplift is None and beside.is_file():
        uplift = beside
    lift = recorded_uplift(read_uplift_report(uplift, skill), uplift) if uplift is not None else None
    record = record_baseline(art, qpath, skill, skill_folder=folder, judge_model=judge, uplift=lift)
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
    return record


def _print_recorded(
    record: BaselineRecord, previous: BaselineRecord | None, target: Path, console: Console
) -> None:
    from skillreach.baselines.records import cohort_split, metrics_line
    from skillreach.reports.gates import fmt_value

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
    """Gate NEW against BASE over the cases identical in both.

    Exit codes: 0 pass; 1 breach (or inconclusive under --strict); 2 bad input (an unreadable or edited
    record); 3 refused (model, rubric or runtime version differ, or no positive case is identical)."""
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
    """A baseline record's pins and metrics (value, 95 % clustered interval, probes, cases).

    Exit codes: 0 shown; 2 an unreadable or edited record."""
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


def _service_baselines(
    baselines_dir: Path | None, branch: str | None, service: str | None
) -> tuple[Path, str]:
    """The baselines folder and branch ``baseline status`` describes: ``--baselines`` as given; else the
    service's (``--service``, ``$SKILLREACH_SERVICE``, the folder serve runs in or a parent — its skills
    repository's baselines and its branch), said in one line on stderr; else ``./baselines``, when there is
    one, or the service the Prefect API names."""
    from skillreach.baselines.record_store import DEFAULT_BRANCH
    from skillreach.cli._service import locate, service_line
    from skillreach.service.instance import SERVICE_ENV

    if baselines_dir is not None:
        return baselines_dir, branch or DEFAULT_BRANCH
    info, how = locate(service)
    named = bool(service or os.environ.get(SERVICE_ENV)) or how == "this folder"
    if info is not None and info.repository and (named or not Path("baselines").is_dir()):
        print(f"baseline status: {service_line(info, how)}", file=sys.stderr)
        return Path(info.repository) / info.baselines_dir, branch or info.baselines_branch
    return Path("baselines"), branch or DEFAULT_BRANCH


def status_cmd(  # noqa: PLR0917 - a typer command: one parameter per option
    baselines_dir: Path | None = typer.Option(
        None, "--baselines", help="Folder of stored baselines (default: the service's, else ./baselines)."),
    model: str | None = typer.Option(None, "--model", help="The model now configured (alias or snapshot)."),
    judge_model: str | None = typer.Option(None, "--judge-model", help="The judge now configured."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout alone."),
    branch: str | None = typer.Option(
        None, "--branch",
        help="The service's baseline branch (what waits there is shown; default: the service's)."),
    service_folder: str | None = typer.Option(
        None, "--service", metavar="FOLDER", help="The folder `skillreach serve` runs in (its baselines)."),
) -> None:
    """Every stored baseline: pins, age, current, stale (cases added, changed or removed since: still
    gated) or expired (model, rubric or runtime changed, no positive case left, or recorded before cases
    were pinned by content), candidates waiting for `baseline accept`, and the service's commits not
    merged yet. Run in the service's folder (or with --service), the service's repository and branch.

    Exit codes: 0 listed (expired records are shown, not failed); 2 an unreadable or edited record."""
    from datetime import UTC, datetime

    from rich.table import Table

    from skillreach.baselines.record_store import BaselineRepo
    from skillreach.errors import InputError, NotFoundError

    baselines_dir, branch = _service_baselines(baselines_dir, branch, service_folder)
    files = sorted(baselines_dir.glob("*.json")) if baselines_dir.is_dir() else []
    try:
        service: BaselineRepo | None = _work_tree_repo(baselines_dir, branch=branch)
    except InputError:  # not in git: the files alone
        service = None
    candidates = service.skills(candidates=True) if service is not None else []
    waiting = service.waiting() if service is not None else []
    now = datetime.now(UTC)
    found: list[tuple[str, BaselineRecord, list[str], list[str]]] = []
    missing: dict[str, str] = {}  # where → "its query set … is missing …": not expired, not gated
    for f in files:
        rec, reasons, stale = _current_expiry(f, model=model, judge_model=judge_model)
        if reasons and reasons[0].startswith(_MISSING_PREFIX):
            missing[str(f)], reasons = reasons[0], []
        found.append((str(f), rec, reasons, stale))
    # the records the service keeps on its branch for skills the working tree has none of yet
    in_tree = {f.stem for f in files}
    for skill in [s for s in (service.skills() if service is not None else []) if s not in in_tree]:
        assert service is not None
        kept = service.read(skill)
        if kept is None:
            continue
        qpath = _corpus_path(kept, baselines_dir)
        where = f"{branch}:{service.path_of(skill)}"
        if qpath.is_file():
            reasons, stale = _record_expiry(kept, qpath, model=model, judge_model=judge_model)
        else:
            missing[where], reasons, stale = _query_set_missing(kept, qpath), [], []
        found.append((where, kept, reasons, stale))
    if not found and not candidates and not waiting:
        raise NotFoundError(
            f"{baselines_dir}: no baseline records; record one with skillreach baseline record"
        )
    rows: list[dict[str, Any]] = []
    for where, rec, reasons, stale in found:
        created = datetime.fromisoformat(rec.created_at.replace("Z", "+00:00"))
        rows.append({"file": where, "skill": rec.skill, "baseline_id": rec.baseline_id,
                     "model": rec.model, "runtime": str(rec.runtime), "corpus_version": rec.corpus_version,
                     "age_days": round((now - created).total_seconds() / 86400, 1),
                     "expired": bool(reasons), "reasons": reasons, "stale": stale,
                     "query_set_missing": missing.get(where)})
    if as_json:
        sys.stdout.write(json.dumps({"baselines": rows, "candidates": candidates, "waiting": waiting},
                                    indent=2, ensure_ascii=False) + "\n")
        return
    console = make_console()
    table = Table(title=f"baselines in {baselines_dir}", title_justify="left")
    for col in ("baseline", "model", "runtime", "age (days)", "status", "why"):
        table.add_column(col, overflow="fold")  # never cut a value (CI logs are read, not hovered)
    for r in rows:
        status = (
            "[red]query set missing[/]" if r["query_set_missing"]
            else "[red]expired[/]" if r["expired"]
            else "[yellow]stale[/]" if r["stale"]
            else "[green]current[/]"
        )
        table.add_row(str(r["baseline_id"]), r["model"], r["runtime"], f"{r['age_days']:g}", status,
                      r["query_set_missing"] or "; ".join(r["reasons"] or r["stale"]) or "")
    console.print(table)
    from_branch = [r["skill"] for r in rows if r["file"].startswith(f"{branch}:")]
    if from_branch:
        console.print(f"read from the service's branch {branch} (not in {baselines_dir} yet; merge it to "
                      f"keep them): {', '.join(from_branch)}", markup=False, highlight=False, soft_wrap=True)
    for r in rows:  # the reasons whole, one line each: a table cell may fold them
        if r["query_set_missing"]:
            console.print(f"{r['baseline_id']}: {r['query_set_missing']}", markup=False, highlight=False,
                          soft_wrap=True)
        elif r["expired"]:
            console.print(f"{r['baseline_id']}: expired — {'; '.join(r['reasons'])}", markup=False,
                          highlight=False, soft_wrap=True)
        elif r["stale"]:
            console.print(f"{r['baseline_id']}: {'; '.join(r['stale'])} (still gated on the cases it shares; "
                          "re-baseline to record them)", markup=False, highlight=False, soft_wrap=True)
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
    """Accept a skill's candidate record (one a gate breached, or left undecided, during re-baselining)
    as its baseline, in its own commit: on the service branch when the candidate waits there, else in the
    working tree.

    Exit codes: 0 accepted; 2 no candidate for NAME, or no git work tree."""
    from skillreach.baselines.record_store import accept_candidate
    from skillreach.errors import NotFoundError

    service = _work_tree_repo(baselines_dir, branch=branch)
    done = accept_candidate([service, _work_tree_repo(baselines_dir)], name)
    if done is None:
        raise NotFoundError(f"skill {name!r}: no candidate record on {branch} or under "
                            f"{baselines_dir}/candidates; see skillreach baseline status")
    where = branch if done.repo.branch else "the working tree"
    _err_console().print(f"accepted {done.record.baseline_id} as {name}'s baseline on {where} "
                         f"(commit {(done.committed.sha or '')[:12]})")


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


_MISSING_PREFIX = "its query set "


def _query_set_missing(record: BaselineRecord, qpath: Path) -> str:
    """What ``baseline status`` says of a record whose query set is not in this checkout (not
    *expired*: nothing about the record changed, the file is not here)."""
    return (
        f"{_MISSING_PREFIX}{record.corpus_path or qpath} is missing in this checkout; commit it, or "
        "re-record the baseline with --queries FILE"
    )


def _current_expiry(
    path: Path, *, model: str | None, judge_model: str | None
) -> tuple[BaselineRecord, list[str], list[str]]:
    """(record, why it is expired, what makes it stale — e.g. ``3 cases added since recorded``)."""
    from skillreach.baselines.records import read_baseline

    rec = read_baseline(path)
    qpath = _corpus_path(rec, path.parent)
    if not qpath.is_file():
        return rec, [_query_set_missing(rec, qpath)], []
    reasons, stale = _record_expiry(rec, qpath, model=model, judge_model=judge_model)
    return rec, reasons, stale


def _record_expiry(
    rec: BaselineRecord, qpath: Path, *, model: str | None, judge_model: str | None
) -> tuple[list[str], list[str]]:
    """(why ``rec`` is expired against the query set at ``qpath``, what makes it stale)."""
    from skillreach.baselines.records import current_rubric_version, expiry, staleness
    from skillreach.errors import SkillreachError
    from skillreach.queries.sets import load_query_set

    try:
        qs = load_query_set(qpath)
    except SkillreachError as exc:
        return [f"corpus {qpath} unreadable: {exc.message}"], []
    rubric = current_rubric_version(qs, rec.skill, judge_model or rec.judge_model)
    return expiry(rec, query_set=qs, model=model, rubric=rubric), staleness(rec, qs)


def register(app: typer.Typer) -> None:
    baseline_app.command("record")(record_cmd)
    baseline_app.command("compare")(compare_cmd)
    baseline_app.command("status")(status_cmd)
    baseline_app.command("accept")(accept_cmd)
    baseline_app.command("show")(show_cmd)
    app.add_typer(baseline_app, name="baseline")
