"""One study over three worker processes: a real Prefect server, PostgreSQL, ``skillreach worker`` ×3, the
Messages-API stand-in answering in 200 ms, ``skillreach run`` as a user types it.

Integration: one ``prefect server start`` for the module (the tests take turns on it, each with a fresh
store and fresh workers). The kill test's size is ``SKILLREACH_SCALE_PROBES`` (default 2,000, the issue's
size). PostgreSQL from ``SKILLREACH_TEST_PG_URL`` (skipped without it, failed under ``CI=true``).
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillreach.study.probe_log import read_probes
from tests.fakes.messages_api import MessagesAPI
from tests.helpers import hang
from tests.helpers.cluster import Cluster, reset_pg, stand_in, study_world

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

PG_URL = os.environ.get("SKILLREACH_TEST_PG_URL")
PROBES = int(os.environ.get("SKILLREACH_SCALE_PROBES", "2000"))
WINDOW_S = float(os.environ.get("SKILLREACH_SCALE_WINDOW_S", "6"))  # read here: tests see no SKILLREACH_*
ATTEMPTS = 10
CONCURRENCY = 4
CANARIES = 3  # the flow's canary probes, one request each, before any batch


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, MessagesAPI]]:
    if not PG_URL:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("SKILLREACH_TEST_PG_URL is unset under CI=true: .ci/run must start PostgreSQL")
        pytest.skip("no PostgreSQL: set SKILLREACH_TEST_PG_URL (bash .ci/run starts one)")
    root = tmp_path_factory.mktemp("cluster")
    with stand_in(0.2) as api, Cluster(root, PG_URL, api.base_url, batch_size=50) as c:
        yield c, api


@pytest.fixture
def fresh(cluster: tuple[Cluster, MessagesAPI]) -> Iterator[tuple[Cluster, MessagesAPI]]:
    """The shared cluster with an empty store, no worker and an empty request log."""
    c, api = cluster
    c.stop_workers()
    assert PG_URL is not None
    reset_pg(PG_URL)
    api.calls.clear()
    yield c, api
    c.stop_workers()


def test_three_workers_one_killed_every_probe_recorded_once_and_paid_at_most_twice_in_flight(
    fresh: tuple[Cluster, MessagesAPI], tmp_path: Path
) -> None:
    cluster, api = fresh
    skills, queries = study_world(tmp_path, PROBES // ATTEMPTS)
    total = (PROBES // ATTEMPTS) * ATTEMPTS
    cluster.start_workers(3)
    out_dir = tmp_path / "out"
    started = time.monotonic()
    proc = cluster.run_study(skills, queries, out_dir, attempts=ATTEMPTS, concurrency=CONCURRENCY)
    deadline = hang.Deadline(600)
    while cluster.store_count() < total // 4:  # a quarter done: every worker is mid-batch
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        deadline.check("the study made no progress")
        time.sleep(0.2)
    cluster.kill_worker(cluster.busiest_worker())
    out, err = hang.communicate(proc, 900)
    wall = time.monotonic() - started
    assert proc.returncode == 0, err[-3000:]

    assert "lost its worker; submitting it again" in err  # the kill hit a batch in flight
    records = read_probes(tmp_path / "out" / "probes.jsonl")
    pairs = collections.Counter((r.query_id, r.attempt) for r in records)
    assert len(pairs) == total  # every (query, attempt) …
    assert set(pairs.values()) == {1}  # … exactly once
    assert all(r.error is None for r in records)
    assert cluster.store_count() == total
    paid = len(api.message_requests) - CANARIES  # one request a probe (the skill is found at turn 1)
    assert total <= paid <= total + CONCURRENCY, (paid, total)  # at most the killed worker's in flight
    assert "study st-" in out
    assert f"{total}/{total}" in err  # the progress bar followed the workers to the end
    print(f"\n{total} probes on 3 workers (one killed at a quarter): {wall:.0f} s, {paid} paid")


def test_one_rate_limit_holds_across_three_workers(
    fresh: tuple[Cluster, MessagesAPI], tmp_path: Path
) -> None:
    """R requests per window across three workers, measured at the stand-in: no window holds more than R.
    The window is scaled to 6 s (the limit's slot decay scaled the same way) to keep the test short;
    ``SKILLREACH_SCALE_WINDOW_S=60`` runs it at the issue's R requests per minute (264 s here)."""
    cluster, api = fresh
    r, window = 12, WINDOW_S
    skills, queries = study_world(tmp_path, 12)
    written = cluster.python(
        "import asyncio, json; from skillreach.deployments.limits import ensure_rate_limits; "
        "print(json.dumps(asyncio.run(ensure_rate_limits("
        f"['anthropic'], {r}, None, window_s={window}))))")
    assert "skillreach-anthropic-requests" in written
    cluster.start_workers(3, extra_env={"SKILLREACH_REQUESTS_PER_MINUTE": str(r)})
    proc = cluster.run_study(skills, queries, tmp_path / "out", attempts=3, concurrency=CONCURRENCY,
                             extra_env={"SKILLREACH_BATCH_SIZE": "6"})  # six batches over three workers
    _, err = hang.communicate(proc, 600)
    assert proc.returncode == 0, err[-3000:]
    times = sorted(c.at for c in api.message_requests
                   if not _text(c.body).startswith("Use the "))  # the flow's canaries are not on a worker
    assert len(times) == 36
    busiest = max(sum(1 for t in times[i:] if t < start + window) for i, start in enumerate(times))
    print(f"\n{len(times)} requests in {times[-1] - times[0]:.1f} s, at most {busiest} in {window:.0f} s")
    assert busiest <= r, f"{busiest} requests in {window} s (limit {r})"
    # and the limit did the pacing: unlimited, 12 in flight at 200 ms would take about 1 s
    slots, decay = 1, (r - 1) / window
    assert times[-1] - times[0] >= 0.8 * (len(times) - slots) / decay
    cluster.python(  # the next test's workers must not draw on this limit
        "import asyncio; from prefect.client.orchestration import get_client\n"
        "async def main():\n"
        "    async with get_client() as c:\n"
        "        await c.delete_global_concurrency_limit_by_name('skillreach-anthropic-requests')\n"
        "asyncio.run(main())")


def test_the_cost_cap_holds_across_workers_and_keeps_what_was_paid(
    fresh: tuple[Cluster, MessagesAPI], tmp_path: Path
) -> None:
    """A study of 600 probes (about $1.40 at the stand-in's usage) capped at $0.25, on three workers: it
    stops with the one cost-cap line, well before its end; every paid probe is in probes.jsonl; the
    spend passes the cap by no more than the probes in flight and those of one look at the spend."""
    cluster, api = fresh
    cap = 0.25
    skills, queries = study_world(tmp_path, 60)
    cluster.start_workers(3)
    out_dir = tmp_path / "out"
    proc = cluster.run_study(skills, queries, out_dir, attempts=ATTEMPTS, concurrency=CONCURRENCY,
                             extra=["--max-cost", str(cap)])
    _, err = hang.communicate(proc, 600)
    assert proc.returncode != 0
    assert "cost cap" in err, err[-2000:]
    assert "Traceback" not in err
    records = read_probes(out_dir / "probes.jsonl")
    assert len(records) == cluster.store_count()  # what was paid is on disk
    spent = sum(r.cost_usd or 0.0 for r in records)
    most = max(r.cost_usd or 0.0 for r in records)
    assert spent >= cap, (spent, len(records))
    assert len(records) < 300
    # past the cap: the probes holding the three workers' slots, and those started while a batch's view
    # of the whole study's spend was up to 0.25 s old (12 in flight at 200 ms: 15 a quarter second)
    overshoot = 3 * CONCURRENCY + 3 * CONCURRENCY * 0.25 / 0.2 + CONCURRENCY
    assert spent <= cap + overshoot * most, (spent, cap, len(records))
    assert len(api.message_requests) - CANARIES <= len(records) + 3 * CONCURRENCY


def _text(body: object) -> str:
    from tests.fakes.messages_api import query_text

    return query_text(body) if isinstance(body, dict) else ""


def test_sigterm_to_a_worker_is_one_line_and_exit_143(fresh: tuple[Cluster, MessagesAPI]) -> None:
    import signal

    c, _api = fresh
    c.start_workers(1)
    worker = c.workers[-1]
    index = len(c.workers) - 1
    os.killpg(worker.pid, signal.SIGTERM)  # a service manager's stop
    code = worker.wait(60)
    log = (c.root / "logs" / f"worker-{index}.log").read_text(encoding="utf-8", errors="replace")
    assert code == 143, log
    assert "Traceback" not in log
    assert log.count("skillreach: terminated (SIGTERM)") == 1
