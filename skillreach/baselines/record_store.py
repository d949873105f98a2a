"""The one baseline store: the files under ``baselines/`` in the skills' git repository are the truth.

Every writer — ``baseline record --commit`` and ``baseline accept`` on the command line, the service's
re-baselining — goes through :meth:`BaselineRepo.commit`: it writes the records of one event
(``baselines/<skill>.json``; a breached re-record as a *candidate*, ``baselines/candidates/<skill>.json``,
for a person to accept), commits them in **one** commit whose message says what changed and why, and
the caller mirrors them into the database (which indexes them and keeps their history).

Two ways to commit:

- on the **working tree's branch** (``branch=None``, the CLI): the files are written into the work tree
  and committed there, like any change a person makes;
- on a **service branch** (``skillreach/baselines`` by default), with git plumbing (a private index,
  ``commit-tree``, ``update-ref`` with the old value): nobody's working tree or index is touched, and two
  writers at once cannot lose a commit — ``update-ref`` is a compare-and-swap, and the loser re-reads the
  branch and commits again on top. ``baseline status`` shows what waits on the branch.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from skillreach.baselines.records import (
    BaselineRecord,
    git_output,
    git_toplevel,
    metrics_line,
    parse_baseline,
    read_baseline,
    seal_baseline,
)
from skillreach.errors import InputError

__all__ = ["ACCEPT_WHY", "DEFAULT_BRANCH", "Accepted", "BaselineRepo", "Committed", "accept_candidate"]

DEFAULT_BRANCH = "skillreach/baselines"
CANDIDATES = "candidates"
_ZERO = "0" * 40
INDEX_LOCK_WAIT_S = 30.0
"""How long a git command waits for another one's index lock (``.git/index.lock``) before saying so."""
_LOCK_RE = re.compile(r"Unable to create '([^']*index\.lock)': File exists")


def _index_lock(stderr: str) -> Path | None:
    """The index lock git could not take, when that is why it failed."""
    m = _LOCK_RE.search(stderr or "")
    return Path(m.group(1)) if m else None


def _lock_line(lock: Path, command: str, waited: float) -> str:
    """One line naming the lock, its age and the git processes that may hold it."""
    try:
        age = f", {time.time() - lock.stat().st_mtime:.0f} s old"
    except OSError:
        age = ""
    holders = []
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    argv = fh.read().split(b"\0")
            except OSError:
                continue
            if argv and os.path.basename(argv[0]) == b"git":
                holders.append(f"pid {pid} ({b' '.join(argv[:3]).decode(errors='replace').strip()})")
    who = (
        f"held by {', '.join(holders[:3])}"
        if holders
        else "no git process is running: a git command that crashed left it — remove the file"
    )
    return (
        f"git {command}: the index lock {lock} is taken{age}; waited {waited:.0f} s, {who}; "
        "run again when it is free"
    )
_IDENTITY = {"GIT_AUTHOR_NAME": "skillreach", "GIT_AUTHOR_EMAIL": "skillreach@localhost",
             "GIT_COMMITTER_NAME": "skillreach", "GIT_COMMITTER_EMAIL": "skillreach@localhost"}


@dataclass(frozen=True)
class Committed:
    """One commit of baseline records: its sha (``None``: nothing changed) and what it holds."""

    sha: str | None
    recorded: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    accepted: tuple[str, ...] = ()
    message: str = ""
    paths: tuple[str, ...] = field(default_factory=tuple)


