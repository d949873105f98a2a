"""Wall time of the same study with 1, 2 and 3 task workers (``skillreach worker``), and each ratio to
the ideal; the orchestration overhead per batch.

One real Prefect server (127.0.0.1), a PostgreSQL store (``--pg-url`` or ``SKILLREACH_TEST_PG_URL``,
reset before each run: it is dropped and created again), the Messages-API stand-in answering in
``--latency`` seconds, per-worker concurrency ``--concurrency``. Each row is a fresh study (a new
``--out``) run by ``skillreach run`` (its whole wall printed); the probing wall is read from the
stand-in's request log, from the answer to the flow's last canary (the batches are submitted right after
it) to the answer to the last probe, and compared with ideal = probes × latency / (workers ×
concurrency). (Subtracting a second, resumed run's wall instead varied by ±5 s with the machine's load.)

    .venv/bin/python bench/scale_out.py --probes 2000

Goal (issue 15): 3 workers ≤ 0.40 × 1 worker, overhead per batch ≤ 0.5 s. The last line reads
``scale-out: 3 workers / 1 worker = R``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from skillreach.study.plan import finer_tail  # noqa: E402
from tests.helpers.cluster import Cluster, reset_pg, stand_in, study_world  # noqa: E402


def _run(cluster: Cluster, skills: Path, queries: Path, out: Path, attempts: int, concurrency: int
         ) -> tuple[float, float]:
    """The command's start and end (``time.time()``, the stand-in's clock)."""
    start = time.time()
    proc = cluster.run_study(skills, queries, out, attempts=attempts, concurrency=concurrency)
    _, err = proc.communicate(timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"skillreach run failed ({proc.returncode}): {err[-2000:]}")
    return start, time.time()


def _probing_span(api: object, capacity: int) -> dict[str, float]:
    """The probing phase from the stand-in's request log: from the answer to the flow's last canary
    (the batches are submitted right after it) to the answer to the last probe; and where its time
    went: ``start`` (the last canary's answer to the first probe's arrival), ``tail`` (from when the
    probes in flight fell below ``capacity`` for good to the last answer) and the stand-in's mean
    answer time (``service``, nominally the latency)."""
    from tests.fakes.messages_api import query_text

    def canary(call: object) -> bool:
        body = call.body  # type: ignore[attr-defined]
        return isinstance(body, dict) and query_text(body).startswith("Use the ")

    calls = api.message_requests  # type: ignore[attr-defined]
    probes = [c for c in calls if not canary(c) and c.answered]
    began = max(c.answered for c in calls if canary(c))
    ended = max(c.answered for c in probes)
    edges = sorted([(c.at, 1) for c in probes] + [(c.answered, -1) for c in probes])
    inflight, full_until = 0, began
    for at, step in edges:
        inflight += step
        if inflight >= capacity:
            full_until = at
    return {
        "first_canary": min(c.at for c in calls if canary(c)),
        "began": began,
        "ended": ended,
        "span": ended - began,
        "start": min(c.at for c in probes) - began,
        "tail": ended - full_until,
        "service": sum(c.answered - c.at for c in probes) / len(probes),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=2000)
    ap.add_argument("--attempts", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=50)
    ap.add_argument("--pg-url", default=os.environ.get("SKILLREACH_TEST_PG_URL"))
    args = ap.parse_args()
    if not args.pg_url:
        raise SystemExit("pass --pg-url postgresql+psycopg://… (or set SKILLREACH_TEST_PG_URL); it is reset")
    root = Path(tempfile.mkdtemp(prefix="scale-out-"))
    queries_n = args.probes // args.attempts
    probes = queries_n * args.attempts
    planned = [[("q", 1)] * min(args.batch_size, probes - i) for i in range(0, probes, args.batch_size)]
    skills, queries = study_world(root, queries_n)
    walls: dict[int, float] = {}
    overheads: dict[int, float] = {}
    whole: dict[int, float] = {}
    try:
        with stand_in(args.latency) as api, Cluster(root, args.pg_url, api.base_url,
                                                    batch_size=args.batch_size) as cluster:
            for workers in (1, 2, 3):
                reset_pg(args.pg_url)
                cluster.start_workers(workers - len(cluster.workers))
                out = root / f"out-{workers}"
                api.calls.clear()
                t0, t1 = _run(cluster, skills, queries, out, args.attempts, args.concurrency)
                wall = t1 - t0
                capacity = workers * args.concurrency
                span = _probing_span(api, capacity)
                whole[workers] = wall
                walls[workers] = span["span"]
                fixed = wall - walls[workers]
                ideal = probes * args.latency / capacity
                batches = len(finer_tail(planned, workers))  # what the flow submits (its last ones finer)
                overhead = overheads[workers] = max(0.0, walls[workers] - ideal) * workers / batches
                cycle = (walls[workers] - span["start"] - span["tail"]) * capacity / probes
                print(f"{workers} worker(s): {wall:.1f} s wall, {fixed:.1f} s outside probing, "
                      f"probing {walls[workers]:.1f} s vs ideal {ideal:.1f} s = "
                      f"{walls[workers] / ideal:.2f}× ideal; overhead "
                      f"{overhead:.2f} s per batch ({batches} batches of ≤ {args.batch_size})", flush=True)
                print(f"  where: start {span['start']:.1f} s, tail {span['tail']:.1f} s, in between a probe "
                      f"every {cycle * 1000:.0f} ms a slot; the stand-in answered in "
                      f"{span['service'] * 1000:.0f} ms on average ({args.latency * 1000:.0f} nominal)",
                      flush=True)
                print(f"  outside probing: start-up to the first canary {span['first_canary'] - t0:.1f} s, "
                      f"the canaries {span['began'] - span['first_canary']:.1f} s, from the last answer to "
                      f"the command's exit {t1 - span['ended']:.1f} s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio = walls[3] / walls[1]
    worst = max(overheads.values())
    print(f"goal: orchestration overhead ≤ 0.5 s per batch: {'met' if worst <= 0.5 else 'NOT met'} "
          f"(worst row {worst:.2f} s)")
    print(f"the whole command's wall, 3 workers / 1 worker: {whole[3] / whole[1]:.2f} (the part outside "
          "probing does not scale out)")
    print(f"goal: 3 workers ≤ 0.40 × 1 worker: {'met' if ratio <= 0.40 else 'NOT met'}")
    print(f"scale-out: 3 workers / 1 worker = {ratio:.2f}")


if __name__ == "__main__":
    main()
