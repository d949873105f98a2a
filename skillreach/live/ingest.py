"""``skillreach ingest``: what agents recorded, read incrementally into the store.

Each PATH is a file or a folder (its ``*.jsonl``, ``*.json`` and ``*.ndjson`` files, recursively). A
file is an OTLP JSON export when its first bytes say so (``{"resourceLogs"``/``{"resourceSpans"``),
else a Claude Code transcript. Its events belong to the source ``<kind>:<PATH>`` (``claude-code:`` or
``otlp:`` and the PATH as given, made absolute). Per file: only the bytes past its cursor are read
(:mod:`skillreach.live.files`), the events are stored in batches (one transaction each, duplicates
ignored), then the cursor — so a crash between the two re-reads lines whose events are already stored,
and adds nothing twice. Skill calls get the version of the skill as it was then
(:mod:`skillreach.live.versions`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillreach._gc import cyclic_gc_paused
from skillreach.errors import InputError
from skillreach.live.files import ReadState, read_new
from skillreach.live.readers import OtlpReader, Problems, TranscriptReader, is_otlp
from skillreach.live.versions import VersionResolver
from skillreach.store.database import Store
from skillreach.store.live import Batch, load_cursors, save_batch, unanswered_calls

__all__ = ["SUFFIXES", "IngestSummary", "SourceSummary", "ingest_sources", "source_files"]

SUFFIXES = (".jsonl", ".json", ".ndjson")
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
        return sum(sum(s.skipped.values()) for s in self.sources)

    def as_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "bytes_read": self.bytes_read,
            "events_added": self.events_added,
            "hidden": self.hidden,
            "skipped": self.skipped,
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
            for reason, n in sorted(s.skipped.items()):
                out.append(f"  skipped {n} line(s): {reason} (first: {s.first_skipped.get(reason, '?')})")
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


def source_files(path: Path) -> list[Path]:
    """The files a PATH names: itself, or a folder's JSON lines files (recursively, sorted)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(
            f"{path}: no such file or folder; name a transcript folder (~/.claude/projects), "
            "an OpenTelemetry file export, or set SKILLREACH_LIVE_SOURCES"
        )
    found: list[Path] = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        found.extend(Path(root, f) for f in sorted(files) if f.endswith(SUFFIXES))
    return found


def _kind(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
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


def _plan(sources: Sequence[Path]) -> Iterator[tuple[str, Path]]:
    for root in sources:
        absolute = Path(os.path.abspath(root))
        for f in source_files(absolute):
            yield f"{_kind(f)}:{absolute}"[:512], f


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
    plan = list(_plan(sources))
    cursors = load_cursors(store, [str(f) for _, f in plan])
    versions = VersionResolver(skills_root)
    tallies: dict[str, _Tally] = {}
    total = 0
    for _, f in plan:
        try:
            size = f.stat().st_size
        except OSError:
            continue
        old = cursors.get(str(f))
        total += max(0, size - (old.offset if old else 0))
    bar = _progress(total, progress)
    task = bar.add_task("ingest", total=total) if bar is not None else None
    if bar is not None:
        bar.start()
    batch = Batch()
    calls = unanswered_calls(store, {source for source, _ in plan if source.startswith("claude-code:")})
    try:
        for source, f in plan:
            tally = tallies.setdefault(source, _Tally(source))
            tally.files += 1
            reader: TranscriptReader | OtlpReader
            if source.startswith("otlp:"):
                reader = OtlpReader(source, str(f), keep_prompts=keep_prompts, problems=tally.problems)
            else:
                reader = TranscriptReader(
                    source, str(f), keep_prompts=keep_prompts, problems=tally.problems, skill_calls=calls
                )
            state: list[ReadState] = []
            try:
                for block in read_new(f, cursors.get(str(f)), state):
                    for n in block.too_long:
                        tally.problems.add("line longer than 16 MiB", f"{f}:{n}")
                    reader.feed(block.lines, block.first_line)
                    _take(reader, batch, versions, tally)
                    if len(batch) >= FLUSH_EVENTS:
                        batch = _store(store, batch, tallies)
                    if bar is not None and task is not None:
                        bar.advance(task, sum(len(x) + 1 for x in block.lines))
            except OSError as exc:
                tally.problems.add(f"unreadable ({exc.strerror or type(exc).__name__})", str(f))
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
