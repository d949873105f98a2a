"""Run it unattended, with a real (temporary) Prefect server: a tracked nightly with a breach ends
``Failed`` named ``Breached``; its study folder carries the night's slot, so a second run the same night
resumes (probes nothing) and is refused nothing.

Integration (``prefect_test_harness``, ~20 s to start on these machines, then ~30–60 s of flows).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import hang
from tests.helpers.world import cfg, make_queries, make_skills, run, script

pytestmark = pytest.mark.integration


UI = "http://skillreach.example:4200"
"""Where people open the Prefect UI (``PREFECT_UI_URL``): the alert links point there, not at 127.0.0.1."""


@pytest.fixture(scope="module")
def prefect_server() -> Iterator[None]:
    from prefect.testing.utilities import prefect_test_harness

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PREFECT_UI_URL", UI)
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


def test_a_deployment_run_whose_heartbeats_stop_is_crashed_and_said_once(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zombie automation (a 5 s heartbeat here, so a 15 s window) marks a run of a skillreach
    deployment whose heartbeats stopped Crashed; prefect.yaml's trigger of ``deliver-alerts`` creates a
    run for it, which files exactly one message (run here as the worker would run it, twice: once).
    What earlier versions installed to send alerts — automations, webhook blocks holding the URL — is
    removed by the upsert."""
    import json

    import yaml
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.events import emit_event
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger
    from prefect.states import Running

    from skillreach.deployments import automations
    from skillreach.flows.alerts import alert_outbox
    from skillreach.flows.service import watch
    from tests.conftest import REPO
    from tests.helpers.webhooks import WebhookSink

    names = (automations.ALERT_AUTOMATION, automations.RUN_ALERT_AUTOMATION, automations.ZOMBIE_AUTOMATION)

    async def counts() -> list[int]:
        async with get_client() as client:
            return [len(await client.read_automations_by_name(n)) for n in names]

    async def an_earlier_version() -> None:  # its run alert and a webhook block with the URL in it
        await CustomWebhookNotificationBlock(name="old", url="{{u}}", json_data={"text": "{{body}}"},
                                             secrets={"u": "http://127.0.0.1:9/OLDTOKEN"}).save(
            automations.webhook_block_name(0), overwrite=True)
        async with get_client() as client:
            old = automations.zombie_automation().model_copy(
                update={"name": automations.RUN_ALERT_AUTOMATION})
            await automations._create(client, old)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKILLREACH_HOME", str(tmp_path / "home"))
    with WebhookSink() as sink:
        url = f"{sink.base_url}/services/T1/B1/HOOKTOKEN"
        monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", json.dumps([url]))
        asyncio.run(an_earlier_version())
        assert asyncio.run(counts()) == [0, 1, 0]
        first = asyncio.run(automations.upsert_automations([url]))
        assert (first["removed"], first["webhook_blocks_removed"]) == (1, 1)
        done = asyncio.run(automations.upsert_automations([url]))  # idempotent: replaces, never adds
        assert done["webhooks"] == 1
        assert asyncio.run(counts()) == [0, 0, 1]

        spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
        [outbox] = [d for d in spec["deployments"] if d["name"] == "deliver-alerts"]

        async def start_a_run() -> Any:
            async with get_client() as client:
                for old in await client.read_automations_by_name(automations.ZOMBIE_AUTOMATION):
                    await client.delete_automation(old.id)
                await automations._create(client, automations.zombie_automation(heartbeat=5))
                triggers = [DeploymentEventTrigger(**outbox["triggers"][0])]  # a run that ended badly
                await (await alert_outbox.to_deployment(name="deliver-alerts", triggers=triggers)).apply()
                deployment_id = await (await watch.to_deployment(name="watch", tags=["skillreach"])).apply()
                flow_run = await client.create_flow_run_from_deployment(deployment_id)
                await client.set_flow_run_state(flow_run.id, Running(), force=True)
                return flow_run.id

        time.sleep(2)  # the trigger service loads the automations
        flow_run_id = asyncio.run(start_a_run())
        time.sleep(2)  # ... and the deployment's trigger
        emit_event(event="prefect.flow-run.heartbeat",
                   resource={"prefect.resource.id": f"prefect.flow-run.{flow_run_id}"})
        started = time.monotonic()  # ... and no heartbeat after that one: the process "died"

        async def state_type() -> StateType | None:
            async with get_client() as client:
                run = await client.read_flow_run(flow_run_id)
            return run.state.type if run.state else None

        async def crashed() -> bool:
            return await state_type() == StateType.CRASHED

        assert asyncio.run(_wait(crashed, 90)), f"still {asyncio.run(state_type())}"
        took = time.monotonic() - started
        triggered: list[Any] = []

        async def filed() -> bool:
            async with get_client() as client:
                dep = await client.read_deployment_by_name("deliver-alerts/deliver-alerts")
                runs = await client.read_flow_runs()
            triggered[:] = [r for r in runs if r.deployment_id == dep.id]
            return bool(triggered)

        assert asyncio.run(_wait(filed, 45)), "the crash started no deliver-alerts run"
        [wanted] = triggered
        assert wanted.parameters == {"flow_run_id": f"prefect.flow-run.{flow_run_id}"}
        for _ in range(2):  # the worker's run, and a second pass: the same run is said once
            asyncio.run(alert_outbox(**wanted.parameters))
    assert len(sink.requests) == 1, sink.requests
    text = sink.requests[0]["body"]["text"]
    assert text.startswith("skillreach skillreach.run.crashed: watch/watch run ")
    assert "ended Crashed: no heartbeat for 15 s" in text
    assert text.endswith(f" — {UI}/runs/flow-run/{flow_run_id}")
    assert 10 <= took <= 90


