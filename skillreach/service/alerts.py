"""Alerts: the payload (pure), the Slack-compatible message (pure), and a direct post.

A breach becomes one ``skillreach.gate.breached`` payload naming the skill, the metric, the paired
delta with its 95 % interval, the baseline it was measured against and a link to the run. The service
stores it in its outbox and posts it to the webhooks (``tasks/alerts.py``; retried until a 2xx, see
:mod:`skillreach.service.delivery`); in a tracked run it is also a Prefect event, which deployments
listen to. :func:`send_alert` posts a message directly, once.

Every piece of text in a message that came from outside (skill names come from transcripts and
catalogs, messages quote SKILL.md paths) is escaped as Slack's mrkdwn asks (``&``, ``<``, ``>``): a
skill named ``<!channel>`` pings nobody. Webhook URLs carry tokens: they are never part of a payload,
a log line, a message or the database. Deliveries are reported by :func:`webhook_label` (scheme and
host only).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillreach._io.console import strip_control
from skillreach.errors import ConfigError
from skillreach.service.delivery import Delivery, post_many, run_sync, webhook_label

__all__ = [
    "ALERT_UNDELIVERED",
    "BASELINE_EXPIRED",
    "GATE_BREACHED",
    "GATE_INCONCLUSIVE",
    "MODEL_DRIFT",
    "NO_QUERIES",
    "RUN_ENDED",
    "VERDICT_CLOSED",
    "Delivery",
    "breach_payload",
    "breaches_from_comparison",
    "notice_payload",
    "parse_webhooks",
    "send_alert",
    "slack_escape",
    "slack_message",
    "webhook_label",
    "with_ui_link",
]

GATE_BREACHED = "skillreach.gate.breached"
GATE_INCONCLUSIVE = "skillreach.gate.inconclusive"
"""A re-baselining's drop past the gate that the interval leaves undecided: kept as a candidate."""
MODEL_DRIFT = "skillreach.model.drift"
BASELINE_EXPIRED = "skillreach.baseline.expired"
NO_QUERIES = "skillreach.skill.no_queries"
VERDICT_CLOSED = "skillreach.verdict.closed"
"""An open verdict (a breach, an undecided drop) that the gate now passes: said once."""
ALERT_UNDELIVERED = "skillreach.alert.undelivered"
"""A webhook that took nothing for ``alert_delivery.failing_after``: said on every other webhook."""
RUN_ENDED = "skillreach.run."
"""``skillreach.run.crashed`` / ``skillreach.run.failed``: a deployment run that ended badly (a
breached nightly's ``Breached`` end is said in its breach message, not apart)."""


def _num(x: Any) -> float | None:
    if x is None:
        return None
    v = float(x)
    return None if math.isnan(v) else round(v, 6)


