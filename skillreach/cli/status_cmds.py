"""``skillreach status``: the service at a glance — "what happened last night".

The Prefect server, the work pool and its workers (as ``doctor`` checks them); the last run of each
deployment (when, its state, its name, the UI link); the last study of each kind in the store (when,
verdict, breaches, the report's path); the baseline candidates waiting for ``baseline accept``; the
muted alerts. Every part says what it could not read instead of failing the command.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

__all__ = ["register"]

DEPLOYMENTS = ("nightly-compliance", "rebaseline-all", "study", "watch", "resolve-crashed", "ingest",
               "live-dropped")
KINDS = {"compliance": "nightly-compliance", "rebaseline": "rebaseline-all", "study": "study"}
"""Study kinds in the store → the deployment that runs them."""


def _when(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if not isinstance(value, datetime):
        return "-"
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _ui(api: str) -> str:
    return (os.environ.get("PREFECT_UI_URL") or api.rstrip("/").removesuffix("/api")).rstrip("/")


def last_runs(api: str) -> dict[str, dict[str, Any]]:
    """The newest flow run of each deployment of prefect.yaml (REST; two seconds for each whole answer,
    bounded and checked for its shape)."""
    from skillreach.cli._prefect_api import ApiProblem, fetch_json

    out: dict[str, dict[str, Any]] = {}
    for name in DEPLOYMENTS:
        body = {"deployments": {"name": {"any_": [name]}}, "sort": "EXPECTED_START_TIME_DESC", "limit": 1}
        try:
            runs = fetch_json(api, "/flow_runs/filter", body=body, shape=list)
        except ApiProblem as exc:
            out[name] = {"error": str(exc)}
            continue
        if not runs:
            out[name] = {"run": None}
            continue
        run = runs[0] if isinstance(runs[0], dict) else {}
        state: dict[str, Any] = run["state"] if isinstance(run.get("state"), dict) else {}
        out[name] = {"run": str(run.get("name") or "?")[:200],
                     "state": str(state.get("name") or state.get("type") or "?")[:40],
                     "when": _when(run.get("start_time") or run.get("expected_start_time")),
                     "link": f"{_ui(api)}/runs/flow-run/{str(run.get('id'))[:64]}"}
    return out


def last_studies(store: Any, api: str | None, ui: str | None = None) -> dict[str, dict[str, Any]]:
    """The newest study of each kind in the store: when, verdict, breaches, report, UI link, and its page
    on the dashboard (``ui``: the setting ``ui_url``)."""
    out: dict[str, dict[str, Any]] = {}
    for kind, deployment in KINDS.items():
        rows = store.studies(kind=kind, limit=1)
        if not rows:
            continue
        row = rows[0]
        alerts = store.alerts(study_id=row.id)
        breaches = sum(1 for a in alerts if a.event == "skillreach.gate.breached")
        verdict = ("breached" if breaches else "ok") if row.status == "done" else row.status
        report = Path(row.out_dir) / "report.html"
        out[deployment] = {
            "study": row.id, "when": _when(row.finished_at or row.created_at), "verdict": verdict,
            "breaches": breaches, "alerts": len(alerts),
            "report": str(report) if report.is_file() else f"{report} (not written)",
            "link": f"{_ui(api)}/runs/flow-run/{row.flow_run_id}" if api and row.flow_run_id else None,
            "dashboard": f"{ui.rstrip('/')}/runs/{row.id}" if ui else None,
        }
    return out


def status_cmd(
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout alone."),
    baselines_dir: Path = typer.Option(Path("baselines"), "--baselines", help="Folder of stored baselines."),
    branch: str = typer.Option("skillreach/baselines", "--branch", help="The service's baseline branch."),
) -> None:
    """The service at a glance: server, pool, workers, the last run of each deployment (when, verdict,
    breaches, report, UI link), candidates waiting for `baseline accept`, muted alerts."""
    from skillreach.cli.doctor_cmds import POOL, _check_server
    from skillreach.errors import SkillreachError
    from skillreach.settings import load_settings
    from skillreach.store import delivery_counts, mutes, open_store

    api = os.environ.get("PREFECT_API_URL") or None
    found: dict[str, Any] = {"service": _check_server(api, POOL)}  # a hostile URL: said, never raised
    healthy = str(found["service"].get("server", "")).startswith("healthy")
    found["deployments"] = last_runs(api) if api and healthy else {}
    ui: str | None = None
    try:
        settings = load_settings()
        ui = settings.ui_url
        with open_store(settings) as store:
            found["studies"] = last_studies(store, api, ui)
            found["muted"] = [{"key": k, "until": _when(u)} for k, u in mutes(store)]
            found["alerts"] = delivery_counts(store)  # the outbox: pending (retried) and failed alerts
    except SkillreachError as exc:
        found["studies"], found["muted"] = {"error": exc.message}, []
    try:
        from skillreach.cli.baseline_cmds import _work_tree_repo

        repo = _work_tree_repo(baselines_dir, branch=branch)
        found["candidates"] = repo.skills(candidates=True)
    except SkillreachError:
        found["candidates"] = []
    found["dashboard"] = ui
    if as_json:
        sys.stdout.write(json.dumps(found, indent=2, ensure_ascii=False) + "\n")
        return
    for key, value in found["service"].items():
        print(f"{key}: {value}")
    print(f"dashboard: {ui}" if ui else "dashboard: not set (skillreach ui serves it; set ui_url to link it)")
    for name in DEPLOYMENTS:
        run = found["deployments"].get(name)
        study = found["studies"].get(name) if isinstance(found["studies"], dict) else None
        if not run and not study:
            continue
        line = f"{name}:"
        if run and run.get("run"):
            line += f" last run {run['run']} ({run['state']}) at {run['when']} — {run['link']}"
        elif run and run.get("error"):
            line += f" cannot read its runs ({run['error']})"
        elif run:
            line += " no run yet"
        print(line)
        if study:
            print(f"  study {study['study']} at {study['when']}: {study['verdict']}, "
                  f"{study['breaches']} breach(es), {study['alerts']} alert(s); report {study['report']}"
                  + (f" — {study['link']}" if study["link"] else "")
                  + (f" — {study['dashboard']}" if study["dashboard"] else ""))
    if isinstance(found["studies"], dict) and "error" in found["studies"]:
        print(f"store: {found['studies']['error']}")
    waiting = found["candidates"]
    print(f"candidates waiting: {', '.join(waiting)} (skillreach baseline accept NAME)" if waiting
          else "candidates waiting: none")
    muted = found["muted"]
    shown = ", ".join(f"{m['key']} until {m['until']}" for m in muted)
    print(f"muted alerts: {shown or 'none'}")
    if "alerts" in found:
        left = found["alerts"]
        print(f"alerts undelivered: {left['pending']} pending (retried), {left['failed']} failed "
              "(skillreach alerts list)")


def register(app: typer.Typer) -> None:
    app.command("status")(status_cmd)
