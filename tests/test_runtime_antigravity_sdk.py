"""The ``antigravity-sdk`` runtime: the REAL google-antigravity SDK and its bundled harness binary,
pointed at a local stand-in of the Gemini API (tests/fakes/antigravity_gemini.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "google.antigravity", reason="google-antigravity is not installed (pip install '.[test]')"
)

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query
from skillreach.runtimes import get_runtime
from skillreach.runtimes.antigravity_sdk import AntigravitySdkRuntime
from tests.fakes.antigravity_gemini import GeminiAPI, skill_locations
from tests.fakes.kit import folder_catalog
from tests.fakes.kit import probe as run_probe
from tests.fakes.kit import query as q


def make_catalog(tmp_path: Path) -> Catalog:
    return folder_catalog(tmp_path, body=lambda name: f"{name.upper()} BODY TEXT")


async def probe(api: GeminiAPI, catalog: Catalog, query: Query, *, key: str = "test-key", **opts: Any):
    rt = AntigravitySdkRuntime(
        model="gemini-2.5-flash", base_url=api.base_url, api_key=key, max_retries=2, backoff_s=0.05
    )
    out, tracker = await run_probe(rt, catalog, query, **opts)
    await rt.aclose()
    return out, tracker


async def test_real_sdk_early_exit_denies_the_target_read(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    with GeminiAPI(plan={"undo": ["secrets", "rollback", "pdf"]}) as api:
        out, _ = await probe(api, catalog, q("undo the deploy", "rollback"))
    assert out.error is None, out.error
    assert out.invoked == ["secrets", "rollback"]
    assert out.early_exit
    assert len(api.requests) == 2  # no request after the denied read
    everything = json.dumps(api.requests)
    assert "SECRETS BODY TEXT" in everything  # the first read was allowed and answered
    assert "ROLLBACK BODY TEXT" not in everything  # the target's body never reached the model
    first = api.requests[0]
    assert sorted(skill_locations(first)) == ["pdf", "rollback", "secrets"]  # exactly the catalog
    assert not any(s.body in json.dumps(first) for s in catalog.skills)  # progressive disclosure
    assert [t["name"] for t in first["tools"][0]["functionDeclarations"]] == ["view_file"]
    assert api.paths[0].startswith("/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    assert api.keys[0] == "test-key"


async def test_real_sdk_full_run_usage_and_text(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    with GeminiAPI(plan={"merge": ["pdf"]}) as api:
        out, _ = await probe(api, catalog, q("merge these", "rollback"))
    assert out.error is None, out.error
    assert out.invoked == ["pdf"]
    assert not out.early_exit
    assert out.final_text == "Done."
    assert out.usage.input_tokens == 2000  # two model calls of 1000 prompt tokens each
    assert out.usage.output_tokens == 40
    assert out.resolved_model == "gemini-2.5-flash"


async def test_real_sdk_max_turns_and_other_reads(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    outside = tmp_path / "notes.txt"
    outside.write_text("hello")
    with GeminiAPI(plan={"x": [{"read": str(outside)}, "pdf", "secrets", "rollback"]}) as api:
        out, tracker = await probe(api, catalog, q("x", "pdf"), max_turns=2, early_exit=False)
    assert out.invoked == ["pdf", "secrets"]
    assert tracker.exhausted
    assert [c.input for c in out.tool_calls] == [{"AbsolutePath": str(outside)}]
    assert "ROLLBACK BODY TEXT" not in json.dumps(api.requests)


async def test_real_sdk_errors_are_data_and_keys_stay_out(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    with GeminiAPI(plan={"x": ["pdf"]}) as api:
        api.fail(400)
        out, _ = await probe(api, catalog, q("x", "pdf"), key="very-secret-key-9876")
    assert out.error is not None
    assert "400" in out.error or "INVALID" in out.error
    assert "very-secret-key-9876" not in out.error
    assert api.keys[0] == "very-secret-key-9876"


async def test_real_sdk_retries_a_rate_limit(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    with GeminiAPI(plan={"x": ["pdf"]}) as api:
        api.fail(429, times=1, retry_after=0)
        out, _ = await probe(api, catalog, q("x", "pdf"))
    assert out.error is None, out.error
    assert out.invoked == ["pdf"]
    assert out.early_exit
    assert len(api.requests) == 2  # the 429, then the same request again
    assert api.requests[0]["contents"] == api.requests[1]["contents"]


def test_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="GEMINI_API_KEY"):
        AntigravitySdkRuntime()
    monkeypatch.setenv("GEMINI_API_KEY", "k-123456")
    rt = get_runtime("antigravity-sdk", model="gemini-x")
    assert isinstance(rt, AntigravitySdkRuntime)
    assert "k-123456" not in repr(rt)
