"""The two-skill test set through a real agent CLI: ``skillreach run --runtime <agent> --concurrency 4`` on
12 queries whose model answers the first turn with **two skill calls in one response**, in both orders,
the target first, second or neither, against the agent's stand-in.

What every agent must record (:func:`check`):

- the skills in the model's order, up to the target (early exit): ``[a, b]`` → target ``b`` records
  ``(a, b)``, target ``a`` records ``(a,)``; neither: ``(a, b)`` and a second response ends the probe;
- no request after the target: one request for a probe that stops at its target;
- tokens, turns and cost equal to what the stand-in served for that probe's query (cost from the
  study's price table), never 0 for a probe that was served;
- the CLI's version on every record, though its ``--version`` takes 21 s (the CLI runs through a
  wrapper that sleeps first, so no ``package.json`` is beside it: the version is asked, and waited for);
- nothing left running 5 s after the study ends (the test process is a subreaper, the tree is walked
  in ``/proc``).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillreach.models import ProbeRecord, QueryKind, Usage
from skillreach.settings import DEFAULT_PRICES, Price
from skillreach.study.contract import cost_of
from skillreach.study.probe_log import read_probes
from tests.helpers import clis, hang

__all__ = ["AGENTS", "Agent", "check", "run_two_skill_set"]

SKILLREACH = Path(sys.executable).parent / "skillreach"
SKILLS = [f"skill-{i:02d}" for i in range(6)]
QUERIES = 12
CONCURRENCY = 4
SLOW_VERSION_S = 21
"""The wrapper's ``--version`` sleeps this long (the old 20 s deadline lost the version)."""
FAKE_PRICE = Price(input=1.0, output=2.0, cache_write=3.0, cache_read=0.5)


def plan(i: int) -> tuple[list[str], str]:
    """Query i: (the skills the model calls in its first response, in order; the expected skill)."""
    a, b, c = SKILLS[i % 6], SKILLS[(i + 1) % 6], SKILLS[(i + 3) % 6]
    return [([a, b], b), ([b, a], b), ([a, b], a), ([b, a], c)][i % 4]


def recorded(i: int) -> tuple[str, ...]:
    """What the probe of query i must record: the model's calls up to the target."""
    calls, expected = plan(i)
    return tuple(calls[: calls.index(expected) + 1]) if expected in calls else tuple(calls)


def calls_for(text: str) -> list[str]:
    """What the model calls in its first response to a query's text (a canary names its skill)."""
    canary = re.search(r"Use the (skill-\d\d) skill", text)
    if canary:
        return [canary.group(1)]
    found = re.search(r"request (\d\d): ", text)
    return plan(int(found.group(1)))[0] if found else []


