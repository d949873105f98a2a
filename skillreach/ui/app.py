"""The dashboard's Starlette application: the pages, the static stylesheet, and the one write — a
candidate accepted as its skill's bar.

**Reading** needs nothing. **Writing** needs three things, each checked on every request:

1. the dashboard was started with writes enabled (``skillreach ui --allow-writes``; read-only otherwise:
   every write is refused, and the page says how to decide from the command line instead);
2. the request carries the session's token: ``skillreach ui`` prints one address with ``?token=…``
   once; opening it puts the token in an ``HttpOnly``, ``SameSite=Strict`` cookie (and drops it from the
   address), so a page of another site can neither send it nor read it;
3. the form carries the CSRF value derived from that token (an HMAC), which only a page served to that
   session holds; a request another site sends (``Sec-Fetch-Site: cross-site``, or an ``Origin`` that is
   not the dashboard's) is refused before anything else.

Every response carries a Content-Security-Policy with no script source at all (the pages have no
script), ``frame-ancestors 'self'``, ``nosniff`` and a same-origin referrer policy; the ``Host`` header
must name the dashboard (a DNS-rebinding page cannot read it).
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import logging
import threading
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable
from hashlib import sha256
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from skillreach._io.redact import redact_text, secret_values
from skillreach.errors import InputError, NotFoundError, SkillreachError
from skillreach.reports import fmt_num, fmt_rate
from skillreach.ui.context import UiContext, when

__all__ = ["COOKIE", "MAX_FORM_BYTES", "create_app", "csrf_value"]

log = logging.getLogger("skillreach.ui")

COOKIE = "skillreach_ui_session"
MAX_FORM_BYTES = 16 * 1024
"""A decision's form (skill, name, reason, CSRF value) is far smaller; more is refused unread."""
MAX_NAME, MAX_REASON = 80, 500
CSP = ("default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'self'; base-uri 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin", "X-Frame-Options": "SAMEORIGIN", "Cache-Control": "no-store"}


def csrf_value(token: str) -> str:
    """The form value a session's pages carry (an HMAC of the token: the token itself never is in a page)."""
    return hmac.new(token.encode(), b"skillreach-ui-csrf", sha256).hexdigest()


_PAGE = threading.local()
"""The secret values of the page being rendered (read once per page, not once per text)."""


def _finalize(value: Any) -> Any:
    """Every text a template prints goes through the one redaction (then autoescape)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return redact_text(value, getattr(_PAGE, "values", None))
    return value


def _ci(ci: Any) -> str:
    return "" if ci is None else f"[{fmt_num(ci[0])}, {fmt_num(ci[1])}]"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.3f}"


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("skillreach.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=fmt_num, ci=_ci, rate=fmt_rate, when=when, pct=_pct, signed=_signed,
                       seg=lambda s: quote(str(s), safe=""), qs=urlencode)
    return env


def _css() -> str:
    return resources.files("skillreach.ui").joinpath("static/ui.css").read_text(encoding="utf-8")


def _clean_line(value: str, field: str, limit: int) -> str:
    """One line of a person's text: whitespace runs made one space, no control or format character."""
    text = " ".join(value.split())
    if not text:
        raise InputError(f"{field}: required; say who decides and why")
    if len(text) > limit:
        raise InputError(f"{field}: {len(text)} characters, more than {limit}; shorten it")
    if any(unicodedata.category(c)[0] == "C" for c in text):
        raise InputError(f"{field}: holds a control or format character; type it again")
    return text


class _Guard(BaseHTTPMiddleware):
    """The session's token from ``?token=`` into its cookie; the headers on every response."""

    def __init__(self, app: Any, token: str | None) -> None:
        super().__init__(app)
        self.token = token

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        given = request.query_params.get("token")
        if given is not None and request.method == "GET":
            if self.token is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                response: Response = HTMLResponse(
                    "<!doctype html><title>skillreach</title><p>This is not this dashboard's session token "
                    "(or it was started read-only). Open the address <code>skillreach ui</code> printed.",
                    status_code=403)
            else:
                rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
                response = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
        else:
            response = await call_next(request)
        for k, v in HEADERS.items():
            response.headers.setdefault(k, v)
        return response


