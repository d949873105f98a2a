"""What the deployments need beyond the study: alerts to webhooks (``alerts``) and the events that
start re-baselining when skills or pins change (``watch``).
"""

from __future__ import annotations

from skillreach.service.alerts import (
    BASELINE_EXPIRED,
    GATE_BREACHED,
    MODEL_DRIFT,
    NO_QUERIES,
    Delivery,
    breach_payload,
    breaches_from_comparison,
    notice_payload,
    parse_webhooks,
    send_alert,
    slack_message,
    webhook_label,
)
from skillreach.service.watch import (
    CORPUS_CHANGED,
    MODEL_SNAPSHOT_CHANGED,
    PIN_EVENTS,
    RUBRIC_CHANGED,
    RUNTIME_VERSION_CHANGED,
    SKILL_ADDED,
    SKILL_CHANGED,
    SKILL_REMOVED,
    CatalogDiff,
    ModelChange,
    WatchEvent,
    diff_catalog,
    diff_model,
    events_for,
    pin_events,
    pin_snapshot,
)

__all__ = [
    "BASELINE_EXPIRED",
    "CORPUS_CHANGED",
    "GATE_BREACHED",
    "MODEL_DRIFT",
    "MODEL_SNAPSHOT_CHANGED",
    "NO_QUERIES",
    "PIN_EVENTS",
    "RUBRIC_CHANGED",
    "RUNTIME_VERSION_CHANGED",
    "SKILL_ADDED",
    "SKILL_CHANGED",
    "SKILL_REMOVED",
    "CatalogDiff",
    "Delivery",
    "ModelChange",
    "WatchEvent",
    "breach_payload",
    "breaches_from_comparison",
    "diff_catalog",
    "diff_model",
    "events_for",
    "notice_payload",
    "parse_webhooks",
    "pin_events",
    "pin_snapshot",
    "send_alert",
    "slack_message",
    "webhook_label",
]
