"""Gate-breach alerts: the payload (pure), the Slack-compatible message (pure), and a direct post.

A breach becomes one ``skillreach.gate.breached`` event whose payload names the skill, the metric, the
paired delta with its 95 % interval, the baseline it was measured against and a link to the run.
With a Prefect server up, the event goes to Prefect and an automation (``deployments/automations.py``)
forwards it to the webhooks; a plain CLI run posts the same message directly with :func:`send_alert`.

Webhook URLs carry tokens: they are never part of a payload, a log line, a message or the database.
Deliveries are reported by :func:`webhook_label` (scheme and host only).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from skillreach.errors import ConfigError

__all__ = [
    "BASELINE_EXPIRED",
    "GATE_BREACHED",
    "GATE_INCONCLUSIVE",
    "MODEL_DRIFT",
    "NO_QUERIES",
    "Delivery",
    "breach_payload",
    "breaches_from_comparison",
    "notice_payload",
    "parse_webhooks",
    "send_alert",
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
    names the cause when the payload carries one (``cause_detail``: ``lost 4 of 4 cases to delta``) and
    the next step (``next_step``)."""
    step = f"; next: {payload['next_step']}" if payload.get("next_step") else ""
    step += f"; dashboard: {payload['ui_url']}" if payload.get("ui_url") else ""
    if "message" in payload and "delta" not in payload:
        text = f"skillreach {payload.get('event', 'notice')}: {payload['skill']}: {payload['message']}{step}"
        return {"text": f"{text} — {payload.get('run_link', '')}",
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f":warning: {text}"}}]}
    lo, hi = (payload.get("interval") or [None, None])[:2]
    what = "drift" if payload.get("event") == MODEL_DRIFT else f"gate {payload.get('verdict', 'breach')}"
    headline = (
        f"skillreach {what}: {payload['skill']} {payload['metric']} "
        f"changed {_fmt(payload.get('delta'))} (95% CI {_fmt(lo)} to {_fmt(hi)}; gate "
        f"{_fmt(payload.get('gate'))}) against baseline {payload['baseline_id']}"
        + (f"; {payload['cause_detail']}" if payload.get("cause_detail") else "") + step
    )
    cause = [f"*Cause*\n{payload['cause_detail']}"] if payload.get("cause_detail") else []
    fields = [
        *cause,
        f"*Skill*\n{payload['skill']}",
        f"*Metric*\n{payload['metric']}",
        f"*Delta*\n{_fmt(payload.get('delta'))} [{_fmt(lo)}, {_fmt(hi)}]",
        f"*Baseline*\n{payload['baseline_id']}",
    ]
    return {
        "text": f"{headline} — {payload.get('run_link', '')}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f":rotating_light: {headline}"}},
            {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"Run: {payload.get('run_link', '')}"}],
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


def webhook_label(url: str) -> str:
    """What may be shown of a webhook URL: scheme and host, never the path (it holds the token).
    Safe on any string (a port that is not one is shown as it is written, never raised on)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = parts.port
    except ValueError:
        from skillreach._io.urls import url_label

        return url_label(url)
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}/…"


class _HideURLs(logging.Filter):
    """Rewrites log records of the HTTP client so that a webhook URL is never logged whole."""

    def __init__(self, urls: Sequence[str]) -> None:
        super().__init__()
        self._urls = sorted(urls, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if any(u in text for u in self._urls):
            for u in self._urls:
                text = text.replace(u, webhook_label(u))
            record.msg, record.args = text, None
        return True


@dataclass(frozen=True)
class Delivery:
    target: str  # webhook_label(url), never the URL
    ok: bool
    status: int | None = None
    error: str | None = None


def send_alert(
    payload: Mapping[str, Any],
    urls: Sequence[str],
    *,
    timeout_s: float = 10.0,
    transport: Any = None,
) -> list[Delivery]:
    """POST the Slack-compatible message to every webhook; one :class:`Delivery` per URL, never raises.

    A URL that cannot be posted to (refused by :func:`skillreach._io.urls.check_webhook`, or any error
    of the client, ``httpx.InvalidURL`` included) is that URL's failed delivery; the others are still
    sent.

    ``httpx`` is imported here, not at module level: this module is part of the domain package, which
    must not pull a network client in at import time (the payload builders above are used everywhere).
    """
    try:
        return _send(payload, urls, timeout_s=timeout_s, transport=transport)
    except Exception as exc:  # documented: never raises (a broken payload, a client error)
        logging.getLogger(__name__).warning("alerts not sent: %s", type(exc).__name__)
        return [Delivery(webhook_label(u), False, None, type(exc).__name__) for u in urls]


def _send(
    payload: Mapping[str, Any], urls: Sequence[str], *, timeout_s: float, transport: Any
) -> list[Delivery]:
    import httpx

    from skillreach._io.urls import check_webhook

    body = slack_message(payload)
    out: list[Delivery] = []
    hide = _HideURLs(urls)
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore")]
    for lg in loggers:
        lg.addFilter(hide)  # httpx logs every request's full URL at INFO
    try:
        with httpx.Client(timeout=timeout_s, transport=transport, follow_redirects=False) as client:
            for url in urls:
                label = webhook_label(url)
                problem = check_webhook(url)
                if problem is not None:
                    out.append(Delivery(label, False, None, f"refused: {problem}"))
                    continue
                try:
                    resp = client.post(url, json=body)
                except Exception as exc:  # one failed delivery never stops the others
                    # the exception text may contain the URL: keep only its class name
                    out.append(Delivery(label, False, None, type(exc).__name__))
                    continue
                ok = 200 <= resp.status_code < 300
                out.append(Delivery(label, ok, resp.status_code, None if ok else f"HTTP {resp.status_code}"))
    finally:
        for lg in loggers:
            lg.removeFilter(hide)
    return out
