"""``skillreach worker`` started before its Prefect server answers (compose, systemd, a busy machine):
it waits for the server instead of exiting "no server" on one missed 1.5 s health check — under
``stress-ng`` a worker started beside a fresh server exited 2 that way (``tests/test_scale_out.py``)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers import hang
from tests.helpers.alert_service import free_port

BIN = Path(sys.executable).parent


class _Starting(BaseHTTPRequestHandler):
    """A Prefect server still starting: its health check fails (503) the first three times it is asked,
    then it answers the two questions the worker asks first."""

    asked = 0

    def do_GET(self) -> None:
        if self.path == "/api/health":
            type(self).asked += 1
        said = {"/api/health": True, "/api/admin/version": "3.4.0"}.get(self.path)
        starting = self.path == "/api/health" and type(self).asked <= 3
        body = json.dumps(said).encode()
        self.send_response(503 if starting else 200 if said is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_worker_waits_for_a_server_that_is_still_starting(tmp_path: Path) -> None:
    """The server's health check fails the first three times: the worker says it waits, asks again, then
    goes on to its next check (here: no PostgreSQL store, one line naming SKILLREACH_DATABASE_URL) — not
    "no server"."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Starting)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "SKILLREACH_"))}
    env.update(PREFECT_API_URL=f"http://127.0.0.1:{httpd.server_address[1]}/api",
               PREFECT_HOME=str(tmp_path / "prefect"), SKILLREACH_HOME=str(tmp_path / "home"))
    try:
        res = hang.finish([str(BIN / "skillreach"), "worker"], env=env, cwd=tmp_path, limit_s=120)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert _Starting.asked == 4, _Starting.asked
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines[0] == "worker: waiting up to 60 s for the Prefect server (PREFECT_API_URL) to answer", lines
    assert lines[-1].startswith("skillreach: error: SKILLREACH_DATABASE_URL: a worker needs the shared "
                                "PostgreSQL store"), lines
    assert "Traceback" not in res.stderr


def test_a_server_that_never_answers_is_none_after_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing listens: ``None`` once the patience is spent (not before: the server may be starting), and
    at once when no server is configured at all."""
    import skillreach.cli._prefect_api as prefect_api
    from skillreach.cli.worker_cmds import _server_within

    nobody = f"http://127.0.0.1:{free_port()}/api"
    monkeypatch.setattr(prefect_api, "api_from_settings", lambda: nobody)
    began = time.monotonic()
    assert _server_within(2.0) is None
    assert time.monotonic() - began >= 2.0
    monkeypatch.setattr(prefect_api, "api_from_settings", lambda: None)
    began = time.monotonic()
    assert _server_within(60.0) is None
    assert time.monotonic() - began < 5
