"""The study's tasks up to the probes: assemble the catalog, prepare the run, canary, probe a batch.

Each task wraps core functions (``skillreach.skills``, ``catalog``, ``queries``, ``probing``) and the
store; the flow only composes them. The unit of Prefect work is a **batch** of probes (50–200), run
with asyncio inside the task (``skillreach.probing.run_probes``); Prefect retries a whole batch, and a
cache key built from the batch's provenance lets a re-run skip finished batches.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.runtimes import get_runtime
from skillreach.study.contract import ProbeOptions, Runtime
from skillreach.errors import ConfigError, InputError, SkillreachError
from skillreach.models import Catalog, ProbeRecord, QuerySet, Skill
from skillreach.study import StudyConfig, batch_key, default_out_dir, study_id_for
from skillreach.tasks._context import logger, progress_for
from skillreach.tasks.store import store_for

__all__ = [
    "BatchSummary",
    "SkillsFound",
    "StudyInputs",
    "StudyPlan",
    "assemble_catalog",
    "canary",
    "discover_skills",
    "estimate_spend",
    "prepare_study",
    "probe_batch",
]

TOKEN_FILE = ".study-token"


@dataclass(frozen=True)
class StudyInputs:
    """What a study measures: the skills found, the resident catalog and the query set."""

    skills: tuple[Skill, ...]
    catalog: Catalog
    query_set: QuerySet
    queries_path: Path
    source: str
    """The skills folders, as one string (catalog snapshots are kept per source)."""
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class StudyPlan:
    """Where and under which fingerprint a study runs, and which (query, attempt) pairs are left."""

    study_id: str
    out: Path
    probes_path: Path
    fingerprint: str
    resolved_model: str | None
    token: str
    batches: tuple[tuple[tuple[str, int], ...], ...]
    done: int
    total: int
    spent_usd: float = 0.0


@dataclass(frozen=True)
class BatchSummary:
    batch: int
    probes: int
    errors: int
    cost_usd: float
    skipped: int = 0
    error_samples: tuple[str, ...] = field(default_factory=tuple)


def _roots(config: StudyConfig) -> tuple[list[Path], Path]:
    if config.is_example or (not config.skills and config.queries is not None) or (
        config.skills and config.queries is None
    ):
        from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS

        if not config.is_example:
            missing = "--queries FILE" if config.queries is None else "--skills DIR"
            raise ConfigError(f"a study needs both --skills and --queries; pass {missing} "
                              "(or neither, for the bundled example)")
        return [EXAMPLE_SKILLS], EXAMPLE_QUERIES
    assert config.queries is not None
    return list(config.skills), config.queries


def runtime_for(config: StudyConfig) -> Runtime:
    """Build the study's runtime (API keys come from the SDK's own environment, never from here)."""
    from skillreach.settings import load_settings

    options: dict[str, Any] = dict(config.runtime_options)
    if config.model is not None:
        options.setdefault("model", config.model)
    try:
        return get_runtime(config.runtime, settings=load_settings(), **options)
    except TypeError as exc:
        raise ConfigError(f"runtime_options for {config.runtime!r}: {exc}") from exc


def probe_options(config: StudyConfig) -> ProbeOptions:
    return ProbeOptions(
        max_turns=config.max_turns,
        early_exit=config.early_exit,
        model=config.model,
        compliance=config.compliance,
    )


@dataclass(frozen=True)
class SkillsFound:
    skills: tuple[Skill, ...]
    source: str
    problems: tuple[str, ...] = ()


@task(name="discover_skills", tags=["skillreach", "catalog"], cache_policy=NO_CACHE)
async def discover_skills(config: StudyConfig) -> SkillsFound:
    """Every skill under the study's folders (a file that does not parse is reported and skipped)."""
    from skillreach.skills import discover

    roots, _ = _roots(config)
    found = discover(roots, precedence=config.skill_precedence)
    if not found.skills:
        raise ConfigError(f"no SKILL.md under {', '.join(map(str, roots))}; pass --skills DIR")
    for problem in found.problems:
        logger().warning("skipped a skill: %s", problem)
    for shadowed in found.shadowed:
        logger().warning("%s (skill_precedence = %s)", shadowed, config.skill_precedence)
    return SkillsFound(
        skills=tuple(found.skills),
        source=" ".join(sorted(str(Path(r).resolve()) for r in roots)),
        problems=(*(str(p) for p in found.problems), *(str(s) for s in found.shadowed)),
    )


