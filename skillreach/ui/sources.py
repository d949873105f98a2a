"""What the dashboard reads besides the store, each read bounded and cached while it cannot have changed:

- run folders: ``artifact.json`` (digest verified), ``study.json`` and its query set, ``gate.json``, each
  cached by (path, size, mtime);
- the baselines in git (:class:`Baselines`): the working tree's ``baselines/`` and the service branch,
  read with the readers ``baseline status`` uses; the branch's records in one ``git cat-file --batch``,
  cached by the branch's tip;
- the catalog's history (``git log`` of the skills' ``SKILL.md`` files), cached by ``HEAD``;
- the live shares of the live gate's windows and the weekly shares (the store's events), read again every
  few minutes in a thread of their own.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from skillreach.errors import InputError, SkillreachError

__all__ = ["WEEKS", "Baselines", "FileCache", "LiveView", "RunFolder", "Sources", "TimedCache",
           "compute_live", "live_reading"]

T = TypeVar("T")
WEEKS = 26
"""Weeks of live usage a skill's page draws."""


class FileCache:
    """Values computed from one file, kept while its size and mtime stay the same (at most ``size``)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], tuple[tuple[int, int], Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, kind: str, path: Path, make: Callable[[Path], T]) -> T:
        try:
            st = path.stat()
        except OSError as exc:
            raise InputError(f"{path}: {exc.strerror or 'cannot be read'}") from exc
        stamp = (st.st_size, st.st_mtime_ns)
        key = (kind, str(path))
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] == stamp:
                self._items.move_to_end(key)
                return hit[1]
        value = make(path)
        with self._lock:
            self._items[key] = (stamp, value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value


class TimedCache:
    """Values kept for ``ttl_s`` seconds."""

    def __init__(self, ttl_s: float, size: int = 64) -> None:
        self.ttl_s, self.size = ttl_s, size
        self._items: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, make: Callable[[], T]) -> T:
        now = time.monotonic()
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and now - hit[0] < self.ttl_s:
                return hit[1]
        value = make()
        with self._lock:
            if len(self._items) >= self.size:
                self._items.clear()
            self._items[key] = (now, value)
        return value


@dataclass(frozen=True)
class RunFolder:
    """A study folder as the commands read it."""

    path: Path
    artifact: Any | None
    """The verified artifact (``None``: not written, or not readable: ``problem`` says why)."""
    study: Any | None
    query_set: Any | None
    gate: tuple[list[Any], list[str]] | None
    problem: str | None = None

    @property
    def queries(self) -> dict[str, Any]:
        return self.query_set.by_id() if self.query_set is not None else {}


# ------------------------------------------------------------------------------------------- baselines


def _git(top: Path, *args: str, stdin: bytes | None = None, timeout: float = 30.0) -> bytes | None:
    try:
        proc = subprocess.run(["git", *args], cwd=top, input=stdin, capture_output=True, check=False,
                              timeout=timeout,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _cat_files(top: Path, specs: Sequence[str]) -> dict[str, bytes]:
    """``rev:path`` → content, for every spec that names a blob (one ``git cat-file --batch``)."""
    if not specs:
        return {}
    out = _git(top, "cat-file", "--batch", stdin=("\n".join(specs) + "\n").encode())
    if out is None:
        return {}
    found: dict[str, bytes] = {}
    pos = 0
    for spec in specs:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            found[spec] = out[pos:pos + size]
            pos += size + 1
    return found


@dataclass
class _Tip:
    sha: str | None = None
    records: dict[tuple[str, bool], Any] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


class Baselines:
    """The baseline records of one repository: the working tree's ``baselines/`` and the service branch's
    (records and candidates), read as ``baseline status`` reads them."""

    MAX_BYTES = 64 * 2**20

    def __init__(self, folder: Path, branch: str | None) -> None:
        from skillreach.baselines.record_store import BaselineRepo

        self.folder, self.branch_name = folder, branch
        self.repo: BaselineRepo | None = None
        self.service: BaselineRepo | None = None
        self._tip = _Tip()
        self._lock = threading.Lock()
        top = self._top(folder)
        if top is not None:
            rel = os.path.relpath(folder.resolve(), top.resolve())
            sub = Path(rel).as_posix() if not rel.startswith("..") else "baselines"
            self.repo = BaselineRepo(top, folder=sub)
            self.service = BaselineRepo(top, folder=sub, branch=branch) if branch else None

    @staticmethod
    def _top(folder: Path) -> Path | None:
        from skillreach.baselines.records import git_toplevel

        anchor = folder.resolve()
        while not anchor.exists() and anchor != anchor.parent:
            anchor = anchor.parent
        return git_toplevel(anchor)

    # the working tree ---------------------------------------------------------------------------------

    def tree(self, *, candidates: bool = False) -> dict[str, Any]:
        """skill → record in the working tree (``candidates``: under ``baselines/candidates``)."""
        from skillreach.baselines.records import read_baseline

        where = self.folder / "candidates" if candidates else self.folder
        out: dict[str, Any] = {}
        if not where.is_dir():
            return out
        for path in sorted(where.glob("*.json")):
            try:
                out[path.stem] = read_baseline(path)
            except SkillreachError:
                continue  # a record that does not verify is no bar (baseline status names it)
        return out

    # the service branch ------------------------------------------------------------------------------

    def _branch_tip(self) -> str | None:
        if self.service is None or self.service.branch is None:
            return None
        ref = f"refs/heads/{self.service.branch}^{{commit}}"
        raw = _git(self.service.top, "rev-parse", "--verify", "-q", ref)
        return raw.decode().strip() if raw else None

    def _load_tip(self) -> _Tip:
        from skillreach.baselines.records import parse_baseline

        sha = self._branch_tip()
        with self._lock:
            if sha == self._tip.sha:
                return self._tip
        tip = _Tip(sha)
        if sha is not None and self.service is not None:
            top, folder = self.service.top, self.service.folder
            listing = _git(top, "ls-tree", "-r", "--name-only", sha, "--", folder) or b""
            paths = [p for p in listing.decode(errors="replace").splitlines() if p.endswith(".json")]
            blobs = _cat_files(top, [f"{sha}:{p}" for p in paths])
            for p in paths:
                rel = p[len(folder) + 1:] if p.startswith(folder + "/") else p
                candidate = rel.startswith("candidates/")
                if "/" in rel.removeprefix("candidates/"):
                    continue
                raw = blobs.get(f"{sha}:{p}")
                if raw is None or len(raw) > self.MAX_BYTES:
                    continue
                where = f"{self.service.branch}:{p}"
                try:
                    tip.records[(Path(rel).stem, candidate)] = parse_baseline(raw.decode("utf-8"), where)
                except (SkillreachError, UnicodeDecodeError) as exc:
                    tip.problems[where] = getattr(exc, "message", str(exc))
        with self._lock:
            self._tip = tip
        return tip

    def branch(self, *, candidates: bool = False) -> dict[str, Any]:
        tip = self._load_tip()
        return {skill: rec for (skill, cand), rec in tip.records.items() if cand == candidates}

    # both ----------------------------------------------------------------------------------------------

    def bars(self) -> dict[str, tuple[Any, str]]:
        """skill → (its bar, where it is kept): the service branch's record when it has one (the newer
        word: the service re-records there), else the working tree's."""
        out: dict[str, tuple[Any, str]] = {s: (r, "working tree") for s, r in self.tree().items()}
        name = self.branch_name or "branch"
        out.update({s: (r, f"branch {name}") for s, r in self.branch().items()})
        return out

    def candidates(self) -> dict[str, tuple[Any, str]]:
        """skill → (its candidate record, where it waits): the service branch's once it exists (it
        forked from the working tree's and is where ``baseline accept`` decides), else the working
        tree's — as ``baseline status`` and ``baseline accept`` read them."""
        if self._load_tip().sha is not None:
            name = self.branch_name or "branch"
            return {s: (r, f"branch {name}") for s, r in self.branch(candidates=True).items()}
        return {s: (r, "working tree") for s, r in self.tree(candidates=True).items()}


