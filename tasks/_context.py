"""What every task shares: a logger that works with or without a Prefect run, the progress registry,
whether a Prefect API is there, and the study's runtime and store built from its configuration.

The CLI runs a study in-process without any Prefect server (``study.fn``), calling each task's ``.fn``;
see :func:`skillreach.flows._compose.call`. Nothing here may then start Prefect's temporary server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

from skillreach.errors import ConfigError
from skillreach.models import ProbeRecord
from skillreach.store.database import Store, open_store
from skillreach.study.config import StudyConfig
from skillreach.study.contract import Runtime

__all__ = [
    "Prober",
    "api_url",
    "close_worker",
    "in_prefect_run",
    "logger",
    "progress_for",
    "runtime_for",
    "set_progress",
    "set_worker_config",
    "store_for",
    "worker_config",
    "worker_prober",
    "worker_store",
]

ProgressCallback = Callable[[ProbeRecord], None]
T = TypeVar("T")

_progress: dict[str, ProgressCallback] = {}
_lock = threading.Lock()


def in_prefect_run() -> bool:
    """True inside a Prefect flow or task run (as opposed to a plain ``.fn`` call)."""
    from prefect.context import FlowRunContext, TaskRunContext

    return FlowRunContext.get() is not None or TaskRunContext.get() is not None


def api_url() -> str | None:
    """The configured Prefect API (``PREFECT_API_URL``), or ``None`` (no server: local mode)."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url or os.environ.get("PREFECT_API_URL")
    return str(url) if url else None


def logger() -> logging.Logger | logging.LoggerAdapter[Any]:
    """Prefect's run logger inside a run (shown in the UI), else the ``skillreach`` logger."""
    if in_prefect_run():
        from prefect.logging import get_run_logger

        return get_run_logger()
    return logging.getLogger("skillreach")


def set_progress(key: str, callback: ProgressCallback | None) -> None:
    """Register (or remove) the callback the probe batches of study ``key`` call after each probe."""
    with _lock:
        if callback is None:
            _progress.pop(key, None)
        else:
            _progress[key] = callback


def progress_for(key: str) -> ProgressCallback | None:
    with _lock:
        return _progress.get(key)


def runtime_for(config: StudyConfig) -> Runtime:
    """The study's runtime, built from its resolved configuration (API keys stay in the SDKs' own
    environment variables, read by the SDK at the point of use)."""
    from skillreach.runtimes import get_runtime

    options: dict[str, Any] = dict(config.runtime_options)
    if config.model is not None:
        options.setdefault("model", config.model)
    try:
        return get_runtime(config.runtime, settings=config.settings(), **options)
    except TypeError as exc:
        raise ConfigError(f"runtime_options for {config.runtime!r}: {exc}") from exc


def store_for(config: StudyConfig) -> Store:
    """The study's store: its ``database_url``, else SQLite under its ``home``."""
    return open_store(config.settings())


_worker: list[StudyConfig] = []
_worker_store: list[Store] = []
_prober: list[Prober] = []

KEEP_RUNTIMES = 4
"""Idle runtimes a worker keeps (one per study configuration it served lately), their clients warm."""


class Prober:
    """A task worker's probing, on an event loop of its own in a thread of its own.

    Prefect's task engine does seconds of blocking work on the worker's main loop when a batch starts
    or ends (settings, clients, state proposals); probes on that loop would wait for it with their
    responses unread. Here they run undisturbed, sharing the worker's slots (``--concurrency``, oldest
    batch first) and one warm runtime per study configuration (its SDK client and connections reused
    from batch to batch, instead of a new client and TLS context per batch).
    """

    def __init__(self, slots: int | None) -> None:
        from skillreach.study.runner import Slots

        self.slots = Slots(slots) if slots else None
        self.loop = asyncio.new_event_loop()
        self._runtimes: dict[str, list[Any]] = {}  # key -> [task building the runtime, users]
        self._thread = threading.Thread(target=self.loop.run_forever, name="skillreach-probes", daemon=True)
        self._thread.start()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` run on the probing loop (cancelling this cancels it there)."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    @contextlib.asynccontextmanager
    async def runtime(self, key: str, config: StudyConfig) -> AsyncIterator[Runtime]:
        """The warm runtime of configuration ``key`` (built off the loop the first time); on the probing
        loop only."""
        entry = self._runtimes.pop(key, None)
        if entry is None:
            entry = [asyncio.ensure_future(asyncio.to_thread(runtime_for, config)), 0]
        self._runtimes[key] = entry  # the most recently used last
        entry[1] += 1
        try:
            runtime = await entry[0]
        except BaseException:
            entry[1] -= 1
            if self._runtimes.get(key) is entry:
                del self._runtimes[key]
            raise
        try:
            yield runtime
        finally:
            entry[1] -= 1
            await self._evict()

    async def _evict(self) -> None:
        idle = [k for k, (_, users) in self._runtimes.items() if users == 0]
        while len(self._runtimes) > KEEP_RUNTIMES and idle:
            built, _ = self._runtimes.pop(idle.pop(0))
            await (await built).aclose()

    async def _close_all(self) -> None:
        for built, _ in self._runtimes.values():
            with contextlib.suppress(Exception):
                await (await built).aclose()
        self._runtimes.clear()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close_all(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


def set_worker_config(config: StudyConfig, *, slots: int | None = None) -> None:
    """What ``skillreach worker`` resolved once when it started (its store URL above all): a batch sent
    by the study carries no secret, the worker adds its own. ``slots`` caps the probes in flight on this
    worker across the batches it runs at once (``skillreach worker --concurrency``)."""
    close_worker()
    _worker[:] = [config]
    _prober[:] = [Prober(slots)]


def close_worker() -> None:
    """Close what the worker opened (its runtimes, its probing loop, its store)."""
    for prober in _prober:
        prober.close()
    for store in _worker_store:
        store.close()
    _prober[:] = []
    _worker_store[:] = []


def worker_store() -> Store:
    """The worker's store, opened (and its schema checked) once for every batch it runs: a batch pays
    for neither a new connection pool nor a migration check."""
    if not _worker_store:
        _worker_store.append(store_for(worker_config()))
    return _worker_store[0]


def worker_prober() -> Prober:
    """The worker's probing loop (:class:`Prober`)."""
    if not _prober:
        worker_config()  # the one clear error when this is no worker
        _prober.append(Prober(None))
    return _prober[0]


def worker_config() -> StudyConfig:
    if not _worker:
        raise ConfigError("a distributed batch runs on `skillreach worker` (it knows the store's URL); "
                          "start one with SKILLREACH_DATABASE_URL and PREFECT_API_URL set")
    return _worker[0]
