"""What the CLI asks a Prefect server directly (is it up; its runs, pool and workers for ``status``),
treating ``PREFECT_API_URL`` as input: a deadline for the whole exchange (connect, headers, body — a
server that drips its answer a byte at a time ends there too), a bound on the bytes read, and the JSON
checked for the shape asked for. Every way of failing is one :class:`ApiProblem` with a short reason;
callers say it in their line and fall back (``run`` probes in-process, ``status`` reports it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
from typing import Any

__all__ = ["MAX_BYTES", "ApiProblem", "api_from_settings", "check_api_url", "fetch_json", "server_answers"]

MAX_BYTES = 4 * 2**20
"""The most read of one answer (Prefect's answers to these requests are a few KiB)."""


class ApiProblem(Exception):
    """The server did not answer as a Prefect server does; ``str()`` says how (no secret in it);
    ``status`` is the HTTP status when one came (404: no such object)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


async def _exchange(url: str, method: str, body: Any, max_bytes: int, deadline_s: float) -> tuple[int, bytes]:
    import httpx

    async with (
        httpx.AsyncClient(timeout=deadline_s, follow_redirects=False, trust_env=False) as client,
        client.stream(method, url, json=body) as response,
    ):
        size = 0
        chunks: list[bytes] = []
        # decoded: Prefect gzips an answer over 1 KB; the bound counts what is decoded (no gzip bomb)
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise ApiProblem(f"answered more than {max_bytes:,} bytes")
            chunks.append(chunk)
        return response.status_code, b"".join(chunks)


def _run(url: str, method: str, body: Any, max_bytes: int, deadline_s: float) -> tuple[int, bytes]:
    async def bounded() -> tuple[int, bytes]:
        return await asyncio.wait_for(_exchange(url, method, body, max_bytes, deadline_s), deadline_s)

    # a thread of its own: the caller may itself run inside an event loop
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="prefect-api") as pool:
        return pool.submit(asyncio.run, bounded()).result()


def fetch_json(
    api: str,
    path: str,
    *,
    body: Any = None,
    deadline_s: float = 2.0,
    max_bytes: int = MAX_BYTES,
    shape: type | tuple[type, ...] = (dict, list),
) -> Any:
    """``path`` of the API at ``api`` (GET, or POST with ``body``): its JSON, of type ``shape``, read
    within ``deadline_s`` in all; an :class:`ApiProblem` otherwise."""
    url = f"{api.rstrip('/')}/{path.lstrip('/')}"
    try:
        status, data = _run(url, "POST" if body is not None else "GET", body, max_bytes, deadline_s)
    except ApiProblem:
        raise
    except TimeoutError:
        raise ApiProblem(f"no whole answer within {deadline_s:g} s") from None
    except Exception as exc:  # whatever the transport raises on what the URL names: a reason, not a crash
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]  # type: ignore[assignment]
        raise ApiProblem(type(exc).__name__) from None
    if not 200 <= status < 300:
        raise ApiProblem(f"answered {status} to {path}", status)
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise ApiProblem(f"answered {path} with something other than JSON") from None
    if not isinstance(value, shape):
        raise ApiProblem(f"answered {path} with JSON of another shape than a Prefect server's")
    return value


def _refuse(shown: str, reason: str) -> None:
    from skillreach.errors import ConfigError

    raise ConfigError(
        f"PREFECT_API_URL ({shown}): Prefect cannot read it ({reason[:120]}); set it to a Prefect "
        "server's API URL (http://127.0.0.1:4200/api) or unset it to run in-process"
    )


def check_api_url() -> None:
    """``PREFECT_API_URL`` checked the way Prefect's settings parse it, before Prefect is imported (whose
    import prints the settings' validation error as it fails): one ConfigError naming the variable."""
    from urllib.parse import urlsplit

    raw = os.environ.get("PREFECT_API_URL")
    if not raw:
        return
    try:
        _ = urlsplit(raw).port
    except ValueError as exc:
        from skillreach._io.urls import url_label

        _refuse(url_label(raw), str(exc))


def api_from_settings() -> str | None:
    """The configured API URL (``PREFECT_API_URL``, else Prefect's profile), or ``None``. A value
    Prefect itself cannot read is a :class:`~skillreach.errors.ConfigError` naming the variable."""
    check_api_url()
    raw = os.environ.get("PREFECT_API_URL")
    try:
        from prefect.settings import get_current_settings

        url = get_current_settings().api.url
    except Exception as exc:  # pydantic's ValidationError: Prefect refuses the URL at all
        from skillreach._io.urls import url_label

        shown = url_label(raw) if raw else "the profile's api.url"
        lines = str(exc).splitlines()
        _refuse(shown, lines[1].split(" [type=")[0].strip() if len(lines) > 1 else type(exc).__name__)
    return str(url) if url else None


def server_answers(api: str, *, deadline_s: float = 1.5, version: bool = True) -> str | None:
    """``None`` when a Prefect server answers at ``api`` — its health check ``true`` and (``version``)
    its version a version (what Prefect's own client asks first, and fails on with a traceback), each
    whole within the deadline — else why not."""
    import re

    try:
        healthy = fetch_json(api, "/health", deadline_s=deadline_s, max_bytes=1024, shape=bool)
        if healthy is not True:
            return "answered /health with false"
        if not version:
            return None
        said = fetch_json(api, "/admin/version", deadline_s=deadline_s, max_bytes=1024, shape=str)
    except ApiProblem as exc:
        return str(exc)
    if not re.fullmatch(r"\d+\.\d+[\w.+-]*", said):
        return "answered /admin/version with something other than a version"
    return None
