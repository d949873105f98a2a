"""The one bounded reader of a Prefect server's REST API, for what skillreach asks it directly (the CLI's
``status``, ``doctor``, ``gc`` and service look-ups; the study's count of task workers).

``PREFECT_API_URL`` is input: every exchange has a deadline for the whole of it (connect, headers, body
— a server that drips its answer a byte at a time ends there too), a bound on the bytes read (counted
decoded: Prefect gzips answers over 1 KB, so no gzip bomb), and the JSON checked for the shape asked
for. Every way of failing is one :class:`ApiProblem` with a short reason and no secret in it.

:func:`configured_api` reads where and how to connect from Prefect's public settings only
(``PREFECT_API_URL``, ``PREFECT_API_KEY``, ``PREFECT_API_AUTH_STRING``, ``PREFECT_API_SSL_CERT_FILE``,
``PREFECT_API_TLS_INSECURE_SKIP_VERIFY``), the way Prefect's own client does, so a server behind
authentication answers us as it answers Prefect — without Prefect's client or its private HTTP client.
The credential goes only to the URL it was configured with and is never shown (``repr`` hides it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_BYTES", "ApiProblem", "PrefectApi", "afetch_json", "configured_api", "fetch_json",
    "with_credentials",
]

MAX_BYTES = 4 * 2**20
"""The most read of one answer (Prefect's answers to these requests are a few KiB)."""


class ApiProblem(Exception):
    """The server did not answer as a Prefect server does; ``str()`` says how (no secret in it);
    ``status`` is the HTTP status when one came (404: no such object)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class PrefectApi:
    """Where the configured Prefect API is and what a request to it carries (the ``Authorization``
    header Prefect's client would send; the TLS verification it would use)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    verify: Any = field(default=True, repr=False)
    """``True`` (the system's certificates), or an ``ssl.SSLContext`` from Prefect's TLS settings."""


def configured_api() -> PrefectApi | None:
    """The Prefect API of Prefect's current settings (environment, then profile), or ``None`` when no
    URL is configured. Raises what Prefect's settings raise for a value they cannot read."""
    import base64
    import ssl

    from prefect.settings import get_current_settings

    api = get_current_settings().api
    if not api.url:
        return None
    headers: dict[str, str] = {}
    # as Prefect's client: the auth string first (a self-hosted server's basic auth), else the API key
    if api.auth_string is not None and api.auth_string.get_secret_value():
        token = base64.b64encode(api.auth_string.get_secret_value().encode("utf-8")).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
    elif api.key is not None and api.key.get_secret_value():
        headers["Authorization"] = f"Bearer {api.key.get_secret_value()}"
    verify: Any = True
    if api.tls_insecure_skip_verify:
        verify = ssl.create_default_context()
        verify.check_hostname = False
        verify.verify_mode = ssl.CERT_NONE
    elif api.ssl_cert_file:
        verify = ssl.create_default_context(cafile=api.ssl_cert_file)
    return PrefectApi(str(api.url), headers, verify)


def with_credentials(api: str, path: str = "") -> PrefectApi:
    """``api`` with the credentials and TLS settings of Prefect's configured API when ``api`` + ``path``
    is under that API's URL; bare otherwise (a credential never goes to another address). Settings
    Prefect cannot read give no credentials (the request then says what the server answers)."""
    url = f"{api.rstrip('/')}/{path.lstrip('/')}"
    try:
        configured = configured_api()
    except Exception:  # pydantic's ValidationError, a certificate file that cannot be read
        configured = None
    if configured is None or not url.startswith(configured.url.rstrip("/") + "/"):
        return PrefectApi(api)
    return PrefectApi(api, configured.headers, configured.verify)


async def _exchange(url: str, method: str, body: Any, target: PrefectApi, *, max_bytes: int,
                    deadline_s: float) -> tuple[int, bytes]:
    import httpx

    async with (
        httpx.AsyncClient(timeout=deadline_s, follow_redirects=False, trust_env=False,
                          verify=target.verify, headers=dict(target.headers)) as client,
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


async def afetch_json(
    api: str | PrefectApi,
    path: str,
    *,
    body: Any = None,
    deadline_s: float = 2.0,
    max_bytes: int = MAX_BYTES,
    shape: type | tuple[type, ...] = (dict, list),
) -> Any:
    """``path`` of the API ``api`` (a URL, or a :class:`PrefectApi` with its credentials; GET, or POST
    with ``body``): its JSON, of type ``shape``, read within ``deadline_s`` in all; an
    :class:`ApiProblem` otherwise."""
    target = api if isinstance(api, PrefectApi) else PrefectApi(api)
    url = f"{target.url.rstrip('/')}/{path.lstrip('/')}"
    method = "POST" if body is not None else "GET"
    try:
        async with asyncio.timeout(deadline_s):
            status, data = await _exchange(url, method, body, target, max_bytes=max_bytes,
                                           deadline_s=deadline_s)
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


def fetch_json(
    api: str | PrefectApi,
    path: str,
    *,
    body: Any = None,
    deadline_s: float = 2.0,
    max_bytes: int = MAX_BYTES,
    shape: type | tuple[type, ...] = (dict, list),
) -> Any:
    """:func:`afetch_json` from synchronous code (on an event loop of its own, in a thread of its own:
    the caller may itself run inside an event loop)."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="prefect-api") as pool:
        return pool.submit(asyncio.run, afetch_json(api, path, body=body, deadline_s=deadline_s,
                                                    max_bytes=max_bytes, shape=shape)).result()
