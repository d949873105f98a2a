"""Issue 40's hang class the way the service meets it: ``skillreach serve`` (a real Prefect server, the
process work pool, every deployment of prefect.yaml, a process worker) with a live source holding a
FIFO, a link to a FIFO and a link to ``/dev/zero`` named ``*.jsonl`` beside a good transcript.

``prefect deployment run ingest/ingest`` — what the hourly schedule does — must complete (never wait on
the FIFO, never read the endless device): the good transcript stored, the special files skipped and
named in the run's log. Then the FIFO gets a writer that never writes and the next run must complete
too (a FIFO with a writer is no different).

Integration (it starts servers and a worker): a member of ``SERIAL_MODULES``; 40–150 s on a shared
2-core machine, most of it ``serve`` starting.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.helpers.live_lines import cc_prompt, cc_skill_call, cc_skill_result
from tests.test_live_service import _free_port, _stop, _until

pytestmark = [pytest.mark.integration]

EXE = Path(sys.executable).with_name("skillreach")
POOL = "bad-input-pool"
DEPLOYMENTS = {
    d["name"] for d in yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))["deployments"]
}
RUN_LIMIT_S = 180.0
"""An ingest of one small file takes seconds once the worker picks it up; a hang never ends."""


def _events(db: Path) -> list[tuple[str, str]]:
    if not db.is_file():
        return []
    with sqlite3.connect(db) as conn:
        return [(r[0], r[1]) for r in conn.execute("SELECT kind, event_id FROM live_events ORDER BY id")]


def test_the_ingest_deployment_skips_a_fifo_and_devices_and_completes(tmp_path: Path) -> None:
    import httpx

    at = (datetime.now(UTC) - timedelta(days=1)).replace(microsecond=0)
    sources = tmp_path / "claude" / "projects" / "app"
    sources.mkdir(parents=True)
    (sources / "good.jsonl").write_text(
        "\n".join(
            [
                cc_prompt("s1", at, "p1", "Summarise the failing deploy logs"),
                cc_skill_call("s1", at, "a1", "c1", "log-search"),
                cc_skill_result("s1", at, "r1", "c1", "log-search"),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    os.mkfifo(sources / "pipe.jsonl")
    os.mkfifo(tmp_path / "elsewhere.fifo")
    (sources / "linked.jsonl").symlink_to(tmp_path / "elsewhere.fifo")
    (sources / "zero.jsonl").symlink_to("/dev/zero")
    repo = tmp_path / "service"
    repo.mkdir()
    home = tmp_path / "home"
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "PREFECT_", "GITHUB_"))}
    env.update(
        SKILLREACH_HOME=str(home),
        SKILLREACH_LIVE_SOURCES=str(sources.parent),
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
    writer = None
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
        for d in deployed.values():  # no scheduled run beside the ones started here
            for s in d.get("schedules") or []:
                for _ in range(30):  # 503 while serve's set-up process still writes (SQLite busy)
                    paused = client.patch(f"/deployments/{d['id']}/schedules/{s['id']}",
                                          json={"active": False})
                    if paused.status_code != 503:
                        break
                    time.sleep(1)
                assert paused.status_code == 204, paused.text
        _until("serve's worker", lambda: "serve: worker on pool" in log.read_text(errors="replace"), 180, log)

        def ingest_once() -> tuple[dict[str, Any], str, float]:
            started = time.monotonic()
            run = subprocess.run(
                [sys.executable, "-m", "prefect", "deployment", "run", "ingest/ingest"],
                cwd=repo,
                env={**env, "PREFECT_API_URL": api},
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert run.returncode == 0, run.stdout + run.stderr
            found = re.search(r"UUID:\s*([0-9a-f-]{36})", run.stdout)
            assert found, run.stdout
            run_id = found.group(1)

            def ended() -> dict[str, Any] | None:
                r = dict(client.get(f"/flow_runs/{run_id}").json())
                done = ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
                return r if (r.get("state") or {}).get("type") in done else None

            flow_run = _until("the ingest run (a hang on the FIFO?)", ended, RUN_LIMIT_S, log)
            text = ""
            for _ in range(30):  # the run's own lines reach the server in batches, after its end
                logs = client.post(
                    "/logs/filter", json={"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200}
                ).json()
                text = "\n".join(str(entry.get("message", "")) for entry in logs)
                if "Finished in state" in text:  # the flow's last line: the ones before it are in
                    break
                time.sleep(1)
            return flow_run, text, time.monotonic() - started

        first, said, took = ingest_once()
        assert first["state"]["type"] == "COMPLETED", (first["state"], said)
        assert first["infrastructure_pid"], "the worker did not run it"
        db = home / "skillreach.db"
        # the prompt, and the skill call with its result (one event)
        assert _events(db) == [("prompt", "p1"), ("skill", "c1")], (said, _events(db))
        assert "skipped 3 file(s): not a regular file" in said, said
        assert re.search(r"\(first: \S*(pipe|linked|zero)\.jsonl\)", said), said
        assert "Traceback" not in said, said

        # a writer holds the FIFO open and writes nothing: the next hourly run is no different
        writer = subprocess.Popen(
            ["sh", "-c", f"exec 3>'{sources / 'pipe.jsonl'}'; sleep 600"], start_new_session=True
        )
        second, said2, took2 = ingest_once()
        assert second["state"]["type"] == "COMPLETED", (second["state"], said2)
        assert len(_events(db)) == 2, said2
        assert "skipped 3 file(s): not a regular file" in said2, said2
        print(f"ingest runs through serve's worker: {took:.1f} s and {took2:.1f} s, FIFO and devices skipped")
    finally:
        if writer is not None:
            os.killpg(writer.pid, 9)
            writer.wait()
        _stop(serve)
