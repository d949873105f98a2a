"""The few tests that run real Prefect: one temporary server for the session (``prefect_test_harness``).

- a deliberately regressed study, run as a Prefect flow, emits one ``skillreach.gate.breached`` event
  and posts exactly one Slack-compatible message to a local sink through the store's outbox (no
  automation forwards alerts any more);
- emitting ``skillreach.skill.added`` makes the ``rebaseline-all`` deployment's trigger create a flow run
  with the event's values as parameters.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import hang
from tests.helpers.webhooks import WebhookSink
from tests.helpers.world import cfg, make_queries, make_skills, run, script

pytestmark = pytest.mark.integration


def make_world(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    """Skills, queries, a good fake script and a store home under ``tmp_path`` (as tests.test_flows)."""
    return {"skills": make_skills(tmp_path / "skills"), "queries": make_queries(tmp_path / "q.json"),
            "good": script(tmp_path / "good.json"), "home": tmp_path / "home", "root": tmp_path, **extra}


@pytest.fixture(scope="module")
def prefect_server() -> Iterator[None]:
    """One temporary Prefect server for this module, the only one of the test session. Module scope,
    so that its API settings end with this module and no later test talks to it by accident."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


async def _wait(predicate: Any, timeout_s: float = 45.0) -> bool:
    deadline = hang.Deadline(timeout_s)
    while not deadline.expired():
        if await predicate():
            return True
        await asyncio.sleep(0.5)
    return False


