"""How a flow calls a task: as a Prefect task inside a Prefect run, as plain code otherwise.

``study.fn(config)`` (the CLI with no Prefect server) must not start Prefect's temporary server for
the tasks it calls (measured: 15–37 s); inside a real flow run every call is a tracked task run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from skillreach.tasks import in_prefect_run

__all__ = ["call"]

R = TypeVar("R")


async def call(task: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``task`` (an async Prefect task, or a flow: then a subflow) and return its result."""
    if in_prefect_run():
        return await task(*args, **kwargs)
    fn: Callable[..., Awaitable[Any]] = task.fn
    return await fn(*args, **kwargs)
