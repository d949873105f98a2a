"""Which service a command describes, and how it reads that service's configuration.

``status``, ``baseline status``, ``alerts`` and ``gc`` describe the service, not the folder they happen to
run in: the folder given (``--service FOLDER`` or ``$SKILLREACH_SERVICE``), else the nearest folder up from
here where ``skillreach serve`` ran (its ``.skillreach/service.json``), else the service the Prefect API
names (``PREFECT_API_URL``, else serve's default ``http://127.0.0.1:4200/api``: ``serve`` keeps its folder
in the Prefect variable ``skillreach-service``). Each says in one line which service it describes and how
to point it at another (:func:`service_line`).

The store is the service's: its URL as ``service.json`` has it (no password there); a store behind a
password is opened with ``SKILLREACH_DATABASE_URL`` (or the service's configuration file, when it holds
the URL) and only when that names the same store.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from skillreach.service.instance import SERVICE_ENV, ServiceInfo, find_service, mask_url, read_service

__all__ = [
    "DEFAULT_API",
    "POINT_ELSEWHERE",
    "SERVICE_VARIABLE",
    "api_json",
    "locate",
    "service_line",
    "service_settings",
]

DEFAULT_API = "http://127.0.0.1:4200/api"
"""Where ``skillreach serve`` puts the Prefect API when given no ``--port``."""
SERVICE_VARIABLE = "skillreach-service"
"""The Prefect variable ``serve`` keeps its folder in (so a command anywhere can find the service)."""
POINT_ELSEWHERE = f"--service FOLDER (or {SERVICE_ENV}, or PREFECT_API_URL) describes another"
MAX_API_BYTES = 4 * 2**20
"""An answer of the Prefect API larger than this is not read (a hostile or wrong URL)."""


def api_json(method: str, url: str, body: Any = None, *, timeout_s: float = 3.0,
             max_bytes: int = MAX_API_BYTES) -> Any:
    """One call to the Prefect API (``method`` is POST with a ``body``, else GET) through the one bounded
    reader, :func:`skillreach.cli._prefect_api.fetch_json`: ``timeout_s`` is a deadline for the whole
    exchange (a server that drips its answer cannot hold it), ``max_bytes`` caps the answer. Raises
    ``ValueError`` (with the reason) for anything but a 2xx answer of JSON or no answer at all."""
    from skillreach.cli._prefect_api import ApiProblem, fetch_json

    if (method.upper() == "POST") != (body is not None):
        raise ValueError(f"{method} with{'out' if body is None else ''} a body is not a call made here")
    base, _, path = url.rstrip("/").rpartition("/")
    try:
        return fetch_json(base, path, body=body, deadline_s=timeout_s, max_bytes=max_bytes)
    except ApiProblem as exc:
        raise ValueError(str(exc)) from None


def _from_prefect(api: str) -> ServiceInfo | None:
    """The service whose folder the Prefect server at ``api`` names, when one answers there."""
    import httpx

    from skillreach.errors import InputError

    try:
        got = api_json("GET", f"{api.rstrip('/')}/variables/name/{SERVICE_VARIABLE}", timeout_s=2.0)
    except (httpx.HTTPError, ValueError):
        return None
    value = got.get("value") if isinstance(got, dict) else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    folder = value.get("folder") if isinstance(value, dict) else None
    if not isinstance(folder, str) or not folder:
        return None
    try:
        return read_service(Path(folder))
    except InputError:
        return None


def locate(service: str | None = None) -> tuple[ServiceInfo | None, str]:
    """``(the service, how it was found)``; ``(None, why)`` when none was."""
    given = service or os.environ.get(SERVICE_ENV) or None
    info = find_service(Path.cwd(), given)
    if info is not None:
        how = "--service" if service else (SERVICE_ENV if given else "this folder")
        return info, how
    api = os.environ.get("PREFECT_API_URL") or DEFAULT_API
    info = _from_prefect(api)
    if info is not None:
        return info, f"the Prefect server at {mask_url(api)[0]}"
    return None, "no skillreach service found from here"


def service_line(info: ServiceInfo | None, how: str) -> str:
    """The one line saying which service a command describes, and how to point it at another."""
    if info is None:
        return (f"service: none found ({how}); describing this folder ({Path.cwd()}) — "
                f"{POINT_ELSEWHERE}")
    return f"{info.line()} (found by {how}) — {POINT_ELSEWHERE}"


def service_settings(info: ServiceInfo | None) -> Any:
    """The settings that open ``info``'s store (this folder's settings when there is no service)."""
    from skillreach.errors import ConfigError
    from skillreach.settings import load_settings

    settings = load_settings()
    if info is None:
        return settings
    url: str | None = info.store
    if info.store_secret:
        url = _secret_url(info, settings.database_url)
        if url is None:
            raise ConfigError(
                f"the service in {info.folder} keeps its store at {info.store}, behind a password: set "
                "SKILLREACH_DATABASE_URL to that URL to read it")
    home = Path(info.home) if info.home else settings.home
    return settings.model_copy(update={"database_url": url or None, "home": home})


def _secret_url(info: ServiceInfo, own: str | None) -> str | None:
    """The full URL of a store behind a password: this environment's, or the one the service's
    configuration file holds — only when it names the same store as ``service.json``."""
    if own and mask_url(own)[0] == info.store:
        return own
    if info.config_file:
        from skillreach.errors import SkillreachError
        from skillreach.study import StudyConfig

        try:
            cfg = StudyConfig.build(Path(info.config_file))
        except SkillreachError:
            return None
        theirs = cfg.settings().database_url
        if theirs and mask_url(theirs)[0] == info.store:
            return str(theirs)
    return None
