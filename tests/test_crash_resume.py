"""The bad night, for real: a Prefect server, a process worker on the `skillreach` pool, the `study`
deployment of prefect.yaml (deployed by `prefect deploy`, as `skillreach serve` does), the anthropic runtime
against the slow local Messages API stand-in — and the flow-run process killed with SIGKILL half-way.

The run is marked Crashed within the heartbeat window, exactly one alert reaches the webhook sink, and
running the deployment again resumes: every (query, attempt) is recorded, and at most the probes in flight
at the kill (the study's concurrency) are paid twice — counted at the stand-in.

Integration: ~20 s for the server, ~60–90 s of worker and flows.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.fakes.messages_api import MessagesAPI, ScriptResponder, query_text
from tests.helpers import hang
from tests.helpers.webhooks import WebhookSink

pytestmark = pytest.mark.integration

HEARTBEAT_S = 30  # Prefect's minimum; the worker sees its child die at once anyway
CONCURRENCY = 4
ATTEMPTS = 2
NAMES = ("alpha", "beta", "gamma")
PER_SKILL = 8  # 24 queries × 2 attempts = 48 probes at 0.4 s, 4 in flight: ~5 s of probing


@pytest.fixture(scope="module")
def prefect_server() -> Iterator[str]:
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield str(PREFECT_API_URL.value())


def _world(root: Path, api: MessagesAPI, home: Path) -> Path:
    skills = root / "skills"
    for name in NAMES:
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Handle {name} jobs. Use for any {name} task.\n---\n# {name}\n")
    queries = [{"id": f"{n}-{i}", "text": f"please do the {n} job number {i}", "expected_skill": n,
                "kind": "implicit"} for n in NAMES for i in range(PER_SKILL)]
    (root / "q.json").write_text(json.dumps({"catalog_id": "all", "queries": queries}))
    cfg = root / "study.toml"
    cfg.write_text(
        f'skills = ["{skills}"]\nqueries = "{root / "q.json"}"\nruntime = "anthropic"\n'
        f'model = "claude-crash"\nattempts = {ATTEMPTS}\nconcurrency = {CONCURRENCY}\nbatch_size = 12\n'
        f'home = "{home}"\nout = "{root / "night"}"\n'
        f'[runtime_options]\nbase_url = "{api.base_url}"\nmax_retries = 0\n'
        '[prices."claude-crash"]\ninput = 1.0\noutput = 5.0\ncache_write = 1.25\ncache_read = 0.1\n'
    )
    return cfg


def _prefect(env: dict[str, str], *args: str) -> None:
    done = hang.finish([sys.executable, "-m", "prefect", *args], env=env, cwd=REPO, limit_s=120)
    assert done.returncode == 0, f"prefect {' '.join(args)}: {done.stdout[-2000:]} {done.stderr[-2000:]}"


def _flow_run_pids(flow_run_id: str) -> list[int]:
    """The processes running the flow run (the worker starts one per run, with its id in the env)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"PREFECT__FLOW_RUN_ID={flow_run_id}".encode() in environ:
            pids.append(int(entry.name))
    return pids