def breach_payload(
    *,
    skill: str,
    metric: str,
    delta: float,
    interval: Sequence[float] | None,
    baseline_id: str,
    run_link: str,
    gate: float | None = None,
    verdict: str = "breach",
    study_id: str | None = None,
    runtime: str | None = None,
    model: str | None = None,
    event: str = GATE_BREACHED,
) -> dict[str, Any]:
    """The one payload of a ``skillreach.gate.breached`` (or ``skillreach.model.drift``) event
    (JSON-able, no secret)."""
    lo, hi = (interval[0], interval[1]) if interval is not None else (delta, delta)
    return {
        "event": event,
        "skill": skill,
        "metric": metric,
        "delta": _num(delta),
        "interval": [_num(lo), _num(hi)],
        "gate": _num(gate),
        "verdict": verdict,
        "baseline_id": baseline_id,
        "run_link": run_link,
        "study_id": study_id,
        "runtime": runtime,
        "model": model,
    }


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def breaches_from_comparison(
    comparison: Any,
    *,
    baseline_id: str,
    run_link: str,
    study_id: str | None = None,
    runtime: str | None = None,
    model: str | None = None,
    strict: bool = False,
    event: str = GATE_BREACHED,
) -> list[dict[str, Any]]:
    """One payload per breached gate of a :func:`skillreach.baselines.gates.compare` result.

    Reads ``comparison.skill`` and ``comparison.results`` (each with metric, ``mean_diff`` or delta,
    ``ci95`` or interval, gate, verdict), attributes or mapping keys alike; ``inconclusive`` counts only
    when ``strict``.
    """
    skill = str(_get(comparison, "skill", ""))
    results = _get(comparison, "results", None) or _get(comparison, "metrics", None) or []
    if isinstance(results, Mapping):
        results = [{"metric": k, **(v if isinstance(v, Mapping) else v.__dict__)} for k, v in results.items()]
    out = []
    for r in results:
        verdict = str(_get(r, "verdict", _get(r, "status", "")))
        verdict = getattr(verdict, "value", verdict)
        if verdict != "breach" and not (strict and verdict == "inconclusive"):
            continue
        interval = _get(r, "interval", None) or _get(r, "ci95", None) or _get(r, "ci", None)
        out.append(
            breach_payload(
                skill=skill,
                metric=str(_get(r, "metric", _get(r, "name", ""))),
                delta=float(_first(_get(r, "delta"), _get(r, "mean_diff"), 0.0)),
                interval=list(interval) if interval is not None else None,
                baseline_id=baseline_id,
                run_link=run_link,
                gate=_get(r, "gate", None),
                verdict=verdict,
                study_id=study_id,
                runtime=runtime,
                model=model,
                event=event,
            )
        )
    return out


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def notice_payload(event: str, *, skill: str, message: str, run_link: str, study_id: str | None = None,
                   baseline_id: str | None = None, **extra: Any) -> dict[str, Any]:
    """The payload of an event that is not a metric's breach (an expired or missing baseline, a skill
    with no queries): what a person needs to act, in ``message``."""
    return {"event": event, "skill": skill, "metric": extra.pop("metric", "baseline"), "message": message,
            "baseline_id": baseline_id, "run_link": run_link, "study_id": study_id, **extra}


def slack_escape(text: Any) -> str:
    """``text`` as Slack's mrkdwn must receive it: control characters removed, ``&``, ``<`` and ``>``
    escaped (so ``<!channel>``, ``<@U123>`` and ``<url|text>`` are shown, never acted on)."""
    clean = strip_control(str(text))
    return clean.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _notes(payload: Mapping[str, Any]) -> str:
    """``; reminder: open since …`` — what the payload says about its verdict's history and its run."""
    notes = [str(n) for n in payload.get("notes") or () if n]
    return "".join(f"; {n}" for n in notes)


def with_ui_link(payload: Mapping[str, Any], ui_url: str | None) -> dict[str, Any]:
    """The payload with ``ui_url``: the dashboard's page of its skill (``skillreach ui``; the setting
    ``ui_url`` says where people open it), or its first page for an alert about every skill."""
    if not ui_url:
        return dict(payload)
    from urllib.parse import quote

    skill = payload.get("skill")
    page = f"/skills/{quote(str(skill), safe='')}" if skill and skill != "*" else "/"
    return {**payload, "ui_url": ui_url.rstrip("/") + page}


