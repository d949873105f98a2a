"""Terminal output fit for CI logs and safe from hostile text.

- :func:`strip_control` removes control characters (ESC, BEL, NUL, backspace, carriage return, C1
  codes, bidirectional marks, embeddings, overrides and isolates) from text that came from users' files
  — query text, skill names, ids — so a query cannot recolour, retitle or rewrite a terminal or a CI log;
- :func:`make_console` is a rich console that does that to every piece of text it prints, and, when
  its stream is not a terminal, is wide enough that a table never cuts a value (``activa…``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["PIPE_WIDTH", "make_console", "strip_control"]

PIPE_WIDTH = 240
"""Columns of a console whose stream is not a terminal (a CI log): tables are as wide as their
content, so this only has to exceed the widest table."""

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def strip_control(text: str) -> str:
    """``text`` without control characters; tab and newline are kept."""
    return _CONTROL.sub("", text)


def make_console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A rich console that strips control characters from the text it prints and never cuts a table
    cell when its stream is a pipe or a file (``COLUMNS`` is ignored there: CI sets it to 80)."""
    from rich.console import Console
    from rich.segment import Segment

    class _Clean(Console):
        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            return super()._render_buffer(
                s if s.control else Segment(strip_control(s.text), s.style, s.control) for s in buffer
            )

    stream = kwargs.get("file") or (sys.stderr if stderr else sys.stdout)
    try:
        is_tty = stream.isatty()
    except (AttributeError, ValueError):
        is_tty = False
    if not is_tty and "width" not in kwargs:
        kwargs["width"] = PIPE_WIDTH
    return _Clean(stderr=stderr, **kwargs)
