"""The redaction of structures masks secret-looking keys' text, never a count whose key names tokens."""

from __future__ import annotations

from skillreach._io.redact import MASK, redact


def test_a_token_count_is_not_a_secret_but_a_key_is() -> None:
    config = {"routing_max_tokens": 256, "input_tokens_per_minute": 40_000, "api_key": "not-a-real-key-1234",
              "runtime_options": {"auth_token": "xyz-secret-value", "max_tokens": 1024}}
    out = redact(config, keys=True)
    assert out["routing_max_tokens"] == 256
    assert out["input_tokens_per_minute"] == 40_000
    assert out["runtime_options"]["max_tokens"] == 1024
    assert out["api_key"] == MASK
    assert out["runtime_options"]["auth_token"] == MASK
