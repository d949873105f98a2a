"""prefect.yaml and the automations: entrypoints import, schedules parse, triggers validate — with
Prefect's own schema classes, no server needed."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

SPEC = yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))
BY_NAME = {d["name"]: d for d in SPEC["deployments"]}


def test_the_four_deployments_are_there() -> None:
    assert set(BY_NAME) == {"study", "nightly-compliance", "rebaseline-all", "watch", "resolve-crashed",
                            "ingest", "live-dropped", "deliver-alerts"}
    # the work pool is the service's environment's (`serve --pool`), never fixed in the file
    assert all(d["work_pool"]["name"] == "{{ $SKILLREACH_WORK_POOL }}" for d in SPEC["deployments"])


def test_the_deployments_run_on_the_pool_serve_creates(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.utilities.templating import apply_values

    from skillreach.deployments.serve import prefect_env

    monkeypatch.delenv("SKILLREACH_WORK_POOL", raising=False)
    assert prefect_env(4200)["SKILLREACH_WORK_POOL"] == "skillreach"
    env = prefect_env(4200, pool="gpu-pool")
    monkeypatch.setenv("SKILLREACH_WORK_POOL", env["SKILLREACH_WORK_POOL"])  # `prefect deploy` reads it
    for spec in SPEC["deployments"]:
        assert apply_values(spec, env, remove_notset=False)["work_pool"]["name"] == "gpu-pool"


def test_the_study_deployment_takes_what_prefect_yaml_and_the_readme_say() -> None:
    from skillreach.flows.study import study

    params = set(study.parameters.properties)
    assert {"config", "config_file"} <= params
    assert not {"database_url", "alert_webhooks", "work_pool"} & params
    described = BY_NAME["study"]["description"]
    assert "config_file" in described
    assert "config" in described
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`study` deployment's\nparameters are `config`" in readme


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_entrypoints_import_to_async_flows(name: str) -> None:
    from prefect.flows import Flow

    path, _, attr = BY_NAME[name]["entrypoint"].partition(":")
    assert (REPO / path).is_file()
    module = importlib.import_module(Path(path).with_suffix("").as_posix().replace("/", "."))
    obj = getattr(module, attr)
    assert isinstance(obj, Flow)
    assert obj.isasync, f"{name}: flows are async (a sync flow silently skips async tasks)"
    # parameters given in prefect.yaml must be parameters of the flow
    params = set(obj.parameters.properties)
    assert set(BY_NAME[name].get("parameters", {})) <= params
    for trig in BY_NAME[name].get("triggers", []):
        assert set(trig.get("parameters", {})) <= params


def test_scheduled_and_triggered_deployments_run_one_at_a_time() -> None:
    from prefect.client.schemas.objects import ConcurrencyLimitStrategy, ConcurrencyOptions

    strategies = {}
    for name in ("nightly-compliance", "rebaseline-all", "watch"):
        limit = BY_NAME[name]["concurrency_limit"]
        assert limit["limit"] == 1
        options = ConcurrencyOptions(collision_strategy=limit["collision_strategy"])
        strategies[name] = options.collision_strategy
    assert strategies == {"nightly-compliance": ConcurrencyLimitStrategy.ENQUEUE,
                          "rebaseline-all": ConcurrencyLimitStrategy.CANCEL_NEW,
                          "watch": ConcurrencyLimitStrategy.CANCEL_NEW}
    assert "concurrency_limit" not in BY_NAME["study"]  # different studies on demand may run together


def _rendered(name: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A deployment of prefect.yaml as `prefect deploy` renders it in ``env`` (it reads ``{{ $NAME }}``
    from the process environment)."""
    from prefect.utilities.templating import apply_values

    for key in ("SKILLREACH_NIGHTLY_CRON", "SKILLREACH_NIGHTLY_TIMEZONE"):
        monkeypatch.setenv(key, env[key])
    rendered: dict[str, Any] = apply_values(BY_NAME[name], env, remove_notset=False)
    return rendered


