"""The codex runtime through ``skillreach run`` (the real Codex CLI or its stand-in executable), against
the Responses API stand-in: the scenario of :mod:`tests.helpers.cli_study` with 40 skills whose
descriptions Codex must shorten, and 16 queries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.responses_api import ResponsesAPI, ResponsesReply, message, query_of, skill_read, turn_of
from tests.helpers import cli_study

__all__ = ["CODEX_STUB", "killed_half_way_and_resumed"]

CODEX_STUB = Path(__file__).resolve().parents[1] / "fakes" / "codex_stub" / "codex"
SKILLS = 40
"""The catalog's size, each description long enough (~760 characters) that Codex must shorten every one
to fit 2 % of its 272,000-token window."""
FILLER = "Keep the team's chores in order, step by step, with care for every detail of the work. " * 8
QUERIES = 16


def responder(body: dict[str, Any]) -> ResponsesReply:
    reads = cli_study.reads_for(query_of(body))
    turn = turn_of(body)
    return ResponsesReply([skill_read(body, reads[turn])] if turn < len(reads) else [message("Done.")])


def killed_half_way_and_resumed(codex: str, tmp_path: Path, version: str) -> str:
    """``skillreach run --runtime codex`` at concurrency 4 on 40 skills and 16 queries, SIGKILLed once half
    the probes are recorded, then run again (:func:`tests.helpers.cli_study.killed_half_way_and_resumed`),
    and the warning that Codex shortens every description. Returns a line of timings."""
    with ResponsesAPI(responder) as api:
        return cli_study.killed_half_way_and_resumed(
            "codex",
            {"codex_path": codex, "base_url": api.base_url},
            {"OPENAI_API_KEY": "sk-test-not-a-secret"},
            tmp_path,
            version,
            skills=SKILLS,
            queries=QUERIES,
            filler=FILLER.strip(),
            said=(
                "overflows Codex's skills listing: codex lists 40 of 40 skills: 40 descriptions shortened",
            ),
        )
