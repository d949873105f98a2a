"""One sealed query set across the REAL Gemini CLI, OpenCode and Copilot CLI, each against its own stand-in
(the Gemini API; Chat Completions with SSE): ``skillreach run --runtime gemini-cli,opencode,copilot`` with
one ``[runtime_options.<runtime>]`` table each, one study per agent, and their matrix. The OpenCode
stand-in's model never loads ``skill-01``, so the matrix must show that agent apart.

Skipped, never passed, when any of the three CLIs (or ripgrep, for OpenCode) is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from skillreach.study.probe_log import read_probes
from tests.fakes.gemini_api import GeminiCliAPI, query_of
from tests.fakes.openai_chat import OpenAIChat, completion, first_user_text, tool_call
from tests.helpers.cli_study import SKILLREACH, reads_for, write_inputs
from tests.helpers.clis import real_copilot, real_gemini, real_opencode

pytestmark = pytest.mark.realcli


@pytest.fixture
def clis() -> dict[str, str]:
    found = {"gemini-cli": real_gemini(), "opencode": real_opencode(), "copilot": real_copilot()}
    missing = [k for k, v in found.items() if v is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (run .ci/run)")
    if shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not on PATH: OpenCode's skill tool cannot run offline without it")
    return {k: str(v) for k, v in found.items()}


def chat_responder(arg: str, skip: str | None = None) -> Any:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        text = first_user_text(body).rsplit("\n", 1)[-1]
        canary = "Use the " in text  # the study's canaries must still see activations
        reads = [r for r in reads_for(text) if canary or r != skip]
        done = sum(1 for m in body["messages"] if m.get("role") == "tool")
        if done < len(reads):
            return completion(model="fake-model", tool_calls=[tool_call("skill", {arg: reads[done]})])
        return completion(model="fake-model", text="Done.")

    return responder


def test_one_query_set_across_three_real_agents(clis: dict[str, str], tmp_path: Path) -> None:
    write_inputs(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "SKILLREACH_"))}
    env.update(GEMINI_API_KEY="k-test", OPENAI_API_KEY="k-test", COLUMNS="220")

    def gemini_script(body: dict[str, Any]) -> list[Any]:
        return list(reads_for(query_of(body)))

    with (
        GeminiCliAPI(gemini_script) as gemini,
        OpenAIChat(responder=chat_responder("name", skip="skill-01")) as opencode,
        OpenAIChat(responder=chat_responder("skill")) as copilot,
    ):
        (tmp_path / "study.toml").write_text(
            'model = "fake-model"\n'
            f"[runtime_options.gemini-cli]\ngemini_path = {json.dumps(clis['gemini-cli'])}\n"
            f"base_url = {json.dumps(gemini.base_url)}\n"
            f"[runtime_options.opencode]\nopencode_path = {json.dumps(clis['opencode'])}\n"
            f"base_url = {json.dumps(opencode.base_url)}\n"
            f"[runtime_options.copilot]\ncopilot_path = {json.dumps(clis['copilot'])}\n"
            f"base_url = {json.dumps(copilot.base_url)}\n",
            encoding="utf-8",
        )
        t0 = time.monotonic()
        run = subprocess.run(
            [
                str(SKILLREACH),
                "run",
                "--config",
                "study.toml",
                "--skills",
                "skills",
                "--queries",
                "queries.json",
                "--runtime",
                "gemini-cli,opencode,copilot",
                "--concurrency",
                "4",
                "--out",
                "agents",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
        took = time.monotonic() - t0
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "Skill routing across agents" in out
    for agent in ("gemini-cli", "opencode", "copilot"):
        records = read_probes(tmp_path / "agents" / agent / "probes.jsonl")
        assert [r.error for r in records if r.error] == []
        assert len({r.query_id for r in records}) == 12
    assert "gemini-cli collisions" in out or "No skill" in out or "Routed" in out
    markdown = (tmp_path / "agents" / "agents.md").read_text()
    row = next(line for line in markdown.splitlines() if line.startswith("| skill-01 |"))
    cells = [c.strip() for c in row.split("|")[2:-1]]  # gemini act., false, opencode act., false, …
    assert cells[0].startswith("1.00")
    assert cells[2].startswith("0.00")  # OpenCode's model never loads skill-01
    assert cells[4].startswith("1.00")
    assert (tmp_path / "agents" / "agents.html").is_file()
    print(f"\nthree agents through skillreach run --runtime gemini-cli,opencode,copilot: {took:.1f}s")
