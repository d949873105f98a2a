"""``SKILLREACH_TIMEOUT_S`` is a deadline for a whole exchange with a model server, not for each read
(issue 40's hostile input): a server that drips its reply a byte at a time errors that probe after the
deadline, and the run goes on — through ``skillreach run`` for the anthropic and openai-compatible
runtimes, and for the rubric judge."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS
from tests.helpers import hang

DRIP = "DRIP-THIS-ONE"
"""A query whose text holds this gets its reply a byte every 0.2 s (a 5,000-byte body: 1,000 s)."""

MESSAGE = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "I can answer this directly."}], "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 6},
}
COMPLETION = {
    "id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-test",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "I can answer this directly."},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
}


SKILLS = sorted(p.name for p in Path(EXAMPLE_SKILLS).iterdir() if (p / "SKILL.md").is_file())


def _skill_named(body: dict[str, Any]) -> str:
    """The skill the last user message names (the canary's queries name one), else the first."""
    text = json.dumps(body.get("messages", [])[-1:])
    return next((name for name in sorted(SKILLS, key=len, reverse=True) if name in text), SKILLS[0])


def _reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A call of the Skill tool on the first turn, a text answer after a tool result."""
    answered = "tool_result" in json.dumps(body.get("messages", [])[-1:]) or any(
        m.get("role") == "tool" for m in body.get("messages", []))
    if path.endswith("/chat/completions"):
        if answered:
            return COMPLETION
        call = {"id": "call_1", "type": "function",
                "function": {"name": "Skill", "arguments": json.dumps({"skill": _skill_named(body)})}}
        choice = {"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                  "finish_reason": "tool_calls"}
        return {**COMPLETION, "choices": [choice]}
    if answered:
        return MESSAGE
    use = {"type": "tool_use", "id": "toolu_1", "name": "Skill", "input": {"skill": _skill_named(body)}}
    return {**MESSAGE, "content": [use], "stop_reason": "tool_use"}


class _Dripper(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    dripped: list[float]

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # /v1/models/{id} (anthropic), /models (openai)
        if self.path.startswith("/v1/models/"):
            self._send({"type": "model", "id": "claude-sonnet-4-5-20250929", "display_name": "m",
                        "created_at": "2025-09-29T00:00:00Z"})
        else:
            self._send({"object": "list", "data": [{"id": "gpt-test", "object": "model", "created": 0,
                                                    "owned_by": "test"}]})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if DRIP.encode() not in body:
            self._send(_reply(self.path, json.loads(body)))
            return
        self.server.dripped.append(time.monotonic())  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "5000")
        self.end_headers()
        try:
            for _ in range(5000):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            return  # the client gave up: what the deadline is for


@pytest.fixture
def dripper() -> Iterator[tuple[str, list[float]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Dripper)
    server.daemon_threads = True
    server.dripped = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.dripped  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def _queries(tmp_path: Path) -> tuple[Path, str]:
    data = json.loads(Path(EXAMPLE_QUERIES).read_text(encoding="utf-8"))
    data["queries"] = data["queries"][:4]
    victim = data["queries"][2]
    victim["text"] = f"{victim['text']} {DRIP}"
    data["provenance"] = {}
    path = tmp_path / "q.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path, str(victim["id"])


def _env(tmp_path: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SKILLREACH_", "ANTHROPIC_", "OPENAI_", "PREFECT_API_URL"))}
    env.update(SKILLREACH_TIMEOUT_S="2", SKILLREACH_MAX_RETRIES="1",
               PREFECT_HOME=str(tmp_path / "prefect"), **extra)
    return env


@pytest.mark.parametrize("runtime", ["anthropic", "openai-compatible"])
def test_a_dripping_server_errors_one_probe_and_the_run_goes_on(
    runtime: str, dripper: tuple[str, list[float]], tmp_path: Path
) -> None:
    base, dripped = dripper
    queries, victim = _queries(tmp_path)
    if runtime == "anthropic":
        extra = {"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": base}
        model = "claude-sonnet-4-5"
    else:
        extra = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": base + "/v1"}
        model = "gpt-test"
    out = tmp_path / "s"
    args = [str(Path(sys.executable).parent / "skillreach"), "run", "--skills", str(EXAMPLE_SKILLS),
            "--queries", str(queries), "--runtime", runtime, "--model", model, "--attempts", "1",
            "--out", str(out)]
    t0 = time.monotonic()
    done = hang.finish(args, limit_s=300, cwd=tmp_path, env=_env(tmp_path, extra))
    wall = time.monotonic() - t0
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    probes = [json.loads(line) for line in (out / "probes.jsonl").read_text(encoding="utf-8").splitlines()]
    errored = {p["query_id"]: p["error"] for p in probes if p["error"]}
    assert set(errored) == {victim}, errored
    assert "timed out" in errored[victim], errored
    assert len(probes) == 4
    assert len(dripped) == 2  # the first try and its one retry, each cut at the deadline
    # each drip would take 1,000 s: 2 tries × 2 s, plus start-up and the other probes, on a loaded machine
    assert wall < 120, f"the run took {wall:.0f} s"


def test_the_judge_is_bounded_by_its_deadline(dripper: tuple[str, list[float]]) -> None:
    import anthropic

    from skillreach.errors import TransientProbeError
    from skillreach.runtimes.judge_anthropic import AnthropicJudge as Judge
    from skillreach.study.judge import JudgeRequest

    base, dripped = dripper
    client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=base, max_retries=0, timeout=2.0)
    judge = Judge(client=client, timeout_s=2.0)

    async def grade() -> float:
        t0 = time.monotonic()
        with pytest.raises(TransientProbeError, match="timed out"):
            await judge.grade(JudgeRequest(query_id="q", request=f"grade this {DRIP}", rubric="r",
                                           final_answer="a"))
        return time.monotonic() - t0

    took = asyncio.run(grade())
    assert dripped
    assert took < 60, f"the judge waited {took:.0f} s"
