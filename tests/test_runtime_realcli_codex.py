"""The codex runtime with the REAL Codex CLI (``@openai/codex`` 0.171.0) against the local Responses API
stand-in: through ``skillreach run --runtime codex`` at concurrency 4, killed half-way and resumed; one
probe's signals and early exit; and Codex's capped skills listing as :mod:`skillreach.skills.agent_listing`
predicts it, on the real corpora.

Skipped, never passed, when the CLI is not installed: ``SKILLREACH_REAL_CODEX`` or the cache folder that
``.ci/run`` installs into (``~/.cache/skillreach/codex``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from skillreach.models import Catalog, QueryKind
from skillreach.settings import Settings
from skillreach.skills.agent_listing import codex_listing, codex_listing_text
from skillreach.study.probe_log import read_probes
from tests.fakes.kit import folder_catalog, probe, query
from tests.fakes.responses_api import (
    ResponsesAPI,
    ResponsesReply,
    ResponsesScript,
    listing_of,
    message,
    query_of,
    skill_read,
    turn_of,
)
from tests.helpers.clis import real_codex

pytestmark = pytest.mark.realcli

SKILLREACH = Path(sys.executable).parent / "skillreach"
NAMES = [f"skill-{i:02d}" for i in range(6)]
"""The skills the queries target; the catalog has ``SKILLS`` in all, their descriptions long enough
(~760 characters) that Codex must shorten every one to fit 2 % of its 272,000-token window."""
SKILLS = [f"skill-{i:02d}" for i in range(40)]
FILLER = "Keep the team's chores in order, step by step, with care for every detail of the work. " * 8
QUERIES = 16
CONCURRENCY = 4


@pytest.fixture
def codex() -> str:
    path = real_codex()
    if path is None:
        pytest.skip("the real Codex CLI is not installed (set SKILLREACH_REAL_CODEX or run .ci/run)")
    return path


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


# ------------------------------------------------------------------------------------ one probe


async def test_real_codex_reads_a_skill_otel_signal_and_early_exit(codex: str, tmp_path: Path) -> None:
    from skillreach.runtimes.codex import CodexRuntime

    catalog = folder_catalog(tmp_path)
    script = ResponsesScript({"rotate the keys": ["pdf", "secrets", "rollback"]})
    with ResponsesAPI(script) as api:
        rt = CodexRuntime(
            "fake-model", codex_path=codex, settings=Settings(), base_url=api.base_url, api_key="sk-test"
        )
        out, _ = await probe(rt, catalog, query("please rotate the keys now", "secrets"), timeout_s=90)
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["pdf", "secrets"]
    assert out.early_exit
    # Codex's own record counts the reads (it arrives before the command's event; on a loaded machine
    # the command may win a race, and the read still counts once)
    assert rt.signals["otel"] >= 1
    assert sum(rt.signals.values()) == 2
    assert len(api.requests) == 2  # killed before the request after the target's read
    assert not any(alive(pid) for pid in rt.pids)
    assert api.headers[0]["authorization"] == "Bearer sk-test"
    first = api.requests[0]
    listing = listing_of(first)
    assert listing is not None
    for skill in catalog.skills:  # the catalog and nothing else
        assert f"- {skill.name}: {skill.description} (file: r0/{skill.name}/SKILL.md)" in listing
    assert listing.count("(file: ") == 3
    assert "PDF BODY" not in json.dumps(first)
    assert out.usage.input_tokens > 0
    assert out.turns == 2


async def test_real_codex_without_otel_falls_back_to_the_command(codex: str, tmp_path: Path) -> None:
    from skillreach.runtimes.codex import CodexRuntime

    catalog = folder_catalog(tmp_path)
    with ResponsesAPI(ResponsesScript({"undo": ["rollback"], "weather": []})) as api:
        rt = CodexRuntime(
            "fake-model",
            codex_path=codex,
            settings=Settings(),
            base_url=api.base_url,
            api_key="sk-test",
            otel=False,
        )
        out, _ = await probe(rt, catalog, query("undo the deploy", "rollback"), timeout_s=90)
        none, _ = await probe(rt, catalog, query("what is the weather", None), timeout_s=90)
        await rt.aclose()
    assert out.error is None, out.error
    assert none.error is None, none.error
    assert out.invoked == ["rollback"]
    assert out.early_exit
    assert none.invoked == []
    assert none.final_text == "Done."
    assert rt.signals == {"command": 1}


# ------------------------------------------------------------------------ skillreach run, resumed


def script_for(i: int) -> tuple[str | None, list[str]]:
    """Query i: (expected skill, what the model reads): a rival first, the target alone, or nothing."""
    target = NAMES[i % len(NAMES)]
    if i % 4 == 3:
        return None, []
    if i % 4 == 0:
        return target, [NAMES[(i + 1) % len(NAMES)], target]
    return target, [target]


def responder(body: dict[str, Any]) -> ResponsesReply:
    text = query_of(body)
    turn = turn_of(body)
    canary = re.search(r"Use the (skill-\d\d) skill", text)
    if canary:
        reads = [canary.group(1)]
    else:
        found = re.search(r"request (\d\d)", text)
        reads = script_for(int(found.group(1)))[1] if found else []
    return ResponsesReply([skill_read(body, reads[turn])] if turn < len(reads) else [message("Done.")])


def run_study(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
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
            "codex",
            "--concurrency",
            str(CONCURRENCY),
            "--out",
            "out",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_real_codex_through_skillreach_run_killed_half_way_and_resumed(codex: str, tmp_path: Path) -> None:
    for name in SKILLS:
        folder = tmp_path / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\n"
            f"description: Handle chores of kind {name[-2:]} for the team. {FILLER.strip()}\n---\n"
            f"Steps for {name}.\n"
        )
    queries = []
    for i in range(QUERIES):
        expected, _ = script_for(i)
        queries.append(
            {
                "id": f"q{i:02d}",
                "text": f"request {i:02d}: a chore for the team",
                "expected_skill": expected,
                "kind": QueryKind.implicit.value if expected else QueryKind.out_of_scope.value,
            }
        )
    (tmp_path / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": queries}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "SKILLREACH_"))}
    env.update(OPENAI_API_KEY="sk-test-not-a-secret", COLUMNS="200")
    probes = tmp_path / "out" / "probes.jsonl"
    with ResponsesAPI(responder) as api:
        (tmp_path / "study.toml").write_text(
            f'[runtime_options]\ncodex_path = "{codex}"\nbase_url = "{api.base_url}"\n', encoding="utf-8"
        )
        t0 = time.monotonic()
        first = run_study(tmp_path, env)
        try:
            while time.monotonic() - t0 < 300:
                done = len(probes.read_text().splitlines()) if probes.exists() else 0
                if done >= QUERIES // 2 or first.poll() is not None:
                    break
                time.sleep(0.05)
            assert first.poll() is None, first.communicate()[1][-2000:]
            os.killpg(first.pid, signal.SIGKILL)  # the study, half-way
        finally:
            first.wait(30)
        killed_after = time.monotonic() - t0
        before = read_probes(probes)
        assert QUERIES // 2 <= len(before) < QUERIES
        resumed = run_study(tmp_path, env)
        out, err = resumed.communicate(timeout=600)
        total = time.monotonic() - t0
    assert resumed.returncode == 0, err[-3000:]
    assert "Traceback" not in out + err
    assert "overflows Codex's skills listing: codex lists 40 of 40 skills: 40 descriptions shortened" in err
    records = read_probes(probes)
    latest = {r.query_id: r for r in records}
    assert sorted(latest) == [f"q{i:02d}" for i in range(QUERIES)]
    assert [r.error for r in latest.values() if r.error] == []
    for i in range(QUERIES):
        assert latest[f"q{i:02d}"].invoked == tuple(script_for(i)[1]), i
    assert {r.runtime_version for r in records} == {"codex-cli 0.171.0"}
    # the probes recorded before the kill are not run again
    assert all(latest[b.query_id] == b for b in before)
    walls = sorted(r.duration_ms for r in records)
    print(
        f"\ncodex through skillreach run: killed after {killed_after:.1f}s with {len(before)} of {QUERIES} "
        f"probes recorded; {total:.1f}s in all; probe wall times (ms): {walls}"
    )


# ------------------------------------------------------------------------------- the listing


async def test_codex_listing_of_the_real_corpora_is_what_codex_sends(
    codex: str, corpora: Path, tmp_path: Path
) -> None:
    """240-odd real skills, a 100,000-token window: 2,000 tokens, so descriptions go and skills are
    dropped; a 272,000-token window (Codex's own for an unknown model): every description shortened."""
    from skillreach.runtimes.codex import CodexRuntime
    from skillreach.skills.discovery import discover

    skills = discover([corpora]).skills
    catalog = Catalog(id="corpora", skills=tuple(skills))
    for window, dropped in ((100_000, True), (None, False)):
        with ResponsesAPI(ResponsesScript()) as api:
            rt = CodexRuntime(
                "fake-model",
                codex_path=codex,
                settings=Settings(),
                base_url=api.base_url,
                api_key="sk-test",
                context_window=window,
                keep_workdirs=True,
            )
            out, _ = await probe(rt, catalog, query("hello", None), timeout_s=120)
            work = next(rt._root.glob("probe-*")) / "work"
            await rt.aclose()
        assert out.error is None, out.error
        sent = listing_of(api.requests[0])
        predicted = codex_listing(skills, context_window=rt.effective_context_window)
        assert sent == codex_listing_text(predicted, str(work / ".agents" / "skills"))
        assert bool(predicted.dropped) is dropped
        assert len(predicted.shortened) > 0 if not dropped else len(predicted.dropped) > 50
        assert rt.listing_warning(catalog) is not None


async def test_real_codex_compliance_records_commands_and_the_sandbox_keeps_them_read_only(
    codex: str, tmp_path: Path
) -> None:
    from skillreach.runtimes.codex import CodexRuntime

    catalog = folder_catalog(tmp_path)
    script = ResponsesScript(
        {
            "fill the form": [
                "pdf",
                {"tool": "exec_command", "arguments": {"cmd": "touch made-by-agent"}},
                {"text": "Filled."},
            ]
        }
    )
    with ResponsesAPI(script) as api:
        rt = CodexRuntime(
            "fake-model",
            codex_path=codex,
            settings=Settings(),
            base_url=api.base_url,
            api_key="sk-test",
            keep_workdirs=True,
        )
        out, _ = await probe(
            rt, catalog, query("fill the form please", "pdf"), compliance=True, early_exit=False, timeout_s=90
        )
        made = list(rt._root.glob("probe-*/work/made-by-agent"))
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked == ["pdf"]
    assert [c.tool for c in out.tool_calls] == ["exec_command"]
    assert out.tool_calls[0].input == {"cmd": "touch made-by-agent"}  # refused: --json never showed it
    assert out.final_text == "Filled."
    assert made == []  # the read-only sandbox refused the write
    assert len(api.requests) == 3


async def test_real_codex_past_its_timeout_is_ended_with_its_group(codex: str, tmp_path: Path) -> None:
    from skillreach.runtimes.codex import CodexRuntime

    catalog = folder_catalog(tmp_path)
    with ResponsesAPI(ResponsesScript({"slow": ["pdf"]}), delay_s=8.0) as api:
        rt = CodexRuntime(
            "fake-model", codex_path=codex, settings=Settings(), base_url=api.base_url, api_key="sk-test"
        )
        t0 = time.monotonic()
        out, _ = await probe(rt, catalog, query("a slow one", "pdf"), timeout_s=4)
        took = time.monotonic() - t0
        await rt.aclose()
    assert out.error == "codex did not finish within 4s"
    assert out.invoked == []
    assert took < 7
    assert not any(alive(pid) for pid in rt.pids)
