"""Probe throughput of the anthropic runtime against the local stand-in, as a ratio to a bare client.

1,000 probes on a 100-skill catalog, 50 ms of server latency per request, 32 probes in flight, every
probe through ``skillreach.study.runner.run_probes`` (fsynced JSONL sink included) and the anthropic
runtime over HTTP. The stand-in runs in its own process (its own interpreter lock) and computes cache
reads from the ``cache_control`` prefixes it has seen, as the real API does.

A first (warm-up) run records every request body the stand-in receives. Then, against a fresh
stand-in, ``--rounds`` rounds each time the probing and a bare ``aiohttp`` session sending the same
bodies (compact JSON bytes, as the runtime sends them, encoded before the clock starts) at the same
concurrency, in alternating order (the machine is shared: its load drifts), and one
bare ``httpx`` async client replay (far slower than aiohttp against this stand-in; the faster bare
client is the stricter reference). The goal line is the median of the rounds' probing wall / bare
wall (goal ≤ 1.10), printed by ``bench/_calibrate.py`` ``verdict``; the share of input tokens read from
cache (goal ≥ 80 %) and the client CPU a request follow.

``--paths`` prints the client CPU a request of each way to send one Messages request, in the same
process: the SDK's ``messages.create`` (model objects), ``messages.with_raw_response.create``, the
SDK's ``client.post`` of pre-serialised bytes on its aiohttp and httpx transports, the runtime's direct
path, and the bare clients.

``--bounds`` prints the client CPU a request of each layer of probing: the runtime alone, the runner
with an in-memory sink, with the probe log not fsynced, with the fsynced probe log (and its fsyncs).

``--cli`` measures through the command a user runs: ``skillreach run --runtime anthropic
--concurrency 32`` (batches of 100, no Prefect server) on the same 100 skills and 1,000 queries; its
probing wall is the probe log's span (first probe's start to last probe's end), compared with a bare
aiohttp replay of the same bodies before and after it (their mean); it also prints the command's CPU
while probing (``/proc``) and the spans of its batches. ``--spy FILE`` records the command under
``py-spy`` (raw format, every thread) to see where its time goes.

    .venv/bin/python bench/probe_throughput.py [--probes 1000] [--concurrency 32] [--latency 0.05]
        [--rounds 3] [--http auto|aiohttp|httpx] [--sdk-path] [--no-httpx] [--paths] [--bounds]
        [--cli [--spy FILE]] [--keep] [--uvloop]

``--uvloop`` runs the whole script on uvloop (not a dependency: ``pip install uvloop`` to try it).

``--http`` picks the SDK's HTTP transport (``auto``: aiohttp when ``anthropic[aiohttp]`` is installed);
``--sdk-path`` sends through the SDK's request builder instead of the runtime's direct path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import _calibrate as calibrate  # noqa: E402

from skillreach.models import Catalog, ProbeRecord, Query, Skill  # noqa: E402
from skillreach.runtimes._retry import RetryPolicy  # noqa: E402
from skillreach.runtimes.anthropic import AnthropicRuntime  # noqa: E402
from skillreach.settings import Settings  # noqa: E402
from skillreach.study.contract import ProbeOptions, Tracker  # noqa: E402
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


def queries_for(cat: Catalog, probes: int) -> list[Query]:
    return [
        Query(
            id=f"q{i:05d}",
            text=f"Request {i}: please help with {cat.skills[i % len(cat.skills)].name.rsplit('-', 1)[0]}",
            expected_skill=cat.skills[i % len(cat.skills)].name,
        )
        for i in range(probes)
    ]


async def _probe_once(
    base_url: str, cat: Catalog, queries: list[Query], concurrency: int, http: str, direct: bool, tmp: Path
) -> tuple[float, float, list[ProbeRecord], AnthropicRuntime]:
    """(wall, client CPU, records, runtime) of one probing run through ``run_probes``."""
    rt = AnthropicRuntime(
        "claude-sonnet-4-6",
        base_url=base_url,
        api_key="sk-bench",
        settings=Settings(),
        concurrency=concurrency,
        retry_policy=RetryPolicy(max_retries=3, base_s=0.05),
        http=http,
        direct=direct,
    )
    log = tmp / f"probes-{time.monotonic_ns()}.jsonl"
    sink = JsonlSink(log)
    opts = ProbeOptions(model="claude-sonnet-4-6")
    t0, cpu0 = time.perf_counter(), time.process_time()
    records = await run_probes(
        rt,
        cat,
        [(q, 1) for q in queries],
        options=opts,
        sink=sink,
        concurrency=concurrency,
        fingerprint="bench",
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    sink.close()
    await rt.aclose()
    assert len(read_probes(log)) == len(records)
    return wall, cpu, records, rt


async def run(args: argparse.Namespace) -> None:
    probes, concurrency, latency = args.probes, args.concurrency, args.latency
    cat = catalog()
    queries = queries_for(cat, probes)
    print(
        f"{probes} probes, {len(cat.skills)} skills, {latency * 1000:.0f} ms a request, "
        f"{concurrency} in flight"
    )
    keep = contextlib.nullcontext(tempfile.mkdtemp(prefix="probe-throughput-")) if args.keep else None
    with keep or tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        script = tmp / "script.json"
        script.write_text(json.dumps({q.text: [q.expected_skill] for q in queries}))
        recorded = tmp / "requests.jsonl"
        with _stand_in(latency, script, recorded) as url:
            warm, _, records, rt = await _probe_once(
                url, cat, queries, concurrency, args.http, not args.sdk_path, tmp
            )
        bodies = [json.loads(line) for line in recorded.read_text(encoding="utf-8").splitlines()]
        print(
            f"request path           {rt.request_path}; warm-up run {warm:.2f} s "
            f"(recorded {len(bodies)} bodies)"
        )
        rounds: list[tuple[float, float, float, float]] = []
        with _stand_in(latency, script, None) as url:
            for i in range(args.rounds):

                async def probing() -> tuple[float, float]:
                    wall, cpu, _, _ = await _probe_once(
                        url, cat, queries, concurrency, args.http, not args.sdk_path, tmp
                    )
                    return wall, cpu

                if i % 2 == 0:
                    p_wall, p_cpu = await probing()
                    b_wall, b_cpu = await _replay_aiohttp(url, bodies, concurrency)
                else:
                    b_wall, b_cpu = await _replay_aiohttp(url, bodies, concurrency)
                    p_wall, p_cpu = await probing()
                rounds.append((p_wall, p_cpu, b_wall, b_cpu))
                print(
                    f"round {i + 1}                probing {p_wall:.2f} s "
                    f"({1000 * p_cpu / len(bodies):.2f} ms CPU a request), "
                    f"bare aiohttp {b_wall:.2f} s ({1000 * b_cpu / len(bodies):.2f} ms): "
                    f"{p_wall / b_wall:.2f}"
                )
            bare_httpx = None if args.no_httpx else await _replay(url, bodies, concurrency)
            if args.paths:
                await _paths(url, cat, concurrency)
            if args.bounds:
                await _bounds(url, cat, queries, concurrency, tmp)
        if args.cli:
            await _through_cli(args, cat, queries, tmp)
    ratios = sorted(p / b for p, _, b, _ in rounds)
    median = ratios[len(ratios) // 2] if len(ratios) % 2 else sum(ratios[len(ratios) // 2 - 1 :][:2]) / 2
    p_wall = sum(r[0] for r in rounds) / len(rounds)
    b_wall = sum(r[2] for r in rounds) / len(rounds)
    p_cpu = sum(r[1] for r in rounds) / len(rounds) / len(bodies)
    b_cpu = sum(r[3] for r in rounds) / len(rounds) / len(bodies)
    errors = sum(1 for r in records if r.error)
    expected = {q.id: q.expected_skill for q in queries}
    hits = sum(1 for r in records if r.invoked == (expected[r.query_id],))
    requests = sum(r.turns for r in records)
    read = sum(r.usage.cache_read_input_tokens for r in records)
    total_in = sum(r.usage.total_input for r in records)
    ideal = requests * latency / concurrency
    durations = sorted(r.duration_ms for r in records)
    print(
        f"probes                 {len(records)} ({errors} errors, {hits} hit the target), {requests} requests"
    )
    print(
        f"probing wall           {p_wall:.2f} s (mean of {len(rounds)}; "
        f"ideal {ideal:.2f} s: {p_wall / ideal:.2f}×)"
    )
    print(
        f"bare aiohttp wall      {b_wall:.2f} s "
        f"(mean; the same {len(bodies)} bodies, {concurrency} in flight)"
    )
    if bare_httpx is not None:
        print(
            f"bare httpx wall        {bare_httpx[0]:.2f} s "
            f"(once; client CPU {1000 * bare_httpx[1] / len(bodies):.2f} ms a request): "
            f"probing / bare httpx {p_wall / bare_httpx[0]:.2f}"
        )
        if bare_httpx[0] < b_wall:
            median = max(median, p_wall / bare_httpx[0])  # the faster bare client is the reference
    print(f"client CPU a request   probing {1000 * p_cpu:.2f} ms, bare aiohttp {1000 * b_cpu:.2f} ms")
    print(f"round ratios           {', '.join(f'{r:.2f}' for r in ratios)}")
    print(
        f"probe duration         p50 {durations[len(durations) // 2]} ms, "
        f"p90 {durations[9 * len(durations) // 10]} ms"
    )
    print(f"load                   {calibrate.load()}")
    print(
        f"input tokens           {total_in:,} "
        f"({read:,} read from cache: {100 * read / total_in:.1f} %, goal ≥ 80 %)"
    )
    print(
        f"estimated cost         ${sum(r.cost_usd or 0.0 for r in records):.2f} at list prices for {rt.model}"
    )
    print(calibrate.verdict("probing wall / bare-client wall, run_probes (median of rounds)", median, 1.1))


@contextlib.contextmanager
def _stand_in(latency: float, script: Path, record: Path | None) -> Iterator[str]:
    """The stand-in in its own process; its base URL. ``record``: the bodies it received, on exit."""
    server = _server(latency, script, record)
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=60)


async def _paths(url: str, cat: Catalog, concurrency: int, n: int = 500) -> None:
    """Client CPU a request of each way to send the same Messages request (same process, 2 rounds)."""
    import aiohttp
    import anthropic
    import httpx

    rt = AnthropicRuntime(
        "claude-sonnet-4-6", base_url=url, api_key="sk-bench", settings=Settings(), concurrency=concurrency
    )
    message = [{"role": "user", "content": [{"type": "text", "text": "please help with x"}]}]
    params, prefix = rt._params("claude-sonnet-4-6", cat, message, False)
    body = (
        prefix + b',"model":"claude-sonnet-4-6","max_tokens":1024,"messages":' + orjson.dumps(message) + b"}"
    )
    kw: dict[str, Any] = {"base_url": url, "api_key": "sk-bench", "max_retries": 0}
    sdk = anthropic.AsyncAnthropic(**kw, http_client=anthropic.DefaultAioHttpClient())
    sdk_httpx = anthropic.AsyncAnthropic(**kw)
    bare_headers = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    hx = httpx.AsyncClient(limits=limits, timeout=60)
    post_opts: Any = {"headers": {"content-type": "application/json"}}
    direct = rt._direct
    assert direct is not None, "the direct path needs anthropic[aiohttp]"

    async def create() -> object:
        return (await sdk.messages.create(**params)).usage

    async def raw_response() -> object:
        return orjson.loads((await sdk.messages.with_raw_response.create(**params)).http_response.content)

    async def post_aiohttp() -> object:
        return orjson.loads(await sdk.post("/v1/messages", content=body, cast_to=bytes, options=post_opts))

    async def post_httpx() -> object:
        return orjson.loads(
            await sdk_httpx.post("/v1/messages", content=body, cast_to=bytes, options=post_opts)
        )

    async def direct_post() -> object:
        return orjson.loads(await direct.post(body))

    async def bare_aiohttp() -> object:
        async with session.post(url + "/v1/messages", json=params, headers=bare_headers) as resp:
            return await resp.json()

    async def bare_httpx() -> object:
        return (await hx.post(url + "/v1/messages", json=params, headers=bare_headers)).json()

    paths = {
        "SDK messages.create (model objects)": create,
        "SDK messages.with_raw_response.create": raw_response,
        "SDK client.post of bytes, aiohttp": post_aiohttp,
        "SDK client.post of bytes, httpx": post_httpx,
        "runtime's direct path (DirectPost)": direct_post,
        "bare aiohttp (json=)": bare_aiohttp,
        "bare httpx (json=)": bare_httpx,
    }
    cpu: dict[str, list[float]] = {k: [] for k in paths}
    for _ in range(2):
        for name, fn in paths.items():
            gate = asyncio.Semaphore(concurrency)

            async def one(fn: Any = fn, gate: asyncio.Semaphore = gate) -> object:
                async with gate:
                    return await fn()

            await asyncio.gather(*(one() for _ in range(2 * concurrency)))  # connections open, code warm
            cpu0 = time.process_time()
            await asyncio.gather(*(one() for _ in range(n)))
            cpu[name].append(1000 * (time.process_time() - cpu0) / n)
    print(f"client CPU a request, {n} requests × 2 rounds, {concurrency} in flight (ms; same process):")
    for name, values in cpu.items():
        print(f"  {name:40s} {min(values):.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
    await session.close()
    await hx.aclose()
    await sdk.close()
    await sdk_httpx.close()
    await rt.aclose()


class _MemorySink:
    """Records kept in memory, written on the event loop (no disk, no thread)."""

    def __init__(self) -> None:
        self.records: list[ProbeRecord] = []

    def write(self, record: ProbeRecord) -> None:
        self.records.append(record)


async def _bounds(url: str, cat: Catalog, queries: list[Query], concurrency: int, tmp: Path) -> None:
    """Client CPU a request of the layers of probing (same process, 2 rounds): the runtime alone
    (``select`` under a semaphore), ``run_probes`` with an in-memory sink, with the probe log not
    fsynced (the group commit's thread hop and the JSON lines), and with the fsynced probe log (one
    fsync a group)."""
    opts = ProbeOptions(model="claude-sonnet-4-6")
    pairs = [(q, 1) for q in queries]

    def make() -> AnthropicRuntime:
        return AnthropicRuntime(
            "claude-sonnet-4-6",
            base_url=url,
            api_key="sk-bench",
            settings=Settings(),
            concurrency=concurrency,
        )

    async def alone(rt: AnthropicRuntime) -> None:
        gate = asyncio.Semaphore(concurrency)

        async def one(q: Query) -> object:
            async with gate:
                return await rt.select(q, cat, Tracker.for_query(q, opts, 1))

        await asyncio.gather(*(one(q) for q in queries))

    async def memory(rt: AnthropicRuntime) -> None:
        sink = _MemorySink()
        await run_probes(rt, cat, pairs, options=opts, sink=sink, concurrency=concurrency, fingerprint="b")

    fsyncs: list[int] = []

    async def fsynced(rt: AnthropicRuntime) -> None:
        sink = JsonlSink(tmp / f"bounds-{time.monotonic_ns()}.jsonl")
        await run_probes(rt, cat, pairs, options=opts, sink=sink, concurrency=concurrency, fingerprint="b")
        sink.close()
        fsyncs.append(sink.fsyncs)

    async def unsynced(rt: AnthropicRuntime) -> None:
        sink = JsonlSink(tmp / f"bounds-{time.monotonic_ns()}.jsonl", fsync=False)
        await run_probes(rt, cat, pairs, options=opts, sink=sink, concurrency=concurrency, fingerprint="b")
        sink.close()

    layers = {
        "the runtime alone (select, semaphore)": alone,
        "run_probes, in-memory sink": memory,
        "run_probes, JsonlSink without fsync": unsynced,
        "run_probes, fsynced JsonlSink": fsynced,
    }
    cpu: dict[str, list[float]] = {k: [] for k in layers}
    wall: dict[str, list[float]] = {k: [] for k in layers}
    for _ in range(2):
        for name, fn in layers.items():
            rt = make()
            cpu0, wall0 = time.process_time(), time.perf_counter()
            await fn(rt)
            cpu[name].append(1000 * (time.process_time() - cpu0) / len(queries))
            wall[name].append(time.perf_counter() - wall0)
            await rt.aclose()
    print(
        f"client CPU a request by layer, {len(queries)} probes × 2 rounds "
        "(ms; same process, threads included), and the wall:"
    )
    for name, values in cpu.items():
        walls = ", ".join(f"{w:.2f}" for w in wall[name])
        print(f"  {name:40s} {min(values):.2f}  ({', '.join(f'{v:.2f}' for v in values)}); wall {walls} s")
    label = "fsyncs of the probe log"
    print(f"  {label:40s} {', '.join(map(str, fsyncs))} for {len(queries)} records")


def _write_study(root: Path, cat: Catalog, queries: list[Query]) -> tuple[Path, Path]:
    skills = root / "skills"
    for s in cat.skills:
        (skills / s.name).mkdir(parents=True, exist_ok=True)
        text = f"---\nname: {s.name}\ndescription: {json.dumps(s.description)}\n---\n{s.body}\n"
        (skills / s.name / "SKILL.md").write_text(text, encoding="utf-8")
    rows = [
        {"id": q.id, "text": q.text, "expected_skill": q.expected_skill, "kind": "implicit"} for q in queries
    ]
    path = root / "queries.json"
    path.write_text(json.dumps({"catalog_id": cat.id, "queries": rows}), encoding="utf-8")
    return skills, path


async def _through_cli(args: argparse.Namespace, cat: Catalog, queries: list[Query], tmp: Path) -> None:
    """``skillreach run`` against the stand-in; its probing wall vs bare aiohttp replays around it."""
    root = tmp / "cli"
    skills, qpath = _write_study(root, cat, queries)
    script = {q.text: [q.expected_skill] for q in queries}
    script.update({f"Use the {s.name} skill": [s.name] for s in cat.skills})  # the canaries
    (root / "script.json").write_text(json.dumps(script))
    recorded = root / "requests.jsonl"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "ANTHROPIC_", "PREFECT_API"))
    }
    with _stand_in(args.latency, root / "script.json", recorded) as url:
        env.update(
            ANTHROPIC_API_KEY="sk-bench",
            ANTHROPIC_BASE_URL=url,
            SKILLREACH_HOME=str(root / "home"),
            SKILLREACH_BATCH_SIZE="100",
        )
        argv = [str(Path(sys.executable).parent / "skillreach"), "run", "--skills", str(skills), "--queries"]
        argv += [str(qpath), "--runtime", "anthropic", "--model", "claude-sonnet-4-6", "--concurrency"]
        argv += [str(args.concurrency), "--out", str(root / "out")]
        if args.sdk_path:  # the SDK's request builder through the command too
            (root / "study.toml").write_text("[runtime_options]\ndirect = false\n", encoding="utf-8")
            argv += ["--config", str(root / "study.toml")]
        if args.spy:  # the command under py-spy (on-CPU samples of every thread)
            spy = [str(Path(sys.executable).parent / "py-spy"), "record", "--threads", "-r", "250"]
            argv = [*spy, "--format", "raw", "-o", args.spy, "--", *argv]
        t0 = time.perf_counter()
        if args.keep:
            print(f"study folder           {root} (kept)")
        pipe = subprocess.PIPE
        child = subprocess.Popen(argv, cwd=root, env=env, stdout=pipe, stderr=pipe, text=True)
        cpu_samples: list[tuple[datetime, float]] = []  # (when, the command's CPU seconds so far)
        sampler = threading.Thread(target=_sample_cpu, args=(child, cpu_samples), daemon=True)
        sampler.start()
        _, stderr = child.communicate()
        sampler.join()
        command = time.perf_counter() - t0
    if child.returncode != 0:
        raise SystemExit(f"skillreach run failed ({child.returncode}): {stderr[-2000:]}")
    records = read_probes(root / "out" / "probes.jsonl")
    ends = [datetime.fromisoformat(r.finished_at or "") for r in records]
    starts = [e - timedelta(milliseconds=r.duration_ms) for e, r in zip(ends, records, strict=True)]
    probing = (max(ends) - min(starts)).total_seconds()
    texts = {q.text for q in queries}
    bodies = [json.loads(line) for line in recorded.read_text(encoding="utf-8").splitlines()]
    bodies = [b for b in bodies if _first_text(b) in texts]  # the study's requests, not the canaries'
    with _stand_in(args.latency, root / "script.json", None) as url:
        before, _ = await _replay_aiohttp(url, bodies, args.concurrency)
        after, _ = await _replay_aiohttp(url, bodies, args.concurrency)
    bare = (before + after) / 2
    errors = sum(1 for r in records if r.error)
    # where the span goes: each batch's own span, and the gaps between batches (set-up of the next)
    by_batch: dict[int, list[tuple[datetime, datetime]]] = {}
    order = {q.id: i for i, q in enumerate(queries)}
    for r, start, end in zip(records, starts, ends, strict=True):
        by_batch.setdefault(order[r.query_id] // 100, []).append((start, end))
    spans = [(min(s for s, _ in v), max(e for _, e in v)) for _, v in sorted(by_batch.items())]
    inside = sum((e - s).total_seconds() for s, e in spans)
    gaps = [(spans[i + 1][0] - spans[i][1]).total_seconds() for i in range(len(spans) - 1)]
    print(
        f"batches                {len(spans)}: {inside:.2f} s inside batches "
        f"({inside / len(spans):.2f} s each), {sum(gaps):.2f} s between them (< 0: overlapping) "
        f"({', '.join(f'{g:.2f}' for g in gaps)})"
    )
    cpu = _cpu_between(cpu_samples, min(starts), max(ends))
    print(f"skillreach run         {len(records)} probes ({errors} errors), command {command:.1f} s, ")
    if cpu is not None and not args.spy:
        print(f"                       client CPU while probing {1000 * cpu / len(records):.2f} ms a probe "
              "(/proc, every 50 ms)")
    print(
        f"                       probing (the probe log's span) {probing:.2f} s; bare aiohttp {before:.2f} / "
        f"{after:.2f} s for its {len(bodies)} bodies"
    )
    print(calibrate.verdict("probing wall / bare-client wall, skillreach run", probing / bare, 1.1))


def _sample_cpu(child: subprocess.Popen[str], out: list[tuple[datetime, float]]) -> None:
    """The command's CPU time (user + system, from ``/proc/<pid>/stat``) every 50 ms, with the time."""
    tick = os.sysconf("SC_CLK_TCK")
    path = Path(f"/proc/{child.pid}/stat")
    while child.poll() is None:
        try:
            fields = path.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            break
        out.append((datetime.now().astimezone(), (int(fields[11]) + int(fields[12])) / tick))
        time.sleep(0.05)


