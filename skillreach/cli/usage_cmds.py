"""``skillreach usage``: what the agents actually loaded in production, read from the store that
``skillreach ingest`` fills — per skill, per day or week, per skill version; the skills gone stale; the
calls that ran another skill than the one asked for; the live gate (``--gate``)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from skillreach.live.gate import LiveDrop
    from skillreach.live.usage import Period, UsageReport
    from skillreach.live.verdict import CatalogChange

__all__ = ["parse_when", "register"]


def parse_when(value: str | None, flag: str, now: datetime) -> datetime | None:
    """``2026-11-01``, ``2026-11-01T12:00`` (UTC unless it says), or a duration back from now (``30d``,
    at most a hundred years). A date must lie between 1970 and 2200, the years an event may have."""
    from skillreach._io.durations import parse_duration
    from skillreach.errors import InputError
    from skillreach.live.readers import EARLIEST, LATEST

    if value is None:
        return None
    text = value.strip()
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            return now - parse_duration(text)
        except ValueError as exc:
            if "longer than" in str(exc):
                raise InputError(f"{flag}: {exc}") from None
            raise InputError(
                f"{flag} {value!r}: not a date; write 2026-11-01, 2026-11-01T12:00 or a span back from now "
                "such as 30d"
            ) from None
    try:
        at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is in year 0 in UTC
        at = datetime.min.replace(tzinfo=UTC)
    if not EARLIEST <= at < LATEST:
        raise InputError(f"{flag} {value!r}: out of range; give a date between 1970-01-01 and 2200-01-01")
    return at


def _stale_days(value: str | None) -> int | None:
    from skillreach._io.durations import parse_duration
    from skillreach.errors import InputError

    if value is None:
        return None
    try:
        span = parse_duration(value)
    except ValueError as exc:
        if "longer than" in str(exc):
            raise InputError(f"--stale: {exc}") from None
        raise InputError(f"--stale {value!r}: not a span of days; write e.g. 30d") from None
    if span < timedelta(days=1):
        raise InputError(f"--stale {value!r}: less than a day; write e.g. 30d")
    return int(span / timedelta(days=1))


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _table(report: UsageReport, drops: list[LiveDrop] | None) -> list[str]:
    """The terminal view: per skill over the window, then per skill and period and version."""
    prompts = sum(t.prompts for t in report.totals)
    lines = [
        f"{prompts} main-agent prompts in {len(report.periods)} {report.by}(s)"
        + (f"; {report.hidden} call(s) with a hidden skill name, counted apart" if report.hidden else "")
    ]
    if not report.rows:
        lines.append("no skill activation in the window")
    from skillreach._io.console import escape

    shown = {s: escape(s) for s in report.skills}  # as printed: the columns line up
    width = max([len(s) for s in shown.values()] + [5])
    header = (
        f"{'skill':<{width}}  {report.by:<10}  {'version':<20}  {'prompts':>7}  {'activ.':>6}  "
        f"{'share':>6}  {'sessions':>8}  {'subagent':>8}"
    )
    by_skill: dict[str, list[Any]] = {}
    for r in report.version_rows:
        by_skill.setdefault(r.skill, []).append(r)
    side = {(r.skill, r.period): r.sidechain_activations for r in report.rows}
    if report.rows:
        lines.append(header)
    for skill in report.skills:
        total = sum(r.activations for r in report.rows if r.skill == skill)
        for r in by_skill.get(skill, []):
            version = (r.version or "")[:20]
            subagent = side.get((skill, r.period), 0)
            lines.append(
                f"{shown[skill]:<{width}}  {r.period.isoformat():<10}  {version:<20}  {r.prompts:>7}  "
                f"{r.activations:>6}  {_pct(r.share):>6}  {r.sessions:>8}  {subagent:>8}"
            )
        share = total / prompts if prompts else None
        lines.append(
            f"{shown[skill]:<{width}}  {'all':<10}  {'':<20}  {prompts:>7}  {total:>6}  {_pct(share):>6}"
        )
    versions: dict[str, list[str]] = {}
    for v in report.versions:
        versions.setdefault(v.skill, []).append(
            f"{v.version} ({v.first:%Y-%m-%d}–{v.last:%Y-%m-%d}, {v.activations})"
        )
    for skill, vs in versions.items():
        lines.append(f"versions live: {skill}: {'; '.join(vs)}")
    if report.stale_days is not None:
        if report.stale:
            for s in report.stale:
                when = (
                    f"last activated {s.last_activation:%Y-%m-%d}" if s.last_activation else "never activated"
                )
                lines.append(f"stale ({report.stale_days}d without an activation): {s.skill} — {when}")
        else:
            lines.append(
                f"stale: none (every skill of the catalog activated in the last {report.stale_days}d)"
            )
    for m in report.mismatches:
        lines.append(f"asked for {m.requested}, ran {m.ran}: {m.calls} call(s)")
    if drops is not None:
        lines += [f"live gate: {d.sentence()}" for d in drops] or ["live gate: no skill past it"]
    return lines


def usage_cmd(  # noqa: PLR0917 - a typer command
    skills: list[Path] = typer.Option(
        [],
        "--skills",
        metavar="DIR",
        help="The catalog (folders of skills): stale skills, and catalog changes from its git history.",
    ),
    by: str = typer.Option("day", "--by", metavar="day|week", help="The period of each row."),
    since: str | None = typer.Option(
        None,
        "--since",
        metavar="WHEN",
        help="From (2026-11-01, 2026-11-01T12:00, or a span back from --until: 30d); default 28d.",
    ),
    until: str | None = typer.Option(None, "--until", metavar="WHEN", help="Up to, excluded (default: now)."),
    stale: str | None = typer.Option(
        None,
        "--stale",
        metavar="SPAN",
        help="List the catalog's skills with no activation in this span (30d); needs --skills.",
    ),
    gate: bool = typer.Option(
        False, "--gate", help="Check the live gate (live_gates) at --until; exit 1 when a skill is past it."
    ),
    config: Path | None = typer.Option(None, "--config", help="Settings file (the store, live_gates)."),
    as_json: bool = typer.Option(False, "--json", help="The tables as JSON on stdout alone."),
    html: Path | None = typer.Option(None, "--html", metavar="PATH", help="Write the HTML page here."),
) -> None:
    """Live usage per skill, per day or week, per skill version: sessions, prompts, activations and the
    activation share (activations ÷ main-agent prompts of the same period; subagents apart), the
    versions live in the window, stale skills (--stale), requested-versus-ran mismatches; hidden-name
    calls counted apart. Read from the store `skillreach ingest` fills.

    Exit codes: 0 done; 1 --gate and a skill's live share fell past live_gates; 2 bad input (a date,
    a span, a folder, a settings file, a store that cannot be opened).
    """
    from skillreach._io.console import escape, escape_json
    from skillreach._io.redact import redact, redact_text
    from skillreach.errors import InputError
    from skillreach.live.catalog import catalog_changes
    from skillreach.live.gate import check_live_gate, windows_for
    from skillreach.live.usage import usage_report
    from skillreach.settings import load_settings
    from skillreach.store import open_store
    from skillreach.store.live import load_events

    if by not in ("day", "week"):
        raise InputError(f"--by {by!r}: pass day or week")
    if stale is not None and not skills:
        raise InputError("--stale needs the catalog: pass --skills DIR")
    for d in skills:
        if not d.is_dir():
            raise InputError(f"{d}: no such folder of skills; pass --skills DIR")
    now = datetime.now(UTC)
    end = parse_when(until, "--until", now) or now
    start = parse_when(since, "--since", end) or end - timedelta(days=28)
    if start >= end:
        raise InputError(f"--since {since or start.isoformat()} is not before --until {until or 'now'}")
    stale_days = _stale_days(stale)
    settings = load_settings(config)
    catalog: list[str] = []
    if skills:
        from skillreach.skills.discovery import discover

        catalog = [s.name for s in discover(skills).skills]
    read_from = start
    if stale_days is not None:
        read_from = min(read_from, end - timedelta(days=stale_days))
    windows = windows_for(settings.live_gates, end) if gate else None
    if windows is not None:
        read_from = min(read_from, windows.reference_start)
    with open_store(settings) as store:
        events = load_events(store, since=read_from, until=end, include_sidechain=True)
    changes: list[CatalogChange] = catalog_changes(skills) if skills else []
    added: dict[str, datetime] = {}
    for c in changes:  # oldest first: a skill's last addition (after a removal) counts
        if c.how == "added":
            added[c.skill] = c.at
    period: Period = "week" if by == "week" else "day"
    report = usage_report(
        events,
        by=period,
        since=start,
        until=end,
        catalog=catalog,
        stale_days=stale_days,
        now=end,
        added=added,
    )
    drops = check_live_gate(events, settings.live_gates, end, skills=catalog or None) if gate else None
    if html is not None:
        from skillreach._io.paths import ensure_folder
        from skillreach.reports.usage import render_usage_html

        ensure_folder(html.parent, flag="--html")
        html.write_text(redact_text(render_usage_html(report, changes=changes)), encoding="utf-8")
    if as_json:
        data = {
            "usage": report.model_dump(mode="json"),
            "catalog_changes": [c.model_dump(mode="json") for c in changes],
            "live_gate": None if drops is None else [d.model_dump(mode="json") for d in drops],
        }
        text = json.dumps(redact(data, keys=False), indent=2, ensure_ascii=False)
        sys.stdout.write(escape_json(text) + "\n")
    else:
        for line in _table(report, drops):
            print(escape(redact_text(line)))  # skill names and versions come from agents' records
        if html is not None:
            print(escape(f"wrote {html}"))
    if drops:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("usage")(usage_cmd)
