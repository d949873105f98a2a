"""The study's tasks up to the probes: find the skills, assemble the catalog, plan, estimate the cost,
canary, probe a batch. Each wraps functions of :mod:`skillreach.study` with Prefect's retries and cache
keys (no tags: see DEVELOPERS.md, "Tasks carry no tags").

The unit of Prefect work is a **batch** of probes (50–200), run with asyncio inside the task
(:func:`skillreach.study.runner.run_probes`); Prefect retries a whole batch, and a cache key built from
the batch's provenance lets a re-run skip finished batches.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.errors import BudgetExceeded, SkillreachError
from skillreach.models import ProbeRecord
from skillreach.store.database import StudyLock, lock_holder, lock_study
from skillreach.study.config import StudyConfig
from skillreach.study.plan import (
    SkillsFound,
    StudyInputs,
    StudyPlan,
    assemble_inputs,
    batch_key,
    claim_out_dir,
    default_out_dir,
    find_skills,
    finer_tail,
    plan_study,
    probe_options,
    study_id_for,
)
from skillreach.study.probe_log import JsonlSink, completed_pairs, latest_records, read_probes, write_probes
from skillreach.tasks._context import (
    api_url,
    in_prefect_run,
    logger,
    progress_for,
    runtime_for,
    set_progress,
    store_for,
)
from skillreach.tasks._prefect_adapter import force_task_run_state, task_workers_serving
from skillreach.tasks.prefect_api import ApiProblem

__all__ = [
    "assemble_catalog",
    "canary",
    "discover_skills",
    "estimate_spend",
    "prepare_study",
    "probe_batch",
    "probe_batch_remote",
    "probe_here",
    "probe_on_workers",
    "release_study",
    "task_workers_seen",
    "use_task_workers",
]


@task(name="discover_skills", cache_policy=NO_CACHE)
async def discover_skills(config: StudyConfig) -> SkillsFound:
    """Every skill under the study's folders (a file that does not parse is reported and skipped)."""
    return find_skills(config, logger())


@task(name="assemble_catalog", cache_policy=NO_CACHE)
async def assemble_catalog(config: StudyConfig) -> StudyInputs:
    """Discover the skills, build the resident catalog, load and validate the query set."""
    return assemble_inputs(config, await discover_skills.fn(config), logger())


def _flow_run_id() -> str | None:
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return str(ctx.flow_run.id) if ctx is not None and ctx.flow_run is not None else None


# (probes.jsonl, fingerprint) -> the pairs finished without error: a batch (and its retries) looks here
# instead of reading the whole log again, so probing costs stay linear in the number of probes.
_finished: dict[tuple[str, str], set[tuple[str, int]]] = {}
_finished_lock = threading.Lock()


def _finished_pairs(plan: StudyPlan) -> set[tuple[str, int]]:
    key = (str(plan.probes_path.resolve()), plan.fingerprint)
    with _finished_lock:
        pairs = _finished.get(key)
        if pairs is None:  # another process planned this study: read its log once
            pairs = _finished[key] = completed_pairs(
                read_probes(plan.probes_path, missing_ok=True), plan.fingerprint
            )
        return pairs


# study id -> the lock this process holds on it and how many plans of this process hold it (re-entrant
# within a process: the lock keeps other processes out; a deployment run is a process of its own)
_locks: dict[str, tuple[StudyLock, int]] = {}


def _hold_study_lock(config: StudyConfig, study_id: str, out: Path) -> None:
    """Take the study's lock for the rest of the study (:class:`StudyLocked` naming the holder when
    another process runs it)."""
    with _finished_lock:
        held = _locks.get(study_id)
        if held is not None:
            _locks[study_id] = (held[0], held[1] + 1)
            return
    lock = lock_study(config.settings(), study_id, out, holder=lock_holder(_flow_run_id()))
    with _finished_lock:
        _locks[study_id] = (lock, 1)


def _release_study_lock(study_id: str) -> None:
    with _finished_lock:
        held = _locks.pop(study_id, None)
        if held is not None and held[1] > 1:
            _locks[study_id] = (held[0], held[1] - 1)
            return
    if held is not None:
        held[0].release()


