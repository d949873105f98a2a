"""The probe log, ``probes.jsonl``: the only writer (:class:`JsonlSink`) and the only reader.

One record per line, appended, flushed and fsynced before the probe counts as done (it was paid for).
One rule for a damaged log, whoever reads it:

- a **torn last line** (no newline at the end and not valid JSON: the writer was killed mid-line) is
  dropped and reported; its probe is simply run again on resume. The writer cuts such a tail off before
  it appends (reported too), so a torn line never ends up in the middle of a log we wrote;
- anything else that is not a JSON object — garbage in the middle — is an :class:`InputError` naming the
  file and line.

:func:`parse_lines` applies the rule to raw lines and yields ``(line number, object)``; the scorer's
columnar reader (:meth:`skillreach.scoring.table.ProbeTable.from_lines`) and :func:`read_probes` both use it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from skillreach.errors import InputError, NotFoundError
from skillreach.models import MAX_PROBE_LINE_BYTES, ProbeRecord

__all__ = [
    "PROBES_FILE",
    "JsonlSink",
    "completed_pairs",
    "first_line",
    "latest_records",
    "parse_lines",
    "read_probes",
    "refuse_two_models",
    "write_probes",
]

log = logging.getLogger("skillreach.probe_log")

PROBES_FILE = "probes.jsonl"
MAX_PROBE_LOG_BYTES = 8 << 30
"""Bytes a probe log may hold (≈ 25 million probes); a larger file (a sparse one, say) is refused unread."""


def parse_lines(
    lines: Iterable[bytes | str], *, source: str, warnings: list[str] | None = None, start: int = 1
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line, under the one torn-line rule (module doc).

    A dropped torn last line is appended to ``warnings`` (when given) and logged. ``start``: the
    number of the first line (a reader that hands over a file block by block).
    """
    pending: tuple[int, str] | None = None
    for lineno, line in enumerate(lines, start):
        if pending is not None:
            raise InputError(f"{source}:{pending[0]}: {pending[1]}")
        text = line.strip()
        if not text:
            continue
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            msg = f"not valid JSON ({exc}); fix or remove the line"
            ends = line.endswith(b"\n") if isinstance(line, bytes) else line.endswith("\n")
            if not ends:
                pending = (lineno, msg)  # refused unless it turns out to be the last line
                continue
            raise InputError(f"{source}:{lineno}: {msg}") from exc
        if type(obj) is not dict:
            raise InputError(f"{source}:{lineno}: a probe line must be a JSON object; fix or remove the line")
        yield lineno, obj
    if pending is not None:
        note = f"{source}:{pending[0]}: last line cut short (not valid JSON); skipped"
        log.warning("%s", note)
        if warnings is not None:
            warnings.append(note)


def _too_long(source: str, lineno: int | None) -> InputError:
    where = f"{source}:{lineno}" if lineno is not None else f"{source}: its last line"
    return InputError(
        f"{where}: a line longer than {MAX_PROBE_LINE_BYTES >> 20} MiB (no newline); not a probe "
        "log: pass the probes.jsonl a study wrote, or move this file away"
    )


def bounded_lines(fh: BinaryIO, source: str) -> Iterator[bytes]:
    """The lines of a binary file, each at most :data:`MAX_PROBE_LINE_BYTES` (a longer one — a sparse
    file with no newline — is an :class:`InputError` naming it, after reading no more than the limit)."""
    lineno = 0
    while line := fh.readline(MAX_PROBE_LINE_BYTES + 1):
        lineno += 1
        if len(line) > MAX_PROBE_LINE_BYTES:
            raise _too_long(source, lineno)
        yield line


