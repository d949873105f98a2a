"""One provider rate limit for every machine: Prefect global concurrency limits with slot decay.

``skillreach serve`` upserts them from its settings (``requests_per_minute``,
``input_tokens_per_minute``); ``skillreach worker`` creates any that are missing from its own and
installs them as the runtimes' limiters (:func:`install_shared_limits`), so every worker's requests
draw on the same limit on the server. Runs without a server keep the in-process token bucket
(``runtimes/_ratelimit.py``).

A limit of ``R`` per window ``W`` is a bucket of ``B = max(1, R // 10)`` slots refilled at
``(R - B) / W`` a second: at most ``B + (R - B) = R`` acquisitions in any window of ``W`` (a bucket of
``R`` slots refilled at ``R / W`` would allow ``2R``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["ensure_rate_limits", "existing_limits", "install_shared_limits", "limit_name", "limit_shape"]

KINDS = ("requests", "input-tokens")


def limit_name(runtime: str, kind: str) -> str:
    """``skillreach-<runtime>-<requests|input-tokens>``: one limit per provider key and kind."""
    return f"skillreach-{runtime}-{kind}"


def limit_shape(per_window: int, window_s: float = 60.0) -> tuple[int, float]:
    """(slots, slot decay per second) so that no window of ``window_s`` holds more than ``per_window``."""
    burst = max(1, per_window // 10)
    return burst, (per_window - burst) / window_s


def _wanted(runtime: str, requests_per_minute: int | None, input_tokens_per_minute: int | None
            ) -> dict[str, int]:
    wanted = {"requests": requests_per_minute, "input-tokens": input_tokens_per_minute}
    return {limit_name(runtime, k): v for k, v in wanted.items() if v}


async def ensure_rate_limits(
    runtimes: list[str],
    requests_per_minute: int | None,
    input_tokens_per_minute: int | None,
    *,
    window_s: float = 60.0,
    replace: bool = True,
) -> dict[str, tuple[int, float]]:
    """Create (``replace``: or update) the limits of each runtime on the Prefect server at
    ``PREFECT_API_URL``; returns name → (slots, decay per second) of the limits it wrote."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    written: dict[str, tuple[int, float]] = {}
    async with get_client() as client:
        for runtime in runtimes:
            for name, per_window in _wanted(runtime, requests_per_minute, input_tokens_per_minute).items():
                if not replace:
                    try:
                        await client.read_global_concurrency_limit_by_name(name)
                        continue
                    except ObjectNotFound:
                        pass
                slots, decay = limit_shape(per_window, window_s)
                upsert = client.upsert_global_concurrency_limit_by_name
                try:
                    await upsert(name, slots, slot_decay_per_second=decay)
                except ObjectAlreadyExists:  # another worker created it between the read and the write
                    if not replace:
                        continue
                    await upsert(name, slots, slot_decay_per_second=decay)
                written[name] = (slots, decay)
    return written


def _acquire(name: str) -> Callable[[int], Awaitable[None]]:
    async def acquire(n: int) -> None:
        from prefect.concurrency.asyncio import rate_limit

        await rate_limit(name, occupy=n, strict=True)

    return acquire


def install_shared_limits(existing: dict[str, tuple[int, float]]) -> None:
    """Make the runtimes of this process draw on the server's limits in ``existing`` (name → slots, decay
    per second; the worker reads them once when it starts), whatever limit a study names: the server's
    is the provider key's. A limit the server does not have stays in-process (the study's own)."""
    from skillreach.runtimes import SharedRateLimit, set_shared_limits

    def factory(runtime: str, kind: str, per_minute: float | None) -> Any:
        name = limit_name(runtime, kind)
        if name not in existing:
            return None
        slots, decay = existing[name]
        return SharedRateLimit(name, _acquire(name), per_minute=decay * 60 + slots, max_slots=slots)

    set_shared_limits(factory)


async def existing_limits() -> dict[str, tuple[int, float]]:
    """skillreach's active global limits on the server: name → (slots, slot decay per second)."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        limits = await client.read_global_concurrency_limits(limit=200)
    return {lim.name: (lim.limit, float(lim.slot_decay_per_second or 0.0)) for lim in limits
            if lim.name.startswith("skillreach-") and lim.active and lim.slot_decay_per_second}


API_RUNTIMES = ["anthropic", "openai-compatible"]
"""The runtimes whose requests draw on a provider's per-minute limits."""


async def ensure_from_settings(*, replace: bool = True) -> dict[str, tuple[int, float]]:
    """The limits of this process's settings (``SKILLREACH_REQUESTS_PER_MINUTE``,
    ``SKILLREACH_INPUT_TOKENS_PER_MINUTE``) on the server: what ``skillreach serve`` calls."""
    from skillreach.settings import load_settings

    s = load_settings()
    if not (s.requests_per_minute or s.input_tokens_per_minute):
        return {}
    return await ensure_rate_limits(API_RUNTIMES, s.requests_per_minute, s.input_tokens_per_minute,
                                    replace=replace)
