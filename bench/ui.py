"""``skillreach ui`` on a big store: 10,000 runs and 1,000,000 probes; each page timed through the real
command (HTTP on 127.0.0.1), cold (the first request) and warm (the median of the next ones).

The store is generated in a folder of its own: first a few real runs of the bundled example (their folders
are what the generated runs point at: the report, the probes' trajectories, compare and the agents'
matrix read real artifacts), then, in bulk, ``--runs`` studies over two years (nightlies, on-demand
studies, re-baselinings; a model snapshot change every 90 days), ``--probes`` probe records spread over
them, a history point per skill and study (marked read, as the dashboard's indexer leaves them),
an alert for one study in twenty, and ``--events`` live events over the last six weeks.

Goal: every page under 1 s. Timed once the dashboard says it is ready (``/healthz``: its start-up reads
done: the live events, the skills table once); "cold" is the first request of a page (its run folder and
artifacts read for the first time), "warm" the median of the next ones. The live events are read again
every five minutes by a thread of the dashboard, never on a page's path: the bench prints how long one
such read takes (the pages share the interpreter with it meanwhile).

    .venv/bin/python bench/ui.py [--runs 10000] [--probes 1000000] [--events 100000] [--url DB] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert

SKILLREACH = Path(sys.executable).with_name("skillreach")
GOAL_S = 1.0


def sr(*args: str, cwd: Path, env: dict[str, str]) -> None:
    out = subprocess.run(
        [str(SKILLREACH), *args], cwd=cwd, capture_output=True, text=True, env=env, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"skillreach {' '.join(args)}: {out.stderr.strip()[-500:]}")


def real_runs(folder: Path, env: dict[str, str]) -> dict[str, Path]:
    """The bundled example studied three ways, and across two runtimes (the matrix)."""
    sr("run", "--out", "runs/keyword", cwd=folder, env=env)
    sr("run", "--runtime", "retriever", "--out", "runs/retriever", cwd=folder, env=env)
    sr("run", "--runtime", "keyword,retriever", "--out", "runs/agents", cwd=folder, env=env)
    return {"keyword": folder / "runs" / "keyword", "retriever": folder / "runs" / "retriever"}


def generate(
    store: Any, folders: dict[str, Path], *, runs: int, probes: int, events: int, seed: int
) -> dict[str, Any]:
    from skillreach.live.events import EventKind
    from skillreach.store.dashboard import IndexedStudyRow, SkillPointRow
    from skillreach.store.database import AlertRow, ArtifactRow, ProbeRow, StudyRow
    from skillreach.store.live import LiveEventRow

    rng = random.Random(seed)
    art = json.loads((folders["keyword"] / "artifact.json").read_text(encoding="utf-8"))
    body = {k: v for k, v in art.items() if k != "outcomes"}
    log = [
        json.loads(line) for line in (folders["keyword"] / "probes.jsonl").read_text().splitlines() if line
    ]
    skills = sorted(art["catalog"]["skills"])
    queries = sorted({r["query_id"] for r in log})
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(days=730)
    per = probes // runs
    kinds = ["compliance"] * 6 + ["study"] * 3 + ["rebaseline"]
    t0 = time.perf_counter()
    study_rows, probe_rows, point_rows, marks, alert_rows, art_rows = [], [], [], [], [], []
    ids = []

    def flush(force: bool = False) -> None:
        with store.engine.begin() as conn:
            for table, rows in (
                (StudyRow, study_rows),
                (IndexedStudyRow, marks),
                (SkillPointRow, point_rows),
                (AlertRow, alert_rows),
                (ArtifactRow, art_rows),
                (ProbeRow, probe_rows),
            ):
                if rows and (force or len(probe_rows) >= 50_000):
                    conn.execute(insert(table.__table__), rows)
        if force or len(probe_rows) >= 50_000:
            for rows in (study_rows, marks, point_rows, alert_rows, art_rows, probe_rows):
                rows.clear()

    for i in range(runs):
        sid = f"st-bench{i:06d}"
        ids.append(sid)
        at = start + timedelta(minutes=i * 730 * 24 * 60 // runs)
        kind = kinds[i % len(kinds)]
        model = f"model-snap-{(at - start).days // 90:02d}"
        runtime = "retriever" if kind == "study" and i % 2 else "keyword"  # nightlies on one runtime
        folder = folders[runtime]
        study_rows.append(
            {
                "id": sid,
                "created_at": at,
                "finished_at": at + timedelta(minutes=9),
                "status": "done",
                "kind": kind,
                "out_dir": str(folder),
                "runtime": runtime,
                "model": model,
                "resolved_model": model,
                "catalog_id": "example",
                "catalog_digest": body["catalog"]["digest"],
                "queries_digest": body["queries_digest"],
                "fingerprint": f"fp{i}",
                "attempts": 2,
                "flow_run_id": None,
                "config": {},
                "error": None,
                "headline": {"probes": per, "top1_accuracy": round(rng.uniform(0.6, 0.9), 4)},
            }
        )
        marks.append({"study_id": sid, "indexed_at": now, "points": len(skills), "note": None})
        for s in skills:
            v = min(1.0, max(0.0, rng.gauss(0.8, 0.08)))
            lost = [[rng.choice(queries), 1, 2, {rng.choice(skills): 1}]] if v < 0.75 else []
            point_rows.append(
                {
                    "study_id": sid,
                    "skill": s,
                    "at": at + timedelta(minutes=9),
                    "kind": kind,
                    "model": model,
                    "runtime": runtime,
                    "runtime_version": "skillreach 0.1.0",
                    "corpus_version": "sha256:" + "a" * 64,
                    "rubric_version": None,
                    "skill_version": None,
                    "metrics": {
                        "activation": {
                            "value": v,
                            "ci95": [max(0, v - 0.15), min(1, v + 0.1)],
                            "n": 12,
                            "cases": 6,
                        },
                        "false_activation": {"value": 0.02, "ci95": [0, 0.08], "n": 60, "cases": 60},
                        "compliance": None,
                        "task_quality": None,
                    },
                    "verdict": ("breach" if v < 0.62 else "ok") if kind == "compliance" else None,
                    "baseline_id": None,
                    "lost": lost,
                }
            )
        if i % 20 == 0:
            alert_rows.append(
                {
                    "created_at": at,
                    "event": "skillreach.gate.breached",
                    "skill": rng.choice(skills),
                    "metric": "activation",
                    "delta": -0.2,
                    "interval_lo": -0.3,
                    "interval_hi": -0.1,
                    "baseline_id": "b",
                    "run_link": None,
                    "study_id": sid,
                    "payload": {"cause_detail": "lost 3 of 6 cases to log-search"},
                    "delivery": "posted",
                    "delivered": True,
                    "key": "k",
                }
            )
        if i >= runs - 200:
            art_rows.append(
                {
                    "study_id": sid,
                    "digest": body.get("digest") or "",
                    "path": str(folder / "artifact.json"),
                    "schema_version": 1,
                    "body": body,
                    "created_at": at,
                }
            )
        for j in range(per):
            rec = dict(log[j % len(log)])
            rec["attempt"] = 1 + j // len(log)
            probe_rows.append(
                {
                    "study_id": sid,
                    "query_id": rec["query_id"],
                    "attempt": rec["attempt"],
                    "fingerprint": f"fp{i}",
                    "error": None,
                    "cost_usd": 0.0,
                    "record": rec,
                    "created_at": at,
                }
            )
        flush()
    flush(force=True)
    took = time.perf_counter() - t0
    ev_rows = []
    for k in range(events):
        at = now - timedelta(seconds=rng.uniform(0, 42 * 86400))
        prompt = k % 3 == 0
        ev_rows.append(
            {
                "source": "bench",
                "event_id": f"e{k}",
                "kind": str(EventKind.PROMPT if prompt else EventKind.SKILL),
                "at": at,
                "agent": "claude-code",
                "session_id": f"s{k // 30}",
                "prompt_id": f"p{k // 3}",
                "skill": None if prompt else rng.choice(skills),
                "skill_ran": None,
                "success": True,
                "hidden": False,
                "invocation": None,
                "model": None,
                "cwd": None,
                "git_branch": None,
                "sidechain": False,
                "skill_dir": None,
                "skill_version": "unknown",
                "prompt_text": None,
            }
        )
    with store.engine.begin() as conn:
        for b in range(0, len(ev_rows), 20_000):
            conn.execute(insert(LiveEventRow.__table__), ev_rows[b : b + 20_000])
    return {"ids": ids, "skills": skills, "queries": queries, "seconds": took}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def time_pages(
    folder: Path, env: dict[str, str], pages: list[tuple[str, str]], repeat: int
) -> list[tuple[str, float, float, int]]:
    port = free_port()
    proc = subprocess.Popen(
        [str(SKILLREACH), "ui", "--port", str(port)],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=5).json().get("ready"):
                    break  # the start-up reads done (the live events, the skills table once)
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"skillreach ui did not start: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.2)
        out = []
        with httpx.Client(base_url=base, timeout=120) as client:
            for name, path in pages:
                times, size, status = [], 0, 0
                for _ in range(repeat + 1):
                    t = time.perf_counter()
                    r = client.get(path)
                    times.append(time.perf_counter() - t)
                    size, status = len(r.content), r.status_code
                if status != 200:
                    raise SystemExit(f"{path}: HTTP {status}")
                out.append((name, times[0], statistics.median(times[1:]), size))
        return out
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--probes", type=int, default=1_000_000)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--url", help="a PostgreSQL store to fill (emptied first); default: SQLite in the folder")
    ap.add_argument("--keep", type=Path, help="build the folder here and keep it")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="skillreach-bench-ui-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "PREFECT_API"))}
    if args.url:
        env["SKILLREACH_DATABASE_URL"] = args.url
        from sqlalchemy import create_engine, text

        engine = create_engine(args.url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        engine.dispose()
    try:
        t = time.perf_counter()
        folders = real_runs(folder, env)
        print(f"real runs of the example: {time.perf_counter() - t:.1f} s")
        from skillreach.store import Store

        url = args.url or f"sqlite:///{folder / '.skillreach' / 'skillreach.db'}"
        with Store(url) as store:
            from skillreach.ui.indexer import index_pending

            index_pending(store, limit=100)  # the real runs, as the dashboard reads them
            made = generate(
                store, folders, runs=args.runs, probes=args.probes, events=args.events, seed=args.seed
            )
            if store.backend == "sqlite":
                with store.engine.connect() as conn:
                    conn.exec_driver_sql("ANALYZE")
            else:
                with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    conn.exec_driver_sql("ANALYZE")
        points = args.runs * len(made["skills"])
        print(
            f"generated {args.runs:,} runs, {args.probes:,} probes, {points:,} history points, "
            f"{args.events:,} live events in {made['seconds']:.1f} s ({store.backend})"
        )
        ids = made["ids"]
        real = [json.loads((f / "study.json").read_text())["study_id"] for f in folders.values()]
        mid = ids[len(ids) // 2]
        pages = [
            ("skills table", "/"),
            ("a skill's page", f"/skills/{made['skills'][0]}"),
            ("runs (newest)", "/runs"),
            ("runs (breached)", "/runs?verdict=breached"),
            ("runs (nightly, page 50)", f"/runs?deployment=nightly-compliance&offset={50 * 49}"),
            ("runs (a month)", "/runs?since=2025-12-01&until=2025-12-31"),
            ("a run (report + gate)", f"/runs/{mid}"),
            ("a run, probes page 2", f"/runs/{mid}?offset=50"),
            ("a probe's trajectory", f"/runs/{mid}/probes/1/{made['queries'][3]}"),
            ("compare two runs", f"/compare?a={real[0]}&b={real[1]}&force=1"),
            ("agents", "/agents"),
            ("decisions", "/decisions"),
        ]
        from skillreach.settings import load_settings
        from skillreach.ui.sources import Sources

        with Store(url) as store:
            sources = Sources(
                store=store, settings=load_settings(), baselines_dir=folder / "baselines", branch=None
            )
            t = time.perf_counter()
            sources.read_live()
            print(
                f"one read of the live events (the dashboard's thread, every 5 min): "
                f"{time.perf_counter() - t:.2f} s"
            )
        rows = time_pages(folder, env, pages, args.repeat)
        print(f"\n{'page':<26} {'cold s':>8} {'warm s':>8} {'KB':>7}  goal ≤ {GOAL_S:g} s")
        worst = worst_cold = 0.0
        for name, cold, warm, size in rows:
            worst, worst_cold = max(worst, warm), max(worst_cold, cold)
            said = "met" if max(cold, warm) <= GOAL_S else "warm met" if warm <= GOAL_S else "NOT MET"
            print(f"{name:<26} {cold:8.3f} {warm:8.3f} {size / 1000:7.0f}  {said}")
        load = os.getloadavg()[0]
        verdict = "met" if worst <= GOAL_S else "not met"
        print(
            f"\nworst page {worst:.3f} s warm, {worst_cold:.3f} s cold: {verdict} (load average {load:.1f})"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