@task(name="release_study", cache_policy=NO_CACHE)
async def release_study(plan: StudyPlan) -> None:
    """Give back the study's lock (at the end of the study, however it ended)."""
    _release_study_lock(plan.study_id)


def _progress_of(config: StudyConfig, out: Path) -> Any:
    """The progress display of a study; one started with no ``--out`` is registered under ``None``
    until its folder is known, then under the folder (where the probe batches look it up)."""
    callback = progress_for(str(out))
    if callback is None and config.out is None:
        callback = progress_for(str(None))
        if callback is not None:
            set_progress(str(out), callback)
            if hasattr(callback, "folder"):
                callback.folder(out)
    return callback


@task(name="prepare_study", cache_policy=NO_CACHE)
async def prepare_study(
    config: StudyConfig, inputs: StudyInputs, kind: str = "study", slot: str | None = None
) -> StudyPlan:
    """Resolve the model snapshot, fix the fingerprint, take the study's lock, open the study in the
    store, plan the batches.

    A study given no ``--out`` writes under a folder derived from its fingerprint (and a scheduled
    run's ``slot``); a study re-run into the same folder with the same fingerprint resumes: pairs
    already in ``probes.jsonl`` without error are not run again.
    """
    from skillreach.study.runner import fingerprint, resolve_model
    from skillreach.tasks._orphans import watch_parent

    watch_parent()  # a worker-started run ends with its worker (kill -9 of the worker leaves no prober)
    options = probe_options(config)
    runtime = runtime_for(config)
    try:
        resolved = await resolve_model(runtime, options)
    finally:
        await runtime.aclose()
    fp = fingerprint(
        inputs.catalog,
        inputs.query_set,
        config.runtime,
        resolved,
        options,
        extra=dict(sorted(config.runtime_options.items())),
    )
    out = config.out or claim_out_dir(default_out_dir(config, kind=kind, fingerprint=fp, slot=slot))
    existing = read_probes(out / "probes.jsonl", missing_ok=True)
    # `skillreach run --out DIR` without --force: one configuration per folder. A derived folder is its
    # fingerprint's alone; the attempts are not in it: a study with more attempts extends the folder and
    # one with fewer reads its subset (never an error for the other caller)
    if config.exclusive_out and config.out is not None:
        from skillreach.study.out_guard import check_out_folder

        check_out_folder(out, existing, fingerprint=fp, config=config, inputs=inputs, resolved_model=resolved)
    study_id = study_id_for(fp, out)
    _hold_study_lock(config, study_id, out)
    try:
        return await _plan_locked(
            config, inputs, kind, fp=fp, resolved=resolved, out=out, study_id=study_id, existing=existing
        )
    except BaseException:
        _release_study_lock(study_id)
        raise


async def _plan_locked(
    config: StudyConfig,
    inputs: StudyInputs,
    kind: str,
    *,
    fp: str,
    resolved: str | None,
    out: Path,
    study_id: str,
    existing: list[ProbeRecord],
) -> StudyPlan:
    with store_for(config) as store:
        recorded = store.count_probes(study_id) if store.get_study(study_id) is not None else 0
        plan = plan_study(
            config,
            inputs,
            out=out,
            fingerprint=fp,
            resolved_model=resolved,
            existing=existing,
            recorded_in_store=recorded,
        )
        store.begin_study(
            study_id,
            out_dir=str(out.resolve()),
            runtime=config.runtime,
            model=config.model,
            catalog_id=inputs.catalog.id,
            catalog_digest=inputs.catalog.digest,
            queries_digest=inputs.query_set.provenance.digest or inputs.query_set.compute_digest(),
            fingerprint=fp,
            attempts=config.attempts,
            config=config.public_dict(),
            kind=kind,
            flow_run_id=_flow_run_id(),
        )
        if existing:
            # bring the store level with a log written by an earlier (maybe interrupted) run
            store.add_probes(study_id, latest_records(existing, fp))
    with _finished_lock:
        _finished[(str(plan.probes_path.resolve()), fp)] = completed_pairs(existing, fp)
    callback = _progress_of(config, out)
    if callback is not None and hasattr(callback, "plan"):
        callback.plan(plan.total, plan.done)
    if plan.done:
        logger().info("resuming %s: %d of %d probes already recorded", out, plan.done, plan.total)
    return plan


