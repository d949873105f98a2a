"""``skillreach ingest``: what agents recorded, read incrementally into the store.

Each PATH is a file or a folder (its ``*.jsonl``, ``*.json`` and ``*.ndjson`` files, recursively). A
file is an OTLP JSON export when its first bytes say so (``{"resourceLogs"``/``{"resourceSpans"``),
else a Claude Code transcript. Its events belong to the source ``<kind>:<PATH>`` (``claude-code:`` or
``otlp:`` and the PATH resolved: a folder named through a link is the folder it names). A file is known
by its identity (device and inode): one reached twice — through a linked folder given as another PATH,
a folder inside another PATH, a hard link — is read once, and its cursor is keyed by its resolved path,
so a later run reaching it another way goes on from where the first stopped. Only regular files are
read: a FIFO, socket or device named ``*.jsonl`` is skipped, counted and named, never waited on (the
hourly ingest would hang on it). Per file: only the bytes past its cursor are read
(:mod:`skillreach.live.files`), the events are stored in batches (one transaction each, duplicates
ignored), then the cursor — so a crash between the two re-reads lines whose events are already stored,
and adds nothing twice. Skill calls get the version of the skill as it was then
(:mod:`skillreach.live.versions`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillreach._gc import cyclic_gc_paused
from skillreach.errors import InputError
from skillreach.live.files import NotRegularFile, ReadState, open_regular, read_new
from skillreach.live.readers import (
    NUL_REPLACED,
    OtlpReader,
    Problems,
    TranscriptReader,
    display_path,
    is_otlp,
)
from skillreach.live.versions import VersionResolver
from skillreach.store.database import Store
from skillreach.store.live import Batch, load_cursors, save_batch, unanswered_calls

__all__ = ["SUFFIXES", "IngestSummary", "SourceSummary", "ingest_sources", "source_files"]

SUFFIXES = (".jsonl", ".json", ".ndjson")
CLEANED = frozenset({NUL_REPLACED})
"""Reasons a line was kept with its text cleaned, not skipped."""
FLUSH_EVENTS = 20_000
"""Events held before they are stored (one transaction)."""


@dataclass(frozen=True, slots=True)
class SourceSummary:
    """One source's part of an ingest."""

    source: str
    files: int
    bytes_read: int
    events_added: int
    hidden: int
    """Skill calls whose source hid the name (counted apart, attributed to no skill)."""
    skipped: Mapping[str, int] = field(default_factory=dict)
    """Lines not read, by reason."""
    first_skipped: Mapping[str, str] = field(default_factory=dict)
    """The first such line of each reason (file:line)."""
    reread: int = 0
    """Files read again from the start (rotated or truncated since the last run)."""
    skipped_files: Mapping[str, int] = field(default_factory=dict)
    """Files not read, by reason (not a regular file, unreadable, reached twice)."""
    first_skipped_file: Mapping[str, str] = field(default_factory=dict)
    """The first such file of each reason."""


@dataclass(frozen=True, slots=True)
class IngestSummary:
    """What an ingest read and stored, per source."""

    sources: tuple[SourceSummary, ...]

    @property
    def files(self) -> int:
        return sum(s.files for s in self.sources)

    @property
    def bytes_read(self) -> int:
        return sum(s.bytes_read for s in self.sources)

    @property
    def events_added(self) -> int:
        return sum(s.events_added for s in self.sources)

    @property
    def hidden(self) -> int:
        return sum(s.hidden for s in self.sources)

    @property
    def skipped(self) -> int:
        """Lines not read (the lines kept with their text cleaned are not counted here)."""
        return sum(n for s in self.sources for reason, n in s.skipped.items() if reason not in CLEANED)

    @property
    def skipped_files(self) -> int:
        return sum(sum(s.skipped_files.values()) for s in self.sources)

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "bytes_read": self.bytes_read,
            "events_added": self.events_added,
            "hidden": self.hidden,
            "skipped": self.skipped,
            "skipped_files": self.skipped_files,
            "sources": [
                {
                    "source": s.source,
                    "files": s.files,
                    "bytes_read": s.bytes_read,
                    "events_added": s.events_added,
                    "hidden": s.hidden,
                    "skipped": dict(s.skipped),
                    "first_skipped": dict(s.first_skipped),
                    "reread": s.reread,
                    "skipped_files": dict(s.skipped_files),
                    "first_skipped_file": dict(s.first_skipped_file),
                }
                for s in self.sources
            ],
        }

    def lines(self) -> list[str]:
        """The summary a person reads: one line per source, a line per reason lines were skipped, and
        the hidden names said once."""
        out: list[str] = []
        for s in self.sources:
            again = f", {s.reread} read again from the start (rotated or truncated)" if s.reread else ""
            out.append(
                f"{s.source}: {s.files} file(s), {_size(s.bytes_read)} read, "
                f"{s.events_added} event(s) added{again}"
            )
            for reason, n in sorted(s.skipped_files.items()):
                first = s.first_skipped_file.get(reason, "?")
                out.append(f"  skipped {n} file(s): {reason} (first: {first})")
            for reason, n in sorted(s.skipped.items()):
                verb = "cleaned" if reason in CLEANED else "skipped"
                out.append(f"  {verb} {n} line(s): {reason} (first: {s.first_skipped.get(reason, '?')})")
        if self.hidden:
            out.append(
                f"{self.hidden} skill call(s) with the skill's name hidden by their source "
                "(Claude Code reports custom_skill unless OTEL_LOG_TOOL_DETAILS=1): counted apart, "
                "attributed to no skill"
            )
        out.append(
            f"total: {self.files} file(s), {_size(self.bytes_read)} read, {self.events_added} event(s) added"
        )
        return out


