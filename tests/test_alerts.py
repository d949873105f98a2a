"""Alert payloads, the Slack-compatible message, and direct posting to a local HTTP sink."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from skillreach.service.alerts import (
    GATE_BREACHED,
    breach_payload,
    breaches_from_comparison,
    parse_webhooks,
    send_alert,
    slack_message,
    webhook_label,
)
from tests.helpers.webhooks import WebhookSink


def _payload() -> dict[str, Any]:
    return breach_payload(skill="pdf", metric="activation", delta=-0.25, interval=(-0.4, -0.1),
                          baseline_id="pdf@2026-01-01", run_link="file:///runs/x/report.html", gate=-0.05)


def test_breach_payload_fields() -> None:
    p = _payload()
    assert p["event"] == GATE_BREACHED
    assert (p["skill"], p["metric"], p["delta"], p["interval"], p["baseline_id"], p["run_link"]) == (
        "pdf", "activation", -0.25, [-0.4, -0.1], "pdf@2026-01-01", "file:///runs/x/report.html")
    json.dumps(p)  # JSON-able


def test_breaches_from_a_comparison_keep_only_breaches() -> None:
    comparison = SimpleNamespace(skill="pdf", results=[
        SimpleNamespace(metric="activation", delta=-0.3, interval=(-0.5, -0.1), gate=-0.05, verdict="breach"),
        SimpleNamespace(metric="false_activation", delta=0.05, interval=(-0.01, 0.1), gate=0.03,
                        verdict="inconclusive"),
        SimpleNamespace(metric="compliance", delta=0.0, interval=(0.0, 0.0), gate=-0.05, verdict="ok"),
    ])
    got = breaches_from_comparison(comparison, baseline_id="pdf@d", run_link="L")
    assert [b["metric"] for b in got] == ["activation"]
    strict = breaches_from_comparison(comparison, baseline_id="pdf@d", run_link="L", strict=True)
    assert [b["metric"] for b in strict] == ["activation", "false_activation"]


def test_slack_message_is_slack_shaped() -> None:
    m = slack_message(_payload())
    assert "pdf" in m["text"]
    assert "activation" in m["text"]
    assert "-0.250" in m["text"]
    assert m["blocks"][0]["type"] == "section"


def test_parse_webhooks() -> None:
    assert parse_webhooks('["http://a/1", "http://b/2"]') == ["http://a/1", "http://b/2"]
    assert parse_webhooks("http://a/1, http://b/2") == ["http://a/1", "http://b/2"]
    assert parse_webhooks("") == []
    assert parse_webhooks(None) == []


def test_webhook_label_hides_the_token() -> None:
    assert webhook_label("https://hooks.slack.com/services/T0/B0/SECRET") == "https://hooks.slack.com/…"


def test_send_alert_posts_to_every_webhook_and_reports_failures(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    with WebhookSink() as ok, WebhookSink(status=500) as bad:
        urls = [f"{ok.base_url}/services/T000/B000/TOKEN123", f"{bad.base_url}/hook/TOKEN456",
                "http://127.0.0.1:1/closed/TOKEN789"]
        deliveries = send_alert(_payload(), urls, timeout_s=3)
    assert [d.ok for d in deliveries] == [True, False, False]
    assert deliveries[1].status == 500
    assert deliveries[2].error is not None
    assert ok.requests[0]["path"] == "/services/T000/B000/TOKEN123"
    assert ok.requests[0]["body"] == slack_message(_payload())
    shown = repr(deliveries) + caplog.text + json.dumps(ok.requests[0]["body"])
    for token in ("TOKEN123", "TOKEN456", "TOKEN789"):
        assert token not in shown
