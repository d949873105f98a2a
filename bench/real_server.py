"""Probes per second through ``skillreach run`` against a real model server, beside a bare client.

The server is llama.cpp's ``llama-server`` (built by ``.ci/llama.sh``) serving Gemma 3 270M with a chat
template that supports tools, started as the ``realserver`` tests start it (``--jinja -c 16384
--parallel 2 -t 1 --temp 0``). The study: two skills, ``--probes`` queries, ``openai-compatible`` with
forced choice, as the tests (``tool_choice = "required"``, ``skill_enum = true``, ``routing_max_tokens
= 64``: every probe is one tool call naming a resident skill), ``temperature = 0``, ``--max-turns 1``
(one request a probe), ``--concurrency 2`` (the server's two slots).

A first run of the command goes through a recording proxy, which keeps every request body; the probes'
bodies (not the snapshot's or the canary's) are the bare client's workload: one ``aiohttp`` session
posting the same bytes at the same concurrency. Then, alternately, ``--rounds`` times: the bare replay,
the command (its probing wall is the probe log's span: the first probe's start to the last probe's
end; the process start, the snapshot request and the canary are outside it), and a last bare replay.
The ratio is each command span over the mean of the bare walls around it; the goal is ≤ 1.10, as for
the stand-in (``bench/probe_throughput.py``). The server's prompt cache is warm for every measured run.

    .venv/bin/python bench/real_server.py [--probes 8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from skillreach.study.probe_log import read_probes
from tests.helpers.llama import ALIAS, SKILLREACH, LlamaServer, missing, write_study

TEXTS = (
    "I need to merge two PDF forms into one document, number {i}.",
    "Production broke after deploy {i}; take us back to the previous release.",
)


class Recorder:
    """A reverse proxy on 127.0.0.1 that forwards to ``upstream`` and keeps every POST body."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.bodies: list[bytes] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        threading.Thread(target=self._serve, daemon=True).start()
        self._ready.wait(10)

    def _serve(self) -> None:
        from aiohttp import ClientSession, web

        async def forward(request: web.Request) -> web.Response:
            body = await request.read()
            if request.method == "POST":
                self.bodies.append(body)
            headers = {"content-type": request.headers.get("content-type", "application/json")}
            async with (
                ClientSession() as session,
                session.request(
                    request.method, self.upstream + request.path_qs, data=body or None, headers=headers
                ) as resp,
            ):
                data = await resp.read()
                return web.Response(status=resp.status, body=data, content_type="application/json")

        async def main() -> None:
            app = web.Application(client_max_size=64 * 2**20)
            app.router.add_route("*", "/{tail:.*}", forward)
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._ready.set()
            await asyncio.Event().wait()

        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(main())


def study(root: Path, probes: int) -> set[str]:
    """The study under ``root``; the queries' texts."""
    queries = [
        {
            "id": f"q{i:03d}",
            "text": TEXTS[i % 2].format(i=i),
            "expected_skill": ("pdf-forms", "git-rollback")[i % 2],
            "kind": "implicit",
        }
        for i in range(probes)
    ]
    write_study(
        root,
        queries,
        "max_retries = 0\ntimeout_s = 300\ncanary_timeout_s = 300\nrouting_max_tokens = 64\n",
        'tool_choice = "required"\nskill_enum = true\ntemperature = 0.0',
    )
    return {str(q["text"]) for q in queries}


def is_probe(body: bytes, texts: set[str]) -> bool:
    """A probe's request (not the snapshot's nor a canary's): tools offered, a study query asked."""
    data = json.loads(body)
    users = [m.get("content") for m in data.get("messages", []) if m.get("role") == "user"]
    return bool(data.get("tools")) and bool(users) and users[0] in texts


def run_command(root: Path, base_url: str, out: str) -> tuple[float, int]:
    """The command's probing span (s) and its probe count."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "SKILLREACH_", "OPENAI_"))}
    env.update(OPENAI_BASE_URL=f"{base_url}/v1", COLUMNS="200")
    cmd = [
        str(SKILLREACH),
        "run",
        "--config",
        "study.toml",
        "--skills",
        "skills",
        "--queries",
        "queries.json",
        "--runtime",
        "openai-compatible",
        "--model",
        ALIAS,
        "--max-turns",
        "1",
        "--concurrency",
        "2",
        "--out",
        out,
    ]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"skillreach run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    records = read_probes(root / out / "probes.jsonl")
    errors = [r.error for r in records if r.error]
    if errors:
        raise SystemExit(f"{len(errors)} probes errored: {errors[0]}")
    ends = [datetime.fromisoformat(r.finished_at) for r in records if r.finished_at]
    starts = [e - timedelta(milliseconds=r.duration_ms or 0) for e, r in zip(ends, records, strict=True)]
    return (max(ends) - min(starts)).total_seconds(), len(records)


async def replay(base_url: str, bodies: list[bytes], concurrency: int) -> float:
    """Wall (s) of a bare aiohttp session posting ``bodies`` with ``concurrency`` in flight."""
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    url = f"{base_url}/v1/chat/completions"
    headers = {"content-type": "application/json", "authorization": "Bearer not-needed"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def one(body: bytes) -> None:
            async with sem, session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                if resp.status != 200:
                    raise SystemExit(f"bare client: HTTP {resp.status}")

        started = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    why = missing()
    if why is not None:
        print(f"skipped: {why}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        texts = study(root, args.probes)
        with LlamaServer(root / "server.log") as server:
            print(
                f"llama-server up in {server.started_s:.1f}s; "
                f"{args.probes} probes, concurrency 2, forced choice"
            )
            recorder = Recorder(server.url)
            warm_span, _ = run_command(root, f"http://127.0.0.1:{recorder.port}", "out-warm")
            probe_bodies = [b for b in recorder.bodies if is_probe(b, texts)]
            if len(probe_bodies) != args.probes:
                raise SystemExit(f"recorded {len(probe_bodies)} probe bodies, expected {args.probes}")
            print(f"warm-up through the recording proxy: {warm_span:.2f}s span")
            bare = [asyncio.run(replay(server.url, probe_bodies, 2))]
            ratios: list[float] = []
            for i in range(args.rounds):
                span, n = run_command(root, server.url, f"out-{i}")
                bare.append(asyncio.run(replay(server.url, probe_bodies, 2)))
                ref = (bare[-2] + bare[-1]) / 2
                ratios.append(span / ref)
                print(
                    f"round {i + 1}: skillreach run {n / span:.3f} probes/s ({span:.2f}s), "
                    f"bare client {args.probes / ref:.3f} probes/s ({bare[-2]:.2f}s, {bare[-1]:.2f}s): "
                    f"ratio {span / ref:.3f}"
                )
            verdict = "met" if statistics.median(ratios) <= 1.10 else "NOT met"
            print(f"median ratio {statistics.median(ratios):.3f} (goal ≤ 1.10: {verdict})")
            out = {"probes": args.probes, "ratios": ratios, "bare_walls_s": bare}
            print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
