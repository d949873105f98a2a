"""The ``antigravity-cli`` runtime against a stand-in ``agy`` written from agy's public headless format
(tests/fakes/antigravity_cli_stub/agy). The real agy cannot run here (binary download + Google sign-in)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillreach.errors import ConfigError
from skillreach.models import Query
from skillreach.runtimes import get_runtime
from skillreach.runtimes.antigravity_cli import AgyStream, AntigravityCliRuntime
from skillreach.settings import load_settings
from skillreach.study.contract import Tracker
from tests.fakes.kit import assert_ended_live, folder_catalog, stub_knobs
from tests.fakes.kit import probe as run_probe
from tests.fakes.kit import query as q

STUB = Path(__file__).parent / "fakes" / "antigravity_cli_stub" / "agy"


@pytest.fixture
def stub(tmp_path: Path) -> dict[str, Any]:
    catalog = folder_catalog(
        tmp_path,
        [("pdf", "Fill PDF forms."), ("rollback", "Roll back."), ("secrets", "Rotate keys.")],
        body=lambda name: f"{name} body",
    )
    return stub_knobs(tmp_path, "AGY", catalog)


async def probe(stub: dict[str, Any], query: Query, rt_kw: dict[str, Any] | None = None, **opts: Any):
    kw = dict(rt_kw or {})
    kw["env"] = {**stub["env"], **kw.get("env", {})}
    rt = AntigravityCliRuntime(agy_path=str(STUB), model="gemini-3-flash", **kw)
    return await run_probe(rt, stub["catalog"], query, **opts)


async def test_live_early_exit(stub: dict[str, Any]) -> None:
    stub["plan"]({"undo": ["secrets", "rollback", "pdf"]})
    out, _ = await probe(stub, q("undo it", "rollback"), {"env": {"AGY_STUB_DELAY": "0.3"}})
    assert out.error is None
    assert out.invoked == ["secrets", "rollback"]
    assert out.early_exit
    assert_ended_live(stub["log"])


async def test_layout_flags_usage_and_text(stub: dict[str, Any], tmp_path: Path) -> None:
    stub["plan"]({"x": ["pdf", {"tool": "list_dir", "parameters": {"DirectoryPath": "."}}]})
    creds = tmp_path / "creds"
    creds.mkdir()
    out, _ = await probe(stub, q("x", "rollback"), {"credentials_dir": creds})
    assert out.error is None
    assert out.invoked == ["pdf"]
    assert out.final_text == "Done."
    assert out.usage.input_tokens == 1400 + 180 - 200
    assert out.usage.cache_read_input_tokens == 200
    assert out.usage.output_tokens == 120
    assert out.resolved_model == "gemini-3-flash"
    assert [c.tool for c in out.tool_calls] == ["list_dir"]
    argv = json.loads((stub["log"] / "argv.json").read_text())
    assert argv[:4] == ["-p", "x", "--output-format", "stream-json"]
    assert argv[argv.index("--model") + 1] == "gemini-3-flash"
    env = json.loads((stub["log"] / "env.json").read_text())
    assert "skillreach-agy-" in env["HOME"]
    assert env["cwd"].startswith(str(Path(env["HOME"]).parent))


async def test_max_turns_and_errors(stub: dict[str, Any]) -> None:
    stub["plan"]({"x": ["pdf", "secrets", "rollback"], "boom": [{"error": "quota exceeded"}]})
    out, tracker = await probe(stub, q("x", "pdf"), max_turns=2, early_exit=False)
    assert out.invoked == ["pdf", "secrets"]
    assert tracker.exhausted
    out2, _ = await probe(stub, q("boom", "pdf"))
    assert out2.error is not None
    assert "quota exceeded" in out2.error


def test_stream_parser_takes_gemini_cli_tool_names(tmp_path: Path) -> None:
    dirs = {"pdf": tmp_path / "w" / ".agents" / "skills" / "pdf"}
    tracker = Tracker("pdf", max_turns=3)
    state = AgyStream(dirs, tmp_path / "w", tracker)
    assert state.feed(
        {"type": "tool_use", "tool_name": "write_file", "parameters": {"file_path": str(dirs["pdf"] / "x")}}
    )
    assert not state.feed(
        {
            "type": "tool_use",
            "tool_name": "read_file",
            "parameters": {"file_path": ".agents/skills/pdf/SKILL.md"},
        }
    )
    assert tracker.invoked == ["pdf"]
    assert tracker.early_exit


def test_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLREACH_AGY_PATH", raising=False)
    with pytest.raises(ConfigError, match="agy program not found"):
        AntigravityCliRuntime(agy_path=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="credentials_dir"):
        AntigravityCliRuntime(agy_path=str(STUB), credentials_dir=tmp_path / "missing")
    monkeypatch.setenv("SKILLREACH_AGY_PATH", str(STUB))  # a setting: read by the settings, not the runtime
    rt = get_runtime("antigravity-cli", settings=load_settings())
    assert rt.executable == str(STUB)  # type: ignore[attr-defined]
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="agy program not found"):
        get_runtime("antigravity-cli")
