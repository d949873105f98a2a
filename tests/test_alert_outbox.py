"""Alerts that arrive, once (issue 39), fast: the outbox's states through real receivers on 127.0.0.1
(down, then back on the same port; a 404; one of two webhooks failing), the claim that keeps two posters
from posting one try twice, and ``skillreach alerts list`` / ``status`` showing where each alert stands.
The verdict rules (one message per open verdict) are in ``tests/test_alert_verdicts.py``; the hostile
cases in ``tests/test_alert_hostile.py``; the service end to end in ``tests/test_operator_alerts.py``."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prefect.logging import disable_run_logger

from skillreach.cli import main
from skillreach.service.alerts import breach_payload
from skillreach.service.delivery import channel_of
from skillreach.store import Store, claim_due, queue_alert
from skillreach.study import StudyConfig
from tests.helpers.webhooks import WebhookSink


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _payload(skill: str = "pdf", delta: float = -0.5) -> dict[str, Any]:
    return breach_payload(skill=skill, metric="activation", delta=delta, interval=(-0.7, -0.3),
                          baseline_id=f"{skill}@1", run_link="file:///runs/x/report.html", gate=-0.05)


def _config(home: Path, urls: list[str], **delivery: Any) -> StudyConfig:
    return StudyConfig.build(None, home=home, alert_webhooks=urls,
                             alert_delivery={"first_retry": "1s", "longest_retry": "2s", **delivery})


def _run(task: Any, *args: Any) -> Any:
    with disable_run_logger():
        return asyncio.run(task.fn(*args))


def _store(home: Path) -> Store:
    return Store(f"sqlite:///{home / 'skillreach.db'}")


def _listed(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(["alerts", "list", *args]) == 0
    return capsys.readouterr().out


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("SKILLREACH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_an_alert_waits_pending_while_the_receiver_is_down_and_arrives_once_when_it_is_back(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillreach.tasks.alerts import deliver_alerts, deliver_pending

    port = _port()  # nothing listens yet: connection refused
    url = f"http://127.0.0.1:{port}/services/T0/B0/HOOKSECRET"
    config = _config(home, [url])
    assert _run(deliver_alerts, config, None, [_payload()]) == ["pending"]
    listed = _listed(capsys)
    assert re.search(r"gate\.breached:pdf:activation  pending \(try 2 at \d\d:\d\d UTC: ConnectError from "
                     rf"http://127\.0\.0\.1:{port}/…\)", listed), listed
    assert "HOOKSECRET" not in listed
    assert _run(deliver_pending, config)["tried"] == 0  # not due yet: the backoff holds
    time.sleep(1.2)
    with WebhookSink(port=port) as sink:
        first = _run(deliver_pending, config)
        again = _run(deliver_pending, config)
    assert (first["tried"], first["delivered"], first["pending"]) == (1, 1, 0)
    assert (again["tried"], again["delivered"]) == (0, 0)
    assert len(sink.requests) == 1  # exactly once
    text = sink.requests[0]["body"]["text"]
    assert text.startswith("skillreach gate breach: pdf activation changed -0.500")
    assert "gate.breached:pdf:activation  delivered" in _listed(capsys)
    with _store(home) as store:
        [alert] = store.alerts()
        assert (alert.delivery, alert.delivered) == ("delivered", True)
    db = b"".join(p.read_bytes() for p in home.glob("skillreach.db*"))
    assert b"HOOKSECRET" not in db


def test_after_the_last_try_an_alert_is_failed_with_its_reason_and_status_counts_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillreach.tasks.alerts import deliver_alerts, deliver_pending

    down = f"http://127.0.0.1:{_port()}/hook/A"
    with WebhookSink(status=404) as gone:
        refused = _config(home, [f"{gone.base_url}/hook/B"], tries=5)
        assert _run(deliver_alerts, refused, None, [_payload("docx")]) == ["failed"]  # a 404 is not retried
        assert len(gone.requests) == 1
    config = _config(home, [down], tries=2)
    assert _run(deliver_alerts, config, None, [_payload("pdf")]) == ["pending"]
    time.sleep(1.2)
    summary = _run(deliver_pending, config)
    assert (summary["tried"], summary["pending"], summary["next_try"]) == (1, 0, None)
    listed = _listed(capsys)
    assert "gate.breached:pdf:activation  failed (ConnectError from http://127.0.0.1:" in listed
    assert "after 2 tries)" in listed
    assert "gate.breached:docx:activation  failed (HTTP 404 from http://127.0.0.1:" in listed
    assert "after 1 try)" in listed
    assert "gate.breached:pdf:activation  failed" in _listed(capsys, "--state", "failed")
    capsys.readouterr()
    assert main(["status"]) == 0
    shown = capsys.readouterr().out
    assert "alerts undelivered: 0 pending (retried), 2 failed (skillreach alerts list)" in shown


def test_a_send_is_posted_by_one_claimer_only(home: Path) -> None:
    """Two processes passing over the outbox at once (the scheduled pass and a triggered one): each due
    try is claimed by one of them."""
    home.mkdir(parents=True)
    with _store(home) as store:
        for i in range(20):
            queue_alert(store, _payload(f"s{i}"), key=f"k{i}", channels=["a#1", "b#2"])
    got: list[int] = []
    lock = threading.Lock()

    def claim() -> None:
        with _store(home) as store:
            mine = claim_due(store, claim_for=timedelta(minutes=1))
        with lock:
            got.extend(c.send_id for c in mine)

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(set(got))  # no try claimed twice
    assert len(got) == 40
    with _store(home) as store:
        assert claim_due(store, claim_for=timedelta(minutes=1)) == []  # held until the claim ends
        later = datetime.now(UTC) + timedelta(minutes=2)
        assert len(claim_due(store, claim_for=timedelta(minutes=1), now=later)) == 40  # a dead claimer's


def test_a_webhook_failing_past_the_setting_is_said_once_on_the_others_and_in_the_log(
    home: Path, caplog: pytest.CaptureFixture[str]
) -> None:
    from skillreach.tasks.alerts import deliver_alerts, deliver_pending

    port = _port()
    down = f"http://127.0.0.1:{port}/hook/DOWN"
    caplog.set_level(logging.INFO, logger="skillreach")
    with WebhookSink() as other:
        config = _config(home, [down, f"{other.base_url}/hook/UP"], failing_after="1s", tries=10)
        assert _run(deliver_alerts, config, None, [_payload()]) == ["pending"]  # one of two took it
        assert len(other.requests) == 1
        time.sleep(1.2)
        _run(deliver_pending, config)
        time.sleep(1.2)
        _run(deliver_pending, config)  # still failing: not said again
        notices = [r["body"]["text"] for r in other.requests[1:]]
        assert len(notices) == 1, notices
        assert notices[0].startswith(f"skillreach skillreach.alert.undelivered: http://127.0.0.1:{port}/…: "
                                     "alerts to ")
        assert "not delivered since" in notices[0]
        assert "DOWN" not in notices[0]
        failing = [r for r in caplog.records if "alert delivery failing" in r.getMessage()]
        assert len(failing) == 1
        assert failing[0].levelno == logging.ERROR
        time.sleep(2.1)
        with WebhookSink(port=port) as back:
            summary = _run(deliver_pending, config)
        assert summary["delivered"] == 1
        assert summary["pending"] == 0
        assert len(back.requests) == 1  # the alert, never the notice about itself
        assert any("alert delivery to http://127.0.0.1" in r.getMessage() and "recovered" in r.getMessage()
                   for r in caplog.records)
        assert len(other.requests) == 2


def test_a_webhook_removed_from_the_configuration_fails_its_pending_alerts(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillreach.tasks.alerts import deliver_alerts, deliver_pending

    old = f"http://127.0.0.1:{_port()}/hook/OLD"
    assert _run(deliver_alerts, _config(home, [old]), None, [_payload()]) == ["pending"]
    with WebhookSink() as sink:
        summary = _run(deliver_pending, _config(home, [f"{sink.base_url}/hook/NEW"]))
    assert (summary["dropped"], summary["failed"], sink.requests) == (1, 1, [])
    assert "the webhook is no longer configured (SKILLREACH_ALERT_WEBHOOKS)" in _listed(capsys)


def test_no_webhook_stores_the_alert_as_not_sent(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from skillreach.tasks.alerts import deliver_alerts, deliver_pending

    config = _config(home, [])
    assert _run(deliver_alerts, config, None, [_payload()]) == ["none"]
    assert _run(deliver_pending, config)["tried"] == 0
    assert "gate.breached:pdf:activation  none" in _listed(capsys)


def test_the_channel_names_a_webhook_without_its_token() -> None:
    a = channel_of("https://hooks.slack.com/services/T0/B0/SECRET1")
    b = channel_of("https://hooks.slack.com/services/T0/B0/SECRET2")
    assert a != b
    assert a.startswith("https://hooks.slack.com/…#")
    assert "SECRET" not in a + b
    assert json.dumps(a)  # stored as text


def test_a_failing_webhook_is_opened_once_by_passes_that_find_it_together(home: Path) -> None:
    from skillreach.store import open_once, save_verdict

    home.mkdir(parents=True)
    opened: list[bool] = []
    lock = threading.Lock()

    def open_it() -> None:
        with _store(home) as store:
            got = open_once(store, "delivery:http://h/…#ab", severity=1)
        with lock:
            opened.append(got)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(opened) == [False, False, False, True]
    with _store(home) as store:
        save_verdict(store, "delivery:http://h/…#ab", state="closed")
        assert open_once(store, "delivery:http://h/…#ab", severity=1)  # after it closed: opened again
