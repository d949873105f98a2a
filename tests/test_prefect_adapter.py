"""``skillreach.tasks._prefect_adapter`` against the installed Prefect: a real ``prefect server start``
(its own PREFECT_HOME, SQLite), a real task worker subscribed to it. An upgrade that moves
``/task_workers/filter``, changes its answer, or refuses a forced state change fails here first
(``make test-latest`` runs this module on the newest Prefect)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cluster import free_port, stop

pytestmark = pytest.mark.integration

WORKER = """
import sys
from prefect import task
from prefect.task_worker import serve

@task
def adapter_probe(x: int) -> int:
    return x

print(adapter_probe.task_key, flush=True)
serve(adapter_probe)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    import httpx

    root = tmp_path_factory.mktemp("prefect-adapter")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(root / "home"), PREFECT_API_URL=api, PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{root / 'prefect.db'}")
    bin_dir = Path(sys.executable).parent
    with (root / "server.log").open("wb") as log:
        proc = subprocess.Popen([str(bin_dir / "prefect"), "server", "start", "--host", "127.0.0.1",
                                 "--port", str(port)], env=env, cwd=root, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240  # a loaded machine: the server's start takes 10–60 s
        while True:
            assert proc.poll() is None, (root / "server.log").read_text(errors="replace")[-2000:]
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "prefect server did not become healthy in 240 s"
            time.sleep(0.5)
        yield {"api": api, "env": env, "root": root}
    finally:
        stop(proc)


def _client(api: str) -> Any:
    from prefect.client.orchestration import PrefectClient

    return PrefectClient(api)


def test_the_route_is_one_prefect_itself_names() -> None:
    """The adapter's route is in the installed client's own list of server routes."""
    from prefect.client.orchestration.routes import ServerRoutes

    from skillreach.tasks._prefect_adapter import TASK_WORKERS_ROUTE

    assert TASK_WORKERS_ROUTE in typing.get_args(ServerRoutes)


def test_task_workers_serving_counts_a_real_task_worker(server: dict[str, Any]) -> None:
    from skillreach.tasks._prefect_adapter import task_workers_serving

    async def count(keys: list[str]) -> int:
        async with _client(server["api"]) as client:
            return await task_workers_serving(client, keys)

    assert asyncio.run(count(["nobody-serves-this"])) == 0
    log = (server["root"] / "worker.log").open("w+b")
    worker = subprocess.Popen([sys.executable, "-c", WORKER], env=server["env"], cwd=server["root"],
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        key = ""
        while not key:
            assert worker.poll() is None, (server["root"] / "worker.log").read_text(errors="replace")
            assert time.monotonic() < deadline, "the task worker printed no task key in 180 s"
            time.sleep(0.5)
            key = (server["root"] / "worker.log").read_text(errors="replace").partition("\n")[0].strip()
        seen = 0
        while seen < 1:
            assert worker.poll() is None, (server["root"] / "worker.log").read_text(errors="replace")
            assert time.monotonic() < deadline, "the task worker never showed in /task_workers/filter"
            seen = asyncio.run(count([key]))
            time.sleep(0.5)
        assert seen == 1
        assert asyncio.run(count([key, "nobody-serves-this"])) == 1
        assert asyncio.run(count(["nobody-serves-this"])) == 0
    finally:
        stop(worker)
        log.close()


def test_forced_states_leave_a_terminal_state(server: dict[str, Any]) -> None:
    """A Completed run is set Crashed, past the rules that keep a terminal state (a dead worker's run)."""
    from prefect import flow, task
    from prefect.states import Cancelled, Completed, Crashed

    from skillreach.tasks._prefect_adapter import force_flow_run_state, force_task_run_state

    @flow
    def adapter_flow() -> None:
        pass

    @task
    def adapter_task() -> None:
        pass

    async def go() -> tuple[str, str, str]:
        async with _client(server["api"]) as client:
            run = await client.create_flow_run(adapter_flow, state=Completed())
            task_run = await client.create_task_run(adapter_task, run.id, "0", state=Completed())
            await force_task_run_state(client, task_run.id, Crashed(message="its worker stopped"))
            crashed_task = await client.read_task_run(task_run.id)
            await force_flow_run_state(client, run.id, Crashed(message="lost"))
            crashed_flow = await client.read_flow_run(run.id)
            await force_task_run_state(client, task_run.id, Cancelled(message="cost cap"))
            cancelled_task = await client.read_task_run(task_run.id)
            assert crashed_task.state is not None
            assert crashed_flow.state is not None
            assert cancelled_task.state is not None
            assert crashed_task.state.message == "its worker stopped"
            return (crashed_task.state.type.value, crashed_flow.state.type.value,
                    cancelled_task.state.type.value)

    assert asyncio.run(go()) == ("CRASHED", "CRASHED", "CANCELLED")
