"""Prefect tasks of query generation: prepare, one Messages API call per target, finish.

- :func:`prepare_generation` loads the skills, builds the full catalog, renders one request per target
  (:func:`skillreach.queries.generation.plan_requests`) and opens the checkpoint (refusing one written for
  other
  inputs). Targets already in the checkpoint with the same request digest are not asked again.
- :func:`generate_target` makes the request with the official ``anthropic`` SDK (``AsyncAnthropic``;
  key and endpoint from ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL`` as the SDK reads them). The SDK
  retries 429/5xx/timeouts itself (``max_retries``, honouring ``retry-after``); what is still transient
  afterwards fails the task with :class:`~skillreach.errors.TransientProbeError` and Prefect retries
  the task. A reply that is not valid JSON is asked again once; a second one fails the target (data,
  not a crash). A finished target is appended to the checkpoint (fsynced) before the task returns.
  A refused key, an unknown model or a refused ``temperature`` is a :class:`ConfigError`: it stops the
  whole generation.
- :func:`finish_generation` assembles, filters, reports leaks, seals and writes the set and its report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, ConfigDict, Field

from skillreach.errors import ConfigError, InputError, SkillreachError, TransientProbeError
from skillreach.models import Catalog, QuerySet, Usage
from skillreach.queries.checkpoint import (
    Checkpoint,
    CheckpointHeader,
    append_result,
    checkpoint_path,
    report_path,
    write_report,
)
from skillreach.queries.generation import (
    GenerationParams,
    GenerationReport,
    GenerationRequest,
    MalformedReply,
    TargetResult,
    assemble,
    generation_provenance,
    parse_reply,
    plan_requests,
    template_digest,
)
from skillreach.runtimes import api_message, translate_error, usage_of

__all__ = [
    "GenerateOptions",
    "GenerationOutcome",
    "GenerationPlan",
    "finish_generation",
    "generate_target",
    "plan_generation",
    "prepare_generation",
    "require_key",
]


class GenerateOptions(BaseModel):
    """Everything one ``skillreach queries generate`` needs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skills: tuple[Path, ...]
    out: Path
    params: GenerationParams = Field(default_factory=GenerationParams)
    targets: tuple[str, ...] | None = None
    restart: bool = False
    drop_leaks: bool = False
    concurrency: int = Field(default=4, ge=1)
    max_retries: int = Field(default=6, ge=0)
    timeout_s: float = Field(default=120.0, gt=0)


class GenerationPlan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    catalog: Catalog
    requests: tuple[GenerationRequest, ...]
    skipped: dict[str, str]
    template_digest: str
    checkpoint: Path
    finished: dict[str, TargetResult]
    """Targets resumed from the checkpoint (same request digest): not asked again."""

    @property
    def pending(self) -> list[GenerationRequest]:
        return [r for r in self.requests if r.target not in self.finished]


class GenerationOutcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    out: Path
    report_path: Path
    checkpoint: Path
    queries: int
    digest: str
    generator_model: str | None
    report: GenerationReport


def require_key() -> None:
    """One clear line when the SDK would have no credentials."""
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        raise ConfigError(
            "ANTHROPIC_API_KEY is not set; export it (and ANTHROPIC_BASE_URL for a proxy or gateway) "
            "to generate queries"
        )


# -------------------------------------------------------------------------------------------- prepare


def plan_generation(
    options: GenerateOptions, *, on_problem: Callable[[str], None] | None = None
) -> GenerationPlan:
    """Load the skills, render every target's request and open the checkpoint (no network).

    SKILL.md problems go to ``on_problem`` (default: a logged warning). Raises :class:`InputError`
    for a bad ``--out``, unknown targets, no skills, or a checkpoint
    written for other inputs; :class:`ConfigError` when requests are due and no key is set.
    """
    from skillreach.skills.catalog import build_catalog
    from skillreach.skills.discovery import load_skills

    if options.out.suffix.lower() != ".json":
        raise InputError(f"--out {options.out}: a sealed query set is JSON; give the output a .json name")
    skills = load_skills(list(options.skills), on_problem=on_problem)
    catalog = build_catalog(skills, "full")
    requests, skipped = plan_requests(
        catalog, options.params, targets=list(options.targets) if options.targets else None
    )
    digest = template_digest()
    header = CheckpointHeader.of(catalog, digest, options.params)
    checkpoint = Checkpoint.open(checkpoint_path(options.out), header, restart=options.restart)
    finished = {r.target: f for r in requests if (f := checkpoint.finished(r)) is not None}
    if len(finished) < len(requests):
        require_key()
    return GenerationPlan(
        catalog=catalog,
        requests=tuple(requests),
        skipped=skipped,
        template_digest=digest,
        checkpoint=checkpoint.path,
        finished=finished,
    )


@task(name="prepare-generation", cache_policy=NO_CACHE)
async def prepare_generation(options: GenerateOptions) -> GenerationPlan:
    """:func:`plan_generation` as a task."""
    return plan_generation(options)


