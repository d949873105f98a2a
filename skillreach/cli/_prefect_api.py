"""What the CLI asks a Prefect server directly (is it up; its runs, pool and workers for ``status``),
treating ``PREFECT_API_URL`` as input, through the one bounded reader
(:mod:`skillreach.tasks.prefect_api`: a deadline for the whole exchange, a bound on the bytes read, the
JSON checked for the shape asked for). Every way of failing is one :class:`ApiProblem` with a short
reason; callers say it in their line and fall back (``run`` probes in-process, ``status`` reports it).
"""

from __future__ import annotations

import os
from typing import Any

from skillreach.tasks import prefect_api
from skillreach.tasks.prefect_api import MAX_BYTES, ApiProblem

__all__ = ["MAX_BYTES", "ApiProblem", "api_from_settings", "check_api_url", "fetch_json", "server_answers"]


def fetch_json(api: str, path: str, **bounds: Any) -> Any:
    """:func:`skillreach.tasks.prefect_api.fetch_json` of ``path`` under ``api``; when the server refuses
    it (401, 403) and ``api`` is the API of Prefect's settings, asked once more with their credentials
    (a server behind its ``PREFECT_SERVER_API_AUTH_STRING``, or Prefect Cloud, answers ``status``,
    ``doctor``, ``gc`` and ``run``'s check as it answers Prefect). Asked without them first: reading
    Prefect's settings imports Prefect (seconds), which an open server — the usual one — never costs."""
    try:
        return prefect_api.fetch_json(api, path, **bounds)
    except ApiProblem as exc:
        if exc.status not in (401, 403):
            raise
        target = prefect_api.with_credentials(api, path)
        if not target.headers:
            raise
    return prefect_api.fetch_json(target, path, **bounds)


def _refuse(shown: str, reason: str) -> None:
    from skillreach.errors import ConfigError

    raise ConfigError(
        f"PREFECT_API_URL ({shown}): Prefect cannot read it ({reason[:120]}); set it to a Prefect "
        "server's API URL (http://127.0.0.1:4200/api) or unset it to run in-process"
    )


def check_api_url() -> None:
    """``PREFECT_API_URL`` checked the way Prefect's settings parse it, before Prefect is imported (whose
    import prints the settings' validation error as it fails): one ConfigError naming the variable."""
    from urllib.parse import urlsplit

    raw = os.environ.get("PREFECT_API_URL")
    if not raw:
        return
    try:
        _ = urlsplit(raw).port
    except ValueError as exc:
        from skillreach._io.urls import url_label

        _refuse(url_label(raw), str(exc))


def api_from_settings() -> str | None:
    """The configured API URL (``PREFECT_API_URL``, else Prefect's profile), or ``None``. A value
    Prefect itself cannot read is a :class:`~skillreach.errors.ConfigError` naming the variable."""
    check_api_url()
    raw = os.environ.get("PREFECT_API_URL")
    try:
        from prefect.settings import get_current_settings

        url = get_current_settings().api.url
    except Exception as exc:  # pydantic's ValidationError: Prefect refuses the URL at all
        from skillreach._io.urls import url_label

        shown = url_label(raw) if raw else "the profile's api.url"
        lines = str(exc).splitlines()
        _refuse(shown, lines[1].split(" [type=")[0].strip() if len(lines) > 1 else type(exc).__name__)
    return str(url) if url else None


def server_answers(api: str, *, deadline_s: float = 1.5, version: bool = True) -> str | None:
    """``None`` when a Prefect server answers at ``api`` — its health check ``true`` and (``version``)
    its version a version (what Prefect's own client asks first, and fails on with a traceback), each
    whole within the deadline — else why not."""
    import re

    try:
        healthy = fetch_json(api, "/health", deadline_s=deadline_s, max_bytes=1024, shape=bool)
        if healthy is not True:
            return "answered /health with false"
        if not version:
            return None
        said = fetch_json(api, "/admin/version", deadline_s=deadline_s, max_bytes=1024, shape=str)
    except ApiProblem as exc:
        return str(exc)
    if not re.fullmatch(r"\d+\.\d+[\w.+-]*", said):
        return "answered /admin/version with something other than a version"
    return None
