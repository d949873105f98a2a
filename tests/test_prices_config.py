"""A study file's prices and runtime options, through the commands a user runs: ``[prices."m"]`` adds to
the default price table (Claude Code's probes keep theirs), and ``config show --config`` reads a study file
as ``run --config`` does (its ``runtime_options`` accepted and checked, a misspelt one refused in one line).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from skillreach.settings import DEFAULT_PRICES, Settings
from skillreach.study import StudyConfig
from skillreach.study.probe_log import read_probes
from tests.helpers import hang

SKILLREACH = str(Path(sys.executable).parent / "skillreach")
STUB = Path(__file__).parent / "fakes" / "claude_stub" / "claude"
LOCAL_PRICE = '[prices."local-llama"]\ninput = 0.5\noutput = 1.5\ncache_write = 0.6\ncache_read = 0.05\n'


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> hang.Outcome:
    full = {**os.environ, "PREFECT_API_URL": "", "COLUMNS": "220", **(env or {})}
    return hang.finish([SKILLREACH, *args], limit_s=300, cwd=cwd, env=full)


def test_a_price_table_adds_to_the_defaults(tmp_path: Path) -> None:
    cfg = tmp_path / "study.toml"
    cfg.write_text(LOCAL_PRICE, encoding="utf-8")
    study = StudyConfig.build(cfg)
    assert study.price_for("local-llama-3") is not None
    assert study.price_for("claude-sonnet-4-6") == DEFAULT_PRICES["claude-sonnet-4"]
    assert study.settings().price_for("claude-haiku-4-5") == DEFAULT_PRICES["claude-haiku-4"]
    # a table may still replace one default price
    cheaper = Settings(
        prices={"claude-sonnet-4": {"input": 1, "output": 1, "cache_write": 1, "cache_read": 1}}
    )
    assert cheaper.price_for("claude-sonnet-4-6").input == 1  # type: ignore[union-attr]
    assert cheaper.price_for("claude-opus-4-1") == DEFAULT_PRICES["claude-opus-4"]


def test_claude_code_probes_keep_their_price_beside_a_study_price_table(tmp_path: Path) -> None:
    """The reported case: a study file pricing a local model left every Claude Code probe unpriced."""
    skills = tmp_path / "skills"
    for name in ("pdf", "rollback"):
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Handle {name} work.\n---\nBody.\n"
        )
    rows = [
        {"id": "q1", "text": "fill the pdf", "expected_skill": "pdf", "kind": "implicit"},
        {"id": "q2", "text": "undo the deploy", "expected_skill": "rollback", "kind": "implicit"},
    ]
    (tmp_path / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": rows}))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"pdf": ["pdf"], "rollback": ["rollback"], "undo the deploy": ["rollback"]}))
    (tmp_path / "study.toml").write_text(
        'runtime = "claude-code"\nmodel = "claude-sonnet-4-6"\n'
        + LOCAL_PRICE
        + f"[runtime_options]\nclaude_path = {json.dumps(str(STUB))}\n"
        + f"extra_env = {{ CLAUDE_STUB_SCRIPT = {json.dumps(str(script))} }}\n",
        encoding="utf-8",
    )
    out = cli(
        "run", "--config", "study.toml", "--skills", "skills", "--queries", "queries.json", "--out", "out",
        cwd=tmp_path, env={"ANTHROPIC_API_KEY": "sk-test"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    records = read_probes(tmp_path / "out" / "probes.jsonl")
    assert len(records) == 2
    assert [r.error for r in records] == [None, None]
    assert all(r.cost_usd is not None and r.cost_usd > 0 for r in records), [r.cost_usd for r in records]


def test_config_show_reads_a_study_file_as_run_does(tmp_path: Path) -> None:
    (tmp_path / "study.toml").write_text(
        'runtime = "opencode"\nmodel = "fake-model"\n'
        + LOCAL_PRICE
        + '[runtime_options]\nopencode_path = "/bin/true"\nbase_url = "http://127.0.0.1:9/v1"\n',
        encoding="utf-8",
    )
    shown = cli("config", "show", "--config", "study.toml", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    rows = {r["key"]: r for r in json.loads(shown.stdout)}
    assert rows["runtime_options"]["value"] == {
        "opencode_path": "/bin/true",
        "base_url": "http://127.0.0.1:9/v1",
    }
    assert rows["runtime_options"]["source"] == "file study.toml"
    assert set(rows["prices"]["value"]) == {*DEFAULT_PRICES, "local-llama"}
    table = cli("config", "show", "--config", "study.toml", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    lines = {line.split()[0]: line for line in table.stdout.splitlines() if line.strip()}
    assert lines["prices.local-llama"].rstrip().endswith("file study.toml")
    assert lines["prices.claude-sonnet-4"].rstrip().endswith("default")
    # one agent's table each, as a cross-agent run reads them
    (tmp_path / "agents.toml").write_text(
        '[runtime_options.gemini-cli]\ngemini_path = "/bin/true"\n'
        '[runtime_options.copilot]\ncopilot_path = "/bin/true"\nwire_api = "responses"\n',
        encoding="utf-8",
    )
    agents = cli("config", "show", "--config", "agents.toml", "--json", cwd=tmp_path)
    assert agents.returncode == 0, agents.stderr
    # a misspelt option: one line naming the file and the option, no traceback, as `run` says it
    (tmp_path / "bad.toml").write_text('runtime = "opencode"\n[runtime_options]\nopencod_path = "x"\n')
    bad = cli("config", "show", "--config", "bad.toml", cwd=tmp_path)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert "bad.toml: runtime_options.opencod_path" in bad.stderr
    assert "did you mean 'opencode_path'" in bad.stderr
