"""Probe throughput and prompt-cache share of the anthropic runtime against the local stand-in.

2,000 probes on a 100-skill catalog, 50 ms of server latency per request, 32 probes in flight, every
probe through ``skillreach.study.runner.run_probes`` (fsynced JSONL sink included) and the real
``anthropic`` SDK over HTTP. The stand-in runs in its own process (its own interpreter lock) and
computes cache reads from the ``cache_control`` prefixes it has seen, as the real API does.

Prints the wall time, the ideal (probes × latency / concurrency; each probe is one request here: the
model invokes the expected skill at once, early exit), their ratio (goal ≤ 1.3), and the share of input
tokens served from cache (goal ≥ 80 %). Then the stand-in records every request body it received and a
fresh one answers the same bodies sent by a bare ``httpx`` async client at the same concurrency, in the
same script, and again by a bare ``aiohttp`` session (the SDK's transport here; against this stand-in
httpx is the slower client by far): probing wall / the faster bare client's wall (goal ≤ 1.1) is what
the runtime's request path costs.

    .venv/bin/python bench/probe_throughput.py [--probes 2000] [--concurrency 32] [--latency 0.05]
                                               [--http auto|aiohttp|httpx]

``--http`` picks the SDK's HTTP transport (``auto``: aiohttp when ``anthropic[aiohttp]`` is installed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skillreach.models import Catalog, Query, Skill  # noqa: E402
from skillreach.runtimes._retry import RetryPolicy  # noqa: E402
from skillreach.runtimes.anthropic import AnthropicRuntime  # noqa: E402
from skillreach.settings import Settings  # noqa: E402
from skillreach.study.contract import ProbeOptions  # noqa: E402
from skillreach.study.probe_log import JsonlSink, read_probes  # noqa: E402
from skillreach.study.runner import run_probes  # noqa: E402

WORDS = [
    "convert",
    "extract",
    "summarise",
    "validate",
    "deploy",
    "rollback",
    "schedule",
    "audit",
    "migrate",
    "render",
    "index",
    "archive",
    "compress",
    "encrypt",
    "translate",
    "review",
    "lint",
    "format",
    "benchmark",
    "profile",
]
THINGS = [
    "invoices",
    "spreadsheets",
    "contracts",
    "slides",
    "dashboards",
    "pipelines",
    "releases",
    "tickets",
    "datasets",
    "images",
    "reports",
    "schemas",
    "logs",
    "backups",
    "certificates",
]


def catalog(n: int = 100) -> Catalog:
    skills = []
    for i in range(n):
        verb, thing = WORDS[i % len(WORDS)], THINGS[(i * 7) % len(THINGS)]
        name = f"{verb}-{thing}-{i:03d}"
        description = (
            f"Use this skill to {verb} {thing} for the team: it knows the house conventions, the "
            f"checks to run before and after, and the mistakes people make when they {verb} {thing} "
            f"by hand. Trigger it whenever a request mentions {thing} and {verb}, even indirectly."
        )
        body = f"# {name}\n\n" + "\n".join(f"{k}. Step {k} of {verb}ing {thing}." for k in range(1, 40))
        skills.append(Skill(name=name, description=description, body=body))
    return Catalog(id="bench-100", skills=tuple(skills))


async def run(probes: int, concurrency: int, latency: float, http: str = "auto") -> None:
    cat = catalog()
    queries = [
        Query(
            id=f"q{i:05d}",
            text=f"Request {i}: please help with {cat.skills[i % 100].name.rsplit('-', 1)[0]}",
            expected_skill=cat.skills[i % 100].name,
        )
        for i in range(probes)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps({q.text: [q.expected_skill] for q in queries}))
        recorded = Path(tmp) / "requests.jsonl"
        server = _server(latency, script, recorded)
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            rt = AnthropicRuntime(
                "claude-sonnet-4-6",
                base_url=base_url,
                api_key="sk-bench",
                settings=Settings(),
                concurrency=concurrency,
                retry_policy=RetryPolicy(max_retries=3, base_s=0.05),
                http=http,
            )
            sink = JsonlSink(Path(tmp) / "probes.jsonl")
            opts = ProbeOptions(model="claude-sonnet-4-6")
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            records = await run_probes(
                rt,
                cat,
                [(q, 1) for q in queries],
                options=opts,
                sink=sink,
                concurrency=concurrency,
                fingerprint="bench",
            )
            wall = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            sink.close()
            await rt.aclose()
            on_disk = read_probes(Path(tmp) / "probes.jsonl")
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=30)
        bodies = [json.loads(line) for line in recorded.read_text(encoding="utf-8").splitlines()]
        server = _server(latency, script, None)
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            bare, bare_cpu = await _replay(url, bodies, concurrency)
            bare_aio, bare_aio_cpu = await _replay_aiohttp(url, bodies, concurrency)
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=30)
    durations = sorted(r.duration_ms for r in records)
    errors = sum(1 for r in records if r.error)
    hits = sum(
        1
        for r, q in zip(sorted(records, key=lambda r: r.query_id), queries, strict=True)
        if r.invoked == (q.expected_skill,)
    )
    requests = sum(r.turns for r in records)
    read = sum(r.usage.cache_read_input_tokens for r in records)
    total_in = sum(r.usage.total_input for r in records)
    ideal = requests * latency / concurrency
    cost = sum(r.cost_usd or 0.0 for r in records)
    print(
        f"probes                 {len(records)} ({len(on_disk)} on disk, {errors} errors, "
        f"{hits} hit the target)"
    )
    print(f"requests               {requests} (retries: {rt.stats.retries}; request path: {rt.request_path})")
    print(f"wall time              {wall:.2f} s")
    print(f"ideal                  {ideal:.2f} s  (requests × {latency * 1000:.0f} ms / {concurrency})")
    print(f"ratio                  {wall / ideal:.2f}  (goal ≤ 1.3)")
    print(
        f"bare httpx replay      {bare:.2f} s for the same {len(bodies)} request bodies, {concurrency} in "
        f"flight (client CPU {bare_cpu:.2f} s, {1000 * bare_cpu / max(len(bodies), 1):.2f} ms a request)"
    )
    print(
        f"bare aiohttp replay    {bare_aio:.2f} s, the same bodies (client CPU {bare_aio_cpu:.2f} s, "
        f"{1000 * bare_aio_cpu / max(len(bodies), 1):.2f} ms a request); "
        f"probing wall / bare aiohttp wall {wall / bare_aio:.2f}"
    )
    best = min(bare, bare_aio)  # the faster bare client is the stricter reference
    print(
        f"GOAL probing wall / bare-client wall (the faster of the two): {wall / best:.2f} (goal ≤ 1.1): "
        f"{'met' if wall / best <= 1.1 else 'NOT met'}"
    )
    print(f"throughput             {len(records) / wall:.0f} probes/s")
    p50, p90 = durations[len(durations) // 2], durations[9 * len(durations) // 10]
    print(f"probe duration         p50 {p50} ms, p90 {p90} ms (server latency {latency * 1000:.0f} ms)")
    print(
        f"client CPU             {cpu:.2f} s ({1000 * cpu / requests:.2f} ms a request; "
        "the client is one thread)"
    )
    print(f"load average           {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"input tokens           {total_in:,} ({read:,} read from cache)")
    print(f"cache share            {100 * read / total_in:.1f} %  (goal ≥ 80 %)")
    print(f"estimated cost         ${cost:.2f} at list prices for {rt.model}")


def _server(latency: float, script: Path, record: Path | None) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "tests.fakes.messages_api", "--latency", str(latency)]
    argv += ["--script", str(script), *(["--record", str(record)] if record else [])]
    return subprocess.Popen(
        argv,
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


async def _replay(base_url: str, bodies: list[dict[str, object]], concurrency: int) -> tuple[float, float]:
    """(wall, CPU) seconds for a plain httpx async client to send ``bodies`` at ``concurrency``."""
    import httpx

    headers = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, limits=limits, timeout=60) as client:

        async def send(body: dict[str, object]) -> None:
            async with gate:
                resp = await client.post("/v1/messages", json=body)
                resp.raise_for_status()
                resp.json()

        t0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(send(b) for b in bodies))
        return time.perf_counter() - t0, time.process_time() - cpu0


async def _replay_aiohttp(
    base_url: str, bodies: list[dict[str, object]], concurrency: int
) -> tuple[float, float]:
    """The same with a plain aiohttp session (the SDK's transport here): the lighter client."""
    import aiohttp

    headers = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
    gate = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        base_url=base_url + "/", headers=headers, connector=connector
    ) as session:

        async def send(body: dict[str, object]) -> None:
            async with gate, session.post("v1/messages", json=body) as resp:
                resp.raise_for_status()
                await resp.json()

        t0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(send(b) for b in bodies))
        return time.perf_counter() - t0, time.process_time() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--http", choices=("auto", "aiohttp", "httpx"), default="auto")
    args = parser.parse_args()
    asyncio.run(run(args.probes, args.concurrency, args.latency, args.http))


if __name__ == "__main__":
    main()
