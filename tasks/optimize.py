"""Tasks of ``skillreach optimize``: prepare (skills, split, rival context, cost estimate), propose
candidates (LLM + heuristics, static filter), probe descriptions, decide on the hold-out split.

The pure work is in :mod:`skillreach.author.optimize`; these wrap it with the runtime, the anthropic SDK and
Prefect. A candidate is probed with the study's runtime on a copy of the catalog whose target carries
the candidate's description; probe records stay in memory (nothing of the user's study is touched).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, ConfigDict, Field

from skillreach.author.optimize import (
    PROPOSE_TOOL,
    SYSTEM,
    Candidate,
    Decision,
    Evaluation,
    RivalContext,
    Split,
    TrainScore,
    deltas,
    evaluate,
    heuristic_candidates,
    holdout_decision,
    llm_prompt,
    parse_llm_candidates,
    rival_context,
    split_queries,
    static_problems,
    train_score,
)
from skillreach.errors import BudgetExceeded, ConfigError, InputError, ProbeFailed
from skillreach.models import Catalog, Query, QuerySet, Skill, Usage
from skillreach.skills.lint import listing_text
from skillreach.study import StudyConfig

__all__ = [
    "OptimizeOptions",
    "OptimizePrep",
    "decide_holdout",
    "feedback",
    "prepare_optimize",
    "probe_descriptions",
    "propose_candidates",
    "select_best",
]


class OptimizeOptions(BaseModel):
    """What one ``optimize`` run does. ``study`` carries the skills, queries, runtime and probing settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skill: str
    study: StudyConfig
    rounds: int = Field(default=2, ge=1)
    seed: int = 0
    holdout: float = Field(default=0.2, gt=0, lt=1)
    max_chars: int | None = None
    llm_model: str | None = None
    """The model proposing candidates (``None``: heuristic candidates only)."""
    llm_candidates: int = Field(default=3, ge=1)
    max_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    gate_activation: float = -0.05
    gate_false_activation: float = 0.03


@dataclass(frozen=True)
class OptimizePrep:
    skills: tuple[Skill, ...]
    catalog: Catalog
    query_set: QuerySet
    target: Skill
    split: Split
    context: RivalContext
    max_chars: int
    estimate_usd: float | None
    probes_planned: int


@dataclass
class Spend:
    usd: float = 0.0
    probes: int = 0
    llm_usage: Usage = field(default_factory=Usage)


def _find_target(skills: tuple[Skill, ...], name: str) -> Skill:
    for s in skills:
        if s.name == name:
            return s
    raise InputError(f"skill {name!r}: no SKILL.md with that name among the skills found; check --skills")


@task(name="optimize-prepare", cache_policy=NO_CACHE)
async def prepare_optimize(opts: OptimizeOptions) -> OptimizePrep:
    """Skills, catalog, query set, the split, the rival context and the cost estimate (refused when over
    ``--max-cost``)."""
    from skillreach.study.cost import estimate_cost
    from skillreach.tasks.study import assemble_catalog

    inputs = await assemble_catalog.fn(opts.study)
    target = _find_target(tuple(inputs.catalog.skills), opts.skill)
    relevant = list(inputs.query_set.queries)
    if not any(q.expected_skill == opts.skill for q in relevant):
        raise InputError(f"{inputs.queries_path}: no query expects {opts.skill!r}; nothing to optimise on")
    split = split_queries(relevant, opts.skill, seed=opts.seed, holdout=opts.holdout)
    ctx = rival_context(list(inputs.catalog.skills), opts.skill)
    max_chars = opts.max_chars or int(len(target.description) * 1.2)
    per_round = opts.llm_candidates + 4  # LLM candidates + at most four heuristic ones
    attempts = opts.study.attempts
    planned = (1 + per_round * opts.rounds) * len(split.train) * attempts + 2 * len(split.holdout) * attempts
    offline = opts.study.runtime in ("fake", "keyword", "retriever")
    price = None if offline else opts.study.price_for(opts.study.model)
    usd = estimate_cost(planned, inputs.catalog, price)
    llm_price = opts.study.price_for(opts.llm_model)
    if opts.llm_model and llm_price is not None:
        llm_usd = opts.rounds * (3000 * llm_price.input + 1000 * llm_price.output) / 1_000_000
        usd = (usd or 0.0) + llm_usd
    if opts.max_cost is not None and usd is not None and usd > opts.max_cost:
        raise BudgetExceeded(
            f"optimize {opts.skill}: the estimate is about ${usd:.2f} for up to {planned} probes, over "
            f"--max-cost ${opts.max_cost:.2f}; raise it, or lower --rounds / --llm-candidates"
        )
    return OptimizePrep(
        skills=tuple(inputs.catalog.skills),
        catalog=inputs.catalog,
        query_set=inputs.query_set,
        target=target,
        split=split,
        context=ctx,
        max_chars=max_chars,
        estimate_usd=usd,
        probes_planned=planned,
    )


