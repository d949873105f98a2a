"""Alerts that arrive, once (issue 39), the way an operator runs the service: the wheel of this checkout
installed into a clean venv, ``skillreach serve`` from it in a working folder of its own (a real Prefect
server on 127.0.0.1, prefect.yaml's deployments — ``deliver-alerts`` among them —, a supervised worker),
the skills in a git repository, the study configuration and the webhook in the service's environment,
and the alerts read from a real HTTP receiver on 127.0.0.1. The agent is the anthropic runtime against
the local Messages API stand-in.

1. **The receiver is down** while a fresh install's first nightly and a first commit (delta added,
   taking one of beta's cases) raise three alerts: ``skillreach alerts list`` shows them *pending* with
   the reason, ``status`` counts them; the service is restarted while they wait; the receiver comes
   back on its port: each of the three arrives, exactly once, and is listed *delivered*.
2. **A second commit and a nightly** (delta's description edited: it takes gamma's cases; the nightly
   finds gamma's breach again and ends ``Breached``): one message — gamma's breach —; beta's undecided
   drop and delta's missing queries are the verdicts already said (stored as repeats), the nightly's
   breach is the open verdict (a repeat), and its ``Breached`` end is never said apart. Over the two
   commits and the nightly: at most one message per skill per verdict.

Integration: the wheel (seconds, from uv's cache), the server (30–120 s), ~12 flow runs.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.fakes.messages_api import MessagesAPI
from tests.helpers.alert_service import Served, free_port, install_wheel
from tests.helpers.webhooks import WebhookSink
from tests.helpers.week import ALIAS, OLD, THIEF, Stealing, git, skills_repo, write_skill

pytestmark = pytest.mark.integration

POOL = "operator-alerts"
EDIT = " It also writes multilingual release notes."
"""What the second commit adds to delta's description: from then on delta takes gamma's cases."""
FLOWS = ("watch", "nightly-compliance", "rebaseline-all", "deliver-alerts")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("operator-alerts")
    bin_dir = install_wheel(root / "wheel", extras="anthropic")  # the runtime the service studies with
    repo = root / "repo"
    skills_repo(repo)
    (root / "op").mkdir()
    hook = free_port()  # the receiver's port: nothing listens on it until the receiver "comes back"
    world: dict[str, Any] = {"root": root, "repo": repo, "home": root / "home", "hook": hook}
    with MessagesAPI(Stealing(), aliases={ALIAS: OLD}) as api:
        study = root / "study.toml"
        study.write_text(
            f'skills = ["{repo / "skills"}"]\nqueries = "{repo / "evals" / "queries.json"}"\n'
            f'runtime = "anthropic"\nmodel = "{ALIAS}"\nattempts = 2\nconcurrency = 4\n'
            f'home = "{root / "home"}"\n'
            f'[runtime_options]\nbase_url = "{api.base_url}"\nmax_retries = 0\n'
            f'[prices."{ALIAS}"]\ninput = 1.0\noutput = 5.0\ncache_write = 1.25\ncache_read = 0.1\n')
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "SKILLREACH_", "VIRTUAL_ENV", "PYTHON"))
               and k != "PYTEST_XDIST_WORKER"}
        env.update({
            "PREFECT_HOME": str(root / "prefect"),
            "SKILLREACH_STUDY_CONFIG": str(study),
            "SKILLREACH_ALERT_WEBHOOKS": json.dumps([f"http://127.0.0.1:{hook}/services/T0/B0/HOOKSECRET"]),
            # retried every 5 s, then 10, 20, at most 30 s apart (the default: 30 s doubling to an hour)
            "SKILLREACH_ALERT_DELIVERY": json.dumps({"first_retry": "5s", "longest_retry": "30s",
                                                     "tries": 60}),
            "ANTHROPIC_API_KEY": "sk-test-not-a-secret",
            "PREFECT_WORKER_QUERY_SECONDS": "2",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
        })
        svc = Served(bin_dir, root / "op", env, free_port(), POOL)
        world.update(api=api, service=svc)
        try:
            world["up_s"] = svc.start()
            svc.quiet_schedules()
            yield world
        finally:
            svc.stop()
            sink = world.get("sink")
            if sink is not None:
                sink.__exit__(None, None, None)


def texts(sink: WebhookSink) -> list[str]:
    return [str(r["body"].get("text")) if isinstance(r["body"], dict) else str(r["body"])
            for r in sink.requests]


def listed(world: dict[str, Any]) -> list[str]:
    done = world["service"].cli("alerts", "list", "--limit", "100", home=world["home"])
    assert done.returncode == 0, done.stderr
    assert "HOOKSECRET" not in done.stdout + done.stderr
    return [ln for ln in done.stdout.splitlines() if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d  ", ln)]


def state_of(line: str) -> str:
    """The state word of an ``alerts list`` line (``2026-…  KEY  pending (…)`` → ``pending``)."""
    return line.split("  ", 2)[2].split(" ", 1)[0]


def test_alerts_wait_pending_while_the_receiver_is_down_and_each_arrives_once_when_it_is_back(
    world: dict[str, Any],
) -> None:
    svc: Served = world["service"]
    repo, hook = world["repo"], world["hook"]
    svc.deployment_run("watch/watch")  # the first snapshots
    svc.wait_done("watch")
    night = svc.deployment_run("nightly-compliance/nightly-compliance")
    svc.wait_done("nightly-compliance", "rebaseline-all")  # its notice starts the first re-baselining
    assert svc.state(night)[0] == "COMPLETED"
    write_skill(repo / "skills", *THIEF)  # the first commit: delta, without queries, takes one beta case
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "add delta")
    svc.deployment_run("watch/watch")
    svc.wait_done("watch", "rebaseline-all")

    lines = listed(world)
    assert [state_of(ln) for ln in lines] == ["pending"] * 3, lines
    keys = sorted(ln.split("  ")[1] for ln in lines)
    assert keys == ["baseline.expired:*:baseline", "gate.inconclusive:beta:activation:delta",
                    "skill.no_queries:delta:baseline"], lines
    assert all(f": ConnectError from http://127.0.0.1:{hook}/…)" in ln for ln in lines), lines
    status = svc.cli("status", home=world["home"])
    assert "alerts undelivered: 3 pending (retried), 0 failed (skillreach alerts list)" in status.stdout, (
        status.stdout + status.stderr)

    # the service is restarted while they wait: nothing is lost, the retries go on
    svc.stop()
    world["restarted"] = datetime.now(UTC)
    restarted_s = svc.start()
    svc.quiet_schedules()
    assert [state_of(ln) for ln in listed(world)] == ["pending"] * 3

    back = time.monotonic()
    sink = WebhookSink(port=hook).__enter__()  # the receiver returns, on its port
    world["sink"] = sink
    while len(sink.requests) < 3:
        assert time.monotonic() - back < 300, f"{texts(sink)}\n{listed(world)}\n{svc.said()[-3000:]}"
        time.sleep(1)
    arrived_s = time.monotonic() - back
    svc.wait_done(*FLOWS, since=world["restarted"])
    time.sleep(40)  # past the longest retry: a duplicate would have arrived by now
    said = texts(sink)
    assert len(said) == 3, said
    for start in ("skillreach skillreach.baseline.expired: *: no baselines yet",
                  "skillreach skillreach.gate.inconclusive: beta: drop past the gate",
                  "skillreach skillreach.skill.no_queries: delta: "):
        assert sum(t.startswith(start) for t in said) == 1, said
    assert all(r["path"] == "/services/T0/B0/HOOKSECRET" for r in sink.requests)
    assert [state_of(ln) for ln in listed(world)] == ["delivered"] * 3
    status = svc.cli("status", home=world["home"])
    assert "alerts undelivered: 0 pending (retried), 0 failed" in status.stdout
    world["first_said"] = said
    print(f"\nreceiver down: 3 alerts pending across a restart of serve (up again in {restarted_s:.0f} s); "
          f"all 3 arrived {arrived_s:.0f} s after the receiver returned, each once; serve first up in "
          f"{world['up_s']:.0f} s")


def test_a_second_commit_and_a_nightly_say_each_verdict_once(world: dict[str, Any]) -> None:
    svc: Served = world["service"]
    repo = world["repo"]
    sink: WebhookSink | None = world.get("sink")
    if sink is None:
        pytest.skip("runs after the receiver test (its alerts and its receiver)")
    sink.requests.clear()
    write_skill(repo / "skills", THIEF[0], THIEF[1] + EDIT)  # the second commit: delta now takes gamma's
    git(repo, "commit", "-q", "-am", "delta: release notes too")
    svc.deployment_run("watch/watch")
    svc.wait_done("watch", "rebaseline-all", "deliver-alerts", since=world["restarted"])
    night = svc.deployment_run("nightly-compliance/nightly-compliance")
    svc.wait_done(*FLOWS, since=world["restarted"])  # its Breached end starts deliver-alerts: folded
    assert svc.state(night) == ("FAILED", "Breached")
    filed = svc.runs("deliver-alerts")
    assert any((r.get("parameters") or {}).get("flow_run_id") == f"prefect.flow-run.{night}" for r in filed)
    time.sleep(10)
    said = texts(sink)
    assert len(said) == 1, said
    assert said[0].startswith("skillreach gate breach: gamma activation changed -1.000"), said
    assert "; lost 4 of 4 cases to delta; next: skillreach baseline accept gamma" in said[0]
    assert not [t for t in said if t.startswith("skillreach skillreach.run.")]

    lines = listed(world)
    words = Counter((ln.split("  ")[1], state_of(ln)) for ln in lines)
    assert words[("gate.breached:gamma:activation:delta", "delivered")] == 1
    assert words[("gate.breached:gamma:activation:delta", "repeat")] == 1  # the nightly found it again
    assert words[("gate.inconclusive:beta:activation:delta", "repeat")] >= 1  # the edit's re-gating
    every = world["first_said"] + said
    per_verdict = Counter(": ".join(t.split(": ")[:2]).split(" changed")[0] for t in every)
    assert max(per_verdict.values()) == 1, every
    print(f"\ntwo commits and a nightly: {len(every)} messages in all ({len(world['first_said'])} for the "
          f"first nightly and the first commit, {len(said)} for the second commit and the nightly), one per "
          f"skill and verdict: {dict(per_verdict)}")