@task(name="assemble_catalog", tags=["skillreach", "catalog"], cache_policy=NO_CACHE)
async def assemble_catalog(config: StudyConfig) -> StudyInputs:
    """Discover the skills, build the resident catalog, load and validate the query set."""
    from skillreach.catalog import build_catalog
    from skillreach.queries import load_query_set

    _, queries_path = _roots(config)
    found = await discover_skills.fn(config)
    if config.catalog != "full" and config.target is None:
        raise ConfigError(
            f"--catalog {config.catalog} measures one target skill; pass --target NAME "
            "(or target = \"NAME\" in --config)"
        )
    catalog = build_catalog(
        found.skills,
        config.catalog,
        target=config.target,
        k=config.neighborhood_k,
        size=config.neighborhood_size,
        seed=config.seed,
    )
    query_set = load_query_set(queries_path, catalog=[s.name for s in found.skills])
    if catalog.strategy != "full":
        query_set = _restrict(query_set, catalog, config.target, queries_path)
    return StudyInputs(
        skills=found.skills,
        catalog=catalog,
        query_set=query_set,
        queries_path=Path(queries_path),
        source=found.source,
        problems=found.problems,
    )


def _restrict(query_set: QuerySet, catalog: Catalog, target: str | None, path: Path) -> QuerySet:
    """The queries a target catalog can answer: those whose expected skill is resident, and the
    out-of-scope ones (a fresh, unsealed set: its digest is its own)."""
    resident = set(catalog.names)
    kept = tuple(q for q in query_set.queries if q.expected_skill is None or q.expected_skill in resident)
    if not any(q.expected_skill == target for q in kept):
        raise InputError(f"{path}: no query expects the target skill {target!r}; add positive queries for it")
    logger().info("catalog %s: %d of %d queries have a resident expected skill or are out of scope",
                  catalog.id, len(kept), len(query_set.queries))
    provenance = query_set.provenance.model_copy(
        update={"digest": "", "source": f"{query_set.provenance.source or path} restricted to {catalog.id}"}
    )
    return QuerySet(catalog_id=catalog.id, queries=kept, provenance=provenance)