@task(name="estimate_spend", cache_policy=NO_CACHE)
async def estimate_spend(config: StudyConfig, inputs: StudyInputs, plan: StudyPlan) -> dict[str, Any] | None:
    """What the pending probes should cost (probes × expected tokens × price), said before spending.

    ``None`` when nothing is pending or the model has no price (offline runtimes). The line is logged
    (a warning when it passes what ``max_cost`` leaves: the cap will stop the run early, results kept)
    and handed to the CLI's progress display when there is one.
    """
    from skillreach.runtimes import capability, reports_usage, request_tokens
    from skillreach.study.cost import estimate_study

    estimate = estimate_study(
        config,
        inputs.catalog,
        sum(len(b) for b in plan.batches),
        model=plan.resolved_model or config.model,
        spent=plan.spent_usd,
        paid=capability(config.runtime, "paid"),
        cached_listing=capability(config.runtime, "cached_listing"),
        request_tokens=request_tokens(config.runtime),
        reports_usage=reports_usage(config.runtime, config.runtime_options),
    )
    if estimate is None:
        return None
    callback = progress_for(str(plan.out))
    shown = callback is not None and hasattr(callback, "estimate")
    if shown:
        callback.estimate(estimate.line, estimate.over_cap)  # type: ignore[union-attr]
    # a warning when over the cap (or unpriced under a cap), unless the CLI's display has just said it
    loud = estimate.over_cap or (estimate.usd is None and config.max_cost is not None)
    logger().log(logging.WARNING if loud and not shown else logging.INFO, "cost estimate: %s", estimate.line)
    return estimate.as_dict()


@task(name="canary", cache_policy=NO_CACHE)
async def canary(config: StudyConfig, inputs: StudyInputs) -> int:
    """A few skill-naming probes; :class:`HarnessBlind` when the harness sees no activation at all."""
    from dataclasses import replace

    from skillreach.study.runner import canary_check, canary_timeout

    timeout_s = canary_timeout(config.timeout_s, config.canary_timeout_s)
    runtime = runtime_for(config.model_copy(update={"timeout_s": timeout_s}))
    overflow = getattr(runtime, "listing_warning", None)  # an agent that caps its skills listing (codex)
    line = overflow(inputs.catalog) if callable(overflow) else None
    if line:
        logger().warning("%s", line)
    try:
        options = replace(probe_options(config), timeout_s=timeout_s)
        records = await canary_check(runtime, inputs.catalog, options)
    finally:
        await runtime.aclose()
    return sum(1 for r in records if r.invoked)


def _batch_cache_key(_context: Any, parameters: dict[str, Any]) -> str:
    plan: StudyPlan = parameters["plan"]
    return batch_key(f"{plan.fingerprint}|{plan.token}", list(parameters["pairs"]))


def _retry_unless_our_error(_task: Any, _run: Any, state: Any) -> bool:
    """Retry a batch for infrastructure failures, never for a user error or the cost cap.

    Prefect passes ``Failed(data=<the exception>)``; the exception is read from ``data`` directly
    (``state.result()`` would be a coroutine inside the async engine).
    """
    return not isinstance(getattr(state, "data", None), SkillreachError)


class _FinishedSink:
    """The probe log and the store (:class:`~skillreach.study.runner.TeeSink`), and the batch's record
    of what finished (what a retry of the batch skips). Written from worker threads when the tee
    allows it."""

    def __init__(self, tee: Any, finished: set[tuple[str, int]], here: _Here | None = None) -> None:
        self.tee, self.finished, self.here = tee, finished, here
        self.thread_safe = bool(getattr(tee, "thread_safe", False))  # set.add holds under threads

    def write(self, record: Any) -> None:
        self.write_many([record])

    def write_many(self, records: Any) -> None:  # a group: one write and one fsync of the probe log
        self.stage(records)()

    def stage(self, records: Any) -> Any:
        """The group in the log, its spend counted (the cost cap across batches), now; made durable,
        then counted as finished, by the call returned (in a thread)."""
        durable = self.tee.stage(records)
        if self.here is not None:
            self.here.add(records)

        def commit() -> None:
            durable()
            self.finished.update((r.query_id, r.attempt) for r in records if r.error is None)

        return commit