def _cpu_between(samples: list[tuple[datetime, float]], start: datetime, end: datetime) -> float | None:
    """CPU seconds the command spent between ``start`` and ``end`` (the samples nearest inside)."""
    inside = [(t, c) for t, c in samples if start <= t <= end]
    if len(inside) < 2:
        return None
    (t0, c0), (t1, c1) = inside[0], inside[-1]
    return (c1 - c0) * (end - start).total_seconds() / (t1 - t0).total_seconds()


def _first_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    return str(content if isinstance(content, str) else content[0].get("text", ""))


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


BARE_HEADERS = {
    "x-api-key": "sk-bench",
    "anthropic-version": "2023-06-01",
    "content-type": "application/json",
}


async def _replay(base_url: str, bodies: list[dict[str, Any]], concurrency: int) -> tuple[float, float]:
    """(wall, CPU) seconds for a plain httpx async client to send ``bodies`` at ``concurrency``: each
    body compact JSON bytes (as the runtime sends them), encoded before the clock starts; the response
    decoded."""
    import httpx

    data = [orjson.dumps(b) for b in bodies]
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base_url, headers=BARE_HEADERS, limits=limits, timeout=60
    ) as client:

        async def send(body: bytes) -> None:
            async with gate:
                resp = await client.post("/v1/messages", content=body)
                resp.raise_for_status()
                orjson.loads(resp.content)

        t0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(send(b) for b in data))
        return time.perf_counter() - t0, time.process_time() - cpu0