class BaselineRepo:
    """The baselines folder of one git repository, read and committed on ``branch`` (``None``: the
    working tree's own branch)."""

    def __init__(self, top: Path, *, folder: str = "baselines", branch: str | None = None) -> None:
        self.top = Path(top)
        self.folder = folder.strip("/")
        self.branch = branch

    @classmethod
    def find(
        cls, anchor: Path, *, folder: str = "baselines", branch: str | None = None
    ) -> BaselineRepo | None:
        """The repository holding ``anchor`` (a skills folder), or ``None`` outside git."""
        top = git_toplevel(Path(anchor).resolve())
        return cls(top, folder=folder, branch=branch) if top is not None else None

    # -- git -------------------------------------------------------------------------------------

    def _git(self, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
        identity = {k: v for k, v in _IDENTITY.items() if k not in os.environ}
        waited = 0.0
        while True:
            proc = subprocess.run(
                ["git", *args], cwd=self.top, capture_output=True, text=True, check=False, timeout=120,
                input=stdin, env={**os.environ, **identity, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C",
                                  **(env or {})},
            )
            lock = _index_lock(proc.stderr) if proc.returncode != 0 else None
            if lock is None:
                break
            if waited >= INDEX_LOCK_WAIT_S:  # another git command holds the index: say who, not git's clip
                raise InputError(_lock_line(lock, args[0], waited))
            time.sleep(0.1)  # another `git add`/`commit` (a concurrent baseline record): wait for it
            waited += 0.1
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            raise InputError(f"{self.top}: git {args[0]} failed: {lines[-1] if lines else proc.returncode}")
        return proc.stdout.strip()

    def _ref(self) -> str:
        return f"refs/heads/{self.branch}" if self.branch else "HEAD"

    def tip(self) -> str | None:
        """The commit the records are read from (the branch's tip; HEAD when it does not exist yet)."""
        if self.branch:
            sha = git_output(["rev-parse", "--verify", "-q", f"{self._ref()}^{{commit}}"], self.top)
            if sha:
                return sha
        return git_output(["rev-parse", "--verify", "-q", "HEAD^{commit}"], self.top) or None

    def path_of(self, skill: str, *, candidate: bool = False) -> str:
        return f"{self.folder}/{CANDIDATES}/{skill}.json" if candidate else f"{self.folder}/{skill}.json"

    # -- reading ---------------------------------------------------------------------------------

    def _show(self, commit: str, path: str) -> str | None:
        return git_output(["show", f"{commit}:{path}"], self.top)

    def read(self, skill: str, *, candidate: bool = False) -> BaselineRecord | None:
        """The skill's record (or candidate) as committed at :meth:`tip`; without a branch, the working
        tree's file (what a person sees and edits)."""
        path = self.path_of(skill, candidate=candidate)
        if not self.branch:
            file = self.top / path
            return read_baseline(file) if file.is_file() else None  # bounded: size, UTF-8, depth
        tip = self.tip()
        text = self._show(tip, path) if tip else None
        return parse_baseline(text, f"{self._ref()}:{path}") if text is not None else None

    def read_file(self, path: str) -> str | None:
        """A file of the repository (path from its top) as committed at :meth:`tip` — the service
        branch's version when there is one; ``None`` when it is not there."""
        tip = self.tip()
        return self._show(tip, path) if tip else None

    def relative(self, path: Path) -> str | None:
        """``path`` as a repository path (``None`` when it lies outside the repository)."""
        try:
            return Path(os.path.realpath(path)).relative_to(os.path.realpath(self.top)).as_posix()
        except ValueError:
            return None

    def skills(self, *, candidates: bool = False) -> list[str]:
        """Skills with a record (or a candidate) at :meth:`tip`."""
        where = f"{self.folder}/{CANDIDATES}" if candidates else self.folder
        if not self.branch:
            folder = self.top / where
            return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
        tip = self.tip()
        listing = git_output(["ls-tree", "--name-only", f"{tip}:{where}"], self.top) if tip else None
        return sorted(Path(n).stem for n in (listing or "").splitlines() if n.endswith(".json"))

    def waiting(self) -> list[str]:
        """Subjects of the commits on the branch that the working tree's HEAD does not have yet."""
        if not self.branch or git_output(["rev-parse", "--verify", "-q", self._ref()], self.top) is None:
            return []
        out = git_output(["log", "--format=%h %s", f"HEAD..{self._ref()}"], self.top)
        return out.splitlines() if out else []

    # -- writing ---------------------------------------------------------------------------------

    def commit(
        self,
        records: Sequence[BaselineRecord] = (),
        *,
        subject: str,
        why: Iterable[str] = (),
        candidates: Sequence[BaselineRecord] = (),
        accept: Sequence[str] = (),
        files: Mapping[str, str] | None = None,
        attempts: int = 20,
        remove: Sequence[str] = (),
    ) -> Committed:
        """Write ``records`` (and ``candidates``; ``accept``: move those skills' candidates into place) in
        one commit, with ``files`` (repository path → text: a grown query set beside the records made from
        it); ``remove``: skills whose record and candidate go (a renamed skill's old name). Returns the
        commit (``sha=None`` when every file was already so)."""
        body = "\n".join(why)
        lines = [f"{r.skill}: {metrics_line(r)}" for r in records]
        lines += [f"{r.skill} (candidate, waits for baseline accept): {metrics_line(r)}" for r in candidates]
        message = subject + ("\n\n" + body if body else "") + ("\n\n" + "\n".join(lines) if lines else "")
        if self.branch:
            for _ in range(attempts):
                done = self._commit_on_branch(records, candidates, accept, message, files or {},
                                              remove=remove)
                if done is not None:
                    return done
            raise InputError(f"{self.top}: {self._ref()} kept moving; {attempts} tries to commit lost "
                             "the race; run again")
        return self._commit_in_work_tree(records, candidates, accept, message, files or {}, remove=remove)

    def _files(
        self, records: Sequence[BaselineRecord], candidates: Sequence[BaselineRecord], accept: Sequence[str],
        remove: Sequence[str] = (),
    ) -> tuple[dict[str, str], list[str], list[str]]:
        """(path → content to write, paths to delete, skills accepted)."""
        files = {self.path_of(r.skill): seal_baseline(r).model_dump_json(indent=2) + "\n" for r in records}
        files.update({self.path_of(r.skill, candidate=True): seal_baseline(r).model_dump_json(indent=2) + "\n"
                      for r in candidates})
        delete = [self.path_of(r.skill, candidate=True) for r in records]  # a fresh record supersedes
        for skill in remove:
            delete += [self.path_of(skill), self.path_of(skill, candidate=True)]
        accepted: list[str] = []
        for skill in accept:
            cand = self.read(skill, candidate=True)
            if cand is None:
                raise InputError(f"skill {skill!r}: no candidate record waits under "
                                 f"{self.path_of(skill, candidate=True)}; see skillreach baseline status")
            files[self.path_of(skill)] = seal_baseline(cand).model_dump_json(indent=2) + "\n"
            delete.append(self.path_of(skill, candidate=True))
            accepted.append(skill)
        return files, delete, accepted

    def _commit_on_branch(
        self,
        records: Sequence[BaselineRecord],
        candidates: Sequence[BaselineRecord],
        accept: Sequence[str],
        message: str,
        extra: Mapping[str, str],
        *,
        remove: Sequence[str] = (),
    ) -> Committed | None:
        old = git_output(["rev-parse", "--verify", "-q", f"{self._ref()}^{{commit}}"], self.top)
        base = old or self.tip()
        files, delete, accepted = self._files(records, candidates, accept, remove)
        files.update(extra)
        with tempfile.TemporaryDirectory(prefix="skillreach-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if base:
                self._git("read-tree", base, env=env)
            for path, content in files.items():
                blob = self._git("hash-object", "-w", "--stdin", stdin=content)
                self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            for path in delete:
                if path not in files:
                    self._git("update-index", "--force-remove", path, env=env)
            tree = self._git("write-tree", env=env)
        if base and tree == self._git("rev-parse", f"{base}^{{tree}}"):
            return Committed(None, message=message)
        parents = ["-p", base] if base else []
        sha = self._git("commit-tree", tree, *parents, stdin=message)
        proc = subprocess.run(["git", "update-ref", self._ref(), sha, old or _ZERO], cwd=self.top,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            return None  # another writer moved the branch first: read it again and commit on top
        return Committed(sha, tuple(r.skill for r in records), tuple(r.skill for r in candidates),
                         tuple(accepted), message, tuple(sorted(files)))

    def _commit_in_work_tree(
        self,
        records: Sequence[BaselineRecord],
        candidates: Sequence[BaselineRecord],
        accept: Sequence[str],
        message: str,
        extra: Mapping[str, str],
        *,
        remove: Sequence[str] = (),
    ) -> Committed:
        files, delete, accepted = self._files(records, candidates, accept, remove)
        files.update(extra)
        for path, content in files.items():
            target = self.top / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        removed = [p for p in delete if p not in files and (self.top / p).is_file()]
        for path in removed:
            (self.top / path).unlink()
        paths = sorted([*files, *removed])
        self._git("add", "-A", "--", *paths)
        if not self._git("diff", "--cached", "--name-only", "--", *paths):
            return Committed(None, message=message)
        try:
            self._git("commit", "-q", "-m", message, "--", *paths)
        except InputError:
            # another `baseline record --commit` committed these very files between our add and our
            # commit (`commit -- PATHS` takes the work tree's content): nothing is left to commit
            if self._git("diff", "--name-only", "HEAD", "--", *paths):
                raise
            return Committed(None, message=message)
        return Committed(self._git("rev-parse", "HEAD"), tuple(r.skill for r in records),
                         tuple(r.skill for r in candidates), tuple(accepted), message, tuple(paths))


ACCEPT_WHY = "accepted by a person after a gate breached during re-baselining"


@dataclass(frozen=True)
class Accepted:
    """A candidate accepted as its skill's baseline: the record, the commit, the repository it went to."""

    record: BaselineRecord
    committed: Committed
    repo: BaselineRepo


def accept_candidate(
    repos: Sequence[BaselineRepo], skill: str, *, by: str | None = None, reason: str | None = None
) -> Accepted | None:
    """``skillreach baseline accept``: the skill's candidate, in the first of ``repos`` where one waits
    (the service branch, then the working tree), becomes its baseline in its own commit. ``by`` and
    ``reason`` (the dashboard's decision: who, and why) are added to the commit message's body.
    ``None`` when no candidate waits."""
    repo = next((r for r in repos if r.read(skill, candidate=True) is not None), None)
    cand = repo.read(skill, candidate=True) if repo is not None else None
    if repo is None or cand is None:
        return None
    why = [ACCEPT_WHY, *([f"accepted by: {by}"] if by else []), *([f"reason: {reason}"] if reason else [])]
    done = repo.commit(subject=f"baseline accept {skill}: candidate {cand.baseline_id} becomes the baseline",
                       why=why, accept=[skill])
    return Accepted(cand, done, repo)