def write_inputs(root: Path) -> None:
    for name in SKILLS:
        folder = root / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Handle chores of kind {name[-2:]} for the team.\n---\n"
            f"Steps for {name}.\n"
        )
    rows = [
        {
            "id": f"q{i:02d}",
            "text": f"request {i:02d}: two chores for the team",
            "expected_skill": plan(i)[1],
            "kind": QueryKind.implicit.value,
        }
        for i in range(QUERIES)
    ]
    (root / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": rows}))


# ================================================================================= the agents


@dataclass(frozen=True)
class Agent:
    """One agent CLI with its stand-in: how to find it, serve it, and read what was served."""

    runtime: str
    find: Callable[[], str | None]
    version: str
    model: str
    path_option: str
    serve: Callable[[], Any]
    """A context manager: the stand-in, answering with :func:`calls_for`."""
    first_text: Callable[[dict[str, Any]], str]
    key_env: tuple[tuple[str, str], ...]

    @property
    def price(self) -> Price:
        return DEFAULT_PRICES["claude-sonnet-4"] if self.model.startswith("claude") else FAKE_PRICE


def _claude_stand_in() -> Any:
    from tests.fakes.messages_api import MessagesAPI, Reply, query_text, skill_call, text_reply, turn_of

    def responder(body: dict[str, Any]) -> Any:
        calls = calls_for(query_text(body))
        if turn_of(body) == 0 and calls:
            return Reply([skill_call(s) for s in calls])
        return text_reply("Done.")

    return MessagesAPI(responder)


def _pi_stand_in() -> Any:
    from tests.fakes.messages_api import MessagesAPI, Reply, query_text, text_reply, tool_call, turn_of

    def responder(body: dict[str, Any]) -> Any:
        calls = calls_for(query_text(body))
        system = json.dumps(body.get("system"))
        if turn_of(body) == 0 and calls:
            paths = [re.search(rf"<location>([^<]*/{s}/SKILL\.md)</location>", system) for s in calls]
            return Reply([tool_call("read", {"path": m.group(1)}) for m in paths if m])
        return text_reply("Done.")

    return MessagesAPI(responder)


def _codex_stand_in() -> Any:
    from tests.fakes.responses_api import ResponsesAPI, ResponsesReply, message, query_of, skill_read, turn_of

    def responder(body: dict[str, Any]) -> ResponsesReply:
        calls = calls_for(query_of(body))
        if turn_of(body) == 0 and calls:
            return ResponsesReply([skill_read(body, s) for s in calls])
        return ResponsesReply([message("Done.")])

    return ResponsesAPI(responder)


def _gemini_stand_in() -> Any:
    from tests.fakes.antigravity_gemini import GeminiAPI, model_turns
    from tests.fakes.gemini_api import query_of

    api = GeminiAPI()

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        calls = calls_for(query_of(body))
        if model_turns(body) == 0 and calls:
            return api.response(calls=[("activate_skill", {"name": s}) for s in calls])
        return api.response(text="Done.")

    api.responder = responder
    return api


def _chat_stand_in(arg: str) -> Callable[[], Any]:
    def make() -> Any:
        from tests.fakes.openai_chat import OpenAIChat, completion, first_user_text, tool_call

        def responder(body: dict[str, Any]) -> dict[str, Any]:
            calls = calls_for(first_user_text(body))
            if not any(m.get("role") == "tool" for m in body["messages"]) and calls:
                return completion(
                    model="fake-model", tool_calls=[tool_call("skill", {arg: s}) for s in calls]
                )
            return completion(model="fake-model", text="Done.")

        return OpenAIChat(responder=responder)

    return make


def _text(kind: str) -> Callable[[dict[str, Any]], str]:
    def first(body: dict[str, Any]) -> str:
        if kind == "messages":
            from tests.fakes.messages_api import query_text

            return query_text(body)
        if kind == "responses":
            from tests.fakes.responses_api import query_of

            return query_of(body)
        if kind == "gemini":
            from tests.fakes.gemini_api import query_of as gemini_query

            return gemini_query(body)
        from tests.fakes.openai_chat import first_user_text

        return first_user_text(body)

    return first


AGENTS: dict[str, Agent] = {
    "claude-code": Agent(
        "claude-code", clis.real_claude, "2.1.328 (Claude Code)", "claude-sonnet-4-6", "claude_path",
        _claude_stand_in, _text("messages"), (("ANTHROPIC_API_KEY", "sk-test-not-a-secret"),),
    ),
    "pi": Agent(
        "pi", clis.real_pi, "0.73.1", "claude-sonnet-4-5", "pi_path", _pi_stand_in, _text("messages"),
        (("ANTHROPIC_API_KEY", "sk-test-not-a-secret"),),
    ),
    "codex": Agent(
        "codex", clis.real_codex, "codex-cli 0.171.0", "fake-model", "codex_path", _codex_stand_in,
        _text("responses"), (("OPENAI_API_KEY", "sk-test-not-a-secret"),),
    ),
    "gemini-cli": Agent(
        "gemini-cli", clis.real_gemini, "0.61.0", "fake-model", "gemini_path", _gemini_stand_in,
        _text("gemini"), (("GEMINI_API_KEY", "k-test-not-a-secret"),),
    ),
    "opencode": Agent(
        "opencode", clis.real_opencode, "1.18.33", "fake-model", "opencode_path", _chat_stand_in("name"),
        _text("chat"), (("OPENAI_API_KEY", "k-test-not-a-secret"),),
    ),
    "copilot": Agent(
        "copilot", clis.real_copilot, "GitHub Copilot CLI 1.0.102.", "fake-model", "copilot_path",
        _chat_stand_in("skill"), _text("chat"), (("OPENAI_API_KEY", "k-test-not-a-secret"),),
    ),
}  # fmt: skip


# ============================================================================ the run and checks


@dataclass
class Result:
    records: list[ProbeRecord]
    served: dict[str, tuple[Usage, int]]
    """Per query id: (usage the stand-in served for it, its requests)."""
    left: list[str]
    took: float
    out: str

    def exact(self) -> int:
        """Queries whose record is exactly the model's calls up to the target."""
        return sum(1 for r in self.records if r.invoked == recorded(int(r.query_id[1:])))


def _wrapper(tmp_path: Path, real: str) -> str:
    """The CLI behind a wrapper whose ``--version`` answers after :data:`SLOW_VERSION_S` seconds."""
    path = tmp_path / "slow-version" / Path(real).name
    path.parent.mkdir()
    path.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then sleep {SLOW_VERSION_S}; fi\nexec {json.dumps(real)} "$@"\n'
    )
    path.chmod(0o755)
    return str(path)


