"""``skillreach gc --keep 30d``: retention for what the service piles up.

Run folders (under ``runs/``: a folder with ``study.json`` or ``probes.jsonl`` not written to since the
cutoff), the store's rows of those studies (probes, artifacts, alerts; ``skillreach.store.retention``)
and the Prefect server's artifacts older than the cutoff. Never a baseline: the ``baselines/`` records
and the store's baseline rows stay, and so do a baseline's study, its folder, and every running study.
"""

from __future__ import annotations

import os
import shutil
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


def prefect_artifacts_before(api: str, cutoff: datetime, *, dry_run: bool) -> int | str:
    """Delete (count, with ``dry_run``) the server's artifacts created before ``cutoff``."""
    import httpx

    base = api.rstrip("/")
    old: list[str] = []
    offset = 0
    try:
        while True:
            page = httpx.post(f"{base}/artifacts/filter", json={"sort": "CREATED_ASC", "limit": 200,
                                                                 "offset": offset}, timeout=5).json()
            for art in page:
                created = datetime.fromisoformat(str(art.get("created")).replace("Z", "+00:00"))
                if created < cutoff:
                    old.append(str(art["id"]))
            if len(page) < 200:
                break
            offset += 200
        if not dry_run:
            for art_id in old:
                httpx.delete(f"{base}/artifacts/{art_id}", timeout=5)
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return f"cannot read the server's artifacts ({type(exc).__name__})"
    return len(old)


def gc_cmd(
    keep: str = typer.Option(..., "--keep", help="Keep what is younger than this: 30d, 12w, 48h."),
    runs: Path = typer.Option(Path("runs"), "--runs", help="Where the study folders are."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would go; delete nothing."),
) -> None:
    """Delete run folders, store rows and Prefect artifacts older than --keep (never baselines)."""
    from skillreach.errors import ConfigError
    from skillreach.settings import load_settings, parse_duration
    from skillreach.store import forget_before, open_store, studies_before

    try:
        cutoff = datetime.now(UTC) - parse_duration(keep)
    except ValueError as exc:
        raise ConfigError(f"--keep: {exc}") from exc
    verb = "would delete" if dry_run else "deleted"
    with open_store(load_settings()) as store:
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
    api = os.environ.get("PREFECT_API_URL")
    if api:
        arts = prefect_artifacts_before(api, cutoff, dry_run=dry_run)
        print(f"prefect: {verb} {arts} artifact(s)" if isinstance(arts, int) else f"prefect: {arts}")


def register(app: typer.Typer) -> None:
    app.command("gc")(gc_cmd)
