"""Alerts that arrive, once: the verdict rules decide what is said, the outbox makes sure it arrives.

- **Said once per verdict** (:mod:`skillreach.service.verdicts`): an alert is said when its verdict
  opens, changes (worse, or another cause) or closes, and reminded at most once per
  ``alert_repeat_after``; anything else is stored as a ``repeat``. A muted key is stored as ``muted``.
- **The outbox** (:mod:`skillreach.store.alert_log`): what is said is stored *pending*, one send per
  webhook, before it is posted; it is *delivered* on a 2xx only. A try that fails is retried with a
  doubling backoff (``alert_delivery``) by the ``deliver-alerts`` deployment — a flow run scheduled at
  the next try, and its 15-minute schedule (so after a restart of the service too) —, and *failed*
  with its reason after the last. A webhook that has taken nothing for ``alert_delivery.failing_after``
  is said once on every other webhook and in the service log.
- In a tracked run each alert said is also a Prefect event: deployments listen to some (a baseline
  expired or missing starts ``rebaseline-all``). Events are triggers, never the delivery.

The webhook URLs come from the study's configuration (a secret field, never dumped) and are only passed
to the HTTP client; the store keeps each webhook's label and a digest of its URL, never the URL.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from skillreach.service.alerts import (
    ALERT_UNDELIVERED,
    GATE_BREACHED,
    notice_payload,
    slack_message,
    with_ui_link,
)
from skillreach.service.delivery import backoff, channel_of, post_many
from skillreach.service.verdicts import CLOSING_FAMILIES, Seen, closing_message, decide, finding_of
from skillreach.store import (
    Claim,
    Store,
    alert_key,
    claim_due,
    delivery_counts,
    drop_channels,
    failing_channels,
    muted_by,
    next_due,
    open_once,
    open_verdicts,
    queue_alert,
    record_try,
    save_verdict,
    verdict_of,
)
from skillreach.study import StudyConfig
from skillreach.tasks._context import api_url, in_prefect_run, logger, store_for

if TYPE_CHECKING:
    from skillreach.store import AlertVerdictRow
    from skillreach.tasks.baselines import GateOutcome

__all__ = [
    "ALERT_DEPLOYMENT",
    "deliver_alerts",
    "deliver_pending",
    "file_run_ended",
    "repeat_window",
    "schedule_retry",
]

ALERT_DEPLOYMENT = "deliver-alerts/deliver-alerts"
"""The outbox's deployment (prefect.yaml): retries what a webhook did not take."""
NIGHTLY_KINDS = frozenset({"compliance"})
"""Study kinds whose breach ends their (nightly) run ``Breached``: the breach message says so."""


def _now() -> datetime:
    return datetime.now(UTC)


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
    """How long a said verdict stays quiet: ``alert_repeat_after`` less a twelfth, so the next night's
    reminder of a nightly that started a few minutes earlier by the clock is sent, not a repeat."""
    from skillreach.settings import parse_duration

    full = parse_duration(config.alert_repeat_after)
    return full - full / 12


def _claim_for(config: StudyConfig) -> timedelta:
    """How long a poster holds a send it claimed: past the post's deadline, with room for a slow store."""
    return timedelta(seconds=2 * config.alert_delivery.timeout_s + 30)


def _channels(config: StudyConfig) -> dict[str, str]:
    """Each configured webhook by the name its sends are stored under."""
    return {channel_of(u): u for u in config.webhook_urls()}


def _seen(row: AlertVerdictRow | None) -> Seen | None:
    if row is None:
        return None
    return Seen(open=row.state == "open", severity=row.severity, cause=row.cause, delta=row.delta,
                opened_at=_aware(row.opened_at), said_at=_aware(row.said_at) if row.said_at else None)


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


# ------------------------------------------------------------------------------------------- posting


