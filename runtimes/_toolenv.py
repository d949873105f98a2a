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

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "name": "Bash",
        "description": "Run a shell command in the project folder and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run."},
                "description": {"type": "string", "description": "What the command does, in 5-10 words."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
    {
        "name": "Read",
        "description": "Read a file of the project and return its content.",
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "Path of the file to read."},
                "offset": {"type": "integer", "description": "First line to read (1-based)."},
                "limit": {"type": "integer", "description": "How many lines to read."},
            },
            "required": ["file_path"],
            "additionalProperties": False,
        },
    },
    {
        "name": "Write",
        "description": "Write a file, replacing it if it exists.",
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "Path of the file to write."},
                "content": {"type": "string", "description": "The whole new content."},
            },
            "required": ["file_path", "content"],
            "additionalProperties": False,
        },
    },
    {
        "name": "Edit",
        "description": "Replace an exact string in a file with another.",
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "Path of the file to edit."},
                "old_string": {"type": "string", "description": "The text to replace (exact)."},
                "new_string": {"type": "string", "description": "The replacement text."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            },
            "required": ["file_path", "old_string", "new_string"],
            "additionalProperties": False,
        },
    },
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
