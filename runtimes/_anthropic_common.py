"""What every caller of the Messages API shares: the anthropic runtime, the rubric judge and the query
generator.

- :func:`translate_error`: the one map of the ``anthropic`` SDK's exceptions to the project's errors —
  :class:`~skillreach.errors.TransientProbeError` (worth a retry: 408, 409, 429, 5xx and 529, timeouts,
  dropped connections; ``x-should-retry`` overrides, ``retry-after`` is kept) or
  :class:`~skillreach.errors.ProbeFailed` (a 4xx: not worth one), the text ``HTTP <status> <type>:
  <the API's message>``; ``None`` for an exception that is not the SDK's.
- :func:`within_deadline`: one whole exchange with the API (connecting, sending, every byte of the
  reply) bounded by one deadline, the SDK's ``APITimeoutError`` past it. The SDK's timeout (httpx's and
  aiohttp's) bounds each read, so a server that drips its reply a byte at a time would hold a probe
  for ever; ``SKILLREACH_TIMEOUT_S`` is the whole exchange's.
- :func:`usage_of`: the one reader of a message's ``usage`` (an SDK object or the API's JSON), cache
  tokens included; the claude CLI's stream-json carries the same shape.

The SDK is imported only when an error is translated: ``usage_of`` serves the claude-code runtime too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from skillreach.errors import ProbeFailed
from skillreach.models import Usage
from skillreach.runtimes._skilltool import classify_sdk_error, error_detail

__all__ = ["api_message", "describe", "translate_error", "usage_of", "within_deadline"]

T = TypeVar("T")

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def describe(status: int, kind: str, message: str) -> str:
    """The text of an API error: ``HTTP 429 rate_limit_error: <the API's message>``."""
    return f"HTTP {status} {kind}: {message}"


def translate_error(exc: BaseException) -> ProbeFailed | None:
    """The project's error for an ``anthropic`` SDK exception (transient or final); None when it is
    not the SDK's."""
    import anthropic

    return classify_sdk_error(exc, anthropic, describe)


async def within_deadline(seconds: float, call: Awaitable[T], url: str) -> T:
    """``await call`` (one exchange with ``url``) for at most ``seconds`` in all; past that the call is
    cancelled and the SDK's own ``APITimeoutError`` raised, which :func:`translate_error` makes a
    transient "the request timed out" (retried like any timeout)."""
    try:
        async with asyncio.timeout(seconds):
            return await call
    except TimeoutError as exc:
        import anthropic
        import httpx2

        raise anthropic.APITimeoutError(
            request=httpx2.Request("POST", url),
            message=f"no complete reply from {url} within {seconds:g} s (the deadline of the whole exchange)",
        ) from exc


def api_message(exc: BaseException) -> str:
    """The API's own message in a status error's body (the exception's text otherwise)."""
    return error_detail(exc)[1]


def usage_of(source: Any) -> Usage:
    """Token usage from a message (``message.usage``), a usage object, or either as the API's JSON."""
    if source is None:
        return Usage()
    usage = source.get("usage", source) if isinstance(source, dict) else getattr(source, "usage", source)
    if usage is None:
        return Usage()
    if isinstance(usage, dict):
        values = {k: usage.get(k) for k in _USAGE_KEYS}
    else:
        values = {k: getattr(usage, k, None) for k in _USAGE_KEYS}
    return Usage(**{k: int(v or 0) for k, v in values.items()})
