"""The store's limits on waiting: PostgreSQL's connect and statement timeouts, the bounded retry of a
disk error, and the one line for a database error no command translated (issue 30: waits with an end)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.exc import DBAPIError

__all__ = [
    "DISK_ERROR",
    "DISK_RETRIES",
    "OPENED",
    "PG_CONNECT_TIMEOUT_S",
    "PG_STATEMENT_TIMEOUT_MS",
    "database_error_line",
    "pg_timeouts",
]

PG_CONNECT_TIMEOUT_S = 10
"""A PostgreSQL connection not made (TCP, TLS, start-up and authentication) within this many seconds
fails: a server that accepts and never answers ends the command in one line instead of hanging it."""
PG_STATEMENT_TIMEOUT_MS = 300_000
"""A statement the server has not finished in this many milliseconds is cancelled by the server (the
longest the store runs are migrations and a study's probe reads, seconds at most)."""


def pg_timeouts(url: Any) -> dict[str, Any]:
    """libpq's ``connect_timeout`` and a ``statement_timeout`` for every PostgreSQL connection, unless
    the URL sets them itself (``?connect_timeout=…``, ``?options=-c statement_timeout=…``)."""
    if url.get_backend_name() != "postgresql":
        return {}
    args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    if "options" not in url.query:
        args["options"] = f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS}"
    return args


DISK_RETRIES = 2
"""Tries again of a statement that failed on the disk (SQLite's ``disk I/O error``, ``database or disk
is full``) before the error is raised: a full disk or a file-size limit does not go away in seconds."""
DISK_ERROR = re.compile(r"disk I/O error|database or disk is full|No space left|File too large", re.I)
OPENED: list[str] = []
"""The databases this process opened (URLs, passwords hidden): an error line names them."""


def database_error_line(exc: BaseException) -> str | None:
    """One line for a database error no command translated (a disk that filled up mid-study), or
    ``None`` when ``exc`` is not one."""
    if not isinstance(exc, DBAPIError):
        return None
    what = str(exc.orig or exc).splitlines()[0] if str(exc.orig or exc) else type(exc).__name__
    where = ", ".join(dict.fromkeys(OPENED)) or "the database"
    hint = (
        "a full disk or a file-size limit? free space and run again (the probes written so far are kept "
        "in the study's probes.jsonl)"
        if DISK_ERROR.search(what)
        else "check the database and run again"
    )
    return f"{where}: {what}; {hint}"
