"""The ``openai-compatible`` runtime against a local Chat Completions server (tests/fakes/openai_chat)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, QueryKind, Skill
from skillreach.runtimes import get_runtime
from skillreach.runtimes.openai_compat import OpenAICompatRuntime
from skillreach.study.contract import ProbeOptions, Tracker
from tests.fakes.openai_chat import OpenAIChat, completion, first_user_text, tool_call

SKILLS = (
    Skill(name="pdf", description="Fill and merge PDF forms.", body="PDF BODY: use pypdf.", folder="/s/pdf"),
    Skill(name="rollback", description="Roll back a bad deploy.", body="ROLLBACK BODY: run make rollback."),
    Skill(name="secrets", description="Rotate leaked credentials.", body="SECRETS BODY: rotate keys."),
)
CATALOG = Catalog(id="t", skills=SKILLS)


def q(text: str, expected: str | None, acceptable: tuple[str, ...] = ()) -> Query:
    kind = QueryKind.implicit if expected else QueryKind.out_of_scope
    return Query(id="q1", text=text, expected_skill=expected, acceptable_skills=acceptable, kind=kind)


def runtime(api: OpenAIChat, **kw: Any) -> OpenAICompatRuntime:
    kw.setdefault("backoff_s", 0.01)
    return OpenAICompatRuntime(model="my-local-model", base_url=api.base_url, api_key="test-key-123456", **kw)


async def probe(rt: OpenAICompatRuntime, query: Query, *, max_turns: int = 3, early_exit: bool = True):
    tracker = Tracker.for_query(query, ProbeOptions(max_turns=max_turns, early_exit=early_exit))
    return await rt.select(query, CATALOG, tracker), tracker


async def test_progressive_disclosure_and_early_exit() -> None:
    with OpenAIChat(plan={"undo the deploy": ["secrets", "rollback", "pdf"]}) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("please undo the deploy", "rollback"))
        await rt.aclose()
    assert out.error is None
    assert out.invoked == ["secrets", "rollback"]
    assert out.early_exit is True
    assert out.resolved_model == "local-model-2026-01-01"
    assert len(api.requests) == 2  # stopped at the target: no third request
    first = api.requests[0]
    assert first["model"] == "my-local-model"
    assert [t["function"]["name"] for t in first["tools"]] == ["Skill"]
    desc = first["tools"][0]["function"]["description"]
    for s in SKILLS:
        assert s.name in desc
        assert s.description in desc
    dumped = json.dumps(first)
    assert not any(s.body in dumped for s in SKILLS)  # no body before an invocation
    second = json.dumps(api.requests[1])
    assert "SECRETS BODY" in second
    assert "ROLLBACK BODY" not in second
    assert "PDF BODY" not in second
    tool_msgs = [m for m in api.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_msgs[0]["content"] == "SECRETS BODY: rotate keys."


async def test_usage_summed_and_cached_tokens_split() -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        n_tool = sum(m["role"] == "tool" for m in body["messages"])
        if n_tool == 0:
            return completion(
                model="snap-1",
                tool_calls=[tool_call("Skill", {"skill": "pdf"})],
                prompt_tokens=120,
                cached_tokens=20,
                completion_tokens=7,
            )
        return completion(model="snap-1", text="all set", prompt_tokens=200, completion_tokens=3)

    with OpenAIChat(responder=responder) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("merge these pdfs", "rollback"))
        await rt.aclose()
    assert out.invoked == ["pdf"]
    assert out.early_exit is False
    assert out.usage.input_tokens == 100 + 200
    assert out.usage.cache_read_input_tokens == 20
    assert out.usage.output_tokens == 10
    assert out.final_text is None  # kept in compliance mode only, as the anthropic runtime does
    assert out.resolved_model == "snap-1"


async def test_max_turns_and_no_early_exit() -> None:
    plan = {"do it": ["pdf", "secrets", "rollback", "pdf"]}
    with OpenAIChat(plan=plan) as api:
        rt = runtime(api)
        out, tracker = await probe(rt, q("do it", "pdf"), max_turns=3, early_exit=False)
        await rt.aclose()
    assert out.invoked == ["pdf", "secrets", "rollback"]
    assert tracker.exhausted
    assert not out.early_exit
    assert len(api.requests) == 3


async def test_no_skill_answer_is_abstention() -> None:
    with OpenAIChat(plan={}) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("what's the weather", None))
        await rt.aclose()
    assert out.invoked == []
    assert out.error is None
    assert out.turns == 1


async def test_unknown_skill_is_not_recorded_and_told_to_the_model() -> None:
    with OpenAIChat(plan={"x": ["nonexistent", "pdf"]}) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("x", "pdf"))
        await rt.aclose()
    assert out.invoked == ["pdf"]
    tool_msg = next(m for m in api.requests[1]["messages"] if m["role"] == "tool")
    assert "Unknown skill: 'nonexistent'" in tool_msg["content"]
    assert "rollback" in tool_msg["content"]


async def test_retries_honour_retry_after_then_succeed() -> None:
    with OpenAIChat(plan={"x": ["pdf"]}) as api:
        api.fail(429, times=2, retry_after=0.05)
        api.fail(503, times=1)
        rt = runtime(api)
        out, _ = await probe(rt, q("x", "pdf"))
        await rt.aclose()
    assert out.error is None
    assert out.invoked == ["pdf"]
    assert len(api.requests) == 4  # three failures + the success


async def test_gives_up_after_max_retries_as_an_error() -> None:
    with OpenAIChat(plan={"x": ["pdf"]}) as api:
        api.fail(500, times=10)
        rt = runtime(api, max_retries=2)
        out, _ = await probe(rt, q("x", "pdf"))
        await rt.aclose()
    assert out.error is not None
    assert "gave up after 3 attempts" in out.error
    assert len(api.requests) == 3


async def test_timeout_is_retried_then_reported() -> None:
    # the timeout is the whole exchange's (connect, send, reply): 0.5 s lets a loaded machine send it
    with OpenAIChat(plan={"x": ["pdf"]}, delay_s=3.0) as api:
        rt = runtime(api, max_retries=1, timeout_s=0.5)
        out, _ = await probe(rt, q("x", "pdf"))
        await rt.aclose()
    assert out.error is not None
    assert "timed out" in out.error
    assert len(api.requests) == 2


async def test_auth_error_not_retried_and_key_never_in_error() -> None:
    with OpenAIChat(plan={"x": ["pdf"]}, require_key="the-right-key") as api:
        rt = runtime(api)
        out, _ = await probe(rt, q("x", "pdf"))
        await rt.aclose()
    assert len(api.requests) == 1
    assert out.error is not None
    assert "401" in out.error
    assert "test-key-123456" not in out.error
    assert api.headers[0]["authorization"] == "Bearer test-key-123456"
    assert "test-key-123456" not in repr(rt)


async def test_env_base_url_and_keyless_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIChat(plan={"x": ["pdf"]}) as api:
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        rt = get_runtime("openai-compatible", model="llama3")
        assert isinstance(rt, OpenAICompatRuntime)
        out, _ = await probe(rt, q("x", "pdf"))  # type: ignore[arg-type]
        await rt.aclose()
    assert out.invoked == ["pdf"]
    assert api.headers[0]["authorization"] == "Bearer not-needed"


def test_model_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(ConfigError, match="--model"):
        OpenAICompatRuntime(base_url="http://127.0.0.1:9/v1")


async def test_parallel_tool_calls_each_answered() -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        if any(m["role"] == "tool" for m in body["messages"]):
            return completion(model="m", text="ok")
        return completion(
            model="m",
            tool_calls=[tool_call("Skill", {"skill": "secrets"}), tool_call("Skill", {"skill": "pdf"})],
        )

    with OpenAIChat(responder=responder) as api:
        rt = runtime(api)
        out, _ = await probe(rt, q(first_user_text({"messages": []}) or "y", "rollback"))
        await rt.aclose()
    assert out.invoked == ["secrets", "pdf"]
    assert len(api.requests) == 2  # the stand-in validated that both calls were answered


async def test_compliance_mode_offers_the_tool_environment() -> None:
    from skillreach.models import Checks

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        names = [t["function"]["name"] for t in body["tools"]]
        n_tool = sum(m["role"] == "tool" for m in body["messages"])
        if n_tool == 0:
            assert names == ["Skill"]
            return completion(model="m", tool_calls=[tool_call("Skill", {"skill": "rollback"})])
        if n_tool == 1:
            assert names == ["Skill", "Bash", "Read", "Write", "Edit"]
            return completion(model="m", tool_calls=[tool_call("Bash", {"command": "make rollback"})])
        return completion(model="m", text="Rolled back.")

    query = Query(
        id="c1",
        text="undo it",
        expected_skill="rollback",
        checks=Checks(tool_results={"make rollback": "rolled back to v41"}),
    )
    with OpenAIChat(responder=responder) as api:
        rt = runtime(api)
        tracker = Tracker.for_query(query, ProbeOptions(compliance=True, early_exit=False))
        out = await rt.select(query, CATALOG, tracker)
        await rt.aclose()
    assert out.error is None
    assert out.invoked == ["rollback"]
    assert [(c.tool, c.input) for c in out.tool_calls] == [("Bash", {"command": "make rollback"})]
    assert out.final_text == "Rolled back."
    assert api.requests[2]["messages"][-1]["content"] == "rolled back to v41"


async def test_through_the_probe_runner(tmp_path: Any) -> None:
    from skillreach.study.probe_log import JsonlSink, read_probes
    from skillreach.study.runner import canary_check, run_probes

    queries = [
        q("please undo the deploy", "rollback"),
        Query(id="q2", text="merge pdfs", expected_skill="pdf"),
    ]
    plan = {"undo the deploy": ["rollback"], "merge pdfs": ["secrets", "pdf"]}
    plan.update({s.name: [s.name] for s in SKILLS})  # the canary names each skill outright
    with OpenAIChat(plan=plan) as api:
        rt = runtime(api)
        options = ProbeOptions(max_turns=3, early_exit=True, model="my-local-model")
        await canary_check(rt, CATALOG, options)
        sink = JsonlSink(tmp_path / "probes.jsonl")
        await run_probes(
            rt,
            CATALOG,
            [(qq, 1) for qq in queries],
            options=options,
            sink=sink,
            concurrency=2,
            fingerprint="fp",
        )
        await rt.aclose()
    records = {r.query_id: r for r in read_probes(tmp_path / "probes.jsonl")}
    assert records["q1"].invoked == ("rollback",)
    assert records["q2"].invoked == ("secrets", "pdf")
    assert records["q2"].runtime == "openai-compatible"
    assert records["q2"].resolved_model == "local-model-2026-01-01"
    assert records["q2"].usage.input_tokens > 0
