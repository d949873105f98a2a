"""The rubric judge: prompt, rubric_version, grade parsing, fake judge, anthropic judge over the stand-in."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skillreach.errors import JudgeReplyError, NotFoundError, ProbeFailed, TransientProbeError
from skillreach.models import Checks, ProbeRecord, Query, ToolCall
from skillreach.study import judge as judge_mod
from skillreach.study.judge import (
    FakeJudge,
    JudgeRequest,
    grade_probes,
    parse_grade,
    render_judge_prompt,
    rubric_version,
)
from tests.fakes.messages_api import MessagesAPI, Reply, request_text


def test_prompt_holds_request_calls_answer_and_rubric() -> None:
    prompt = render_judge_prompt(
        "Deploy the service",
        [ToolCall(tool="Bash", input={"command": "make preflight"})],
        "Deployed v2 after preflight.",
        "Mentions the preflight and the version.",
    )
    assert "<request>\nDeploy the service\n</request>" in prompt
    assert '1. Bash {"command": "make preflight"}' in prompt
    assert "Deployed v2 after preflight." in prompt
    assert "Mentions the preflight and the version." in prompt
    assert '"grade"' in prompt
    empty = render_judge_prompt("x", [], "", "r")
    assert "(none)" in empty
    assert "(empty)" in empty


def test_rubric_version_pins_template_rubric_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    v = rubric_version("r1", "m1")
    assert v is not None
    assert v.startswith("sha256:")
    assert len(v) == 7 + 64
    assert rubric_version("r1", "m1") == v
    assert rubric_version("r2", "m1") != v
    assert rubric_version("r1", "m2") != v
    assert rubric_version(None, "m1") is None
    assert rubric_version({}, "m1") is None
    assert rubric_version({"a": "x", "b": "y"}, "m") == rubric_version({"b": "y", "a": "x"}, "m")
    monkeypatch.setattr(judge_mod, "template_source", lambda name="judge.j2": "another template")
    assert rubric_version("r1", "m1") != v


@pytest.mark.parametrize(
    ("reply", "grade"),
    [
        ('{"grade": 0.75, "reason": "ok"}', 0.75),
        ('Here you go:\n```json\n{"grade": 1, "reason": "all met"}\n```', 1.0),
        ("grade: 0.4", 0.4),
        ("I'd give it 7/10.", 0.7),
        ('{"reason": "x"} then {"grade": 0}', 0.0),
    ],
)
def test_parse_grade(reply: str, grade: float) -> None:
    assert parse_grade(reply)[0] == pytest.approx(grade)


@pytest.mark.parametrize("reply", ["looks good", '{"grade": 1.5}', '{"grade": "high"}', ""])
def test_parse_grade_refuses(reply: str) -> None:
    with pytest.raises(JudgeReplyError):
        parse_grade(reply)


def _req(answer: str, rubric: str) -> JudgeRequest:
    return JudgeRequest(query_id="q", request="do it", rubric=rubric, final_answer=answer)


async def test_fake_judge_is_keyword_share_and_deterministic() -> None:
    j = FakeJudge()
    rubric = "The answer should mention the rollback plan and the changelog."
    assert j.keywords(rubric) == ["rollback", "plan", "changelog"]
    full = await j.grade(_req("Rollback plan ready; CHANGELOG updated", rubric))
    half = await j.grade(_req("the plan is fine", rubric))
    assert full.grade == 1.0
    assert half.grade == pytest.approx(1 / 3)
    assert "missing rollback, changelog" in half.reason
    assert (await j.grade(_req("the plan is fine", rubric))).grade == half.grade
    # whole words only
    assert (await j.grade(_req("planned", "plan"))).grade == 0.0 or j.keywords("plan") == []


async def test_grade_probes_sets_grade_and_version_only_where_due() -> None:
    queries = [
        Query(id="a", text="t", expected_skill="s", checks=Checks(rubric="mention rollback")),
        Query(id="b", text="t", expected_skill="s", checks=Checks(requires=())),
    ]
    probes = [
        ProbeRecord(query_id="a", attempt=1, final_text="rollback done"),
        ProbeRecord(query_id="a", attempt=2, final_text=None),  # routing only: not graded
        ProbeRecord(query_id="a", attempt=3, error="boom", final_text="x"),
        ProbeRecord(query_id="b", attempt=1, final_text="x"),
    ]
    seen: list[ProbeRecord] = []
    graded, failures = await grade_probes(FakeJudge(), queries, probes, on_graded=seen.append)
    assert failures == []
    assert [(p.query_id, p.attempt) for p in seen] == [("a", 1)]
    assert graded[0].rubric_grade == 1.0
    assert graded[0].rubric_version == rubric_version("mention rollback", "fake-judge-1")
    assert [p.rubric_grade for p in graded[1:]] == [None, None, None]


class _Failing(FakeJudge):
    async def grade(self, request: JudgeRequest) -> Any:
        raise ProbeFailed("judge down")


async def test_grade_probes_failure_is_data() -> None:
    q = Query(id="a", text="t", expected_skill="s", checks=Checks(rubric="r"))
    graded, failures = await grade_probes(_Failing(), [q], [ProbeRecord(query_id="a", final_text="x")])
    assert graded[0].rubric_grade is None
    assert failures == [("a", 1, "judge down")]


def test_get_judge() -> None:
    from skillreach.runtimes import get_judge

    assert isinstance(get_judge("fake"), FakeJudge)
    with pytest.raises(NotFoundError, match="known judges: anthropic, fake"):
        get_judge("nope")


# ------------------------------------------------------------------- anthropic judge over the stand-in


def _responder(body: dict[str, Any]) -> Reply:
    text = request_text(body)
    answer = text.split("<final_answer>")[1].split("</final_answer>")[0]
    grade = 0.9 if "preflight" in answer else 0.2
    return Reply([{"type": "text", "text": json.dumps({"grade": grade, "reason": "because"})}])


async def test_anthropic_judge_against_messages_api(monkeypatch: pytest.MonkeyPatch) -> None:
    import anthropic

    from skillreach.runtimes.judge_anthropic import AnthropicJudge

    with MessagesAPI(_responder) as api:
        client = anthropic.AsyncAnthropic(base_url=api.base_url, api_key="test-key", max_retries=0)
        judge = AnthropicJudge("claude-haiku-4-5", client=client)
        good = await judge.grade(_req("ran preflight", "mentions preflight"))
        bad = await judge.grade(_req("shipped", "mentions preflight"))
        assert (good.grade, bad.grade) == (0.9, 0.2)
        assert good.resolved_model == "claude-haiku-4-5-20251001"
        assert good.usage.input_tokens > 0
        body = api.requests[0]
        assert body["model"] == "claude-haiku-4-5"
        assert "tools" not in body
        assert "<rubric>\nmentions preflight\n</rubric>" in body["messages"][0]["content"]

        api.inject(400, message="max_tokens: too large", error_type="invalid_request_error")
        with pytest.raises(ProbeFailed, match="judge: HTTP 400 invalid_request_error: max_tokens: too large"):
            await judge.grade(_req("x", "y"))
        await client.close()


async def test_anthropic_judge_retries_transient_errors() -> None:
    import anthropic

    from skillreach.runtimes.judge_anthropic import AnthropicJudge

    with MessagesAPI(_responder) as api:
        client = anthropic.AsyncAnthropic(base_url=api.base_url, api_key="k", max_retries=2)
        judge = AnthropicJudge(client=client)
        api.inject(529, times=1, retry_after=0.01)
        result = await judge.grade(_req("preflight", "r"))
        assert result.grade == 0.9
        assert len(api.message_requests) == 2
        api.inject(429, times=3, retry_after=0.01)
        with pytest.raises(TransientProbeError, match="judge: HTTP 429 rate_limit_error: "):
            await judge.grade(_req("preflight", "r"))
        await client.close()


async def test_anthropic_judge_unparseable_reply_is_probe_failed() -> None:
    import anthropic

    from skillreach.runtimes.judge_anthropic import AnthropicJudge

    with MessagesAPI(lambda body: "I cannot grade this") as api:
        client = anthropic.AsyncAnthropic(base_url=api.base_url, api_key="k", max_retries=0)
        with pytest.raises(JudgeReplyError):
            await AnthropicJudge(client=client).grade(_req("a", "b"))
        await client.close()
