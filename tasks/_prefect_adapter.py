"""Where skillreach asks Prefect for more than its documented Python API gives, in one place.

- :func:`task_workers_serving`: how many task workers serve a task, from the server's
  ``POST /task_workers/filter`` — a REST route of the server that Prefect's client has no method for
  (3.9.1, the newest release, names it only in its list of routes, ``client/orchestration/routes.py``;
  so does the main branch's source), read through our own bounded reader
  (:mod:`skillreach.tasks.prefect_api`: a deadline for the whole exchange, the answer's size bounded)
  with the URL and credentials of Prefect's public settings — never Prefect's private HTTP client.
  ``skillreach run`` asks it whether to send a study's batches to ``skillreach worker`` processes, and
  how finely to cut them.
- :func:`force_task_run_state` / :func:`force_flow_run_state`: a run's state set from outside the
  process running it (``set_*_run_state(..., force=True)``: the orchestration rules are skipped). A
  study marks a batch whose worker died Crashed and the batches a dead worker held, or the cost cap
  stopped, Cancelled; the crash handling marks a lost flow run's children Crashed (or Completed when the
  store shows their work finished). Forced, because nobody else will: the process that would report the
  run's end is gone.

Everything here is exercised against the installed Prefect by ``tests/test_prefect_adapter.py`` (a real
``prefect server start``, a real task worker): an upgrade that moves the route, changes its answer or
refuses a forced state fails there first (``make test-latest`` runs it on the newest Prefect). That test
also holds this module to Prefect's public names: no attribute of a Prefect object starting with ``_``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from skillreach.tasks.prefect_api import ApiProblem, PrefectApi, afetch_json, configured_api

__all__ = ["TASK_WORKERS_ROUTE", "force_flow_run_state", "force_task_run_state", "task_workers_serving"]

TASK_WORKERS_ROUTE = "/task_workers/filter"
TASK_WORKERS_DEADLINE_S = 15.0
"""For the whole exchange: a busy server answers this in well under a second; past it, the study
probes in its own process (and says so)."""


async def task_workers_serving(task_keys: Sequence[str], *, api: PrefectApi | None = None,
                               deadline_s: float = TASK_WORKERS_DEADLINE_S) -> int:
    """How many task workers connected to the server serve any of ``task_keys``: the server of
    Prefect's settings (``api``: another one), asked within ``deadline_s`` for the whole exchange.
    Raises :class:`~skillreach.tasks.prefect_api.ApiProblem` when no server is configured, or it has no
    such route, or its answer is not a list of workers."""
    target = api if api is not None else configured_api()
    if target is None:
        raise ApiProblem("no Prefect API URL is configured")
    body = {"task_worker_filter": {"task_keys": list(task_keys)}}
    workers = await afetch_json(target, TASK_WORKERS_ROUTE, body=body, deadline_s=deadline_s, shape=list)
    if not all(isinstance(w, dict) for w in workers):
        raise ApiProblem(f"answered {TASK_WORKERS_ROUTE} with JSON of another shape than a Prefect server's")
    return len(workers)


async def force_task_run_state(client: Any, task_run_id: UUID, state: Any) -> None:
    """Set a task run's state from outside its process, past the orchestration rules."""
    await client.set_task_run_state(task_run_id, state, force=True)


async def force_flow_run_state(client: Any, flow_run_id: UUID, state: Any) -> None:
    """Set a flow run's state from outside its process, past the orchestration rules."""
    await client.set_flow_run_state(flow_run_id, state, force=True)
