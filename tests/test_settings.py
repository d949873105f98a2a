from __future__ import annotations

from pathlib import Path

import pytest

from skillreach.errors import ConfigError
from skillreach.settings import load_settings


def test_precedence_flag_over_file_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "skillreach.toml"
    cfg.write_text('runtime = "retriever"\nmax_turns = 5\nattempts = 2\n')
    monkeypatch.setenv("SKILLREACH_RUNTIME", "fake")
    monkeypatch.setenv("SKILLREACH_MAX_TURNS", "7")
    monkeypatch.setenv("SKILLREACH_CONCURRENCY", "3")
    s = load_settings(cfg, attempts=4, runtime=None)
    assert s.attempts == 4  # flag beats file
    assert s.runtime == "retriever"  # file beats environment; None means "flag not given"
    assert s.max_turns == 5
    assert s.concurrency == 3  # environment beats default
    assert load_settings().max_turns == 7


def test_misspelled_key_names_file_and_key(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("max_turn: 4\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(cfg)
    assert str(cfg) in str(exc.value)
    assert "max_turn" in str(exc.value)
    assert "unknown setting" in str(exc.value)


def test_bad_value_and_unreadable_file(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("attempts: 0\n")
    with pytest.raises(ConfigError, match="attempts"):
        load_settings(cfg)
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "missing.toml")
    (tmp_path / "broken.toml").write_text("runtime = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(tmp_path / "broken.toml")


def test_price_lookup_by_longest_prefix() -> None:
    s = load_settings()
    p = s.price_for("claude-sonnet-4-5-20250929")
    assert p is not None
    assert p.input == 3.0
    assert s.price_for("unknown-model") is None
    assert s.price_for(None) is None


def test_gate_defaults_match_issue() -> None:
    g = load_settings().gates
    assert (g.activation, g.false_activation, g.compliance, g.task_quality) == (-0.05, 0.03, -0.05, -0.05)


def test_environment_value_that_is_not_json_is_one_line_without_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", "https://hooks.example/T000/SECRET-TOKEN")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert "SKILLREACH_ALERT_WEBHOOKS" in str(exc.value)
    assert "SECRET-TOKEN" not in str(exc.value)
    monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", '["https://hooks.example/T000/SECRET-TOKEN"]')
    assert load_settings().alert_webhooks == ["https://hooks.example/T000/SECRET-TOKEN"]