def slack_message(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A Slack-compatible webhook body (``text`` for any Slack-like receiver, plus blocks). The line
    names the cause when the payload carries one (``cause_detail``: ``lost 4 of 4 cases to delta``), the
    next step (``next_step``), the dashboard's page (``ui_url``) and the verdict's history (``notes``: a
    reminder, what changed). Every value is escaped (:func:`slack_escape`)."""
    p = {k: slack_escape(v) if isinstance(v, str) else v for k, v in payload.items()}
    step = f"; next: {p['next_step']}" if p.get("next_step") else ""
    step += f"; dashboard: {p['ui_url']}" if p.get("ui_url") else ""
    notes = slack_escape(_notes(payload))
    link = p.get("run_link", "")
    if str(payload.get("event", "")).startswith(RUN_ENDED) and "message" in p:
        text = f"skillreach {p['event']}: {p['message']}{notes}"
        return {"text": f"{text} — {link}",
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f":boom: {text}"}}]}
    if "message" in p and "delta" not in p:
        text = f"skillreach {p.get('event', 'notice')}: {p['skill']}: {p['message']}{step}{notes}"
        icon = ":white_check_mark:" if payload.get("event") == VERDICT_CLOSED else ":warning:"
        return {"text": f"{text} — {link}",
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"{icon} {text}"}}]}
    lo, hi = (payload.get("interval") or [None, None])[:2]
    what = "drift" if payload.get("event") == MODEL_DRIFT else f"gate {p.get('verdict', 'breach')}"
    headline = (
        f"skillreach {what}: {p['skill']} {p['metric']} "
        f"changed {_fmt(payload.get('delta'))} (95% CI {_fmt(lo)} to {_fmt(hi)}; gate "
        f"{_fmt(payload.get('gate'))}) against baseline {p['baseline_id']}"
        + (f"; {p['cause_detail']}" if p.get("cause_detail") else "") + step + notes
    )
    cause = [f"*Cause*\n{p['cause_detail']}"] if p.get("cause_detail") else []
    fields = [
        *cause,
        f"*Skill*\n{p['skill']}",
        f"*Metric*\n{p['metric']}",
        f"*Delta*\n{_fmt(payload.get('delta'))} [{_fmt(lo)}, {_fmt(hi)}]",
        f"*Baseline*\n{p['baseline_id']}",
    ]
    return {
        "text": f"{headline} — {link}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f":rotating_light: {headline}"}},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"Run: {link}"}],
            },
        ],
    }


def parse_webhooks(value: str | Iterable[str] | None, *, setting: str = "alert_webhooks") -> list[str]:
    """``SKILLREACH_ALERT_WEBHOOKS``: a JSON list, or URLs separated by commas or whitespace.

    Each URL is checked here, when it is read (:func:`skillreach._io.urls.check_webhook`: http or
    https, a host, a port in 1–65535, no link-local or cloud metadata address); a bad one is a
    :class:`~skillreach.errors.ConfigError` naming ``setting`` and the webhook's place, never its path.
    """
    from skillreach._io.urls import check_webhook, url_label

    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:
            items = json.loads(text) if text.startswith("[") else text.replace(",", " ").split()
        except json.JSONDecodeError as exc:
            raise ConfigError(f'{setting}: not a JSON list of URLs ({exc.msg}); write ["https://…"]') from exc
        if not isinstance(items, list):
            raise ConfigError(f'{setting}: not a list of URLs; write ["https://…"]')
    else:
        items = list(value)
    urls = [str(u).strip() for u in items if str(u).strip()]
    for i, url in enumerate(urls, start=1):
        problem = check_webhook(url)
        if problem is not None:
            raise ConfigError(f"{setting}: webhook {i} of {len(urls)} ({url_label(url)}): {problem}")
    return urls


def send_alert(
    payload: Mapping[str, Any],
    urls: Sequence[str],
    *,
    timeout_s: float = 10.0,
    transport: Any = None,
) -> list[Delivery]:
    """POST the Slack-compatible message to every webhook, once; one :class:`Delivery` per URL (``ok``
    on a 2xx only), never raises. Each post has ``timeout_s`` for its whole exchange
    (:func:`skillreach.service.delivery.post_json`: the resolved address checked and connected to).

    A URL that cannot be posted to (refused by :func:`skillreach._io.urls.check_webhook`, or any error
    of the client, ``httpx.InvalidURL`` included) is that URL's failed delivery; the others are still
    sent. The service does not call this: it stores each alert first and retries what did not arrive
    (``tasks/alerts.py``).
    """
    try:
        body = slack_message(payload)
        return run_sync(lambda: post_many([(u, body) for u in urls], timeout_s=timeout_s,
                                          transport=transport))
    except Exception as exc:  # documented: never raises (a broken payload, a client error)
        logging.getLogger(__name__).warning("alerts not sent: %s", type(exc).__name__)
        return [Delivery(webhook_label(u), False, None, type(exc).__name__) for u in urls]