@task(
    name="probe_batch",
    retries=2,
    retry_delay_seconds=[5, 30],
    retry_condition_fn=_retry_unless_our_error,
    cache_key_fn=_batch_cache_key,
    cache_expiration=timedelta(days=30),
    persist_result=True,
    result_serializer="json",
)
async def probe_batch(
    config: StudyConfig,
    inputs: StudyInputs,
    plan: StudyPlan,
    pairs: tuple[tuple[str, int], ...],
    *,
    batch: int = 0,
    spent_before: float = 0.0,
) -> dict[str, Any]:
    """Probe one batch of (query id, attempt) pairs with asyncio; every record on disk as it finishes.

    Pairs already recorded under the study's fingerprint (an earlier try of this batch) are skipped.
    Returns a small JSON summary (the records themselves are in probes.jsonl and the store).
    """
    from skillreach.study.runner import TeeSink, run_probes

    by_id = inputs.query_set.by_id()
    finished = _finished_pairs(plan)
    todo = [(by_id[qid], a) for qid, a in pairs if (qid, a) not in finished]
    here = _here.get(plan.study_id)  # batches of probe_here: their shared runtime, store, log and slots
    records: list[Any] = []
    with contextlib.ExitStack() as own:
        if here is None:
            runtime = runtime_for(config)
            store = own.enter_context(store_for(config))
            jsonl = own.enter_context(JsonlSink(plan.probes_path))
        else:
            runtime, store, jsonl = here.parts()
        tee = TeeSink(jsonl, store, plan.study_id)
        try:
            records = await run_probes(
                runtime,
                inputs.catalog,
                todo,
                options=probe_options(config),
                sink=_FinishedSink(tee, finished, here),
                concurrency=config.concurrency,
                fingerprint=plan.fingerprint,
                on_probe=progress_for(str(plan.out)),
                cost_cap=config.max_cost,
                spent_before=spent_before if here is None else here.spent,
                slots=None if here is None else here.slots,
                stop_when=None if here is None else here.over_cap,
            )
        finally:
            await asyncio.to_thread(tee.flush)  # the store's last group, off the loop the probes use
            if here is None:
                await runtime.aclose()
    if here is not None and here.over_cap():  # the cap, reached with the batch beside this one
        exc = BudgetExceeded(
            f"the cost cap of ${config.max_cost:.2f} was reached (${here.spent:.4f} spent) after "
            f"{len(records)} of {len(todo)} probes; the results so far are kept — raise --max-cost to go on"
        )
        exc.records = records  # type: ignore[attr-defined]
        raise exc
    errors = [r.error for r in records if r.error]
    if errors:
        logger().info(
            "batch %d: %d of %d probes failed (first: %s)", batch, len(errors), len(records), errors[0][:200]
        )
    return {
        "batch": batch,
        "probes": len(records),
        "errors": len(errors),
        "cost_usd": round(sum(r.cost_usd or 0.0 for r in records), 6),
        "skipped": len(pairs) - len(todo),
    }


BATCHES_AT_ONCE = 2
"""Batches of a study probing at once in one process (:func:`probe_here`)."""


class _Here:
    """What the batches of one study probing in this process share: one runtime (its connections warm
    from batch to batch, one rate limiter), one store, one probe log, ``concurrency`` slots handed out
    oldest batch first (:class:`~skillreach.study.runner.Slots`), and the study's spend (the cost cap
    counts both batches in flight)."""

    def __init__(self, config: StudyConfig, plan: StudyPlan, spent: float) -> None:
        from skillreach.study.runner import Slots

        self.config, self.path = config, plan.probes_path
        self.slots = Slots(config.concurrency)
        self.cap = config.max_cost
        self.spent = spent
        self._lock = threading.Lock()
        self._runtime: Any = None
        self._store: Any = None
        self._log: JsonlSink | None = None

    def parts(self) -> tuple[Any, Any, JsonlSink]:
        """(runtime, store, probe log), each made by the first batch that needs it (inside its task
        run: a failure there is that batch's, retried by Prefect like any batch's)."""
        if self._runtime is None:
            self._runtime = runtime_for(self.config)
        if self._store is None:
            self._store = store_for(self.config)
        if self._log is None:
            self._log = JsonlSink(self.path)
        return self._runtime, self._store, self._log

    def add(self, records: Any) -> None:  # as each group of records reaches the probe log
        cost = sum(r.cost_usd or 0.0 for r in records)
        with self._lock:
            self.spent += cost

    def over_cap(self) -> bool:
        return self.cap is not None and self.spent >= self.cap

    async def aclose(self) -> None:
        try:
            if self._runtime is not None:
                await self._runtime.aclose()
        finally:
            if self._log is not None:
                self._log.close()
            if self._store is not None:
                self._store.close()


