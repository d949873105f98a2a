"""``skillreach status``: the service at a glance — "what happened last night".

Which service (the one found from here: ``skillreach/cli/_service.py``; one line says which, and how to
point at another); the Prefect server, the work pool and its workers (as ``doctor`` checks them); the
last *finished* run of each deployment (when it ended, its state, its name, the UI link), a run going on
now and the next one scheduled, each said as such; the last study of each kind in the service's store
(when, verdict, breaches, the report's path); the baseline candidates waiting on the service's baselines
branch for ``baseline accept``; the restarts of the server and worker by ``serve``; the muted alerts.
Every part says what it could not read instead of failing the command.
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


FINISHED = ["COMPLETED", "FAILED", "CRASHED", "CANCELLED"]
ACTIVE = ["RUNNING", "PENDING", "CANCELLING"]


def _runs(api: str, name: str, states: list[str], sort: str) -> list[dict[str, Any]]:
    """The newest run of deployment ``name`` in ``states`` by ``sort`` (a bounded read: a deadline for the
    whole answer, a cap on its bytes, its shape checked); :class:`ApiProblem` otherwise."""
    from skillreach.cli._prefect_api import ApiProblem, fetch_json

    body = {"deployments": {"name": {"any_": [name]}},
            "flow_runs": {"state": {"type": {"any_": states}}}, "sort": sort, "limit": 1}
    runs = fetch_json(api, "/flow_runs/filter", body=body, deadline_s=3.0, shape=list)
    if not all(isinstance(r, dict) for r in runs):
        raise ApiProblem("the answer is not a list of runs")
    return list(runs)


def _run_row(api: str, run: dict[str, Any], when: Any) -> dict[str, Any]:
    raw = run.get("state")
    state: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return {"run": str(run.get("name") or "?")[:200],
            "state": str(state.get("name") or state.get("type") or "?")[:40], "when": _when(when),
            "link": f"{_ui(api)}/runs/flow-run/{str(run.get('id'))[:64]}"}


def last_runs(api: str) -> dict[str, dict[str, Any]]:
    """Per deployment of prefect.yaml: its last *finished* run (``run``, ``state``, ``when`` it ended,
    ``link``), the one going on now (``now``) and the next scheduled one (``next``). REST, bounded reads,
    a three-second deadline for each whole answer; a deployment whose runs cannot be read says why
    (``error``)."""
    from skillreach.cli._prefect_api import ApiProblem

    out: dict[str, dict[str, Any]] = {}
    for name in DEPLOYMENTS:
        try:
            done = _runs(api, name, FINISHED, "END_TIME_DESC")
            now = _runs(api, name, ACTIVE, "START_TIME_DESC")
            later = _runs(api, name, ["SCHEDULED"], "EXPECTED_START_TIME_ASC")
        except ApiProblem as exc:
            out[name] = {"error": str(exc)}
            continue
        row: dict[str, Any] = {"run": None}
        if done:
            row = _run_row(api, done[0], done[0].get("end_time") or done[0].get("start_time"))
        if now:
            row["now"] = _run_row(api, now[0], now[0].get("start_time") or now[0].get("expected_start_time"))
        if later:
            row["next"] = _run_row(api, later[0], later[0].get("expected_start_time"))
        out[name] = row
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
    service: str | None = typer.Option(
        None, "--service", metavar="FOLDER",
        help="The folder `skillreach serve` runs in (default: the service found from here)."),
    baselines_dir: Path | None = typer.Option(
        None, "--baselines", help="Folder of stored baselines (default: the service's)."),
    branch: str | None = typer.Option(
        None, "--branch", help="The service's baseline branch (default: the service's)."),
) -> None:
    """The service at a glance: which service, server, pool, workers, the last finished run of each
    deployment (when, verdict, breaches, report, UI link), candidates waiting for `baseline accept` on
    the service's branch, restarts, muted alerts."""
    from skillreach.cli._service import locate, service_line, service_settings
    from skillreach.cli.doctor_cmds import POOL, _check_server
    from skillreach.errors import SkillreachError
    from skillreach.store import delivery_counts, mutes, open_store

    info, how = locate(service)
    api = os.environ.get("PREFECT_API_URL") or (info.api if info is not None else None)
    found: dict[str, Any] = {"service": _service_part(info, how), "server": _check_server(
        api, info.pool if info is not None else POOL)}
    healthy = str(found["server"].get("server", "")).startswith("healthy")
    found["deployments"] = last_runs(api) if api and healthy else {}
    ui: str | None = None
    try:
        settings = service_settings(info)
        ui = settings.ui_url
        with open_store(settings) as store:
            found["studies"] = last_studies(store, api, ui)
            found["muted"] = [{"key": k, "until": _when(u)} for k, u in mutes(store)]
            found["alerts"] = delivery_counts(store)  # the outbox: pending (retried) and failed alerts
    except SkillreachError as exc:
        found["studies"], found["muted"] = {"error": exc.message}, []
    found["candidates"], found["candidates_from"] = _candidates(info, baselines_dir, branch)
    found["dashboard"] = ui
    if as_json:
        sys.stdout.write(json.dumps(found, indent=2, ensure_ascii=False) + "\n")
        return
    print(service_line(info, how))
    for key, value in found["server"].items():
        print(f"{key}: {value}")
    print(f"dashboard: {ui}" if ui else "dashboard: not set (skillreach ui serves it; set ui_url to link it)")
    _print_runs(found)
    if isinstance(found["studies"], dict) and "error" in found["studies"]:
        print(f"store: {found['studies']['error']}")
    waiting = found["candidates"]
    where = found["candidates_from"]
    print(f"candidates waiting on {where}: {', '.join(waiting)} (skillreach baseline accept NAME)" if waiting
          else f"candidates waiting on {where}: none")
    print(_restarts_line(found["service"]))
    muted = found["muted"]
    shown = ", ".join(f"{m['key']} until {m['until']}" for m in muted)
    print(f"muted alerts: {shown or 'none'}")
    if "alerts" in found:
        left = found["alerts"]
        print(f"alerts undelivered: {left['pending']} pending (retried), {left['failed']} failed "
              "(skillreach alerts list)")