def test_schedules_parse_with_prefect(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.client.schemas.schedules import CronSchedule, IntervalSchedule

    from skillreach.deployments.serve import prefect_env

    # serve deploys prefect.yaml in its environment: the nightly's defaults, 02:00 UTC
    monkeypatch.delenv("SKILLREACH_NIGHTLY_CRON", raising=False)
    monkeypatch.delenv("SKILLREACH_NIGHTLY_TIMEZONE", raising=False)
    [nightly] = _rendered("nightly-compliance", prefect_env(4200), monkeypatch)["schedules"]
    cron = CronSchedule(cron=nightly["cron"], timezone=nightly["timezone"])
    assert (cron.cron, cron.timezone) == ("0 2 * * *", "UTC")
    import asyncio
    from datetime import UTC, datetime

    from prefect.server.schemas.schedules import CronSchedule as ServerCron

    dates = asyncio.run(ServerCron(cron=cron.cron, timezone="UTC").get_dates(
        n=2, start=datetime(2026, 1, 1, 3, 0, tzinfo=UTC)))
    assert [(d.day, d.hour, d.minute) for d in dates] == [(2, 2, 0), (3, 2, 0)]
    [every] = BY_NAME["watch"]["schedules"]
    assert IntervalSchedule(interval=every["interval"]).interval.total_seconds() == every["interval"]


def test_rebaseline_triggers_validate_and_fire_on_the_right_events() -> None:
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    triggers = [DeploymentEventTrigger(**t) for t in BY_NAME["rebaseline-all"]["triggers"]]
    expected = {e for t in triggers for e in t.expect}
    assert expected == {"skillreach.skill.added", "skillreach.skill.changed", "skillreach.skill.removed",
                        "skillreach.skill.renamed",
                        "skillreach.model.snapshot.changed", "skillreach.corpus.changed",
                        "skillreach.rubric.changed", "skillreach.runtime.version.changed",
                        "skillreach.baseline.expired"}
    # the resources the watch flow emits match the triggers' resource filters
    from skillreach.service.watch import diff_catalog, diff_model, events_for, pin_events, pin_snapshot

    change = diff_model("anthropic", "claude-x", "a", "b")
    assert change is not None
    events = events_for("src", diff_catalog({}, {"pdf": "d"}), [change])
    edited = events_for("src", diff_catalog({"pdf": "d"}, {"pdf": "e"}), [])
    assert [e.event for e in edited] == ["skillreach.skill.changed"]  # an edit re-gates too
    events += edited
    from skillreach.service.watch import find_renames

    removed = events_for("src", diff_catalog({"pdf": "d", "csv": "c"}, {"pdf": "d"}), [])
    assert [e.event for e in removed] == ["skillreach.skill.removed"]  # so does a removal
    moved = find_renames(diff_catalog({"pdf": "d"}, {"pdf-tools": "e"}), {"pdf": "b"}, {"pdf-tools": "b"})
    renamed = events_for("src", moved, [])
    assert [(e.event, e.payload["skill"], e.payload["previous"]) for e in renamed] == [
        ("skillreach.skill.renamed", "pdf-tools", "pdf")]  # and a rename, once, naming both
    events += removed + renamed
    old = pin_snapshot("sha256:a", {"pdf": "sha256:r1"}, "claude-code", "2.1.0")
    new = pin_snapshot("sha256:b", {"pdf": "sha256:r2"}, "claude-code", "2.2.0")
    pins = pin_events("src", diff_catalog(old, new))
    assert sorted(e.event for e in pins) == ["skillreach.corpus.changed", "skillreach.rubric.changed",
                                            "skillreach.runtime.version.changed"]
    for ev in [*events, *pins]:
        [trig] = [t for t in triggers if ev.event in t.expect]
        raw = trig.match.root["prefect.resource.id"] if hasattr(trig.match, "root") else (
            trig.match["prefect.resource.id"])
        patterns = raw if isinstance(raw, list) else [raw]
        assert any(ev.resource["prefect.resource.id"].startswith(str(p).rstrip("*")) for p in patterns)
    # parameters come from the event
    assert triggers[0].parameters == {"reason": "{{ event.event }}", "skill": "{{ event.payload.skill }}"}
    assert triggers[1].parameters == {"reason": "{{ event.event }}", "skill": "{{ event.payload.skill }}",
                                      "renamed_from": "{{ event.payload.previous }}"}
    from uuid import uuid4

    for t in triggers:
        t.set_deployment_id(uuid4())
        deployment_trigger = t.as_automation()
        assert deployment_trigger.actions[0].type == "run-deployment"


def test_the_alert_outbox_retries_on_a_schedule_and_files_runs_that_ended_badly() -> None:
    """``deliver-alerts``: every 15 minutes (a fixed anchor), passes side by side; triggered by a
    skillreach run's bad end with that run's id; never tagged ``skillreach`` (it never files itself)."""
    from datetime import timedelta
    from uuid import uuid4

    from prefect.client.schemas.schedules import IntervalSchedule
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    dep = BY_NAME["deliver-alerts"]
    assert "skillreach" not in dep["tags"]
    [every] = dep["schedules"]
    assert IntervalSchedule(interval=every["interval"]).interval == timedelta(minutes=15)
    assert "concurrency_limit" not in dep  # a pass killed with the service never blocks the next
    ended, started = [DeploymentEventTrigger(**t) for t in dep["triggers"]]
    assert ended.parameters == {"flow_run_id": "{{ event.resource.id }}"}
    assert started.expect == {"prefect.worker.started"}  # a (re)started service: one pass at once
    assert not started.parameters
    for trig in (ended, started):
        trig.set_deployment_id(uuid4())
        assert trig.as_automation().actions[0].type == "run-deployment"


def test_a_live_drop_triggers_the_frozen_set_rerun_and_ingest_runs_on_a_schedule() -> None:
    """``ingest`` runs hourly (one at a time); each ``skillreach.live.dropped`` it emits (resource: the
    skill) starts ``live-dropped`` with the skill and the gate's time from the event's payload; the
    verdict's alert is worded as any other."""
    from datetime import UTC, datetime, timedelta
    from uuid import uuid4

    import jinja2
    from prefect.client.schemas.schedules import IntervalSchedule
    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    from skillreach.live.gate import LIVE_DROPPED, LiveDrop, LiveShare, LiveWindows
    from skillreach.live.verdict import LIVE_VERDICT, FrozenResult, decide, drop_payload, verdict_payload
    from skillreach.service.alerts import slack_message

    [every] = BY_NAME["ingest"]["schedules"]
    assert IntervalSchedule(interval=every["interval"]).interval == timedelta(hours=1)
    assert BY_NAME["ingest"]["concurrency_limit"] == {"limit": 1, "collision_strategy": "CANCEL_NEW"}
    [trigger] = [DeploymentEventTrigger(**t) for t in BY_NAME["live-dropped"]["triggers"]]
    assert trigger.expect == {LIVE_DROPPED}
    end = datetime(2026, 12, 1, tzinfo=UTC)
    windows = LiveWindows(reference_start=end - timedelta(days=42), recent_start=end - timedelta(days=14),
                          until=end)
    drop = LiveDrop(skill="pdf", windows=windows, reference_prompts=400, recent_prompts=200,
                    share=LiveShare(skill="pdf", reference_activations=200, recent_activations=40,
                                    reference_share=0.5, recent_share=0.2),
                    gate=-0.25, relative=-0.6)
    payload = drop_payload(drop)
    raw = trigger.match.root["prefect.resource.id"]
    assert f"skillreach.skill.{payload['skill']}".startswith(str(raw).rstrip("*"))
    env = jinja2.Environment()
    rendered = {k: env.from_string(v).render(event={"payload": payload})
                for k, v in trigger.parameters.items()}
    assert rendered == {"skill": "pdf", "until": "2026-12-01T00:00:00+00:00"}
    trigger.set_deployment_id(uuid4())
    assert trigger.as_automation().actions[0].type == "run-deployment"
    verdict = decide(drop, FrozenResult(verdict="ok", baseline_id="pdf@1", base=1.0, new=1.0))
    alert = verdict_payload(verdict, run_link="http://ui/runs/1")
    assert alert["event"] == LIVE_VERDICT
    text = slack_message(alert)["text"]
    assert text.startswith(f"skillreach {LIVE_VERDICT}: pdf: ")
    assert "request mix" in text


def test_serve_environment_points_prefect_at_the_local_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillreach.deployments.serve import prefect_env

    env = prefect_env(4321, tmp_path)
    assert env["PREFECT_API_URL"] == "http://127.0.0.1:4321/api"
    assert env["PWD"] == str(tmp_path.resolve())  # prefect.yaml's pull step: flow runs work in this folder
    monkeypatch.delenv("PREFECT_HOME", raising=False)
    assert prefect_env(4321, tmp_path)["PREFECT_HOME"] == str(tmp_path.resolve() / ".skillreach" / "prefect")
    monkeypatch.setenv("PREFECT_HOME", "/somewhere/else")
    assert prefect_env(4321, tmp_path)["PREFECT_HOME"] == "/somewhere/else"
    assert env["PREFECT_SERVER_ANALYTICS_ENABLED"] in ("false", "False", "0")


def test_stop_escalates_to_kill_for_a_process_that_ignores_interrupts() -> None:
    import subprocess
    import sys
    import time

    from skillreach.deployments.serve import stop_group

    code = ("import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"up"
    t0 = time.monotonic()
    stop_group(proc, grace_s=0.5)
    assert proc.poll() is not None
    assert time.monotonic() - t0 < 15


def test_the_zombie_automation_validates() -> None:
    from datetime import timedelta

    from prefect.client.schemas.objects import StateType

    from skillreach.deployments.automations import zombie_automation

    zombie = zombie_automation(heartbeat=30)
    assert zombie.trigger.posture.value == "Proactive"
    assert zombie.trigger.after == {"prefect.flow-run.heartbeat"}
    assert zombie.trigger.expect == {"prefect.flow-run.heartbeat", "prefect.flow-run.*"}
    assert zombie.trigger.for_each == {"prefect.resource.id"}
    assert zombie.trigger.within == timedelta(seconds=90)
    assert zombie.actions[0].state == StateType.CRASHED


def test_serve_turns_flow_run_heartbeats_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from skillreach.deployments.serve import prefect_env

    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    assert prefect_env(4200)["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] == "30"


def test_resolve_crashed_fires_on_a_crashed_skillreach_deployment_run() -> None:
    from uuid import uuid4

    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    dep = BY_NAME["resolve-crashed"]
    assert "skillreach" not in dep["tags"]  # neither alerts nor triggers itself
    [trig] = [DeploymentEventTrigger(**t) for t in dep["triggers"]]
    assert trig.expect == {"prefect.flow-run.Crashed"}
    assert trig.parameters == {"flow_run_id": "{{ event.resource.id }}"}
    trig.set_deployment_id(uuid4())
    assert trig.as_automation().actions[0].type == "run-deployment"


def test_serve_restarts_a_worker_that_dies(monkeypatch: pytest.MonkeyPatch) -> None:
    import signal
    import subprocess
    import sys
    import threading

    from skillreach.deployments import serve

    monkeypatch.setattr(serve, "RESTART_DELAY_S", (0.0,))
    started: list[subprocess.Popen[bytes]] = []
    lines: list[str] = []

    def start() -> subprocess.Popen[bytes]:
        code = "import time; time.sleep(60)" if not started else "import sys; sys.exit(3)"
        started.append(subprocess.Popen([sys.executable, "-c", code]))
        return started[-1]

    # the first "worker" is killed with SIGKILL, the second exits 3; both are restarted
    threading.Timer(1.0, lambda: started[0].send_signal(signal.SIGKILL)).start()
    last = serve.supervise(start, lines.append, restarts=2)
    last.wait(10)
    assert len(started) == 3
    assert lines[0] == f"serve: the worker (pid {started[0].pid}) exited with code -9; restarting it in 0 s"
    assert lines[2] == f"serve: the worker (pid {started[1].pid}) exited with code 3; restarting it in 0 s"
    assert lines[1] == f"serve: worker restarted (pid {started[1].pid})"


def test_the_watch_schedule_has_a_fixed_anchor() -> None:
    from datetime import UTC, datetime

    from prefect.client.schemas.schedules import IntervalSchedule

    [every] = BY_NAME["watch"]["schedules"]
    schedule = IntervalSchedule(interval=every["interval"], anchor_date=every["anchor_date"],
                                timezone=every["timezone"])
    assert schedule.anchor_date == datetime(2026, 1, 1, tzinfo=UTC)  # redeploying never moves it


def test_the_nightly_schedule_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.client.schemas.schedules import CronSchedule

    from skillreach.deployments.serve import nightly_schedule, prefect_env
    from skillreach.errors import ConfigError

    monkeypatch.setenv("SKILLREACH_NIGHTLY_CRON", "30 4 * * 1-5")
    monkeypatch.setenv("SKILLREACH_NIGHTLY_TIMEZONE", "Europe/Berlin")
    env = prefect_env(4200)
    assert nightly_schedule(env) == ("30 4 * * 1-5", "Europe/Berlin")
    [nightly] = _rendered("nightly-compliance", env, monkeypatch)["schedules"]
    assert CronSchedule(cron=nightly["cron"], timezone=nightly["timezone"]).timezone == "Europe/Berlin"
    assert nightly["cron"] == "30 4 * * 1-5"
    with pytest.raises(ConfigError, match="SKILLREACH_NIGHTLY_CRON='every night'"):
        nightly_schedule({**env, "SKILLREACH_NIGHTLY_CRON": "every night"})
    with pytest.raises(ConfigError, match="SKILLREACH_NIGHTLY_TIMEZONE='Mars/Olympus'"):
        nightly_schedule({**env, "SKILLREACH_NIGHTLY_TIMEZONE": "Mars/Olympus"})


def _server_trigger(automation: Any) -> Any:
    """The server's own reading of an automation's trigger (what evaluates events on a real server)."""
    from prefect.server.events.schemas.automations import EventTrigger

    return EventTrigger.model_validate(automation.trigger.model_dump(mode="json"))


def _state_event(name: str, state_type: str, *, tagged: bool = True) -> Any:
    """A flow-run state event as the server emits it (prefect/server/models/events.py): named after the
    state's name, its type a resource label."""
    from uuid import uuid4

    from prefect.server.events.schemas.events import ReceivedEvent
    from prefect.types._datetime import now

    run = uuid4()
    related = [{"prefect.resource.id": f"prefect.deployment.{uuid4()}",
                "prefect.resource.role": "deployment"}]
    if tagged:
        related.append({"prefect.resource.id": "prefect.tag.skillreach", "prefect.resource.role": "tag"})
    return ReceivedEvent(
        occurred=now("UTC"), event=f"prefect.flow-run.{name}",
        resource={"prefect.resource.id": f"prefect.flow-run.{run}", "prefect.state-name": name,
                  "prefect.state-type": state_type},
        related=related, id=uuid4())


@pytest.mark.parametrize(("name", "state_type", "alerts"), [
    ("Breached", "FAILED", True),  # a breached nightly: Failed named Breached
    ("Failed", "FAILED", True),
    ("Crashed", "CRASHED", True),
    ("TimedOut", "FAILED", True),
    ("Completed", "COMPLETED", False),
    ("Cancelled", "CANCELLED", False),
    ("Running", "RUNNING", False),
])
def test_run_ended_badly_matches_the_state_type_whatever_its_name(
    name: str, state_type: str, alerts: bool
) -> None:
    from uuid import uuid4

    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger

    outbox = DeploymentEventTrigger(**BY_NAME["deliver-alerts"]["triggers"][0])
    outbox.set_deployment_id(uuid4())
    trigger = _server_trigger(outbox.as_automation())
    assert trigger.covers(_state_event(name, state_type)) is alerts
    assert trigger.covers(_state_event(name, state_type, tagged=False)) is False  # not a skillreach run


@pytest.mark.parametrize(("name", "state_type"), [
    ("Breached", "FAILED"), ("Completed", "COMPLETED"), ("Crashed", "CRASHED"), ("Cancelled", "CANCELLED"),
    ("Failed", "FAILED"),
])
def test_the_zombie_wait_ends_with_any_state_whatever_its_name(name: str, state_type: str) -> None:
    from skillreach.deployments.automations import zombie_automation

    trigger = _server_trigger(zombie_automation(heartbeat=30))
    event = _state_event(name, state_type)
    assert trigger.covers(event)
    assert trigger.expects(event.event)  # the run ended: no "Run is already in terminal state" later
    assert trigger.starts_after("prefect.flow-run.heartbeat")
    assert not trigger.starts_after(event.event)


def test_serve_deploys_the_packaged_file_with_absolute_entrypoints(tmp_path: Path) -> None:
    from skillreach.deployments.serve import PREFECT_FILE, deploy_file

    assert PREFECT_FILE.read_text(encoding="utf-8") == (REPO / "prefect.yaml").read_text(encoding="utf-8")
    out = deploy_file({"PREFECT_HOME": str(tmp_path)})
    assert out == tmp_path / "prefect.yaml"
    written = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert [d["name"] for d in written["deployments"]] == [d["name"] for d in SPEC["deployments"]]
    for mine, theirs in zip(written["deployments"], SPEC["deployments"], strict=True):
        path = mine["entrypoint"].rpartition(":")[0]
        assert Path(path).is_absolute()
        assert Path(path).is_file()
        assert mine["entrypoint"].endswith(theirs["entrypoint"])
        assert {k: v for k, v in mine.items() if k != "entrypoint"} == {
            k: v for k, v in theirs.items() if k != "entrypoint"
        }
    assert written["pull"] == SPEC["pull"]


def test_a_failing_service_step_says_what_prefect_said(tmp_path: Path) -> None:
    import sys

    from skillreach.deployments.serve import StepFailed, _step

    code = ("import sys; print('Deploying flows…'); print('Traceback …', file=sys.stderr); "
            "print('ValueError: work pool \"x\" not found', file=sys.stderr); sys.exit(3)")
    with pytest.raises(StepFailed) as exc:
        _step("prefect deploy", [sys.executable, "-c", code], {}, tmp_path)
    assert str(exc.value) == "prefect deploy failed with exit code 3: ValueError: work pool \"x\" not found"


def test_serve_restarts_the_server_it_started_when_it_dies_or_stops_in_one_line() -> None:
    import subprocess
    import sys
    import threading
    import time

    from skillreach.deployments.serve import keep_alive, stop_group

    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                        start_new_session=True))
        return started[-1]

    lines: list[str] = []
    stop, failed = threading.Event(), threading.Event()
    try:
        keep_alive(start, start(), lambda p: p.poll() is None, lines.append, stop=stop, on_fail=failed.set,
                   every_s=0.1)
        started[0].kill()  # the server dies (kill -9): restarted, not left <defunct>
        deadline = time.monotonic() + 20
        while len(started) < 2 or not any("restarted" in line for line in lines):
            assert time.monotonic() < deadline, lines
            time.sleep(0.1)
        assert started[0].poll() is not None  # reaped
        assert lines[0].startswith(f"serve: the Prefect server (pid {started[0].pid}) exited with code -9")
        assert not failed.is_set()
    finally:
        stop.set()
        for proc in started:
            stop_group(proc, grace_s=1)

    lines.clear()
    stop2 = threading.Event()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    keep_alive(lambda: dead, dead, lambda p: False, lines.append, stop=stop2, on_fail=failed.set, every_s=0.1)
    assert failed.wait(10)  # it does not come back: serve stops, one line says so
    assert lines[-1].startswith("serve: the Prefect server did not come back; stopping")
    stop2.set()


@pytest.mark.parametrize(("pool", "fires"), [("gpu-pool", True), ("another-pool", False)])
def test_a_worker_of_the_service_starting_runs_the_outbox(
    pool: str, fires: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve`` started or restarted (or a dead worker replaced): ``prefect.worker.started`` of the
    service's pool starts a ``deliver-alerts`` pass; another pool's worker does not."""
    from uuid import uuid4

    from prefect.events.schemas.deployment_triggers import DeploymentEventTrigger
    from prefect.server.events.schemas.events import ReceivedEvent
    from prefect.types._datetime import now
    from prefect.utilities.templating import apply_values

    from skillreach.deployments.serve import prefect_env

    env = prefect_env(4200, pool="gpu-pool")
    monkeypatch.setenv("SKILLREACH_WORK_POOL", env["SKILLREACH_WORK_POOL"])
    rendered = apply_values(BY_NAME["deliver-alerts"], env, remove_notset=False)
    trig = DeploymentEventTrigger(**rendered["triggers"][1])
    trig.set_deployment_id(uuid4())
    event = ReceivedEvent(
        occurred=now("UTC"), event="prefect.worker.started", id=uuid4(),
        resource={"prefect.resource.id": "prefect.worker.process.processworker-1",
                  "prefect.resource.name": "ProcessWorker 1"},
        related=[{"prefect.resource.id": f"prefect.work-pool.{uuid4()}", "prefect.resource.role": "work-pool",
                  "prefect.resource.name": pool}])
    assert _server_trigger(trig.as_automation()).covers(event) is fires