def test_a_regressed_run_alerts_once_through_the_outbox(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from skillreach.deployments.automations import ALERT_AUTOMATION, upsert_automations
    from skillreach.flows.service import rebaseline_all
    from skillreach.flows.study import study
    from skillreach.store.database import Store

    caplog.set_level(logging.DEBUG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    world = make_world(tmp_path, bad=script(tmp_path / "bad.json", broken="alpha"))
    run(rebaseline_all, cfg(world, "base"))  # the baselines, in-process

    with WebhookSink() as sink:
        url = f"{sink.base_url}/services/T1/B1/HOOKTOKEN"
        monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", json.dumps([url]))
        first = asyncio.run(upsert_automations([url]))
        assert first["webhooks"] == 1

        async def alert_automations() -> int:
            from prefect.client.orchestration import get_client

            async with get_client() as client:
                return len(await client.read_automations_by_name(ALERT_AUTOMATION))

        assert asyncio.run(alert_automations()) == 0  # the outbox sends; no automation forwards events

        new_cfg = cfg(world, "new", runtime_script="bad")
        result = asyncio.run(study(new_cfg))
        assert [(b["skill"], b["metric"]) for b in result.breaches] == [("alpha", "activation")]
        page = result.report_path.read_text(encoding="utf-8")  # re-rendered after the gate (publish_report)
        row = 'data-gate-skill="alpha" data-gate-metric="activation" data-gate-cohort="paired" '
        row += 'data-verdict="breach"'
        assert row in page

        assert len(sink.requests) == 1  # posted before the flow returned
        time.sleep(3)  # a duplicate would arrive now
        assert len(sink.requests) == 1
    [req] = sink.requests
    assert req["path"] == "/services/T1/B1/HOOKTOKEN"
    text = req["body"]["text"]
    breach = result.breaches[0]
    assert "alpha activation changed -1.000" in text
    assert "95% CI -1.000 to -0.541" in text  # Newcombe's interval over its five cases
    assert breach["baseline_id"] in text
    assert breach["run_link"] in text
    assert "/runs/flow-run/" in breach["run_link"]  # a Prefect run links to its UI page
    with Store(f"sqlite:///{tmp_path / 'home/skillreach.db'}") as s:
        [alert] = s.alerts()
        assert (alert.delivery, alert.skill, alert.metric) == ("delivered", "alpha", "activation")

    from skillreach.tasks.score import artifact_key

    key = artifact_key(new_cfg, "study", result.study_id)
    assert result.study_id.lower() not in key  # stable per skill set, not per study: the UI keeps a history
    assert artifact_key(cfg(world, "another", runtime_script="good"), "study", "st-other") == key

    async def published() -> dict[str, Any]:
        from prefect.client.orchestration import get_client

        async with get_client() as client:
            table = await client.read_latest_artifacts()
        return {a.key: a for a in table if a.key and a.key.startswith(key)}

    arts = asyncio.run(published())
    headline = arts[f"{key}-headline"]
    gates = arts[f"{key}-gates"]
    assert headline.type == "table"
    assert "top1_accuracy" in json.dumps(headline.data)
    assert gates.type == "markdown"
    assert "**breach**" in str(gates.data)
    link = arts[f"{key}-report"]  # a link to the run's report
    assert result.report_path.resolve().as_uri() in str(link.data)

    async def run_name() -> str:
        from prefect.client.orchestration import get_client

        with Store(f"sqlite:///{tmp_path / 'home/skillreach.db'}") as s:
            row = s.get_study(result.study_id)
        assert row is not None
        assert row.flow_run_id is not None
        async with get_client() as client:
            return str((await client.read_flow_run(row.flow_run_id)).name)

    from datetime import UTC, datetime

    assert asyncio.run(run_name()) == f"study-fake-{datetime.now(UTC):%Y-%m-%d}"  # not truthful-stallion
    assert "HOOKTOKEN" not in caplog.text
    assert b"HOOKTOKEN" not in (tmp_path / "home/skillreach.db").read_bytes()


@pytest.fixture(scope="module")
def rebaseline_deployment(prefect_server: None) -> Any:
    """The ``rebaseline-all`` deployment with prefect.yaml's triggers, registered on the test server."""
    import yaml
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    from skillreach.flows.service import rebaseline_all
    from tests.conftest import REPO

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    [dep] = [d for d in spec["deployments"] if d["name"] == "rebaseline-all"]
    triggers = [DeploymentEventTrigger(**t) for t in dep["triggers"]]

    async def deploy() -> Any:
        deployment = await rebaseline_all.to_deployment(name="rebaseline-all", triggers=triggers)
        return await deployment.apply()

    deployment_id = asyncio.run(deploy())
    time.sleep(2)  # the trigger service picks up the deployment's automations
    return deployment_id


async def _runs_of(deployment_id: Any) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    async with get_client() as client:
        return await client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
            sort=FlowRunSort.EXPECTED_START_TIME_ASC,
        )


def _wait_for_runs(deployment_id: Any, n: int) -> list[Any]:
    async def enough() -> bool:
        return len(await _runs_of(deployment_id)) >= n

    assert asyncio.run(_wait(enough)), f"no rebaseline-all run was created (wanted {n})"
    return asyncio.run(_runs_of(deployment_id))


def test_skill_added_event_creates_a_rebaseline_run(rebaseline_deployment: Any) -> None:
    from prefect.events import emit_event

    before = len(asyncio.run(_runs_of(rebaseline_deployment)))
    emit_event("skillreach.skill.added", resource={"prefect.resource.id": "skillreach.skill.pptx",
                                                   "prefect.resource.name": "pptx"},
               payload={"skill": "pptx", "source": "skills/", "digest": "sha256:1"})
    runs = _wait_for_runs(rebaseline_deployment, before + 1)
    params = [r.parameters for r in runs]
    assert {"reason": "skillreach.skill.added", "skill": "pptx"}.items() <= next(
        p for p in params if p.get("skill") == "pptx").items()
    json.dumps(params)


def test_status_reads_the_last_run_of_each_deployment(rebaseline_deployment: Any) -> None:
    """`skillreach status`'s REST reading of the server: a run of rebaseline-all not finished (no worker
    here: it waits, scheduled) is never its *last* run (issue 39: "last run" showed a future scheduled
    run) but its next one, with its name, state and UI link; a deployment not registered has none."""
    from skillreach.cli.status_cmds import last_runs
    from skillreach.tasks._context import api_url

    runs = _wait_for_runs(rebaseline_deployment, 1)
    api = api_url()
    assert api is not None
    found = last_runs(api)
    last = found["rebaseline-all"]
    assert last["run"] is None  # nothing finished yet
    waiting = last.get("next") or last.get("now")
    assert waiting is not None
    assert waiting["run"] in {r.name for r in runs}
    assert waiting["state"]
    assert "/runs/flow-run/" in waiting["link"]
    assert found["nightly-compliance"] == {"run": None}


def test_watch_sees_a_new_skill_and_its_event_fires_the_rebaseline(
    rebaseline_deployment: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillreach.flows.service import watch

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    world = make_world(tmp_path)
    config = cfg(world, "w")
    first = asyncio.run(watch(config))
    assert first["first_snapshot"] is True
    before = len(asyncio.run(_runs_of(rebaseline_deployment)))
    make_skills(world["skills"], {"omega": "Summarise meeting notes. Use for minutes of a meeting."})
    second = asyncio.run(watch(config))
    assert second["events"] == ["skillreach.skill.added"]
    assert second["emitted"] == 1
    runs = _wait_for_runs(rebaseline_deployment, before + 1)
    assert any(r.parameters.get("skill") == "omega" for r in runs)


def test_a_finished_batch_is_cached_and_lost_probes_are_never_taken_from_the_cache(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect import flow

    from skillreach.flows.study import study
    from skillreach.tasks.study import assemble_catalog, prepare_study, probe_batch

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    world = make_world(tmp_path)
    config = cfg(world, "out", batch_size=7)

    @flow
    async def twice() -> list[str]:
        inputs = await assemble_catalog(config)
        plan = await prepare_study(config, inputs)
        pairs = plan.batches[0]
        first = await probe_batch(config, inputs, plan, pairs, batch=0, return_state=True)
        second = await probe_batch(config, inputs, plan, pairs, batch=0, return_state=True)
        return [first.name, second.name, json.dumps(await second.result())]

    names = asyncio.run(twice())
    assert names[:2] == ["Completed", "Cached"]
    assert json.loads(names[2])["probes"] == 7
    assert len((tmp_path / "out/probes.jsonl").read_text().splitlines()) == 7

    result = asyncio.run(study(config))  # the rest, as a tracked flow
    assert result.artifact.counts.probes == 26
    log = tmp_path / "out/probes.jsonl"
    log.write_text("\n".join(log.read_text().splitlines()[:-5]) + "\n")  # the last batch's probes are lost
    again = asyncio.run(study(config))
    assert again.probes_run == 5
    assert again.artifact.counts.probes == 26


def test_cli_run_is_a_tracked_flow_run_when_a_server_answers(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from skillreach.cli import main
    from skillreach.store.database import Store

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    assert main(["run", "--out", "demo"]) == 0
    assert "tracked flow run" in capsys.readouterr().err
    with Store(f"sqlite:///{tmp_path / '.skillreach/skillreach.db'}") as s:
        [row] = s.studies()
    assert row.flow_run_id is not None

    async def state() -> str:
        async with get_client() as client:
            [fr] = await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[row.flow_run_id])))
            return str(fr.state_name)

    assert asyncio.run(state()) == "Completed"


def test_prefect_retries_a_batch_after_an_infrastructure_failure(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import skillreach.flows.study as study_module
    import skillreach.tasks.study as probing  # where the batch task opens the probe log

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    world = make_world(tmp_path)
    real_sink = probing.JsonlSink
    opened: list[int] = []

    def flaky_sink(*args: Any, **kwargs: Any) -> Any:
        opened.append(1)
        if len(opened) == 1:
            raise OSError(28, "No space left on device")
        return real_sink(*args, **kwargs)

    monkeypatch.setattr(probing, "JsonlSink", flaky_sink)
    fast_retry = study_module.probe_batch.with_options(retry_delay_seconds=0)
    monkeypatch.setattr(study_module, "probe_batch", fast_retry)
    result = asyncio.run(study_module.study(cfg(world, "out", attempts=1)))
    assert len(opened) == 2  # failed once, retried once
    assert result.artifact.counts.probes == 13


def test_rubrics_are_graded_in_a_tracked_run_and_the_tasks_are_recorded(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grading and cost-estimate tasks run as task runs of a real flow run (parameters and results
    go through Prefect), and their output is the in-process one's."""
    from skillreach.flows.study import study
    from skillreach.study.probe_log import read_probes
    from tests.helpers.rubrics import ANSWERS, with_rubrics

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    monkeypatch.delenv("SKILLREACH_JUDGE_MODEL", raising=False)
    world = make_world(tmp_path)
    with_rubrics(world)
    result = asyncio.run(study(cfg(world, "tracked", compliance=True, gate=False)))
    graded = {(p.query_id, p.attempt): p.rubric_grade for p in read_probes(result.out / "graded.jsonl")}
    assert graded == {(q, a): pytest.approx(g) for q, (_, g) in ANSWERS.items() for a in (1, 2)}
    quality = {(o.query_id, o.attempt): o.quality for o in result.artifact.outcomes if o.quality is not None}
    assert quality == graded

    from skillreach.store.database import Store

    with Store(f"sqlite:///{tmp_path / 'home/skillreach.db'}") as s:
        row = s.get_study(result.study_id)
        assert row is not None
        flow_run_id = row.flow_run_id
    assert flow_run_id

    async def task_names() -> set[str]:
        from uuid import UUID

        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

        async with get_client() as client:
            runs = await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(str(flow_run_id))]))
            )
        return {r.name.rsplit("-", 1)[0] for r in runs}

    # task runs reach the server as events, ingested a moment after the flow returns: look for a while
    wanted, names = {"estimate_spend", "grade_rubrics", "score"}, set()
    deadline = hang.Deadline(30)
    while not wanted <= names and not deadline.expired():
        names = asyncio.run(task_names())
        if not wanted <= names:
            time.sleep(0.5)
    assert wanted <= names, names


