"""``skillreach baseline rebaseline --rev REV``: re-baselining from the command line, for teams without
the service. The skills are probed as they are at ``REV`` (a git worktree of their own, never the user's
tree), each gated against its stored record first: the ok ones (and first records) are recorded, a
breached or undecided drop is kept as a *candidate* — a bar goes down only through ``baseline accept`` —
and everything goes into one commit whose message says why."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from skillreach._io.console import make_console
from skillreach.cli.baseline_cmds import _find_skill_folder, _gates, _work_tree_repo, baseline_app

__all__ = ["register"]


@contextlib.contextmanager
def _worktree(top: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``commit``, removed on the way out (the user's tree is never touched)."""
    from skillreach.errors import InputError

    tmp = Path(tempfile.mkdtemp(prefix="skillreach-rebaseline-"))
    where = tmp / "tree"
    proc = subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(where), commit],
        cwd=top, capture_output=True, text=True, check=False, timeout=120,
    )
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(f"--rev {commit[:12]}: git worktree add failed: {proc.stderr.strip()[:300]}")
    try:
        yield where
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=top,
                       capture_output=True, check=False, timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)


def rebaseline_cmd(  # noqa: PLR0917 - a typer command
    rev: str = typer.Option(..., "--rev", help="The revision whose skills are measured (e.g. main)."),
    names: list[str] = typer.Option(
        [], "--skills", help="Skills to re-baseline (repeatable; default: every skill with cases)."
    ),
    missing: bool = typer.Option(
        False,
        "--missing",
        help="Record every skill at REV that has cases in --queries and no record yet (the skills a merge "
        "added): what init's workflow runs after a merge.",
    ),
    skills_dirs: list[Path] = typer.Option(
        [], "--skills-dir", help="Folder(s) of skills, as in the repository (default: ./skills)."
    ),
    queries: Path | None = typer.Option(
        None, "--queries", help="Query set for skills without a record (default: the records' own)."
    ),
    baselines_dir: Path = typer.Option(Path("baselines"), "--baselines", help="Folder of stored baselines."),
    config: Path | None = typer.Option(None, "--config", help="Study/settings file (runtime, gates)."),
    runtime: str | None = typer.Option(None, "--runtime", help="Runtime for skills without a record."),
    model: str | None = typer.Option(None, "--model", help="Model for skills without a record."),
    commit: bool = typer.Option(False, "--commit", help="Commit the records and candidates in one commit."),
    in_process: bool = typer.Option(False, "--in-process", help="Run the studies without Prefect."),
) -> None:
    """Probe the skills as they are at REV, gate each against its stored record, record the ok ones and
    keep breached or undecided drops as candidates (accept them with `skillreach baseline accept`).

    Exit codes: 0 every skill recorded; 1 a skill kept as a candidate (a breach or an undecided drop);
    2 bad input; 3 a stored record not comparable (pins differ).
    """
    from skillreach.baselines.rebaseline import gate_skills
    from skillreach.baselines.records import git_output, git_toplevel, record_baseline
    from skillreach.baselines.scope import base_records
    from skillreach.cli.check_cmds import _run_study
    from skillreach.errors import GateFailed, InputError
    from skillreach.queries.sets import load_query_set
    from skillreach.skills.discovery import discover
    from skillreach.study import StudyConfig

    console = make_console(stderr=True)
    top = git_toplevel(Path.cwd())
    if top is None:
        raise InputError(f"{Path.cwd()}: not inside a git work tree; baseline rebaseline needs one")
    sha = git_output(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top)
    if not sha:
        raise InputError(f"--rev {rev}: no such revision in {top}; fetch it or pass another")
    stored = base_records(top, sha, baselines_dir)
    for problem in stored.problems:
        console.print(f"[yellow]note:[/] {problem}", highlight=False)
    dirs = list(skills_dirs) or [Path("skills")]
    rel_dirs = [Path(os.path.relpath(d.resolve(), top.resolve())) for d in dirs]
    gates = _gates(config, [])
    with _worktree(top, sha) as tree:
        tree_dirs = [tree / d for d in rel_dirs]
        absent = [str(d) for d, t in zip(rel_dirs, tree_dirs, strict=True) if not t.is_dir()]
        if absent:
            raise InputError(f"--skills-dir {absent[0]}: no such folder at {rev}; pass --skills-dir DIR")
        present = {s.name for s in discover(tree_dirs).skills}
        if missing and names:
            raise InputError("--missing records the skills without a record; --skills names others: pass one")
        if missing and queries is None:
            raise InputError("--missing needs the query set of skills without a record: pass --queries FILE")
        if missing:
            wanted = sorted(present - set(stored.records))
        else:
            wanted = list(names) or sorted(set(stored.records) & present)
        unknown = [n for n in wanted if n not in present]
        if unknown:
            where = ", ".join(map(str, rel_dirs))
            raise InputError(f"--skills {unknown[0]}: no such skill at {rev} under {where}")
        # one study per set of pins, like check: (query set, runtime, model, runs per case)
        groups: dict[tuple[str, str | None, str | None, int], list[str]] = {}
        for name in wanted:
            rec = stored.records.get(name)
            key: tuple[str, str | None, str | None, int]
            if rec is not None and rec.corpus_path:
                key = (rec.corpus_path, rec.runtime.name, rec.model, rec.runs_per_case)
            elif queries is not None:
                key = (os.path.relpath(queries.resolve(), top.resolve()), runtime, model, 1)
            else:
                raise InputError(f"{name}: no stored record names its query set; pass --queries FILE")
            groups.setdefault(key, []).append(name)
        new: dict[str, Any] = {}
        for (qrel, rt, mdl, runs), group in groups.items():
            qpath = tree / qrel
            if not qpath.is_file():
                raise InputError(f"{qrel}: no such query set at {rev}; pass --queries FILE")
            with_cases = {q.expected_skill for q in load_query_set(qpath).queries}
            members = [m for m in group if m in with_cases]
            if not members:
                continue
            offline = rt in ("fake", "keyword", "retriever") and mdl == rt
            cfg = StudyConfig.build(
                config, skills=tuple(tree_dirs), queries=qpath,
                **({"runtime": rt} if rt else {}), model=None if offline else mdl, attempts=runs,
                out=Path(".skillreach") / "rebaseline", gate=False,
            )
            console.print(f"probing {', '.join(members)} at {sha[:12]}: {qrel}, runtime {cfg.runtime}")
            art = _run_study(cfg, None, in_process)
            for name in members:
                folder = _find_skill_folder(name, tree_dirs)
                new[name] = record_baseline(art, qpath, name, skill_folder=folder)
    results = gate_skills(wanted, {n: stored.records.get(n) for n in wanted}, new, gates)
    records: list[Any] = []
    candidates: list[Any] = []
    for r in results:
        if r.new is None:
            continue
        dropped = r.status in ("breach", "inconclusive")  # a bar goes down only by baseline accept
        (candidates if dropped else records).append(r.new)
        console.print(f"  {r.skill}: {r.status}" + (" → kept as a candidate" if dropped else " → recorded")
                      + (f" ({r.reason})" if r.reason else ""), highlight=False)
    refused = [r.skill for r in results if r.status == "expired"]
    why = [f"{r.skill}: {r.status}" + (f" ({r.reason})" if r.reason else "") for r in results]
    subject = (
        f"rebaseline at {sha[:12]}: {len(records)} recorded"
        + (f", {len(candidates)} kept as candidates for `skillreach baseline accept`" if candidates else "")
    )
    if commit:
        repo = _work_tree_repo(baselines_dir)
        done = repo.commit(records, subject=subject, why=why, candidates=candidates)
        console.print(f"committed {(done.sha or 'nothing: unchanged')[:12]}: {subject}", highlight=False)
    else:
        from skillreach.baselines.records import write_baseline

        for rec in records:
            write_baseline(rec, baselines_dir / f"{rec.skill}.json")
        for rec in candidates:
            write_baseline(rec, baselines_dir / "candidates" / f"{rec.skill}.json")
        console.print(f"{subject} (written, not committed: pass --commit)", highlight=False)
    if candidates:
        raise GateFailed(
            "rebaseline: kept as candidates (a drop the gate did not clear): "
            + ", ".join(c.skill for c in candidates)
            + "; accept each with `skillreach baseline accept NAME` once a person has looked"
        )
    if refused:
        from skillreach.errors import RefusedError

        raise RefusedError(f"rebaseline: not comparable: {', '.join(refused)}")


def register(app: typer.Typer) -> None:
    baseline_app.command("rebaseline")(rebaseline_cmd)
