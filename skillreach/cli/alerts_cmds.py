"""``skillreach alerts list|mute|unmute``: the alerts the service stored, where each one stands, and
muting one.

Every alert is stored before it is sent (the service's outbox): ``pending`` until every webhook answered
with a 2xx (``delivered``), retried with backoff in between, ``failed`` with the reason after the last
try; ``repeat`` — its verdict was already said and has not changed —, ``muted`` and ``none`` (no webhook
configured) were stored and not sent. An alert's key is ``kind:skill:metric[:cause]``
(``gate.breached:pdf-documents:activation``); a muted key (or every key under a muted prefix) is not
sent until its mute ends. Both are stored in the service's store (``SKILLREACH_DATABASE_URL``, else
``.skillreach/skillreach.db``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from skillreach.store import Store

__all__ = ["register"]

alerts_app = typer.Typer(name="alerts", help="Alerts the service sent, retries or held back; mute one.",
                         no_args_is_help=True)

STATES = ("pending", "delivered", "failed", "repeat", "muted", "none")


def _store() -> Store:
    """The store of the service found from here (``skillreach/cli/_service.py``), said on stderr; this
    folder's when there is none."""
    import sys

    from skillreach.cli._service import locate, service_line, service_settings
    from skillreach.store import open_store

    info, how = locate()
    if info is not None:
        print(f"alerts: {service_line(info, how)}", file=sys.stderr)
    return open_store(service_settings(info))


def _hm(when: datetime | None) -> str:
    if when is None:
        return "-"
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _state(row: Any, sends: list[Any]) -> str:
    """``delivered``, ``pending (2 of 3 webhooks; try 3 at 12:04 UTC: HTTP 503 from http://h/…)``,
    ``failed (HTTP 404 from http://h/… after 1 try)``, or the stored word."""
    word = str(row.delivery)
    if word not in ("pending", "failed") or not sends:
        return word
    waiting = [s for s in sends if s.state == word]
    shown = waiting[0]
    why = shown.last_error or ("not tried yet" if word == "pending" else "failed")
    of = f"{len(waiting)} of {len(sends)} webhooks; " if len(sends) > 1 else ""
    if word == "pending":
        nxt = f"try {shown.attempts + 1} at {_hm(shown.next_try_at)[11:]} UTC"
        return f"pending ({of}{nxt}: {why})" if shown.last_error else f"pending ({of}{nxt})"
    return f"failed ({of}{why} after {shown.attempts} tr{'y' if shown.attempts == 1 else 'ies'})"


def list_cmd(
    limit: int = typer.Option(20, "--limit", min=1, max=100_000, help="The newest N alerts."),
    state: str | None = typer.Option(None, "--state",
                                     help=f"Only alerts in this state: {', '.join(STATES)}."),
) -> None:
    """The newest alerts — when, key, where each stands (pending with its next try, delivered, failed with
    the reason, repeat, muted, none) — the open verdicts and the mutes."""
    from skillreach._io.console import strip_control
    from skillreach.errors import InputError
    from skillreach.store import latest_alerts, mutes, open_verdicts, sends_of

    if state is not None and state not in STATES:
        raise InputError(f"--state {strip_control(state)!r}: not a state; use one of {', '.join(STATES)}")
    with _store() as store:
        rows = latest_alerts(store, limit, delivery=state)
        sends = sends_of(store, [r.id for r in rows])
        opened = open_verdicts(store)
        active = mutes(store)
    for row in rows:
        print(strip_control(f"{_hm(row.created_at)}  {row.key or row.event}  {_state(row, sends[row.id])}"))
    if not rows:
        print("no alerts stored" if state is None else f"no {state} alerts")
    if opened and state is None:
        print(strip_control("open: " + ", ".join(f"{v.key} (since {_hm(v.opened_at)})" for v in opened[:20])
                            + (f" and {len(opened) - 20} more" if len(opened) > 20 else "")))
    for key, until in active:
        print(strip_control(f"muted  {key}  until {_hm(until)} UTC"))


def mute_cmd(
    key: str = typer.Argument(..., help="An alert key (kind:skill:metric[:cause]) or a prefix of one."),
    for_: str = typer.Option("7d", "--for", help="How long: 30m, 24h, 7d, 2w."),
) -> None:
    """Hold back every alert of KEY (or under it) for a while; they are still stored."""
    from skillreach._io.console import strip_control
    from skillreach.errors import ConfigError, InputError
    from skillreach.settings import parse_duration
    from skillreach.store import mute

    if not key.strip():
        raise InputError("alerts mute: the key is empty; give an alert key or a prefix of one, as "
                         "`skillreach alerts list` shows them (e.g. gate.breached:pdf-documents)")
    try:
        span = parse_duration(for_)
        until = datetime.now(UTC) + span
    except (ValueError, OverflowError) as exc:
        raise ConfigError(f"--for: {exc}" if isinstance(exc, ValueError)
                          else f"--for {strip_control(for_)!r}: too long; write e.g. 7d, 2w") from exc
    with _store() as store:
        mute(store, key, until)
    print(strip_control(f"muted {key} until {until.strftime('%Y-%m-%d %H:%M')} UTC"))


def unmute_cmd(key: str = typer.Argument(..., help="A muted key, as `alerts list` shows it.")) -> None:
    """End a mute."""
    from skillreach._io.console import strip_control
    from skillreach.errors import InputError
    from skillreach.store import unmute

    with _store() as store:
        if not unmute(store, key):
            raise InputError(strip_control(f"{key}: not muted; `skillreach alerts list` shows the mutes"))
    print(strip_control(f"unmuted {key}"))


def register(app: typer.Typer) -> None:
    alerts_app.command("list")(list_cmd)
    alerts_app.command("mute")(mute_cmd)
    alerts_app.command("unmute")(unmute_cmd)
    app.add_typer(alerts_app, name="alerts")
