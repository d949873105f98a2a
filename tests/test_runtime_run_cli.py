"""Runtimes through ``skillreach run`` (issue 13): claude-code at ``--concurrency 4`` with the ``claude``
stand-in on PATH; an errored probe is a record and one line at the end, never a traceback on the
terminal; errored probes are probed again on a resume unless ``--keep-errors``."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from skillreach.cli import main
from skillreach.models import ProbeRecord
from skillreach.scoring.artifact import read_artifact
from skillreach.study.probe_log import read_probes
from tests.helpers import hang
from tests.helpers import world as world_helpers

FAKES = Path(__file__).parent / "fakes"
SKILLREACH = Path(sys.executable).parent / "skillreach"


def fake_study(root: Path, entries: dict[str, Any]) -> Path:
    """study.toml for the fake runtime with a script that activates each query's skill, but ``entries``."""
    script = root / "script.json"
    base: dict[str, Any] = {"*": [], **{f"canary-{i}": list(world_helpers.SKILLS) for i in (1, 2, 3)}}
    for name in world_helpers.SKILLS:
        for i in range(4):
            base[f"{name}-{i}"] = [name]
    script.write_text(json.dumps({**base, **entries}), encoding="utf-8")
    study = root / "study.toml"
    study.write_text(
        'skills = ["skills"]\nqueries = "queries.json"\nruntime = "fake"\n'
        f'[runtime_options]\nscript = "{script}"\n',
        encoding="utf-8",
    )
    return study