# ------------------------------------------------------------------------------------------------ live


@dataclass(frozen=True)
class LiveView:
    """The live gate's windows and shares (``skillreach usage --gate``), and its drops."""

    windows: Any | None
    shares: dict[str, Any]
    drops: dict[str, Any]
    prompts: tuple[int, int] = (0, 0)
    problem: str | None = None


class Sources:
    """The run folders, the baselines, the catalog's history and the live shares, cached."""

    def __init__(self, *, store: Any, settings: Any, baselines_dir: Path, branch: str | None,
                 skills_dirs: Sequence[Path] = ()) -> None:
        self.store, self.settings = store, settings
        self.baselines = Baselines(baselines_dir, branch)
        self.skills_dirs = [Path(d) for d in skills_dirs if Path(d).is_dir()]
        self.files = FileCache(size=12)
        self.timed = TimedCache(ttl_s=60.0)
        self.memo = TimedCache(ttl_s=float("inf"), size=16)
        """Values keyed by what they were computed from (a matrix by its artifacts' mtimes)."""
        self._live_state: tuple[LiveView, Any] | None = None
        self._live_thread: threading.Thread | None = None
        self._live_stop = threading.Event()
        self._reader: Any = None
        self.live_read = threading.Event()
        """Set once the live events were read (whatever they held)."""

    # run folders ---------------------------------------------------------------------------------------

    def run_folder(self, out_dir: str) -> RunFolder:
        """The study folder's artifact, study file, query set and gate (whatever of them it holds)."""
        from skillreach.queries.sets import load_query_set
        from skillreach.reports.gate_file import read_gate
        from skillreach.scoring.artifact import read_artifact
        from skillreach.study.folder import read_study_file

        folder = Path(out_dir)
        path = folder / "artifact.json"
        if not path.is_file():
            return RunFolder(folder, None, None, None, None, f"no artifact.json in {folder} (yet)")
        try:
            artifact = self.files.get("artifact", path, read_artifact)
        except SkillreachError as exc:
            return RunFolder(folder, None, None, None, None, exc.message)
        study = query_set = gate = None
        problem = None
        try:
            study = read_study_file(folder)
            qpath = study.query_set_path(folder)
            query_set = self.files.get("queries", qpath, load_query_set)
        except SkillreachError as exc:
            problem = exc.message
        try:
            gate = read_gate(folder, artifact.digest)
        except SkillreachError as exc:
            problem = problem or exc.message
        return RunFolder(folder, artifact, study, query_set, gate, problem)

    def artifact_by_digest(self, digest: str | None) -> Any | None:
        """The artifact (with its probes' outcomes) the store says has this digest, when its file is there."""
        from skillreach.scoring.artifact import read_artifact
        from skillreach.store.dashboard import artifact_path

        if not digest:
            return None
        where = artifact_path(self.store, digest)
        if where is None or not Path(where).is_file():
            return None
        try:
            art = self.files.get("artifact", Path(where), read_artifact)
        except SkillreachError:
            return None
        return art if art.digest == digest else None

    # git -------------------------------------------------------------------------------------------------

    def _heads(self) -> tuple[str, ...]:
        heads = []
        for d in self.skills_dirs:
            raw = _git(d, "rev-parse", "HEAD")
            heads.append(raw.decode().strip() if raw else "")
        return tuple(heads)

    def catalog(self) -> list[str]:
        """The skills under the skills folders now (``discover``, as every command finds them)."""
        from skillreach.skills.discovery import discover

        if not self.skills_dirs:
            return []

        def make() -> list[str]:
            try:
                return sorted({s.name for s in discover(self.skills_dirs).skills})
            except SkillreachError:
                return []

        return self.timed.get(("catalog", self._heads()), make)

    def catalog_changes(self) -> list[Any]:
        """Every SKILL.md added, edited or removed under the skills folders (their git history)."""
        from skillreach.live.catalog import catalog_changes

        if not self.skills_dirs:
            return []
        return self.timed.get(("changes", self._heads()), lambda: catalog_changes(self.skills_dirs))

    # live --------------------------------------------------------------------------------------------------

    def live(self) -> LiveView:
        """The live gate's shares and drops, as last read (:meth:`start_live` reads them again every few
        minutes, off the pages' path: reading a million live events takes seconds, a page must not)."""
        state = self._live_state
        if state is None:
            return LiveView(None, {}, {}, problem="live usage is being read; reload in a moment")
        return state[0]

    def weekly(self) -> Any | None:
        """``skillreach usage --by week`` over the last :data:`WEEKS` weeks, as last read (``None``:
        not read yet)."""
        state = self._live_state
        return state[1] if state is not None else None

    def read_live(self) -> None:
        """Read the live events once: the live gate's windows (``usage --gate``) and the weekly shares —
        in the dashboard's reader process when it has one (:meth:`start_live`), else here."""
        if self._reader is not None:
            future = self._reader.submit(live_reading, self.store.url, self.settings.live_gates)
            self._live_state = future.result(timeout=900)
        else:
            self._live_state = compute_live(self.store, self.settings.live_gates)

    def start_live(self, interval_s: float = 300.0, *, process: bool = True) -> None:
        """Read the live events now and every ``interval_s`` seconds, in a thread of their own that hands
        the reading to a process of its own (``process``): a read of a million events holds an interpreter
        for seconds, and the pages must not wait for its lock."""
        if self._live_thread is not None:
            return
        if process:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            try:
                spawn = multiprocessing.get_context("spawn")
                self._reader = ProcessPoolExecutor(max_workers=1, mp_context=spawn, initializer=_reader_start)
            except (OSError, ValueError):  # no processes here: the thread reads, as before
                self._reader = None

        def loop() -> None:
            while not self._live_stop.is_set():
                try:
                    self.read_live()
                except Exception as exc:  # said on the page, tried again next round
                    self._live_state = (LiveView(None, {}, {}, problem=type(exc).__name__), None)
                self.live_read.set()
                self._live_stop.wait(interval_s)

        self._live_thread = threading.Thread(target=loop, name="skillreach-ui-live", daemon=True)
        self._live_thread.start()

    def stop_live(self) -> None:
        self._live_stop.set()
        if self._reader is not None:
            self._reader.shutdown(wait=False, cancel_futures=True)
            self._reader = None
        if self._live_thread is not None:
            self._live_thread.join(timeout=10)
            self._live_thread = None