def _size(n: int) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} bytes"


NOT_REGULAR = "not a regular file (a FIFO, socket or device)"
TWICE = "the same file reached again (a link): read once"


def _unreadable(exc: OSError) -> str:
    return f"unreadable ({exc.strerror or type(exc).__name__})"


def source_files(path: Path, skipped: list[tuple[str, Path]] | None = None) -> list[Path]:
    """The files a PATH names: itself, or a folder's JSON lines files (recursively, sorted; folders
    reached through a link are not entered). A special file among them (FIFO, socket, device) or one
    that cannot be looked at is left out, and put in ``skipped`` (reason, path) when given."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        what = "not a regular file or folder" if path.exists() else "no such file or folder"
        raise InputError(
            f"{path}: {what}; name a transcript folder (~/.claude/projects), "
            "an OpenTelemetry file export, or set SKILLREACH_LIVE_SOURCES"
        )
    found: list[Path] = []
    stack = [path]  # depth first, in name order, without recursion (a tree 2,000 folders deep is fine)
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if skipped is not None:
                skipped.append((f"folder {_unreadable(exc)}", folder))
            continue
        below: list[Path] = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    below.append(Path(entry.path))
                    continue
                if not entry.name.endswith(SUFFIXES):
                    continue
                mode = entry.stat().st_mode  # a link: what it names
            except OSError as exc:
                if skipped is not None:
                    skipped.append((_unreadable(exc), Path(entry.path)))
                continue
            if stat.S_ISREG(mode):
                found.append(Path(entry.path))
            elif not stat.S_ISDIR(mode) and skipped is not None:
                skipped.append((NOT_REGULAR, Path(entry.path)))
        stack.extend(reversed(below))
    return found


def _kind(path: Path) -> str:
    try:
        with open(open_regular(path), "rb") as fh:
            head = fh.read(64)
    except OSError:
        return "claude-code"
    return "otlp" if is_otlp(head) else "claude-code"


class _Tally:
    def __init__(self, source: str) -> None:
        self.source = source
        self.files = 0
        self.bytes = 0
        self.added = 0
        self.hidden = 0
        self.reread = 0
        self.problems = Problems()
        self.files_skipped = Problems()

    def summary(self) -> SourceSummary:
        return SourceSummary(
            self.source,
            self.files,
            self.bytes,
            self.added,
            self.hidden,
            dict(self.problems.counts),
            dict(self.problems.first),
            self.reread,
            dict(self.files_skipped.counts),
            dict(self.files_skipped.first),
        )


def _take(
    reader: TranscriptReader | OtlpReader, batch: Batch, versions: VersionResolver, tally: _Tally
) -> None:
    """Move the reader's events (with their skill versions), updates and folders into ``batch``."""
    for ev in reader.events:
        if ev["kind"] == "skill":
            if ev["hidden"]:
                tally.hidden += 1
            else:
                ev["skill_version"] = versions.version(
                    ev["skill"], ev["git_branch"], ev["at"], ev["skill_dir"]
                )
    batch.rows.extend(reader.events)
    batch.updates.extend((reader.source, u) for u in reader.updates)
    batch.dirs.extend((reader.source, *d) for d in getattr(reader, "dirs_later", ()))
    reader.drained()


def _store(store: Store, batch: Batch, tallies: dict[str, _Tally]) -> Batch:
    for source, n in save_batch(store, batch).items():
        tallies[source].added += n
    return Batch()


