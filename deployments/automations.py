"""The automations, upserted from Python, idempotently (delete every automation of the name, then create
it). Prefect can declare automations in a file (``prefect automation create --from-file`` takes YAML or
JSON; ``prefect.yaml``'s deployment triggers cover only automations that run a deployment), but not
these: each alert automation names the ids of the notification blocks it sends to, blocks made at
upsert time from ``SKILLREACH_ALERT_WEBHOOKS`` (their URLs kept in the blocks' secrets, never in a file
that would show them), and the CLI creates a second copy of an automation each time it runs where
``skillreach serve`` must replace its own. Python makes the blocks and the automations in one step.

``skillreach-crash-zombie-runs``: Prefect's documented answer to "zombie" runs. Flow runs of deployments
send ``prefect.flow-run.heartbeat`` events (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``, set by ``skillreach
serve``); a run whose heartbeats stop for ``ZOMBIE_AFTER_HEARTBEATS`` periods without a terminal state
is marked ``Crashed`` (which the ``deliver-alerts`` deployment then files as an alert). Any state event of
the run ends the wait, whatever the state's name (``prefect.flow-run.Breached`` included), so a run that
ended is never marked again.

Alerts are not sent by automations any more (issue 39): Prefect's notification actions send once and
forget — a webhook that was down lost the alert while the store said it was sent. Every alert goes
through the store's outbox instead (``tasks/alerts.py``: pending, delivered on a 2xx, retried by the
``deliver-alerts`` deployment). The automations of earlier versions (``skillreach-gate-breach-alert``,
``skillreach-run-ended-badly``) and their webhook blocks (which kept the webhook URLs in Prefect's
database) are removed on every upsert.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from skillreach.service.alerts import parse_webhooks

__all__ = [
    "ALERT_AUTOMATION",
    "HEARTBEAT_S",
    "RUN_ALERT_AUTOMATION",
    "ZOMBIE_AUTOMATION",
    "upsert_automations",
    "webhook_block_name",
    "zombie_automation",
]

ALERT_AUTOMATION = "skillreach-gate-breach-alert"
"""Removed: an automation of earlier versions that forwarded alert events to the webhooks."""
RUN_ALERT_AUTOMATION = "skillreach-run-ended-badly"
"""Removed: an automation of earlier versions that said a run that ended badly to the webhooks."""
ZOMBIE_AUTOMATION = "skillreach-crash-zombie-runs"
HEARTBEAT_S = 30
"""The flow-run heartbeat period ``skillreach serve`` sets (Prefect's minimum)."""
ZOMBIE_AFTER_HEARTBEATS = 3
FLOW_RUN_EVENTS = "prefect.flow-run.*"
"""Every event of a flow run: its heartbeats and its state changes, each named after the state's name."""


def heartbeat_s() -> int:
    """The heartbeat period flows send (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``), else :data:`HEARTBEAT_S`."""
    import os

    raw = os.environ.get("PREFECT_FLOWS_HEARTBEAT_FREQUENCY") or os.environ.get(
        "PREFECT_RUNNER_HEARTBEAT_FREQUENCY")
    return int(raw) if raw and raw.isdigit() else HEARTBEAT_S


def zombie_automation(heartbeat: int | None = None) -> Any:
    """Mark a flow run Crashed when its heartbeats stop (Prefect's "detect zombie flows")."""
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture

    period = heartbeat or heartbeat_s()
    return Automation(
        name=ZOMBIE_AUTOMATION,
        description=f"A flow run whose heartbeats stop for {ZOMBIE_AFTER_HEARTBEATS * period} s is Crashed.",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            # a heartbeat or any state change (terminal ones under whatever name) ends the wait
            expect={"prefect.flow-run.heartbeat", FLOW_RUN_EVENTS},
            match={"prefect.resource.id": ["prefect.flow-run.*"]},
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=ZOMBIE_AFTER_HEARTBEATS * period),
        ),
        actions=[ChangeFlowRunState(
            state=StateType.CRASHED,
            message=f"no heartbeat for {ZOMBIE_AFTER_HEARTBEATS * period} s: the flow process died "
                    "(re-run the deployment: the study resumes)",
        )],
    )


def webhook_block_name(i: int) -> str:
    return f"skillreach-alert-webhook-{i}"


async def _delete_webhook_blocks(client: Any) -> int:
    """The webhook blocks earlier versions saved (``skillreach-alert-webhook-N``: their URLs were kept in
    Prefect's database), deleted; returns how many."""
    gone = 0
    for i in range(100):
        try:
            block = await client.read_block_document_by_name(webhook_block_name(i), "custom-webhook")
        except Exception:  # ObjectNotFound: no more of them
            break
        await client.delete_block_document(block.id)
        gone += 1
    return gone


async def _delete_by_name(client: Any, name: str) -> int:
    found = await client.read_automations_by_name(name)
    for automation in found:
        await client.delete_automation(automation.id)
    return len(found)


async def upsert_automations(webhooks: str | list[str] | None = None) -> dict[str, Any]:
    """Create (or re-create) the zombie-run automation on the configured Prefect server, and remove what
    earlier versions installed to send alerts (automations and webhook blocks).

    ``webhooks``: the URLs (default: ``SKILLREACH_ALERT_WEBHOOKS`` via the settings), checked and
    counted: the ``deliver-alerts`` deployment posts to them, from the worker's environment.
    """
    from prefect.client.orchestration import get_client

    if webhooks is None:
        from skillreach.settings import load_settings

        urls = list(load_settings().alert_webhooks)
    else:
        urls = parse_webhooks(webhooks)
    async with get_client() as client:
        removed = await _delete_by_name(client, ALERT_AUTOMATION)
        removed += await _delete_by_name(client, RUN_ALERT_AUTOMATION)
        await _delete_by_name(client, ZOMBIE_AUTOMATION)
        blocks = await _delete_webhook_blocks(client)
        zombie = await _create(client, zombie_automation())
    return {"zombie": zombie, "webhooks": len(urls), "removed": removed, "webhook_blocks_removed": blocks,
            "alerts": "outbox (deliver-alerts deployment)"}


async def _create(client: Any, automation: Any) -> str:
    from prefect.events.schemas.automations import AutomationCore

    core = AutomationCore(**automation.model_dump(exclude={"id"}))
    return str(await client.create_automation(core))
