"""Issue 32's discriminator the way the service runs it: ``skillreach serve`` in the team's skills
repository (a real Prefect server, the process work pool ``SKILLREACH_WORK_POOL`` names, every deployment
of prefect.yaml, the automations, a process worker), the live sources and the study configuration in the
service's environment, alerts to a local webhook sink.

The month of tests/test_live_e2e.py (26 real skills, the keyword runtime, a neighbour added that takes
algorithmic-art's cases), then what an operator does: ``prefect deployment run ingest/ingest``. The worker
runs the ingest, which reads the transcripts and emits ``skillreach.live.dropped``; the deployment trigger
creates a ``live-dropped`` run; the worker runs it: the frozen set breaches, and the verdict — *routing
change*, naming the neighbour — is an alert (in the store, at the webhook through the store's outbox)
and the run's Prefect artifact ``live-verdict-algorithmic-art``.

Integration: 47–143 s measured on a shared 2-core machine (the server, cold with its own state, then
``serve``'s deploy, automations and worker: 21–76 s; ingest to verdict, two flow-run processes: 17–49 s).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from tests.conftest import REPO
from tests.helpers import hang
from tests.helpers.merge_gate import corpora_present
from tests.helpers.webhooks import WebhookSink
from tests.test_live_e2e import NEIGHBOUR, SKILL, UNTIL, add_neighbour, at, clone, day_plan, team, transcripts

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not corpora_present(), reason="../shared/corpora is not present"),
]

__all__ = ["team"]  # the fixture: the team's repository with its baselines committed

EXE = Path(sys.executable).with_name("skillreach")
POOL = "live-pool"
DEPLOYMENTS = {
    d["name"] for d in yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))["deployments"]
}
T = TypeVar("T")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(what: str, probe: Callable[[], T | None], timeout_s: float, log: Path, every_s: float = 1.0) -> T:
    """``probe()``'s first truthy value; fails with the service log's tail after ``timeout_s``."""
    deadline = hang.Deadline(timeout_s)
    while True:
        got = probe()
        if got:
            return got
        if deadline.expired():
            tail = log.read_text(encoding="utf-8", errors="replace")[-4000:] if log.is_file() else ""
            pytest.fail(f"{what}: not within {timeout_s:g} s; service log:\n{tail}")
        time.sleep(every_s)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C to ``serve`` (it stops its worker and server), SIGTERM, then SIGKILL."""
    for sig, wait in ((signal.SIGINT, 60), (signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue


def test_a_live_drop_is_judged_by_the_service_worker_routing_change(team: Path, tmp_path: Path) -> None:
    import httpx

    repo = clone(team, tmp_path / "service")
    add_neighbour(repo, at(28) - timedelta(hours=3))
    plan = {d: day_plan(d, skill_before=5, skill_after=1, neighbour_after=4) for d in range(42)}
    sources = tmp_path / "claude" / "projects"
    assert transcripts(sources, plan) > 1000
    (repo / "study.toml").write_text(
        'skills = ["skills"]\nqueries = "evals/queries.yaml"\nruntime = "keyword"\n', encoding="utf-8"
    )
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    log = tmp_path / "serve.log"
    started = time.monotonic()
    with WebhookSink() as sink:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "PREFECT_", "GITHUB_"))
        }
        env.update(
            SKILLREACH_STUDY_CONFIG=str(repo / "study.toml"),
            SKILLREACH_LIVE_SOURCES=str(sources),
            SKILLREACH_ALERT_WEBHOOKS=json.dumps([f"{sink.base_url}/services/T1/B1/HOOKTOKEN"]),
            SKILLREACH_WORK_POOL=POOL,
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            DO_NOT_TRACK="1",
            PREFECT_WORKER_QUERY_SECONDS="2",  # the worker polls every 2 s (default 10): test time only
        )
        with log.open("wb") as out:
            serve = subprocess.Popen(
                [str(EXE), "serve", "--port", str(port)],
                cwd=repo,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            client = httpx.Client(base_url=api, timeout=30)

            def deployments() -> dict[str, Any] | None:
                if serve.poll() is not None:
                    pytest.fail("serve exited: " + log.read_text(encoding="utf-8", errors="replace")[-4000:])
                try:
                    found = {d["name"]: d for d in client.post("/deployments/filter", json={}).json()}
                except (httpx.HTTPError, ValueError):
                    return None
                return found if set(found) >= DEPLOYMENTS else None

            deployed = _until("prefect.yaml deployed by serve", deployments, 300, log)
            # no scheduled run (the 15-minute watch, the hourly ingest, the nightly) beside this one
            for d in deployed.values():
                for s in d.get("schedules") or []:
                    for _ in range(30):  # 503 while serve's set-up process still writes (SQLite busy)
                        paused = client.patch(
                            f"/deployments/{d['id']}/schedules/{s['id']}", json={"active": False}
                        )
                        if paused.status_code != 503:
                            break
                        time.sleep(1)
                    assert paused.status_code == 204, paused.text
            assert {d["work_pool_name"] for d in deployed.values()} == {POOL}
            _until(
                "serve's worker", lambda: "serve: worker on pool" in log.read_text(errors="replace"), 180, log
            )
            up = time.monotonic() - started

            # what the operator runs (the schedule would, hourly, at the clock's now)
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "prefect",
                    "deployment",
                    "run",
                    "ingest/ingest",
                    "--param",
                    f"until={UNTIL.isoformat()}",
                ],
                cwd=repo,
                env={**env, "PREFECT_API_URL": api},
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert run.returncode == 0, run.stdout + run.stderr
            ingest_id = re.search(r"UUID:\s*([0-9a-f-]{36})", run.stdout)
            assert ingest_id, run.stdout

            def flow_run(run_id: str) -> dict[str, Any]:
                return dict(client.get(f"/flow_runs/{run_id}").json())

            def ended(run_id: str) -> dict[str, Any] | None:
                r = flow_run(run_id)
                return (
                    r
                    if (r.get("state") or {}).get("type") in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
                    else None
                )

            ingested = _until("the ingest run", lambda: ended(ingest_id.group(1)), 150, log)
            assert ingested["state"]["type"] == "COMPLETED", ingested["state"]
            assert ingested["infrastructure_pid"], "the worker did not run it"

            def triggered() -> list[dict[str, Any]] | None:
                runs = client.post(
                    "/flow_runs/filter",
                    json={"deployments": {"id": {"any_": [deployed["live-dropped"]["id"]]}}},
                ).json()
                return runs or None

            [dropped] = _until("live-dropped started by skillreach.live.dropped", triggered, 60, log)
            assert dropped["parameters"]["skill"] == SKILL
            assert dropped["parameters"]["until"] == UNTIL.isoformat()
            judged = _until("the live-dropped run", lambda: ended(dropped["id"]), 180, log)
            assert judged["state"]["type"] == "COMPLETED", judged["state"]
            assert judged["infrastructure_pid"], "the worker did not run it"
            assert judged["work_pool_name"] == POOL
            chain = time.monotonic() - started - up

            # the verdict: the run's artifact …
            [artifact] = client.post(
                "/artifacts/filter", json={"artifacts": {"key": {"any_": [f"live-verdict-{SKILL}"]}}}
            ).json()
            assert artifact["flow_run_id"] == dropped["id"]
            text = str(artifact["data"])
            assert f"# {SKILL}: live drop — routing change" in text, text
            assert f"its cases now go to {NEIGHBOUR} (" in text
            assert f"nearest catalog change: {NEIGHBOUR} added on 2026-11-17 05:00 UTC" in text

            # … the alert, through the store's outbox, at the webhook …
            def posted() -> list[str] | None:
                said = [str(r["body"].get("text", "")) for r in sink.requests if isinstance(r["body"], dict)]
                return [t for t in said if "skillreach.live.verdict" in t] or None

            [message] = _until("the verdict at the webhook", posted, 60, log)
            assert f"skillreach skillreach.live.verdict: {SKILL}: " in message
            assert "routing change" in message
            assert f"its cases now go to {NEIGHBOUR} (" in message
            assert f"/runs/flow-run/{dropped['id']}" in message  # the link: the run that judged it
            assert "HOOKTOKEN" not in message
            assert all("skillreach.run." not in str(r["body"]) for r in sink.requests)  # no run ended badly
        finally:
            _stop(serve)

    # … and in the service's store, in the working folder the worker's runs work in
    from skillreach.store import Store

    with Store(f"sqlite:///{repo / '.skillreach' / 'skillreach.db'}") as store:
        alerts = [(a.event, a.delivery, dict(a.payload or {})) for a in store.alerts()]
    drops = [(e, d) for e, d, _ in alerts if e == "skillreach.live.dropped"]
    assert drops == [("skillreach.live.dropped", "event")]
    [(_, delivery, verdict)] = [a for a in alerts if a[0] == "skillreach.live.verdict"]
    assert delivery == "delivered"  # the webhook answered 2xx (the sink got it above)
    assert verdict["skill"] == SKILL
    assert verdict["verdict"] == "routing change"
    assert verdict["takers"][0] == NEIGHBOUR
    assert verdict["nearest_change"]["skill"] == NEIGHBOUR
    assert verdict["nearest_change"]["how"] == "added"
    print(f"service up in {up:.0f} s; ingest → verdict in {chain:.0f} s")
