"""Delivering gate-breach alerts: a Prefect event when a server with the alert automation is there,
else a direct post to the webhooks of ``SKILLREACH_ALERT_WEBHOOKS``. Every alert is stored, and in a
tracked run every alert is also an event (deployment triggers listen to some of them).

The webhook URLs come from the study's configuration (a secret field, never dumped) and are only passed
to the HTTP client; they never reach a log line, a payload, a flow parameter or the database.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.service.alerts import GATE_BREACHED, send_alert, with_ui_link
from skillreach.store import alert_key
from skillreach.study import StudyConfig
from skillreach.tasks._context import api_url, in_prefect_run, logger, store_for

__all__ = ["ALERT_AUTOMATION", "automation_exists", "deliver_alerts", "repeat_window"]

ALERT_AUTOMATION = "skillreach-gate-breach-alert"


async def automation_exists(name: str = ALERT_AUTOMATION) -> bool:
    """Is the alert automation installed on the Prefect server we talk to?"""
    from prefect.automations import Automation

    try:
        await Automation.aread(name=name)
    except Exception:  # not found, or no server: post directly instead
        return False
    return True


def _emit(payload: dict[str, Any]) -> bool:
    from prefect.events import emit_event

    ev = emit_event(
        str(payload.get("event") or GATE_BREACHED),
        resource={
            "prefect.resource.id": f"skillreach.skill.{payload['skill']}",
            "prefect.resource.name": str(payload["skill"]),
            "skillreach.metric": str(payload["metric"]),
        },
        payload=payload,
    )
    return ev is not None


def repeat_window(config: StudyConfig) -> timedelta:
    """How long a sent alert silences its repeats: ``alert_repeat_after`` less a twelfth, so the next
    night's alert of a nightly that started a few minutes earlier by the clock is sent, not a repeat."""
    from skillreach.settings import parse_duration

    full = parse_duration(config.alert_repeat_after)
    return full - full / 12


def _silenced(store: Any, key: str, window: timedelta, trigger: str) -> str | None:
    """``muted`` (a mute covers ``key``), ``repeat`` (sent within ``window`` for the same trigger: the
    same nightly breach, the same event's re-baselining again), else ``None``."""
    from skillreach.store import muted_by, sent_within

    if muted_by(store, key) is not None:
        return "muted"
    if window and sent_within(store, key, window, trigger=trigger):
        return "repeat"
    return None


@task(name="deliver_alerts", cache_policy=NO_CACHE)
async def deliver_alerts(config: StudyConfig, study_id: str, breaches: list[dict[str, Any]]) -> list[str]:
    """Store and deliver one alert per breach; returns each alert's delivery (event|posted|failed|none,
    or repeat|muted: the same alert — kind, skill, metric, cause — sent within ``alert_repeat_after``,
    or muted by ``skillreach alerts mute``: stored, not sent, no event)."""
    if not breaches:
        return []
    urls = config.webhook_urls()
    tracked = in_prefect_run() and api_url() is not None
    via_prefect = tracked and await automation_exists()
    out: list[str] = []
    window = repeat_window(config)
    with store_for(config) as store:
        for payload in [with_ui_link(p, config.ui_url) for p in breaches]:
            key = alert_key(payload)
            silenced = _silenced(store, key, window, config.reason)
            row = store.add_alert({**payload, "trigger": config.reason}, study_id=study_id, key=key,
                                  delivery=silenced or "pending")
            if silenced:  # stored (``skillreach alerts list`` shows it), neither sent nor an event
                logger().info("alert %s not sent: %s", key, silenced)
                out.append(silenced)
                continue
            # the event goes out in every tracked run: deployments listen to some (a baseline expired or
            # missing starts rebaseline-all) whether or not an automation forwards it to a person
            emitted = tracked and _emit(payload)
            if via_prefect and emitted:
                delivery, ok = "event", True
            elif urls:
                results = send_alert(payload, urls)
                ok = all(d.ok for d in results)
                delivery = "posted" if ok else "failed"
                for d in results:
                    if not d.ok:
                        logger().warning("alert to %s failed: %s", d.target, d.error)
            else:
                delivery, ok = "none", False
            store.mark_alert(row.id, delivery=delivery, delivered=ok)
            out.append(delivery)
    said = [
        f"{p.get('event') or GATE_BREACHED} {p.get('skill')}: {d}" for p, d in zip(breaches, out, strict=True)
    ]
    logger().warning("alerts: %s", ", ".join(said))  # a live verdict or an expiry is no gate breach
    return out
