"""``skillreach gc --keep 30d``: retention for what the service piles up.

Run folders (under ``runs/``: a folder with ``study.json`` or ``probes.jsonl`` not written to since the
cutoff), the store's rows of those studies (probes, artifacts, alerts; ``skillreach.store.retention``)
and the Prefect server's artifacts older than the cutoff. Never a baseline: the ``baselines/`` records
and the store's baseline rows stay, and so do a baseline's study, its folder, and every running study.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import typer

__all__ = ["register"]


def _newest_mtime(folder: Path) -> float:
    newest = folder.stat().st_mtime
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                newest = max(newest, (Path(root) / name).stat().st_mtime)
            except OSError:
                continue
    return newest


def old_run_folders(runs: Path, cutoff: datetime, keep: set[Path]) -> list[Path]:
    """Study folders under ``runs`` last written before ``cutoff``, except those in ``keep``."""
    if not runs.is_dir():
        return []
    found = []
    for folder in sorted(p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()):
        if not ((folder / "study.json").is_file() or (folder / "probes.jsonl").is_file()):
            continue  # not a study's folder: never ours to delete
        if folder.resolve() in keep or _newest_mtime(folder) >= cutoff.timestamp():
            continue
        found.append(folder)
    return found


ARTIFACT_PAGE = 200
MAX_ARTIFACTS = 1_000_000
"""Artifacts ``gc`` reads from the server at most (then it says so: a later run goes on)."""


def prefect_artifacts_before(api: str, cutoff: datetime, *, dry_run: bool) -> int | str:
    """Delete (count, with ``dry_run``) the server's artifacts created before ``cutoff``: read newest
    first (``CREATED_DESC``, Prefect's only order by age), page by page; every answer is checked (a list
    of objects each with an ``id`` and a ``created`` time) and read within a bound. Returns how many, or
    one sentence saying why they could not be read."""
    import httpx

    from skillreach.cli._service import api_json

    base = api.rstrip("/")
    old: list[str] = []
    offset = 0
    try:
        while offset < MAX_ARTIFACTS:
            page = api_json("POST", f"{base}/artifacts/filter",
                            {"sort": "CREATED_DESC", "limit": ARTIFACT_PAGE, "offset": offset}, timeout_s=10)
            if not isinstance(page, list):
                kind = type(page).__name__
                return f"cannot read the server's artifacts (the answer is a {kind}, not a list)"
            for art in page:
                if not isinstance(art, dict) or not isinstance(art.get("id"), str):
                    return "cannot read the server's artifacts (an entry without an id)"
                created = datetime.fromisoformat(str(art.get("created")).replace("Z", "+00:00"))
                if created.tzinfo is None:
                    created = created.replace(tzinfo=UTC)
                if created < cutoff:
                    old.append(art["id"])
            if len(page) < ARTIFACT_PAGE:
                break
            offset += ARTIFACT_PAGE
        failed = 0
        if not dry_run:
            for art_id in old:
                for wait in (1, 2, 4, 0):  # a running service's server answers 503 while its store is busy
                    resp = httpx.delete(f"{base}/artifacts/{art_id}", timeout=10)
                    if resp.status_code != 503 or not wait:
                        break
                    time.sleep(wait)
                failed += resp.status_code not in (200, 204, 404)
    except (httpx.HTTPError, ValueError) as exc:
        return f"cannot read the server's artifacts ({type(exc).__name__}: {exc})"
    if failed:
        return f"{len(old) - failed} artifact(s) deleted, {failed} refused by the server (run gc again)"
    return len(old)


def gc_cmd(
    keep: str = typer.Option(..., "--keep", help="Keep what is younger than this: 30d, 12w, 48h."),
    runs: Path | None = typer.Option(
        None, "--runs", help="Where the study folders are (default: the service's runs/, else ./runs)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would go; delete nothing."),
    service: str | None = typer.Option(
        None, "--service", metavar="FOLDER",
        help="The service whose store and runs to clean (default: the one found from here)."),
) -> None:
    """Delete run folders, store rows and Prefect artifacts older than --keep (never baselines), of the
    service found from here (or --service FOLDER), a running one included: running studies stay."""
    from skillreach.cli._service import locate, service_line, service_settings
    from skillreach.errors import ConfigError
    from skillreach.settings import parse_duration
    from skillreach.store import forget_before, open_store, studies_before

    try:
        cutoff = datetime.now(UTC) - parse_duration(keep)
    except (ValueError, OverflowError) as exc:
        raise ConfigError(f"--keep: {exc}") from exc
    info, how = locate(service)
    print(service_line(info, how))
    if runs is None:
        runs = Path(info.folder) / "runs" if info is not None else Path("runs")
    verb = "would delete" if dry_run else "deleted"
    with open_store(service_settings(info)) as store:
        going = {row.id for row in studies_before(store, cutoff)}
        protected = {Path(row.out_dir).resolve() for row in store.studies(limit=1_000_000)
                     if row.id not in going}
        counts = forget_before(store, cutoff, dry_run=dry_run)
    folders = old_run_folders(runs, cutoff, protected)
    if not dry_run:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{verb} {len(folders)} run folder(s) under {runs} last written before "
          f"{cutoff:%Y-%m-%d %H:%M} UTC")
    print(f"store: {verb} " + ", ".join(f"{n} {what}" for what, n in counts.items()) + " (baselines kept)")
    api = os.environ.get("PREFECT_API_URL") or (info.api if info is not None and info.running else None)
    if api:
        arts = prefect_artifacts_before(api, cutoff, dry_run=dry_run)
        print(f"prefect: {verb} {arts} artifact(s)" if isinstance(arts, int) else f"prefect: {arts}")


def register(app: typer.Typer) -> None:
    app.command("gc")(gc_cmd)
