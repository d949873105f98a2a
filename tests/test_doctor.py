"""``skillreach doctor``: runtimes found, keys shown only as set/not set, masked URLs, --json."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.cli.doctor_cmds import mask_url
from tests.helpers import hang

FAKES = Path(__file__).parent / "fakes"
SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-Zq7Xw9Vb2Lm4Np6Rt8",
    "OPENAI_API_KEY": "sk-proj-Hj3Kd8Pq1Wz5Yc7",
    "GEMINI_API_KEY": "AIzaQv4Tn9Bx2Mr6Ls",
}
DB_PASSWORD = "pa55w0rdQ7"
URL_PASSWORD = "ur1Pz8Kv3"
QUERY_SECRET = "qS9fW2xL6"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var, value in SECRETS.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setenv(
        "SKILLREACH_DATABASE_URL", f"postgresql+psycopg://skill:{DB_PASSWORD}@db.local:5432/sr"
    )
    monkeypatch.setenv(
        "ANTHROPIC_BASE_URL", f"http://me:{URL_PASSWORD}@127.0.0.1:8080/v1?api_key={QUERY_SECRET}&x=1"
    )
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    monkeypatch.setenv("SKILLREACH_PI_PATH", str(FAKES / "pi_stub" / "pi"))
    monkeypatch.setenv("SKILLREACH_GOOSE_PATH", str(FAKES / "goose_stub" / "goose"))
    monkeypatch.setenv("SKILLREACH_AGY_PATH", str(tmp_path / "no-agy-here"))
    monkeypatch.setenv("SKILLREACH_HOME", str(tmp_path / "home"))


def _assert_no_secret(text: str) -> None:
    for value in [*SECRETS.values(), DB_PASSWORD, URL_PASSWORD, QUERY_SECRET]:
        # not the value, nor any 6-character piece of it
        for i in range(len(value) - 5):
            assert value[i : i + 6] not in text, f"a piece of a secret leaked: {value[i : i + 6]!r}"


def test_doctor_json(env: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json"]) == 0
    out = capsys.readouterr().out
    _assert_no_secret(out)
    report = json.loads(out)
    assert report["keys"]["ANTHROPIC_API_KEY"] == "set"
    assert report["keys"]["OPENAI_API_KEY"] == "set"
    assert report["keys"]["GOOGLE_API_KEY"] == "not set"
    assert report["store_url"] == "postgresql+psycopg://skill:***@db.local:5432/sr"
    assert report["base_urls"]["ANTHROPIC_BASE_URL"] == "http://me:***@127.0.0.1:8080/v1?api_key=***&x=1"
    assert report["base_urls"]["OPENAI_BASE_URL"] is None
    assert report["prefect_api_url"] == "http://127.0.0.1:4200/api"
    runtimes = {r["name"]: r for r in report["runtimes"]}
    assert runtimes["keyword"]["usable"] is True
    assert runtimes["pi"]["usable"] is True
    assert runtimes["pi"]["version"] == "0.73.1"
    assert runtimes["goose"]["version"] == "goose 1.25.0"
    assert runtimes["antigravity-cli"]["usable"] is False
    assert "SKILLREACH_AGY_PATH" in runtimes["antigravity-cli"]["detail"]
    assert runtimes["openai-compatible"]["usable"] is True
    assert runtimes["openai-compatible"]["version"]


def test_doctor_table(env: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    _assert_no_secret(out)
    assert "Runtimes" in out
    assert "ANTHROPIC_API_KEY" in out
    assert "not set" in out
    assert "openai-compatible" in out


def test_doctor_real_entry_point(env: None) -> None:
    exe = Path(sys.executable).with_name("skillreach")
    if not exe.exists():
        pytest.skip("the skillreach entry point is not installed in this environment")
    proc = hang.finish([str(exe), "doctor", "--json"], limit_s=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    _assert_no_secret(proc.stdout + proc.stderr)
    assert json.loads(proc.stdout)["keys"]["GEMINI_API_KEY"] == "set"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("https://api.example.com/v1", "https://api.example.com/v1"),
        ("https://u:p@h/x", "https://u:***@h/x"),
        ("https://u@h/x", "https://u@h/x"),
        ("https://h/x?token=abc&model=m", "https://h/x?token=***&model=m"),
        ("https://h/x?Signature=abc", "https://h/x?Signature=***"),
        ("sqlite:///.skillreach/skillreach.db", "sqlite:///.skillreach/skillreach.db"),
        (
            "postgresql+psycopg://u:p%40ss@h:5432/db?sslmode=require",
            "postgresql+psycopg://u:***@h:5432/db?sslmode=require",
        ),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


class _FakePrefectAPI:
    """A real HTTP server on 127.0.0.1 answering the three REST calls doctor makes."""

    def __init__(self, workers: list[dict[str, str]]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def _send(self, body: object, status: int = 200) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                if self.path == "/api/health":
                    self._send(True)
                elif self.path == "/api/work_pools/skillreach":
                    self._send({"name": "skillreach", "type": "process"})
                else:
                    self._send({"detail": "not found"}, 404)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self._send(workers if self.path == "/api/work_pools/skillreach/workers/filter" else {}, 200)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/api"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_doctor_checks_that_the_service_answers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from skillreach.store.database import Store

    home = tmp_path / "home"
    Store(f"sqlite:///{home / 'skillreach.db'}").close()  # a store with its schema
    monkeypatch.setenv("SKILLREACH_HOME", str(home))
    hooks = ["https://hooks.example/services/T1/B1/HOOKTOKEN1", "https://hooks.example/x/HOOKTOKEN2"]
    monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", json.dumps(hooks))
    (tmp_path / "study.toml").write_text('runtime = "keyword"\nattempts = 3\n', encoding="utf-8")
    monkeypatch.setenv("SKILLREACH_STUDY_CONFIG", str(tmp_path / "study.toml"))
    workers = [{"name": "w1", "status": "ONLINE", "last_heartbeat_time": "2026-12-01T20:00:00Z"},
               {"name": "w0", "status": "OFFLINE", "last_heartbeat_time": "2026-11-30T20:00:00Z"}]
    with _FakePrefectAPI(workers) as api:
        monkeypatch.setenv("PREFECT_API_URL", api)
        assert main(["doctor", "--json"]) == 0
        service = json.loads(capsys.readouterr().out)["service"]
    from skillreach.store.database import HEAD

    assert service["store"] == f"ok (schema {HEAD})"
    assert service["server"] == f"healthy at {api}"
    assert service["work pool"] == "'skillreach' (process)"
    assert service["workers"] == "2 seen, 1 online, last heartbeat 2026-12-01T20:00:00Z"
    assert service["alert webhooks"] == "2 configured"
    assert service["deployments' study"].endswith(
        "study.toml: runtime keyword, catalog full, 3 attempt(s); the bundled example")
    assert "HOOKTOKEN" not in json.dumps(service)

    # nothing answers, the store is not there yet, the configuration is broken: each said in one line
    monkeypatch.setenv("PREFECT_API_URL", api)  # the fake server is gone now
    monkeypatch.setenv("SKILLREACH_HOME", str(tmp_path / "nowhere"))
    monkeypatch.delenv("SKILLREACH_ALERT_WEBHOOKS")
    (tmp_path / "study.toml").write_text("atempts = 3\n", encoding="utf-8")
    assert main(["doctor"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"no answer at {api}" in out
    assert "not created yet" in out
    assert "none: alerts are stored, not sent" in out
    assert "study.toml: atempts" in out


def test_doctor_names_the_extra_and_sees_an_agent_cli_only_where_it_is(tmp_path: Path) -> None:
    """The table says which extra installs a missing SDK (``skillreach[anthropic]``, never a bare
    ``skillreach``: the brackets are text, not markup), and an agent CLI that is not on PATH is not
    usable (``codex │ no``, not ``yes`` because its module imports)."""
    blocked = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'anthropic':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from skillreach.cli import main\n"
        "raise SystemExit(main(['doctor']))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SKILLREACH_HOME": str(tmp_path / "home")}
    proc = hang.finish([sys.executable, "-c", blocked], limit_s=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split("│")[1].strip(): line for line in proc.stdout.splitlines() if line.count("│") >= 5}
    assert "pip install 'skillreach[anthropic]'" in rows["anthropic"], rows["anthropic"]
    for name, program in (("codex", "codex"), ("gemini-cli", "gemini"), ("opencode", "opencode"),
                          ("copilot", "copilot")):
        cells = [c.strip() for c in rows[name].split("│")]
        assert cells[2] == "no", rows[name]
        assert f"'{program}' not found on PATH" in cells[5]