def compute_live(store: Any, gates: Any) -> tuple[LiveView, Any]:
    """The live gate's view (its windows, every skill's shares, the drops past it: ``usage --gate``) and
    the weekly shares of the last :data:`WEEKS` weeks (``usage --by week``), from one read of the events."""
    from skillreach.live.gate import check_live_gate, live_shares, windows_for
    from skillreach.live.usage import usage_report
    from skillreach.store.live import load_events

    now = datetime.now(UTC)
    windows = windows_for(gates, now)
    since = min(windows.reference_start, now - timedelta(weeks=WEEKS))
    try:
        events = load_events(store, since=since, until=now)
    except Exception as exc:  # a store the live events cannot be read from is no dashboard error
        return LiveView(windows, {}, {}, problem=type(exc).__name__), None
    ref, recent, shares = live_shares(events, windows)
    drops = {d.skill: d for d in check_live_gate(events, gates, now)}
    weekly = usage_report(events, by="week", since=now - timedelta(weeks=WEEKS), until=now)
    return LiveView(windows, shares, drops, (ref, recent)), weekly


_READER_STORES: dict[str, Any] = {}


def _reader_start() -> None:
    """The reader process leaves Ctrl-C to the dashboard (which stops it): a terminal's interrupt reaches
    the whole process group, and the reader would otherwise print its own traceback."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def live_reading(url: str, gates: Any) -> tuple[LiveView, Any]:
    """:func:`compute_live` in the reader process (its store opened once)."""
    from skillreach.store import Store

    store = _READER_STORES.get(url)
    if store is None:
        store = _READER_STORES[url] = Store(url)
    return compute_live(store, gates)