_here: dict[str, _Here] = {}


async def probe_here(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, spent_before: float = 0.0, *, batch_task: Any
) -> dict[str, Any]:
    """Every batch of the study in this process (no task workers), each a ``batch_task``
    (:func:`probe_batch`) run as before (a tracked task run inside a Prefect run), up to
    :data:`BATCHES_AT_ONCE` at once: the next batch sets up and takes the slots the previous one's
    tail leaves, instead of the probes in flight draining to zero at the end of each batch. They share
    one runtime, store and probe log and the ``concurrency`` slots (oldest batch first), so the
    in-flight bound, the rate limits and the cost cap hold across them. Returns the probes run and
    their cost."""
    here = _here[plan.study_id] = _Here(config, plan, spent_before)
    window = asyncio.Semaphore(BATCHES_AT_ONCE)
    summaries: list[dict[str, Any]] = []

    async def one(i: int, pairs: tuple[tuple[str, int], ...]) -> None:
        async with window:
            kw = {"batch": i, "spent_before": here.spent}
            run = batch_task if in_prefect_run() else batch_task.fn  # as flows._compose.call does
            summaries.append(await run(config, inputs, plan, pairs, **kw))

    try:
        async with asyncio.TaskGroup() as group:
            for i, pairs in enumerate(plan.batches):
                group.create_task(one(i, pairs))
    except BaseExceptionGroup as failed:  # the first failure as itself (the cost cap, a config error)
        first = failed.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
    finally:
        _here.pop(plan.study_id, None)
        await here.aclose()
    return {
        "probes": sum(s["probes"] for s in summaries),
        "cost_usd": round(sum(s["cost_usd"] for s in summaries), 6),
    }


# --------------------------------------------------------------------------- batches on task workers
#
# With a Prefect server, a shared (PostgreSQL) store and task workers serving ``probe_batch_remote``
# (``skillreach worker``), a study's batches are Prefect background tasks: ``.delay()`` puts each on the
# server's queue and any worker on any machine takes it. Parameters travel through Prefect's task
# scheduling storage (small: the catalog, the batch's queries, the pairs); results do not travel at all —
# every record is in the store, inserted once, and ``probes.jsonl`` is written from the store at the end.

BATCH_TASK = "probe_batch_remote"
CRASH_AFTER_S = 15.0
"""A running batch whose advisory lock stays free this long (every poll) lost its worker."""
MAX_RESUBMITS = 5


class _StoreSink:
    """Each finished probe straight into the shared store (insert-once), from worker threads: the store
    is the probe log of a distributed study."""

    thread_safe = True
    CHECK_EVERY_S = 0.25

    def __init__(self, store: Any, study_id: str, fingerprint: str = "", cap: float | None = None) -> None:
        self.store, self.study_id, self.fingerprint, self.cap = store, study_id, fingerprint, cap
        self._lock = threading.Lock()
        self._checked_at = 0.0
        self._study_spent = 0.0  # the whole study's spend at the last look, plus this batch's since
        self.capped = False

    def write(self, record: Any) -> None:
        self.write_many([record])

    def write_many(self, records: Any) -> None:
        """The records that finished together (the runner's group commit): one INSERT."""
        self.store.record_probes(self.study_id, records)
        if self.cap is None:
            return
        with self._lock:
            self._study_spent += sum(r.cost_usd or 0.0 for r in records)
            self.capped = self._study_spent >= self.cap
            due = time.monotonic() - self._checked_at >= self.CHECK_EVERY_S
        if due:
            self.look()

    def look(self) -> None:
        """The whole study's spend from the store (every worker's): at most every CHECK_EVERY_S a batch."""
        if self.cap is None:
            return
        spent = self.store.spent(self.study_id, self.fingerprint)
        with self._lock:
            self._checked_at = time.monotonic()
            self._study_spent = max(self._study_spent, spent)
            self.capped = self._study_spent >= self.cap


