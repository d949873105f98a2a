"""What every task shares: a logger that works with or without a Prefect run, the progress registry,
whether a Prefect API is there, and the study's runtime and store built from its configuration.

The CLI runs a study in-process without any Prefect server (``study.fn``), calling each task's ``.fn``;
see :func:`skillreach.flows._compose.call`. Nothing here may then start Prefect's temporary server.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from skillreach.errors import ConfigError
from skillreach.models import ProbeRecord
from skillreach.store import Store, open_store
from skillreach.study.config import StudyConfig
from skillreach.study.contract import Runtime

__all__ = [
    "api_url",
    "in_prefect_run",
    "logger",
    "progress_for",
    "runtime_for",
    "set_progress",
    "set_worker_config",
    "store_for",
    "worker_config",
]

ProgressCallback = Callable[[ProbeRecord], None]

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


def set_worker_config(config: StudyConfig) -> None:
    """What ``skillreach worker`` resolved once when it started (its store URL above all): a batch sent
    by the study carries no secret, the worker adds its own."""
    _worker[:] = [config]


def worker_config() -> StudyConfig:
    if not _worker:
        raise ConfigError("a distributed batch runs on `skillreach worker` (it knows the store's URL); "
                          "start one with SKILLREACH_DATABASE_URL and PREFECT_API_URL set")
    return _worker[0]
