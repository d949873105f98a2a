"""``skillreach status``: the service at a glance, through the real CLI (issue 29, problem 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import hang
from tests.helpers.world import cfg, run

SKILLREACH = str(Path(sys.executable).parent / "skillreach")


def test_status_shows_the_last_nightly_its_breaches_report_and_the_muted_alerts(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillreach.flows.service import nightly_compliance, rebaseline_all

    run(rebaseline_all, cfg(world, "base"))
    run(nightly_compliance, cfg(world, "night", runtime_script="bad"))
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["SKILLREACH_HOME"] = str(world["home"])
    cli = [SKILLREACH]
    hang.finish([*cli, "alerts", "mute", "gate.breached:alpha", "--for", "7d"], limit_s=60, check=True,
                env=env, cwd=world["root"])
    got = hang.finish([*cli, "status"], limit_s=60, env=env, cwd=world["root"])
    assert got.returncode == 0, got.stderr
    out = got.stdout
    assert "server: PREFECT_API_URL not set" in out
    assert "nightly-compliance:" in out
    assert "breached, 1 breach(es)" in out
    assert str(world["root"] / "night" / "report.html") in out
    assert "rebaseline-all:" in out
    assert "muted alerts: gate.breached:alpha until" in out
    data = json.loads(subprocess.run([*cli, "status", "--json"], env=env, capture_output=True, text=True,
                                     cwd=world["root"], check=True).stdout)
    night = data["studies"]["nightly-compliance"]
    assert (night["verdict"], night["breaches"]) == ("breached", 1)
    assert data["muted"][0]["key"] == "gate.breached:alpha"