async def _post(store: Store, claims: list[Claim], channels: dict[str, str],
                config: StudyConfig) -> dict[int, str]:
    """Post each claimed send and record what came of it; returns each alert's delivery after it."""
    claims = [c for c in claims if c.channel in channels]
    if not claims:
        return {}
    bodies = {c.alert_id: slack_message(c.payload) for c in claims}
    results = await post_many([(channels[c.channel], bodies[c.alert_id]) for c in claims],
                              timeout_s=config.alert_delivery.timeout_s)
    tries = config.alert_delivery.tries
    first, longest, _ = config.alert_delivery.waits()
    states: dict[int, str] = {}
    for claim, got in zip(claims, results, strict=True):
        now = _now()
        again = not got.ok and got.retry and claim.attempt < tries
        retry_at = now + backoff(claim.attempt, first, longest) if again else None
        reason = f"{got.error} from {got.target}" if not got.ok else None
        state, states[claim.alert_id] = record_try(store, claim, ok=got.ok, error=reason, retry_at=retry_at,
                                                   now=now)
        key = alert_key(claim.payload)
        if state == "failed":
            logger().error("alert %s to %s failed after %d tr%s: %s", key, got.target, claim.attempt,
                           "y" if claim.attempt == 1 else "ies", got.error)
        elif state == "pending" and retry_at is not None:
            logger().warning("alert %s to %s not delivered (%s); try %d of %d at %s", key, got.target,
                             got.error, claim.attempt + 1, tries, retry_at.strftime("%H:%M:%S UTC"))
    return states


# -------------------------------------------------------------------------------------------- saying


def _say(store: Store, payload: dict[str, Any], *, channels: dict[str, str], config: StudyConfig,
         study_id: str | None, claim: bool, tracked: bool) -> tuple[str, list[Claim]]:
    """File one alert by its verdict's rules: ``repeat`` or ``muted`` (stored only), else queued in the
    outbox (``pending``, or ``none`` without a webhook) with its claims when ``claim`` (the caller posts
    them now)."""
    now = _now()
    finding = finding_of(payload)
    seen = _seen(verdict_of(store, finding.key))
    key = alert_key(payload)
    if muted_by(store, key) is not None:
        store.add_alert(payload, study_id=study_id, key=key, delivery="muted")
        if seen is None or not seen.open:  # open, never said: said once the mute ends
            save_verdict(store, finding.key, state="open", severity=finding.severity, cause=finding.cause,
                         delta=finding.delta, opened_at=now, said_at=None, closed_at=None)
        return "muted", []
    change, note = decide(seen, finding, now, repeat_window(config))
    if change is None:
        store.add_alert(payload, study_id=study_id, key=key, delivery="repeat")
        return "repeat", []
    said = {**payload, "change": change, "notes": [*(payload.get("notes") or []), *([note] if note else [])]}
    row, claims = queue_alert(store, said, key=key, channels=list(channels), study_id=study_id,
                              claim_for=_claim_for(config) if claim else None, now=now)
    still = seen is not None and seen.open and change != "opened"
    save_verdict(store, finding.key, state="open",
                 severity=max(finding.severity, seen.severity) if still and seen else finding.severity,
                 cause=finding.cause, delta=finding.delta,
                 opened_at=seen.opened_at if still and seen else now, said_at=now, closed_at=None,
                 alert_id=row.id)
    if tracked:
        _emit(said)
    return row.delivery, claims


def _closed(store: Store, outcome: GateOutcome | None, config: StudyConfig, study_id: str,
            link: str) -> list[dict[str, Any]]:
    """Close the open verdicts this study's gate passes; the messages of the gate verdicts that were said.
    Notices (no queries, a missing baseline) close silently when the skill's status moved on."""
    if outcome is None or config.drift or outcome.not_compared:
        return []
    now = _now()
    ok = {(str(r["skill"]), str(r["metric"])) for r in outcome.rows if str(r.get("verdict")) == "ok"}
    compared = {"ok", "inconclusive", "breach", "drift"}
    out = []
    for row in open_verdicts(store):
        family, _, rest = row.key.partition(":")
        skill, _, metric = rest.partition(":")
        if family in CLOSING_FAMILIES:
            metrics = [m.strip() for m in metric.split(",") if m.strip()]
            if not metrics or not all((skill, m) in ok for m in metrics):
                continue
        elif family == "skill.no_queries":
            if outcome.statuses.get(skill, "no queries") == "no queries":
                continue
        elif family == "baseline.expired":
            found = outcome.statuses.values() if skill == "*" else [outcome.statuses.get(skill, "")]
            if not any(s in compared for s in found) and not (config.record_baselines and skill in
                                                                 outcome.statuses):
                continue
        else:
            continue
        save_verdict(store, row.key, state="closed", closed_at=now)
        if family == "gate" and row.said_at is not None:
            out.append(closing_message(row.key, _seen(row) or Seen(True, 1, None, None, now, None),
                                       run_link=link, study_id=study_id))
    return out