def _claim(base: Path) -> Path:
    """A new folder for a study given no ``--out``: two runs started in the same second never share one."""
    base.parent.mkdir(parents=True, exist_ok=True)
    for i in range(1, 1000):
        candidate = base if i == 1 else base.with_name(f"{base.name}-{i}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise ConfigError(f"{base}: too many runs started at once; pass --out DIR")


def _flow_run_id() -> str | None:
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return str(ctx.flow_run.id) if ctx is not None and ctx.flow_run is not None else None


def _token(out: Path, *, renew: bool = False) -> str:
    """A random token that the batch cache keys include. It is renewed whenever the probe log lost
    records (deleted, truncated, edited), so a cached batch is never taken for probes that are gone."""
    path = out / TOKEN_FILE
    if path.exists() and not renew:
        return path.read_text(encoding="utf-8").strip()
    out.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    path.write_text(token + "\n", encoding="utf-8")
    return token


@task(name="prepare_study", tags=["skillreach", "store"], cache_policy=NO_CACHE)
async def prepare_study(config: StudyConfig, inputs: StudyInputs, kind: str = "study") -> StudyPlan:
    """Resolve the model snapshot, fix the fingerprint, open the study in the store, plan the batches.

    A study re-run into the same folder with the same fingerprint resumes: pairs already in
    ``probes.jsonl`` without error are not run again.
    """
    from skillreach.probing import completed_pairs, fingerprint, latest_records, read_probes, resolve_model
    from skillreach.study import batch_pairs

    options = probe_options(config)
    runtime = runtime_for(config)
    try:
        resolved = await resolve_model(runtime, options)
    finally:
        await runtime.aclose()
    fp = fingerprint(inputs.catalog, inputs.query_set, config.runtime, resolved, options,
                     extra=dict(sorted(config.runtime_options.items())))
    out = config.out or _claim(default_out_dir(config, kind=kind))
    probes_path = out / "probes.jsonl"
    existing = read_probes(probes_path, missing_ok=True)
    done = completed_pairs(existing, fp, keep_errors=config.keep_errors)
    spent = sum(r.cost_usd or 0.0 for r in latest_records(existing, fp))
    batches = batch_pairs(inputs.query_set.queries, config.attempts, config.batch_size, done=done)
    study_id = study_id_for(fp, out)
    with store_for(config) as store:
        recorded = store.count_probes(study_id) if store.get_study(study_id) is not None else 0
        token = _token(out, renew=not probes_path.exists() or recorded > len(latest_records(existing, fp)))
        store.begin_study(
            study_id,
            out_dir=str(out.resolve()),
            runtime=config.runtime,
            model=config.model,
            catalog_id=inputs.catalog.id,
            catalog_digest=inputs.catalog.digest,
            queries_digest=inputs.query_set.provenance.digest or inputs.query_set.compute_digest(),
            fingerprint=fp,
            attempts=config.attempts,
            config=config.public_dict(),
            kind=kind,
            flow_run_id=_flow_run_id(),
        )
        if existing:
            # bring the store level with a log written by an earlier (maybe interrupted) run
            store.add_probes(study_id, latest_records(existing, fp))
    wanted = {(q.id, a) for q in inputs.query_set.queries for a in range(1, config.attempts + 1)}
    already = len(done & wanted)
    callback = progress_for(str(out))
    if callback is not None and hasattr(callback, "plan"):
        callback.plan(len(wanted), already)
    if already:
        logger().info("resuming %s: %d of %d probes already recorded", out, already, len(wanted))
    return StudyPlan(
        study_id=study_id,
        out=out,
        probes_path=probes_path,
        fingerprint=fp,
        resolved_model=resolved,
        token=token,
        batches=tuple(tuple((q.id, a) for q, a in b) for b in batches),
        done=already,
        total=len(wanted),
        spent_usd=spent,
    )


CACHED_LISTING_RUNTIMES = frozenset({"anthropic", "claude-code"})
"""Runtimes whose stable prefix (system prompt + skill listing) is served from the prompt cache."""
PAID_RUNTIMES = frozenset({"anthropic", "openai-compatible", "claude-code"})
"""Runtimes that bill per token from the price table (``Settings.prices``)."""


@task(name="estimate_spend", tags=["skillreach", "cost"], cache_policy=NO_CACHE)
async def estimate_spend(config: StudyConfig, inputs: StudyInputs, plan: StudyPlan) -> dict[str, Any] | None:
    """What the pending probes should cost (probes × expected tokens × price), said before spending.

    ``None`` when nothing is pending or the model has no price (offline runtimes). The line is logged
    (a warning when it passes what ``max_cost`` leaves: the cap will stop the run early, results kept)
    and handed to the CLI's progress display when there is one.
    """
    from skillreach.probing import estimate_cost
    from skillreach.settings import load_settings
    from skillreach.study import describe_estimate

    pending = sum(len(b) for b in plan.batches)
    model = plan.resolved_model or config.model
    price = load_settings().price_for(model)
    callback = progress_for(str(plan.out))
    shown = callback is not None and hasattr(callback, "estimate")
    if pending and price is None and config.runtime in PAID_RUNTIMES:
        # a paid runtime whose price is unknown: say so rather than nothing (most of all under a cap)
        line = (f"none: no price for model {model}; add [prices.\"{model}\"] input, output, cache_write "
                "and cache_read (USD per million tokens) to --config" if model else
                f"none: the {config.runtime} runtime's model is its own default; pass --model to get one")
        if shown:
            callback.estimate(line, config.max_cost is not None)  # type: ignore[union-attr]
        logger().log(logging.WARNING if config.max_cost is not None and not shown else logging.INFO,
                     "cost estimate: %s", line)
        return {"usd": None, "probes": pending, "model": model, "line": line}
    if pending == 0 or price is None or model is None:
        return None
    cached = config.runtime in CACHED_LISTING_RUNTIMES
    batch = bool(config.runtime_options.get("batch"))
    # a compliance probe goes on after the skill for up to the step budget; half of it on average
    turns = 1.5 + (probe_options(config).step_budget / 2 if config.compliance else 0.0)
    usd = estimate_cost(pending, inputs.catalog, price, turns_per_probe=turns, cached=cached, batch=batch)
    assert usd is not None
    line = describe_estimate(usd, pending, model, cached=cached, batch=batch, max_cost=config.max_cost,
                             spent=plan.spent_usd)
    over = config.max_cost is not None and usd > config.max_cost - plan.spent_usd
    if shown:
        callback.estimate(line, over)  # type: ignore[union-attr]
    # a warning when over the cap, unless the CLI's display has just said it (once is enough)
    logger().log(logging.WARNING if over and not shown else logging.INFO, "cost estimate: %s", line)
    return {"usd": round(usd, 6), "probes": pending, "model": model, "cached": cached, "batch": batch,
            "over_cap": over, "line": line}


@task(name="canary", tags=["skillreach", "probe"], cache_policy=NO_CACHE)
async def canary(config: StudyConfig, inputs: StudyInputs) -> int:
    """A few skill-naming probes; :class:`HarnessBlind` when the harness sees no activation at all."""
    from skillreach.probing import canary_check

    runtime = runtime_for(config)
    try:
        records = await canary_check(runtime, inputs.catalog, probe_options(config))
    finally:
        await runtime.aclose()
    return sum(1 for r in records if r.invoked)


class _TeeSink:
    """probes.jsonl first (fsynced: the probe is paid for), then the store in small groups."""

    def __init__(self, jsonl: Any, store: Any, study_id: str, every: int = 25) -> None:
        self.jsonl, self.store, self.study_id, self.every = jsonl, store, study_id, every
        self.pending: list[ProbeRecord] = []

    def write(self, record: ProbeRecord) -> None:
        self.jsonl.write(record)
        self.pending.append(record)
        if len(self.pending) >= self.every:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.store.add_probes(self.study_id, self.pending)
            self.pending = []


def _batch_cache_key(_context: Any, parameters: dict[str, Any]) -> str:
    plan: StudyPlan = parameters["plan"]
    return batch_key(f"{plan.fingerprint}|{plan.token}", list(parameters["pairs"]))


def _retry_unless_our_error(_task: Any, _run: Any, state: Any) -> bool:
    """Retry a batch for infrastructure failures, never for a user error or the cost cap.

    Prefect passes ``Failed(data=<the exception>)``; the exception is read from ``data`` directly
    (``state.result()`` would be a coroutine inside the async engine).
    """
    return not isinstance(getattr(state, "data", None), SkillreachError)


@task(
    name="probe_batch",
    tags=["skillreach", "probe"],
    retries=2,
    retry_delay_seconds=[5, 30],
    retry_condition_fn=_retry_unless_our_error,
    cache_key_fn=_batch_cache_key,
    cache_expiration=timedelta(days=30),
    persist_result=True,
    result_serializer="json",
)
async def probe_batch(
    config: StudyConfig,
    inputs: StudyInputs,
    plan: StudyPlan,
    pairs: tuple[tuple[str, int], ...],
    *,
    batch: int = 0,
    spent_before: float = 0.0,
) -> dict[str, Any]:
    """Probe one batch of (query id, attempt) pairs with asyncio; every record on disk as it finishes.

    Pairs already recorded under the study's fingerprint (an earlier try of this batch) are skipped.
    Returns a small JSON summary (the records themselves are in probes.jsonl and the store).
    """
    from skillreach.probing import JsonlSink, completed_pairs, read_probes, run_probes

    by_id = inputs.query_set.by_id()
    done = completed_pairs(
        read_probes(plan.probes_path, missing_ok=True), plan.fingerprint, keep_errors=config.keep_errors
    )
    todo = [(by_id[qid], a) for qid, a in pairs if (qid, a) not in done]
    runtime = runtime_for(config)
    callback = progress_for(str(plan.out))
    records: list[ProbeRecord] = []
    with store_for(config) as store, JsonlSink(plan.probes_path) as jsonl:
        sink = _TeeSink(jsonl, store, plan.study_id)
        try:
            records = await run_probes(
                runtime,
                inputs.catalog,
                todo,
                options=probe_options(config),
                sink=sink,
                concurrency=config.concurrency,
                fingerprint=plan.fingerprint,
                on_probe=callback,
                cost_cap=config.max_cost,
                spent_before=spent_before,
            )
        finally:
            sink.flush()
            await runtime.aclose()
    errors = [r.error for r in records if r.error]
    if errors:
        logger().info("batch %d: %d of %d probes failed (first: %s)", batch, len(errors), len(records),
                         errors[0][:200])
    return {
        "batch": batch,
        "probes": len(records),
        "errors": len(errors),
        "cost_usd": round(sum(r.cost_usd or 0.0 for r in records), 6),
        "skipped": len(pairs) - len(todo),
    }
