"""The REAL Claude Code and pi CLIs at concurrency 4 against the local Messages API stand-in (issue 13:
the claude-code runtime failed 3 of 41 probes at ``--concurrency 4``). Skipped, never passed, when the
CLIs are not installed (``.ci/run`` installs them into ``~/.cache/skillreach/``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from skillreach.models import Catalog, ProbeRecord, Query, QueryKind
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, Runtime
from skillreach.study.runner import ListSink, run_probes
from tests.fakes.kit import folder_catalog
from tests.fakes.messages_api import MessagesAPI, Reply, ScriptResponder, query_text, text_reply, tool_call
from tests.helpers.clis import Orphans, hold_hooks_left, real_claude, real_pi

pytestmark = pytest.mark.realcli

PROBES = 12
CONCURRENCY = 4
SKILLS = tuple((f"skill-{i:02d}", f"Handle chores of kind {i:02d} for the team.") for i in range(26))


def queries(n: int = PROBES) -> list[Query]:
    return [
        Query(
            id=f"q{i:02d}",
            text=f"request {i:02d}: use {SKILLS[i % len(SKILLS)][0]}",
            expected_skill=SKILLS[i % len(SKILLS)][0],
            kind=QueryKind.implicit,
        )
        for i in range(n)
    ]


def expected(record: ProbeRecord) -> tuple[str]:
    return (SKILLS[int(record.query_id[1:]) % len(SKILLS)][0],)


async def under_load(runtime: Runtime, catalog: Catalog, n: int = PROBES) -> list[ProbeRecord]:
    sink = ListSink()
    try:
        await run_probes(
            runtime,
            catalog,
            [(q, 1) for q in queries(n)],
            options=ProbeOptions(timeout_s=120.0),
            sink=sink,
            concurrency=CONCURRENCY,
            fingerprint="realcli-load",
        )
    finally:
        await runtime.aclose()
    errors = [r.error for r in sink.records if r.error]
    assert errors == [], f"{len(errors)} of {len(sink.records)} probes errored; first: {errors[0]}"
    return sink.records


async def test_real_claude_code_at_concurrency_4(tmp_path: Path) -> None:
    from skillreach.runtimes.claude_code import ClaudeCodeRuntime

    claude = real_claude()
    if claude is None:
        pytest.skip("the real Claude Code CLI is not installed (set SKILLREACH_REAL_CLAUDE or run .ci/run)")
    catalog = folder_catalog(tmp_path, SKILLS, with_path=True)
    plan = ScriptResponder({f"use {name}": [name] for name, _ in SKILLS})
    with MessagesAPI(plan) as api, Orphans() as orphans:
        rt = ClaudeCodeRuntime(
            "claude-sonnet-4-6",
            claude_path=claude,
            settings=Settings(),
            base_url=api.base_url,
            api_key="sk-test",
            concurrency=CONCURRENCY,
        )
        records = await under_load(rt, catalog)
        assert hold_hooks_left(orphans) == []  # the hooks that parked the targets' calls are gone too
    assert [r.invoked for r in records] == [expected(r) for r in records]
    assert rt.template_builds == 1


async def test_real_pi_at_concurrency_4(tmp_path: Path) -> None:
    from skillreach.runtimes.pi import PiRuntime

    pi = real_pi()
    if pi is None:
        pytest.skip("the real pi CLI is not installed (run .ci/run, or set SKILLREACH_TEST_PI)")
    catalog = folder_catalog(tmp_path, SKILLS, with_path=True)

    def responder(body: dict[str, Any]) -> Any:
        wanted = re.search(r"use (skill-\d\d)", query_text(body))
        system = json.dumps(body.get("system"))
        if wanted and not any(m.get("role") == "assistant" for m in body.get("messages", [])):
            m = re.search(rf"<location>([^<]*/{wanted.group(1)}/SKILL\.md)</location>", system)
            assert m, "pi listed every resident skill with its location"
            return Reply([tool_call("read", {"path": m.group(1)})])
        return text_reply("done")

    with MessagesAPI(responder) as api:
        rt = PiRuntime(
            pi_path=pi, model="claude-sonnet-4-5", base_url=api.base_url, env={"ANTHROPIC_API_KEY": "test"}
        )
        records = await under_load(rt, catalog, n=8)  # pi starts slower (node): 8 probes
    assert [r.invoked for r in records] == [expected(r) for r in records]
    assert rt._residency.checks == 1