async def _ask_llm(opts: OptimizeOptions, prompt: str) -> tuple[list[Candidate], Usage]:
    """One Messages API call forcing the ``propose_descriptions`` tool (structured JSON output)."""
    import anthropic

    if opts.llm_model is None:
        return [], Usage()
    client = anthropic.AsyncAnthropic(max_retries=4, timeout=120.0)
    try:
        message = await client.messages.create(
            model=opts.llm_model,
            max_tokens=2048,
            system=SYSTEM,
            tools=[PROPOSE_TOOL],  # type: ignore[list-item]
            tool_choice={"type": "tool", "name": PROPOSE_TOOL["name"]},
            messages=[{"role": "user", "content": prompt}],
        )
    except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
        raise ConfigError(
            f"--llm-model {opts.llm_model}: the Messages API refused the credentials ({exc.status_code}); "
            "check ANTHROPIC_API_KEY"
        ) from exc
    except anthropic.NotFoundError as exc:
        raise ConfigError(f"--llm-model {opts.llm_model}: the Messages API does not know it") from exc
    except anthropic.APIError as exc:
        raise ProbeFailed(f"optimize: the candidate request failed: {type(exc).__name__}") from exc
    finally:
        await client.close()
    u = message.usage
    usage = Usage(input_tokens=u.input_tokens or 0, output_tokens=u.output_tokens or 0)
    for block in message.content:
        if getattr(block, "type", "") == "tool_use" and getattr(block, "name", "") == PROPOSE_TOOL["name"]:
            return parse_llm_candidates(block.input), usage
    return [], usage


class Proposal(BaseModel):
    model_config = ConfigDict(frozen=True)

    kept: list[Candidate]
    refused: list[tuple[Candidate, list[str]]]
    llm_usage: Usage


@task(name="optimize-propose", cache_policy=NO_CACHE, retries=1)
async def propose_candidates(
    opts: OptimizeOptions,
    prep: OptimizePrep,
    best: str,
    best_eval: Evaluation,
    round_no: int,
) -> Proposal:
    """The round's candidates (LLM — shown the best description's misses and false activations on the
    train split — then heuristics), through the static filter."""
    misses, false_activations = feedback(prep, best_eval, opts.skill)
    prompt = llm_prompt(
        best,
        prep.context,
        prep.skills,
        misses=misses,
        false_activations=false_activations,
        n=opts.llm_candidates,
        max_chars=prep.max_chars,
    )
    llm, usage = await _ask_llm(opts, prompt)
    pool = llm[: opts.llm_candidates] + heuristic_candidates(best, prep.context, round_no)
    known = [s.name for s in prep.skills]
    others = listing_text(
        (s.name, s.description)
        for s in prep.skills
        if s.name != opts.skill and not s.disable_model_invocation
    )
    kept: list[Candidate] = []
    refused: list[tuple[Candidate, list[str]]] = []
    seen = {best.strip(), prep.target.description.strip()}
    for cand in pool:
        if cand.description.strip() in seen:
            continue
        seen.add(cand.description.strip())
        problems = static_problems(
            cand.description,
            target=opts.skill,
            known=known,
            max_chars=prep.max_chars,
            listing_others=len(others),
            listing_budget=opts.study.listing_budget_chars,
        )
        if problems:
            refused.append((cand, problems))
        else:
            kept.append(cand)
    return Proposal(kept=kept, refused=refused, llm_usage=usage)


