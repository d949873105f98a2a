"""What in the yardstick a pull request changes, read against the base revision (the trusted side).

A pull request brings skills; it may also bring what they are measured with — query sets (cases and
their labels) and baseline records. ``check`` reads all of that **at the base revision**
(:func:`read_query_set_at`, :func:`~skillreach.baselines.scope.base_records`) and names what the pull
request changed:

- :func:`diff_query_sets`: per query set, the cases the pull request relabelled (another expected
  skill), removed, changed otherwise (text, kind, checks, acceptable skills) and added;
- :class:`RecordChange`: a baseline record the pull request deletes, edits or adds (and whether its digest
  still holds: *tampered*);
- :class:`Yardstick`: all of it, and what fails: a relabel, a removal, a deleted or edited record — one
  line each, naming the file and what changed — unless a person asked for it (``--accept NAME``, or a
  ``Skillreach-Accept: NAME`` trailer on a commit of the pull request), which the summary then states.

:func:`yardstick_set`: the set ``check`` probes — every case as it is at the base (a relabel or a
rewording in the pull request cannot move the bar), plus the cases the pull request adds (a new skill's
own, a grown corpus's new cases); a case whose change a person accepted is taken as the pull request has
it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from skillreach.baselines.records import git_output
from skillreach.errors import InputError, SkillreachError, TamperedError
from skillreach.models import Frozen, QuerySet

__all__ = [
    "ACCEPT_ALL",
    "TRAILER",
    "QuerySetChange",
    "RecordChange",
    "Yardstick",
    "accepted_by_trailers",
    "diff_query_sets",
    "read_query_set_at",
    "record_changes",
    "yardstick_set",
]

TRAILER = "Skillreach-Accept"
"""The commit trailer a person writes to accept a change of the yardstick (``Skillreach-Accept: NAME``)."""
ACCEPT_ALL = "*"
"""``--accept '*'``: every change of the yardstick this pull request makes is accepted."""
MAX_LISTED = 5
"""Case ids a line names before it says how many more."""


def _label(skill: str | None) -> str:
    return skill if skill is not None else "no skill"


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_LISTED])
    return shown + (f" and {len(ids) - MAX_LISTED} more" if len(ids) > MAX_LISTED else "")


def _cases(n: int) -> str:
    return f"{n} case{'' if n == 1 else 's'}"


class QuerySetChange(Frozen):
    """One query set as the pull request has it, against the base revision."""

    path: str
    """Relative to the repository's top."""
    at_base: bool
    """The file exists at the base revision (else every case is added)."""
    relabelled: dict[str, tuple[str | None, str | None]] = Field(default_factory=dict)
    """Case id → (expected skill at the base, in the pull request)."""
    removed: dict[str, str | None] = Field(default_factory=dict)
    """Case id → its expected skill at the base."""
    changed: tuple[str, ...] = ()
    """Same id and label, other content (text, kind, checks, acceptable skills)."""
    added: dict[str, str | None] = Field(default_factory=dict)
    """Case id → its expected skill in the pull request."""

    @property
    def any(self) -> bool:
        return bool(self.relabelled or self.removed or self.changed or self.added)

    def relabel_lines(self, accepted: set[str], *, taken: bool = False) -> list[str]:
        """``evals/queries.yaml: 3 cases relabelled from release-notes to azd-publish (a, b, c)``, one per
        pair of labels: those not ``accepted`` (``taken``: only those accepted)."""
        pairs: dict[tuple[str | None, str | None], list[str]] = {}
        for qid, pair in sorted(self.relabelled.items()):
            pairs.setdefault(pair, []).append(qid)
        out = []
        for (old, new), ids in pairs.items():
            if _accepted(accepted, old, new) != taken:
                continue
            out.append(f"{self.path}: {_cases(len(ids))} relabelled from {_label(old)} to {_label(new)} "
                       f"({_ids(ids)})")
        return out

    def removal_lines(self, accepted: set[str], *, taken: bool = False) -> list[str]:
        by: dict[str | None, list[str]] = {}
        for qid, skill in sorted(self.removed.items()):
            by.setdefault(skill, []).append(qid)
        return [
            f"{self.path}: {_cases(len(ids))} of {_label(skill)} removed ({_ids(ids)})"
            for skill, ids in by.items()
            if _accepted(accepted, skill) == taken
        ]

    def note_lines(self) -> list[str]:
        """What never fails: cases added, cases reworded (probed as they are at the base)."""
        out = []
        if self.added:
            by: dict[str | None, int] = {}
            for skill in self.added.values():
                by[skill] = by.get(skill, 0) + 1
            per = ", ".join(f"{n} for {_label(s)}" for s, n in sorted(by.items(), key=lambda p: _label(p[0])))
            what = "new query set" if not self.at_base else f"{_cases(len(self.added))} added"
            out.append(f"{self.path}: {what} ({per})")
        if self.changed:
            out.append(f"{self.path}: {_cases(len(self.changed))} changed ({_ids(list(self.changed))}): "
                       "gated as they are at the base revision")
        return out