def read_probes(
    path: str | os.PathLike[str], *, missing_ok: bool = False, warnings: list[str] | None = None
) -> list[ProbeRecord]:
    """The records of a probe log (see the module doc for a damaged one)."""
    p = Path(path)
    try:
        fh = p.open("rb")
    except FileNotFoundError:
        if missing_ok:
            return []
        raise NotFoundError(f"{p}: no such probe log; run a study first or check --probes") from None
    records: list[ProbeRecord] = []
    with fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_PROBE_LOG_BYTES:
            raise InputError(
                f"{p}: {size:,} bytes, more than the {MAX_PROBE_LOG_BYTES >> 30} GiB a probe log may hold; "
                "check --probes"
            )
        for lineno, obj in parse_lines(bounded_lines(fh, str(p)), source=str(p), warnings=warnings):
            try:
                records.append(ProbeRecord.model_validate(obj))
            except ValueError as exc:
                what = f"{p}:{lineno}: not a probe record ({_why(exc)}); fix or remove the line"
                raise InputError(what) from exc
    return records


def first_line(path: str | os.PathLike[str], match: Callable[[dict[str, Any]], bool]) -> int | None:
    """The number of the first line of a probe log whose object ``match`` accepts (for an error message:
    the log is read again, so a message can name a line whatever read the records)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            for lineno, obj in parse_lines(bounded_lines(fh, str(p)), source=str(p)):
                if match(obj):
                    return lineno
    except (OSError, InputError):
        return None
    return None


def refuse_two_models(path: str | os.PathLike[str], records: Sequence[ProbeRecord], fingerprint: str) -> None:
    """Refuse a log whose records of one study (``fingerprint``) name two models without one snapshot
    naming them all (with one, they are aliases of it), naming the line of the second and of the first:
    the log was edited, or written by two runs the fingerprint cannot tell apart."""
    mine = [r for r in records if r.fingerprint == fingerprint]
    models = list(dict.fromkeys(r.model for r in mine if r.model))
    if len(models) < 2 or len({r.resolved_model for r in mine if r.resolved_model}) == 1:
        return
    first, second = models[0], models[1]

    def line_of(model: str) -> int | None:
        return first_line(path, lambda o: o.get("fingerprint") == fingerprint and o.get("model") == model)

    at, since = line_of(second), line_of(first)
    raise InputError(
        f"{path}{f':{at}' if at is not None else ''}: field 'model' is {second[:80]!r}, but "
        f"{f'line {since}' if since is not None else 'another line'} has {first[:80]!r} under this study's "
        "fingerprint: probes of two models in one log; remove the lines of the other model, or pass "
        "another --out"
    )


def _why(exc: ValueError) -> str:
    """The first thing wrong with a record: ``field 'cost_usd' is -0.5: Input should be …``."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "record"
        return f"field {where!r} is {first.get('input')!r}: {first.get('msg', 'invalid')}"
    return str(exc).splitlines()[0]


