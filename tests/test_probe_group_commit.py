"""Probing throughput without giving up durability: the probe log's group commit, the store written
off the probes' slots, and a study's in-process batches two at once (issue 16).

- group commit: records that finish together share one write and one fsync, and a record is still on
  disk before its slot admits the next request (at most ``concurrency - 1`` other probes unrecorded);
- the tee writes the store on a thread of its own: a slow store does not hold the probes, a failed
  store write still fails the batch;
- ``skillreach run`` runs the next batch while the previous one drains, within one in-flight bound,
  and the cost cap counts both batches.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from skillreach.errors import BudgetExceeded
from skillreach.flows.study import study
from skillreach.models import Catalog, Query, Skill
from skillreach.queries.sets import load_query_set
from skillreach.study import runner
from skillreach.study.contract import Outcome, ProbeOptions, Tracker
from skillreach.study.plan import batch_pairs
from skillreach.study.probe_log import JsonlSink, read_probes
from skillreach.study.runner import TeeSink, run_probes
from tests.helpers import hang
from tests.helpers.world import cfg, fake_charging, run, store_of

CATALOG = Catalog(id="c", skills=(Skill(name="pdf", description="Work with PDF files.", body="# pdf"),))


def queries(n: int) -> list[Query]:
    return [Query(id=f"q{i:03d}", text=f"query {i}", expected_skill="pdf") for i in range(n)]


class OnDisk:
    """As each probe starts, counts how many earlier probes are not in the log yet."""

    name: ClassVar[str] = "on-disk"

    def __init__(self, log: Path, latency_s: float = 0.004) -> None:
        self.log, self.latency_s = log, latency_s
        self.started = 0
        self.unrecorded: list[int] = []

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        lines = self.log.read_bytes().count(b"\n") if self.log.exists() else 0
        self.unrecorded.append(self.started - lines)
        self.started += 1
        await asyncio.sleep(self.latency_s)
        tracker.invoke("pdf")
        return Outcome.from_tracker(tracker, cost_usd=0.01)

    async def aclose(self) -> None:
        return None


async def test_group_commit_shares_fsyncs_and_keeps_records_on_disk_before_the_slot_moves_on(
    tmp_path: Path,
) -> None:
    log = tmp_path / "probes.jsonl"
    rt = OnDisk(log)
    sink = JsonlSink(log)
    n, concurrency = 160, 16
    records = await run_probes(rt, CATALOG, [(q, 1) for q in queries(n)], options=ProbeOptions(),
                               sink=sink, concurrency=concurrency, fingerprint="fp")
    sink.close()
    assert len(records) == n
    assert sorted(r.query_id for r in read_probes(log)) == [q.id for q in queries(n)]
    # a probe starts only in a free slot, and a slot is free once its record is on disk
    assert max(rt.unrecorded) <= concurrency - 1
    assert 0 < sink.fsyncs <= n // 2  # the records that finished together shared their fsync


async def test_fsyncs_are_spaced_and_every_record_is_durable_when_run_probes_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fsync runs off the probes' slots, at most one every SYNC_EVERY_S; what is staged when the
    run ends is synced before run_probes returns."""
    monkeypatch.setattr(runner, "SYNC_EVERY_S", 0.1)
    log = tmp_path / "probes.jsonl"
    sink = JsonlSink(log)
    n, concurrency = 320, 16
    t0 = time.perf_counter()
    records = await run_probes(OnDisk(log, 0.01), CATALOG, [(q, 1) for q in queries(n)],
                               options=ProbeOptions(), sink=sink, concurrency=concurrency, fingerprint="fp")
    elapsed = time.perf_counter() - t0
    assert len(records) == n
    assert sink.synced == sink.count == n  # all of it on the disk, not only in the page cache
    assert 1 <= sink.fsyncs <= elapsed / 0.1 + 2, (sink.fsyncs, elapsed)
    sink.close()


class _FailingSync(JsonlSink):
    def _sync(self, fd: int, mine: int) -> None:
        raise OSError(5, "Input/output error")


async def test_a_failed_fsync_fails_the_run_and_the_records_stay_in_the_log(tmp_path: Path) -> None:
    log = tmp_path / "probes.jsonl"
    sink = _FailingSync(log)
    with pytest.raises(OSError, match="Input/output error"):
        await run_probes(OnDisk(log, 0.002), CATALOG, [(q, 1) for q in queries(40)],
                         options=ProbeOptions(), sink=sink, concurrency=4, fingerprint="fp")
    sink.close()
    kept = read_probes(log)
    assert 1 <= len(kept) <= 40
    assert len({r.query_id for r in kept}) == len(kept)


class ListStore:
    def __init__(self) -> None:
        self.rows: list[str] = []

    def add_probes(self, study_id: str, records: Any) -> int:
        self.rows.extend(r.query_id for r in records)
        return len(records)