def _probe_starts(api: MessagesAPI) -> Counter[str]:
    """First-turn requests per query text: each is one probe paid for."""
    starts: Counter[str] = Counter()
    for call in list(api.calls):
        body = call.body if isinstance(call.body, dict) else {}
        if call.path.endswith("/messages") and len(body.get("messages", [])) == 1:
            text = query_text(body)
            if text.startswith("please do the"):
                starts[text] += 1
    return starts


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the flow-run process through /proc")
def test_a_study_killed_with_sigkill_is_crashed_alerted_once_and_resumes(
    prefect_server: str, tmp_path: Path
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType

    from skillreach.deployments import automations
    from skillreach.study.probe_log import read_probes

    script = {**{f"the {n} job": [n] for n in NAMES}, **{f"the {n} skill": [n] for n in NAMES}}  # + canary
    aliases = {"claude-crash": "claude-crash-1"}
    with MessagesAPI(ScriptResponder(script), latency=0.4, aliases=aliases) as api, WebhookSink() as sink:
        cfg = _world(tmp_path, api, tmp_path / "home")
        url = f"{sink.base_url}/services/T1/B1/HOOKTOKEN"
        env = {**os.environ, "PREFECT_API_URL": prefect_server, "PREFECT_HOME": str(tmp_path / "prefect"),
               "SKILLREACH_ALERT_WEBHOOKS": json.dumps([url]),
               "SKILLREACH_WORK_POOL": "skillreach",
               "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_S), "SKILLREACH_STUDY_CONFIG": str(cfg),
               "ANTHROPIC_API_KEY": "sk-test-not-a-secret", "PWD": str(REPO),
               "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
        _prefect(env, "work-pool", "create", "skillreach", "--type", "process", "--overwrite")
        _prefect(env, "--no-prompt", "deploy", "--name", "study")
        _prefect(env, "--no-prompt", "deploy", "--name", "resolve-crashed")  # fired by the Crashed event
        _prefect(env, "--no-prompt", "deploy", "--name", "deliver-alerts")  # files the crash as an alert

        async def set_up() -> Any:
            await automations.upsert_automations([url])
            async with get_client() as client:
                for old in await client.read_automations_by_name(automations.ZOMBIE_AUTOMATION):
                    await client.delete_automation(old.id)
                await automations._create(client, automations.zombie_automation(heartbeat=HEARTBEAT_S))
                deployment = await client.read_deployment_by_name("study/study")
                return deployment.id

        deployment_id = asyncio.run(set_up())
        time.sleep(2)  # the trigger service loads the automations
        log = (tmp_path / "worker.log").open("wb")
        worker = subprocess.Popen(
            [sys.executable, "-m", "prefect", "worker", "start", "--pool", "skillreach", "--type", "process"],
            env=env, cwd=REPO, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
        try:
            async def start() -> str:
                async with get_client() as client:
                    return str((await client.create_flow_run_from_deployment(deployment_id)).id)

            async def state_of(run_id: str) -> StateType | None:
                async with get_client() as client:
                    run = await client.read_flow_run(run_id)  # type: ignore[arg-type]
                return run.state.type if run.state else None

            first = asyncio.run(start())
            deadline = hang.Deadline(120)
            while sum(_probe_starts(api).values()) < 16:  # a third of the probes paid, then the kill
                deadline.check(lambda: "the worker never started probing: " + (
                    tmp_path / "worker.log").read_text(errors="replace")[-3000:])
                time.sleep(0.2)
            pids = _flow_run_pids(first)
            assert pids, "no process runs the flow run"
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            killed_at = time.monotonic()
            paid_before = sum(_probe_starts(api).values())

            while asyncio.run(state_of(first)) != StateType.CRASHED:
                assert time.monotonic() - killed_at < 3 * HEARTBEAT_S + 30, "never marked Crashed"
                time.sleep(1)
            crashed_after = time.monotonic() - killed_at
            deadline = hang.Deadline(150)  # a deliver-alerts run: the worker starts a process for it
            while not sink.requests:
                deadline.check("no alert for the crashed run")
                time.sleep(0.5)
            time.sleep(5)  # a duplicate would arrive now
            texts = [r["body"]["text"] for r in sink.requests]
            assert len(texts) == 1, texts
            assert "Crashed" in texts[0] or "crashed" in texts[0]
            assert "HOOKTOKEN" not in texts[0]

            # resolve-crashed (triggered by the Crashed event, run by the worker) marks the study crashed
            from skillreach.store.database import Store

            def study_status() -> str | None:
                with Store(f"sqlite:///{tmp_path / 'home' / 'skillreach.db'}") as store:
                    rows = [r for r in store.studies() if r.flow_run_id == first]
                return rows[0].status if rows else None

            deadline = hang.Deadline(90)
            while study_status() != "crashed":
                deadline.check(lambda: f"the store still says {study_status()!r}")
                time.sleep(1)
            resolved_after = time.monotonic() - killed_at

            # the deployment again: it resumes in the same folder
            second = asyncio.run(start())
            deadline = hang.Deadline(180)
            while (st := asyncio.run(state_of(second))) not in (StateType.COMPLETED, StateType.FAILED,
                                                                 StateType.CRASHED):
                deadline.check(lambda: f"the re-run did not finish ({st})")
                time.sleep(1)
            assert st == StateType.COMPLETED
            paid = sum(_probe_starts(api).values())

            # two runs of one study submitted together: the study's lock lets one probe; each probe paid once
            from skillreach.study import StudyConfig

            twice_cfg = StudyConfig.build(cfg, out=tmp_path / "twice").model_dump(mode="json")  # no secrets
            before = sum(_probe_starts(api).values())

            async def start_two() -> list[str]:
                async with get_client() as client:
                    runs = [await client.create_flow_run_from_deployment(
                        deployment_id, parameters={"config": twice_cfg}) for _ in range(2)]
                return [str(r.id) for r in runs]

            both = asyncio.run(start_two())
            finals = (StateType.COMPLETED, StateType.FAILED, StateType.CRASHED)
            deadline = hang.Deadline(180)
            while not all(asyncio.run(state_of(r)) in finals for r in both):
                deadline.check("the two runs did not finish")
                time.sleep(1)
            states = sorted(str(asyncio.run(state_of(r))) for r in both)
            paid_two = sum(_probe_starts(api).values()) - before
        finally:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)

        probes = read_probes(tmp_path / "night" / "probes.jsonl")
        pairs = {(p.query_id, p.attempt) for p in probes if p.error is None}
        assert len(pairs) == len(NAMES) * PER_SKILL * ATTEMPTS  # every (query, attempt) recorded
        twice = paid - len(pairs)
        assert 0 <= twice <= CONCURRENCY, (paid, len(pairs))  # only the probes in flight at the kill
        twice_probes = read_probes(tmp_path / "twice" / "probes.jsonl")
        assert len({(p.query_id, p.attempt) for p in twice_probes}) == len(pairs)
        assert paid_two == len(pairs), (paid_two, states)  # the same study twice at once: paid once
        assert "StateType.COMPLETED" in states
        print(f"\ntwo at once: {states}; {paid_two} probes paid for {len(pairs)} pairs")
        print(f"\ncrash: marked Crashed {crashed_after:.1f} s after SIGKILL, the study row crashed after "
              f"{resolved_after:.1f} s; {paid_before} probes paid "
              f"before the kill; {paid} paid in all for {len(pairs)} pairs ({twice} twice)")