def create_app(ctx: UiContext, *, token: str | None = None, allowed_hosts: list[str] | None = None,
               background: Any = None) -> Starlette:
    """The dashboard over ``ctx``; ``token``: the session's token (writes need it; ``None``: read-only);
    ``background``: what runs while the application serves (``start()`` and ``stop()``: the indexer)."""
    writes = ctx.writes and token is not None

    def session(request: Request) -> bool:
        got = request.cookies.get(COOKIE)
        return bool(writes and token and got and hmac.compare_digest(got.encode(), token.encode()))

    def render(request: Request, name: str, data: dict[str, Any], status: int = 200) -> HTMLResponse:
        ok = session(request)
        _PAGE.values = secret_values()
        try:
            page = _env().get_template(name).render(
                **data, nav=name.split(".", maxsplit=1)[0], writes=writes, session=ok,
                csrf=csrf_value(token) if ok and token else "", args=request.query_params)
        finally:
            _PAGE.values = None
        return HTMLResponse(page, status_code=status)

    def failure(request: Request, exc: BaseException, status: int | None = None) -> HTMLResponse:
        if isinstance(exc, SkillreachError):
            code = status or (404 if isinstance(exc, NotFoundError) else 400)
            return render(request, "error.html.j2", {"title": "Error", "message": exc.message}, code)
        log.exception("dashboard page %s failed", request.url.path)
        return render(request, "error.html.j2", {"title": "Error", "message":
                      f"internal error ({type(exc).__name__}); the dashboard's log says more"}, 500)

    def page(build: Callable[[Request], tuple[str, dict[str, Any]]]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            try:
                name, data = build(request)
                return render(request, name, data)
            except Exception as exc:  # one page, one line: never a traceback in the browser
                return failure(request, exc)

        return endpoint

    from skillreach.ui import run_pages, skill_pages

    def params(request: Request) -> dict[str, str]:
        return {k: v[:400] for k, v in request.query_params.items()}

    @page
    def skills(request: Request) -> tuple[str, dict[str, Any]]:
        return "skills.html.j2", skill_pages.skills_view(ctx)

    @page
    def skill(request: Request) -> tuple[str, dict[str, Any]]:
        runtime = request.query_params.get("runtime")
        return "skill.html.j2", skill_pages.skill_view(ctx, request.path_params["name"], runtime)

    @page
    def runs(request: Request) -> tuple[str, dict[str, Any]]:
        return "runs.html.j2", run_pages.runs_view(ctx, params(request))

    @page
    def run(request: Request) -> tuple[str, dict[str, Any]]:
        return "run.html.j2", run_pages.run_view(ctx, request.path_params["study_id"], params(request))

    @page
    def probe(request: Request) -> tuple[str, dict[str, Any]]:
        p = request.path_params
        return "probe.html.j2", run_pages.probe_view(ctx, p["study_id"], p["query_id"], int(p["attempt"]))

    @page
    def compare(request: Request) -> tuple[str, dict[str, Any]]:
        return "compare.html.j2", run_pages.compare_view(ctx, params(request))

    @page
    def agents(request: Request) -> tuple[str, dict[str, Any]]:
        return "agents.html.j2", run_pages.agents_view(ctx)

    @page
    def decisions(request: Request) -> tuple[str, dict[str, Any]]:
        return "decisions.html.j2", skill_pages.decisions_view(ctx)

    def refuse(request: Request, message: str, status: int = 403) -> HTMLResponse:
        return render(request, "error.html.j2", {"title": "Refused", "message": message}, status)

    async def accept(request: Request) -> Response:
        if not writes:
            return refuse(request, "read-only: this dashboard was started without --allow-writes, so nothing "
                          "was written; accept with skillreach baseline accept NAME, or start skillreach ui "
                          "--allow-writes")
        site = request.headers.get("sec-fetch-site")
        origin = request.headers.get("origin")
        if (site and site not in ("same-origin", "none")) or (
                origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host")):
            return refuse(request, "refused: the request came from another site")
        if not session(request):
            return refuse(request, "refused: the request does not carry this session's token; open the "
                          "address skillreach ui printed (…/?token=…) in this browser first")
        if int(request.headers.get("content-length") or MAX_FORM_BYTES + 1) > MAX_FORM_BYTES:
            return refuse(request, f"refused: a decision's form is at most {MAX_FORM_BYTES} bytes", 413)
        form = await request.form(max_files=0, max_fields=8)
        given = str(form.get("csrf") or "")
        if token is None or not hmac.compare_digest(given.encode(), csrf_value(token).encode()):
            return refuse(request, "refused: the form does not carry this session's CSRF value; reload the "
                          "decisions page and decide again")
        try:
            skill = str(form.get("skill") or "")
            by = _clean_line(str(form.get("name") or ""), "name", MAX_NAME)
            reason = _clean_line(str(form.get("reason") or ""), "reason", MAX_REASON)
            done = await run_in_threadpool(_accept, ctx, skill, by, reason)
        except Exception as exc:
            return failure(request, exc)
        sha = done.committed.sha or ""
        return RedirectResponse(f"/decisions?{urlencode({'accepted': skill, 'commit': sha, 'by': by})}",
                                status_code=303)

    def css(request: Request) -> Response:
        return Response(_css(), media_type="text/css", headers={"Cache-Control": "max-age=3600"})

    def health(request: Request) -> Response:
        from skillreach.store.dashboard import index_progress

        read, total = index_progress(ctx.store)
        return JSONResponse({"ok": True, "studies_read": read, "studies": total, "writes": writes,
                             "ready": ctx.warmed.is_set()})

    routes = [
        Route("/", skills), Route("/skills", skills), Route("/skills/{name:path}", skill),
        Route("/runs", runs), Route("/runs/{study_id}", run),
        Route("/runs/{study_id}/probes/{attempt:int}/{query_id:path}", probe),
        Route("/compare", compare), Route("/agents", agents), Route("/decisions", decisions),
        Route("/decisions/accept", accept, methods=["POST"]), Route("/static/ui.css", css),
        Route("/healthz", health),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or ["*"]),
                  Middleware(_Guard, token=token if writes else None)]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if background is not None:
            background.start()
        try:
            yield
        finally:
            if background is not None:
                await run_in_threadpool(background.stop)

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan, max_body_size=MAX_FORM_BYTES)


_ACCEPTING = threading.Lock()


def _accept(ctx: UiContext, skill: str, by: str, reason: str) -> Any:
    """``baseline accept`` with who and why, one at a time (:func:`accept_candidate`)."""
    from skillreach.baselines.record_store import accept_candidate

    base = ctx.sources.baselines
    repos = [r for r in (base.service, base.repo) if r is not None]
    if not repos:
        raise InputError(f"{base.folder}: not inside a git work tree; decisions are commits there")
    if skill not in base.candidates():
        raise NotFoundError(f"skill {skill[:80]!r}: no candidate waits; see the decisions page")
    with _ACCEPTING:
        done = accept_candidate(repos, skill, by=f"{by} (skillreach ui)", reason=reason)
    if done is None:
        raise NotFoundError(f"skill {skill[:80]!r}: no candidate waits any more (accepted meanwhile?)")
    log.info("accepted %s as %s's baseline: commit %s by %s", done.record.baseline_id, skill,
             (done.committed.sha or "")[:12], by)
    return done