def test_a_week_in_the_life_as_tracked_flow_runs(prefect_server: None, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The week of tests/test_service_week.py, every flow a tracked run on the real Prefect server."""
    from skillreach.deployments.automations import upsert_automations
    from tests.helpers.week import make_week, play_week

    # whatever an earlier test of this server installed: the week's alerts are the posts it counts
    asyncio.run(upsert_automations(webhooks=[]))

    def tracked(flow: Any, **parameters: Any) -> Any:
        return asyncio.run(flow(**parameters))

    play_week(make_week(tmp_path, monkeypatch), tracked, capsys)


def test_a_live_drop_in_a_tracked_ingest_run_starts_the_live_dropped_deployment(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``ingest`` flow, tracked: the live gate finds pdf's share halved and emits
    ``skillreach.live.dropped``; prefect.yaml's trigger of ``live-dropped`` creates a run with the skill and
    the gate's time from the event."""
    import yaml
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    from skillreach.flows.live import ingest, live_dropped
    from skillreach.store.database import Store
    from skillreach.store.live import save_events
    from tests.conftest import REPO
    from tests.test_live_usage import day, month

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    [dep] = [d for d in spec["deployments"] if d["name"] == "live-dropped"]
    triggers = [DeploymentEventTrigger(**t) for t in dep["triggers"]]

    async def deploy() -> Any:
        deployment = await live_dropped.to_deployment(name="live-dropped", triggers=triggers)
        return await deployment.apply()

    deployment_id = asyncio.run(deploy())
    time.sleep(2)  # the trigger service picks up the deployment's automations
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKILLREACH_DATABASE_URL", raising=False)
    world = make_world(tmp_path)
    make_skills(world["skills"], {"pdf": "Read and fill PDF forms.", "docx": "Edit Word documents."})
    world["home"].mkdir(parents=True)
    with Store(f"sqlite:///{world['home'] / 'skillreach.db'}") as store:
        save_events(store, month(6, 3))
    until = day(42).isoformat()
    result = asyncio.run(ingest(cfg(world, "live"), until=until))
    assert result["dropped"] == ["pdf"]
    assert result["emitted"] == 1
    runs = _wait_for_runs(deployment_id, 1)
    assert {"skill": "pdf", "until": until}.items() <= runs[0].parameters.items()
    # the next hour's ingest sees the same fall: stored as a repeat, no event, no second re-run
    again = asyncio.run(ingest(cfg(world, "live"), until=until))
    assert (again["dropped"], again["emitted"]) == (["pdf"], 0)
    with Store(f"sqlite:///{world['home'] / 'skillreach.db'}") as store:
        said = [(a.key, a.delivery) for a in store.alerts() if a.event == "skillreach.live.dropped"]
    assert said == [("live.dropped:pdf:live_share", "event"), ("live.dropped:pdf:live_share", "repeat")]
    from prefect.client.orchestration import get_client

    async def names() -> list[str]:
        async with get_client() as client:
            return [r.name for r in await client.read_flow_runs() if r.name.startswith(("ingest-", "live-"))]

    assert any(n.startswith("ingest-") for n in asyncio.run(names()))
    # the verdict the triggered run files is a Markdown artifact of that run, under the skill's key
    from prefect import flow
    from prefect.artifacts import Artifact

    from skillreach.live.gate import check_live_gate
    from skillreach.live.verdict import FrozenResult, decide
    from skillreach.settings import LiveGateConfig
    from skillreach.tasks.live import publish_live_verdict

    [drop] = check_live_gate(month(6, 3), LiveGateConfig(), day(42))
    verdict = decide(drop, FrozenResult(verdict="ok", baseline_id="pdf@1", base=1.0, new=1.0))

    @flow
    async def file_it() -> bool:
        return bool(await publish_live_verdict(verdict))

    assert asyncio.run(file_it()) is True
    artifact = Artifact.get("live-verdict-pdf")
    assert artifact is not None
    assert "# pdf: live drop — request mix" in str(artifact.data)


def test_a_secret_in_a_failing_tracked_run_is_masked_in_prefects_logs(
    prefect_server: None, tmp_path: Path
) -> None:
    """``skillreach run --debug`` (the real command, its own process) as a tracked flow run whose every
    request fails with an error echoing the key (configured: ``ANTHROPIC_API_KEY``) and a proxy URL
    with its password: what Prefect stores through its API — the run's logs (flow-run and task-run
    loggers), the flow and task runs' state messages — and the ``--debug`` output with its tracebacks
    hold the error, masked (issue 30)."""
    import os
    import subprocess
    import sys

    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    from tests.fakes.messages_api import MessagesAPI

    key = "sk-ant-api03-KEYSECRETkeysecret0123456789"
    proxy_pw = "PROXYSECRET0123"

    def responder(body: dict[str, Any]) -> Any:
        raise RuntimeError(f"invalid x-api-key: {key} via http://user:{proxy_pw}@proxy.invalid:3128")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "ANTHROPIC_", "PREFECT_"))}
    env.update(
        PREFECT_API_URL=str(get_current_settings().api.url),
        PREFECT_HOME=str(tmp_path / "prefect"),
        SKILLREACH_HOME=str(tmp_path / "home"),
        SKILLREACH_MAX_RETRIES="0",
        ANTHROPIC_API_KEY=key,
        NO_COLOR="1",
        COLUMNS="200",
    )
    exe = Path(sys.executable).with_name("skillreach")
    args = [
        str(exe),
        "run",
        "--runtime",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "--out",
        "demo",
        "--debug",
    ]
    with MessagesAPI(responder, latency=0.0) as api:
        env["ANTHROPIC_BASE_URL"] = api.base_url
        proc = subprocess.run(
            args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
    shown = f"exit {proc.returncode}\n{proc.stderr[-4000:]}"
    assert proc.returncode not in (0, None), shown
    assert "tracked flow run" in proc.stderr, shown
    assert "invalid x-api-key" in proc.stderr, shown

    async def stored() -> list[str]:
        async with get_client() as client:
            logs = [log.message for log in await client.read_logs(limit=200)]
            flows = await client.read_flow_runs(limit=50)
            tasks = await client.read_task_runs(limit=200)
            states = [str(r.state.message) for r in [*flows, *tasks] if r.state is not None]
            return logs + states

    text = "\n".join(asyncio.run(stored()))
    assert "invalid x-api-key" in text, f"Prefect stored nothing of the error:\n{text[-3000:]}\n{shown}"
    for secret in (key, "KEYSECRET", proxy_pw):
        assert secret not in text, f"{secret!r} stored by Prefect:\n{text[-3000:]}"
        assert secret not in proc.stdout + proc.stderr, f"{secret!r} printed\n{shown}"
        for path in [*(tmp_path / "demo").rglob("*"), *(tmp_path / "home").rglob("*")]:
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), f"{secret!r} written to {path}"


