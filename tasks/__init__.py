"""Prefect tasks wrapping the core's functions (retries, cache keys); the unit of probing work is a batch.

Tasks take the study's resolved :class:`~skillreach.study.config.StudyConfig` and never read settings
themselves. What the flows, the CLI and ``skillreach worker`` share with them — whether a Prefect run is
tracking us, the progress bar, the worker's runtimes and store — is exported here.
"""

from __future__ import annotations

from skillreach.tasks._context import (
    close_worker,
    in_prefect_run,
    runtime_for,
    set_progress,
    set_worker_config,
    worker_store,
)

__all__ = [
    "close_worker",
    "in_prefect_run",
    "runtime_for",
    "set_progress",
    "set_worker_config",
    "worker_store",
]