@task(
    name=BATCH_TASK,
    retries=2,
    retry_delay_seconds=[5, 30],
    retry_condition_fn=_retry_unless_our_error,
    cache_policy=NO_CACHE,  # the store says what is done; parameters go pickled through scheduling storage
)
async def probe_batch_remote(work: dict[str, Any]) -> dict[str, Any]:
    """One batch on a task worker (``skillreach worker``): ``work`` is plain JSON (the study's public
    configuration, the catalog, the batch's queries and pairs); the worker adds its own secrets (the
    store's URL) from the configuration it resolved when it started. Pairs the store already has
    without error are skipped; each probe is inserted into the store as it finishes."""
    from skillreach.models import Catalog, Query
    from skillreach.study.runner import run_probes
    from skillreach.tasks._context import worker_config, worker_prober, worker_store

    config = StudyConfig.model_validate(work["config"]).with_secrets_from(worker_config())
    catalog = Catalog.model_validate(work["catalog"])
    by_id = {q["id"]: Query.model_validate(q) for q in work["queries"]}
    pairs = [(str(q), int(a)) for q, a in work["pairs"]]
    study_id = str(work["study_id"])
    began = time.perf_counter()
    store = worker_store()  # opened once per worker, shared by the batches it runs at once
    prober = worker_prober()

    fingerprint = str(work["fingerprint"])

    async def probe() -> tuple[list[ProbeRecord], int, float]:
        """On the worker's probing loop, with the warm runtime of this study's configuration."""
        async with prober.runtime(json.dumps(work["config"], sort_keys=True), config) as runtime:
            finished = await asyncio.to_thread(store.finished_pairs, study_id, pairs)
            todo = [(by_id[q], a) for q, a in pairs if (q, a) not in finished]
            # the cost cap counts every worker's spend: the sink looks at the study's total in the store
            # four times a second, and the batch starts no probe once it reaches the cap
            sink = _StoreSink(store, study_id, fingerprint, config.max_cost)
            await asyncio.to_thread(sink.look)
            set_up = time.perf_counter() - began
            records = await run_probes(
                runtime,
                catalog,
                todo,
                options=probe_options(config),
                sink=sink,
                concurrency=config.concurrency,
                fingerprint=fingerprint,
                slots=prober.slots,
                stop_when=lambda: sink.capped,
            )
        return records, len(todo), set_up

    # the lock first (released by the kernel if this process dies), off the event loop
    held = await asyncio.to_thread(store.hold_lock, str(work["lock"]))
    try:
        records, todo, set_up = await prober.run(probe())
    finally:
        if held is not None:
            held.close()
    logger().info(
        "batch %s: %d probes (%d recorded already) in %.1f s, set-up %.2f s",
        work["batch"],
        len(records),
        len(pairs) - todo,
        time.perf_counter() - began,
        set_up,
    )
    return {
        "batch": work["batch"],
        "probes": len(records),
        "errors": sum(1 for r in records if r.error),
        "skipped": len(pairs) - todo,
    }


def _store_is_shared(config: StudyConfig) -> bool:
    url = config.database_url.get_secret_value() if config.database_url else ""
    return url.startswith("postgresql")


async def task_workers_seen() -> int:
    """How many task workers the Prefect server knows that serve ``probe_batch_remote`` (0 without a
    server); raises :class:`~skillreach.tasks.prefect_api.ApiProblem` when it cannot tell."""
    return await task_workers_serving([probe_batch_remote.task_key])


async def use_task_workers(config: StudyConfig) -> int:
    """How many task workers to distribute the batches over: those serving them when this is a tracked
    run and the store is shared; 0 otherwise (they run in this process, the single-machine path)."""
    from skillreach.tasks._context import in_prefect_run

    if not in_prefect_run() or api_url() is None or not _store_is_shared(config):
        return 0
    try:
        n = await task_workers_seen()
    except Exception as exc:  # an old server without the endpoint, a server too slow: run in-process
        logger().info("could not ask the Prefect server for task workers (%s); probing in this process",
                      exc if isinstance(exc, ApiProblem) else type(exc).__name__)
        return 0
    if n:
        logger().info("probing on %d task worker(s) (%s)", n, BATCH_TASK)
    return n


