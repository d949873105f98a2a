"""What a study will cost, said before anything is spent: the estimate, the cap, the sentence.

The price table comes from the study's configuration (``prices``); whether the runtime bills, serves
the listing from the prompt cache or has a half-price batch mode are the runtime's own capabilities
(class attributes ``paid``, ``cached_listing``, ``batch_mode``), handed in by the task. An agent CLI
sends its own system prompt and tool definitions with every request, thousands of tokens the catalog
does not show: its runtime says how many (``request_tokens``, measured from the first request the CLI
sent), and without a price for its model the estimate is said in tokens. A CLI that reports no token
counts (``reports_usage`` false: Copilot CLI without the probe's relay) records no usage or cost per
probe, which the line says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from skillreach.models import Catalog
from skillreach.settings import Price
from skillreach.study.config import StudyConfig
from skillreach.study.plan import probe_options

__all__ = ["Estimate", "describe_estimate", "estimate_cost", "estimate_study", "estimate_tokens"]


@dataclass(frozen=True)
class Estimate:
    """The estimate of a study's pending probes; ``usd`` is ``None`` when there is no price."""

    usd: float | None
    probes: int
    model: str | None
    line: str
    cached: bool = False
    batch: bool = False
    over_cap: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "usd": None if self.usd is None else round(self.usd, 6),
            "probes": self.probes,
            "model": self.model,
            "cached": self.cached,
            "batch": self.batch,
            "over_cap": self.over_cap,
            "line": self.line,
        }


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _shape(
    n_probes: int,
    catalog: Catalog,
    *,
    turns_per_probe: float,
    query_tokens: int,
    output_tokens_per_turn: int,
    system_tokens: int,
) -> tuple[float, float, float, float]:
    """(the stable prefix a request, the tail tokens a probe, requests, output tokens) of ``n_probes``."""
    listing = sum(len(s.name) + len(s.description) + 4 for s in catalog.skills)
    prefix = _tokens(listing) + system_tokens + 120
    bodies = [len(s.body) for s in catalog.skills] or [0]
    body = _tokens(sum(bodies) // len(bodies))
    turns = max(1.0, turns_per_probe)
    extra = turns - 1.0
    # tail tokens (not the prefix) per probe: the query every turn, bodies and answers after turn 1
    tail = query_tokens * turns + (body + output_tokens_per_turn) * extra * (turns / 2 + 0.5)
    return prefix, tail, n_probes * turns, n_probes * turns * output_tokens_per_turn


def estimate_tokens(
    n_probes: int,
    catalog: Catalog,
    *,
    turns_per_probe: float = 1.5,
    query_tokens: int = 60,
    output_tokens_per_turn: int = 80,
    system_tokens: int = 150,
) -> tuple[int, int]:
    """Expected (input, output) tokens of ``n_probes`` probes, every request's prefix counted in full."""
    prefix, tail, requests, out_tokens = _shape(
        n_probes,
        catalog,
        turns_per_probe=turns_per_probe,
        query_tokens=query_tokens,
        output_tokens_per_turn=output_tokens_per_turn,
        system_tokens=system_tokens,
    )
    return round(requests * prefix + n_probes * tail), round(out_tokens)


def estimate_cost(
    n_probes: int,
    catalog: Catalog,
    price: Price | None,
    *,
    turns_per_probe: float = 1.5,
    query_tokens: int = 60,
    output_tokens_per_turn: int = 80,
    system_tokens: int = 150,
    cached: bool = True,
    batch: bool = False,
) -> float | None:
    """Expected USD of ``n_probes`` live probes: probes × expected tokens × price (``None``: no price).

    Turn 1 shows the listing (names + descriptions), the system prompt and the query; every further
    turn adds an average skill body and the previous answer. With caching, the stable prefix is
    written once and read by every later request.
    """
    if price is None:
        return None
    if n_probes <= 0:
        return 0.0
    prefix, tail, requests, out_tokens = _shape(
        n_probes,
        catalog,
        turns_per_probe=turns_per_probe,
        query_tokens=query_tokens,
        output_tokens_per_turn=output_tokens_per_turn,
        system_tokens=system_tokens,
    )
    if cached:
        usd = prefix * price.cache_write + (requests - 1) * prefix * price.cache_read
    else:
        usd = requests * prefix * price.input
    usd += n_probes * tail * price.input + out_tokens * price.output
    usd /= 1_000_000
    return usd * (0.5 if batch else 1.0)


def describe_estimate(
    usd: float,
    probes: int,
    model: str,
    *,
    cached: bool,
    batch: bool,
    max_cost: float | None = None,
    spent: float = 0.0,
) -> str:
    """One line of a cost estimate: "about $0.42 for 142 probes (claude-sonnet-4-6, cached listing)",
    and, when the estimate passes what ``--max-cost`` leaves, what the cap will do."""
    how = [model] + (["cached listing"] if cached else []) + (["batch: half price"] if batch else [])
    spent_s = f"; ${spent:.2f} already spent" if spent else ""
    line = f"about ${usd:.2f} for {probes} probe{'s' if probes != 1 else ''} ({', '.join(how)}){spent_s}"
    if max_cost is not None:
        left = max(0.0, max_cost - spent)
        if usd > left:
            if left <= 0:
                when = "before its first probe"
            else:  # the probe that crosses the cap still runs
                share = max(1, min(probes, math.ceil(probes * left / usd)))
                when = f"after about {share} probe{'s' if share != 1 else ''}"
            line += (
                f". That is more than the ${left:.2f} --max-cost leaves: the cap will stop the run {when}, "
                "keeping the results so far (re-run with a higher --max-cost to resume)"
            )
    return line


def estimate_study(
    config: StudyConfig,
    catalog: Catalog,
    pending: int,
    *,
    model: str | None,
    spent: float,
    paid: bool,
    cached_listing: bool,
    request_tokens: int | None = None,
    reports_usage: bool = True,
) -> Estimate | None:
    """The estimate of ``pending`` probes of a study, or ``None`` when there is nothing to say (nothing
    pending, or an unpriced runtime that does not bill). ``request_tokens``: what the runtime's agent CLI
    adds to every request (its system prompt and tools); with it, a paid runtime without a price is
    estimated in tokens."""
    price = config.price_for(model)
    # a compliance probe goes on after the skill for up to the step budget; half of it on average
    turns = 1.5 + (probe_options(config).step_budget / 2 if config.compliance else 0.0)
    system = 150 if request_tokens is None else request_tokens
    silent = (
        ""
        if reports_usage
        else f"; the {config.runtime} CLI reports no token counts, so its probes record no usage or cost: "
        "this estimate is the only figure"
    )
    if pending and price is None and paid:
        # a paid runtime whose price is unknown: say so rather than nothing (most of all under a cap)
        how = (
            f'no price for model {model}; add [prices."{model}"] input, output, '
            "cache_write and cache_read (USD per million tokens) to --config"
            if model
            else f"the {config.runtime} runtime's model is its own default; pass --model to get one"
        )
        if request_tokens is None:
            line = f"none: {how}"
        else:
            tokens_in, tokens_out = estimate_tokens(
                pending, catalog, turns_per_probe=turns, system_tokens=system
            )
            line = (
                f"about {tokens_in:,} input and {tokens_out:,} output tokens for {pending} "
                f"probe{'s' if pending != 1 else ''} ({config.runtime}: its own prompt and tools are "
                f"~{request_tokens:,} tokens a request); no dollar figure: {how}"
            )
        return Estimate(usd=None, probes=pending, model=model, line=line + silent)
    if pending == 0 or price is None or model is None:
        return None
    batch = bool(config.runtime_options.get("batch"))
    usd = estimate_cost(
        pending,
        catalog,
        price,
        turns_per_probe=turns,
        cached=cached_listing,
        batch=batch,
        system_tokens=system,
    )
    assert usd is not None
    line = describe_estimate(
        usd, pending, model, cached=cached_listing, batch=batch, max_cost=config.max_cost, spent=spent
    )
    over = config.max_cost is not None and usd > config.max_cost - spent
    return Estimate(
        usd=usd,
        probes=pending,
        model=model,
        line=line + silent,
        cached=cached_listing,
        batch=batch,
        over_cap=over,
    )