def _study_file(agent: Agent, api: Any, path: str) -> str:
    lines = [f"model = {json.dumps(agent.model)}"]
    if agent.model == "fake-model":
        price = agent.price
        lines += [
            '[prices."fake-model"]',
            *(f"{k} = {v}" for k, v in price.model_dump().items()),
        ]
    lines += ["[runtime_options]", f"{agent.path_option} = {json.dumps(path)}"]
    lines.append(f"base_url = {json.dumps(api.base_url)}")
    return "\n".join(lines) + "\n"


@contextmanager
def _served(agent: Agent) -> Iterator[Any]:
    with agent.serve() as api:
        yield api


def run_two_skill_set(agent: Agent, tmp_path: Path) -> Result:
    real = agent.find()
    assert real is not None
    write_inputs(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "SKILLREACH_"))}
    env.update(dict(agent.key_env), COLUMNS="200")
    with clis.Orphans() as orphans, _served(agent) as api:
        (tmp_path / "study.toml").write_text(
            _study_file(agent, api, _wrapper(tmp_path, real)), encoding="utf-8"
        )
        t0 = time.monotonic()
        run = hang.finish(
            [
                str(SKILLREACH), "run", "--config", "study.toml", "--skills", "skills", "--queries",
                "queries.json", "--runtime", agent.runtime, "--concurrency", str(CONCURRENCY), "--out", "out",
            ],
            limit_s=1500,
            cwd=tmp_path,
            env=env,
        )  # fmt: skip
        took = time.monotonic() - t0
        left = orphans.left(within_s=5.0)
        served: dict[str, tuple[Usage, int]] = {}
        for i in range(QUERIES):
            mark = f"request {i:02d}: "
            bodies = [body for body, _ in list(api.served) if mark in agent.first_text(body)]
            usage = sum((u for body, u in list(api.served) if mark in agent.first_text(body)), Usage())
            served[f"q{i:02d}"] = (usage, len(bodies))
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert "Traceback" not in run.stdout + run.stderr, (run.stdout + run.stderr)[-3000:]
    records = read_probes(tmp_path / "out" / "probes.jsonl")
    return Result(records, served, left, took, run.stdout + run.stderr)


def check(agent: Agent, result: Result) -> str:
    """Every promise of the module docstring, for ``agent``; a line of figures."""
    records = {r.query_id: r for r in result.records}
    assert sorted(records) == [f"q{i:02d}" for i in range(QUERIES)]
    assert [r.error for r in records.values() if r.error] == []
    for i in range(QUERIES):
        qid = f"q{i:02d}"
        record = records[qid]
        usage, requests = result.served[qid]
        calls, expected = plan(i)
        assert record.invoked == recorded(i), (qid, calls, expected, record.invoked)
        assert record.early_exit == (expected in calls), qid
        assert requests == (1 if expected in calls else 2), (qid, requests)  # nothing after the target
        assert record.turns == requests, (qid, record.turns, requests)  # turns <= requests, here equal
        assert record.usage == usage, (qid, record.usage, usage)
        assert usage.output_tokens > 0
        assert record.cost_usd is not None, qid
        assert abs(record.cost_usd - (cost_of(usage, agent.price) or 0.0)) < 1e-9, (qid, record.cost_usd)
        assert record.runtime_version == agent.version, (qid, record.runtime_version)
    assert result.left == [], result.left
    return (
        f"{agent.runtime}: two-skill set, {result.exact()}/{QUERIES} exact; "
        f"{sum(r.usage.total_input + r.usage.output_tokens for r in result.records):,} tokens as served; "
        f"{result.took:.1f}s at concurrency {CONCURRENCY} (--version slowed to {SLOW_VERSION_S}s)"
    )