async def _wait(predicate: Any, timeout_s: float) -> bool:
    deadline = hang.Deadline(timeout_s)
    while not deadline.expired():
        if await predicate():
            return True
        await asyncio.sleep(0.5)
    return False


def test_a_crashed_run_takes_its_study_subflow_and_study_row_with_it(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """resolve-crashed (triggered by prefect.flow-run.Crashed): the child run still Running is Crashed,
    the study it was running is ``crashed`` in the store; finished children are left as they are."""
    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.states import Completed, Crashed, Running

    from skillreach.flows.service import resolve_crashed
    from skillreach.store.database import Store
    from skillreach.study import StudyConfig

    monkeypatch.chdir(tmp_path)

    @flow(name="a-parent")
    def parent() -> None: ...

    @flow(name="study")
    def child() -> None: ...

    @task(name="subflow")
    def step() -> None: ...

    async def crash_a_run() -> tuple[Any, Any, Any]:
        async with get_client() as client:
            top = await client.create_flow_run(parent, tags=["skillreach"], state=Running())
            ids = []
            for i in range(2):
                link = await client.create_task_run(step, flow_run_id=top.id, dynamic_key=str(i))
                ids.append((await client.create_flow_run(child, parent_task_run_id=link.id,
                                                         state=Running())).id)
            await client.set_flow_run_state(ids[1], Completed(), force=True)
            probing = await client.create_task_run(step, flow_run_id=ids[0], dynamic_key="probe",
                                                   state=Running())
            task_ids.append(probing.id)
            await client.set_flow_run_state(top.id, Crashed(message="no heartbeat"), force=True)
            return top.id, ids[0], ids[1]

    task_ids: list[Any] = []
    top, running_child, finished_child = asyncio.run(crash_a_run())
    config = StudyConfig.build(None, home=tmp_path / "home")
    with Store(f"sqlite:///{tmp_path / 'home/skillreach.db'}") as store:
        for sid, run_id in (("st-crashed", running_child), ("st-done", finished_child)):
            store.begin_study(sid, out_dir="runs/x", runtime="fake", model=None, catalog_id="all",
                              catalog_digest="c", queries_digest="q", fingerprint="fp", attempts=1,
                              config={}, flow_run_id=str(run_id))
        store.finish_study("st-done")

    out = asyncio.run(resolve_crashed(f"prefect.flow-run.{top}", config=config))
    assert out["studies"] == ["st-crashed"]
    assert set(out["runs"]) == {str(top), str(running_child), str(finished_child)}

    async def states() -> list[StateType | None]:
        async with get_client() as client:
            runs = [await client.read_flow_run(i) for i in (running_child, finished_child)]
        return [r.state.type if r.state else None for r in runs]

    assert asyncio.run(states()) == [StateType.CRASHED, StateType.COMPLETED]

    async def task_state() -> StateType | None:
        async with get_client() as client:
            run = await client.read_task_run(task_ids[0])
        return run.state.type if run.state else None

    assert asyncio.run(task_state()) == StateType.CRASHED  # a crashed run's task runs end with it
    assert out["task_runs"] >= 1
    assert out["reconciled"] == []
    with Store(f"sqlite:///{tmp_path / 'home/skillreach.db'}") as store:
        row = store.get_study("st-crashed")
        assert row is not None
        assert row.status == "crashed"
        assert "re-run its deployment to resume" in (row.error or "")
        done = store.get_study("st-done")
        assert done is not None
        assert done.status == "done"


def test_a_run_whose_study_finished_is_reconciled_not_crashed(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a server restart the zombie automation may mark a run Crashed whose study had finished:
    resolve-crashed reads the store and marks it Completed instead; no study is marked crashed."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed, Running

    from skillreach.flows.service import resolve_crashed
    from skillreach.store.database import Store
    from skillreach.study import StudyConfig

    monkeypatch.chdir(tmp_path)

    @flow(name="nightly-compliance")
    def nightly() -> None: ...

    async def lost_run() -> Any:
        async with get_client() as client:
            run = await client.create_flow_run(nightly, tags=["skillreach"], state=Running())
            await client.set_flow_run_state(run.id, Crashed(message="no heartbeat"), force=True)
            return run.id

    run_id = asyncio.run(lost_run())
    config = StudyConfig.build(None, home=tmp_path / "home")
    with Store(f"sqlite:///{tmp_path / 'home/skillreach.db'}") as store:
        store.begin_study("st-night", out_dir="runs/x", runtime="fake", model=None, catalog_id="all",
                          catalog_digest="c", queries_digest="q", fingerprint="fp", attempts=1,
                          config={}, flow_run_id=str(run_id))
        store.finish_study("st-night")

    out = asyncio.run(resolve_crashed(str(run_id), config=config))
    assert out["reconciled"] == ["st-night"]
    assert out["studies"] == []

    async def state() -> tuple[StateType | None, str]:
        async with get_client() as client:
            run = await client.read_flow_run(run_id)
        return (run.state.type, run.state.message or "") if run.state else (None, "")

    kind, message = asyncio.run(state())
    assert kind == StateType.COMPLETED
    assert "reconciled from the store" in message
    with Store(f"sqlite:///{tmp_path / 'home/skillreach.db'}") as store:
        row = store.get_study("st-night")
        assert row is not None
        assert row.status == "done"