async def test_a_cancelled_run_still_hands_every_logged_record_to_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C half-way: the groups staged but not yet synced are made durable on the way out, so the
    store gets exactly what the log has."""
    monkeypatch.setattr(runner, "SYNC_EVERY_S", 30.0)  # nothing synced by the timer before the cancel
    log = tmp_path / "probes.jsonl"
    store = ListStore()
    tee = TeeSink(JsonlSink(log), store, "st", every=1)
    probing = asyncio.create_task(
        run_probes(OnDisk(log, 0.005), CATALOG, [(q, 1) for q in queries(200)], options=ProbeOptions(),
                   sink=tee, concurrency=8, fingerprint="fp")
    )
    while not log.exists() or log.read_bytes().count(b"\n") < 40:
        await asyncio.sleep(0.005)
    probing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probing
    tee.flush()
    logged = sorted(r.query_id for r in read_probes(log))
    assert 40 <= len(logged) < 200
    assert sorted(store.rows) == logged
    assert tee.log.synced == len(logged)  # type: ignore[attr-defined]


class SlowStore:
    def __init__(self, delay_s: float, fail: bool = False) -> None:
        self.delay_s, self.fail = delay_s, fail
        self.rows: list[str] = []

    def add_probes(self, study_id: str, records: Any) -> int:
        time.sleep(self.delay_s)
        if self.fail:
            raise OSError(28, "No space left on device")
        self.rows.extend(r.query_id for r in records)
        return len(records)


async def test_the_store_is_written_off_the_probes_slots_and_flush_waits_for_it(tmp_path: Path) -> None:
    store = SlowStore(0.4)
    tee = TeeSink(JsonlSink(tmp_path / "p.jsonl"), store, "st", every=5)
    t0 = time.perf_counter()
    await run_probes(OnDisk(tmp_path / "p.jsonl", 0.001), CATALOG, [(q, 1) for q in queries(20)],
                     options=ProbeOptions(), sink=tee, concurrency=4, fingerprint="fp")
    probing = time.perf_counter() - t0
    # four groups of five: 1.6 s of store writes, none of it inside a probe's slot
    assert probing < 1.2, probing
    tee.flush()
    assert sorted(store.rows) == [q.id for q in queries(20)]
    assert len(read_probes(tmp_path / "p.jsonl")) == 20


async def test_a_failed_store_write_still_fails_the_batch_after_the_log_has_the_records(
    tmp_path: Path,
) -> None:
    tee = TeeSink(JsonlSink(tmp_path / "p.jsonl"), SlowStore(0.0, fail=True), "st", every=3)

    async def batch() -> None:  # as probe_batch does: probe, then flush what is left
        try:
            await run_probes(OnDisk(tmp_path / "p.jsonl", 0.001), CATALOG, [(q, 1) for q in queries(12)],
                             options=ProbeOptions(), sink=tee, concurrency=2, fingerprint="fp")
        finally:
            tee.flush()

    with pytest.raises(OSError, match="No space left"):
        await batch()
    assert len(read_probes(tmp_path / "p.jsonl")) >= 3  # the log first, always


def _spans(records: Any) -> list[tuple[datetime, datetime, str, int]]:
    out = []
    for r in records:
        end = datetime.fromisoformat(r.finished_at)
        out.append((end - timedelta(milliseconds=r.duration_ms), end, r.query_id, r.attempt))
    return out


def _peak(spans: list[tuple[datetime, datetime, str, int]], slack_ms: int = 3) -> int:
    """Most probes in flight at once (each span shrunk by the log's millisecond rounding)."""
    slack = timedelta(milliseconds=slack_ms)
    events = sorted([(s + slack, 1) for s, e, *_ in spans if e - s > 2 * slack]
                    + [(e - slack, -1) for s, e, *_ in spans if e - s > 2 * slack])
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def _overlaps(world: dict[str, Path], spans: list[tuple[datetime, datetime, str, int]], size: int) -> int:
    """How many batches started before the one before them finished."""
    qs = load_query_set(world["queries"])
    batches = batch_pairs(qs.queries, 2, size)
    where = {(q.id, a): i for i, b in enumerate(batches) for q, a in b}
    first: dict[int, datetime] = {}
    last: dict[int, datetime] = {}
    for s, e, qid, a in spans:
        i = where[(qid, a)]
        first[i] = min(first.get(i, s), s)
        last[i] = max(last.get(i, e), e)
    return sum(1 for i in range(1, len(batches)) if first[i] < last[i - 1])


def test_skillreach_run_starts_the_next_batch_while_the_last_drains_within_one_bound(
    world: dict[str, Path],
) -> None:
    """Through the command a user runs: 26 probes, batches of 5, 3 in flight, 40 ms a probe."""
    root = world["root"]
    (root / "study.toml").write_text(
        f'[runtime_options]\nscript = "{world["good"]}"\nlatency_s = 0.04\n', encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "PREFECT_API"))}
    env.update(SKILLREACH_HOME=str(world["home"]), SKILLREACH_BATCH_SIZE="5")
    exe = Path(sys.executable).parent / "skillreach"
    argv = [str(exe), "run", "--config", "study.toml", "--skills", "skills", "--queries", "queries.json",
            "--runtime", "fake", "--attempts", "2", "--concurrency", "3", "--out", "out"]
    proc = hang.finish(argv, limit_s=300, cwd=root, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = read_probes(root / "out/probes.jsonl")
    assert len(records) == 26
    spans = _spans(records)
    assert _peak(spans) <= 3  # the study's concurrency across both batches
    assert _overlaps(world, spans, 5) >= 3  # of the 5 batch boundaries
    with store_of(world) as s:
        [row] = s.studies()
        assert s.count_probes(row.id) == 26
        assert row.status == "done"


def test_the_cost_cap_counts_both_batches_in_flight(world: dict[str, Path]) -> None:
    base = cfg(world, "capped", max_cost=7.0, concurrency=3, batch_size=4)
    config = base.model_copy(update={"runtime_options": {**base.runtime_options, "latency_s": 0.02}})
    with fake_charging(1.0), pytest.raises(BudgetExceeded, match="results so far are kept"):
        run(study, config)
    kept = read_probes(world["root"] / "capped/probes.jsonl")
    # the cap is seen at the 7th dollar; only probes already in flight beside it finish (≤ 2 more)
    assert 7 <= len(kept) <= 9
    with store_of(world) as s:
        [row] = s.studies()
        assert row.status == "failed"
        assert s.count_probes(row.id) == len(kept)