def _folded(payload: dict[str, Any], kind: str, tracked: bool) -> dict[str, Any]:
    """A nightly's breach says that its run ends ``Breached``: no ``run.failed`` message of its own."""
    if tracked and kind in NIGHTLY_KINDS and payload.get("event", GATE_BREACHED) == GATE_BREACHED:
        return {**payload, "notes": [*(payload.get("notes") or []), "the nightly run ends Breached"]}
    return payload


async def schedule_retry(when: datetime | str | None) -> str | None:
    """A run of the ``deliver-alerts`` deployment at ``when`` (the next try that is due; a datetime or
    its ISO text), scheduled on the Prefect server — one per 10-second slot, however many callers ask.
    ``None`` when there is nothing to retry, no server, or no such deployment (the deployment's own
    schedule retries then)."""
    if when is None or not (in_prefect_run() and api_url()):
        return None
    if isinstance(when, str):
        when = datetime.fromisoformat(when)
    from prefect.deployments.flow_runs import arun_deployment

    soon = max(when, _now() + timedelta(seconds=1))
    at = datetime.fromtimestamp(-(-soon.timestamp() // 10) * 10, UTC)  # 10-second slots: one run for many
    try:
        run = await arun_deployment(ALERT_DEPLOYMENT, scheduled_time=at, timeout=0, as_subflow=False,
                                   idempotency_key=f"alerts-retry-{at:%Y%m%dT%H%M%S}")
    except Exception as exc:  # a plain server without our deployments: its schedule, or the next alert
        logger().info("alert retry not scheduled (%s); pending alerts wait for the next deliver-alerts run",
                      type(exc).__name__)
        return None
    return str(run.id)


@task(name="deliver_alerts", cache_policy=NO_CACHE)
async def deliver_alerts(config: StudyConfig, study_id: str, breaches: list[dict[str, Any]],
                         outcome: GateOutcome | None = None, kind: str = "study") -> list[str]:
    """File one alert per payload by its verdict's rules, close the verdicts the gate (``outcome``) now
    passes, post what is said at once; returns each payload's delivery (``delivered``, ``pending`` —
    retried —, ``failed``, ``none`` — no webhook —, or ``repeat``/``muted``: stored, not sent)."""
    channels = _channels(config)
    tracked = in_prefect_run() and api_url() is not None
    out: list[str] = []
    rows: list[int | None] = []
    claims: list[Claim] = []
    with store_for(config) as store:
        for raw in breaches:
            linked = with_ui_link(raw, config.ui_url)
            payload = _folded({**linked, "trigger": config.reason}, kind, tracked)
            delivery, mine = _say(store, payload, channels=channels, config=config, study_id=study_id,
                                  claim=True, tracked=tracked)
            out.append(delivery)
            rows.append(mine[0].alert_id if mine else None)
            claims += mine
        link = next((str(b.get("run_link")) for b in breaches if b.get("run_link")), "")
        for payload in _closed(store, outcome, config, study_id, link or "skillreach alerts list"):
            _row, mine = queue_alert(store, payload, key=alert_key(payload), channels=list(channels),
                                     study_id=study_id, claim_for=_claim_for(config))
            claims += mine
            logger().info("verdict closed: %s", payload.get("closes"))
        states = await _post(store, claims, channels, config)
        due = next_due(store)
    out = [states.get(r, d) if r is not None else d for r, d in zip(rows, out, strict=True)]
    await schedule_retry(due)
    if breaches:
        said = [f"{p.get('event') or GATE_BREACHED} {p.get('skill')}: {d}" for p, d in zip(breaches, out,
                                                                                         strict=True)]
        logger().warning("alerts: %s", ", ".join(said))  # a live verdict or an expiry is no gate breach
    return out


# ------------------------------------------------------------------------------------- the outbox run


def _failing(store: Store, channels: dict[str, str], config: StudyConfig) -> list[Claim]:
    """A webhook failing past ``failing_after`` is said once, on every other webhook and in the log; one
    that took an alert again is said to have recovered, in the log."""
    now = _now()
    _first, _longest, after = config.alert_delivery.waits()
    failing = {f.channel: f for f in failing_channels(store, since_before=now - after)}
    claims: list[Claim] = []
    for f in failing.values():
        key = f"delivery:{f.channel}"
        known = verdict_of(store, key)
        if known is not None and known.state == "open":
            continue
        if not open_once(store, key, severity=1, said_at=now, opened_at=now):
            continue  # another pass opened it at the same moment: it says it
        label = f.channel.split("#", 1)[0]
        message = (f"alerts to {label} not delivered since {f.since:%Y-%m-%d %H:%M} UTC ({f.pending} "
                   f"waiting; last: {f.last_error}); they are retried, then marked failed "
                   "(skillreach alerts list)")
        logger().error("alert delivery failing: %s", message)  # the one line in the service log
        payload = notice_payload(ALERT_UNDELIVERED, skill=label, metric="delivery", message=message,
                                 run_link="skillreach alerts list")
        others = [c for c in channels if c != f.channel]
        alert, mine = queue_alert(store, payload, key=alert_key(payload), channels=others,
                                  claim_for=_claim_for(config), now=now)
        save_verdict(store, key, alert_id=alert.id)
        claims += mine
    for verdict in open_verdicts(store, "delivery:"):
        channel = verdict.key.removeprefix("delivery:")
        if channel not in failing:
            save_verdict(store, verdict.key, state="closed", closed_at=now)
            logger().warning("alert delivery to %s recovered", channel.split("#", 1)[0])
    return claims


@task(name="deliver_pending", cache_policy=NO_CACHE)
async def deliver_pending(config: StudyConfig) -> dict[str, Any]:
    """One pass of the outbox: post every pending send whose next try is due, say a webhook that keeps
    failing, and report what is left (``next_try``: when the next send is due)."""
    channels = _channels(config)
    with store_for(config) as store:
        dropped = drop_channels(store, channels)
        claims = claim_due(store, claim_for=_claim_for(config))
        states = await _post(store, claims, channels, config)
        notices = _failing(store, channels, config)
        await _post(store, notices, channels, config)
        due = next_due(store)
        counts = delivery_counts(store)
    delivered = sum(1 for s in states.values() if s == "delivered")
    if claims or dropped:
        logger().info("alert outbox: %d tried, %d alert(s) delivered; %d pending, %d failed", len(claims),
                      delivered, counts["pending"], counts["failed"])
    return {"tried": len(claims), "delivered": delivered, "dropped": dropped, "failing": len(notices),
            **counts, "next_try": due.isoformat() if due else None}


@task(name="file_run_ended", cache_policy=NO_CACHE)
async def file_run_ended(config: StudyConfig, flow_run_id: str) -> str:
    """A skillreach deployment run that ended ``Crashed`` or ``Failed``: one alert in the outbox (due at
    once). A nightly that ended ``Breached`` is said by its breach message instead (``folded``)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    from skillreach._io.redact import redact_text

    run_id = flow_run_id.rsplit(".", 1)[-1]
    try:
        async with get_client() as client:
            run = await client.read_flow_run(UUID(run_id))
            deployment = await client.read_deployment(run.deployment_id) if run.deployment_id else None
            flow = await client.read_flow(run.flow_id)
    except Exception as exc:  # a run that is gone, a bad id: said in the log, nothing to file
        logger().warning("run %s not read (%s): no alert filed", run_id, type(exc).__name__)
        return "unreadable"
    state = run.state
    kind = state.type.value.lower() if state is not None else ""
    if state is None or kind not in ("crashed", "failed"):
        return "not ended badly"
    if state.name == "Breached":
        return "folded"  # its breach message says the run ends Breached
    if deployment is None or deployment.name == ALERT_DEPLOYMENT.split("/", 1)[1]:
        return "not a service run"
    ui = get_current_settings().ui_url
    link = f"{str(ui).rstrip('/')}/runs/flow-run/{run.id}" if ui else f"flow run {run.id}"
    why = f": {redact_text(state.message)[:300]}" if state.message else ""
    payload = {"event": f"skillreach.run.{kind}", "skill": f"{flow.name}/{deployment.name}",
               "metric": run.name, "instance": str(run.id), "run_link": link,
               "message": f"{flow.name}/{deployment.name} run {run.name} ended {state.name}{why}"}
    with store_for(config) as store:
        delivery, _ = _say(store, payload, channels=_channels(config), config=config, study_id=None,
                           claim=False, tracked=False)
    return delivery
