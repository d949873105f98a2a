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


def test_an_error_of_ours_carries_its_message_masked_wherever_it_goes() -> None:
    """str(), args (what pickle and Prefect's failed-state message read) and .message: all masked."""
    import pickle

    from skillreach.errors import ProbeFailed, SkillParseError

    key = "sk-ant-api03-ERRSECRETerrsecret0123456789"
    err = ProbeFailed(f"HTTP 401: invalid x-api-key {key} via http://u:PWSECRET42@proxy.invalid:3128")
    for text in (str(err), err.message, repr(err.args), repr(pickle.loads(pickle.dumps(err)).args)):
        assert key not in text, text
        assert "PWSECRET42" not in text, text
        assert "HTTP 401" in text
    assert "ERRSECRET" not in str(SkillParseError("a.md", 3, f"token {key} found"))
