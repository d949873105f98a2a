"""Automations cannot be declared in prefect.yaml: they are upserted here, idempotently (delete every
automation of the name, then create it).

``skillreach-gate-breach-alert``: on each ``skillreach.gate.breached`` event, send a Slack-compatible
message (``{"text": ...}``) to every webhook of ``SKILLREACH_ALERT_WEBHOOKS``. Each webhook is a Prefect
*Custom Webhook* notification block whose URL lives only in the block's secret values (read from the
environment at upsert time), so it is neither shown nor logged.

``skillreach-run-ended-badly``: a flow run of a skillreach deployment (tag ``skillreach``) that ends in a
state of *type* ``CRASHED`` or ``FAILED``, whatever the state's name, is said to the same webhooks, once
per run; its link is the run's UI page (``PREFECT_UI_URL``). Prefect names a state event after the
state's *name* (a breached nightly ends ``Failed`` named ``Breached``: ``prefect.flow-run.Breached``), so
the trigger expects any flow-run event and matches the event resource's ``prefect.state-type`` label.

``skillreach-crash-zombie-runs``: Prefect's documented answer to "zombie" runs. Flow runs of deployments
send ``prefect.flow-run.heartbeat`` events (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``, set by ``skillreach
serve``); a run whose heartbeats stop for ``ZOMBIE_AFTER_HEARTBEATS`` periods without a terminal state
is marked ``Crashed`` (which then alerts, above). Any state event of the run ends the wait, whatever the
state's name (``prefect.flow-run.Breached`` included), so a run that ended is never marked again.
Created whether or not webhooks are configured.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from skillreach.live.verdict import LIVE_VERDICT
from skillreach.service.alerts import (
    BASELINE_EXPIRED,
    GATE_BREACHED,
    GATE_INCONCLUSIVE,
    MODEL_DRIFT,
    NO_QUERIES,
    parse_webhooks,
)
from skillreach.service.watch import BASELINE_CARRIED, SKILL_GONE

__all__ = [
    "ALERT_AUTOMATION",
    "ALERT_BODY",
    "ALERT_SUBJECT",
    "BAD_STATE_TYPES",
    "HEARTBEAT_S",
    "RUN_ALERT_AUTOMATION",
    "ZOMBIE_AUTOMATION",
    "alert_automation",
    "run_alert_automation",
    "upsert_automations",
    "webhook_block_name",
    "zombie_automation",
]

ALERT_AUTOMATION = "skillreach-gate-breach-alert"

ALERT_EVENTS = frozenset({GATE_BREACHED, GATE_INCONCLUSIVE, MODEL_DRIFT, BASELINE_EXPIRED, NO_QUERIES,
                          LIVE_VERDICT, SKILL_GONE, BASELINE_CARRIED})
"""Every event a person must hear of: a breached gate, an undecided drop kept as a candidate, a drifted
metric, an expired or missing baseline, a skill without queries, a live drop's verdict."""

ALERT_SUBJECT = (
    "skillreach {{ event.event }}: {{ event.payload.skill }} {{ event.payload.metric }}"
)
# Same wording as skillreach.service.alerts.slack_message's "text", rendered by Prefect from the event.
ALERT_BODY = (
    "{% set step = '; next: ' ~ event.payload.next_step if event.payload.next_step else '' %}"
    "{% if event.payload.message %}skillreach {{ event.event }}: {{ event.payload.skill }}: "
    "{{ event.payload.message }}{{ step }} — {{ event.payload.run_link }}{% else %}"
    "skillreach {{ 'drift' if event.event == 'skillreach.model.drift' else 'gate ' ~ event.payload.verdict }}"
    ": "
    "{{ event.payload.skill }} {{ event.payload.metric }} "
    "changed {{ '%+.3f'|format(event.payload.delta) }} "
    "(95% CI {{ '%+.3f'|format(event.payload.interval[0]) }} "
    "to {{ '%+.3f'|format(event.payload.interval[1]) }}; "
    "gate {{ '%+.3f'|format(event.payload.gate) if event.payload.gate is not none else 'n/a' }}) "
    "against baseline {{ event.payload.baseline_id }}"
    "{% if event.payload.cause_detail %}; {{ event.payload.cause_detail }}{% endif %}{{ step }}"
    " — {{ event.payload.run_link }}{% endif %}"
)


RUN_ALERT_AUTOMATION = "skillreach-run-ended-badly"
ZOMBIE_AUTOMATION = "skillreach-crash-zombie-runs"
HEARTBEAT_S = 30
"""The flow-run heartbeat period ``skillreach serve`` sets (Prefect's minimum)."""
ZOMBIE_AFTER_HEARTBEATS = 3
FLOW_RUN_EVENTS = "prefect.flow-run.*"
"""Every event of a flow run: its heartbeats and its state changes, each named after the state's name."""
BAD_STATE_TYPES = ("CRASHED", "FAILED")
"""The state types of a run that ended badly (``prefect.state-type`` on the state event's resource)."""
RUN_ALERT_SUBJECT = "skillreach {{ deployment.name }}: run {{ flow_run.name }} {{ flow_run.state.name }}"
RUN_ALERT_BODY = (
    "skillreach skillreach.run.{{ flow_run.state.type.value|lower }}: {{ flow.name }}/{{ deployment.name }} "
    "run {{ flow_run.name }} ended {{ flow_run.state.name }}"
    "{% if flow_run.state.message %}: {{ flow_run.state.message[:300] }}{% endif %}"
    " — {{ flow_run|ui_url or 'flow run ' ~ flow_run.id }}"
)


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


def run_alert_automation(block_ids: list[Any]) -> Any:
    """A run of a skillreach deployment that ended in a CRASHED or FAILED state (any name), said once to
    every webhook."""
    from prefect.automations import Automation
    from prefect.events.actions import SendNotification
    from prefect.events.schemas.automations import EventTrigger, Posture

    return Automation(
        name=RUN_ALERT_AUTOMATION,
        description="Say a Crashed or Failed run of a skillreach deployment to SKILLREACH_ALERT_WEBHOOKS.",
        trigger=EventTrigger(
            expect={FLOW_RUN_EVENTS},
            match={"prefect.resource.id": "prefect.flow-run.*", "prefect.state-type": list(BAD_STATE_TYPES)},
            # deployment runs only (a study subflow has no deployment): one alert per failed night
            match_related=[{"prefect.resource.role": "tag", "prefect.resource.id": "prefect.tag.skillreach"},
                           {"prefect.resource.role": "deployment"}],
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[SendNotification(block_document_id=b, subject=RUN_ALERT_SUBJECT, body=RUN_ALERT_BODY)
                 for b in block_ids],
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
    """Create (or re-create) the automations on the configured Prefect server: the zombie-run one
    always, the alert ones (gate breaches, runs that ended badly) when there are webhooks.

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
        await _delete_by_name(client, RUN_ALERT_AUTOMATION)
        await _delete_by_name(client, ZOMBIE_AUTOMATION)
        zombie = await _create(client, zombie_automation())
        if not urls:
            return {"automation": None, "webhooks": 0, "removed": removed, "zombie": zombie}
        block_ids = await _save_webhook_blocks(urls)
        automation_id = await _create(client, alert_automation(block_ids))
        run_alert = await _create(client, run_alert_automation(block_ids))
    return {"automation": automation_id, "run_alert": run_alert, "webhooks": len(urls), "removed": removed,
            "zombie": zombie}


async def _create(client: Any, automation: Any) -> str:
    from prefect.events.schemas.automations import AutomationCore

    core = AutomationCore(**automation.model_dump(exclude={"id"}))
    return str(await client.create_automation(core))
