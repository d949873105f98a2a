"""``skillreach doctor``: what this machine can run, and with which credentials and endpoints.

Shows every registered runtime (installed? usable? the program found and its version, or the SDK and
its version), which provider keys are set (only ever "set" / "not set": no value, no part of a value,
no length), the base URLs in effect, the Prefect API URL and the store URL (passwords and secret query
parameters masked), and whether the service answers: the store (a query), the Prefect server (its
health), the work pool and the workers it has seen, how many alert webhooks are configured (never their
URLs) and the study configuration the deployments will use (``SKILLREACH_STUDY_CONFIG``). ``--json``
prints the same as one JSON object on stdout.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer

from skillreach._io.console import make_console

__all__ = ["KEY_VARIABLES", "collect", "mask_url", "register"]

KEY_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "OPENROUTER_API_KEY",
)
BASE_URL_VARIABLES = (
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_BASE_URL",
)
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "pwd", "sig", "auth", "credential")

# How each runtime is found. Offline runtimes ship in the package; SDK runtimes need their package;
# CLI runtimes need their program (explicit variable, else PATH).
_SDK = {  # runtime -> (module, distribution, the skillreach extra that installs it)
    "anthropic": ("anthropic", "anthropic", "anthropic"),
    "openai-compatible": ("openai", "openai", "openai"),
    "antigravity-sdk": ("google.antigravity", "google-antigravity", "antigravity"),
}
_CLI: dict[str, tuple[str, str | None, str]] = {
    "claude-code": ("claude", "SKILLREACH_CLAUDE_PATH", "npm install -g @anthropic-ai/claude-code"),
    "pi": ("pi", "SKILLREACH_PI_PATH", "npm install -g @mariozechner/pi-coding-agent"),
    "goose": ("goose", "SKILLREACH_GOOSE_PATH", "install the goose CLI from its release page"),
    "antigravity-cli": ("agy", "SKILLREACH_AGY_PATH", "install the Antigravity CLI (agy) and sign in"),
    # found on PATH, or where runtime_options names it (a config file's, not the environment's)
    "codex": ("codex", None, "npm install -g @openai/codex, or pass runtime_options.codex_path"),
    "gemini-cli": ("gemini", None, "npm install @google/gemini-cli, or pass runtime_options.gemini_path"),
    "opencode": ("opencode", None, "npm install opencode-ai, or pass runtime_options.opencode_path"),
    "copilot": ("copilot", None, "npm install @github/copilot, or pass runtime_options.copilot_path"),
}
_OFFLINE = {"fake", "keyword", "retriever"}
_NEEDS_KEY = {"anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")}
"""Runtimes that cannot make a request without one of these variables (openai-compatible can: local
servers take no key)."""


@dataclass
class RuntimeStatus:
    name: str
    usable: bool
    kind: str
    version: str | None = None
    path: str | None = None
    detail: str = ""


@dataclass
class Report:
    skillreach_version: str
    python: str
    runtimes: list[RuntimeStatus] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)
    base_urls: dict[str, str | None] = field(default_factory=dict)
    prefect_api_url: str | None = None
    store_url: str = ""
    home: str = ""
    service: dict[str, str] = field(default_factory=dict)
    """store, server, work pool, workers, webhooks, deployments' study → what was found."""

    def to_json(self) -> dict[str, Any]:
        from skillreach._io.redact import redact

        # the one redaction pass over every value (a token in a base URL's query, a proxy password)
        return dict(redact(asdict(self), keys=False))


def mask_url(url: str) -> str:
    """The URL with its password and any secret-looking query values replaced by ``***``.

    Everything else is kept byte for byte (``sqlite:///relative.db`` stays as it is).
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    masked = url
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            masked = masked.replace(f"{userinfo}@", f"{user}:***@", 1)
    if parts.query:
        secret = "|".join(_SECRET_WORDS)
        masked = re.sub(
            rf"([?&])([^=&#]*(?:{secret})[^=&#]*)=([^&#]*)",
            lambda m: f"{m.group(1)}{m.group(2)}=***",
            masked,
            flags=re.IGNORECASE,
        )
    from skillreach._io.redact import redact_text

    return redact_text(masked)  # and the one pass's rules (``?k=``, ``sig=``, configured keys' values)


def _mask_db_url(url: str) -> str:
    try:
        from sqlalchemy.engine import make_url

        return mask_url(make_url(url).render_as_string(hide_password=True))
    except Exception:
        return mask_url(url)


def _version_of(program: str) -> str | None:
    try:
        proc = subprocess.run(
            [program, "--version"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
            env={**os.environ, "NO_COLOR": "1", "CI": "1"},
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (proc.stdout or proc.stderr or "").strip()
    return text.splitlines()[0][:80] if proc.returncode == 0 and text else None


def _cli_status(
    name: str, program: str, env_var: str | None, hint: str, explicit: str | None
) -> RuntimeStatus:
    candidate = explicit or (os.environ.get(env_var) if env_var else None) or program
    found = shutil.which(candidate)
    if found is None:
        return RuntimeStatus(
            name, False, "cli",
            detail=f"{candidate!r} not found on PATH; {hint}" + (f" or set {env_var}" if env_var else ""),
        )
    version = _version_of(found)
    if version is None:
        return RuntimeStatus(
            name, False, "cli", path=found, detail=f"{found} does not run (`--version` failed)"
        )
    return RuntimeStatus(name, True, "cli", version=version, path=found)


def _sdk_status(name: str, module: str, dist: str, extra: str) -> RuntimeStatus:
    """Found without importing it (the SDKs take seconds to import): its spec and its version."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        hint = f"{module} is not installed; pip install 'skillreach[{extra}]'"
        return RuntimeStatus(name, False, "sdk", detail=hint)
    from importlib import metadata  # here: the command's start-up does without it

    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        version = None
    detail = f"{dist} installed"
    if module == "google.antigravity" and spec.submodule_search_locations:
        harness = Path(next(iter(spec.submodule_search_locations))) / "bin" / "localharness"
        if not os.access(harness, os.X_OK):
            return RuntimeStatus(
                name, False, "sdk", version=version, detail=f"{harness} missing or not executable"
            )
        detail += f", harness {harness}"
    return RuntimeStatus(name, True, "sdk", version=version, detail=detail)


