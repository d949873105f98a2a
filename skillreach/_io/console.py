"""Terminal output fit for CI logs and safe from hostile text.

- :func:`escape` is the one escape of text that came from users' files or agents' records — skill names,
  prompts, query text, paths, ids — before it is printed: every control character (ESC, BEL, NUL,
  backspace, carriage return, DEL, the C1 codes), every bidirectional control (U+202E …), the line and
  paragraph separators and a lone surrogate (a file name in another encoding) become a visible escape
  (``\\x1b``, ``\\u202e``), so a skill name cannot recolour, retitle or rewrite a terminal or a CI log,
  nor reorder what is shown after it. Tab and newline are kept only where a text may span lines.
- :func:`escape_json` does the same inside JSON text (``\\u001b``: still valid JSON, the same value).
- :func:`guard_streams` puts :class:`EscapingStream` in front of ``sys.stdout`` and ``sys.stderr`` for
  the whole command (the CLI's ``main``): whatever a printer forgot to escape is escaped there, except
  colour codes (SGR: ``ESC [ … m``), which Prefect's and rich's loggers write.
- :func:`strip_control` removes the same characters (GitHub annotations and markdown, where an escape
  would be noise);
- :func:`make_console` is a rich console that escapes every piece of text it prints, writes past the
  guard (its own colour and cursor codes are its own), and, when its stream is not a terminal, is wide
  enough that a table never cuts a value (``activa…``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "PIPE_WIDTH",
    "EscapingStream",
    "escape",
    "escape_json",
    "guard_streams",
    "make_console",
    "raw_stream",
    "strip_control",
]

PIPE_WIDTH = 240
"""Columns of a console whose stream is not a terminal (a CI log): tables are as wide as their
content, so this only has to exceed the widest table."""

_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_CONTROL = re.compile(f"[{_UNSAFE}]")
_CONTROL_ONE_LINE = re.compile(f"[\t\n{_UNSAFE}]")
_SGR = re.compile(r"\x1b\[[0-9;]*m")
"""A colour or text-attribute code: what the stream guard lets through."""


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str, *, lines: bool = False) -> str:
    """``text`` with every unsafe character (see the module doc) written as a visible escape; with
    ``lines``, tab and newline are kept (a text that may span lines), else escaped too."""
    pattern = _CONTROL if lines else _CONTROL_ONE_LINE
    return pattern.sub(_visible, text) if pattern.search(text) else text


def escape_json(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with every unsafe character written as its
    ``\\uXXXX`` escape: the same JSON value, safe on a terminal (json escapes C0 controls itself, not
    DEL, the C1 codes or the bidirectional controls)."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def strip_control(text: str) -> str:
    """``text`` without control characters; tab and newline are kept."""
    return _CONTROL.sub("", text)


def _guarded(text: str) -> str:
    if not _CONTROL.search(text):
        return text
    out: list[str] = []
    pos = 0
    for m in _SGR.finditer(text):
        out.append(escape(text[pos : m.start()], lines=True))
        out.append(m.group())
        pos = m.end()
    out.append(escape(text[pos:], lines=True))
    return "".join(out)


class EscapingStream:
    """A text stream that writes to ``inner`` what it is given, escaped (:func:`escape`, tab and newline
    kept, colour codes kept); everything else (``buffer``, ``isatty``, ``encoding`` …) is ``inner``'s."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(_guarded(text) if isinstance(text, str) else text)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def raw_stream(stream: Any) -> Any:
    """The stream behind an :class:`EscapingStream` (``stream`` itself otherwise)."""
    return stream.inner if isinstance(stream, EscapingStream) else stream


def guard_streams() -> None:
    """``sys.stdout`` and ``sys.stderr`` behind an :class:`EscapingStream` (idempotent)."""
    if sys.stdout is not None and not isinstance(sys.stdout, EscapingStream):
        sys.stdout = EscapingStream(sys.stdout)
    if sys.stderr is not None and not isinstance(sys.stderr, EscapingStream):
        sys.stderr = EscapingStream(sys.stderr)


def make_console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A rich console that escapes control characters in the text it prints and never cuts a table
    cell when its stream is a pipe or a file (``COLUMNS`` is ignored there: CI sets it to 80)."""
    from rich.console import Console
    from rich.segment import Segment

    class _Clean(Console):
        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            return super()._render_buffer(
                s if s.control else Segment(escape(s.text, lines=True), s.style, s.control) for s in buffer
            )

    stream = kwargs.get("file") or raw_stream(sys.stderr if stderr else sys.stdout)
    kwargs["file"] = stream  # past the guard: the text is escaped above, the codes are rich's own
    try:
        is_tty = stream.isatty()
    except (AttributeError, ValueError):
        is_tty = False
    if not is_tty and "width" not in kwargs:
        kwargs["width"] = PIPE_WIDTH
    return _Clean(stderr=stderr, **kwargs)