def write_probes(path: str | os.PathLike[str], records: Iterable[ProbeRecord]) -> int:
    """Write a whole probe log at once (a distributed study's log, exported from the store at its end):
    to a temporary name, fsynced, then renamed into place, so a reader never sees half of it."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(record.to_json_line() + "\n")
            n += 1
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, p)
    return n


def completed_pairs(records: Iterable[ProbeRecord], fingerprint: str) -> set[tuple[str, int]]:
    """(query id, attempt) pairs recorded without error under exactly this fingerprint."""
    return {(r.query_id, r.attempt) for r in records if r.error is None and r.fingerprint == fingerprint}


def latest_records(records: Iterable[ProbeRecord], fingerprint: str) -> list[ProbeRecord]:
    """One record per (query, attempt) under this fingerprint: the last error-free one, else the last
    errored one. What a study scores after a resume; other fingerprints are left out."""
    best: dict[tuple[str, int], ProbeRecord] = {}
    for r in records:
        if r.fingerprint != fingerprint:
            continue
        key = (r.query_id, r.attempt)
        old = best.get(key)
        if old is None or r.error is None or old.error is not None:
            best[key] = r
    return list(best.values())


def _nothing() -> None:
    return None


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line without its newline (a write cut short) before appending after it."""
    with path.open("rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        # find the start of the last line (read backwards in blocks, no further than a line may be long)
        pos, start = size, 0
        while pos > 0:
            if size - pos > MAX_PROBE_LINE_BYTES:
                raise _too_long(str(path), None)
            step = min(65536, pos)
            pos -= step
            fh.seek(pos)
            block = fh.read(step)
            cut = block.rfind(b"\n")
            if cut >= 0:
                start = pos + cut + 1
                break
        fh.seek(start)
        tail = fh.read()
        try:
            orjson.loads(tail)
        except orjson.JSONDecodeError:
            log.warning("%s: dropped a last line cut short (an interrupted write); its probe re-runs", path)
            fh.truncate(start)
        else:
            fh.write(b"\n")  # a whole record that only lacks its newline: keep it


class JsonlSink:
    """Appends each record as one line of ``path``; flushed, and fsynced before ``write`` /
    ``write_many`` returns.

    Thread-safe, with group commit: the runner hands over the records that finished together as one
    group (``stage`` on the event loop, its ``fsync`` in a worker thread: ``thread_safe`` is true), one
    write and one ``fsync`` a group;
    and when several threads write at once (batches sharing the log), one ``fsync`` covers every line
    written before it started, so a record is durable when its call returns without one ``fsync`` per
    record serialising the run. Usable as a context manager.
    """

    thread_safe = True

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._fh: Any = None
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._written = 0
        self._synced = 0
        self.fsyncs = 0

    @property
    def count(self) -> int:
        """Records written to the file (in the page cache at least)."""
        return self._written

    @property
    def synced(self) -> int:
        """Records an ``fsync`` has covered (on the disk)."""
        return self._synced

    def _open(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            _cut_torn_tail(self.path)
        return self.path.open("ab")

    def write(self, record: ProbeRecord) -> None:
        self.write_many((record,))

    def write_many(self, records: Sequence[ProbeRecord]) -> None:
        """Append ``records`` (one write), flushed, and fsynced before this returns."""
        self.stage(records)()

    def stage(self, records: Sequence[ProbeRecord]) -> Callable[[], None]:
        """Append ``records`` (one write, flushed: in the page cache, not yet on disk) and return what
        makes them durable: the ``fsync``, for a worker thread. The runner's group commit stages the
        records that finished together on the event loop, then syncs them in a thread, so that thread
        runs almost no Python (it would wait for the interpreter lock the loop holds); the records
        count as written only once the returned call has returned."""
        if not records:
            return _nothing
        # pydantic's own JSON (6 µs a record; ``to_json_line``, through ``json``, 27 µs): the same
        # object, compact and UTF-8, a float in its shortest form (``2.7e-5``, not ``2.7e-05``)
        data = b"".join([record.model_dump_json().encode() + b"\n" for record in records])
        with self._lock, self._named():
            if self._fh is None:
                self._fh = self._open()
            self._fh.write(data)
            self._fh.flush()
            self._written += len(records)
            mine = self._written
            fd = self._fh.fileno()
        if not self.fsync:
            return _nothing
        return functools.partial(self._sync, fd, mine)

    def _sync(self, fd: int, mine: int) -> None:
        with self._sync_lock:
            if self._synced >= mine:
                return  # an fsync that started after our flush already covered this line
            covered = self._written
            with self._named():
                os.fsync(fd)
            self.fsyncs += 1
            self._synced = max(self._synced, covered)

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        """An OS error of the log's write, flush or ``fsync`` (a full disk: ENOSPC) names the log, so
        the one line the user sees says which disk filled up."""
        try:
            yield
        except OSError as exc:
            if exc.filename is None:
                exc.filename = str(self.path)
            raise

    def close(self) -> None:
        with self._lock, self._sync_lock:
            if self._fh is not None:
                fh, self._fh = self._fh, None
                with self._named():
                    fh.close()

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
