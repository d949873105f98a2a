"""Reading only what is new: the complete lines of a file past its cursor.

A file's cursor (:class:`~skillreach.store.live.FileCursor`) holds its identity when last read (device
and inode, and a digest of its first bytes) and the byte offset reached — always just past a newline,
so a torn last line (a writer mid-line) is left for next time. A file whose identity changed (rotated:
a new inode under the old name; truncated or rewritten in place: smaller than the offset, or other
first bytes) is read again from the start; its events keep their ids, so nothing is counted twice.

Lines are bounded: one longer than :data:`MAX_LINE_BYTES` is skipped whole (counted, never held in
memory), and the file is read in blocks of :data:`BLOCK` bytes. A file is opened without waiting
(``O_NONBLOCK``) and read only when ``fstat`` says it is a regular file: a FIFO, socket or device named
``*.jsonl`` is refused (:class:`NotRegularFile`), never waited on.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from skillreach.store.live import FileCursor

__all__ = [
    "BLOCK",
    "HEAD_BYTES",
    "MAX_LINE_BYTES",
    "LineBlock",
    "NotRegularFile",
    "file_identity",
    "head_digest",
    "open_regular",
    "read_new",
]

BLOCK = 4 * 2**20
"""Bytes read at a time."""
HEAD_BYTES = 1024
"""The first bytes whose digest tells a rewritten file from the one read before."""
MAX_LINE_BYTES = 16 * 2**20
"""The longest line read (a transcript line holding a large tool result is a few MiB at most)."""


class NotRegularFile(OSError):
    """A FIFO, socket, device or folder where a file of lines was expected."""


def open_regular(path: Path) -> int:
    """A descriptor of ``path`` opened for reading without waiting (a FIFO with no writer would block an
    ordinary ``open`` for ever); :class:`NotRegularFile` unless it is a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"{path}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def file_identity(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def head_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(slots=True)
class LineBlock:
    """Complete lines read from a file: ``lines`` (without their newline), the number of the first,
    and the lines skipped as too long (their numbers)."""

    lines: list[bytes]
    first_line: int
    too_long: list[int]


@dataclass(slots=True)
class ReadState:
    """Where a read of one file stands: the cursor to store once its events are saved."""

    cursor: FileCursor
    restarted: bool
    bytes_read: int = 0


def _start(path: Path, fh: object, st: os.stat_result, old: FileCursor | None) -> tuple[int, int, bool]:
    """(offset, lines) to start at, and whether the file was read before but must be read again."""
    if old is None:
        return 0, 0, False
    if old.identity != file_identity(st) or st.st_size < old.offset:
        return 0, 0, True
    if old.head_len:
        fh.seek(0)  # type: ignore[attr-defined]
        if head_digest(fh.read(old.head_len)) != old.head_digest:  # type: ignore[attr-defined]
            return 0, 0, True
    return old.offset, old.lines, False


def read_new(
    path: Path, old: FileCursor | None, state_out: list[ReadState], *, key: str | None = None
) -> Iterator[LineBlock]:
    """The complete lines of ``path`` past ``old`` (or from the start when the file is new, rotated or
    truncated), block by block. When the iteration ends, ``state_out`` holds the new cursor (offset just
    past the last newline read; its path ``key``, the file's resolved path, else ``path``) and how many
    bytes were read. :class:`NotRegularFile` when ``path`` is not a regular file (nothing read)."""
    with open(open_regular(path), "rb") as fh:
        st = os.fstat(fh.fileno())
        offset, lineno, restarted = _start(path, fh, st, old)
        fh.seek(offset)
        remaining = st.st_size - offset  # up to the size seen now: what a writer appends is for next time
        consumed = offset  # just past the last newline read
        base = offset  # the file offset of ``carry``'s first byte
        carry = b""
        skipping = False  # inside a line longer than the limit
        while remaining > 0:
            chunk = fh.read(min(BLOCK, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            data = carry + chunk if carry else chunk
            data_base = base
            too_long: list[int] = []
            i = 0
            if skipping:
                nl = data.find(b"\n")
                if nl < 0:
                    carry, base = b"", data_base + len(data)
                    continue
                lineno += 1
                too_long.append(lineno)
                skipping = False
                i = nl + 1
                consumed = data_base + i
            end = data.rfind(b"\n")
            lines: list[bytes] = []
            first = lineno + 1
            if end >= i:
                lines = data[i:end].split(b"\n")
                if end - i > MAX_LINE_BYTES:  # a line over the limit among them: skipped, numbering kept
                    for k, line in enumerate(lines):
                        if len(line) > MAX_LINE_BYTES:
                            too_long.append(lineno + 1 + k)
                            lines[k] = b""
                lineno += len(lines)
                consumed = data_base + end + 1
                i = end + 1
            if len(data) - i > MAX_LINE_BYTES:
                skipping = True
                carry, base = b"", data_base + len(data)
            else:
                carry, base = data[i:], data_base + i
            if lines or too_long:
                yield LineBlock(lines, first, too_long)
        # a last line without its newline (torn, or a long line still being written) is read next time
        head_len = min(consumed, HEAD_BYTES)
        fh.seek(0)
        head = head_digest(fh.read(head_len))
    cursor = FileCursor(key or str(path), file_identity(st), head, head_len, consumed, lineno)
    state_out.append(ReadState(cursor, restarted, st.st_size - offset))
