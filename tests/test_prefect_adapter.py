"""``skillreach.tasks._prefect_adapter`` against the installed Prefect: a real ``prefect server start``
(its own PREFECT_HOME, SQLite, basic auth on its API as ``PREFECT_SERVER_API_AUTH_STRING`` sets it), a real
task worker subscribed to it. An upgrade that moves ``/task_workers/filter``, changes its answer, or
refuses a forced state change fails here first (``make test-latest`` runs this module on the newest
Prefect). The route is read through our own bounded reader with what Prefect's public settings say
(URL, credentials), and the modules that talk to Prefect use none of its private names."""

from __future__ import annotations

import ast
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

from tests.helpers import hang
from tests.helpers.cluster import free_port, stop
from tests.helpers.hostile_http import HostileServer

REPO = Path(__file__).resolve().parents[1]
AUTH = "adapter:not-a-real-secret"

pytestmark = pytest.mark.integration

WORKER = """
import os, time
import httpx
from prefect import task
from prefect.task_worker import serve

@task
def adapter_probe(x: int) -> int:
    return x

print(adapter_probe.task_key, flush=True)
deadline = time.monotonic() + 240  # started with the server: its imports overlap the server's start
while True:
    try:
        if httpx.get(os.environ["PREFECT_API_URL"] + "/health", timeout=2).status_code == 200:
            break
    except httpx.HTTPError:
        pass
    if time.monotonic() > deadline:
        raise SystemExit("no server in 240 s")
    time.sleep(0.2)
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
               PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{root / 'prefect.db'}",
               PREFECT_SERVER_API_AUTH_STRING=AUTH, PREFECT_API_AUTH_STRING=AUTH)
    bin_dir = Path(sys.executable).parent
    # no UI, no background services: nothing here uses them, and the server starts and stops sooner
    with (root / "server.log").open("wb") as log:
        proc = subprocess.Popen([str(bin_dir / "prefect"), "server", "start", "--host", "127.0.0.1",
                                 "--port", str(port), "--no-ui", "--no-services"], env=env, cwd=root,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    with (root / "worker.log").open("wb") as log:
        worker = subprocess.Popen([sys.executable, "-c", WORKER], env=env, cwd=root, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = hang.Deadline(240)  # a loaded machine: the server's start takes 10–60 s
        while True:
            assert proc.poll() is None, (root / "server.log").read_text(errors="replace")[-2000:]
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert not deadline.expired(), "prefect server did not become healthy in 240 s"
            time.sleep(0.2)
        yield {"api": api, "env": env, "root": root, "worker": worker}
    finally:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:  # each may take its grace period: both at once
            list(pool.map(stop, (worker, proc)))


def _client(api: str) -> Any:
    from prefect.client.orchestration import PrefectClient

    return PrefectClient(api, auth_string=AUTH)


def _serving(api: str, keys: list[str], *, auth: str | None = AUTH) -> int:
    """``task_workers_serving`` as a study calls it: the server and credentials from Prefect's settings."""
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_KEY, PREFECT_API_URL, temporary_settings

    from skillreach.tasks._prefect_adapter import task_workers_serving

    with temporary_settings({PREFECT_API_URL: api, PREFECT_API_AUTH_STRING: auth, PREFECT_API_KEY: None}):
        return asyncio.run(task_workers_serving(keys))


def test_the_route_is_one_prefect_itself_names() -> None:
    """The adapter's route is in the installed client's own list of server routes."""
    from prefect.client.orchestration.routes import ServerRoutes

    from skillreach.tasks._prefect_adapter import TASK_WORKERS_ROUTE

    assert TASK_WORKERS_ROUTE in typing.get_args(ServerRoutes)


def test_task_workers_serving_counts_a_real_task_worker(server: dict[str, Any]) -> None:
    """Counted from the server's answer, read with the credentials of Prefect's settings (none: refused)."""
    from skillreach.tasks.prefect_api import ApiProblem

    api = server["api"]
    with pytest.raises(ApiProblem, match="answered 401 to /task_workers/filter"):
        _serving(api, ["nobody-serves-this"], auth=None)
    assert _serving(api, ["nobody-serves-this"]) == 0
    worker, log = server["worker"], server["root"] / "worker.log"  # started with the server
    deadline = hang.Deadline(180)
    key = ""
    while not key:
        assert worker.poll() is None, log.read_text(errors="replace")
        assert not deadline.expired(), "the task worker printed no task key in 180 s"
        time.sleep(0.2)
        key = log.read_text(errors="replace").partition("\n")[0].strip()
    seen = 0
    while seen < 1:
        assert worker.poll() is None, log.read_text(errors="replace")
        assert not deadline.expired(), "the task worker never showed in /task_workers/filter"
        seen = _serving(api, [key])
        time.sleep(0.2)
    assert seen == 1
    assert _serving(api, [key, "nobody-serves-this"]) == 1
    assert _serving(api, ["nobody-serves-this"]) == 0