def test_an_errored_probe_is_one_line_at_the_end_and_its_traceback_goes_to_the_log(
    world: dict[str, Path], capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    broken = {"alpha-0": {"raise": "kaboom in the runtime"}, "beta-1": {"error": "HTTP 500"}}
    fake_study(world["root"], broken)
    assert main(["run", "--config", "study.toml", "--out", "out"]) == 0
    captured = capfd.readouterr()
    terminal = captured.out + captured.err
    assert "Traceback" not in terminal
    assert "kaboom" not in captured.out  # the scorecard is on stdout; the error line on stderr
    lines = [line for line in captured.err.splitlines() if "errored" in line]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("2 probes errored: ")
    assert lines[0].endswith("(all in probes.jsonl)")
    records = {r.query_id: r for r in read_probes(world["root"] / "out" / "probes.jsonl")}
    assert records["alpha-0"].error == "RuntimeError: kaboom in the runtime"
    assert records["beta-1"].error == "HTTP 500"
    log = (world["root"] / "out" / "skillreach.log").read_text(encoding="utf-8")
    assert "Traceback" in log
    assert "kaboom in the runtime" in log

    # --debug prints the traceback on the terminal too
    assert main(["run", "--config", "study.toml", "--out", "debug", "--debug"]) == 0
    captured = capfd.readouterr()
    assert "kaboom in the runtime" in captured.err
    assert "Traceback" in captured.err


def test_errored_probes_are_probed_again_on_resume(
    world: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    fake_study(world["root"], {"alpha-0": {"raise": "flaky"}})
    assert main(["run", "--config", "study.toml", "--out", "out"]) == 0
    probes = world["root"] / "out" / "probes.jsonl"
    first = read_probes(probes)
    assert [r.query_id for r in first if r.error] == ["alpha-0"]
    assert "1 probe errored: RuntimeError: flaky (all in probes.jsonl)" in capfd.readouterr().err

    fake_study(world["root"], {})  # the runtime works now
    assert main(["run", "--config", "study.toml", "--out", "out"]) == 0
    assert "errored" not in capfd.readouterr().err
    second = read_probes(probes)
    assert len(second) == len(first) + 1  # only the errored pair ran again
    assert second[-1].query_id == "alpha-0"
    assert second[-1].error is None
    assert second[-1].invoked == ("alpha",)
    artifact = read_artifact(world["root"] / "out" / "artifact.json")
    assert artifact.counts.errors == 0


def test_keep_errors_leaves_errored_probes_as_they_are(
    world: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    fake_study(world["root"], {"alpha-0": {"raise": "flaky"}})
    assert main(["run", "--config", "study.toml", "--out", "out"]) == 0
    probes = world["root"] / "out" / "probes.jsonl"
    first = read_probes(probes)
    fake_study(world["root"], {})
    capfd.readouterr()
    assert main(["run", "--config", "study.toml", "--out", "out", "--keep-errors"]) == 0
    assert "1 probe errored: RuntimeError: flaky" in capfd.readouterr().err
    assert read_probes(probes) == first  # nothing ran again
    assert read_artifact(world["root"] / "out" / "artifact.json").counts.errors == 1


# --------------------------------------------------------------- claude-code at --concurrency 4


NAMES = [f"skill-{i:02d}" for i in range(26)]


def claude_scenario(
    tmp_path: Path, runtime_options: str, path_first: Path | None = None
) -> list[ProbeRecord]:
    """The issue's scenario through ``skillreach run``: 26 skills, 41 queries, claude-code at
    ``--concurrency 4``; every query names its skill. Returns the records (0 errors asserted)."""
    for name in NAMES:
        folder = tmp_path / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Handle chores of kind {name[-2:]} for the team.\n---\nSteps.\n"
        )
    queries = [
        {
            "id": f"q{i:02d}",
            "text": f"request {i:02d}: use {NAMES[i % 26]}",
            "expected_skill": NAMES[i % 26],
            "kind": "implicit",
        }
        for i in range(41)
    ]
    (tmp_path / "queries.json").write_text(json.dumps({"catalog_id": "all", "queries": queries}))
    (tmp_path / "study.toml").write_text(f"[runtime_options]\n{runtime_options}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "SKILLREACH_"))}
    env.update(ANTHROPIC_API_KEY="sk-test-not-a-secret", COLUMNS="200")
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    proc = hang.finish(
        [
            str(SKILLREACH),
            "run",
            "--config",
            "study.toml",
            "--skills",
            "skills",
            "--queries",
            "queries.json",
            "--runtime",
            "claude-code",
            "--concurrency",
            "4",
            "--out",
            "out",
        ],
        limit_s=600,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "errored" not in proc.stderr
    records = read_probes(tmp_path / "out" / "probes.jsonl")
    assert len(records) == 41
    assert [r.error for r in records if r.error] == []
    assert all(r.invoked == (NAMES[int(r.query_id[1:]) % 26],) for r in records)
    return records


def test_claude_code_at_concurrency_4_through_the_command(tmp_path: Path) -> None:
    """With the ``claude`` stand-in on PATH."""
    script = tmp_path / "claude-script.json"
    script.write_text(json.dumps({name: {"steps": [name]} for name in NAMES}))
    records = claude_scenario(
        tmp_path, f'extra_env = {{ CLAUDE_STUB_SCRIPT = "{script}" }}', path_first=FAKES / "claude_stub"
    )
    # the runtime's version is on every record and in the artifact
    assert {r.runtime_version for r in records} == {"2.1.328-stub (Claude Code)"}
    assert read_artifact(tmp_path / "out" / "artifact.json").runtime.version == "2.1.328-stub (Claude Code)"


@pytest.mark.realcli
def test_real_claude_code_at_concurrency_4_through_the_command(tmp_path: Path) -> None:
    """With the REAL Claude Code CLI against the local Messages API stand-in."""
    from tests.fakes.messages_api import MessagesAPI, Reply, query_text, skill_call, text_reply, turn_of
    from tests.helpers.clis import real_claude

    claude = real_claude()
    if claude is None:
        pytest.skip("the real Claude Code CLI is not installed (set SKILLREACH_REAL_CLAUDE or run .ci/run)")

    def responder(body: dict[str, Any]) -> Any:
        named = re.search(r"\b[Uu]se (?:the )?(skill-\d\d)", query_text(body))  # queries and canaries
        offered = {t.get("name") for t in body.get("tools") or []}
        if named and "Skill" in offered and turn_of(body) == 0:
            return Reply([skill_call(named.group(1))])
        return text_reply("Done.")

    from tests.helpers.clis import Orphans, hold_hooks_left

    with MessagesAPI(responder) as api, Orphans() as orphans:
        records = claude_scenario(tmp_path, f'claude_path = "{claude}"\nbase_url = "{api.base_url}"')
        assert hold_hooks_left(orphans) == []  # no hook that parked a target's call outlives its probe
    assert {r.runtime_version for r in records} == {"2.1.328 (Claude Code)"}
