"""Where skillreach asks Prefect for more than its documented Python API gives, in one place.

- :func:`task_workers_serving`: how many task workers serve a task, from the server's
  ``POST /task_workers/filter`` (a REST route of the server; Prefect 3.9's client has no method for it,
  so it goes through the client's typed ``request`` with the route's name). ``skillreach run`` asks it
  whether to send a study's batches to ``skillreach worker`` processes, and how finely to cut them.
- :func:`force_task_run_state` / :func:`force_flow_run_state`: a run's state set from outside the
  process running it (``set_*_run_state(..., force=True)``: the orchestration rules are skipped). A
  study marks a batch whose worker died Crashed and the batches a dead worker held, or the cost cap
  stopped, Cancelled; the crash handling marks a lost flow run's children Crashed (or Completed when the
  store shows their work finished). Forced, because nobody else will: the process that would report the
  run's end is gone.

Everything here is exercised against the installed Prefect by ``tests/test_prefect_adapter.py`` (a real
``prefect server start``, a real task worker): an upgrade that moves the route, changes its answer or
refuses a forced state fails there first (``make test-latest`` runs it on the newest Prefect).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

__all__ = ["TASK_WORKERS_ROUTE", "force_flow_run_state", "force_task_run_state", "task_workers_serving"]

TASK_WORKERS_ROUTE = "/task_workers/filter"


async def task_workers_serving(client: Any, task_keys: Sequence[str]) -> int:
    """How many task workers connected to the server serve any of ``task_keys`` (``client``: an open
    ``prefect.client.orchestration.PrefectClient``). Raises when the server has no such route."""
    body = {"task_worker_filter": {"task_keys": list(task_keys)}}
    response = await client.request("POST", TASK_WORKERS_ROUTE, json=body)
    response.raise_for_status()
    workers = response.json()
    if not isinstance(workers, list):
        raise ValueError(f"{TASK_WORKERS_ROUTE} answered {type(workers).__name__}, not a list of workers")
    return len(workers)


async def force_task_run_state(client: Any, task_run_id: UUID, state: Any) -> None:
    """Set a task run's state from outside its process, past the orchestration rules."""
    await client.set_task_run_state(task_run_id, state, force=True)


async def force_flow_run_state(client: Any, flow_run_id: UUID, state: Any) -> None:
    """Set a flow run's state from outside its process, past the orchestration rules."""
    await client.set_flow_run_state(flow_run_id, state, force=True)
