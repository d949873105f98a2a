"""The store as the shared probe log of a distributed study: insert-once records, what a batch skips,
the advisory lock a worker holds while it probes, and writes that survive a lost connection.

SQLite and PostgreSQL alike (PostgreSQL from ``SKILLREACH_TEST_PG_URL``; skipped without it, failed under
``CI=true``).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from skillreach.models import ProbeRecord, Usage
from skillreach.store.database import Store, _retry_lost_connection
from skillreach.study.probe_log import read_probes, write_probes

PG_URL = os.environ.get("SKILLREACH_TEST_PG_URL")


def _reset_pg(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


def _need_pg() -> str:
    if not PG_URL:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("SKILLREACH_TEST_PG_URL is unset under CI=true: .ci/run must start PostgreSQL")
        pytest.skip("no PostgreSQL: set SKILLREACH_TEST_PG_URL (bash .ci/run starts one)")
    _reset_pg(PG_URL)
    return PG_URL


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    url = f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite" else _need_pg()
    s = Store(url)
    s.begin_study("st-1", out_dir="/tmp/out", runtime="keyword", model=None, catalog_id="all",
                  catalog_digest="sha256:c", queries_digest="sha256:q", fingerprint="fp1", attempts=2,
                  config={})
    yield s
    s.close()


def _probe(qid: str, attempt: int = 1, *, invoked: tuple[str, ...] = ("pdf",),
           error: str | None = None) -> ProbeRecord:
    return ProbeRecord(query_id=qid, attempt=attempt, invoked=invoked, error=error, runtime="keyword",
                       usage=Usage(input_tokens=10, output_tokens=2), cost_usd=0.001, fingerprint="fp1")


def test_recording_a_probe_twice_is_a_no_op_and_an_error_is_replaced(store: Store) -> None:
    assert store.record_probes("st-1", [_probe("q1"), _probe("q2", error="timeout")]) == 2
    # the same pair again (a retried batch, a second worker): the first record stays
    assert store.record_probes("st-1", [_probe("q1", invoked=("xlsx",))]) == 0
    # an errored pair probed again: the success replaces the error
    assert store.record_probes("st-1", [_probe("q2", invoked=("docx",))]) == 1
    # and an error never replaces a success
    assert store.record_probes("st-1", [_probe("q2", error="late")]) == 0
    got = {(r.query_id, r.attempt): r for r in store.probes("st-1")}
    assert store.count_probes("st-1") == 2
    assert got[("q1", 1)].invoked == ("pdf",)
    assert got[("q2", 1)].invoked == ("docx",)
    assert got[("q2", 1)].error is None


def test_add_probes_still_replaces_a_record_for_grading(store: Store) -> None:
    store.add_probes("st-1", [_probe("q1")])
    store.add_probes("st-1", [_probe("q1", invoked=("xlsx",))])
    assert [r.invoked for r in store.probes("st-1")] == [("xlsx",)]


def test_a_batch_sees_which_of_its_pairs_the_store_has(store: Store) -> None:
    store.record_probes("st-1", [_probe("q1"), _probe("q2", error="boom"), _probe("q3", 2), _probe("q9")])
    assert store.finished_pairs("st-1") == {("q1", 1), ("q3", 2), ("q9", 1)}
    asked = [("q1", 1), ("q2", 1), ("q3", 1), ("q3", 2)]
    assert store.finished_pairs("st-1", asked) == {("q1", 1), ("q3", 2)}
    assert store.finished_pairs("st-other") == set()


def _insert_many(url: str, worker: int, n: int) -> None:
    s = Store(url)
    for i in range(n):  # every worker records the same pairs, interleaved
        s.record_probes("st-1", [_probe(f"q{i}", invoked=(f"w{worker}",))])
    s.close()


@pytest.mark.postgres
def test_three_processes_recording_the_same_pairs_leave_one_record_each(tmp_path: Path) -> None:
    url = _need_pg()
    s = Store(url)
    s.begin_study("st-1", out_dir="/tmp/out", runtime="keyword", model=None, catalog_id="all",
                  catalog_digest="sha256:c", queries_digest="sha256:q", fingerprint="fp1", attempts=1,
                  config={})
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_insert_many, args=(url, w, 60)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert s.count_probes("st-1") == 60
    assert len({(r.query_id, r.attempt) for r in s.probes("st-1")}) == 60
    s.close()


@pytest.mark.postgres
def test_a_lost_connection_is_retried_and_nothing_is_lost() -> None:
    url = _need_pg()
    s = Store(url)
    s.begin_study("st-1", out_dir="/tmp/out", runtime="keyword", model=None, catalog_id="all",
                  catalog_digest="sha256:c", queries_digest="sha256:q", fingerprint="fp1", attempts=1,
                  config={})
    s.record_probes("st-1", [_probe("q0")])
    admin = create_engine(url, isolation_level="AUTOCOMMIT")

    def kill_connections() -> None:  # the database drops every connection (a restart, a failover)
        with admin.connect() as conn:
            conn.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"))

    for i in range(1, 21):
        if i % 5 == 0:
            kill_connections()
        s.record_probes("st-1", [_probe(f"q{i}")])
    assert s.count_probes("st-1") == 21
    admin.dispose()
    s.close()


def test_the_retry_loop_waits_and_tries_again_then_gives_up() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OperationalError("INSERT", {}, Exception("server closed the connection unexpectedly"))
        return "ok"

    assert _retry_lost_connection(flaky, delays=(0.01, 0.01, 0.01)) == "ok"
    assert len(calls) == 3
    calls.clear()

    def down() -> str:
        calls.append(1)
        raise OperationalError("INSERT", {}, Exception("connection refused"))

    with pytest.raises(OperationalError):
        _retry_lost_connection(down, delays=(0.01, 0.01))
    assert len(calls) == 3


@pytest.mark.postgres
def test_a_held_lock_is_seen_and_freed_when_its_connection_goes() -> None:
    url = _need_pg()
    s = Store(url)
    assert s.lock_free("st-1/0/0")
    held = s.hold_lock("st-1/0/0")
    seen: list[bool] = []
    t = threading.Thread(target=lambda: seen.append(s.lock_free("st-1/0/0")))
    t.start()
    t.join()
    assert seen == [False]
    assert s.lock_free("st-1/1/0")  # another batch's lock is its own
    held.close()  # a worker that dies: the server drops its connection, and its lock with it
    # The backend ends after the client hangs up, not with it: the lock goes within moments.
    deadline = time.monotonic() + 10.0
    while not s.lock_free("st-1/0/0"):
        assert time.monotonic() < deadline, "the lock outlived its connection by 10 s"
        time.sleep(0.05)
    s.close()


def test_the_probe_log_is_written_whole_from_the_store(store: Store, tmp_path: Path) -> None:
    store.record_probes("st-1", [_probe("q1"), _probe("q2"), _probe("q1", 2)])
    path = tmp_path / "out" / "probes.jsonl"
    path.parent.mkdir()
    path.write_text("stale\n")
    assert write_probes(path, store.probes("st-1")) == 3
    assert sorted((r.query_id, r.attempt) for r in read_probes(path)) == [("q1", 1), ("q1", 2), ("q2", 1)]
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
