"""``skillreach queries generate`` as a Prefect flow: prepare → one task per target → finish.

The flow only composes the tasks of :mod:`tasks.generate` and branches; :func:`drive` is that
composition, written against plain callables so tests can run it with the tasks' ``.fn`` (no server).
Targets run concurrently (``options.concurrency`` at a time). A target that fails (a reply that is not
valid JSON twice, an API error that retries did not cure) is reported, not fatal; a configuration error
(refused key, unknown model) stops the generation at once. Finished targets are already in the
checkpoint, so a re-run pays only for the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from prefect import flow

from skillreach.errors import ConfigError, SkillreachError
from skillreach.flows._compose import call
from skillreach.queries.generation import GenerationRequest, TargetResult
from skillreach.tasks.generate import (
    GenerateOptions,
    GenerationOutcome,
    GenerationPlan,
    finish_generation,
    generate_target,
    prepare_generation,
)

__all__ = ["drive", "generate_queries"]

OnTarget = Callable[[TargetResult], None]


async def drive(
    options: GenerateOptions,
    *,
    prepare: Callable[[GenerateOptions], Awaitable[GenerationPlan]],
    generate: Callable[[GenerationRequest, GenerateOptions, Path], Awaitable[TargetResult]],
    finish: Callable[
        [GenerationPlan, dict[str, TargetResult], GenerateOptions], Awaitable[GenerationOutcome]
    ],
    on_plan: Callable[[GenerationPlan], None] | None = None,
    on_target: OnTarget | None = None,
) -> GenerationOutcome:
    plan = await prepare(options)
    if on_plan is not None:
        on_plan(plan)
    results: dict[str, TargetResult] = dict(plan.finished)
    gate = asyncio.Semaphore(options.concurrency)

    async def one(request: GenerationRequest) -> None:
        async with gate:
            try:
                result = await generate(request, options, plan.checkpoint)
            except ConfigError:
                raise
            except SkillreachError as exc:  # retries exhausted or a request the API refused
                result = TargetResult(target=request.target, error=str(exc), request_digest=request.digest)
        results[request.target] = result
        if on_target is not None:
            on_target(result)

    try:
        async with asyncio.TaskGroup() as group:
            for request in plan.pending:
                group.create_task(one(request))
    except BaseExceptionGroup as failed:
        first: BaseException = failed
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
    return await finish(plan, results, options)


@flow(name="generate-queries", log_prints=False)
async def generate_queries(
    options: GenerateOptions,
    on_plan: Callable[[GenerationPlan], None] | None = None,
    on_target: OnTarget | None = None,
) -> GenerationOutcome:
    """Generate, filter, seal and write a query set (see :mod:`skillreach.queries.generation`)."""
    return await drive(
        options,
        prepare=partial(call, prepare_generation),
        generate=partial(call, generate_target),
        finish=partial(call, finish_generation),
        on_plan=on_plan,
        on_target=on_target,
    )
