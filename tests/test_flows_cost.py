"""The cost estimate before a live run and the ``--max-cost`` cap, through the study flow (``.fn``) with
the anthropic runtime against the local Messages API stand-in (``tests/fakes/messages_api.py``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from skillreach.errors import BudgetExceeded
from skillreach.flows.study import study
from skillreach.settings import Settings
from skillreach.study import StudyConfig
from skillreach.study.cost import describe_estimate, estimate_cost
from skillreach.study.probe_log import read_probes
from skillreach.tasks._context import set_progress
from tests.fakes.messages_api import MessagesAPI
from tests.helpers.live import MODEL, SNAPSHOT, responder
from tests.helpers.world import cfg, run, store_of


def live(world: dict[str, Path], api: MessagesAPI, out: str, **kw: Any) -> StudyConfig:
    kw.setdefault("concurrency", 4)
    return StudyConfig(skills=(world["skills"],), queries=world["queries"], runtime="anthropic", model=MODEL,
                       runtime_options={"base_url": api.base_url, "max_retries": 0}, out=world["root"] / out,
                       home=world["home"], attempts=2, **kw)


class Shown:
    """A progress display like the CLI's: receives the plan, every probe, and the estimate line."""

    def __init__(self, api: MessagesAPI | None = None) -> None:
        self.lines: list[tuple[str, bool]] = []
        self.probes = 0
        self.api = api
        self.requests_before: list[int] = []

    def plan(self, total: int, done: int) -> None:
        return None

    def estimate(self, line: str, over_cap: bool) -> None:
        self.lines.append((line, over_cap))
        if self.api is not None:
            self.requests_before.append(len(self.api.requests))

    def __call__(self, record: Any) -> None:
        self.probes += 1


def catalog_of(world: dict[str, Path]) -> Any:
    from skillreach.skills.catalog import build_catalog
    from skillreach.skills.discovery import load_skills

    return build_catalog(load_skills([world["skills"]]), "full")


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-secret")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def test_a_live_run_says_its_cost_before_spending(world: dict[str, Path], key: None,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="skillreach")
    with MessagesAPI(responder()) as api:
        shown = Shown(api)
        config = live(world, api, "live")
        set_progress(str(config.out), shown)
        try:
            result = run(study, config)
        finally:
            set_progress(str(config.out), None)
        requests = len(api.requests)
    price = Settings().price_for(SNAPSHOT)
    assert price is not None
    expected = estimate_cost(26, catalog_of(world), price, cached=True)
    assert expected is not None
    [(line, over)] = shown.lines
    assert line == f"about ${expected:.2f} for 26 probes ({SNAPSHOT}, cached listing)"
    assert over is False
    assert f"cost estimate: {line}" in caplog.text  # logged too (at info: the display said it)
    assert shown.requests_before == [0]  # said before the first Messages request (canaries included)
    assert result.probes_run == 26
    assert requests > 26  # each probe a Skill call, then the tool result answered
    # the estimate is of the right size: within a factor of 3 of what the stand-in billed
    assert result.cost_usd > 0
    assert 1 / 3 < expected / result.cost_usd < 3, (expected, result.cost_usd)


def test_an_estimate_over_the_cap_is_said_up_front_and_the_cap_keeps_results(
    world: dict[str, Path], key: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="skillreach")
    shown = Shown()
    price = Settings().price_for(SNAPSHOT)
    full = estimate_cost(26, catalog_of(world), price, cached=True)
    assert full is not None
    cap = full / 4
    with MessagesAPI(responder()) as api:
        config = live(world, api, "capped", max_cost=cap, concurrency=1)
        # no display registered (a deployment's run): the estimate is a warning in the log
        with pytest.raises(BudgetExceeded, match="results so far are kept"):
            run(study, config)
        [warned] = [r.getMessage() for r in caplog.records if "cost estimate" in r.getMessage()]
        assert [r.levelno for r in caplog.records if "cost estimate" in r.getMessage()] == [logging.WARNING]
        assert f"more than the ${cap:.2f} --max-cost leaves" in warned
        assert "the cap will stop the run after about" in warned
        kept = read_probes(world["root"] / "capped/probes.jsonl")
        assert 0 < len(kept) < 26
        spent = sum(r.cost_usd or 0.0 for r in kept)
        assert spent >= cap
        with store_of(world) as s:
            [row] = s.studies()
            assert row.status == "failed"
            assert s.count_probes(row.id) == len(kept)

        # raise the cap: the run resumes, and the estimate is of what is left, after what was spent
        shown.lines.clear()
        more = config.model_copy(update={"max_cost": full * 10})
        set_progress(str(more.out), shown)
        try:
            result = run(study, more)
        finally:
            set_progress(str(more.out), None)
    left = 26 - len(kept)
    [(line, over)] = shown.lines
    assert over is False
    assert line.startswith(f"about ${estimate_cost(left, catalog_of(world), price, cached=True):.2f} "
                           f"for {left} probes")
    assert f"${spent:.2f} already spent" in line
    assert (result.probes_run, result.probes_resumed) == (left, len(kept))


def test_offline_runtimes_have_no_estimate(world: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="skillreach")
    shown = Shown()
    config = cfg(world, "offline")
    set_progress(str(config.out), shown)
    try:
        run(study, config)
    finally:
        set_progress(str(config.out), None)
    assert shown.lines == []
    assert "cost estimate" not in caplog.text


