"""Running probes: the asyncio loop inside one batch of work, the fingerprint, the model snapshot, the
canaries.

Pure of Prefect and of network clients: a runtime (``skillreach.runtimes``) is passed in. The Prefect
batch task (``skillreach.tasks.study.probe_batch``) calls :func:`run_probes` for its slice of pairs.

- :func:`run_probes` runs the pairs with at most ``concurrency`` in flight. Each finished probe is
  written to the sink (``probes.jsonl``: appended and flushed into the file) **before** anything else
  happens with it, its slot included, so a probe already paid for survives the process being killed;
  the log is fsynced in the background (at most every :data:`SYNC_EVERY_S`) and before
  :func:`run_probes` returns (:class:`_GroupCommit`). A probe that fails after its retries is a
  record with ``error`` (never an empty selection). ``cost_cap`` stops starting new probes once the
  spend reaches it; the probes in flight finish and are written, then :class:`BudgetExceeded` is raised.
- Resume: :func:`skillreach.study.probe_log.completed_pairs` gives the (query, attempt) pairs already
  recorded without error under the same :func:`fingerprint`; a record under another fingerprint never
  counts.
- :func:`canary_check` runs a few queries that name a skill outright and raises :class:`HarnessBlind`
  when none activates anything, instead of reporting 0 % everywhere. Its probes pay for a decision
  (``routing_max_tokens``) and a request waits at most ``canary_timeout_s`` (default
  :data:`CANARY_TIMEOUT_S`; :func:`canary_timeout`), so a broken set-up is found in seconds, not
  minutes. Retries stay the study's (a rate-limited provider is waited out, not taken for a broken
  one).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import itertools
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from skillreach._io.redact import redact_text
from skillreach.errors import (
    BudgetExceeded,
    ConfigError,
    HarnessBlind,
    InputError,
    ProbeFailed,
)
from skillreach.models import Catalog, ProbeRecord, Query, QuerySet, Skill, sha256_hex
from skillreach.study.contract import Outcome, ProbeOptions, Runtime, Tracker

__all__ = [
    "CANARY_TIMEOUT_S",
    "ListSink",
    "ProbeSink",
    "Slots",
    "TeeSink",
    "canary_check",
    "canary_queries",
    "canary_timeout",
    "fingerprint",
    "pending_pairs",
    "resolve_model",
    "run_probes",
]

log = logging.getLogger("skillreach.runner")

FINGERPRINT_VERSION = 1

SYNC_EVERY_S = 0.05
"""At most one ``fsync`` of the probe log (with the store and bookkeeping after it) every this many
seconds while probes run: see :class:`_GroupCommit`."""


# ------------------------------------------------------------------------------------- fingerprint


def fingerprint(
    catalog: Catalog | str,
    query_set: QuerySet | str,
    runtime_name: str,
    resolved_model: str | None,
    options: ProbeOptions,
    *,
    extra: dict[str, Any] | None = None,
) -> str:
    """``sha256:<hex>`` of what makes two probes comparable.

    Covers the catalog digest, the query-set digest, the runtime, the resolved model snapshot and the
    options that change what is measured (``max_turns``, ``early_exit``, ``compliance``,
    ``step_budget``, a routing study's ``routing_max_tokens``); not the requested alias (the snapshot
    says it better) nor the timeout.
    ``extra`` carries runtime settings that change results (e.g. the retriever's ``k``).
    Catalog and query set may be given as their digests.
    """
    catalog_digest = catalog if isinstance(catalog, str) else catalog.digest
    if isinstance(query_set, str):
        queries_digest = query_set
    else:
        queries_digest = query_set.provenance.digest or query_set.compute_digest()
    payload = {
        "v": FINGERPRINT_VERSION,
        "catalog": catalog_digest,
        "queries": queries_digest,
        "runtime": runtime_name,
        "model": resolved_model,
        "options": {
            "max_turns": options.max_turns,
            "early_exit": options.early_exit,
            "compliance": options.compliance,
            "step_budget": options.step_budget if options.compliance else None,
            "routing_max_tokens": None if options.compliance else options.routing_max_tokens,
        },
        "extra": extra or {},
    }
    return "sha256:" + sha256_hex(json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str))


async def resolve_model(runtime: Runtime, options: ProbeOptions) -> str | None:
    """The model snapshot a runtime will use (``runtime.resolve_model()`` when it has one)."""
    resolver = getattr(runtime, "resolve_model", None)
    if resolver is not None:
        resolved: str | None = await resolver(options.model) if options.model else await resolver()
        return resolved
    return options.model or getattr(runtime, "model", None)


# ------------------------------------------------------------------------------------------- sinks


@runtime_checkable
class ProbeSink(Protocol):
    """Where finished probes go, as they finish.

    ``write`` is called from the event loop's thread, one record at a time — unless the sink has a
    true ``thread_safe`` attribute: then the records that finished together go as one group (group
    commit, :class:`_GroupCommit`), to ``stage(records)`` on the loop when the sink has it (the group
    in the file now; the call it returns, making them durable, later in a worker thread), else to
    ``write_many(records)`` (or ``write`` for each) in a worker thread. Either way the probe's task
    waits for its record to be in the sink before anything else happens with it.
    """

    def write(self, record: ProbeRecord) -> None: ...


class ListSink:
    """Keeps records in memory (tests, dry runs)."""

    def __init__(self) -> None:
        self.records: list[ProbeRecord] = []

    def write(self, record: ProbeRecord) -> None:
        self.records.append(record)


class TeeSink:
    """The log first (``probes.jsonl``, fsynced: the probe is paid for), then the store in small groups.

    ``store`` is anything with ``add_probes(study_id, records)``. A group of ``every`` records goes to
    the store on a thread of the tee's own, one group at a time and in order, so no probe holds its
    slot while the store writes (an SQLite commit is an fsync of its own); a store write that failed
    is raised at the next ``write`` or at ``flush``, which writes what is pending and waits for it.
    """

    def __init__(self, log: ProbeSink, store: Any, study_id: str, every: int = 25) -> None:
        self.log, self.store, self.study_id, self.every = log, store, study_id, every
        self.pending: list[ProbeRecord] = []
        self._lock = threading.Lock()
        self._storing: list[concurrent.futures.Future[Any]] = []
        self._store_thread: concurrent.futures.ThreadPoolExecutor | None = None
        # from worker threads when the log allows it (JsonlSink: one fsync covers the lines of every
        # thread waiting), so the event loop never waits for the disk
        self.thread_safe = bool(getattr(log, "thread_safe", False))

    def write(self, record: ProbeRecord) -> None:
        self.write_many([record])

    def write_many(self, records: Sequence[ProbeRecord]) -> None:
        """The group in the log (one write, one fsync when the log can), then in the store's pending."""
        self.stage(records)()

    def stage(self, records: Sequence[ProbeRecord]) -> Callable[[], None]:
        """The group staged in the log (:meth:`JsonlSink.stage`); the returned call makes it durable,
        then hands it to the store."""
        stage = getattr(self.log, "stage", None)
        durable = stage(records) if stage is not None else functools.partial(self._log_each, records)

        def commit() -> None:
            durable()
            self._to_store(records)

        return commit

    def _log_each(self, records: Sequence[ProbeRecord]) -> None:
        write_many = getattr(self.log, "write_many", None)
        if write_many is not None:
            write_many(records)
        else:
            for record in records:
                self.log.write(record)

    def _to_store(self, records: Sequence[ProbeRecord]) -> None:
        with self._lock:
            self._raise_failed()
            self.pending.extend(records)
            if len(self.pending) >= self.every:
                self._store(self._take())

    def flush(self) -> None:
        """The pending records to the store, and every group still being stored, written."""
        with self._lock:
            group = self._take()
            if group:
                self._store(group)
            storing, self._storing = self._storing, []
            thread, self._store_thread = self._store_thread, None
        try:
            for future in storing:
                future.result()
        finally:
            if thread is not None:
                thread.shutdown(wait=True)

    def _store(self, group: list[ProbeRecord]) -> None:
        if self._store_thread is None:
            self._store_thread = concurrent.futures.ThreadPoolExecutor(1, "skillreach-store")
        self._storing.append(self._store_thread.submit(self.store.add_probes, self.study_id, group))

    def _raise_failed(self) -> None:
        while self._storing and self._storing[0].done():
            self._storing.pop(0).result()

    def _take(self) -> list[ProbeRecord]:
        group, self.pending = self.pending, []
        return group


class Slots:
    """The probes a process may have in flight across the batches it runs at once (a task worker's
    ``--concurrency``), handed out oldest batch first, each batch within its own concurrency: the batch
    that started first keeps every slot it can use and the next one fills the slots its tail leaves. So
    a worker running two batches finishes one while the next is already probing (its set-up overlapped
    the first one's probes), instead of both finishing together and the worker idling while two new
    batches set up."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ConfigError(f"a worker's concurrency must be at least 1 (got {n})")
        self.free = n
        self._queues: dict[object, collections.deque[asyncio.Future[None]]] = {}
        self._order: dict[object, tuple[float, int]] = {}  # batch -> (start time, arrival)
        self._limit: dict[object, int] = {}
        self._busy: collections.Counter[object] = collections.Counter()
        self._arrivals = itertools.count()

    @contextlib.asynccontextmanager
    async def slot(self, batch: object, started: float, limit: int) -> AsyncIterator[None]:
        """Hold one slot for ``batch`` (started at ``started``, at most ``limit`` in flight)."""
        if batch not in self._order:
            self._order[batch] = (started, next(self._arrivals))
            self._queues[batch] = collections.deque()
        self._limit[batch] = limit
        if self.free > 0 and self._busy[batch] < limit and not self._queues[batch]:
            self.free -= 1  # a free slot means nobody eligible waits (_dispatch ran at every change)
            self._busy[batch] += 1
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queues[batch].append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._release(batch)  # granted and cancelled at once: hand the slot on
                else:
                    self._queues[batch].remove(waiter)
                    self._forget(batch)
                raise
        try:
            yield
        finally:
            self._release(batch)

    def _release(self, batch: object) -> None:
        self._busy[batch] -= 1
        self.free += 1
        self._dispatch()
        self._forget(batch)

    def _forget(self, batch: object) -> None:
        if self._busy[batch] <= 0 and not self._queues.get(batch):
            for table in (self._queues, self._order, self._limit, self._busy):
                table.pop(batch, None)

    def _dispatch(self) -> None:
        for batch in sorted(self._queues, key=self._order.__getitem__):
            queue = self._queues[batch]
            while self.free > 0 and queue and self._busy[batch] < self._limit[batch]:
                waiter = queue.popleft()
                if waiter.done():
                    continue
                waiter.set_result(None)
                self.free -= 1
                self._busy[batch] += 1
            if self.free == 0:
                return


class _GroupCommit:
    """Group commit for a thread-safe sink.

    The records that finish in one event-loop turn go to the sink as one group. A sink with ``stage``
    (the probe log, and the tee and batch sinks around it) writes the group on the loop: one
    ``write`` into the file, flushed. From then on the records survive the process being killed, so
    each probe's slot admits the next request at once. Making the group durable (the ``fsync``, then
    the store and the batch's bookkeeping: the call ``stage`` returns) runs in a worker thread, off the
    probes' slots, for every group staged since the last one: at most one such thread call at a time,
    and at most one every :data:`SYNC_EVERY_S`. So a thousand records take some forty thread hops, not
    one each, and the loop never waits for the disk. :meth:`drain` (``run_probes`` calls it before it
    returns, or raises) makes every staged record durable and raises what failed in the thread.
    A machine that loses power mid-study loses the probes in flight and at most the records of the last
    :data:`SYNC_EVERY_S` (PostgreSQL's ``synchronous_commit = off`` trade).

    A sink without ``stage`` gets ``write_many`` (or ``write`` for each) in the thread, and each probe
    awaits its group there, still inside its slot: its record is on disk before the slot moves on.
    """

    def __init__(self, sink: ProbeSink) -> None:
        self._sink = sink
        self._stage: Callable[[Sequence[ProbeRecord]], Callable[[], None]] | None = getattr(
            sink, "stage", None
        )
        self._write_many: Callable[[Sequence[ProbeRecord]], None] = (
            getattr(sink, "write_many", None) or self._each
        )
        self._every = SYNC_EVERY_S
        self._pending: list[tuple[ProbeRecord, asyncio.Future[None]]] = []
        self._busy = False  # a group is being written, or one is about to start this turn
        self._unsynced: list[Callable[[], None]] = []  # staged groups' durable calls, not yet started
        self._syncing: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_sync = -float("inf")
        self._failed: BaseException | None = None

    def _each(self, records: Sequence[ProbeRecord]) -> None:
        for record in records:
            self._sink.write(record)

    async def write(self, record: ProbeRecord) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((record, done))
        if not self._busy:
            self._busy = True
            loop.call_soon(self._start, loop)  # after this turn: its other records join the group
        await done
        if self._failed is not None:  # an earlier group could not be made durable: the run stops, with
            raise self._failed  # this record (paid for) in the log all the same

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        group, self._pending = self._pending, []
        records = [r for r, _ in group]
        if self._stage is None:
            writing = loop.run_in_executor(None, self._write_many, records)
            writing.add_done_callback(lambda w: self._finish(loop, group, w))
            return
        self._busy = False
        try:
            durable = self._stage(records)
        except Exception as exc:  # the log could not be written: every probe of the group fails
            for _, done in group:
                if not done.done():
                    done.set_exception(exc)
            return
        for _, done in group:
            if not done.done():  # its probe was cancelled meanwhile (the record is written all the same)
                done.set_result(None)
        self._unsynced.append(durable)
        self._sync_soon(loop)

    def _finish(
        self,
        loop: asyncio.AbstractEventLoop,
        group: list[tuple[ProbeRecord, asyncio.Future[None]]],
        writing: asyncio.Future[None],
    ) -> None:
        error = writing.exception() if not writing.cancelled() else asyncio.CancelledError()
        for _, done in group:
            if done.done():
                continue
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)
        if self._pending:
            self._start(loop)  # what finished while this group was written
        else:
            self._busy = False

    def _sync_soon(self, loop: asyncio.AbstractEventLoop, *, now: bool = False) -> None:
        """Start the thread call for the groups staged so far, unless one runs (it starts the next when
        it ends) or the last one started less than ``every`` ago (a timer starts it then)."""
        if self._syncing is not None or not self._unsynced:
            return
        wait = self._last_sync + self._every - loop.time()
        if wait > 0 and not now:
            if self._timer is None:
                self._timer = loop.call_later(wait, self._on_timer, loop)
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        calls, self._unsynced = self._unsynced, []
        self._last_sync = loop.time()
        syncing = loop.run_in_executor(None, _call_each, calls)
        self._syncing = syncing
        syncing.add_done_callback(lambda f: self._synced(loop, f))

    def _on_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        self._sync_soon(loop)

    def _synced(self, loop: asyncio.AbstractEventLoop, syncing: asyncio.Future[None]) -> None:
        self._syncing = None
        if not syncing.cancelled() and syncing.exception() is not None and self._failed is None:
            self._failed = syncing.exception()
        self._sync_soon(loop)

    async def drain(self) -> None:
        """Every record staged so far durable; raises what failed making a group durable."""
        loop = asyncio.get_running_loop()
        while self._syncing is not None or self._unsynced:
            if self._syncing is None:
                self._sync_soon(loop, now=True)
            if self._syncing is not None:
                await asyncio.wait([self._syncing])
        if self._failed is not None:
            raise self._failed

    def settle(self) -> None:
        """On the way out of a cancelled run: the staged groups not yet started made durable here, on
        the loop's thread (a thread call already running finishes on its own)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        calls, self._unsynced = self._unsynced, []
        _call_each(calls)


def _call_each(calls: Sequence[Callable[[], None]]) -> None:
    for call in calls:
        call()


def pending_pairs(pairs: Sequence[tuple[Query, int]], done: set[tuple[str, int]]) -> list[tuple[Query, int]]:
    """The pairs still to run, in their order."""
    return [(q, a) for q, a in pairs if (q.id, a) not in done]


# --------------------------------------------------------------------------------------- the loop


def _record(
    runtime: Runtime,
    *,
    query: Query,
    attempt: int,
    outcome: Outcome,
    options: ProbeOptions,
    fp: str,
    started: float,
    runtime_version: str | None = None,
) -> ProbeRecord:
    """The probe's record; an outcome the record refuses (a runtime or its agent reporting a negative,
    NaN or absurd cost, say) is this probe's error — its figures unknown, never the end of the run."""
    from pydantic import ValidationError

    provenance: dict[str, Any] = {
        "query_id": query.id,
        "attempt": attempt,
        "runtime": runtime.name,
        "runtime_version": runtime_version,
        "model": options.model or getattr(runtime, "model", None),
        "duration_ms": round((time.perf_counter() - started) * 1000),
        "fingerprint": fp,
        "finished_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }
    try:
        return ProbeRecord(
            **provenance,
            invoked=tuple(outcome.invoked),
            error=redact_text(outcome.error) if outcome.error else outcome.error,  # a key echoed back
            turns=outcome.turns,
            early_exit=outcome.early_exit,
            resolved_model=outcome.resolved_model,
            usage=outcome.usage,
            cost_usd=outcome.cost_usd,
            retrieved=tuple(outcome.retrieved) if outcome.retrieved is not None else None,
            tool_calls=tuple(outcome.tool_calls),
            final_text=outcome.final_text,
        )
    except ValidationError as exc:
        bad = exc.errors()[0]
        field = ".".join(str(p) for p in bad["loc"]) or "the outcome"
        value = repr(bad.get("input"))[:80]
        log.info("runtime %s reported an invalid %s on query %s: %s", runtime.name, field, query.id, value)
        return ProbeRecord(
            **provenance,
            error=redact_text(
                f"the runtime reported an invalid {field} ({value}: {bad['msg']}); the probe's result and "
                "cost are unknown"
            ),
        )


async def runtime_version(runtime: Runtime) -> str | None:
    """The runtime's version (its ``version()``; None for a runtime without one or when it fails)."""
    ask = getattr(runtime, "version", None)
    if ask is None:
        return None
    try:
        version: str | None = await ask()
    except Exception:  # a version is provenance, never a reason to stop a study
        log.info("runtime %s could not tell its version", runtime.name, exc_info=True)
        return None
    return version


async def _probe_once(runtime: Runtime, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
    try:
        return await runtime.select(query, catalog, tracker)
    except (ConfigError, HarnessBlind, BudgetExceeded):
        raise  # configuration errors and broken invariants stop the run
    except ProbeFailed as exc:
        return Outcome.from_tracker(tracker, error=exc.message)
    except Exception as exc:  # a runtime's bug is this probe's error, not the end of the study
        # data, not an alarm: the record carries the error, the run says how many at the end, and the
        # traceback goes to the log file (``--debug`` prints it)
        log.info("runtime %s failed on query %s", runtime.name, query.id, exc_info=True)
        return Outcome.from_tracker(tracker, error=f"{type(exc).__name__}: {exc}")


async def run_probes(
    runtime: Runtime,
    catalog: Catalog,
    pairs: Sequence[tuple[Query, int]],
    *,
    options: ProbeOptions,
    sink: ProbeSink,
    concurrency: int,
    fingerprint: str,
    on_probe: Callable[[ProbeRecord], None] | None = None,
    cost_cap: float | None = None,
    spent_before: float = 0.0,
    slots: Slots | None = None,
    stop_when: Callable[[], bool] | None = None,
) -> list[ProbeRecord]:
    """Run every (query, attempt) pair; return the records in finishing order.

    ``slots``, when given, are shared with the other batches running in this process (a task worker
    running several at once): a probe needs one of them as well as one of this batch's
    ``concurrency``, so the machine's limit holds across batches (the oldest batch served first).
    ``stop_when``, when it turns true, starts no further probe (the batch returns what it has: a
    distributed study's cost cap, counted across workers by the caller).

    ``spent_before`` counts spend already made by earlier batches of the same study against
    ``cost_cap``. Raises :class:`BudgetExceeded` (with ``.records``) once the cap is reached, after the
    probes in flight are written.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1 (got {concurrency})")
    if getattr(runtime, "wants_all_probes", False):  # batch mode: one request batch per turn
        concurrency = max(concurrency, len(pairs))
    batch = object()  # this batch, in the queue for the shared slots (oldest first)
    started_at = time.monotonic()
    sem = asyncio.Semaphore(concurrency)
    version = await runtime_version(runtime)
    commit = _GroupCommit(sink) if getattr(sink, "thread_safe", False) else None
    stop = asyncio.Event()
    records: list[ProbeRecord] = []
    spent = spent_before
    if cost_cap is not None and spent >= cost_cap:
        stop.set()

    async def one(query: Query, attempt: int) -> None:
        nonlocal spent
        async with sem if slots is None else slots.slot(batch, started_at, concurrency):
            if stop.is_set() or (stop_when is not None and stop_when()):
                return
            tracker = Tracker.for_query(query, options, attempt)
            started = time.perf_counter()
            outcome = await _probe_once(runtime, query, catalog, tracker)
            record = _record(
                runtime,
                query=query,
                attempt=attempt,
                outcome=outcome,
                options=options,
                fp=fingerprint,
                started=started,
                runtime_version=version,
            )
            # recorded before the slot goes to the next request: a process killed now loses at most the
            # probes that hold a slot (paid, not yet recorded)
            if commit is not None:
                await commit.write(record)  # in the log before anything else can fail
            else:
                sink.write(record)
            records.append(record)
            spent += record.cost_usd or 0.0
            if cost_cap is not None and spent >= cost_cap:
                stop.set()
        if on_probe is not None:
            on_probe(record)

    try:
        async with asyncio.TaskGroup() as group:
            for query, attempt in pairs:
                group.create_task(one(query, attempt))
    except BaseExceptionGroup as group_error:
        # the first failure (a ConfigError, a store that went away ...) as itself, not wrapped in a group;
        # the records finished before it are in the log already, and made durable here
        if commit is not None:
            with contextlib.suppress(Exception):
                await commit.drain()
        first = group_error.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
    except BaseException:  # cancelled (Ctrl-C, a timeout): what is staged made durable on the way out
        if commit is not None:
            commit.settle()
        raise
    if commit is not None:
        try:
            await commit.drain()  # every record returned is durable (and with the store, through a tee)
        except asyncio.CancelledError:
            commit.settle()
            raise
    if stop.is_set() and cost_cap is not None:
        exc = BudgetExceeded(
            f"the cost cap of ${cost_cap:.2f} was reached (${spent:.4f} spent) after {len(records)} "
            f"of {len(pairs)} probes; the results so far are kept — raise --max-cost to go on"
        )
        exc.records = records  # type: ignore[attr-defined]
        raise exc
    return records


# ----------------------------------------------------------------------------------------- canary


CANARY_TIMEOUT_S = 60.0
"""The most a canary request waits by default (the ``canary_timeout_s`` setting)."""


def canary_timeout(timeout_s: float, canary_timeout_s: float = CANARY_TIMEOUT_S) -> float:
    """The canary's request timeout: the study's, at most ``canary_timeout_s``."""
    return min(timeout_s, canary_timeout_s)


def canary_queries(catalog: Catalog, n: int = 3) -> list[Query]:
    """Up to ``n`` queries that each name one skill outright (spread over the catalog)."""
    skills = sorted(catalog.skills, key=lambda s: s.name)
    if not skills:
        return []
    step = max(1, len(skills) // n)
    chosen = skills[::step][:n]
    return [
        Query(
            id=f"canary-{i + 1}",
            text=f"Use the {s.name} skill for this. {_first_sentence(s)}",
            expected_skill=s.name,
        )
        for i, s in enumerate(chosen)
    ]


def _first_sentence(skill: Skill) -> str:
    text = " ".join(skill.description.split())
    cut = text.find(". ")
    return text[: cut + 1] if 0 < cut < 200 else text[:200]


async def canary_check(
    runtime: Runtime, catalog: Catalog, options: ProbeOptions, *, n: int = 3
) -> list[ProbeRecord]:
    """Probe a few skill-naming queries; raise :class:`HarnessBlind` when none activates a skill."""
    queries = canary_queries(catalog, n)
    if not queries:
        raise InputError(f"catalog {catalog.id!r} is empty: nothing to probe")
    sink = ListSink()
    canary_options = ProbeOptions(
        max_turns=options.max_turns,
        early_exit=True,
        model=options.model,
        timeout_s=options.timeout_s,
        routing_max_tokens=options.routing_max_tokens,
    )
    await run_probes(
        runtime,
        catalog,
        [(q, 1) for q in queries],
        options=canary_options,
        sink=sink,
        concurrency=len(queries),
        fingerprint="canary",
    )
    if any(r.invoked for r in sink.records):
        return sink.records
    errors = sorted({r.error for r in sink.records if r.error})
    if errors and all(r.error for r in sink.records):  # it never answered: say why, not "blind"
        slow = any("timed out" in e for e in errors)
        why = (
            f" (a canary request waits at most {canary_options.timeout_s:g}s for a reply of at most "
            f"{canary_options.routing_max_tokens} tokens: a model this slow needs a faster server or a "
            "smaller routing_max_tokens)"
            if slow
            else ""
        )
        raise ConfigError(
            f"runtime {runtime.name!r} failed on every canary probe: {'; '.join(errors)[:400]}{why}"
        )
    hint = getattr(runtime, "blind_hint", None)  # a runtime that knows why it selects nothing says so
    if hint:
        raise HarnessBlind(f"the harness cannot see activations with runtime {runtime.name!r}: {hint}")
    why = f"; errors: {'; '.join(errors)[:300]}" if errors else ""
    raise HarnessBlind(
        f"the harness cannot see activations: none of {len(queries)} canary queries naming a skill "
        f"outright activated one with runtime {runtime.name!r}{why}. Check the runtime's set-up "
        "(skills folder, tool name, model) before spending on a study"
    )
