"""The store's limits on waiting: PostgreSQL's connect and statement timeouts, the bounded retry of a
disk error, and the one line for a database error no command translated (issue 30: waits with an end)."""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError

__all__ = [
    "DISK_ERROR",
    "DISK_RETRIES",
    "OPENED",
    "PG_CONNECT_TIMEOUT_S",
    "PG_STATEMENT_TIMEOUT_MS",
    "RETRY_DELAYS_S",
    "STATEMENT_TIMEOUT_ENV",
    "STATEMENT_TIMEOUT_SETTING",
    "database_error_line",
    "pg_timeouts",
    "retry_lost_connection",
]

T = TypeVar("T")
log = logging.getLogger("skillreach.store.database")

PG_CONNECT_TIMEOUT_S = 10
"""A PostgreSQL connection not made (TCP, TLS, start-up and authentication) within this many seconds
fails: a server that accepts and never answers ends the command in one line instead of hanging it."""
PG_STATEMENT_TIMEOUT_MS = 300_000
"""A statement the server has not finished in this many milliseconds is cancelled by the server (the
longest the store runs are migrations and a study's probe reads, seconds at most): the default of the
setting :data:`STATEMENT_TIMEOUT_SETTING`."""
STATEMENT_TIMEOUT_SETTING = "database_statement_timeout_s"
STATEMENT_TIMEOUT_ENV = "SKILLREACH_DATABASE_STATEMENT_TIMEOUT_S"
_TIMED_OUT = re.compile(r"statement timeout", re.I)
"""PostgreSQL's ``canceling statement due to statement timeout`` (SQLSTATE 57014)."""


def _statement_timeout_ms(seconds: float | None) -> int:
    """The timeout in ms: ``seconds`` (the setting, when the caller has the settings), else the
    environment variable, else the default. A value that is not a positive number is the default (the
    settings themselves refuse it with one line)."""
    if seconds is None:
        try:
            seconds = float(os.environ.get(STATEMENT_TIMEOUT_ENV, ""))
        except ValueError:
            return PG_STATEMENT_TIMEOUT_MS
    if not math.isfinite(seconds) or seconds <= 0:
        return PG_STATEMENT_TIMEOUT_MS
    return max(1, round(seconds * 1000))


def pg_timeouts(url: Any, statement_timeout_s: float | None = None) -> dict[str, Any]:
    """libpq's ``connect_timeout`` and a ``statement_timeout`` (the setting ``database_statement_timeout_s``)
    for every PostgreSQL connection, unless the URL sets them itself (``?connect_timeout=…``,
    ``?options=-c statement_timeout=…``)."""
    if url.get_backend_name() != "postgresql":
        return {}
    args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
    if "options" not in url.query:
        args["options"] = f"-c statement_timeout={_statement_timeout_ms(statement_timeout_s)}"
    return args


RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0)
"""Waits between tries of a statement whose database connection was lost (about 30 s in all)."""


def retry_lost_connection(fn: Callable[[], T], delays: Sequence[float] = RETRY_DELAYS_S) -> T:
    """``fn()``, tried again with backoff while the database connection is lost or refused
    (``OperationalError`` / an invalidated connection). The pool is pre-pinged, so a fresh try gets a
    fresh connection; ``fn`` must be idempotent (the probe upsert is). A statement the server cancelled
    for its statement timeout is not tried again (it would wait as long again), a disk error at most
    :data:`DISK_RETRIES` times."""
    disk_tries = 0
    for wait in (*delays, None):
        try:
            return fn()
        except (OperationalError, DBAPIError) as exc:
            if wait is None or not (isinstance(exc, OperationalError) or exc.connection_invalidated):
                raise
            if _TIMED_OUT.search(str(exc.orig or exc)):
                raise
            if DISK_ERROR.search(str(exc.orig or exc)):  # a full disk does not empty itself in 30 s
                disk_tries += 1
                if disk_tries > DISK_RETRIES:
                    raise
            log.warning(
                "database connection lost (%s); trying again in %.1fs",
                str(exc.orig).splitlines()[0] if exc.orig else exc,
                wait,
            )
            time.sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


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
    if _TIMED_OUT.search(what):
        hint = (
            f"a statement ran longer than the setting {STATEMENT_TIMEOUT_SETTING} "
            f"({STATEMENT_TIMEOUT_ENV}: {_statement_timeout_ms(None) / 1000:g} s) allows; "
            "is another connection holding a lock (pg_stat_activity)? "
            "end it or raise the setting, then run again (the probes written so far are kept)"
        )
    elif DISK_ERROR.search(what):
        hint = (
            "a full disk or a file-size limit? free space and run again (the probes written so far are "
            "kept in the study's probes.jsonl)"
        )
    else:
        hint = "check the database and run again"
    return f"{where}: {what}; {hint}"
