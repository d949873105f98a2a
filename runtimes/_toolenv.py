"""The simulated tool environment of compliance mode: Bash, Read, Write, Edit.

Calls are recorded (as :class:`~skillreach.models.ToolCall`) and never executed. The result a call
gets back is canned: the first regular expression of ``query.checks.tool_results`` that matches the
JSON of the call's input gives the text, else ``"ok"``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from skillreach.models import Query

__all__ = ["DEFAULT_RESULT", "TOOL_NAMES", "TOOL_SCHEMAS", "canned_result", "input_json"]

DEFAULT_RESULT = "ok"


def _tool(
    name: str, about: str, required: tuple[str, ...], fields: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    """A tool definition; ``fields`` maps each input field to its (JSON type, description)."""
    return {
        "name": name,
        "description": about,
        "input_schema": {
            "type": "object",
            "properties": {k: {"type": t, "description": d} for k, (t, d) in fields.items()},
            "required": list(required),
            "additionalProperties": False,
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _tool(
        "Bash",
        "Run a shell command in the project folder and return its output.",
        ("command",),
        {
            "command": ("string", "The command to run."),
            "description": ("string", "What the command does, in 5-10 words."),
        },
    ),
    _tool(
        "Read",
        "Read a file of the project and return its content.",
        ("file_path",),
        {
            "file_path": ("string", "Path of the file to read."),
            "offset": ("integer", "First line to read (1-based)."),
            "limit": ("integer", "How many lines to read."),
        },
    ),
    _tool(
        "Write",
        "Write a file, replacing it if it exists.",
        ("file_path", "content"),
        {
            "file_path": ("string", "Path of the file to write."),
            "content": ("string", "The whole new content."),
        },
    ),
    _tool(
        "Edit",
        "Replace an exact string in a file with another.",
        ("file_path", "old_string", "new_string"),
        {
            "file_path": ("string", "Path of the file to edit."),
            "old_string": ("string", "The text to replace (exact)."),
            "new_string": ("string", "The replacement text."),
            "replace_all": ("boolean", "Replace every occurrence."),
        },
    ),
]

TOOL_NAMES = frozenset(t["name"] for t in TOOL_SCHEMAS)


def input_json(tool_input: dict[str, Any]) -> str:
    """The JSON a check's pattern is searched in (same form as compliance checks use)."""
    return json.dumps(tool_input, ensure_ascii=False, sort_keys=True)


def canned_result(query: Query, tool_input: dict[str, Any]) -> str:
    """The scripted answer to a call: first matching ``checks.tool_results`` regex, else ``"ok"``."""
    results = query.checks.tool_results if query.checks is not None else {}
    text = input_json(tool_input)
    for pattern, result in results.items():
        try:
            if re.search(pattern, text):
                return result
        except re.error:
            continue
    return DEFAULT_RESULT
