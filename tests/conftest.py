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