def test_status_reads_a_server_behind_auth_with_the_settings_credential(
    server: dict[str, Any], tmp_path: Path
) -> None:
    """``skillreach status`` as a team runs it against a server with basic auth: with Prefect's
    ``PREFECT_API_AUTH_STRING`` the pool is read (missing: 404), the credential in no output; without
    it the same read of the CLI's is refused (401)."""
    import json

    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_KEY, PREFECT_API_URL, temporary_settings

    from skillreach.cli._prefect_api import fetch_json
    from skillreach.tasks.prefect_api import ApiProblem

    env = {**server["env"], "SKILLREACH_WORK_POOL": "no-such-pool"}
    out = subprocess.run([str(Path(sys.executable).parent / "skillreach"), "status", "--json"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert AUTH not in out.stdout + out.stderr
    pool = json.loads(out.stdout)["server"]["work pool"]
    assert pool == "'no-such-pool' missing; `skillreach serve` creates it"
    bare = {PREFECT_API_URL: server["api"], PREFECT_API_AUTH_STRING: None, PREFECT_API_KEY: None}
    with temporary_settings(bare), pytest.raises(ApiProblem, match="answered 401 to /work_pools/no-such"):
        fetch_json(server["api"], "/work_pools/no-such-pool", shape=dict)


@pytest.mark.parametrize(("mode", "reason"), [("drip", "no whole answer within 1 s"),
                                              ("wrong-shape", "another shape"), ("big", "more than")])
def test_task_workers_serving_is_bounded(mode: str, reason: str) -> None:
    """A server that drips, answers another shape or too much: one ApiProblem, within the deadline. The
    drip is cut by a 1 s deadline; the other two get 30 s, so what cuts them is the shape or the size
    (under stress-ng, 1 s was spent before the 50 MB body passed the size limit)."""
    from skillreach.tasks._prefect_adapter import task_workers_serving
    from skillreach.tasks.prefect_api import ApiProblem, PrefectApi

    deadline_s = 1 if mode == "drip" else 30
    with HostileServer(mode) as hostile:
        began = time.monotonic()
        with pytest.raises(ApiProblem, match=reason):
            asyncio.run(task_workers_serving(["k"], api=PrefectApi(hostile.url), deadline_s=deadline_s))
        assert time.monotonic() - began < deadline_s + 9
        assert hostile.hits == ["POST /api/task_workers/filter HTTP/1.1"]


def test_no_configured_server_is_a_problem_not_a_guess() -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from skillreach.tasks._prefect_adapter import task_workers_serving
    from skillreach.tasks.prefect_api import ApiProblem

    with temporary_settings({PREFECT_API_URL: None}), pytest.raises(ApiProblem, match="no Prefect API URL"):
        asyncio.run(task_workers_serving(["k"]))


def test_the_credential_is_never_shown() -> None:
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_KEY, PREFECT_API_URL, temporary_settings

    from skillreach.tasks.prefect_api import configured_api

    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api", PREFECT_API_KEY: "pnu_sekrit",
                             PREFECT_API_AUTH_STRING: None}):
        api = configured_api()
    assert api is not None
    assert api.headers == {"Authorization": "Bearer pnu_sekrit"}
    assert "sekrit" not in repr(api)


def _private(name: object) -> bool:
    return isinstance(name, str) and name.startswith("_") and not name.startswith("__")


def _private_use(node: ast.AST) -> bool:
    """``x._y`` (``x`` not ``self`` or ``cls``), or ``getattr(x, "_y")`` and its kin."""
    if isinstance(node, ast.Attribute):
        own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
        return _private(node.attr) and not own
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) > 1
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and isinstance(node.args[1], ast.Constant) and _private(node.args[1].value))


PREFECT_FACING = ("tasks", "flows", "deployments")
"""Folders whose every module faces Prefect (the adapter among them, though it imports no Prefect name)."""


def _private_prefect_uses(source: str, where: str, *, facing: bool = True) -> list[str]:
    """Where a module reaches past Prefect's public names: a private module or name imported from
    ``prefect``, or an attribute starting with ``_`` read or set on anything but ``self``/``cls``
    (``client._client``, ``task_worker._register_signal``, ``getattr(x, "_y")``) — in every module when
    ``facing``, else in a module that imports Prefect."""
    tree = ast.parse(source)
    found: list[str] = []
    imports_prefect = False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "prefect":
            imports_prefect = True
            private = [n.name for n in node.names if n.name.startswith("_")]
            if any(part.startswith("_") for part in (node.module or "").split(".")) or private:
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "prefect":
                    imports_prefect = True
                    if any(part.startswith("_") for part in alias.name.split(".")):
                        found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    if not (facing or imports_prefect):
        return found
    found += [f"{where}:{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree) if _private_use(node)]
    return found


def test_the_modules_that_talk_to_prefect_use_only_its_public_names() -> None:
    """The adapter, the tasks, flows and deployments, and the CLI's modules that import Prefect, read no
    private attribute of a Prefect object and import no private Prefect name (the check itself is
    checked on a module that does)."""
    modules = [p for folder in PREFECT_FACING for p in sorted((REPO / folder).rglob("*.py"))]
    assert REPO / "tasks" / "_prefect_adapter.py" in modules
    offenders = [hit for p in modules
                 for hit in _private_prefect_uses(p.read_text(encoding="utf-8"), str(p.relative_to(REPO)))]
    cli = sorted((REPO / "skillreach" / "cli").rglob("*.py"))
    assert REPO / "skillreach" / "cli" / "worker_cmds.py" in cli
    offenders += [hit for p in cli for hit in _private_prefect_uses(p.read_text(encoding="utf-8"),
                                                                     str(p.relative_to(REPO)), facing=False)]
    assert offenders == []
    sample = ("from prefect.client.orchestration import get_client\n"
              "from prefect.utilities.processutils import _register_signal\n"
              "async def f(client):\n    return await client._client.post('/x'), getattr(client, '_loop')\n")
    assert len(_private_prefect_uses(sample, "sample.py")) == 3