def _service_part(info: Any, how: str) -> dict[str, Any]:
    if info is None:
        return {"found": False, "how": how}
    return {"found": True, "how": how, "folder": info.folder, "running": info.running, "pid": info.pid,
            "api": info.api, "pool": info.pool, "started_at": info.started_at, "ready_at": info.ready_at,
            "config_file": info.config_file, "repository": info.repository,
            "baselines_dir": info.baselines_dir, "baselines_branch": info.baselines_branch,
            "store": info.store, "restart_count": info.restart_count, "restarts": list(info.restarts[-5:])}


def _restarts_line(part: dict[str, Any]) -> str:
    if not part.get("found"):
        return "restarts by serve: unknown (no service found)"
    if not part["restart_count"]:
        return f"restarts by serve: none since {_when(part['started_at'])}"
    shown = "; ".join(f"{r.get('what')} at {_when(r.get('at'))} (pid {r.get('old_pid')} exited with code "
                      f"{r.get('code')}; now {r.get('pid')})" for r in part["restarts"][-3:])
    return f"restarts by serve: {part['restart_count']} — latest: {shown}"


def _candidates(info: Any, baselines_dir: Path | None, branch: str | None) -> tuple[list[str], str]:
    """The candidates waiting on the service's baselines branch (or the given folder's repository and
    branch), and where they were read."""
    from skillreach.baselines.record_store import DEFAULT_BRANCH, BaselineRepo
    from skillreach.errors import SkillreachError

    try:
        if baselines_dir is None and info is not None and info.repository:
            repo = BaselineRepo(Path(info.repository), folder=info.baselines_dir,
                                branch=branch or info.baselines_branch)
        else:
            from skillreach.cli.baseline_cmds import _work_tree_repo

            repo = _work_tree_repo(baselines_dir or Path("baselines"), branch=branch or DEFAULT_BRANCH)
        return repo.skills(candidates=True), f"{repo.branch} of {repo.top}"
    except SkillreachError as exc:
        return [], f"{branch or DEFAULT_BRANCH} (not read: {exc.message})"


def _print_runs(found: dict[str, Any]) -> None:
    for name in DEPLOYMENTS:
        run = found["deployments"].get(name)
        study = found["studies"].get(name) if isinstance(found["studies"], dict) else None
        if not run and not study:
            continue
        line = f"{name}:"
        if run and run.get("run"):
            line += f" last finished run {run['run']} ({run['state']}) at {run['when']} — {run['link']}"
        elif run and run.get("error"):
            line += f" cannot read its runs ({run['error']})"
        elif run:
            line += " no finished run yet"
        if run and run.get("now"):
            line += f"; running now: {run['now']['run']} since {run['now']['when']}"
        if run and run.get("next"):
            line += f"; next: {run['next']['run']} at {run['next']['when']}"
        print(line)
        if study:
            print(f"  study {study['study']} at {study['when']}: {study['verdict']}, "
                  f"{study['breaches']} breach(es), {study['alerts']} alert(s); report {study['report']}"
                  + (f" — {study['link']}" if study["link"] else "")
                  + (f" — {study['dashboard']}" if study["dashboard"] else ""))


def register(app: typer.Typer) -> None:
    app.command("status")(status_cmd)
