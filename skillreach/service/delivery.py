"""Posting an alert's message to a webhook, and what to do when it did not arrive.

- **One deadline for the whole exchange** (``timeout_s``): resolving the host, connecting, sending and
  reading the answer's status line and headers, however slowly the other side drips them; the body of
  the answer is never read (its status says whether the message arrived).
- **The address checked is the address connected to**: the host is resolved once, every address it
  resolves to is checked (:func:`skillreach._io.urls.resolve_checked`: no link-local or metadata
  address, whatever its spelling), and the request goes to the checked address with the host name in
  the ``Host`` header and TLS's server name. No proxy from the environment, no redirect followed.
- **Said as it is**: a :class:`Delivery` is ``ok`` on a 2xx only; ``retry`` says whether trying again
  may help (a refused address, a 3xx or a 4xx other than 408/425/429 will not).

Webhook URLs carry tokens: a :class:`Delivery` names its webhook by :func:`webhook_label` (scheme and
host), an error by its class name, and the HTTP client's log lines show neither URL nor path.
``httpx`` is imported when a post is made, never at import time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

__all__ = ["Delivery", "backoff", "channel_of", "post_json", "post_many", "run_sync", "webhook_label"]

T = TypeVar("T")

RETRY_STATUSES = frozenset({408, 425, 429})
"""Answers other than 5xx after which a later try may succeed."""
MAX_CONCURRENT_POSTS = 8


@dataclass(frozen=True)
class Delivery:
    target: str  # webhook_label(url), never the URL
    ok: bool
    status: int | None = None
    error: str | None = None
    retry: bool = True
    """Whether a later try may succeed (``False``: refused, or an answer that will not change)."""


def webhook_label(url: str) -> str:
    """What may be shown of a webhook URL: scheme and host, never the path (it holds the token).
    Safe on any string (a port that is not one is shown as it is written, never raised on)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = parts.port
    except ValueError:
        from skillreach._io.urls import url_label

        return url_label(url)
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}/…"


def channel_of(url: str) -> str:
    """The name a webhook's deliveries are stored under: its label and a digest of the whole URL (two
    webhooks on one host stay apart; the URL itself, a secret, is never stored)."""
    return f"{webhook_label(url)}#{hashlib.sha256(url.strip().encode()).hexdigest()[:12]}"


def backoff(tries_made: int, first: timedelta, longest: timedelta) -> timedelta:
    """The wait after the ``tries_made``-th failed try: ``first``, doubling, at most ``longest``."""
    return min(first * (2 ** min(max(tries_made - 1, 0), 40)), longest)


class _HideURLs(logging.Filter):
    """Rewrites log records of the HTTP client so that no webhook URL, or its path, is logged."""

    def __init__(self, urls: Sequence[str]) -> None:
        super().__init__()
        secrets: dict[str, str] = {}
        for url in urls:
            secrets[url] = webhook_label(url)
            try:
                path = urlsplit(url.strip())._replace(scheme="", netloc="").geturl()
            except ValueError:
                continue
            if len(path) > 1:
                secrets[path] = "/…"
        self._secrets = sorted(secrets.items(), key=lambda kv: len(kv[0]), reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if any(s in text for s, _ in self._secrets):
            for secret, shown in self._secrets:
                text = text.replace(secret, shown)
            record.msg, record.args = text, None
        return True


async def _in_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in a daemon thread of its own, awaited: a cancelled wait (the deadline) abandons a call
    that blocks (the system resolver) instead of waiting for it, as an executor's shutdown would."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(fut: asyncio.Future[T], value: Any, failed: bool) -> None:
        if not fut.done():
            (fut.set_exception if failed else fut.set_result)(value)

    def run() -> None:
        try:
            result: Any = fn()
            failed = False
        except BaseException as exc:  # handed to the waiting coroutine
            result, failed = exc, True
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, done, result, failed)

    threading.Thread(target=run, name="skillreach-resolve", daemon=True).start()
    return await done


async def _post(url: str, body: Mapping[str, Any], timeout_s: float, transport: Any) -> Delivery:
    import httpx

    from skillreach._io.urls import resolve_checked

    label = webhook_label(url)
    addresses, problem = await _in_thread(lambda: resolve_checked(url))
    if problem:
        return Delivery(label, False, None, f"refused: {problem}", retry=False)
    target = httpx.URL(url.strip())
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    headers = {"Host": target.netloc.decode("ascii")}
    async with httpx.AsyncClient(timeout=timeout_s, transport=transport, follow_redirects=False,
                                 trust_env=False) as client:
        for i, address in enumerate(addresses):  # the checked addresses, in the resolver's order
            request = client.build_request("POST", target.copy_with(host=address), json=dict(body),
                                           headers=headers, extensions=extensions)
            try:
                response = await client.send(request, stream=True)
            except httpx.ConnectError:
                if i == len(addresses) - 1:
                    raise
                continue
            await response.aclose()  # the status is the answer; a body (however slow or large) is not read
            break
    status = response.status_code
    if 200 <= status < 300:
        return Delivery(label, True, status)
    return Delivery(label, False, status, f"HTTP {status}", retry=status in RETRY_STATUSES or status >= 500)


async def post_json(url: str, body: Mapping[str, Any], *, timeout_s: float = 10.0,
                    transport: Any = None) -> Delivery:
    """POST ``body`` to ``url`` within ``timeout_s`` for the whole exchange; never raises."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _post(url, body, timeout_s, transport)
    except TimeoutError:
        return Delivery(webhook_label(url), False, None, f"no complete answer within {timeout_s:g} s")
    except Exception as exc:  # documented: never raises; the text may hold the URL, the class name not
        return Delivery(webhook_label(url), False, None, type(exc).__name__)


async def post_many(posts: Sequence[tuple[str, Mapping[str, Any]]], *, timeout_s: float = 10.0,
                    transport: Any = None) -> list[Delivery]:
    """Each ``(url, body)`` posted (a few at a time), one :class:`Delivery` each, in order; the HTTP
    client's log lines show no URL."""
    hide = _HideURLs([u for u, _ in posts])
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore")]
    for lg in loggers:
        lg.addFilter(hide)  # httpx logs every request's full URL at INFO
    slots = asyncio.Semaphore(MAX_CONCURRENT_POSTS)

    async def one(url: str, body: Mapping[str, Any]) -> Delivery:
        async with slots:
            return await post_json(url, body, timeout_s=timeout_s, transport=transport)

    try:
        return list(await asyncio.gather(*(one(u, b) for u, b in posts)))
    finally:
        for lg in loggers:
            lg.removeFilter(hide)


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``make()`` returns to its end from synchronous code (in a thread of its own when
    this thread already runs an event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(make))
    out: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(asyncio.run(_awaited(make)))
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="skillreach-post")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return out[0]


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()
