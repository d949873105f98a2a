"""What a CLI probe costs: probes per minute, CPU seconds and peak memory per probe of the claude-code
and pi runtimes running the REAL CLIs against the local Messages API stand-in, at concurrency 1, 2, 4, 8.

A 26-skill catalog; every query names its skill and the stand-in answers with that skill at once (one
API turn, early exit), so the figures are the CLI's own cost: process start, reading the skills, one
request, the stream. Each (runtime, concurrency) runs in a fresh process so that its children's CPU
time and peak resident memory (``getrusage(RUSAGE_CHILDREN)``) are its own. The stand-in answers at
once (``--latency`` adds a delay per request, like a real API).

    .venv/bin/python bench/cli_runtimes.py [--runtimes claude-code,pi] [--concurrency 1,2,4,8]
                                           [--probes 16] [--latency 0]

The CLIs come from ``.ci/run``'s cache (``~/.cache/skillreach/{claude-code,pi}``) or
``SKILLREACH_REAL_CLAUDE`` / ``SKILLREACH_TEST_PI``; a runtime whose CLI is missing is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skillreach.models import Catalog, Query, QueryKind, Skill  # noqa: E402
from skillreach.settings import Settings  # noqa: E402
from skillreach.study.contract import ProbeOptions, Runtime  # noqa: E402
from skillreach.study.runner import ListSink, run_probes  # noqa: E402

CACHE = Path.home() / ".cache" / "skillreach"
SKILLS = 26


def real_cli(runtime: str) -> str | None:
    """The real CLI of ``runtime`` (None when it is not installed)."""
    if runtime == "claude-code":
        candidates = [os.environ.get("SKILLREACH_REAL_CLAUDE")] + [
            str(CACHE / "claude-code" / "node_modules" / "@anthropic-ai" / f"claude-code-{arch}" / "claude")
            for arch in ("linux-x64", "linux-arm64")
        ]
    else:
        candidates = [
            os.environ.get("SKILLREACH_TEST_PI"),
            str(CACHE / "pi" / "node_modules" / ".bin" / "pi"),
        ]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def catalog(root: Path) -> Catalog:
    skills = []
    for i in range(SKILLS):
        name = f"skill-{i:02d}"
        folder = root / name
        folder.mkdir(parents=True)
        description = f"Handle chores of kind {i:02d} for the team (plans, checks, reports)."
        body = f"# {name}\n\nSteps for chores of kind {i:02d}.\n"
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}")
        skills.append(
            Skill(
                name=name,
                description=description,
                body=body,
                folder=str(folder),
                path=str(folder / "SKILL.md"),
            )
        )
    return Catalog(id="bench", skills=tuple(skills))


def responder(body: dict[str, Any]) -> Any:
    """Load the skill the query names: ``Skill`` for Claude Code, a ``read`` of its SKILL.md for pi."""
    from tests.fakes.messages_api import Reply, query_text, skill_call, text_reply, tool_call, turn_of

    wanted = re.search(r"use (skill-\d\d)", query_text(body))
    if wanted is None or turn_of(body) > 0:
        return text_reply("Done.")
    tools = {t.get("name") for t in body.get("tools") or []}
    if "Skill" in tools:
        return Reply([skill_call(wanted.group(1))])
    found = re.search(
        rf"<location>([^<]*/{wanted.group(1)}/SKILL\.md)</location>", json.dumps(body.get("system"))
    )
    return Reply([tool_call("read", {"path": found.group(1)})]) if found else text_reply("Done.")


def build(runtime: str, cli: str, base_url: str, concurrency: int) -> Runtime:
    if runtime == "claude-code":
        from skillreach.runtimes.claude_code import ClaudeCodeRuntime

        return ClaudeCodeRuntime(
            "claude-sonnet-4-6",
            claude_path=cli,
            settings=Settings(),
            base_url=base_url,
            api_key="sk-bench",
            concurrency=concurrency,
        )
    from skillreach.runtimes.pi import PiRuntime

    return PiRuntime(
        pi_path=cli, model="claude-sonnet-4-5", base_url=base_url, env={"ANTHROPIC_API_KEY": "sk-bench"}
    )


async def one(runtime: str, concurrency: int, probes: int, latency: float) -> dict[str, Any]:
    """One (runtime, concurrency) in this process: the figures as a dict."""
    from tests.fakes.messages_api import MessagesAPI

    cli = real_cli(runtime)
    assert cli is not None
    queries = [
        Query(
            id=f"q{i:03d}",
            text=f"request {i:03d}: use skill-{i % SKILLS:02d}",
            expected_skill=f"skill-{i % SKILLS:02d}",
            kind=QueryKind.implicit,
        )
        for i in range(probes)
    ]
    with tempfile.TemporaryDirectory() as tmp, MessagesAPI(responder, latency=latency) as api:
        cat = catalog(Path(tmp))
        rt = build(runtime, cli, api.base_url, concurrency)
        version = await rt.version()
        # warm-up: the residency check (pi) and the template (claude-code) are built once per catalog
        await run_probes(
            rt,
            cat,
            [(queries[0], 0)],
            options=ProbeOptions(timeout_s=300),
            sink=ListSink(),
            concurrency=1,
            fingerprint="bench",
        )
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        sink = ListSink()
        started = time.perf_counter()
        await run_probes(
            rt,
            cat,
            [(q, 1) for q in queries],
            options=ProbeOptions(timeout_s=300),
            sink=sink,
            concurrency=concurrency,
            fingerprint="bench",
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        await rt.aclose()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    errors = [r.error for r in sink.records if r.error]
    return {
        "runtime": runtime,
        "version": version,
        "concurrency": concurrency,
        "probes": len(sink.records),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "probes_per_min": round(len(sink.records) / wall * 60, 1),
        "cpu_s_per_probe": round(cpu / max(1, len(sink.records)), 2),
        "peak_rss_mb": round(after.ru_maxrss / 1024),  # KiB on Linux: the largest CLI process
        "wall_s": round(wall, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", default="claude-code,pi")
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--probes", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:  # a child: one runtime at one concurrency, the figures as JSON
        figures = asyncio.run(one(args.one, int(args.concurrency), args.probes, args.latency))
        print(json.dumps(figures))
        return 0
    print(
        f"{os.cpu_count()} CPUs; {args.probes} probes per row; stand-in latency {args.latency:g}s; "
        f"{SKILLS} skills"
    )
    print(
        f"{'runtime':12} {'version':26} {'conc':>4} {'probes/min':>10} {'CPU s/probe':>11} "
        f"{'peak MB':>8} {'errors':>6}"
    )
    for runtime in args.runtimes.split(","):
        if real_cli(runtime) is None:
            print(f"{runtime:12} skipped: the real CLI is not installed (run .ci/run)")
            continue
        for conc in (int(c) for c in args.concurrency.split(",")):
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    runtime,
                    "--concurrency",
                    str(conc),
                    "--probes",
                    str(args.probes),
                    "--latency",
                    str(args.latency),
                ],
                capture_output=True,
                text=True,
                check=False,
                cwd=REPO,
            )
            if proc.returncode != 0:
                print(f"{runtime:12} concurrency {conc}: failed: {proc.stderr.strip()[-300:]}")
                return 1
            f = json.loads(proc.stdout.strip().splitlines()[-1])
            print(
                f"{runtime:12} {str(f['version'])[:26]:26} {conc:>4} {f['probes_per_min']:>10} "
                f"{f['cpu_s_per_probe']:>11} {f['peak_rss_mb']:>8} {f['errors']:>6}"
            )
            if f["errors"]:
                print(f"{'':12} first error: {f['first_error']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
