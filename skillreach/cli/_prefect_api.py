"""What the CLI asks a Prefect server directly (is it up; its runs, pool and workers for ``status``),
treating ``PREFECT_API_URL`` as input, through the one bounded reader
(:mod:`skillreach.tasks.prefect_api`: a deadline for the whole exchange, a bound on the bytes read, the
JSON checked for the shape asked for). Every way of failing is one :class:`ApiProblem` with a short
reason; callers say it in their line and fall back (``run`` probes in-process, ``status`` reports it).
"""

from __future__ import annotations

import os

from skillreach.tasks.prefect_api import MAX_BYTES, ApiProblem, fetch_json

__all__ = ["MAX_BYTES", "ApiProblem", "api_from_settings", "check_api_url", "fetch_json", "server_answers"]


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