def _runtime_status(name: str, target: str, claude_path: str) -> RuntimeStatus:
    if name in _OFFLINE:
        return RuntimeStatus(name, True, "offline", detail="built in, no key needed")
    if name in _SDK:
        return _sdk_status(name, *_SDK[name])
    if name in _CLI:
        program, env_var, hint = _CLI[name]
        explicit = claude_path if name == "claude-code" and claude_path != "claude" else None
        return _cli_status(name, program, env_var, hint, explicit)
    module = target.partition(":")[0]
    try:
        importlib.import_module(module)
    except Exception as exc:
        return RuntimeStatus(name, False, "other", detail=f"cannot import {module} ({type(exc).__name__})")
    return RuntimeStatus(name, True, "other", detail=f"{module} importable")


def _prefect_api_url() -> str | None:
    url = os.environ.get("PREFECT_API_URL")
    if url:
        return mask_url(url)
    try:
        from prefect.settings import get_current_settings

        configured = get_current_settings().api.url
    except Exception:
        return None
    return mask_url(str(configured)) if configured else None


POOL = os.environ.get("SKILLREACH_WORK_POOL") or "skillreach"


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:200]


def _check_store(url: str) -> str:
    """One query against the store, without creating or migrating anything."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database or ""
        if db and db != ":memory:" and not Path(db).exists():
            return f"not created yet ({db}): the first run creates it"
    args = {"connect_timeout": 3} if parsed.get_backend_name() == "postgresql" else {}
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in ("psycopg2", "postgresql"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    try:
        engine = create_engine(parsed, connect_args=args)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
                try:
                    revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
                except Exception:
                    revision = None
        finally:
            engine.dispose()
    except Exception as exc:
        return f"error: {_first_line(exc)}"
    return f"ok (schema {revision})" if revision else "ok (no schema yet: the first run creates it)"


def _check_server(api: str | None, pool: str) -> dict[str, str]:
    """The server's health, then the pool and its workers (REST; two seconds for each whole answer,
    bounded in size and checked for its shape: ``PREFECT_API_URL`` may name anything)."""
    if not api:
        return {"server": "PREFECT_API_URL not set: runs are in-process; `skillreach serve` starts one"}
    from skillreach.cli._prefect_api import ApiProblem, fetch_json, server_answers

    base = api.rstrip("/")
    shown = mask_url(base)
    why = server_answers(base, deadline_s=2, version=False)  # what follows is read as carefully
    if why is not None:
        return {"server": f"no answer at {shown} ({why}); start it with `skillreach serve`"}
    found = {"server": f"healthy at {shown}"}
    try:
        got = fetch_json(base, f"/work_pools/{pool}", shape=dict)
        found["work pool"] = f"{pool!r} ({str(got.get('type', '?'))[:40]})"
        workers = [w for w in fetch_json(base, f"/work_pools/{pool}/workers/filter", body={}, shape=list)
                   if isinstance(w, dict)]
    except ApiProblem as exc:
        if exc.status == 404:
            found["work pool"] = f"{pool!r} missing; `skillreach serve` creates it"
            return found
        found.setdefault("work pool", f"cannot read {pool!r} ({exc})")
        return found
    online = [w for w in workers if str(w.get("status", "")).upper() == "ONLINE"]
    last = max((str(w.get("last_heartbeat_time") or "")[:40] for w in workers), default="")
    seen = f"{len(workers)} seen, {len(online)} online" + (f", last heartbeat {last}" if last else "")
    found["workers"] = seen if workers else "none seen: no run will start (`skillreach serve` runs one)"
    return found


def _deployments_study() -> str:
    """What the deployments will measure: ``SKILLREACH_STUDY_CONFIG``, else the bundled example."""
    from skillreach.errors import SkillreachError
    from skillreach.study import StudyConfig

    path = os.environ.get("SKILLREACH_STUDY_CONFIG")
    if not path:
        return "SKILLREACH_STUDY_CONFIG not set: the bundled example (offline)"
    if not Path(path).is_file():
        return f"error: SKILLREACH_STUDY_CONFIG={path}: no such file"
    try:
        cfg = StudyConfig.build(Path(path))
    except SkillreachError as exc:
        return f"error: {exc.message}"
    what = "the bundled example" if cfg.is_example else (
        f"skills {', '.join(map(str, cfg.skills))}; queries {cfg.queries}")
    model = f" {cfg.model}" if cfg.model else ""
    return f"{path}: runtime {cfg.runtime}{model}, catalog {cfg.catalog}, {cfg.attempts} attempt(s); {what}"


def collect(config: Path | None = None) -> Report:
    """Everything doctor shows, as data (no secret values ever enter it)."""
    from skillreach.runtimes import REGISTRY
    from skillreach.settings import load_settings

    settings = load_settings(config)
    from importlib import metadata  # here: the command's start-up does without it

    try:
        version = metadata.version("skillreach")
    except metadata.PackageNotFoundError:
        version = "unknown"
    report = Report(skillreach_version=version, python=f"{platform.python_version()} ({sys.executable})")
    report.runtimes = [_runtime_status(n, REGISTRY[n], settings.claude_path) for n in sorted(REGISTRY)]
    for status in report.runtimes:
        needed = _NEEDS_KEY.get(status.name)
        if status.usable and needed and not any(os.environ.get(v) for v in needed):
            status.usable = False
            status.detail = f"{status.detail}; set {' or '.join(needed)}".lstrip("; ")
    report.keys = {var: ("set" if os.environ.get(var) else "not set") for var in KEY_VARIABLES}
    report.base_urls = {
        var: (mask_url(os.environ[var]) if os.environ.get(var) else None) for var in BASE_URL_VARIABLES
    }
    report.prefect_api_url = _prefect_api_url()
    report.store_url = _mask_db_url(settings.resolved_database_url())
    report.home = str(settings.home)
    report.service["store"] = _check_store(settings.resolved_database_url())
    api = os.environ.get("PREFECT_API_URL") or None
    report.service.update(_check_server(api, POOL))
    hooks = len(settings.alert_webhooks)
    report.service["alert webhooks"] = (f"{hooks} configured" if hooks else
                                        "none: alerts are stored, not sent (SKILLREACH_ALERT_WEBHOOKS)")
    report.service["deployments' study"] = _deployments_study()
    return report


def _print(report: Report) -> None:
    from rich.table import Table

    console = make_console()
    console.print(f"[bold]skillreach[/bold] {report.skillreach_version} · Python {report.python}")
    runtimes = Table(title="Runtimes", title_justify="left")
    runtimes.add_column("runtime")
    runtimes.add_column("usable")
    runtimes.add_column("kind")
    runtimes.add_column("version")
    runtimes.add_column("where / what to do")
    from rich.markup import escape  # ``skillreach[anthropic]`` is text, not a markup tag

    for r in report.runtimes:
        mark = "[green]yes[/green]" if r.usable else "[red]no[/red]"
        runtimes.add_row(escape(r.name), mark, r.kind, escape(r.version or ""), escape(r.path or r.detail))
    console.print(runtimes)
    keys = Table(title="Credentials (values are never shown)", title_justify="left")
    keys.add_column("variable")
    keys.add_column("status")
    for var, status in report.keys.items():
        keys.add_row(var, "[green]set[/green]" if status == "set" else "[dim]not set[/dim]")
    console.print(keys)
    where = Table(title="Endpoints and storage", title_justify="left")
    where.add_column("setting")
    where.add_column("in effect")
    for var, url in report.base_urls.items():
        where.add_row(var, url or "[dim](not set: the SDK default)[/dim]")
    where.add_row("PREFECT_API_URL", report.prefect_api_url or "[dim](not set: ephemeral local server)[/dim]")
    where.add_row("store (database URL)", report.store_url)
    where.add_row("home", report.home)
    console.print(where)
    service = Table(title="Service", title_justify="left")
    service.add_column("check")
    service.add_column("found")
    for name, found in report.service.items():
        shown = escape(found)
        service.add_row(name, f"[red]{shown}[/red]" if found.startswith(("error", "no answer")) else shown)
    console.print(service)
    if report.prefect_api_url:  # distributed probing: the server, the batch workers it sees, the store
        from skillreach.cli.worker_cmds import worker_lines

        for line in worker_lines():
            console.print(line, markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor(
        config: Path | None = typer.Option(None, "--config", help="Settings file (TOML or YAML)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
    ) -> None:
        """Which runtimes are installed and usable, which keys are set (never their values), endpoints."""
        report = collect(config)
        if as_json:
            print(json.dumps(report.to_json(), indent=2))
        else:
            _print(report)
