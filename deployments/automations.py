"""Automations cannot be declared in prefect.yaml: they are upserted here, idempotently (delete every
automation of the name, then create it).

``skillreach-gate-breach-alert``: on each ``skillreach.gate.breached`` event, send a Slack-compatible
message (``{"text": ...}``) to every webhook of ``SKILLREACH_ALERT_WEBHOOKS``. Each webhook is a Prefect
*Custom Webhook* notification block whose URL lives only in the block's secret values (read from the
environment at upsert time), so it is neither shown nor logged.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from skillreach.alerts import BASELINE_EXPIRED, GATE_BREACHED, MODEL_DRIFT, NO_QUERIES, parse_webhooks

__all__ = [
    "ALERT_AUTOMATION",
    "ALERT_BODY",
    "ALERT_SUBJECT",
    "alert_automation",
    "upsert_automations",
    "webhook_block_name",
]

ALERT_AUTOMATION = "skillreach-gate-breach-alert"

ALERT_EVENTS = frozenset({GATE_BREACHED, MODEL_DRIFT, BASELINE_EXPIRED, NO_QUERIES})
"""Every event a person must hear of: a breached gate, a drifted metric, an expired or missing baseline,
a skill without queries."""

ALERT_SUBJECT = (
    "skillreach {{ event.event }}: {{ event.payload.skill }} {{ event.payload.metric }}"
)
# Same wording as skillreach.alerts.slack_message's "text", rendered by Prefect from the event.
ALERT_BODY = (
    "{% if event.payload.message %}skillreach {{ event.event }}: {{ event.payload.skill }}: "
    "{{ event.payload.message }} — {{ event.payload.run_link }}{% else %}"
    "skillreach {{ 'drift' if event.event == 'skillreach.model.drift' else 'gate ' ~ event.payload.verdict }}"
    ": "
    "{{ event.payload.skill }} {{ event.payload.metric }} "
    "changed {{ '%+.3f'|format(event.payload.delta) }} "
    "(95% CI {{ '%+.3f'|format(event.payload.interval[0]) }} "
    "to {{ '%+.3f'|format(event.payload.interval[1]) }}; "
    "gate {{ '%+.3f'|format(event.payload.gate) if event.payload.gate is not none else 'n/a' }}) "
    "against baseline {{ event.payload.baseline_id }} — {{ event.payload.run_link }}{% endif %}"
)


def webhook_block_name(i: int) -> str:
    return f"skillreach-alert-webhook-{i}"


def alert_automation(block_ids: list[Any]) -> Any:
    """The automation: a reactive trigger on every gate-breach event, one notification per webhook."""
    from prefect.automations import Automation
    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import EventTrigger, Posture

    return Automation(
        name=ALERT_AUTOMATION,
        description="Send each skillreach gate breach to the webhooks of SKILLREACH_ALERT_WEBHOOKS.",
        trigger=EventTrigger(
            expect=set(ALERT_EVENTS),
            match={"prefect.resource.id": "skillreach.skill.*"},
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[
            SendNotification(block_document_id=b, subject=ALERT_SUBJECT, body=ALERT_BODY) for b in block_ids
        ],
    )


async def _save_webhook_blocks(urls: list[str]) -> list[Any]:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    ids = []
    for i, url in enumerate(urls):
        block = CustomWebhookNotificationBlock(
            name=webhook_block_name(i),
            url="{{webhook_url}}",  # substituted from the secret values when a message is sent
            json_data={"text": "{{body}}"},  # Slack-compatible
            secrets={"webhook_url": url},
        )
        ids.append(await block.save(webhook_block_name(i), overwrite=True))
    return ids


async def _delete_by_name(client: Any, name: str) -> int:
    found = await client.read_automations_by_name(name)
    for automation in found:
        await client.delete_automation(automation.id)
    return len(found)


async def upsert_automations(webhooks: str | list[str] | None = None) -> dict[str, Any]:
    """Create (or re-create) the alert automation on the configured Prefect server.

    ``webhooks``: the URLs (default: ``SKILLREACH_ALERT_WEBHOOKS`` via the settings). With none there
    is nothing to send to: the automation is removed, and a CLI run posts nothing either.
    """
    from prefect.client.orchestration import get_client

    if webhooks is None:
        from skillreach.settings import load_settings

        urls = list(load_settings().alert_webhooks)
    else:
        urls = parse_webhooks(webhooks)
    async with get_client() as client:
        removed = await _delete_by_name(client, ALERT_AUTOMATION)
        if not urls:
            return {"automation": None, "webhooks": 0, "removed": removed}
        block_ids = await _save_webhook_blocks(urls)
        automation = alert_automation(block_ids)
        from prefect.events.schemas.automations import AutomationCore

        core = AutomationCore(**automation.model_dump(exclude={"id"}))
        automation_id = await client.create_automation(core)
    return {"automation": str(automation_id), "webhooks": len(urls), "removed": removed}
