"""An agent CLI runtime through ``skillreach run --runtime <name>`` at concurrency 4, SIGKILLed once half
the probes are recorded, then run again: the scenario every agent CLI's test shares (codex, through
``codex_study``, and the CLIs with a skill tool: gemini-cli, opencode, copilot). Each test starts its model
stand-in with a responder that follows :func:`reads_for` and hands its ``runtime_options`` here."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, BinaryIO

from skillreach.models import QueryKind
from skillreach.study.probe_log import read_probes
from tests.helpers import hang

__all__ = ["QUERIES", "SKILLREACH", "killed_half_way_and_resumed", "reads_for", "script_for", "write_inputs"]

SKILLREACH = Path(sys.executable).parent / "skillreach"
NAMES = [f"skill-{i:02d}" for i in range(6)]
SKILLS = [f"skill-{i:02d}" for i in range(8)]
QUERIES = 12
CONCURRENCY = 4


def script_for(i: int) -> tuple[str | None, list[str]]:
    """Query i: (expected skill, what the model loads): a rival first, the target alone, or nothing."""
    target = NAMES[i % len(NAMES)]
    if i % 4 == 3:
        return None, []
    if i % 4 == 0:
        return target, [NAMES[(i + 1) % len(NAMES)], target]
    return target, [target]


def reads_for(text: str) -> list[str]:
    """The skills the model loads for a query's text (a canary names its skill)."""
    canary = re.search(r"Use the (skill-\d\d) skill", text)
    if canary:
        return [canary.group(1)]
    found = re.search(r"request (\d\d)", text)
    return script_for(int(found.group(1)))[1] if found else []


def _args(runtime: str) -> list[str]:
    return [
        str(SKILLREACH),
        "run",
        "--config",
        "study.toml",
        "--skills",
        "skills",
        "--queries",
        "queries.json",
        "--runtime",
        runtime,
        "--concurrency",
        str(CONCURRENCY),
        "--out",
        "out",
    ]


def _run(root: Path, env: dict[str, str], runtime: str, log: BinaryIO) -> subprocess.Popen[bytes]:
    """The study in a session of its own (killed with its CLIs), its output to ``log`` (no pipe to fill
    while nobody reads it)."""
    return subprocess.Popen(
        _args(runtime), cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _toml(value: Any) -> str:
    return json.dumps(value)


def write_inputs(
    tmp_path: Path, *, skills: int = len(SKILLS), queries: int = QUERIES, filler: str = ""
) -> None:
    """``skills/`` (8 skills) and ``queries.json`` (12 queries, :func:`script_for`) under ``tmp_path``;
    ``filler`` lengthens every description."""
    for name in (f"skill-{i:02d}" for i in range(skills)):
        folder = tmp_path / "skills" / name
        folder.mkdir(parents=True)
        description = f"Handle chores of kind {name[-2:]} for the team.{' ' + filler if filler else ''}"
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description}\n---\nSteps for {name}.\n"
        )
    rows = []
    for i in range(queries):
        expected, _ = script_for(i)
        rows.append(
            {
                "id": f"q{i:02d}",
                "text": f"request {i:02d}: a chore for the team",
                "expected_skill": expected,
                "kind": QueryKind.implicit.value if expected else QueryKind.out_of_scope.value,
            }
        )
    (tmp_path / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": rows}))


def killed_half_way_and_resumed(
    runtime: str,
    options: dict[str, Any],
    key_env: dict[str, str],
    tmp_path: Path,
    version: str,
    model: str | None = None,
    *,
    skills: int = len(SKILLS),
    queries: int = QUERIES,
    filler: str = "",
    said: tuple[str, ...] = (),
) -> str:
    """``skillreach run --runtime <runtime>`` at concurrency 4 on 8 skills and 12 queries (or ``skills``
    and ``queries``), killed half-way and resumed: every query recorded once, activations as scripted,
    the first run's probes kept, the CLI's version on every record, the cost estimate said before the
    first probe (in tokens: no price is configured), each of ``said`` in what the command printed.
    Returns a line of timings."""
    write_inputs(tmp_path, skills=skills, queries=queries, filler=filler)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "SKILLREACH_"))}
    env.update(key_env, COLUMNS="200")
    probes = tmp_path / "out" / "probes.jsonl"
    lines = "".join(f"{k} = {_toml(v)}\n" for k, v in options.items())
    head = f"model = {_toml(model)}\n" if model else ""
    (tmp_path / "study.toml").write_text(f"{head}[runtime_options]\n{lines}", encoding="utf-8")
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as log:
        first = _run(tmp_path, env, runtime, log)
        try:
            # half the probes, waited for by progress (tests.helpers.hang), not a wall limit: the study
            # and its CLIs burn CPU or write probes however busy the machine is
            cpu, moved, done = -1.0, t0, 0
            while first.poll() is None and done < queries // 2:
                time.sleep(0.1)
                now = time.monotonic()
                lines = len(probes.read_bytes().splitlines()) if probes.exists() else 0
                seen = (hang.tree_cpu_s(first.pid), lines)
                if seen != (cpu, done):
                    (cpu, done), moved = seen, now
                hung = f"the first run hung: {done} probes, {cpu:.0f} s CPU, idle {now - moved:.0f} s"
                assert cpu < 400, hung
                assert now - moved < 120, hung
            log.seek(0)
            assert first.poll() is None, log.read().decode(errors="replace")[-2000:]
            os.killpg(first.pid, signal.SIGKILL)  # the study, half-way
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    killed_after = time.monotonic() - t0
    before = read_probes(probes)
    assert queries // 2 <= len(before) < queries
    resumed = hang.finish(_args(runtime), limit_s=900, stall_s=300, cwd=tmp_path, env=env)
    out, err = resumed.stdout, resumed.stderr
    total = time.monotonic() - t0
    assert resumed.returncode == 0, err[-3000:]
    assert "Traceback" not in out + err, (out + err)[-3000:]
    for text in said:
        assert text in out + err, text
    estimate = re.search(r"cost estimate: about ([\d,]+) input and ([\d,]+) output tokens", out + err)
    assert estimate is not None, (out + err)[-2000:]
    records = read_probes(probes)
    latest = {r.query_id: r for r in records}
    assert sorted(latest) == [f"q{i:02d}" for i in range(queries)]
    assert [r.error for r in latest.values() if r.error] == []
    for i in range(queries):
        assert latest[f"q{i:02d}"].invoked == tuple(script_for(i)[1]), i
    assert {r.runtime_version for r in records} == {version}
    assert all(latest[b.query_id] == b for b in before)  # the probes recorded before the kill are kept
    walls = sorted(r.duration_ms for r in records)
    return (
        f"{runtime} through skillreach run: killed after {killed_after:.1f}s with {len(before)} of {queries} "
        f"probes recorded; {total:.1f}s in all; probe wall times (ms): {walls}; estimate "
        f"{estimate.group(1)} input and {estimate.group(2)} output tokens"
    )