def test_batch_mode_halves_the_estimate_and_says_so() -> None:
    line = describe_estimate(0.42, 142, MODEL, cached=True, batch=False)
    assert line == "about $0.42 for 142 probes (claude-sonnet-4-6, cached listing)"
    half = describe_estimate(0.21, 1, MODEL, cached=False, batch=True, max_cost=1.0)
    assert half == "about $0.21 for 1 probe (claude-sonnet-4-6, batch: half price)"
    over = describe_estimate(2.0, 100, MODEL, cached=True, batch=False, max_cost=1.5, spent=0.5)
    assert "the cap will stop the run after about 50 probes" in over
    assert "$0.50 already spent" in over
    assert "before its first probe" in describe_estimate(1.0, 9, MODEL, cached=True, batch=False,
                                                         max_cost=1.0, spent=1.0)
    assert describe_estimate(1.0, 9, MODEL, cached=True, batch=False, max_cost=1.0).endswith("listing)")


def test_a_paid_runtime_without_a_price_says_there_is_no_estimate(world: dict[str, Path],
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    from skillreach.tasks.study import StudyPlan, assemble_catalog, estimate_spend

    base = cfg(world, "unpriced")
    inputs = asyncio.run(assemble_catalog.fn(base))
    plan = StudyPlan(study_id="st-x", out=world["root"] / "unpriced", probes_path=world["root"] / "p.jsonl",
                     fingerprint="fp", resolved_model=None, token="t", batches=((("alpha-0", 1),),), done=0,
                     total=1)
    caplog.set_level(logging.INFO, logger="skillreach")
    local = base.model_copy(update={"runtime": "openai-compatible", "model": "local-llama", "max_cost": 1.0})
    got = asyncio.run(estimate_spend.fn(local, inputs, plan))
    assert got is not None
    assert got["usd"] is None
    assert got["line"].startswith('none: no price for model local-llama; add [prices."local-llama"]')
    assert [r.levelno for r in caplog.records if "cost estimate" in r.getMessage()] == [logging.WARNING]
    cc = base.model_copy(update={"runtime": "claude-code", "model": None})
    assert "pass --model" in asyncio.run(estimate_spend.fn(cc, inputs, plan))["line"]
    priced = base.model_copy(update={"runtime": "openai-compatible", "model": "claude-haiku-4-5"})
    line = asyncio.run(estimate_spend.fn(priced, inputs, plan))["line"]
    assert line.startswith("about $")
    assert line.endswith("for 1 probe (claude-haiku-4-5)")
    assert asyncio.run(estimate_spend.fn(base, inputs, plan)) is None  # fake: free, nothing to say


@pytest.mark.parametrize(
    ("runtime", "own"), [("codex", 10_150), ("gemini-cli", 12_100), ("opencode", 7_700), ("copilot", 12_100)]
)
def test_an_agent_cli_is_estimated_with_its_own_prompt_in_tokens_or_dollars(
    world: dict[str, Path], runtime: str, own: int
) -> None:
    """The agent CLIs send thousands of tokens of their own with every request: without a price the
    estimate is in tokens; with one, in dollars that count those tokens; Copilot CLI's line says it
    reports no token counts when it runs without the probe's relay."""
    import asyncio

    from skillreach.study.cost import estimate_tokens
    from skillreach.tasks.study import StudyPlan, assemble_catalog, estimate_spend

    base = cfg(world, "agents")
    inputs = asyncio.run(assemble_catalog.fn(base))
    plan = StudyPlan(study_id="st-a", out=world["root"] / "agents", probes_path=world["root"] / "a.jsonl",
                     fingerprint="fp", resolved_model=None, token="t",
                     batches=((("alpha-0", 1), ("alpha-1", 1)),), done=0, total=2)
    unpriced = base.model_copy(update={"runtime": runtime, "model": "fake-model"})
    got = asyncio.run(estimate_spend.fn(unpriced, inputs, plan))
    assert got is not None
    assert got["usd"] is None
    tokens_in, tokens_out = estimate_tokens(2, inputs.catalog, system_tokens=own)
    assert tokens_in > 2 * own  # every request carries the CLI's own prompt and tools
    assert got["line"].startswith(
        f"about {tokens_in:,} input and {tokens_out:,} output tokens for 2 probes ({runtime}: its own prompt "
        f"and tools are ~{own:,} tokens a request); no dollar figure: no price for model fake-model"
    )
    own_model = base.model_copy(update={"runtime": runtime, "model": None})
    default = asyncio.run(estimate_spend.fn(own_model, inputs, plan))
    assert "pass --model" in default["line"]
    priced = base.model_copy(update={"runtime": runtime, "model": "claude-haiku-4-5"})
    line = asyncio.run(estimate_spend.fn(priced, inputs, plan))["line"]
    assert line.startswith("about $")
    with_own = estimate_cost(2, inputs.catalog, priced.price_for("claude-haiku-4-5"), system_tokens=own,
                             turns_per_probe=1.5, cached=False)
    assert with_own is not None
    assert f"${with_own:.2f}" in line
    # the probe's relay measures what every agent CLI is served, Copilot CLI's too; only without it
    # do Copilot CLI's probes record no usage or cost, and the line says so
    silent = "the copilot CLI reports no token counts, so its probes record no usage or cost"
    assert silent not in line
    assert silent not in got["line"]
    unrelayed = priced.model_copy(update={"runtime_options": {"relay": False}})
    line = asyncio.run(estimate_spend.fn(unrelayed, inputs, plan))["line"]
    assert (silent in line) is (runtime == "copilot")
