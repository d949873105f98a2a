"""The one translation of the anthropic SDK's errors and the one usage reader (issue 13), used by the
anthropic runtime, the rubric judge and the query generator."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from skillreach.errors import ProbeFailed, TransientProbeError
from skillreach.models import Usage
from skillreach.runtimes._anthropic_common import translate_error, usage_of

REQUEST = httpx.Request("POST", "https://api.example/v1/messages")
TRANSIENT = {408, 409, 429, 500, 502, 503, 504, 529}
FINAL = {400, 401, 403, 404, 413, 422}


def status_error(status: int, headers: dict[str, str] | None = None) -> anthropic.APIStatusError:
    body = {"type": "error", "error": {"type": "some_error", "message": f"said {status}"}}
    response = httpx.Response(status, json=body, headers=headers, request=REQUEST)
    return anthropic.AsyncAnthropic(api_key="k")._make_status_error_from_response(response)


@pytest.mark.parametrize("status", sorted(TRANSIENT | FINAL))
def test_every_status_has_one_translation(status: int) -> None:
    err = translate_error(status_error(status))
    assert isinstance(err, ProbeFailed)
    assert isinstance(err, TransientProbeError) is (status in TRANSIENT)
    assert err.message == f"HTTP {status} some_error: said {status}"


def test_retry_after_and_should_retry_are_honoured() -> None:
    err = translate_error(status_error(429, {"retry-after": "3"}))
    assert isinstance(err, TransientProbeError)
    assert err.retry_after == 3.0
    assert not isinstance(
        translate_error(status_error(500, {"x-should-retry": "false"})), TransientProbeError
    )
    assert isinstance(translate_error(status_error(400, {"x-should-retry": "true"})), TransientProbeError)


def test_timeouts_and_dropped_connections_are_transient_and_others_are_not_ours() -> None:
    assert isinstance(translate_error(anthropic.APITimeoutError(request=REQUEST)), TransientProbeError)
    dropped = anthropic.APIConnectionError(request=REQUEST)
    assert isinstance(translate_error(dropped), TransientProbeError)
    assert translate_error(ValueError("not the SDK's")) is None


def test_the_runtime_the_judge_and_the_generator_share_it() -> None:
    import inspect

    from skillreach.runtimes import anthropic as runtime
    from skillreach.runtimes import judge_anthropic
    from skillreach.tasks import generate

    exc = status_error(503)
    assert runtime.classify_error(exc).message == translate_error(exc).message  # type: ignore[union-attr]
    for module in (judge_anthropic, generate):
        source = inspect.getsource(module)
        assert "translate_error(" in source
        assert "usage_of(" in source
        assert "APIStatusError" not in source  # no translation of its own


def test_usage_of_reads_objects_json_and_bare_usage() -> None:
    full = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 2,
        "cache_read_input_tokens": 7,
    }
    expected = Usage(**full)
    assert usage_of({"usage": full}) == expected  # a message as the API's JSON
    assert usage_of(full) == expected  # the claude CLI's stream-json usage
    message = anthropic.types.Message.model_validate(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "x",
            "content": [],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": full,
        }
    )
    assert usage_of(message) == expected  # an SDK object
    assert usage_of(message.usage) == expected
    assert usage_of({"usage": {"input_tokens": 3, "output_tokens": None}}) == Usage(input_tokens=3)
    assert usage_of(None) == Usage()
