"""The dashboard served by uvicorn: in the foreground (``skillreach ui``) or in a thread beside the service
(``skillreach serve``, read-only)."""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["DEFAULT_PORT", "Dashboard", "build", "check_port", "dashboard_beside", "serve_foreground",
           "start_beside"]

DEFAULT_PORT = 8420
log = logging.getLogger("skillreach.ui")


@dataclass
class Dashboard:
    app: Any
    ctx: Any
    token: str | None
    indexer: Any
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def _allowed_hosts(host: str, ui_url: str | None) -> list[str]:
    """The ``Host`` headers the dashboard answers (a DNS-rebinding page names another host)."""
    if host in ("0.0.0.0", "::", ""):  # served on every address: the person chose to expose it
        return ["*"]
    names = {host, "127.0.0.1", "localhost", "::1", "[::1]"}
    if ui_url:
        name = urlsplit(ui_url).hostname
        if name:
            names.add(name)
    return sorted(names)


def build(settings: Any, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, writes: bool = False,
          baselines_dir: Path | None = None, branch: str | None = None,
          skills_dirs: Sequence[Path] = (), index_interval_s: float = 10.0) -> Dashboard:
    """The application over the store ``settings`` name, the baselines in ``baselines_dir`` (default:
    the setting) and the service branch, the skills folders (their history marks the charts)."""
    from skillreach.store import open_store
    from skillreach.ui.app import create_app
    from skillreach.ui.context import UiContext
    from skillreach.ui.indexer import Indexer

    store = open_store(settings)
    ctx = UiContext.build(
        store=store, settings=settings,
        baselines_dir=baselines_dir or Path(settings.baselines_dir),
        branch=settings.baselines_branch if branch is None else (branch or None),
        skills_dirs=list(skills_dirs) or [Path("skills")], writes=writes,
        prefect_ui=os.environ.get("PREFECT_UI_URL") or None,
    )
    token = secrets.token_urlsafe(24) if writes else None
    indexer = Indexer(store, interval_s=index_interval_s)
    app = create_app(ctx, token=token, allowed_hosts=_allowed_hosts(host, getattr(settings, "ui_url", None)),
                     background=_Background(indexer, ctx))
    return Dashboard(app, ctx, token, indexer, host, port)


def _warm_up(ctx: Any) -> None:
    """Load what the heavier pages compute with (the diff's statistics: ``scipy.stats``, 1–2 s to import)
    and read the skills table once (the database's connections and pages, git's), at start, off the
    pages' path, so a person's first page does not wait for them."""
    import scipy.stats  # noqa: F401 - imported for its modules

    from skillreach.author.diff import diff_arms  # noqa: F401 - imported for its modules
    from skillreach.reports.diff import render_diff_html  # noqa: F401
    from skillreach.ui.skill_pages import skill_rows

    try:
        skill_rows(ctx)
    except Exception as exc:  # the page will say it, in its one line
        log.info("warm-up: %s", type(exc).__name__)
    ctx.sources.live_read.wait(300)
    ctx.warmed.set()


class _Background:
    """What reads while the dashboard serves: the run folders into the history, the live events."""

    def __init__(self, indexer: Any, ctx: Any) -> None:
        self.indexer, self.ctx, self.sources = indexer, ctx, ctx.sources

    def start(self) -> None:
        self.indexer.start()
        self.sources.start_live()
        threading.Thread(target=_warm_up, args=(self.ctx,), name="skillreach-ui-warm-up", daemon=True).start()

    def stop(self) -> None:
        self.sources.stop_live()
        self.indexer.stop()


def _server(d: Dashboard) -> Any:
    import uvicorn

    # no access log: a session's first request carries its token in the address
    config = uvicorn.Config(d.app, host=d.host, port=d.port, log_level="warning", access_log=False,
                            lifespan="on", timeout_graceful_shutdown=5)
    return uvicorn.Server(config)


def serve_foreground(d: Dashboard, say: Callable[[str], None]) -> int:
    """Serve until Ctrl-C (or SIGTERM); says where, and the session link when writes are enabled."""
    check_port(d.host, d.port)
    server = _server(d)
    say(f"skillreach ui: {d.url}/  (store {d.ctx.store.safe_url}; "
        + ("decisions enabled" if d.token else "read-only") + ")")
    if d.token:
        say(f"  decisions: open {d.url}/?token={d.token} in your browser (this session only)")
    try:
        server.run()
    finally:
        d.ctx.store.close()
    return 0


def check_port(host: str, port: int) -> None:
    """One line (:class:`ConfigError`) when ``host:port`` cannot be listened on, before anything starts."""
    import socket

    from skillreach.errors import ConfigError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); pass --port N "
                              "or --host ADDRESS") from None


class Beside(threading.Thread):
    """The dashboard's server in a daemon thread; :meth:`stop` ends it."""

    def __init__(self, server: Any) -> None:
        super().__init__(target=server.run, name="skillreach-ui", daemon=True)
        self.server = server

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.join(timeout_s)


def start_beside(settings: Any, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 log_line: Callable[[str], None] = print) -> Beside | None:
    """``skillreach serve``'s dashboard: read-only, in a daemon thread (``None`` and one line when it
    cannot start: the service runs without it)."""
    try:
        check_port(host, port)
        d = build(settings, host=host, port=port)
    except Exception as exc:  # the service is worth more than its dashboard
        log_line(f"serve: dashboard not started ({getattr(exc, 'message', type(exc).__name__)})")
        return None
    server = _server(d)
    thread = Beside(server)
    thread.start()
    log_line(f"serve: dashboard at {d.url}/ (read-only; skillreach ui --allow-writes for decisions)")
    return thread


def dashboard_beside(env: dict[str, str], *, host: str = "127.0.0.1",
                     log: Callable[[str], None] = print) -> Beside | None:
    """``skillreach serve``'s one call: the dashboard, read-only, beside the Prefect UI (port
    ``SKILLREACH_UI_PORT``, else 8420); the flow runs' alerts link to it (``SKILLREACH_UI_URL`` in
    ``env``, the service's environment, unless it names another address already)."""
    from skillreach.errors import SkillreachError
    from skillreach.settings import load_settings

    try:
        port = int(env.get("SKILLREACH_UI_PORT") or DEFAULT_PORT)
        settings = load_settings()
    except (ValueError, SkillreachError) as exc:
        log(f"serve: dashboard not started ({getattr(exc, 'message', exc)})")
        return None
    thread = start_beside(settings, host=host, port=port, log_line=log)
    if thread is not None:
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        env.setdefault("SKILLREACH_UI_URL", f"http://{shown}:{port}")
    return thread
