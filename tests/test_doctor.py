"""``skillreach doctor``: runtimes found, keys shown only as set/not set, masked URLs, --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.cli.doctor_cmds import mask_url

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
    proc = subprocess.run(
        [str(exe), "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        check=False,
    )
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
