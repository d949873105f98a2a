"""One resolved configuration: every setting in a config file reaches the place that uses it — through
`skillreach run`, `check`'s gates, `baseline compare --config` and a deployment's flow run — and a
secret never reaches study.json. The table must name every settings field: a new setting without a row
fails here."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from skillreach.settings import Settings
from skillreach.study import StudyConfig
from tests.helpers import hang

SKILLREACH = str(Path(sys.executable).parent / "skillreach")

# field → (TOML line(s) with a non-default value, the value the study sees)
TABLE: dict[str, tuple[str, Any]] = {
    "home": ('home = "h2"', "h2"),
    "database_url": ('database_url = "sqlite:///db2.sqlite"', "sqlite:///db2.sqlite"),
    "runtime": ('runtime = "retriever"', "retriever"),
    "model": ('model = "local-llama"', "local-llama"),
    "attempts": ("attempts = 3", 3),
    "max_turns": ("max_turns = 5", 5),
    "early_exit": ("early_exit = false", False),
    "concurrency": ("concurrency = 3", 3),
    "batch_size": ("batch_size = 7", 7),
    "requests_per_minute": ("requests_per_minute = 120", 120),
    "input_tokens_per_minute": ("input_tokens_per_minute = 90000", 90000),
    "max_retries": ("max_retries = 0", 0),
    "timeout_s": ("timeout_s = 17.5", 17.5),
    "routing_max_tokens": ("routing_max_tokens = 64", 64),
    "canary_timeout_s": ("canary_timeout_s = 33.0", 33.0),
    "max_cost_usd": ("max_cost_usd = 4.5", 4.5),
    "catalog": ('catalog = "neighborhood"', "neighborhood"),
    "skill_precedence": ('skill_precedence = "last"', "last"),
    "neighborhood_k": ("neighborhood_k = 4", 4),
    "neighborhood_size": ("neighborhood_size = 9", 9),
    "seed": ("seed = 11", 11),
    "listing_budget_chars": ("listing_budget_chars = 999", 999),
    "prices": ('[prices."local-llama"]\ninput = 0.5\noutput = 1.5\ncache_write = 0.6\ncache_read = 0.05',
               {"input": 0.5, "output": 1.5, "cache_write": 0.6, "cache_read": 0.05}),
    "gates": ("[gates]\nactivation = -0.5", -0.5),
    "live_gates": ("[live_gates]\nactivation_share = -0.4\nrecent = \"7d\"", -0.4),
    "alert_webhooks": ('alert_webhooks = ["https://hooks.example.invalid/services/T/B/TOKEN"]',
                       ["https://hooks.example.invalid/services/T/B/TOKEN"]),
    "claude_path": ('claude_path = "/opt/claude"', "/opt/claude"),
    "pi_path": ('pi_path = "/opt/pi"', "/opt/pi"),
    "goose_path": ('goose_path = "/opt/goose"', "/opt/goose"),
    "agy_path": ('agy_path = "/opt/agy"', "/opt/agy"),
    "max_probes": ("max_probes = 5000", 5000),
    "judge_model": ('judge_model = "claude-haiku-4-5"', "claude-haiku-4-5"),
    "generator_model": ('generator_model = "claude-gen-1"', "claude-gen-1"),
    "baselines_dir": ('baselines_dir = "records"', "records"),
    "baselines_branch": ('baselines_branch = "bots/baselines"', "bots/baselines"),
    "alert_repeat_after": ('alert_repeat_after = "6h"', "6h"),
    "alert_delivery": ('[alert_delivery]\ntries = 3\nfirst_retry = "5s"', 3),
    "live_sources": ('live_sources = ["/logs/a", "/logs/b"]', os.pathsep.join(["/logs/a", "/logs/b"])),
    "database_statement_timeout_s": ("database_statement_timeout_s = 42.5", 42.5),
    "ui_url": ('ui_url = "http://dash.example.invalid:8420"', "http://dash.example.invalid:8420"),
}
STUDY_FIELD = {"max_cost_usd": "max_cost"}


def config_file(tmp_path: Path, fields: list[str]) -> Path:
    plain = [TABLE[f][0] for f in fields if not TABLE[f][0].startswith("[")]
    tables = [TABLE[f][0] for f in fields if TABLE[f][0].startswith("[")]
    path = tmp_path / "cfg.toml"
    path.write_text("\n".join(plain + tables) + "\n", encoding="utf-8")
    return path


def seen(config: StudyConfig, field: str) -> Any:
    value = getattr(config, STUDY_FIELD.get(field, field))
    if field == "database_url":
        return value.get_secret_value()
    if field == "alert_webhooks":
        return config.webhook_urls()
    if field == "prices":
        return config.prices["local-llama"].model_dump()
    if field == "gates":
        return value.activation
    if field == "live_gates":
        return value.activation_share
    if field == "alert_delivery":
        return value.tries
    if field == "home":
        return value.name
    return value


def test_the_table_names_every_setting() -> None:
    assert set(TABLE) == set(Settings.model_fields)


def test_every_setting_in_a_config_file_reaches_the_study_and_its_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # a secret: the SDK reads it where it is used
    cfg = StudyConfig.build(config_file(tmp_path, list(TABLE)))
    for field, (_, value) in TABLE.items():
        assert seen(cfg, field) == value, field
    settings = cfg.settings()  # what runtimes and the store are built from: nothing re-read
    for field in TABLE:
        got = getattr(settings, field)
        assert got is not None, field
    assert settings.database_url == "sqlite:///db2.sqlite"
    # the runtime the tasks build takes its retries, timeout and rate limits from the file
    from skillreach.tasks._context import runtime_for

    live = cfg.model_copy(update={"runtime": "anthropic", "runtime_options": {}})
    runtime: Any = runtime_for(live)
    try:
        assert runtime.policy.max_retries == 0
        assert runtime.timeout_s == 17.5
        assert runtime._rpm.rate == pytest.approx(120 / 60)
        assert runtime._itpm.rate == pytest.approx(90000 / 60)
    finally:
        asyncio.run(runtime.aclose())
    from skillreach.study.plan import probe_options

    assert probe_options(cfg).timeout_s == 17.5
    assert probe_options(cfg).routing_max_tokens == 64
    assert cfg.price_for("local-llama-3") is not None  # the file's price table, by prefix
    # secrets never reach what is written down
    public = json.dumps(cfg.public_dict())
    assert "TOKEN" not in public
    assert "db2.sqlite" not in public


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> hang.Outcome:
    full = {**os.environ, "PREFECT_API_URL": "", "COLUMNS": "200", **(env or {})}
    return hang.finish([SKILLREACH, *args], limit_s=300, cwd=cwd, env=full)


def test_run_and_compare_use_the_same_file(tmp_path: Path) -> None:
    """The reported seam: prices, retries and gates of one file, through `run` and `baseline compare`."""
    cfg = config_file(tmp_path, ["gates", "prices", "max_retries", "attempts", "seed"])
    out = cli("run", "--config", str(cfg), "--out", str(tmp_path / "s"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    study = json.loads((tmp_path / "s" / "study.json").read_text(encoding="utf-8"))
    assert study["config"]["gates"]["activation"] == -0.5
    assert study["config"]["prices"]["local-llama"]["input"] == 0.5
    assert study["config"]["max_retries"] == 0
    assert study["config"]["attempts"] == 3
    # the same file gives `baseline compare` the same gate
    for name in ("a", "b"):
        rec = cli("baseline", "record", "--artifact", str(tmp_path / "s" / "artifact.json"), "--skill",
                  "release-deploy", "--out", str(tmp_path / f"{name}.json"), cwd=tmp_path)
        assert rec.returncode == 0, rec.stderr
    cmp = cli("baseline", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--config", str(cfg),
              "--json", cwd=tmp_path)
    assert cmp.returncode == 0, cmp.stderr
    gates = {r["metric"]: r["gate"] for r in json.loads(cmp.stdout)["results"]}
    assert gates["activation"] == -0.5


def test_the_price_line_survives_the_terminal(tmp_path: Path) -> None:
    """rich markup must not swallow `[prices."local-llama"]` in the no-price warning."""
    from tests.fakes.messages_api import MessagesAPI

    with MessagesAPI(aliases={"local-llama": "local-llama-1"}) as api:
        cfg = tmp_path / "cfg.toml"
        cfg.write_text('runtime = "anthropic"\nmodel = "local-llama"\nmax_cost_usd = 1.0\n'
                       f'[runtime_options]\nbase_url = "{api.base_url}"\nmax_retries = 0\n', encoding="utf-8")
        out = cli("run", "--config", str(cfg), "--out", str(tmp_path / "s"), cwd=tmp_path,
                  env={"ANTHROPIC_API_KEY": "sk-test"})
    assert '[prices."local-llama-1"]' in " ".join(out.stderr.split()), out.stderr  # the snapshot's name


def test_a_deployment_flow_run_reads_the_study_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployments resolve SKILLREACH_STUDY_CONFIG where the flow enters; the tasks see the file."""
    from skillreach.flows.service import nightly_compliance
    from tests.helpers.world import run

    cfg = config_file(tmp_path, ["gates", "attempts", "batch_size", "seed"])
    head = f'out = "{tmp_path / "night"}"\nhome = "{tmp_path / "h"}"\n'
    cfg.write_text(head + cfg.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("SKILLREACH_STUDY_CONFIG", str(cfg))
    monkeypatch.chdir(tmp_path)
    result = run(nightly_compliance)
    study = json.loads(Path(result["out"], "study.json").read_text(encoding="utf-8"))
    assert study["config"]["gates"]["activation"] == -0.5
    assert study["config"]["attempts"] == 3
    assert study["config"]["batch_size"] == 7
    assert study["config"]["compliance"] is True  # what the nightly flow adds


def test_the_study_deployment_reads_the_study_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`study/study` run with no parameter measures what SKILLREACH_STUDY_CONFIG says, not the example."""
    import yaml

    from skillreach.flows.study import study
    from tests.helpers.world import run

    deployment = next(d for d in yaml.safe_load((Path(__file__).parents[1] / "prefect.yaml").read_text())
                      ["deployments"] if d["name"] == "study")
    assert "config" not in (deployment.get("parameters") or {})
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f'out = "{tmp_path / "s"}"\nhome = "{tmp_path / "h"}"\nattempts = 2\n', encoding="utf-8")
    monkeypatch.setenv("SKILLREACH_STUDY_CONFIG", str(cfg))
    monkeypatch.chdir(tmp_path)
    result = run(study, **(deployment.get("parameters") or {}))
    assert result.out == tmp_path / "s"
    assert result.artifact.attempts == 2