def _submit(work: dict[str, Any]) -> Any:
    """``probe_batch_remote.delay(work)`` outside the flow run's context: Prefect would pickle that
    context (the Flow object holds a thread lock) into the task's parameters and fail. The batch runs
    are named after the study (``batch 3 of st-…``) instead of nested under its flow run; not tagged:
    a tagged task run costs a concurrency-slot acquisition with a lease (DEVELOPERS.md)."""
    import contextvars

    name = f"batch {work['batch']} of {work['study_id']}"
    task_ = probe_batch_remote.with_options(task_run_name=name)
    return contextvars.Context().run(task_.delay, work)


def _work_for(
    config: StudyConfig,
    inputs: StudyInputs,
    plan: StudyPlan,
    pairs: Sequence[tuple[str, int]],
    *,
    batch: int,
    tries: int,
) -> dict[str, Any]:
    by_id = inputs.query_set.by_id()
    return {
        "config": config.model_dump(mode="json"),
        "catalog": inputs.catalog.model_dump(mode="json"),
        "queries": [by_id[q].model_dump(mode="json") for q in sorted({q for q, _ in pairs})],
        "pairs": [[q, a] for q, a in pairs],
        "study_id": plan.study_id,
        "fingerprint": plan.fingerprint,
        "batch": batch,
        "lock": f"{plan.study_id}/{batch}/{tries}",
        "spent_before": plan.spent_usd,
    }