def _progress(total: int, enabled: bool) -> Any:
    if not enabled or total < 64 * 2**20:
        return None
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from skillreach._io.console import make_console

    return Progress(
        TextColumn("ingest"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=make_console(stderr=True),
        transient=True,
    )


@dataclass(frozen=True, slots=True)
class _File:
    source: str
    path: Path
    key: str
    """The file's resolved path: its cursor's key."""


def _plan(sources: Sequence[Path], tallies: dict[str, _Tally]) -> list[_File]:
    """Every file to read, once each (by device and inode), under the first source that reaches it."""
    plan: list[_File] = []
    seen: set[tuple[int, int]] = set()
    left_out: set[str] = set()  # the special files named already (each once, however reached)
    for root in sources:
        resolved = Path(os.path.realpath(root))
        skipped: list[tuple[str, Path]] = []
        files = source_files(resolved, skipped)
        label = display_path(str(resolved))
        for f in files:
            source = f"{_kind(f)}:{label}"[:512]
            tally = tallies.setdefault(source, _Tally(source))
            try:
                st = f.stat()
            except OSError as exc:
                tally.files_skipped.add(_unreadable(exc), display_path(str(f)))
                continue
            if (st.st_dev, st.st_ino) in seen:
                tally.files_skipped.add(TWICE, display_path(str(f)))
                continue
            seen.add((st.st_dev, st.st_ino))
            plan.append(_File(source, f, display_path(os.path.realpath(f))))
        skipped = [(r, f) for r, f in skipped if os.path.realpath(f) not in left_out]
        if skipped:  # files left out of the walk: counted under the folder's first source
            left_out.update(os.path.realpath(f) for _, f in skipped)
            source = next((p.source for p in plan if p.path.is_relative_to(resolved)), f"claude-code:{label}")
            tally = tallies.setdefault(source[:512], _Tally(source[:512]))
            for reason, f in skipped:
                tally.files_skipped.add(reason, display_path(str(f)))
    return plan


def ingest_sources(
    sources: Sequence[Path],
    store: Store,
    *,
    skills_root: Path | None = None,
    keep_prompts: bool = False,
    progress: bool = False,
) -> IngestSummary:
    """Read what is new in ``sources`` (files or folders) into ``store``; see the module doc. The cyclic
    garbage collector is paused meanwhile (a batch is tens of thousands of acyclic dicts)."""
    with cyclic_gc_paused():
        return _ingest(sources, store, skills_root=skills_root, keep_prompts=keep_prompts, progress=progress)


def _ingest(
    sources: Sequence[Path],
    store: Store,
    *,
    skills_root: Path | None,
    keep_prompts: bool,
    progress: bool,
) -> IngestSummary:
    tallies: dict[str, _Tally] = {}
    plan = _plan(sources, tallies)
    cursors = load_cursors(store, [p.key for p in plan])
    versions = VersionResolver(skills_root)
    total = 0
    for p in plan:
        try:
            size = p.path.stat().st_size
        except OSError:
            continue
        old = cursors.get(p.key)
        total += max(0, size - (old.offset if old else 0))
    bar = _progress(total, progress)
    task = bar.add_task("ingest", total=total) if bar is not None else None
    if bar is not None:
        bar.start()
    batch = Batch()
    calls = unanswered_calls(store, {p.source for p in plan if p.source.startswith("claude-code:")})
    try:
        for p in plan:
            source, f = p.source, p.path
            tally = tallies[source]
            tally.files += 1
            shown = display_path(str(f))
            reader: TranscriptReader | OtlpReader
            if source.startswith("otlp:"):
                reader = OtlpReader(source, shown, keep_prompts=keep_prompts, problems=tally.problems)
            else:
                reader = TranscriptReader(
                    source, shown, keep_prompts=keep_prompts, problems=tally.problems, skill_calls=calls
                )
            state: list[ReadState] = []
            try:
                for block in read_new(f, cursors.get(p.key), state, key=p.key):
                    for n in block.too_long:
                        tally.problems.add("line longer than 16 MiB", f"{shown}:{n}")
                    reader.feed(block.lines, block.first_line)
                    _take(reader, batch, versions, tally)
                    if len(batch) >= FLUSH_EVENTS:
                        batch = _store(store, batch, tallies)
                    if bar is not None and task is not None:
                        bar.advance(task, sum(len(x) + 1 for x in block.lines))
            except NotRegularFile:  # replaced by a FIFO since the walk looked
                tally.files -= 1
                tally.files_skipped.add(NOT_REGULAR, shown)
                continue
            except OSError as exc:
                tally.files_skipped.add(_unreadable(exc), shown)
                continue
            _take(reader, batch, versions, tally)
            if state:  # stored with (or after) the file's last events
                tally.bytes += state[0].bytes_read
                tally.reread += int(state[0].restarted)
                batch.cursors.append(state[0].cursor)
            if len(batch) >= FLUSH_EVENTS:
                batch = _store(store, batch, tallies)
        _store(store, batch, tallies)
    finally:
        if bar is not None:
            bar.stop()
    return IngestSummary(tuple(t.summary() for t in tallies.values()))
