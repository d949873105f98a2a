"""Shared fixtures. ``../shared`` (the corpora) sits beside the checkout; tests that need it skip cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPORA = SHARED / "corpora"
EXAMPLE = REPO / "skillreach" / "example"


@pytest.fixture
def corpora() -> Path:
    if not CORPORA.is_dir():
        pytest.skip("../shared/corpora is not present beside the checkout")
    return CORPORA


pytest_plugins = ["tests.helpers.world"]  # the `world` fixture of the flow tests

# Variables of the test infrastructure itself (where PostgreSQL and the real agent CLIs are), kept.
_KEEP = {"SKILLREACH_TEST_PG_URL", "SKILLREACH_CLAUDE_CACHE", "SKILLREACH_PI_CACHE"}
_PROVIDER = ("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_API_KEY", "GOOSE_")


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's settings or keys: every ``SKILLREACH_*`` setting and every provider
    variable is removed (a test that needs one sets it with ``monkeypatch``)."""
    import os

    for name in list(os.environ):
        if (name.startswith("SKILLREACH_") and name not in _KEEP) or name.startswith(_PROVIDER):
            monkeypatch.delenv(name, raising=False)