async def probe_on_workers(
    config: StudyConfig, inputs: StudyInputs, plan: StudyPlan, *, workers: int = 1, poll_s: float = 1.0
) -> dict[str, Any]:
    """Submit every batch as a background task, wait for all, and write ``probes.jsonl`` from the store.

    A batch whose worker died (its task run started, its PostgreSQL advisory lock free: the kernel
    closed the dead worker's connection) is marked Crashed and submitted again; the new run skips what
    the store has, so only the probes in flight at the kill are paid twice. A batch that fails after
    Prefect's retries fails the study.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterId
    from prefect.states import Cancelled, Crashed

    from skillreach.errors import BudgetExceeded, ProbeFailed

    on_probe = _progress_of(config, plan.out)
    seen: set[int] = set()  # the store rows shown to the progress display, or counted as resumed
    if on_probe is not None:  # before any batch is submitted: the workers start storing at once
        with store_for(config) as store:
            seen.update(await asyncio.to_thread(store.probe_ids, plan.study_id))
    futures: dict[int, tuple[Any, int]] = {}
    batches = finer_tail(plan.batches, workers)  # shrinking towards the end: the workers run out together
    for i, pairs in enumerate(batches):
        futures[i] = (_submit(_work_for(config, inputs, plan, pairs, batch=i, tries=0)), 0)
    suspect: dict[int, float] = {}  # batch -> when its lock was first seen free while it ran
    resubmitted = 0

    async def lost_worker(client: Any, store: Any, i: int, future: Any, *, tries: int, state: Any) -> bool:
        """Whether batch ``i``'s run lost its worker (marking it Crashed when this poll decides it)."""
        if state.is_crashed():
            return True
        if not state.is_running():
            return False  # scheduled or pending: not started yet
        if not await asyncio.to_thread(store.lock_free, f"{plan.study_id}/{i}/{tries}"):
            suspect.pop(i, None)
            return False
        if time.monotonic() - suspect.setdefault(i, time.monotonic()) < CRASH_AFTER_S:
            return False  # starting (the lock comes first thing) or finishing: look again
        await force_task_run_state(
            client, future.task_run_id, Crashed(message="its worker stopped (its store lock is free)")
        )
        return True

    def resubmit(i: int, tries: int) -> None:
        nonlocal resubmitted
        if tries >= MAX_RESUBMITS:
            raise ProbeFailed(f"batch {i} lost its worker {tries + 1} times; see the workers")
        logger().warning("batch %d lost its worker; submitting it again", i)
        suspect.pop(i, None)
        resubmitted += 1
        again = _work_for(config, inputs, plan, batches[i], batch=i, tries=tries + 1)
        futures[i] = (_submit(again), tries + 1)

    progress = time.monotonic()  # the last time a batch of this study was seen running or finishing

    def follow(store: Any) -> None:
        """Feed the progress display the records the workers stored since the last poll."""
        for row_id, record in store.probes_not_in(plan.study_id, seen):
            seen.add(row_id)
            if record.fingerprint == plan.fingerprint:
                on_probe(record)

    capped: list[float] = []  # the study's spend when the cost cap was seen reached

    async def over_budget(client: Any, store: Any, runs: dict[Any, Any]) -> None:
        """The cost cap across every worker: once the study's recorded spend reaches it, the batches
        not started are cancelled; a running one starts no further probe (its sink sees the same
        spend) and finishes; then the study stops with the cost-cap error."""
        assert config.max_cost is not None
        spent = await asyncio.to_thread(store.spent, plan.study_id, plan.fingerprint)
        if spent < config.max_cost:
            return
        capped.append(spent)
        for i, (future, _) in list(futures.items()):
            run = runs.get(future.task_run_id)
            if run is not None and run.state is not None and run.state.is_running():
                continue
            with contextlib.suppress(Exception):
                await force_task_run_state(
                    client, future.task_run_id, Cancelled(message="the study's cost cap was reached")
                )
            del futures[i]

    with store_for(config) as store:
        current: list[ProbeRecord] = []
        try:
            async with get_client() as client:
                while futures:
                    await asyncio.sleep(poll_s)
                    if on_probe is not None:
                        await asyncio.to_thread(follow, store)
                    ids = [f.task_run_id for f, _ in futures.values()]
                    runs = {
                        r.id: r
                        for r in await client.read_task_runs(
                            task_run_filter=TaskRunFilter(id=TaskRunFilterId(any_=ids))
                        )
                    }
                    if config.max_cost is not None and not capped:
                        await over_budget(client, store, runs)
                    waiting: list[int] = []
                    for i, (future, tries) in list(futures.items()):
                        run = runs.get(future.task_run_id)
                        state = run.state if run is not None else None
                        if state is None:
                            continue
                        if state.is_completed() or state.is_running():
                            progress = time.monotonic()
                        if state.is_completed() or (capped and state.is_final()):
                            del futures[i]
                        elif capped:  # a running batch finishing after the cap: wait for it
                            if await lost_worker(client, store, i, future, tries=tries, state=state):
                                del futures[i]
                        elif state.is_failed() or state.is_cancelled():
                            why = state.message or "no message"
                            raise ProbeFailed(f"batch {i} {state.name.lower()}: {why}")
                        elif await lost_worker(client, store, i, future, tries=tries, state=state):
                            resubmit(i, tries)
                        elif state.is_scheduled() or state.is_pending():
                            waiting.append(i)
                    if waiting and not capped and time.monotonic() - progress >= CRASH_AFTER_S:
                        # nothing of this study runs, yet batches wait: a worker took them off the server's
                        # queue (it holds the next one while it runs one) and died. Cancelled, a late copy
                        # would be refused by the server; the new runs skip what the store has.
                        for i in waiting:
                            future, tries = futures[i]
                            held = Cancelled(message="held by a worker that stopped")
                            await force_task_run_state(client, future.task_run_id, held)
                            resubmit(i, tries)
                        progress = time.monotonic()
            if capped:
                assert config.max_cost is not None
                raise BudgetExceeded(
                    f"the cost cap of ${config.max_cost:.2f} was reached (${capped[0]:.4f} spent across the "
                    "workers); the results so far are kept — raise --max-cost to go on"
                )
        finally:  # the local log from the store, whatever ended the wait (loses nothing)
            if on_probe is not None:
                await asyncio.to_thread(follow, store)  # the last ones, before the bar stops
            records = await asyncio.to_thread(store.probes, plan.study_id)
            current = [r for r in records if r.fingerprint == plan.fingerprint]
            await asyncio.to_thread(write_probes, plan.probes_path, current)
    ran = max(0, len(current) - plan.done)
    return {
        "batches": len(batches),
        "probes": ran,
        "errors": sum(1 for r in current if r.error),
        "cost_usd": round(sum(r.cost_usd or 0.0 for r in current) - plan.spent_usd, 6),
        "resubmitted": resubmitted,
    }