def _catalog_with(prep: OptimizePrep, description: str) -> Catalog:
    skills = tuple(
        s.model_copy(update={"description": description}) if s.name == prep.target.name else s
        for s in prep.catalog.skills
    )
    return prep.catalog.model_copy(update={"skills": skills})


@task(name="optimize-probe", cache_policy=NO_CACHE)
async def probe_descriptions(
    opts: OptimizeOptions, prep: OptimizePrep, descriptions: list[str], ids: list[str], spent: float = 0.0
) -> tuple[list[Evaluation], float]:
    """Probe each description on the queries ``ids`` (every attempt); (evaluations, USD spent)."""
    from skillreach.study.plan import probe_options
    from skillreach.study.runner import ListSink, run_probes
    from skillreach.tasks._context import runtime_for

    by_id = prep.query_set.by_id()
    pairs = [(by_id[i], a) for i in ids for a in range(1, opts.study.attempts + 1)]
    out: list[Evaluation] = []
    runtime = runtime_for(opts.study)
    try:
        for n, description in enumerate(descriptions):
            sink = ListSink()
            records = await run_probes(
                runtime,
                _catalog_with(prep, description),
                pairs,
                options=probe_options(opts.study),
                sink=sink,
                concurrency=opts.study.concurrency,
                fingerprint=f"optimize:{opts.skill}:{n}",
                cost_cap=opts.max_cost,
                spent_before=spent,
            )
            spent += sum(r.cost_usd or 0.0 for r in records)
            out.append(evaluate(records, by_id, opts.skill))  # neighbours: every other skill's own queries
    finally:
        await runtime.aclose()
    return out, spent


@task(name="optimize-select", cache_policy=NO_CACHE)
async def select_best(
    opts: OptimizeOptions,
    prep: OptimizePrep,
    current: Evaluation,
    candidates: list[Candidate],
    evaluations: list[Evaluation],
) -> list[TrainScore]:
    """Train scores of the round's candidates, best first (ties: the shorter description)."""
    by_id = prep.query_set.by_id()
    scores = [
        train_score(c, deltas(current, e, by_id, opts.skill, prep.split.train))
        for c, e in zip(candidates, evaluations, strict=True)
    ]
    return sorted(scores, key=lambda s: (-s.score, len(s.description)))


def feedback(prep: OptimizePrep, ev: Evaluation, skill: str) -> tuple[list[str], list[str]]:
    """(misses, false activations) of a description on the train split, as query texts."""
    by_id = prep.query_set.by_id()
    train = [by_id[i] for i in prep.split.train]
    misses = [q.text for q in train if q.expected_skill == skill and ev.target.get(q.id, 1.0) < 1]
    false = [q.text for q in train if q.expected_skill != skill and ev.target.get(q.id, 0.0) > 0]
    return misses, false


@task(name="optimize-holdout", cache_policy=NO_CACHE)
async def decide_holdout(
    opts: OptimizeOptions, prep: OptimizePrep, current: Evaluation, winner: Evaluation
) -> Decision:
    by_id: dict[str, Query] = prep.query_set.by_id()
    d = deltas(current, winner, by_id, opts.skill, prep.split.holdout)
    return holdout_decision(
        d, gate_false_activation=opts.gate_false_activation, gate_activation=opts.gate_activation
    )
