"""The ``Skill`` tool conversation that the API runtimes (``anthropic``, ``openai-compatible``) share.

- :data:`SYSTEM_PROMPT` and :func:`skill_tool`: the one tool whose description lists every resident
  skill's name and description (never a body: progressive disclosure).
- :class:`SkillDialogue`: one probe's decisions, whatever the wire format — what each tool call gets
  back (a skill's body, an unknown-skill error, a canned result of the simulated tool environment in
  compliance mode), what the tracker is told, and when the probe ends (the tracker says stop, the
  compliance step budget is spent, the routing turn cap is reached). Each runtime only translates its
  API's messages to and from it.
- :func:`reply_budget`: a routing request's ``max_tokens`` (``routing_max_tokens``: a decision, not an
  essay); compliance mode and ``keep_answer`` keep the runtime's full budget.
- :func:`blind_hint`: what the canary's failure tells the user to check for the endpoint at hand.
- :func:`classify_sdk_error`: the official SDKs (``anthropic``, ``openai``) share their exception
  classes' names and shape; a status error is transient (retry) or final by status and
  ``x-should-retry``, honouring ``retry-after-ms`` / ``retry-after``.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from skillreach.errors import ProbeFailed, TransientProbeError
from skillreach.models import Catalog, Query, Skill, ToolCall
from skillreach.runtimes._toolenv import TOOL_NAMES, canned_result
from skillreach.study.contract import ProbeOptions, Tracker, compliance_answer

__all__ = [
    "SKILL_TOOL",
    "SYSTEM_PROMPT",
    "SkillDialogue",
    "ToolAnswer",
    "blind_hint",
    "classify_sdk_error",
    "endpoint_error",
    "error_detail",
    "reply_budget",
    "retry_after",
    "skill_body",
    "skill_tool",
]

SKILL_TOOL = "Skill"

SYSTEM_PROMPT = (
    "You are a capable assistant working in a software project. Skills are packaged instructions "
    "for specific tasks; the Skill tool lists the skills available here. When the user's request "
    "matches a skill's description, invoke the Skill tool with that skill's name before doing "
    "anything else, then follow the instructions it returns. Do not invoke a skill whose description "
    "does not fit the request; if no skill fits, answer directly without calling Skill."
)


def skill_tool(catalog: Catalog, *, names_enum: bool = False) -> dict[str, Any]:
    """The one tool (Messages API form): its description lists names and descriptions only.

    ``names_enum`` also lists the names as the ``skill`` argument's ``enum`` (``runtime_options:
    {skill_enum: true}``): a server that constrains its output to the schema (llama.cpp's grammar
    under ``tool_choice``) can then name only a resident skill; providers take it as a hint."""
    listing = "\n".join(f"- {s.name}: {s.description}" for s in catalog.skills)
    description = (
        "Load a skill: its full instructions come back as the result. Invoke a skill when the user's "
        "request matches its description.\n\nAvailable skills:\n" + (listing or "(none)")
    )
    return {
        "name": SKILL_TOOL,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {
                "skill": {
                    "type": "string",
                    "description": "The skill's name, exactly as listed.",
                    **({"enum": list(catalog.names)} if names_enum else {}),
                }
            },
            "required": ["skill"],
            "additionalProperties": False,
        },
    }


def reply_budget(options: ProbeOptions | None, full: int) -> int:
    """``max_tokens`` of a request before the expected skill loaded: ``routing_max_tokens`` for a
    routing probe (what the model writes after deciding is not paid for), ``full`` when the answer
    itself is kept (compliance mode, ``keep_answer``)."""
    if options is None or options.compliance or options.keep_answer:
        return full
    return min(full, options.routing_max_tokens)


def blind_hint(url: str, origin: str, *, default: bool) -> str:
    """What to check when no canary probe called ``Skill`` at ``url`` (chosen by ``origin``): a hosted
    API (``default``) sees the tools, so the model or the listing is at fault; a server of one's own
    may drop them before the model (llama.cpp without ``--jinja``, a chat template without tools)."""
    where = f"{url} (set by {origin})"
    if default:
        return (
            f"the model at {where} answered without calling the Skill tool on queries that name a skill; "
            "check --model and the skills' descriptions"
        )
    return (
        f"the model at {where} answered without calling the Skill tool on queries that name a skill: "
        "check that this server passes tools to the model (its log shows the prompt's size: a prompt "
        "without the skill listing is a few dozen tokens); for llama.cpp's llama-server start it with "
        "--jinja and a model whose chat template supports tools (or --chat-template-file one that does); "
        "for Ollama use a model tagged 'tools'; a small model may also just not call tools "
        "(runtime_options tool_choice forces a choice)"
    )


def skill_body(skill: Skill) -> str:
    """What invoking a skill returns."""
    return skill.body.strip() or "(this skill has no further instructions)"


@dataclass(frozen=True)
class ToolAnswer:
    content: str
    is_error: bool = False


class SkillDialogue:
    """One probe's conversation with a model offered ``Skill`` (and the tool environment in compliance
    mode). Per model reply: :meth:`reply`, then :meth:`answer` for each tool call in order, stopping at
    :attr:`stop`; then the probe ends when :attr:`finished`."""

    def __init__(self, query: Query, catalog: Catalog, tracker: Tracker) -> None:
        self.query = query
        self.catalog = catalog
        self.tracker = tracker
        self.options = tracker.options
        self.compliance = False
        """The expected skill is loaded and compliance mode is on: the tool environment is offered."""
        self.requests = 0
        self.steps = 0
        """Model replies since compliance began (bounded by ``step_budget``)."""
        self.stop = False
        self.tool_calls: list[ToolCall] = []
        self._text: str | None = None
        # unknown-skill calls use no turn; still, never loop forever
        self._routing_cap = self.options.max_turns + 2

    def reply(self, text: str | None) -> None:
        """A model reply arrived; ``text`` is its text (the answer, once compliance began)."""
        self.requests += 1
        self.steps += self.compliance
        if (self.compliance or self.options.keep_answer) and text:
            self._text = text

    def answer(self, name: str, args: dict[str, Any]) -> ToolAnswer:
        """The result of one tool call; sets :attr:`stop` when the tracker says the probe must end."""
        if name == SKILL_TOOL:
            requested = str(args.get("skill", "")).strip().lstrip("/")
            skill = self.catalog.get(requested)
            if skill is None:
                available = ", ".join(self.catalog.names)
                return ToolAnswer(f"Unknown skill: {requested!r}. Available skills: {available}", True)
            if not self.compliance:  # once compliance began, skill reads are no routing decisions
                go = self.tracker.invoke(skill.name)
                if self.options.compliance and self.tracker.expected_loaded:
                    self.compliance = True
                elif not go:
                    self.stop = True
            return ToolAnswer(skill_body(skill))
        if self.compliance and name in TOOL_NAMES:
            self.tool_calls.append(ToolCall(tool=name, input=dict(args)))
            return ToolAnswer(canned_result(self.query, args))
        return ToolAnswer(f"No such tool: {name}", True)

    @property
    def finished(self) -> bool:
        """After a reply's calls were answered: the probe ends here."""
        if self.stop:
            return True
        if self.compliance:
            return self.steps >= self.options.step_budget
        return self.requests >= self._routing_cap

    @property
    def final_text(self) -> str | None:
        """Compliance mode's answer (``""`` when the agent ended with no text); None otherwise."""
        if self.options.compliance or self.options.keep_answer:
            return compliance_answer(self.tracker, self._text)
        return None


def retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, parsed.timestamp() - time.time())


def error_detail(exc: Any) -> tuple[str, str]:
    """(error type, message) from an SDK status error's JSON body."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(err, dict) and err.get("message"):
            return str(err.get("type") or "error"), str(err["message"])
    return "error", str(getattr(exc, "message", exc))


def classify_sdk_error(
    exc: BaseException, sdk: ModuleType, describe: Callable[[int, str, str], str]
) -> ProbeFailed | None:
    """Translate an exception of ``sdk`` (``anthropic`` or ``openai``): transient (retry) or final;
    None when it is not the SDK's. ``describe(status, error type, message)`` is the error text."""
    if isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        kind, message = error_detail(exc)
        text = describe(status, kind, message)
        headers = exc.response.headers if exc.response is not None else None
        should = headers.get("x-should-retry") if headers is not None else None
        transient = status in (408, 409, 429) or status >= 500
        if should in ("true", "false"):
            transient = should == "true"
        return TransientProbeError(text, retry_after(headers)) if transient else ProbeFailed(text)
    if isinstance(exc, sdk.APITimeoutError):
        return TransientProbeError("the request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        return TransientProbeError(f"connection failed ({type(cause).__name__ if cause else 'dropped'})")
    return None


# ------------------------------------------------------------------------------ endpoint messages

_UNREACHABLE = (
    "connection refused",
    "name or service not known",
    "nodename nor servname",
    "no route to host",
)


def _unreachable(exc: BaseException) -> str | None:
    """``connection refused`` (or a name that does not resolve) somewhere in the exception's chain."""
    import errno
    import socket

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(seen) < 12:
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError) or getattr(cur, "errno", None) == errno.ECONNREFUSED:
            return "connection refused"
        if isinstance(cur, socket.gaierror):
            return "the host name does not resolve"
        text = str(cur).lower()
        for marker in _UNREACHABLE:
            if marker in text:
                return "the host name does not resolve" if "name" in marker else marker
        cur = cur.__cause__ or cur.__context__
    return None


def endpoint_error(err: ProbeFailed, exc: BaseException, url: str, origin: str) -> ProbeFailed:
    """``err`` (from :func:`classify_sdk_error`) with the endpoint and the setting that chose it named.

    A refused connection or an unresolvable host is final at once (no retries: nothing listens there);
    an HTTP 404 names the URL first, since a wrong base URL answers 404 for every model.
    """
    where = f"{url} (set by {origin})"
    why = _unreachable(exc)
    if why is not None:
        return ProbeFailed(f"cannot reach {where}: {why}; start the server or fix {origin}")
    if isinstance(err, TransientProbeError) and err.message.startswith("connection failed"):
        return TransientProbeError(f"{err.message} to {where}", err.retry_after)
    if err.message.startswith("HTTP 404"):
        return ProbeFailed(f"{err.message} at {where}; check {origin}, then --model")
    return err
