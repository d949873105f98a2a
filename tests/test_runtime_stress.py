"""Every runtime under load: 32 probes at concurrency 8 against its stand-in, 0 errors, and the state a
runtime shares between probes (per-catalog folders, residency checks, request prefixes) built once.

Issue 13: at ``--concurrency 4`` the claude-code runtime's per-catalog template folder was built by every
concurrent probe at once and probes failed with ``FileExistsError``; no test ran a CLI runtime above
concurrency 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillreach.models import Catalog, ProbeRecord, Query, QueryKind
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, Runtime
from skillreach.study.runner import ListSink, run_probes
from tests.fakes.kit import folder_catalog

FAKES = Path(__file__).parent / "fakes"
PROBES = 32
CONCURRENCY = 8
SKILLS = tuple((f"skill-{i:02d}", f"Handle chores of kind {i:02d} for the team.") for i in range(26))


def stress_queries() -> list[Query]:
    """32 queries, each naming one of the 26 skills (so every probe activates one)."""
    return [
        Query(
            id=f"q{i:02d}",
            text=f"request {i:02d}: use {SKILLS[i % len(SKILLS)][0]}",
            expected_skill=SKILLS[i % len(SKILLS)][0],
            kind=QueryKind.implicit,
        )
        for i in range(PROBES)
    ]


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return folder_catalog(tmp_path, SKILLS, with_path=True)


async def stress(runtime: Runtime, catalog: Catalog, **options: Any) -> list[ProbeRecord]:
    sink = ListSink()
    try:
        await run_probes(
            runtime,
            catalog,
            [(q, 1) for q in stress_queries()],
            options=ProbeOptions(**{"timeout_s": 60.0, **options}),
            sink=sink,
            concurrency=CONCURRENCY,
            fingerprint="stress",
        )
    finally:
        await runtime.aclose()
    errors = [r.error for r in sink.records if r.error]
    assert errors == [], f"{len(errors)} of {len(sink.records)} probes errored; first: {errors[0]}"
    assert len(sink.records) == PROBES
    return sink.records


def plan_all(prefix_key: str = "use ") -> dict[str, list[str]]:
    """Each stand-in's plan: a query naming ``skill-NN`` loads that skill."""
    return {f"{prefix_key}{name}": [name] for name, _ in SKILLS}


# ------------------------------------------------------------------------------------ claude-code


async def test_claude_code_under_load(tmp_path: Path, catalog: Catalog) -> None:
    import json

    from skillreach.runtimes.claude_code import ClaudeCodeRuntime

    script = tmp_path / "script.json"
    script.write_text(json.dumps({k: {"steps": v} for k, v in plan_all().items()}))
    rt = ClaudeCodeRuntime(
        claude_path=str(FAKES / "claude_stub" / "claude"),
        settings=Settings(),
        extra_env={"CLAUDE_STUB_SCRIPT": str(script), "ANTHROPIC_API_KEY": "sk-test"},
        concurrency=CONCURRENCY,
    )
    root = rt._root
    records = await stress(rt, catalog)
    assert all(r.invoked == (_expected(r),) for r in records)
    assert rt.template_builds == 1
    assert not root.exists()


def _expected(record: ProbeRecord) -> str:
    return SKILLS[int(record.query_id[1:]) % len(SKILLS)][0]


# ------------------------------------------------------------------------- the other agent CLIs


def stub_env(tmp_path: Path, prefix: str) -> dict[str, str]:
    import json

    plan = tmp_path / f"{prefix.lower()}-plan.json"
    plan.write_text(json.dumps(plan_all()))
    return {f"{prefix}_STUB_PLAN": str(plan)}


async def test_pi_under_load(tmp_path: Path, catalog: Catalog) -> None:
    from skillreach.runtimes.pi import PiRuntime

    rt = PiRuntime(
        pi_path=str(FAKES / "pi_stub" / "pi"), model="claude-sonnet-4-5", env=stub_env(tmp_path, "PI")
    )
    records = await stress(rt, catalog)
    assert all(r.invoked == (_expected(r),) for r in records)
    assert rt._residency.checks == 1  # the residency check (pi --mode rpc) ran once for 32 probes


async def test_goose_under_load(tmp_path: Path, catalog: Catalog) -> None:
    from skillreach.runtimes.goose import GooseRuntime

    rt = GooseRuntime(
        goose_path=str(FAKES / "goose_stub" / "goose"),
        model="claude-sonnet-4-5",
        env=stub_env(tmp_path, "GOOSE"),
    )
    records = await stress(rt, catalog)
    assert all(r.invoked == (_expected(r),) for r in records)
    assert rt._residency.checks == 1  # `goose skills list` ran once for 32 probes


async def test_antigravity_cli_under_load(tmp_path: Path, catalog: Catalog) -> None:
    from skillreach.runtimes.antigravity_cli import AntigravityCliRuntime

    rt = AntigravityCliRuntime(
        agy_path=str(FAKES / "antigravity_cli_stub" / "agy"),
        model="gemini-3-flash",
        env=stub_env(tmp_path, "AGY"),
    )
    records = await stress(rt, catalog)
    assert all(r.invoked == (_expected(r),) for r in records)


# ------------------------------------------------------------------------------------- API runtimes


async def test_anthropic_under_load(catalog: Catalog) -> None:
    from skillreach.runtimes.anthropic import AnthropicRuntime
    from tests.fakes.messages_api import MessagesAPI, ScriptResponder

    with MessagesAPI(ScriptResponder({f"use {name}": [name] for name, _ in SKILLS})) as api:
        rt = AnthropicRuntime(
            "claude-sonnet-4-6", base_url=api.base_url, api_key="sk-test", settings=Settings(), concurrency=8
        )
        records = await stress(rt, catalog)
        assert len(api.message_requests) == PROBES  # one request per probe (early exit at the target)
    assert all(r.invoked == (_expected(r),) for r in records)
    assert len(rt._tools) == 1  # the listing and its JSON prefix were built once for the catalog


async def test_openai_compatible_under_load(catalog: Catalog) -> None:
    from skillreach.runtimes.openai_compat import OpenAICompatRuntime
    from tests.fakes.openai_chat import OpenAIChat

    with OpenAIChat(plan={f"use {name}": [name] for name, _ in SKILLS}) as api:
        rt = OpenAICompatRuntime(model="local", base_url=api.base_url, api_key="k", concurrency=8)
        records = await stress(rt, catalog)
        assert len(api.requests) == PROBES
    assert all(r.invoked == (_expected(r),) for r in records)


async def test_antigravity_sdk_under_load(tmp_path: Path) -> None:
    pytest.importorskip("google.antigravity", reason="google-antigravity is not installed")
    from skillreach.runtimes.antigravity_sdk import AntigravitySdkRuntime
    from tests.fakes.antigravity_gemini import GeminiAPI

    small = folder_catalog(tmp_path)  # the harness is one process per probe: keep the catalog small
    with GeminiAPI(plan={"use": ["rollback"]}) as api:
        rt = AntigravitySdkRuntime(model="gemini-2.5-flash", base_url=api.base_url, api_key="k")
        records = await stress(rt, small)
    assert all(r.invoked == ("rollback",) for r in records)


@pytest.mark.parametrize("name", ["keyword", "fake", "retriever"])
async def test_offline_runtimes_under_load(name: str, catalog: Catalog) -> None:
    from skillreach.runtimes import get_runtime

    records = await stress(get_runtime(name), catalog)
    assert len({r.query_id for r in records}) == PROBES