def _accepted(accepted: set[str], *skills: str | None) -> bool:
    if not accepted:
        return False
    return ACCEPT_ALL in accepted or any(s in accepted for s in skills if s is not None)


class RecordChange(Frozen):
    """A baseline record the pull request deletes, edits or adds (never read: the base is the judge)."""

    path: str
    skill: str | None
    """The skill whose record it is at the base (``None``: a file the base does not have)."""
    status: Literal["deleted", "edited", "added"]
    tampered: bool = False
    """The pull request's file does not verify (its digest does not match its content)."""

    def line(self) -> str:
        what = {"deleted": "deleted", "edited": "edited", "added": "added (recorded on merge instead)"}
        return f"{self.path}: {what[self.status]}" + (
            " — and its digest does not match its content" if self.tampered else ""
        )


class Yardstick(Frozen):
    """Everything the pull request changes in what the skills are measured with."""

    rev: str
    query_sets: tuple[QuerySetChange, ...] = ()
    records: tuple[RecordChange, ...] = ()
    accepted: tuple[str, ...] = ()
    """Skills whose yardstick change a person accepted (``*``: all)."""
    accepted_how: str = ""
    """``--accept`` or ``a Skillreach-Accept trailer``."""

    @property
    def _accepted(self) -> set[str]:
        return set(self.accepted)

    def failures(self) -> list[str]:
        """One line per change that fails the check (not accepted)."""
        out: list[str] = []
        for qs in self.query_sets:
            out += qs.relabel_lines(self._accepted) + qs.removal_lines(self._accepted)
        out += [
            r.line() for r in self.records
            if r.status in ("deleted", "edited") and not _accepted(self._accepted, r.skill)
        ]
        return out

    def accepted_lines(self) -> list[str]:
        """The changes a person accepted, as the summary states them."""
        out: list[str] = []
        for qs in self.query_sets:
            out += qs.relabel_lines(self._accepted, taken=True) + qs.removal_lines(self._accepted, taken=True)
        out += [
            r.line() for r in self.records
            if r.status in ("deleted", "edited") and _accepted(self._accepted, r.skill)
        ]
        return out

    def notes(self) -> list[str]:
        out: list[str] = []
        for qs in self.query_sets:
            out += qs.note_lines()
        out += [r.line() for r in self.records if r.status == "added"]
        return out

    def tampered(self) -> list[str]:
        return [r.path for r in self.records if r.tampered]

    @property
    def changed(self) -> bool:
        return bool(self.failures() or self.accepted_lines() or self.notes())

    def skills_accepted(self) -> set[str]:
        """Skills a person accepted that this pull request's yardstick changes do touch."""
        acc = self._accepted
        touched: set[str] = set()
        for qs in self.query_sets:
            for old, new in qs.relabelled.values():
                touched |= {s for s in (old, new) if s is not None}
            touched |= {s for s in qs.removed.values() if s is not None}
        touched |= {r.skill for r in self.records if r.skill is not None and r.status != "added"}
        return touched if ACCEPT_ALL in acc else touched & acc

    def headline(self) -> str:
        """The summary's first line: what in the yardstick changed (or that nothing did)."""
        fails, accepted, notes = self.failures(), self.accepted_lines(), self.notes()
        if not (fails or accepted or notes):
            return "Yardstick unchanged: query sets and baseline records are as at the base revision."
        parts = []
        if fails:
            parts.append("; ".join(fails) + " — not accepted")
        if accepted:
            parts.append("; ".join(accepted) + f" — accepted by {self.accepted_how or 'a person'}")
        if notes:
            parts.append("; ".join(notes))
        return "Yardstick changed: " + "; ".join(parts) + "."


# ------------------------------------------------------------------------------------------ reading


def read_query_set_at(top: Path, rev: str, rel: str, *, max_bytes: int) -> QuerySet | None:
    """The query set ``rel`` (relative to ``top``) as it is at ``rev``; ``None`` when it is not there.

    Read under the query-set reader's limits, from a temporary file of the same name (its suffix says
    its format)."""
    from skillreach.queries.sets import load_query_set

    spec = f"{rev}:{rel}"
    size = git_output(["cat-file", "-s", spec], top)
    if size is None:
        return None
    if not size.isdigit() or int(size) > max_bytes:
        raise InputError(f"{rev[:12]}:{rel}: larger than {max_bytes // 2**20} MiB; not a query set")
    try:
        raw = _git_bytes(["show", spec], top)
    except OSError as exc:
        raise InputError(f"{rev[:12]}:{rel}: cannot read it at the base revision ({exc})") from exc
    with tempfile.TemporaryDirectory(prefix="skillreach-base-queries-") as tmp:
        path = Path(tmp) / Path(rel).name
        path.write_bytes(raw)
        try:
            return load_query_set(path)
        except SkillreachError as exc:
            raise InputError(
                f"{rev[:12]}:{rel}: the base revision's query set does not load "
                f"({exc.message.replace(str(path), Path(rel).name)})"
            ) from exc


