"""The skill version a live event ran: the skill's folder as it was at the event's time.

In the same format baseline records pin (:func:`skillreach.baselines.records.skill_version`):

1. ``--skills DIR`` inside a git repository: the last commit that touched the skill's folder at or
   before the event's time on the event's branch (``gitBranch``; the checked-out branch when the source
   names none) → ``git:<tree hash of the folder in that commit>``. One ``git log`` and one
   ``git cat-file --batch-check`` per (skill, branch), cached; each event is a bisection.
2. The folder a ``Base directory for this skill:`` line names, when it exists: the same history when it
   is inside a git repository, else ``sha256:`` of its content (as a baseline pins a folder outside git).
3. Otherwise ``unknown``: a branch the repository does not hold, a skill with no folder, a time before
   the folder's first commit — never a guess.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from datetime import datetime
from pathlib import Path

from skillreach.baselines.records import git_output, git_toplevel, skill_version
from skillreach.live.events import UNKNOWN_VERSION

__all__ = ["VersionResolver"]

_NAME = re.compile(r"^name:\s*['\"]?([^'\"\n]+?)['\"]?\s*$", re.M)
_GIT_TIMEOUT_S = 120


def _git_batch(top: Path, specs: list[str]) -> list[str | None]:
    """The object id of each ``rev:path`` (``None``: missing), in one ``git cat-file`` run."""
    if not specs:
        return []
    try:
        proc = subprocess.run(
            ["git", "cat-file", "--batch-check=%(objectname) %(objecttype)"],
            cwd=top,
            input="\n".join(specs) + "\n",
            capture_output=True,
            text=True,
            check=False,
            timeout=_GIT_TIMEOUT_S,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return [None] * len(specs)
    out = proc.stdout.splitlines()
    if proc.returncode != 0 or len(out) != len(specs):
        return [None] * len(specs)
    return [line.split(" ")[0] if line.endswith(" tree") else None for line in out]


class _History:
    """One folder's versions on one branch: (commit time, tree or None) oldest first."""

    def __init__(self, top: Path, ref: str, rel: str) -> None:
        log = git_output(["log", "--format=%H %ct", ref, "--", rel], top) or ""
        pairs = [(int(t), c) for c, t in (ln.split(" ") for ln in log.splitlines() if " " in ln)]
        pairs.sort()
        self.times = [t for t, _ in pairs]
        self.trees = _git_batch(top, [f"{c}:{rel}" for _, c in pairs])

    def at(self, when: datetime) -> str | None:
        i = bisect.bisect_right(self.times, when.timestamp())
        return self.trees[i - 1] if i else None


class VersionResolver:
    """``version(skill, branch, at, skill_dir)`` for every event of an ingest, cached per folder and
    branch."""

    def __init__(self, skills_root: Path | None) -> None:
        self._tops: dict[str, Path | None] = {}
        self._histories: dict[tuple[str, str, str], _History] = {}
        self._refs: dict[tuple[str, str | None], str | None] = {}
        self._contents: dict[str, str] = {}
        self._dirs: dict[str, Path | None] = {}  # a Base directory → the folder when it exists
        self.root = skills_root.resolve() if skills_root is not None else None
        self.top = self._top(self.root) if self.root is not None else None
        self.folders: dict[str, Path] = {}
        if self.root is not None and self.root.is_dir():
            for child in sorted(self.root.iterdir()):
                skill_md = child / "SKILL.md"
                if not skill_md.is_file():
                    continue
                self.folders.setdefault(child.name, child)
                try:
                    head = skill_md.read_text("utf-8", errors="replace")[:4096]
                except OSError:
                    continue
                m = _NAME.search(head)
                if m:
                    self.folders[m.group(1).strip()] = child

    def _top(self, folder: Path) -> Path | None:
        key = str(folder)
        if key not in self._tops:
            self._tops[key] = git_toplevel(folder) if folder.is_dir() else None
        return self._tops[key]

    def _ref(self, top: Path, branch: str | None) -> str | None:
        key = (str(top), branch)
        if key not in self._refs:
            ref: str | None = None
            if branch is None:
                ref = "HEAD"
            else:
                for cand in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"):
                    if git_output(["rev-parse", "--verify", "--quiet", cand], top):
                        ref = cand
                        break
            self._refs[key] = ref
        return self._refs[key]

    def _in_history(self, folder: Path, top: Path, branch: str | None, at: datetime) -> str | None:
        ref = self._ref(top, branch)
        if ref is None:
            return None
        rel = Path(os.path.relpath(folder, top)).as_posix()
        key = (str(top), ref, rel)
        hist = self._histories.get(key)
        if hist is None:
            hist = self._histories[key] = _History(top, ref, rel)
        tree = hist.at(at)
        return f"git:{tree}" if tree else None

    def version(self, skill: str | None, branch: str | None, at: datetime, skill_dir: str | None) -> str:
        if skill and self.root is not None and self.top is not None:
            folder = self.folders.get(skill) or self.folders.get(skill.rsplit(":", 1)[-1])
            if folder is None:
                folder = self.root / skill.rsplit(":", 1)[-1]  # a skill since removed: its history stays
            if "/" not in skill and ".." not in skill:
                found = self._in_history(folder, self.top, branch, at)
                if found:
                    return found
        if skill_dir:
            if skill_dir not in self._dirs:
                folder = Path(skill_dir)
                self._dirs[skill_dir] = folder.resolve() if folder.is_absolute() and folder.is_dir() else None
            folder_now = self._dirs[skill_dir]
            if folder_now is not None:
                top = self._top(folder_now)
                if top is not None:
                    return self._in_history(folder_now, top, branch, at) or UNKNOWN_VERSION
                key = str(folder_now)
                if key not in self._contents:
                    self._contents[key] = skill_version(folder_now)[0]
                return self._contents[key]
        return UNKNOWN_VERSION
