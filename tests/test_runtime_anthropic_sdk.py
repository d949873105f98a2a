"""The anthropic runtime against the installed ``anthropic`` SDK: what it reaches past the SDK's public
API is :func:`runtimes.anthropic.sdk_internals` alone, and every piece of it is still there (a release
that moves one fails here, and ``make test-latest`` runs this on the newest SDK)."""

from __future__ import annotations

import anthropic
import httpx2
import pytest

from skillreach.runtimes.anthropic import AnthropicRuntime, sdk_internals

KEY = "sk-ant-test"


def test_the_sdk_still_has_what_the_direct_path_takes() -> None:
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url="http://127.0.0.1:9",
                                      http_client=anthropic.DefaultAioHttpClient())
    internals = sdk_internals(client)
    assert internals is not None, "the installed anthropic SDK moved what runtimes/anthropic.py reaches"
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    response = httpx2.Response(429, json={"type": "error", "error": {"type": "rate_limit_error",
                                                                     "message": "slow down"}},
                               headers={"retry-after": "3"}, request=request)
    status = internals.status_error(response)
    assert isinstance(status, anthropic.RateLimitError)
    assert status.status_code == 429
    timeout = internals.timeout_error(request, httpx2.ReadTimeout("read", request=request))
    assert isinstance(timeout, anthropic.APITimeoutError)
    refused = internals.connection_error(request, httpx2.ConnectError("refused", request=request))
    assert isinstance(refused, anthropic.APIConnectionError)
    import aiohttp

    with_map = internals.map_aiohttp_exceptions()
    try:
        with with_map:
            raise aiohttp.ServerTimeoutError("read")
    except httpx2.TimeoutException:
        pass
    else:  # pragma: no cover - what the test is for
        raise AssertionError("the SDK's aiohttp map no longer turns a timeout into httpx2's")


def test_the_public_path_is_taken_when_an_internal_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An SDK release without one of the internals: the runtime sends through the SDK's ``client.post``."""
    rt = AnthropicRuntime(model="claude-sonnet-4-5", api_key=KEY, base_url="http://127.0.0.1:9")
    assert rt.request_path == "direct aiohttp"  # the installed SDK: all there
    monkeypatch.delattr(anthropic._base_client.BaseClient, "_make_timeout_error")
    assert sdk_internals(anthropic.AsyncAnthropic(api_key=KEY, base_url="http://127.0.0.1:9")) is None
    rt = AnthropicRuntime(model="claude-sonnet-4-5", api_key=KEY, base_url="http://127.0.0.1:9")
    assert rt.request_path == "SDK (aiohttp)"
