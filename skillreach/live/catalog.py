"""The catalog's history: when each skill was added, edited or removed, read from the skills' git
repository (``git log`` of the ``SKILL.md`` files under the skills folders), so a live drop can be lined
up against the catalog change nearest to it and the usage page can mark each one.

Bounded: one ``git log`` per folder (60 s timeout, :func:`skillreach.baselines.records.git_output`), at
most :data:`MAX_CHANGES` changes read. Outside git: no history (an empty list), never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from skillreach.baselines.records import git_output, git_toplevel
from skillreach.live.verdict import CatalogChange

__all__ = ["MAX_CHANGES", "catalog_changes", "parse_git_log"]

MAX_CHANGES = 100_000
_HOW = {"A": "added", "M": "edited", "D": "removed"}


def parse_git_log(text: str) -> list[CatalogChange]:
    """Changes from ``git log --name-status --format=%x00%H %cI`` output, oldest first: a ``SKILL.md``
    added, modified or deleted names its folder's skill (a rename is a removal and an addition)."""
    out: list[CatalogChange] = []
    commit, at = None, None
    for line in text.splitlines():
        if line.startswith("\0"):
            sha, _, when = line[1:].partition(" ")
            commit = sha
            at = datetime.fromisoformat(when.strip()).astimezone(UTC) if when.strip() else None
            continue
        parts = line.split("\t")
        if at is None or len(parts) < 2 or not parts[0]:
            continue
        status = parts[0][0]
        paths = parts[1:]
        moves = (
            [("D", paths[0]), ("A", paths[-1])]
            if status == "R" and len(paths) == 2
            else [(status, paths[-1])]
        )
        for code, path in moves:
            p = PurePosixPath(path)
            if p.name != "SKILL.md" or code not in _HOW or len(p.parts) < 2:
                continue
            out.append(CatalogChange(at=at, skill=p.parent.name, how=_HOW[code], commit=commit))
        if len(out) >= MAX_CHANGES:
            break
    return sorted(out, key=lambda c: (c.at, c.skill))


def catalog_changes(skills_dirs: Sequence[Path]) -> list[CatalogChange]:
    """Every ``SKILL.md`` added, edited or removed under ``skills_dirs`` in their git history (the
    checked-out branch), oldest first; a folder outside git has none."""
    out: list[CatalogChange] = []
    for folder in skills_dirs:
        top = git_toplevel(folder.resolve()) if folder.exists() else None
        if top is None:
            continue
        text = git_output(
            [
                "log",
                "--no-color",
                "--name-status",
                "--format=%x00%H %cI",
                f"-n{MAX_CHANGES}",
                "--",
                str(folder.resolve()),
            ],
            top,
        )
        out += parse_git_log(text or "")
    return sorted({(c.at, c.skill, c.how): c for c in out}.values(), key=lambda c: (c.at, c.skill))
