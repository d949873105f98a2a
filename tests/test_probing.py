"""skillreach.probing: the probe loop, the JSONL log, resume, the canary check and the cost estimate."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest

from skillreach.errors import BudgetExceeded, ConfigError, HarnessBlind, InputError, NotFoundError
from skillreach.models import Catalog, ProbeRecord, Query, QuerySet, Skill
from skillreach.runtimes.fake import FakeRuntime
from skillreach.settings import Price
from skillreach.study.contract import Outcome, ProbeOptions, Tracker
from skillreach.study.cost import estimate_cost
from skillreach.study.probe_log import JsonlSink, completed_pairs, latest_records, read_probes
from skillreach.study.runner import (
    ListSink,
    Slots,
    canary_check,
    canary_queries,
    fingerprint,
    pending_pairs,
    run_probes,
)
from tests.conftest import REPO
from tests.fakes.messages_api import MessagesAPI, ScriptResponder, query_text
from tests.helpers import hang

CATALOG = Catalog(
    id="t",
    skills=tuple(
        Skill(name=n, description=f"Work with {n} documents and files.", body=f"# {n}\nsteps for {n}\n" * 20)
        for n in ("pdf", "docx", "xlsx")
    ),
)


def queries(n: int = 6) -> list[Query]:
    names = CATALOG.names
    return [Query(id=f"q{i:02d}", text=f"task number {i:02d}", expected_skill=names[i % 3]) for i in range(n)]


def fp(options: ProbeOptions | None = None) -> str:
    qs = QuerySet(queries=tuple(queries()))
    return fingerprint(CATALOG, qs, "fake", None, options or ProbeOptions())


# ----------------------------------------------------------------------------------- fingerprint


def test_fingerprint_changes_with_what_changes_results() -> None:
    qs = QuerySet(queries=tuple(queries()))
    base = fingerprint(CATALOG, qs, "anthropic", "claude-x-20250101", ProbeOptions())
    assert base.startswith("sha256:")
    assert base == fingerprint(
        CATALOG.digest, qs.compute_digest(), "anthropic", "claude-x-20250101", ProbeOptions()
    )
    others = {
        fingerprint(CATALOG, qs, "claude-code", "claude-x-20250101", ProbeOptions()),
        fingerprint(CATALOG, qs, "anthropic", "claude-x-20250202", ProbeOptions()),
        fingerprint(CATALOG, qs, "anthropic", "claude-x-20250101", ProbeOptions(max_turns=2)),
        fingerprint(CATALOG, qs, "anthropic", "claude-x-20250101", ProbeOptions(early_exit=False)),
        fingerprint(CATALOG, qs, "anthropic", "claude-x-20250101", ProbeOptions(compliance=True)),
        fingerprint(
            CATALOG, QuerySet(queries=tuple(queries(5))), "anthropic", "claude-x-20250101", ProbeOptions()
        ),
        fingerprint(
            Catalog(id="t", skills=CATALOG.skills[:2]), qs, "anthropic", "claude-x-20250101", ProbeOptions()
        ),
    }
    assert base not in others
    assert len(others) == 7
    # the timeout and the requested alias do not change what is measured
    assert base == fingerprint(
        CATALOG, qs, "anthropic", "claude-x-20250101", ProbeOptions(timeout_s=5, model="a")
    )


# ------------------------------------------------------------------------------------------ sinks


def record(qid: str, attempt: int = 1, error: str | None = None, fingerprint: str = "f1") -> ProbeRecord:
    return ProbeRecord(query_id=qid, attempt=attempt, error=error, fingerprint=fingerprint, runtime="fake")


def test_jsonl_sink_appends_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "run" / "probes.jsonl"
    with JsonlSink(path) as sink:
        sink.write(record("a"))
        sink.write(record("b", error="HTTP 529"))
    with JsonlSink(path) as sink:
        sink.write(record("c"))
    back = read_probes(path)
    assert [r.query_id for r in back] == ["a", "b", "c"]
    assert back[1].error == "HTTP 529"
    assert path.read_text().count("\n") == 3


def test_a_torn_last_line_is_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "probes.jsonl"
    path.write_text(record("a").to_json_line() + "\n" + record("b").to_json_line()[:25])
    assert [r.query_id for r in read_probes(path)] == ["a"]
    with JsonlSink(path) as sink:  # resuming appends on a fresh line
        sink.write(record("b"))
    assert [r.query_id for r in read_probes(path)] == ["a", "b"]
    assert path.read_text().count("\n") == 2  # the torn tail was cut, not kept beside the new line


def test_one_torn_line_rule_for_both_readers(tmp_path: Path) -> None:
    """Garbage in the middle is an error naming the line, for the records reader and the scorer alike;
    a torn last line is dropped and reported by both."""
    from skillreach.scoring import ProbeTable

    middle = tmp_path / "middle.jsonl"
    middle.write_text(record("a").to_json_line() + "\n{garbage\n" + record("b").to_json_line() + "\n")
    with pytest.raises(InputError, match=r"middle\.jsonl:2: not valid JSON"):
        read_probes(middle)
    with pytest.raises(InputError, match=r"middle\.jsonl:2: not valid JSON"):
        ProbeTable.from_lines(middle.open("rb"), source=str(middle))
    torn = tmp_path / "torn.jsonl"
    torn.write_text(record("a").to_json_line() + "\n" + record("b").to_json_line()[:30])
    warnings: list[str] = []
    assert [r.query_id for r in read_probes(torn, warnings=warnings)] == ["a"]
    assert warnings == [f"{torn}:2: last line cut short (not valid JSON); skipped"]
    table = ProbeTable.from_lines(torn.open("rb"), source=str(torn))
    assert len(table) == 1
    assert table.warnings == warnings


def test_a_bad_record_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "probes.jsonl"
    path.write_text(record("a").to_json_line() + "\n" + json.dumps({"attempt": 1}) + "\n")
    with pytest.raises(InputError, match=r"probes\.jsonl:2: not a probe record"):
        read_probes(path)
    with pytest.raises(NotFoundError, match="no such probe log"):
        read_probes(tmp_path / "missing.jsonl")
    assert read_probes(tmp_path / "missing.jsonl", missing_ok=True) == []


def test_completed_pairs_only_error_free_under_the_same_fingerprint() -> None:
    records = [
        record("a"),
        record("b", error="HTTP 529 overloaded"),
        record("c", fingerprint="other"),
        record("a", attempt=2),
        record("d", fingerprint=None),  # type: ignore[arg-type]
    ]
    assert completed_pairs(records, "f1") == {("a", 1), ("a", 2)}
    pairs = [(q, 1) for q in queries(3)]
    assert pending_pairs(pairs, {("q01", 1)}) == [pairs[0], pairs[2]]


def test_latest_records_prefers_the_error_free_one_and_never_mixes_fingerprints() -> None:
    records = [record("a", error="x"), record("a"), record("a", error="y"), record("b", fingerprint="other")]
    latest = latest_records(records, "f1")
    assert len(latest) == 1
    assert latest[0].error is None


# --------------------------------------------------------------------------------------- the loop


async def probe_all(
    rt: Any,
    pairs: list[tuple[Query, int]],
    sink: Any,
    *,
    concurrency: int = 1,
    fingerprint: str = "f",
    **kw: Any,
) -> list[ProbeRecord]:
    """``run_probes`` over ``CATALOG`` with the default options."""
    return await run_probes(
        rt,
        CATALOG,
        pairs,
        options=ProbeOptions(),
        sink=sink,
        concurrency=concurrency,
        fingerprint=fingerprint,
        **kw,
    )


async def test_run_probes_writes_every_probe_with_provenance(tmp_path: Path) -> None:
    rt = FakeRuntime({"q00": ["pdf"], "q01": {"error": "HTTP 500 api_error: boom"}, "*": []}, model="m-1")
    sink = JsonlSink(tmp_path / "p.jsonl")
    seen: list[str] = []
    pairs = [(q, a) for q in queries(3) for a in (1, 2)]
    out = await probe_all(
        rt, pairs, sink, concurrency=2, fingerprint="fpX", on_probe=lambda r: seen.append(r.query_id)
    )
    sink.close()
    assert len(out) == 6
    assert sorted(seen) == sorted(q.id for q, _ in pairs)
    on_disk = read_probes(tmp_path / "p.jsonl")
    assert {(r.query_id, r.attempt) for r in on_disk} == {(q.id, a) for q, a in pairs}
    by = {(r.query_id, r.attempt): r for r in on_disk}
    assert by[("q00", 1)].invoked == ("pdf",)
    assert by[("q00", 1)].early_exit
    # a failed probe is an error, never an empty selection that would read as an abstention
    assert by[("q01", 2)].error == "HTTP 500 api_error: boom"
    assert all(r.fingerprint == "fpX" for r in on_disk)
    assert all(r.runtime == "fake" for r in on_disk)
    assert all(r.finished_at for r in on_disk)


async def test_the_sink_gets_the_record_before_on_probe_can_fail(tmp_path: Path) -> None:
    rt = FakeRuntime({"*": ["pdf"]})
    sink = JsonlSink(tmp_path / "p.jsonl")

    def explode(r: ProbeRecord) -> None:
        raise RuntimeError("the store is down")

    with pytest.raises(RuntimeError, match="the store is down"):
        await probe_all(rt, [(queries(1)[0], 1)], sink, on_probe=explode)
    sink.close()
    assert [r.query_id for r in read_probes(tmp_path / "p.jsonl")] == ["q00"]


class Exploding:
    name: ClassVar[str] = "exploding"

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        raise KeyError("a bug")

    async def aclose(self) -> None:
        return None


async def test_a_runtime_bug_is_the_probe_error_and_config_errors_stop() -> None:
    sink = ListSink()
    await probe_all(Exploding(), [(queries(1)[0], 1)], sink)
    assert sink.records[0].error == "KeyError: 'a bug'"
    with pytest.raises(ConfigError):
        await run_probes(
            Exploding(), CATALOG, [], options=ProbeOptions(), sink=sink, concurrency=0, fingerprint="f"
        )


class Paid:
    """Each probe costs $0.10 and takes a little while."""

    name: ClassVar[str] = "paid"

    def __init__(self) -> None:
        self.started = 0

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        self.started += 1
        await asyncio.sleep(0.01)
        tracker.invoke("pdf")
        return Outcome.from_tracker(tracker, cost_usd=0.10)

    async def aclose(self) -> None:
        return None


async def test_cost_cap_stops_cleanly_keeping_results(tmp_path: Path) -> None:
    rt = Paid()
    sink = JsonlSink(tmp_path / "p.jsonl")
    pairs = [(q, 1) for q in queries(20)]
    with pytest.raises(BudgetExceeded, match=r"cost cap of \$0\.35") as info:
        await probe_all(rt, pairs, sink, concurrency=2, cost_cap=0.35)
    sink.close()
    kept = read_probes(tmp_path / "p.jsonl")
    # the cap was hit at the 4th probe; the one in flight beside it finished and was written too
    assert 4 <= len(kept) <= 5
    assert len(kept) == rt.started
    assert len(info.value.records) == len(kept)  # type: ignore[attr-defined]


async def test_cost_cap_counts_earlier_spend() -> None:
    rt = Paid()
    with pytest.raises(BudgetExceeded):
        await probe_all(rt, [(q, 1) for q in queries(3)], ListSink(), cost_cap=1.0, spent_before=1.0)
    assert rt.started == 0


async def test_concurrency_is_respected() -> None:
    in_flight = 0
    peak = 0

    class Slow:
        name: ClassVar[str] = "slow"

        async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return Outcome.from_tracker(tracker)

        async def aclose(self) -> None:
            return None

    await probe_all(Slow(), [(q, 1) for q in queries(12)], ListSink(), concurrency=3)
    assert peak == 3


async def test_shared_slots_cap_two_batches_and_serve_the_oldest_first() -> None:
    """A task worker running two batches at once (each at concurrency 4) with 4 slots: never more than 4
    probes in flight on the worker; the batch that started first gets every slot it can use (all its
    probes start before any of the second's), and the second fills the slots of the first's tail."""
    in_flight = 0
    peak = 0
    per_batch: Counter[str] = Counter()
    starts: list[str] = []
    overlap = False

    class Slow:
        name: ClassVar[str] = "slow"

        def __init__(self, batch: str) -> None:
            self.batch = batch

        async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
            nonlocal in_flight, peak, overlap
            in_flight += 1
            per_batch[self.batch] += 1
            starts.append(self.batch)
            peak = max(peak, in_flight)
            overlap = overlap or all(per_batch[b] for b in ("a", "b"))
            await asyncio.sleep(0.004 * (1 + len(starts) % 3))  # latencies differ
            in_flight -= 1
            per_batch[self.batch] -= 1
            return Outcome.from_tracker(tracker)

        async def aclose(self) -> None:
            return None

    slots = Slots(4)
    pairs = [(q, 1) for q in queries(12)]

    async def batch(name: str, delay: float) -> list[ProbeRecord]:
        await asyncio.sleep(delay)
        return await probe_all(Slow(name), pairs, ListSink(), concurrency=4, slots=slots)

    done = await asyncio.gather(batch("a", 0), batch("b", 0.001))
    assert [len(d) for d in done] == [12, 12]
    assert peak == 4
    assert starts == ["a"] * 12 + ["b"] * 12
    assert overlap
    assert slots.free == 4


async def test_shared_slots_keep_each_batch_within_its_own_concurrency() -> None:
    """A study probing at concurrency 2 on a worker with 4 slots: each batch at most 2 in flight, and
    the second batch uses the slots the first cannot."""
    in_flight: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    total_peak = 0

    class Slow:
        name: ClassVar[str] = "slow"

        def __init__(self, batch: str) -> None:
            self.batch = batch

        async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
            nonlocal total_peak
            in_flight[self.batch] += 1
            peak[self.batch] = max(peak[self.batch], in_flight[self.batch])
            total_peak = max(total_peak, sum(in_flight.values()))
            await asyncio.sleep(0.005)
            in_flight[self.batch] -= 1
            return Outcome.from_tracker(tracker)

        async def aclose(self) -> None:
            return None

    slots = Slots(4)
    pairs = [(q, 1) for q in queries(8)]
    await asyncio.gather(*(probe_all(Slow(b), pairs, ListSink(), concurrency=2, slots=slots) for b in "ab"))
    assert peak == {"a": 2, "b": 2}
    assert total_peak == 4


# ------------------------------------------------------------------------------------------ resume

DRIVER = textwrap.dedent(
    """
    import asyncio, json, sys
    from skillreach.runtimes.anthropic import AnthropicRuntime
    from skillreach.runtimes._retry import RetryPolicy
    from skillreach.study.contract import ProbeOptions
    from skillreach.models import Catalog, Query
    from skillreach.study.probe_log import JsonlSink
    from skillreach.study.runner import run_probes

    base_url, catalog_json, queries_json, out, fp = sys.argv[1:6]
    catalog = Catalog.model_validate_json(open(catalog_json).read())
    queries = [Query.model_validate(q) for q in json.load(open(queries_json))]

    async def main():
        rt = AnthropicRuntime("claude-sonnet-4-6", base_url=base_url, api_key="sk-test", concurrency=2,
                              retry_policy=RetryPolicy(max_retries=1, base_s=0.01))
        with JsonlSink(out) as sink:
            await run_probes(rt, catalog, [(q, 1) for q in queries], options=ProbeOptions(), sink=sink,
                             concurrency=2, fingerprint=fp)

    asyncio.run(main())
    """
)


async def test_resume_after_a_killed_run_sends_zero_duplicate_requests(tmp_path: Path) -> None:
    from skillreach.runtimes._retry import RetryPolicy
    from skillreach.runtimes.anthropic import AnthropicRuntime

    qs = [
        Query(id=f"q{i:02d}", text=f"request-{i:02d} please", expected_skill=CATALOG.names[i % 3])
        for i in range(16)
    ]
    script = ScriptResponder(
        {f"request-{i:02d}": [CATALOG.names[(i + 1) % 3], CATALOG.names[i % 3]] for i in range(16)}
    )
    (tmp_path / "catalog.json").write_text(CATALOG.model_dump_json())
    (tmp_path / "queries.json").write_text(json.dumps([q.model_dump(mode="json") for q in qs]))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    out = tmp_path / "probes.jsonl"
    with MessagesAPI(script, latency=0.05) as api:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(driver),
                api.base_url,
                str(tmp_path / "catalog.json"),
                str(tmp_path / "queries.json"),
                str(out),
                "fp-1",
            ],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        deadline = hang.Deadline(60)
        while not deadline.expired():
            if out.exists() and out.read_text().count("\n") >= 5:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)  # a hard kill mid-run
        proc.wait()
        first_phase = len(api.requests)
        done = completed_pairs(read_probes(out), "fp-1")
        assert 5 <= len(done) < 16
        # resume: only the pairs not recorded yet
        rt = AnthropicRuntime(
            "claude-sonnet-4-6",
            base_url=api.base_url,
            api_key="sk-test",
            retry_policy=RetryPolicy(max_retries=1),
        )
        todo = pending_pairs([(q, 1) for q in qs], done)
        with JsonlSink(out) as sink:
            await run_probes(
                rt, CATALOG, todo, options=ProbeOptions(), sink=sink, concurrency=4, fingerprint="fp-1"
            )
        await rt.aclose()
        second = api.requests[first_phase:]
    asked_again = {query_text(b).split()[0] for b in second}
    finished_before = {f"request-{qid[1:]}" for qid, _ in done}
    assert not (asked_again & finished_before)  # zero requests for probes already recorded
    assert len(second) == 2 * len(todo)  # two turns each, nothing else
    final = read_probes(out)
    counts = Counter((r.query_id, r.attempt) for r in final if r.error is None)
    assert set(counts) == {(q.id, 1) for q in qs}
    assert max(counts.values()) == 1  # no probe recorded twice


# ------------------------------------------------------------------------------------------ canary


def test_canary_queries_name_a_skill_outright() -> None:
    qs = canary_queries(CATALOG, 3)
    assert [q.expected_skill for q in qs] == ["docx", "pdf", "xlsx"]
    for q in qs:
        assert f"Use the {q.expected_skill} skill" in q.text


async def test_canary_passes_when_activations_are_seen() -> None:
    from skillreach.runtimes.keyword import KeywordRuntime

    records = await canary_check(KeywordRuntime(), CATALOG, ProbeOptions())
    assert all(r.invoked for r in records)


async def test_canary_blind_harness_stops_before_spending() -> None:
    with pytest.raises(HarnessBlind, match="the harness cannot see activations"):
        await canary_check(FakeRuntime({"*": []}), CATALOG, ProbeOptions())
    # every canary probe failed: the runtime never answered, so the failure is named, not "blind"
    with pytest.raises(ConfigError, match="'fake' failed on every canary probe: claude: API Error"):
        await canary_check(FakeRuntime({"*": {"error": "claude: API Error"}}), CATALOG, ProbeOptions())
    # the fake runtime without a script says that is why
    with pytest.raises(HarnessBlind, match="it has no script"):
        await canary_check(FakeRuntime(), CATALOG, ProbeOptions())
    with pytest.raises(InputError, match="empty"):
        await canary_check(FakeRuntime(), Catalog(id="e", skills=()), ProbeOptions())


# -------------------------------------------------------------------------------------------- cost


def test_estimate_cost_scales_with_probes_price_and_caching() -> None:
    price = Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.3)
    one = estimate_cost(100, CATALOG, price)
    two = estimate_cost(200, CATALOG, price)
    assert one is not None
    assert two is not None
    assert 1.9 < two / one < 2.01
    uncached = estimate_cost(100, CATALOG, price, cached=False)
    assert uncached is not None
    assert uncached > one
    assert estimate_cost(100, CATALOG, price, batch=True) == pytest.approx(one / 2)
    assert estimate_cost(100, CATALOG, None) is None
    assert estimate_cost(0, CATALOG, price) == 0.0
    # within a factor of 2 of what the stand-in measures for one-turn probes on this catalog
    assert 0.0001 < one < 1.0
