"""Alerts that fire once: the same alert (kind, skill, metric, cause) is sent at most once per
``alert_repeat_after``; ``skillreach alerts mute KEY --for 7d`` holds it back; ``alerts list`` shows
what was sent, held back and muted (store-backed: migration 0002)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.store import alert_key, sent_within
from tests.helpers.webhooks import WebhookSink
from tests.helpers.world import cfg, run, store_of


def test_the_same_alert_is_sent_once_per_window_and_a_mute_holds_it_back(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillreach.flows.service import rebaseline_all
    from skillreach.flows.study import study

    run(rebaseline_all, cfg(world, "base"))
    monkeypatch.setenv("SKILLREACH_HOME", str(world["home"]))  # the CLI's store is the studies'
    with WebhookSink() as sink:
        monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", json.dumps([f"{sink.base_url}/hook"]))
        first = run(study, cfg(world, "n1", runtime_script="bad"))
        second = run(study, cfg(world, "n2", runtime_script="bad"))  # the same breach, an hour later
        assert len(first.breaches) == len(second.breaches) == 1
        assert len(sink.requests) == 1  # sent once
        key = alert_key(first.breaches[0])
        assert key == "gate.breached:alpha:activation"

        capsys.readouterr()
        assert main(["alerts", "list"]) == 0
        listed = capsys.readouterr().out
        assert f"{key}  delivered" in listed
        assert f"{key}  repeat" in listed

        # a window of 0 sends every repeat; a mute (by the skill's prefix) still holds it back
        monkeypatch.setenv("SKILLREACH_ALERT_REPEAT_AFTER", "0s")
        assert main(["alerts", "mute", "gate.breached:alpha", "--for", "7d"]) == 0
        run(study, cfg(world, "n3", runtime_script="bad"))
        assert len(sink.requests) == 1
        capsys.readouterr()
        assert main(["alerts", "list"]) == 0
        listed = capsys.readouterr().out
        assert f"{key}  muted" in listed
        assert "muted  gate.breached:alpha  until" in listed

        assert main(["alerts", "unmute", "gate.breached:alpha"]) == 0
        run(study, cfg(world, "n4", runtime_script="bad"))
        assert len(sink.requests) == 2  # sent again
    assert main(["alerts", "unmute", "gate.breached:alpha"]) == 2  # not muted: one line, exit 2
    assert main(["alerts", "mute", "x", "--for", "soon"]) == 2


def test_a_repeat_is_counted_from_the_last_alert_sent(world: dict[str, Path]) -> None:
    payload = {"event": "skillreach.gate.breached", "skill": "a", "metric": "activation", "cause": "b"}
    key = alert_key(payload)
    assert key == "gate.breached:a:activation:b"
    with store_of(world) as store:
        store.add_alert(payload, key=key, delivery="repeat")  # held back: not a sending
        assert not sent_within(store, key, timedelta(hours=24))
        store.add_alert(payload, key=key, delivery="posted")
        assert sent_within(store, key, timedelta(hours=24))
        assert not sent_within(store, key, timedelta(hours=24), now=datetime.now(UTC) + timedelta(days=2))


def test_a_new_event_is_said_again_the_same_one_is_not(world: dict[str, Path]) -> None:
    payload = {"event": "skillreach.gate.inconclusive", "skill": "beta", "metric": "activation"}
    key = alert_key(payload)
    day = timedelta(hours=24)
    with store_of(world) as store:
        store.add_alert({**payload, "trigger": "skillreach.skill.added (delta)"}, key=key, delivery="posted")
        assert sent_within(store, key, day, trigger="skillreach.skill.added (delta)")
        assert not sent_within(store, key, day, trigger="skillreach.skill.changed (delta)")
        assert not sent_within(store, key, day, trigger="")  # the nightly's own alert is its own
