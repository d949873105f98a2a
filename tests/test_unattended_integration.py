"""Run it unattended, with a real (temporary) Prefect server: a tracked nightly with a breach ends
``Failed`` named ``Breached``; its study folder carries the night's slot, so a second run the same night
resumes (probes nothing) and is refused nothing.

Integration (``prefect_test_harness``, ~20 s to start on these machines, then ~30–60 s of flows).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.world import cfg, make_queries, make_skills, run, script

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prefect_server() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def test_a_nightly_with_a_breach_ends_breached_and_a_rerun_the_same_night_resumes(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.client.orchestration import get_client

    from skillreach.flows.service import nightly_compliance, rebaseline_all
    from skillreach.study.probe_log import read_probes

    monkeypatch.chdir(tmp_path)
    world: dict[str, Any] = {
        "skills": make_skills(tmp_path / "skills"), "queries": make_queries(tmp_path / "q.json"),
        "good": script(tmp_path / "good.json"), "bad": script(tmp_path / "bad.json", broken="alpha"),
        "home": tmp_path / "home", "root": tmp_path,
    }
    run(rebaseline_all, cfg(world, "base"))  # the baselines, in-process
    nightly = cfg(world, "unused", runtime_script="bad").model_copy(update={"out": None})

    state = asyncio.run(nightly_compliance(nightly, return_state=True))
    assert state.is_failed()
    assert state.name == "Breached"
    assert "gate breach(es) in study st-" in (state.message or "")
    assert "alpha" in (state.message or "")
    summary = state.result(raise_on_failure=False)
    assert summary["breaches"] >= 1
    out = Path(summary["out"])
    night = datetime.now(UTC).strftime("%Y-%m-%d")
    assert out.parent == Path("runs")
    assert out.name.startswith("compliance-fake-")
    assert out.name.endswith(f"-{night}")  # the run's slot: its expected start date

    async def server_state() -> tuple[str, str]:
        async with get_client() as client:
            flow_run = await client.read_flow_run(state.state_details.flow_run_id)
        assert flow_run.state is not None
        return flow_run.state.type.value, flow_run.state.name

    assert asyncio.run(server_state()) == ("FAILED", "Breached")
    assert asyncio.run(_run_count(state.state_details.flow_run_id)) == 1  # no flow retry

    probes = len(read_probes(out / "probes.jsonl"))
    again = asyncio.run(nightly_compliance(nightly, return_state=True))  # the same night: resumes
    assert again.name == "Breached"
    assert again.result(raise_on_failure=False)["out"] == str(out)
    assert len(read_probes(out / "probes.jsonl")) == probes  # nothing paid twice


async def _run_count(flow_run_id: Any) -> int:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        flow_run = await client.read_flow_run(flow_run_id)
    return int(flow_run.run_count)