async def _replay_aiohttp(
    base_url: str, bodies: list[dict[str, Any]], concurrency: int
) -> tuple[float, float]:
    """The same with a plain aiohttp session: the lighter client, the stricter reference."""
    import aiohttp

    data = [orjson.dumps(b) for b in bodies]
    gate = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        base_url=base_url + "/", headers=BARE_HEADERS, connector=connector
    ) as session:

        async def send(body: bytes) -> None:
            async with gate, session.post("v1/messages", data=body) as resp:
                resp.raise_for_status()
                orjson.loads(await resp.read())

        t0, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(send(b) for b in data))
        return time.perf_counter() - t0, time.process_time() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--http", choices=("auto", "aiohttp", "httpx"), default="auto")
    parser.add_argument(
        "--sdk-path", action="store_true", help="the SDK's request builder, not the direct path"
    )
    parser.add_argument("--no-httpx", action="store_true", help="skip the (slow) bare httpx replay")
    parser.add_argument("--paths", action="store_true", help="client CPU a request of each request path")
    parser.add_argument("--bounds", action="store_true", help="client CPU a request by layer of probing")
    parser.add_argument("--cli", action="store_true", help="also measure through skillreach run")
    parser.add_argument("--spy", metavar="FILE", help="with --cli: py-spy record the command to FILE (raw)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (the --cli study)")
    parser.add_argument("--uvloop", action="store_true", help="run everything on uvloop (if installed)")
    args = parser.parse_args()
    if args.uvloop:  # probing and the bare clients alike: the ratio compares like with like
        import uvloop

        print("event loop             uvloop", uvloop.__version__)
        uvloop.run(run(args))
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