def _git_bytes(args: Sequence[str], top: Path) -> bytes:
    import subprocess

    proc = subprocess.run(
        ["git", *args], cwd=top, capture_output=True, check=False, timeout=60,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
    )
    if proc.returncode != 0:
        raise OSError(proc.stderr.decode("utf-8", "replace").strip()[:200] or f"git {args[0]} failed")
    return proc.stdout


def accepted_by_trailers(top: Path, rev: str) -> list[str]:
    """Skills named by ``Skillreach-Accept:`` trailers of the commits after ``rev`` (comma or space
    separated), as a person wrote them on the pull request's commits."""
    out = git_output(
        ["log", f"--format=%(trailers:key={TRAILER},valueonly,separator=%x2C)", f"{rev}..HEAD"], top
    )
    names: list[str] = []
    for chunk in (out or "").replace("\n", ",").split(","):
        names += [n.strip() for n in chunk.split() if n.strip()]
    return sorted(set(names))


# ------------------------------------------------------------------------------------------ diffing


def diff_query_sets(path: str, base: QuerySet | None, head: QuerySet | None) -> QuerySetChange:
    """The cases of ``head`` (the pull request's set) against ``base`` (the set at the base revision)."""
    old = {q.id: q for q in base.queries} if base is not None else {}
    new = {q.id: q for q in head.queries} if head is not None else {}
    relabelled = {
        k: (q.expected_skill, new[k].expected_skill)
        for k, q in old.items()
        if k in new and new[k].expected_skill != q.expected_skill
    }
    changed = tuple(
        sorted(
            k for k, q in old.items()
            if k in new and k not in relabelled and new[k].case_digest() != q.case_digest()
        )
    )
    return QuerySetChange(
        path=path,
        at_base=base is not None,
        relabelled=relabelled,
        removed={k: q.expected_skill for k, q in old.items() if k not in new},
        changed=changed,
        added={k: q.expected_skill for k, q in new.items() if k not in old},
    )


def yardstick_set(
    base: QuerySet | None, head: QuerySet | None, *, accepted: Iterable[str] = (), source: str
) -> QuerySet:
    """The set ``check`` probes: every case as at the base revision, the cases the pull request adds,
    and — for a skill a person accepted — its cases as the pull request has them (removed ones
    dropped). Sealed (its digest is its own; each case keeps its content digest)."""
    from skillreach.queries.sets import seal

    acc = set(accepted)
    old = {q.id: q for q in base.queries} if base is not None else {}
    new = {q.id: q for q in head.queries} if head is not None else {}
    kept = []
    for qid, q in old.items():
        theirs = new.get(qid)
        if _accepted(acc, q.expected_skill, theirs.expected_skill if theirs else None):
            if theirs is not None:
                kept.append(theirs)
            continue
        kept.append(q)
    kept += [q for qid, q in new.items() if qid not in old]
    shell = base if base is not None else head
    catalog_id = shell.catalog_id if shell is not None else "check"
    return seal(QuerySet(catalog_id=catalog_id, queries=tuple(kept)), source=source)


def record_changes(
    changed_here: Iterable[str], files: Mapping[str, str], top: Path
) -> tuple[RecordChange, ...]:
    """The record files the pull request touches (``git diff --name-status`` lines, ``M path``) as
    :class:`RecordChange`; ``files``: record path at the base → its skill."""
    from skillreach.baselines.records import read_baseline

    out: list[RecordChange] = []
    for line in changed_here:
        status, _, path = line.partition(" ")
        if not path.endswith(".json") or "/candidates/" in f"/{path}":
            continue  # candidates wait for `baseline accept`; they are no bar yet
        kind: Literal["deleted", "edited", "added"] = (
            "deleted" if status.startswith("D") else "added" if status.startswith("A") else "edited"
        )
        tampered = False
        if kind != "deleted" and (top / path).is_file():
            try:
                read_baseline(top / path)
            except TamperedError:
                tampered = True
            except SkillreachError:
                pass  # unreadable for another reason: it is never read anyway
        out.append(RecordChange(path=path, skill=files.get(path), status=kind, tampered=tampered))
    return tuple(out)
