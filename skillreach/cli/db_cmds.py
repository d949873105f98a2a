"""``skillreach db upgrade|copy``: the store's schema, and moving it (SQLite → PostgreSQL).

Every command that opens the store applies pending migrations by itself; ``db upgrade`` does it on
purpose (before a service restart, or on a store no command has opened since an upgrade of
skillreach). ``db copy SRC DST`` copies every row into an empty database at the newest schema.
"""

from __future__ import annotations

import sys

import typer

__all__ = ["register"]

db_app = typer.Typer(name="db", help="The store's schema, and moving it to another database.",
                     no_args_is_help=True)


def _url(given: str | None) -> tuple[str, str]:
    if given:
        return given, "the URL given"
    from skillreach.settings import load_settings

    settings = load_settings()
    origin = "SKILLREACH_DATABASE_URL" if settings.database_url else "SKILLREACH_HOME"
    return settings.resolved_database_url(), origin


def upgrade_cmd(
    url: str | None = typer.Argument(None, help="The store's URL; default the service's "
                                     "(SKILLREACH_DATABASE_URL, else .skillreach/skillreach.db)."),
) -> None:
    """Apply the store's pending migrations (numbered, in skillreach/store/migrations)."""
    from sqlalchemy.engine import make_url

    from skillreach.store import upgrade_store

    target, origin = _url(url)
    before, after = upgrade_store(target, origin=origin)
    shown = make_url(target).render_as_string(hide_password=True)
    print(f"{shown}: schema {before or '(empty)'} → {after}" if before != after
          else f"{shown}: schema {after}, up to date")


def copy_cmd(
    src: str = typer.Argument(..., help="The store to copy from (e.g. sqlite:///.skillreach/skillreach.db)."),
    dst: str = typer.Argument(..., help="An empty database to copy into (e.g. postgresql+psycopg://…)."),
) -> None:
    """Copy every row of SRC into the empty DST (both brought to the newest schema first); then point
    SKILLREACH_DATABASE_URL at DST. Baselines live in git, not here: nothing to move for them."""
    from skillreach.store import Store, copy_store

    with Store(src, origin="SRC") as source, Store(dst, origin="DST") as target:
        copied = copy_store(source, target, log=lambda m: print(m, file=sys.stderr))
        print(f"copied {sum(copied.values())} row(s) from {source.safe_url} to {target.safe_url}; "
              "set SKILLREACH_DATABASE_URL to the new store")


def register(app: typer.Typer) -> None:
    db_app.command("upgrade")(upgrade_cmd)
    db_app.command("copy")(copy_cmd)
    app.add_typer(db_app, name="db")