_LOAD_SETTINGS = "import skillreach.settings as s; s.load_settings(); "  # registers the configured secrets
_LEAKY_FLOW = """
import sys

import skillreach.flows  # what a flow run's process imports first: the redaction is installed
from prefect import flow, task


@task(retries=0)
def leaky() -> None:
    raise RuntimeError(sys.argv[1])


@flow(name="leaky")
def leaky_flow() -> None:
    leaky()


leaky_flow()
"""


def test_prefects_own_logs_and_an_uncaught_traceback_are_masked(prefect_server: None, tmp_path: Path) -> None:
    """A tracked flow run (its own process, as a worker starts one) whose task raises an exception
    holding the key (configured: ``ANTHROPIC_API_KEY``, and by its shape), a URL password and a
    configured secret: Prefect's task-run and flow-run loggers log the exception with its traceback to
    the console and store it through the API; the process then dies of the uncaught exception and
    Python prints its traceback. The secrets are in none of these; the error is (issue 30)."""
    import os
    import subprocess
    import sys

    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    key = "sk-ant-api03-KEYSECRETkeysecret0123456789"
    proxy_pw = "PROXYSECRET0123"
    hook = "https://hooks.example.invalid/services/T1/B1/HOOKSECRET0123"
    message = f"invalid x-api-key: {key} via http://user:{proxy_pw}@proxy.invalid:3128 hook {hook}"
    script = tmp_path / "leaky.py"
    script.write_text(_LEAKY_FLOW, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "ANTHROPIC_", "PREFECT_"))}
    env.update(
        PREFECT_API_URL=str(get_current_settings().api.url),
        PREFECT_HOME=str(tmp_path / "prefect"),
        ANTHROPIC_API_KEY=key,
        SKILLREACH_ALERT_WEBHOOKS=json.dumps([hook]),  # a configured secret (registered when read)
        NO_COLOR="1",
    )
    proc = subprocess.run(
        [sys.executable, "-c", f"{_LOAD_SETTINGS}exec(open({str(script)!r}).read())", message],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    printed = proc.stdout + proc.stderr
    shown = f"exit {proc.returncode}\n{printed[-5000:]}"
    assert proc.returncode == 1, shown
    assert "Traceback" in proc.stderr, shown  # the uncaught exception's, printed
    assert "invalid x-api-key" in printed, shown

    async def stored() -> tuple[str, str]:
        # this flow's runs only: the server is shared by the module's other tests
        from prefect.client.schemas.filters import (
            FlowFilter,
            FlowFilterName,
            FlowRunFilter,
            FlowRunFilterId,
            LogFilter,
            LogFilterFlowRunId,
        )

        async with get_client() as client:
            leaky = FlowFilter(name=FlowFilterName(any_=["leaky"]))
            flow_runs = await client.read_flow_runs(flow_filter=leaky)
            ids = [r.id for r in flow_runs]
            of_runs = LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids))
            logs = [log.message for log in await client.read_logs(log_filter=of_runs)]
            in_runs = FlowRunFilter(id=FlowRunFilterId(any_=ids))
            task_runs = await client.read_task_runs(flow_run_filter=in_runs)
            states = [str(r.state.message) for r in [*flow_runs, *task_runs] if r.state is not None]
            return "\n".join(logs), "\n".join(states)

    logs, states = asyncio.run(stored())
    assert "invalid x-api-key" in logs, f"Prefect stored no log of the error:\n{logs[-3000:]}"
    assert "Traceback" in logs, logs[-3000:]
    secrets = (key, "KEYSECRET", proxy_pw, "HOOKSECRET")
    for secret in secrets:
        assert secret not in printed, f"{secret!r} printed\n{shown}"
        assert secret not in logs, f"{secret!r} in the logs Prefect stored:\n{logs[-3000:]}"
    assert "invalid x-api-key" in states, states[-3000:]
    # Prefect writes the failed state's message from the exception itself, not through a logger
    for secret in secrets:
        assert secret not in states, f"{secret!r} in a failed state's message:\n{states[-3000:]}"
