"""The anthropic runtime against the real Messages API: opt-in (``SKILLREACH_LIVE=1`` and a key).

Costs a few cents: three canary probes and one routing probe on a three-skill catalog with a small model.
"""

from __future__ import annotations

import os

import pytest

from skillreach.models import Catalog, Query, Skill
from skillreach.runtimes.anthropic import AnthropicRuntime
from skillreach.study.contract import ProbeOptions, Tracker
from skillreach.study.runner import canary_check

pytestmark = pytest.mark.live

LIVE = os.environ.get("SKILLREACH_LIVE") == "1" and bool(os.environ.get("ANTHROPIC_API_KEY"))
MODEL = os.environ.get("SKILLREACH_LIVE_MODEL", "claude-haiku-4-5")

CATALOG = Catalog(
    id="live",
    skills=(
        Skill(
            name="rollback", description="Roll a deployment back to the previous release.", body="1. Run rb."
        ),
        Skill(
            name="changelog", description="Write the changelog entry for a release.", body="1. Edit CHANGES."
        ),
        Skill(name="pdf", description="Extract text and tables from PDF files.", body="1. Use pdftotext."),
    ),
)


@pytest.mark.skipif(not LIVE, reason="live API test: set SKILLREACH_LIVE=1 and ANTHROPIC_API_KEY")
async def test_live_routing_cache_and_snapshot() -> None:
    rt = AnthropicRuntime(MODEL)
    try:
        await canary_check(rt, CATALOG, ProbeOptions(model=MODEL))
        query = Query(
            id="l1", text="The 3pm deploy broke checkout, put the old version back", expected_skill="rollback"
        )
        out = await rt.select(query, CATALOG, Tracker.for_query(query, ProbeOptions(model=MODEL)))
        snapshot = await rt.resolve_model(MODEL)
    finally:
        await rt.aclose()
    assert out.error is None, out.error
    assert out.invoked[-1] == "rollback"
    assert out.resolved_model == snapshot
    assert snapshot != MODEL  # a dated id behind the alias
    assert out.cost_usd is not None