# ------------------------------------------------------------------------------------------- generate


def _is_transient(task: Any, task_run: Any, state: Any) -> bool:
    return isinstance(getattr(state, "data", None), TransientProbeError)


async def _create(client: Any, request: GenerationRequest, params: GenerationParams) -> Any:
    """One Messages API call; vendor errors translated (see the module docstring)."""
    import anthropic

    extra: dict[str, Any] = {}
    if params.temperature is not None:
        extra["extra_body"] = {"temperature": params.temperature}
    try:
        return await client.messages.create(
            model=params.model,
            max_tokens=request.max_tokens,
            system=request.system,
            messages=[{"role": "user", "content": request.prompt}],
            **extra,
        )
    except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
        raise ConfigError(
            f"the Messages API refused the credentials ({exc.status_code}: {api_message(exc)}); "
            "check ANTHROPIC_API_KEY"
        ) from exc
    except anthropic.NotFoundError as exc:
        raise ConfigError(
            f"--model {params.model}: the Messages API does not know it ({api_message(exc)})"
        ) from exc
    except anthropic.APIError as exc:
        err = translate_error(exc)  # the one map of the SDK's errors (runtime, judge, generator)
        if err is None:
            raise
        detail = api_message(exc)
        if (
            isinstance(exc, anthropic.BadRequestError)
            and params.temperature is not None
            and "temperature" in detail.lower()
        ):
            raise ConfigError(f"--temperature: the Messages API refused it ({detail}); leave it out") from exc
        raise type(err)(f"{request.target}: {err.message} (after the SDK's retries)") from exc


async def ask(request: GenerationRequest, options: GenerateOptions, client: Any = None) -> TargetResult:
    """Ask for one target's drafts: a reply that is not valid JSON is asked again once."""
    own = client is None
    if client is None:
        import anthropic

        client = anthropic.AsyncAnthropic(max_retries=options.max_retries, timeout=options.timeout_s)
    usage = Usage()
    resolved: str | None = None
    error = ""
    try:
        for attempt in (1, 2):
            message = await _create(client, request, options.params)
            usage = usage + usage_of(message)
            resolved = getattr(message, "model", None) or resolved
            text = "".join(
                getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text"
            )
            try:
                drafts = parse_reply(text)
            except MalformedReply as exc:
                cut = " (cut at max_tokens)" if getattr(message, "stop_reason", "") == "max_tokens" else ""
                error = f"{exc}{cut}"
                continue
            return TargetResult(
                target=request.target,
                drafts=tuple(drafts),
                resolved_model=resolved,
                usage=usage,
                requests=attempt,
                request_digest=request.digest,
            )
    finally:
        if own:
            await client.close()
    return TargetResult(
        target=request.target,
        error=f"no valid JSON in 2 replies: {error}",
        resolved_model=resolved,
        usage=usage,
        requests=2,
        request_digest=request.digest,
    )


@task(
    name="generate-target",
    cache_policy=NO_CACHE,
    retries=2,
    retry_delay_seconds=[5, 30],
    retry_condition_fn=_is_transient,
    tags=["skillreach-generate"],
)
async def generate_target(
    request: GenerationRequest, options: GenerateOptions, checkpoint: Path
) -> TargetResult:
    """One target: the request (see :func:`ask`), then its line in the checkpoint if it succeeded."""
    result = await ask(request, options)
    if result.ok:
        append_result(checkpoint, result)
    return result


# --------------------------------------------------------------------------------------------- finish


@task(name="finish-generation", cache_policy=NO_CACHE)
async def finish_generation(
    plan: GenerationPlan, results: dict[str, TargetResult], options: GenerateOptions
) -> GenerationOutcome:
    from skillreach.queries.sets import seal, write_query_set

    assembly = assemble(
        plan.catalog,
        plan.requests,
        results,
        skipped=plan.skipped,
        resumed=plan.finished.keys(),
        drop_leaks=options.drop_leaks,
    )
    report = assembly.report
    where = write_report(report_path(options.out), report)
    if not assembly.queries:
        failed = len(report.failures)
        raise SkillreachError(
            f"no query survived ({failed} of {len(plan.requests)} targets failed, "
            f"dropped: {report.dropped or 'none'}); nothing written to {options.out}; see {where}"
        )
    provenance = generation_provenance(
        report, options.params, catalog=plan.catalog, template_digest=plan.template_digest, results=results
    )
    source = "generated from " + ", ".join(str(p) for p in options.skills)
    sealed = seal(
        QuerySet(catalog_id=plan.catalog.id, queries=assembly.queries),
        source=source,
        origin="generated",
        **provenance,
    )
    write_query_set(sealed, options.out)
    return GenerationOutcome(
        out=options.out,
        report_path=where,
        checkpoint=plan.checkpoint,
        queries=len(sealed.queries),
        digest=sealed.provenance.digest,
        generator_model=sealed.provenance.generator_model,
        report=report,
    )
