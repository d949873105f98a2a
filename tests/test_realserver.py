"""The API runtimes against a real model server nobody here wrote: llama.cpp's ``llama-server`` serving
Gemma 3 270M (``.ci/llama.sh`` builds it once into ``SKILLREACH_LLAMA_CACHE``), driven through the real
``skillreach run`` command. Skipped, with the reason, when the server or the model is not installed.

Probe counts are tiny: the model generates ~10-50 tokens/s on two shared CPU cores. ``--max-turns 1``
makes every probe one request; ``concurrency = 1`` keeps the probes of a run in order (prompt-cache
reads are then certain after the first).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from skillreach.study.probe_log import read_probes
from tests.helpers.llama import LlamaServer, missing, run_study, write_study

WHY = missing()
pytestmark = [pytest.mark.realserver, pytest.mark.skipif(WHY is not None, reason=WHY or "")]

SETTINGS = (
    "max_retries = 0\ntimeout_s = 300\ncanary_timeout_s = 300\nconcurrency = 1\nrouting_max_tokens = 64\n"
)
QUERIES: list[dict[str, Any]] = [  # one a run (the model is slow on two shared cores); the 4xx test adds one
    {
        "id": "pdf-1",
        "text": "Use the pdf-forms skill: merge these two PDF forms into one file.",
        "expected_skill": "pdf-forms",
        "kind": "implicit",
    },
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """llama-server with a chat template that supports tools."""
    with LlamaServer(tmp_path_factory.mktemp("llama") / "server.log") as s:
        print(f"\nllama-server (tools template) up in {s.started_s:.1f}s")
        yield s


@pytest.fixture(scope="module")
def blind_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """llama-server with Gemma 3's own chat template: it has no tools, so they never reach the model."""
    with LlamaServer(tmp_path_factory.mktemp("llama-blind") / "server.log", tools=False) as s:
        yield s


def openai_env(s: LlamaServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{s.url}/v1"}


def anthropic_env(s: LlamaServer) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": s.url, "ANTHROPIC_API_KEY": "sk-local-not-checked"}


def said(root: Path, proc: Any) -> str:
    log = root / "out" / "skillreach.log"
    return proc.stdout + proc.stderr + (log.read_text(encoding="utf-8") if log.exists() else "")


def check_records(root: Path, n: int) -> list[Any]:
    records = read_probes(root / "out" / "probes.jsonl")
    assert len(records) == n
    assert [r.error for r in records if r.error] == []
    return records


@pytest.mark.parametrize("runtime", ["openai-compatible", "anthropic"])
def test_forced_choice_loads_a_skill_on_every_probe_with_usage_and_cache_from_real_responses(
    server: LlamaServer, tmp_path: Path, runtime: str
) -> None:
    choice = "required" if runtime == "openai-compatible" else "any"
    write_study(tmp_path, QUERIES, SETTINGS, f'tool_choice = "{choice}"\nskill_enum = true')
    env = openai_env(server) if runtime == "openai-compatible" else anthropic_env(server)
    started = time.monotonic()
    proc = run_study(tmp_path, runtime, env, "--max-turns", "1")
    print(f"\n{runtime} forced: {time.monotonic() - started:.1f}s")
    assert proc.returncode == 0, said(tmp_path, proc)
    records = check_records(tmp_path, len(QUERIES))
    assert all(len(r.invoked) == 1 for r in records)  # forced: each probe loaded exactly one skill
    assert all(r.resolved_model for r in records)
    assert f"forced choice (tool_choice={choice})" in proc.stdout  # the scorecard's one line
    # usage read from the real responses: input and output on every probe, cache reads after the first
    assert all(r.usage.input_tokens + r.usage.cache_read_input_tokens > 0 for r in records)
    assert all(r.usage.output_tokens > 0 for r in records)
    assert sum(r.usage.cache_read_input_tokens for r in records) > 0
    if runtime == "anthropic":  # llama.cpp has no /v1/models/{id}: the snapshot from a response, said once
        assert proc.stderr.count("has no Models API") == 1, proc.stderr


@pytest.mark.parametrize("runtime", ["openai-compatible", "anthropic"])
def test_free_choice_runs_or_the_canary_says_what_to_check(
    server: LlamaServer, tmp_path: Path, runtime: str
) -> None:
    """A 270M model may not call a tool it is free not to call: the study then stops at the canary,
    quickly and naming what to check; when the canary passes, the probes are recorded without error.
    ``skill_enum``: once the model opens a call, llama.cpp's grammar holds the name to a resident skill
    (without it the model may write a name past the routing budget, and llama.cpp answers a call cut
    off at ``max_tokens`` with HTTP 500 ``Failed to parse tool call arguments as JSON``)."""
    write_study(tmp_path, QUERIES, SETTINGS, "skill_enum = true")
    env = openai_env(server) if runtime == "openai-compatible" else anthropic_env(server)
    started = time.monotonic()
    proc = run_study(tmp_path, runtime, env, "--max-turns", "1")
    took = time.monotonic() - started
    print(f"\n{runtime} free: rc {proc.returncode} in {took:.1f}s")
    if proc.returncode == 0:
        check_records(tmp_path, len(QUERIES))
        assert "forced choice" not in proc.stdout
    else:
        text = said(tmp_path, proc)
        assert "cannot see activations" in text, text
        assert server.url in text
        assert "--jinja" in text


def test_canary_on_a_server_that_drops_tools_is_quick_and_says_what_to_check(
    blind_server: LlamaServer, tmp_path: Path
) -> None:
    write_study(tmp_path, QUERIES, SETTINGS)
    started = time.monotonic()
    proc = run_study(tmp_path, "openai-compatible", openai_env(blind_server))
    took = time.monotonic() - started
    print(f"\ncanary on a server without tools: {took:.1f}s")
    text = said(tmp_path, proc)
    assert proc.returncode == 1, text
    assert "cannot see activations" in text
    assert blind_server.url in text
    assert "--jinja" in text
    assert "chat template" in text
    assert (
        not (tmp_path / "out" / "probes.jsonl").exists()
        or read_probes(tmp_path / "out" / "probes.jsonl") == []
    )
    # one wave of canary requests (64 tokens each, canary_timeout_s 300 here) and the process start,
    # not a 1,024-token budget retried; 365 s measured at a load average of 17
    assert took < 420


def test_a_4xx_from_the_real_server_is_the_probes_error(server: LlamaServer, tmp_path: Path) -> None:
    """A query longer than the server's context: llama.cpp answers 400; the probe records it, once."""
    huge = {
        "id": "huge-1",
        "text": "Use the pdf-forms skill. " + "form field " * 12000,
        "expected_skill": "pdf-forms",
        "kind": "implicit",
    }
    write_study(tmp_path, [QUERIES[0], huge], SETTINGS, 'tool_choice = "required"\nskill_enum = true')
    started = time.monotonic()
    proc = run_study(tmp_path, "openai-compatible", openai_env(server), "--max-turns", "1")
    print(f"\n4xx: {time.monotonic() - started:.1f}s")
    assert proc.returncode == 0, said(tmp_path, proc)
    records = {r.query_id: r for r in read_probes(tmp_path / "out" / "probes.jsonl")}
    assert records["pdf-1"].error is None
    error = records["huge-1"].error or ""
    assert error.startswith("HTTP 4"), error
    assert "errored" in proc.stderr
