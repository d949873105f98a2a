"""``skillreach alerts list|mute|unmute``: the alerts the service stored, and muting one.

An alert's key is ``kind:skill:metric[:cause]`` (``gate.breached:pdf-documents:activation``); the same
key is sent at most once per ``alert_repeat_after`` (default 24 h), a muted key (or every key under a
muted prefix) not at all until its mute ends. Both are stored in the service's store
(``SKILLREACH_DATABASE_URL``, else ``.skillreach/skillreach.db``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from skillreach.store import Store

__all__ = ["register"]

alerts_app = typer.Typer(name="alerts", help="Alerts the service sent or held back; mute one.",
                         no_args_is_help=True)


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


def list_cmd(
    limit: int = typer.Option(20, "--limit", min=1, help="The newest N alerts."),
) -> None:
    """The newest alerts (when, key, delivery: event|posted|failed|none|repeat|muted) and the mutes."""
    from skillreach.store import mutes

    with _store() as store:
        rows = store.alerts()[-limit:]
        active = mutes(store)
    for row in rows:
        when = row.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
        print(f"{when}  {row.key or row.event}  {row.delivery}")
    if not rows:
        print("no alerts stored")
    for key, until in active:
        print(f"muted  {key}  until {until.astimezone(UTC).strftime('%Y-%m-%d %H:%M')} UTC")


def mute_cmd(
    key: str = typer.Argument(..., help="An alert key (kind:skill:metric[:cause]) or a prefix of one."),
    for_: str = typer.Option("7d", "--for", help="How long: 30m, 24h, 7d, 2w."),
) -> None:
    """Hold back every alert of KEY (or under it) for a while; they are still stored."""
    from skillreach.errors import ConfigError
    from skillreach.settings import parse_duration
    from skillreach.store import mute

    try:
        span = parse_duration(for_)
    except ValueError as exc:
        raise ConfigError(f"--for: {exc}") from exc
    until = datetime.now(UTC) + span
    with _store() as store:
        mute(store, key, until)
    print(f"muted {key} until {until.strftime('%Y-%m-%d %H:%M')} UTC")


def unmute_cmd(key: str = typer.Argument(..., help="A muted key, as `alerts list` shows it.")) -> None:
    """End a mute."""
    from skillreach.errors import InputError
    from skillreach.store import unmute

    with _store() as store:
        if not unmute(store, key):
            raise InputError(f"{key}: not muted; `skillreach alerts list` shows the mutes")
    print(f"unmuted {key}")


def register(app: typer.Typer) -> None:
    alerts_app.command("list")(list_cmd)
    alerts_app.command("mute")(mute_cmd)
    alerts_app.command("unmute")(unmute_cmd)
    app.add_typer(alerts_app, name="alerts")
