"""The API runtimes (``anthropic``, ``openai-compatible``) against servers of other makes, on the stand-ins:
no Models API, a routing reply budget (``routing_max_tokens``), forced choice (``tool_choice``), and a
canary that is quick and says what to check for the endpoint at hand."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest

from skillreach.errors import ConfigError, HarnessBlind
from skillreach.models import Catalog, Checks, Query, QueryKind, Skill
from skillreach.runtimes import get_runtime
from skillreach.runtimes._retry import RetryPolicy
from skillreach.runtimes.anthropic import AnthropicRuntime
from skillreach.runtimes.openai_compat import OpenAICompatRuntime
from skillreach.settings import Settings
from skillreach.study.contract import ProbeOptions, Tracker
from skillreach.study.runner import canary_check, canary_timeout
from tests.fakes.messages_api import MessagesAPI, ScriptResponder
from tests.fakes.openai_chat import OpenAIChat, completion

FAST = RetryPolicy(max_retries=2, base_s=0.01, cap_s=0.05)
CATALOG = Catalog(
    id="t",
    skills=tuple(
        Skill(name=n, description=f"Work with {n} things.", body=f"# {n}\nBODY-{n}") for n in ("pdf", "docx")
    ),
)


def q(text: str, expected: str | None = "pdf", **kw: Any) -> Query:
    kind = QueryKind.implicit if expected else QueryKind.out_of_scope
    return Query(id="q1", text=text, expected_skill=expected, kind=kind, **kw)


def anthropic_rt(api: MessagesAPI, model: str = "claude-sonnet-4-6", **kw: Any) -> AnthropicRuntime:
    kw.setdefault("retry_policy", FAST)
    return AnthropicRuntime(model, base_url=api.base_url, api_key="sk-test", settings=Settings(), **kw)


def openai_rt(api: OpenAIChat, model: str = "my-local-model", **kw: Any) -> OpenAICompatRuntime:
    kw.setdefault("backoff_s", 0.01)
    return OpenAICompatRuntime(model=model, base_url=api.base_url, api_key="test-key-123456", **kw)


async def probe(rt: Any, query: Query, **opts: Any) -> Any:
    tracker = Tracker.for_query(query, ProbeOptions(**opts))
    return await rt.select(query, CATALOG, tracker)


# ------------------------------------------------------------------------------------ no Models API


@pytest.mark.parametrize("status", [404, 405])
async def test_anthropic_without_models_api_takes_the_snapshot_from_a_messages_response(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    with MessagesAPI(ScriptResponder({"fill": ["pdf"]}), models_api=False, models_status=status) as api:
        rt = anthropic_rt(api)
        with caplog.at_level(logging.WARNING, logger="skillreach.runtimes.anthropic"):
            snapshot = await rt.resolve_model()
        assert snapshot == "claude-sonnet-4-6-20260115"
        assert await rt.resolve_model() == snapshot  # once
        out = await probe(rt, q("fill the form"))
        await rt.aclose()
    assert out.error is None
    assert out.invoked == ["pdf"]
    assert out.resolved_model == snapshot
    lines = [r.getMessage() for r in caplog.records if r.name == "skillreach.runtimes.anthropic"]
    assert len(lines) == 1
    assert "has no Models API" in lines[0]
    assert snapshot in lines[0]
    gets = [c for c in api.calls if c.method == "GET"]
    assert len(gets) == 1  # the Models API is asked once, never again after a 404/405
    ping = api.requests[0]
    assert ping["max_tokens"] == 1
    assert "tools" not in ping
    assert len(api.requests) == 2


async def test_anthropic_without_models_api_still_refuses_a_wrong_model() -> None:
    with MessagesAPI(models_api=False) as api:
        rt = anthropic_rt(api, model="gpt-nonsense")
        with pytest.raises(ConfigError, match=r"HTTP 404 not_found_error: model: gpt-nonsense .*--model"):
            await rt.resolve_model()
        await rt.aclose()


async def test_anthropic_probe_on_a_server_without_models_api_records_the_reported_model() -> None:
    """A study that skipped resolve_model: the probe's snapshot is its response's model, no lookup."""
    with MessagesAPI(ScriptResponder({"fill": ["pdf"]}), models_api=False, aliases={}) as api:
        rt = anthropic_rt(api, model="claude-local-20250101")
        await rt.resolve_model()
        out = await probe(rt, q("fill the form"))
        await rt.aclose()
    assert out.resolved_model == "claude-local-20250101"
    assert len([c for c in api.calls if c.method == "GET"]) == 1


@pytest.mark.parametrize("status", [404, 405])
async def test_openai_without_models_api_takes_the_snapshot_from_a_completion(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    with OpenAIChat(plan={"fill": ["pdf"]}, models_api=False, models_status=status) as api:
        rt = openai_rt(api)
        with caplog.at_level(logging.WARNING, logger="skillreach.runtimes.openai_compat"):
            snapshot = await rt.resolve_model()
            assert await rt.resolve_model() == snapshot
        await rt.aclose()
    assert snapshot == "local-model-2026-01-01"
    lines = [r.getMessage() for r in caplog.records if r.name == "skillreach.runtimes.openai_compat"]
    assert len(lines) == 1
    assert "has no Models API" in lines[0]
    assert snapshot in lines[0]
    assert len(api.requests) == 1
    assert api.requests[0]["max_tokens"] == 1


async def test_openai_with_the_model_listed_asks_no_completion() -> None:
    with OpenAIChat() as api:
        rt = openai_rt(api, model="local-model-2026-01-01")
        assert await rt.resolve_model() == "local-model-2026-01-01"
        await rt.aclose()
    assert api.requests == []


async def test_openai_wrong_model_and_wrong_endpoint_are_config_errors() -> None:
    with OpenAIChat(models_api=False) as api:
        api.fail(404, times=3)
        rt = openai_rt(api, model="nope", max_retries=0)
        with pytest.raises(ConfigError, match=r"model 'nope': HTTP 404.*check --model|HTTP 404"):
            await rt.resolve_model()
        await rt.aclose()
    rt = OpenAICompatRuntime(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    with pytest.raises(ConfigError, match="cannot reach"):
        await rt.resolve_model()
    await rt.aclose()


# ----------------------------------------------------------------------------- the reply budget


async def test_routing_requests_pay_for_a_decision_compliance_keeps_its_budget() -> None:
    script = ScriptResponder({"fill": ["pdf", {"text": "done"}]})
    with MessagesAPI(script) as api:
        rt = anthropic_rt(api, max_tokens=1024, compliance_max_tokens=4096)
        await probe(rt, q("fill the form"), routing_max_tokens=64)
        await probe(rt, q("fill the form", checks=Checks(tool_results={})), compliance=True)
        await probe(rt, q("fill the form"), keep_answer=True)
        await rt.aclose()
    budgets = [r["max_tokens"] for r in api.requests]
    assert budgets == [64, 1024, 4096, 1024]


async def test_openai_routing_budget_and_compliance_budget() -> None:
    with OpenAIChat(plan={"fill": ["pdf"]}) as api:
        rt = openai_rt(api, max_tokens=900)
        await probe(rt, q("fill the form"))
        await probe(rt, q("fill the form", checks=Checks(tool_results={})), compliance=True)
        await rt.aclose()
    assert [r["max_tokens"] for r in api.requests] == [256, 900, 900]


def test_routing_max_tokens_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="routing_max_tokens must be at least 1"):
        ProbeOptions(routing_max_tokens=0)


# ---------------------------------------------------------------------------------- forced choice


async def test_anthropic_forced_choice_on_routing_requests_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    script = ScriptResponder({"fill": ["pdf", {"text": "done"}]})
    with MessagesAPI(script) as api:
        rt = get_runtime(
            "anthropic",
            settings=Settings(),
            model="claude-sonnet-4-6",
            base_url=api.base_url,
            tool_choice="any",
            max_retries=0,
        )
        await probe(rt, q("fill the form", checks=Checks(tool_results={})), compliance=True)
        await rt.aclose()  # type: ignore[attr-defined]
    first, after = api.requests
    assert first["tool_choice"] == {"type": "any"}
    assert "tool_choice" not in after  # the skill is loaded: the agent answers freely


async def test_openai_forced_choice_is_required_on_routing_requests() -> None:
    with OpenAIChat(plan={"fill": ["docx", "pdf"]}) as api:
        rt = openai_rt(api, tool_choice="required")
        out = await probe(rt, q("fill the form"))
        await rt.aclose()
    assert out.invoked == ["docx", "pdf"]
    assert [r["tool_choice"] for r in api.requests] == ["required", "required"]
    with OpenAIChat() as api:
        rt = openai_rt(api)
        await probe(rt, q("fill the form"))
        await rt.aclose()
    assert "tool_choice" not in api.requests[0]  # free choice sends none (servers default to auto)


def test_tool_choice_values_are_checked() -> None:
    with pytest.raises(ConfigError, match="tool_choice"):
        get_runtime("anthropic", settings=Settings(), model="m", base_url="http://x", tool_choice="required")
    with pytest.raises(ConfigError, match="tool_choice"):
        get_runtime("openai-compatible", settings=Settings(), model="m", tool_choice="any")


def test_forced_choice_is_named_for_the_reports() -> None:
    from skillreach.runtimes import forced_choice_note

    assert forced_choice_note("anthropic", {"tool_choice": "any"})
    assert forced_choice_note("openai-compatible", {"tool_choice": "required"})
    assert forced_choice_note("anthropic", {"tool_choice": "auto"}) is None
    assert forced_choice_note("anthropic", {}) is None
    assert forced_choice_note("keyword", {}) is None
    note = forced_choice_note("anthropic", {"tool_choice": "any"})
    assert note is not None
    assert "abstention is not measured" in note
    assert "\n" not in note


# ------------------------------------------------------------------------------------------ canary


async def test_canary_says_what_to_check_for_a_server_of_ones_own() -> None:
    def prose(body: dict[str, Any]) -> dict[str, Any]:
        return completion(model="gemma", text="Sure! Here is a long essay about your request.")

    with OpenAIChat(responder=prose) as api:
        rt = openai_rt(api)
        url = api.base_url
        with pytest.raises(HarnessBlind) as info:
            await canary_check(rt, CATALOG, ProbeOptions(routing_max_tokens=32))
        await rt.aclose()
    text = str(info.value)
    assert url in text
    assert "--jinja" in text
    assert "chat template" in text
    assert all(r["max_tokens"] == 32 for r in api.requests)


async def test_canary_on_the_hosted_api_points_at_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    with MessagesAPI(ScriptResponder(default=[{"text": "I will just answer."}])) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        rt = AnthropicRuntime("claude-sonnet-4-6", settings=Settings(), client=None, base_url=None)
        assert "--jinja" not in rt.blind_hint
        assert "check --model" in rt.blind_hint
        await rt.aclose()
        rt = anthropic_rt(api)
        with pytest.raises(HarnessBlind, match="--jinja"):
            await canary_check(rt, CATALOG, ProbeOptions())
        await rt.aclose()


async def test_a_slow_canary_fails_in_its_timeout_and_says_so() -> None:
    assert canary_timeout(120.0) == 60.0
    assert canary_timeout(0.3) == 0.3
    assert canary_timeout(600.0, 300.0) == 300.0
    retries = 1
    with OpenAIChat(plan={}, delay_s=1.0) as api:
        rt = openai_rt(api, timeout_s=0.3, max_retries=retries)
        started = time.monotonic()
        with pytest.raises(ConfigError, match=r"timed out.*waits at most"):
            await canary_check(rt, CATALOG, ProbeOptions(timeout_s=0.3))
        took = time.monotonic() - started
        await rt.aclose()
    assert took < 5.0


# ------------------------------------------------------------------- through `skillreach run`


def test_forced_choice_through_the_command_on_a_server_without_models_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """openai-compatible, ``tool_choice = "required"``, a server without ``/models``: the snapshot comes
    from one small completion, every routing request is forced, the scorecard and reports say that
    abstention was not measured, and the probes paid for a decision."""
    from skillreach.cli import main
    from skillreach.scoring.artifact import read_artifact
    from skillreach.study.probe_log import read_probes
    from tests.helpers.llama import write_study

    write_study(
        tmp_path,
        [
            {"id": "p1", "text": "merge two PDF forms", "expected_skill": "pdf-forms", "kind": "implicit"},
            {"id": "n1", "text": "what is the weather", "expected_skill": None, "kind": "out_of_scope"},
        ],
        "routing_max_tokens = 48\n",
        'tool_choice = "required"',
    )
    plan = {
        "pdf-forms": ["pdf-forms"],
        "git-rollback": ["git-rollback"],
        "PDF": ["pdf-forms"],
        "weather": ["git-rollback"],
    }
    with OpenAIChat(plan=plan, models_api=False) as api:
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        monkeypatch.setenv("COLUMNS", "200")
        monkeypatch.chdir(tmp_path)
        code = main(
            [
                "run",
                "--config",
                "study.toml",
                "--skills",
                "skills",
                "--queries",
                "queries.json",
                "--runtime",
                "openai-compatible",
                "--model",
                "gemma",
                "--out",
                "out",
            ]
        )
    captured = capfd.readouterr()
    assert code == 0, captured.err
    assert "forced choice (tool_choice=required)" in captured.out
    records = read_probes(tmp_path / "out" / "probes.jsonl")
    assert {r.query_id: r.invoked for r in records} == {"p1": ("pdf-forms",), "n1": ("git-rollback",)}
    assert all(r.resolved_model == "local-model-2026-01-01" for r in records)
    probe_bodies = [b for b in api.requests if b.get("tools")]
    assert probe_bodies
    assert all(b["tool_choice"] == "required" and b["max_tokens"] == 48 for b in probe_bodies)
    assert [b["max_tokens"] for b in api.requests if not b.get("tools")] == [1]  # the snapshot's request
    artifact = read_artifact(tmp_path / "out" / "artifact.json")
    assert any("abstention is not measured" in w for w in artifact.warnings)
    assert "abstention is not measured" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


async def test_skill_enum_lists_the_names_in_the_schema_only_when_asked() -> None:
    with OpenAIChat(plan={"fill": ["pdf"]}) as api:
        for enum in (False, True):
            rt = openai_rt(api, skill_enum=enum)
            await probe(rt, q("fill the form"))
            await rt.aclose()
    plain, listed = (r["tools"][0]["function"]["parameters"]["properties"]["skill"] for r in api.requests)
    assert "enum" not in plain
    assert listed["enum"] == ["pdf", "docx"]
    with MessagesAPI(ScriptResponder({"fill": ["pdf"]})) as mapi:
        rt = anthropic_rt(mapi, skill_enum=True)
        await probe(rt, q("fill the form"))
        await rt.aclose()
    assert mapi.requests[0]["tools"][0]["input_schema"]["properties"]["skill"]["enum"] == ["pdf", "docx"]


async def test_a_second_runtime_on_the_same_server_says_nothing_more_and_sends_no_extra_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A study builds a runtime per task (snapshot, canary, batches): the line is said once a process,
    and a probe's reported model stands in for the small request."""
    with (
        MessagesAPI(ScriptResponder({"fill": ["pdf"]}), models_api=False) as api,
        caplog.at_level(logging.WARNING, logger="skillreach.runtimes.anthropic"),
    ):
        first = anthropic_rt(api)
        await first.resolve_model()
        await first.aclose()
        second = anthropic_rt(api)
        out = await probe(second, q("fill the form"))
        await second.aclose()
    assert out.resolved_model == "claude-sonnet-4-6-20260115"
    lines = [r for r in caplog.records if r.name == "skillreach.runtimes.anthropic"]
    assert len(lines) == 1
    assert [r["max_tokens"] for r in api.requests] == [1, 256]  # one small request, then the probe
