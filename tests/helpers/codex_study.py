"""The codex runtime through ``skillreach run`` (the real Codex CLI or its stand-in executable), against
the Responses API stand-in: the scenario the realcli test and the stand-in's test share."""

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

from skillreach.models import QueryKind
from skillreach.study.probe_log import read_probes
from tests.fakes.responses_api import ResponsesAPI, ResponsesReply, message, query_of, skill_read, turn_of

__all__ = ["CODEX_STUB", "killed_half_way_and_resumed"]

CODEX_STUB = Path(__file__).resolve().parents[1] / "fakes" / "codex_stub" / "codex"
SKILLREACH = Path(sys.executable).parent / "skillreach"
NAMES = [f"skill-{i:02d}" for i in range(6)]
"""The skills the queries target; the catalog has ``SKILLS`` in all, their descriptions long enough
(~760 characters) that Codex must shorten every one to fit 2 % of its 272,000-token window."""
SKILLS = [f"skill-{i:02d}" for i in range(40)]
FILLER = "Keep the team's chores in order, step by step, with care for every detail of the work. " * 8
QUERIES = 16
CONCURRENCY = 4


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


def killed_half_way_and_resumed(codex: str, tmp_path: Path, version: str) -> str:
    """``skillreach run --runtime codex`` at concurrency 4 on 40 skills and 16 queries, SIGKILLed once half
    the probes are recorded, then run again: every query recorded once, activations as scripted, the
    probes of the first run kept. Returns a line of timings."""
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
    assert {r.runtime_version for r in records} == {version}
    # the probes recorded before the kill are not run again
    assert all(latest[b.query_id] == b for b in before)
    walls = sorted(r.duration_ms for r in records)
    return (
        f"codex through skillreach run: killed after {killed_after:.1f}s with {len(before)} of {QUERIES} "
        f"probes recorded; {total:.1f}s in all; probe wall times (ms): {walls}"
    )
