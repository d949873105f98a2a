"""Readers: the lines agents write, turned into live events.

- :class:`TranscriptReader`: Claude Code's session transcripts (``~/.claude/projects/**/*.jsonl``, one
  JSON object a line). A user line that is neither meta (``isMeta``: the loaded skill's text, caveats)
  nor a tool result is a prompt (id: its ``uuid``); an assistant ``tool_use`` block named ``Skill`` is a
  skill call (id: the block's ``id``; ``input.skill`` asked for; the message's ``model``); the
  ``tool_result`` that answers it gives ``toolUseResult.commandName`` (the skill that ran) and
  ``success``; the meta line ``Base directory for this skill: PATH`` that follows names its folder.
  ``sessionId``, ``timestamp``, ``cwd``, ``gitBranch`` and ``isSidechain`` (a subagent's line) are kept.
- :class:`OtlpReader`: the OpenTelemetry Collector's file exporter (OTLP JSON, one ``resourceLogs`` or
  ``resourceSpans`` export a line): Claude Code's ``claude_code.user_prompt`` (a prompt),
  ``claude_code.skill_activated`` and ``claude_code.tool_result`` of the ``Skill`` tool (a skill call;
  ``custom_skill`` or no name when ``OTEL_LOG_TOOL_DETAILS`` is off: hidden), ``claude_code.api_request``
  (the session's model); Codex's ``codex.user_prompt`` and ``codex.skill_invocation`` (``skill.name``,
  ``skill.invocation_type``); GenAI ``execute_tool`` spans of a skill tool (``gen_ai.tool.name``) and
  spans naming a skill.

Most lines say nothing about prompts or skills (assistant text, other tools' traffic): a byte test
skips them before any decoding. A line that is decoded is bounded (:func:`skillreach._io.json.
check_values`: depth and integer digits); a bad one is counted by reason and named once (file:line).
Events are plain dicts of :class:`~skillreach.live.events.LiveEvent`'s fields (no validation per event
on the hot path); prompt text is kept only with ``keep_prompts``, redacted (secrets masked by
:func:`skillreach._io.redact.redact_stored`).

One bad line stops nothing: a time out of range (before :data:`EARLIEST` or from :data:`LATEST` on,
``0001-01-01T00:00:00+01:00`` included, whose UTC time is not even a date) skips its line, counted and
named; a NUL character (``\u0000``, which PostgreSQL text cannot hold) in any text of a line is replaced
by U+FFFD, the line kept and counted.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson

from skillreach._io.json import MAX_DEPTH, check_values
from skillreach._io.redact import redact_stored, redact_text
from skillreach.live.events import UNKNOWN_VERSION
from skillreach.store.live import SkillCallUpdate

__all__ = [
    "EARLIEST",
    "HIDDEN_NAMES",
    "LATEST",
    "NUL_REPLACED",
    "OUT_OF_RANGE",
    "OtlpReader",
    "Problems",
    "TranscriptReader",
    "display_path",
    "is_otlp",
]

HIDDEN_NAMES = frozenset({"custom_skill", ""})
"""Skill names a source reports when it hides the real one."""
MAX_TEXT = 100_000
_LIMIT = 256
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest time an event may have (an agent's clock set to 0 is no event time)."""
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
"""No event is this late (``9999-12-31T23:59:59-01:00`` is past what a date holds in UTC)."""
OUT_OF_RANGE = "timestamp out of range (1970 to 2200)"
NUL_REPLACED = "NUL characters (\\u0000) replaced by U+FFFD"
_NUL_ESCAPE = b"\\u0000"
_TOO_FAR = datetime(1, 1, 1, tzinfo=UTC)
"""What a time whose UTC conversion overflows reads as: out of range."""


def display_path(path: str) -> str:
    """A path as text any database and terminal takes: bytes that are not UTF-8 (a file name in another
    encoding) written as ``\\xNN``."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return path


def in_range(at: datetime) -> bool:
    return EARLIEST <= at < LATEST


class Problems:
    """Bad lines by reason: how many, and the first one (file:line) of each reason."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str, str] = {}

    def add(self, reason: str, where: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        self.first.setdefault(reason, where)


_STRUCTURE = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_PARENS = bytes.maketrans(b"[]{}", b"()()")


def _shallow(line: bytes) -> bool:
    """Whether a line that decoded as JSON nests at most :data:`MAX_DEPTH` levels, told from its bytes
    without walking the value: escapes dropped (``\\\\`` then ``\\"``, as a parser reads them left to
    right), every byte but quotes and brackets dropped, strings dropped, then the innermost bracket pairs
    removed once per level. C-speed passes only."""
    if line.count(b"{") + line.count(b"[") <= MAX_DEPTH:
        return True
    structure = line.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _STRUCTURE)
    # outside strings: the pieces between quotes at even places; one pass of replace removes exactly
    # the innermost pairs (a pair it makes adjacent waits for the next pass): one level a pass
    brackets = b"".join(structure.split(b'"')[::2]).translate(_PARENS)
    for _ in range(MAX_DEPTH):
        if not brackets:
            return True
        brackets = brackets.replace(b"()", b"")
    return not brackets


def _decode(line: bytes, where: str, problems: Problems) -> Any:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        text = str(exc).lower()
        reason = "not UTF-8" if "utf-8" in text else "not JSON"
        if "recursion" in text:
            reason = "nested too deeply"
        elif "infinity" in text or ("number" in text and "large" in text):
            reason = "number too large"
        problems.add(reason, where)
        return None
    bad = None if _shallow(line) else check_values(value)
    if bad is not None:
        problems.add("nested too deeply" if bad == "deep" else "integer too long", where)
        return None
    if not isinstance(value, dict):
        problems.add("not a JSON object", where)
        return None
    return value


def _time(value: Any) -> datetime | None:
    """An ISO time in UTC; ``None`` when it is not one. A time whose UTC conversion overflows (year 0,
    year 10000) comes back as year 1: out of range (:func:`in_range`)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    try:
        return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    except OverflowError:
        return _TOO_FAR


def _str(value: Any, limit: int = _LIMIT) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def _event(source: str, event_id: str, kind: str, at: datetime, agent: str, **fields: Any) -> dict[str, Any]:
    return {
        "source": source,
        "event_id": event_id[:256],
        "kind": kind,
        "at": at,
        "agent": agent,
        "session_id": fields.get("session_id") or "",
        "prompt_id": fields.get("prompt_id"),
        "skill": fields.get("skill"),
        "skill_ran": fields.get("skill_ran"),
        "success": fields.get("success"),
        "hidden": fields.get("hidden", False),
        "invocation": fields.get("invocation"),
        "model": fields.get("model"),
        "cwd": fields.get("cwd"),
        "git_branch": fields.get("git_branch"),
        "sidechain": fields.get("sidechain", False),
        "skill_dir": fields.get("skill_dir"),
        "skill_version": UNKNOWN_VERSION,
        "prompt_text": fields.get("prompt_text"),
    }


@functools.lru_cache(maxsize=4096)
def _redacted(text: str) -> str:
    return redact_text(text)


def _clean(text: str | None) -> str | None:
    """A stored path, through the one redaction (the same few folders recur: cached)."""
    return _redacted(text) if text else text


def _prompt_text(text: str | None, keep: bool) -> str | None:
    return redact_stored(text[:MAX_TEXT]) if keep and text else None


def _denul(value: Any) -> Any:
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


class _Marks:
    """How many events, updates and folders a reader held before a line: what the line added is what
    :meth:`clean` looks at."""

    __slots__ = ("dirs", "events", "updates")

    def __init__(self, reader: Any) -> None:
        self.events = len(reader.events)
        self.updates = len(reader.updates)
        self.dirs = len(getattr(reader, "dirs_later", ()))

    def clean(self, reader: Any) -> bool:
        """NUL characters replaced in every text the line added (events in place, so the calls held
        open by id see it); whether it added anything."""
        for ev in reader.events[self.events :]:
            for k, v in ev.items():
                if type(v) is str and "\x00" in v:
                    ev[k] = _denul(v)
        reader.updates[self.updates :] = [
            SkillCallUpdate(*(_denul(getattr(u, f)) for f in u.__slots__))
            for u in reader.updates[self.updates :]
        ]
        dirs = getattr(reader, "dirs_later", None)
        if dirs is not None:
            dirs[self.dirs :] = [(_denul(a), b, _denul(c)) for a, b, c in dirs[self.dirs :]]
        return (
            len(reader.events) > self.events
            or len(reader.updates) > self.updates
            or (dirs is not None and len(dirs) > self.dirs)
        )


def is_otlp(head: bytes) -> bool:
    """Whether a file's first bytes are an OTLP JSON export."""
    return head.lstrip()[:40].replace(b" ", b"").startswith((b'{"resourceLogs"', b'{"resourceSpans"'))


# ------------------------------------------------------------------------------------ Claude Code


_BASE_DIR = "Base directory for this skill:"
_HEAD = 8192
"""Bytes of a line's start where its type and its message's first block are looked for."""


class TranscriptReader:
    """One transcript file's lines → events (``self.events``, drained by the caller) and updates to
    skill calls an earlier batch already stored (``self.updates``)."""

    def __init__(
        self,
        source: str,
        path: str,
        *,
        keep_prompts: bool,
        problems: Problems,
        skill_calls: set[bytes] | None = None,
    ) -> None:
        self.source = source
        self.path = path
        self.keep_prompts = keep_prompts
        self.problems = problems
        self.skill_calls = skill_calls if skill_calls is not None else set()
        """Ids of the Skill calls read, and of those stored without a result: a tool result answering
        another id is passed over undecoded."""
        self.events: list[dict[str, Any]] = []
        self.updates: list[SkillCallUpdate] = []
        self._open: dict[str, dict[str, Any]] = {}  # skill calls of this batch, by tool_use id
        self._last_call: str | None = None
        self._prompts: dict[str, str] = {}  # session → its last prompt id (``promptId``)
        self.dirs_later: list[tuple[str, datetime, str]] = []  # (session, time, folder) of earlier calls

    def drained(self) -> None:
        """The caller stored ``events`` and ``updates``: later results of those calls become updates."""
        self.events = []
        self.updates = []
        self.dirs_later = []
        self._open = {}

    def feed(self, lines: list[bytes], first_line: int) -> None:
        for n, line in enumerate(lines, start=first_line):
            if line[:1] != b"{":
                if line.strip() and line.lstrip()[:1] != b"{":
                    self.problems.add("not a JSON object", f"{self.path}:{n}")
                    continue
                if not line.strip():
                    continue
            # Most lines are other tools' traffic: told apart by markers that can only be structure
            # (a quote inside a JSON string is escaped), so only what may matter is decoded.
            if line.find(b'"type":"tool_result"', 0, _HEAD) >= 0:  # a tool's result (one a line)
                at = line.find(b'"tool_use_id":"', 0, _HEAD)
                if at >= 0:  # only the result of a Skill call read (or stored unanswered) matters
                    start = at + 15
                    if line[start : line.find(b'"', start, start + 300)] not in self.skill_calls:
                        continue
                elif b"commandName" not in line:  # a Skill's result names the skill that ran
                    continue
            elif line.find(b'"user"', 0, _HEAD) < 0 and b'"Skill"' not in line:  # not a prompt, meta
                continue  # line or Skill call (an unusual layout is decoded: the decoder decides)
            obj = _decode(line, f"{self.path}:{n}", self.problems)
            if obj is None:
                continue
            if _NUL_ESCAPE in line:  # PostgreSQL text holds no NUL: replaced, the line kept
                marks = _Marks(self)
                self._line(obj, n)
                if marks.clean(self):
                    self.problems.add(NUL_REPLACED, f"{self.path}:{n}")
            else:
                self._line(obj, n)

    def _line(self, obj: dict[str, Any], n: int) -> None:
        kind = obj.get("type")
        if kind not in ("user", "assistant"):
            return
        message = obj.get("message")
        if not isinstance(message, dict):
            return
        at = _time(obj.get("timestamp"))
        if at is None:
            self.problems.add("no valid timestamp", f"{self.path}:{n}")
            return
        if not in_range(at):
            self.problems.add(OUT_OF_RANGE, f"{self.path}:{n}")
            return
        session = _str(obj.get("sessionId")) or ""
        prompt_id = _str(obj.get("promptId"))
        if prompt_id is not None:
            self._prompts[session] = prompt_id
        else:  # an assistant line: the prompt it answers is the session's last one
            prompt_id = self._prompts.get(session)
        common: dict[str, Any] = {
            "session_id": session,
            "cwd": _clean(_str(obj.get("cwd"), 4096)),
            "git_branch": _str(obj.get("gitBranch")),
            "sidechain": obj.get("isSidechain") is True,
            "prompt_id": prompt_id,
        }
        content = message.get("content")
        if kind == "assistant":
            self._assistant(content, at, _str(message.get("model")), common)
        else:
            self._user(obj, content, at, common)

    def _assistant(self, content: Any, at: datetime, model: str | None, common: dict[str, Any]) -> None:
        if not isinstance(content, list):
            return
        for block in content:
            if not (
                isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == "Skill"
            ):
                continue
            call_id = _str(block.get("id"))
            inp = block.get("input")
            skill = _str(inp.get("skill")) if isinstance(inp, dict) else None
            if call_id is None:
                continue
            ev = _event(
                self.source,
                call_id,
                "skill",
                at,
                "claude-code",
                skill=skill,
                hidden=skill is None,
                model=model,
                **common,
            )
            self.events.append(ev)
            self._open[call_id] = ev
            self._last_call = call_id
            self.skill_calls.add(call_id.encode())

    def _user(self, obj: dict[str, Any], content: Any, at: datetime, common: dict[str, Any]) -> None:
        texts: list[str] = []
        results = False
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif block.get("type") == "tool_result":
                    results = True
                    self._result(obj, block)
        if results:
            return
        text = "\n".join(texts)
        if obj.get("isMeta") is True or _BASE_DIR in text[:200]:
            if _BASE_DIR in text:
                self._base_dir(obj, text)
            return
        stripped = text.lstrip()
        if not stripped or stripped.startswith(("<local-command-", "<command-", "[Request interrupted")):
            return
        uuid = _str(obj.get("uuid"))
        if uuid is None:
            return
        self.events.append(
            _event(
                self.source,
                uuid,
                "prompt",
                at,
                "claude-code",
                prompt_text=_prompt_text(text, self.keep_prompts),
                **common,
            )
        )

    def _result(self, obj: dict[str, Any], block: dict[str, Any]) -> None:
        call_id = _str(block.get("tool_use_id"))
        res = obj.get("toolUseResult")
        if call_id is None or not isinstance(res, dict) or "commandName" not in res:
            return
        ran = _str(res.get("commandName"))
        success = res.get("success") if isinstance(res.get("success"), bool) else None
        if block.get("is_error") is True:
            success = False
        ev = self._open.get(call_id)
        if ev is not None:
            ev["skill_ran"] = ran
            ev["success"] = success
        else:
            self.updates.append(SkillCallUpdate(call_id, skill_ran=ran, success=success))

    def _base_dir(self, obj: dict[str, Any], text: str) -> None:
        line = text[text.index(_BASE_DIR) + len(_BASE_DIR) :].split("\n", 1)[0].strip()
        folder = _clean(line.removeprefix("file://")[:4096]) or ""
        call_id = _str(obj.get("sourceToolUseID")) or self._last_call
        if not folder:
            return
        if call_id is None:  # the call was read by an earlier run: the session's last call gets it
            at = _time(obj.get("timestamp"))
            if at is not None and in_range(at):
                self.dirs_later.append((_str(obj.get("sessionId")) or "", at, folder))
            return
        ev = self._open.get(call_id)
        if ev is not None:
            ev["skill_dir"] = folder
        else:
            self.updates.append(SkillCallUpdate(call_id, skill_dir=folder))


# ------------------------------------------------------------------------------------------ OTLP

_OTLP_WORDS = (b"user_prompt", b"skill", b"Skill", b"api_request")


def _otlp_items(resources: Any, scopes_key: str, items_key: str) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Every item of an OTLP export's ``resourceLogs``/``resourceSpans`` (dict or not: each one counts in
    the fallback ids), with its resource's attributes; what is not a list or a dict is passed over."""
    if not isinstance(resources, list):
        return
    for r in resources:
        if not isinstance(r, dict):
            continue
        resource = _attrs(r["resource"].get("attributes")) if isinstance(r.get("resource"), dict) else {}
        scopes = r.get(scopes_key)
        for scope in scopes if isinstance(scopes, list) else ():
            items = scope.get(items_key) if isinstance(scope, dict) else None
            for item in items if isinstance(items, list) else ():
                yield item, resource


def _attrs(items: Any) -> dict[str, Any]:
    """An OTLP attribute list as a dict: each value the one field of its ``AnyValue`` (``stringValue``,
    ``boolValue``, ``intValue`` (a string), ``doubleValue``; an array or map stays as it is and reads as
    no text)."""
    out: dict[str, Any] = {}
    if type(items) is not list:
        return out
    for kv in items:
        if type(kv) is dict:
            k = kv.get("key")
            v = kv.get("value")
            if type(k) is str and type(v) is dict and v:
                out[k] = next(iter(v.values()))
    return out


_RECORDS = frozenset({"user_prompt", "skill_activated", "tool_result", "api_request", "skill_invocation"})


def _attr(items: Any, key: str) -> Any:
    """One attribute's value, without building them all (most records are passed over)."""
    if isinstance(items, list):
        for kv in items:
            if isinstance(kv, dict) and kv.get("key") == key:
                v = kv.get("value")
                if isinstance(v, dict):
                    for typ in ("stringValue", "boolValue", "intValue", "doubleValue"):
                        if typ in v:
                            return v[typ]
                return None
    return None


def _nanos(value: Any) -> datetime | None:
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    if n <= 0 or n > 2**63:
        return None
    return datetime.fromtimestamp(n / 1e9, tz=UTC)


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _agent(resource: dict[str, Any], event: str) -> str:
    service = str(resource.get("service.name") or "")
    if event.startswith("claude_code.") or "claude" in service:
        return "claude-code"
    if event.startswith("codex.") or "codex" in service:
        return "codex"
    return (service or "otel")[:64]


def _skill_arg(raw: Any) -> str | None:
    """The skill named by a tool's parameters (a JSON text: ``skill_name``, ``skill`` or ``name``)."""
    if isinstance(raw, str) and len(raw) < 100_000:
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
    if isinstance(raw, dict):
        for key in ("skill_name", "skill", "name"):
            if isinstance(raw.get(key), str) and raw[key]:
                return str(raw[key])[:_LIMIT]
    return None


class OtlpReader:
    """One OTLP JSON lines file → events (``self.events``, drained by the caller)."""

    def __init__(self, source: str, path: str, *, keep_prompts: bool, problems: Problems) -> None:
        self.source = source
        self.path = path
        self.keep_prompts = keep_prompts
        self.problems = problems
        self.events: list[dict[str, Any]] = []
        self.updates: list[SkillCallUpdate] = []
        self._models: dict[str, str] = {}  # session → the model of its last API request
        self._open: dict[str, dict[str, Any]] = {}  # this batch's skill calls, by id
        self._where = path  # file:line of the line being read

    def drained(self) -> None:
        self.events = []
        self.updates = []
        self._open = {}

    def feed(self, lines: list[bytes], first_line: int) -> None:
        for n, line in enumerate(lines, start=first_line):
            if line[:1] != b"{":
                if line.strip() and line.lstrip()[:1] != b"{":
                    self.problems.add("not a JSON object", f"{self.path}:{n}")
                continue
            if not any(w in line for w in _OTLP_WORDS):
                continue
            self._where = f"{self.path}:{n}"
            obj = _decode(line, self._where, self.problems)
            if obj is None:
                continue
            digest = hashlib.sha256(line).hexdigest()[:24]
            marks = _Marks(self) if _NUL_ESCAPE in line else None
            self._logs(obj.get("resourceLogs"), digest)
            self._spans(obj.get("resourceSpans"), digest)
            if marks is not None and marks.clean(self):
                self.problems.add(NUL_REPLACED, self._where)

    def _logs(self, resource_logs: Any, digest: str) -> None:
        for i, (rec, resource) in enumerate(_otlp_items(resource_logs, "scopeLogs", "logRecords"), 1):
            if isinstance(rec, dict):
                self._record(rec, resource, f"{digest}:{i}")

    def _record(self, rec: dict[str, Any], resource: dict[str, Any], fallback_id: str) -> None:
        items = rec.get("attributes")
        body = rec.get("body")
        body_name = body.get("stringValue") if isinstance(body, dict) else None
        attr_name = _attr(items, "event.name")
        name = attr_name or body_name or ""
        if not isinstance(name, str):
            return
        if "." not in name:  # Claude Code's attribute is the short name (user_prompt), its body the long
            name = body_name if isinstance(body_name, str) and body_name.endswith("." + name) else name
        short = name.rsplit(".", 1)[-1]
        if short not in _RECORDS or (short == "tool_result" and _attr(items, "tool_name") != "Skill"):
            return  # most records: other tools' results, metrics-like events
        if short == "api_request":  # the session's model, for the calls that follow
            model = _str(_attr(items, "model"))
            if model:
                self._models[_str(_attr(items, "session.id")) or ""] = model
            return
        a = _attrs(items)
        at = (
            _nanos(rec.get("timeUnixNano"))
            or _time(a.get("event.timestamp"))
            or _nanos(rec.get("observedTimeUnixNano"))
        )
        if at is None:
            self.problems.add("a log record without a valid time", self._where)
            return
        if not in_range(at):
            self.problems.add(OUT_OF_RANGE, self._where)
            return
        agent = _agent(resource, name)
        session = _str(a.get("session.id")) or _str(a.get("conversation.id")) or ""
        prompt_id = _str(a.get("prompt.id"))
        model = _str(a.get("model"))
        if short == "api_request":
            if model:
                self._models[session] = model
            return
        common = {"session_id": session, "prompt_id": prompt_id, "model": model or self._models.get(session)}
        if short == "user_prompt":
            seq = a.get("event.sequence")
            eid = prompt_id or (f"{session}:{seq}" if session and seq is not None else fallback_id)
            self.events.append(
                _event(
                    self.source,
                    f"prompt:{eid}",
                    "prompt",
                    at,
                    agent,
                    prompt_text=_prompt_text(_str(a.get("prompt"), MAX_TEXT), self.keep_prompts),
                    **common,
                )
            )
            return
        if short == "tool_result":
            if a.get("tool_name") != "Skill":
                return
            skill = _skill_arg(a.get("tool_parameters")) or _skill_arg(a.get("tool_input"))
            success = _bool(a.get("success"))
        elif short == "skill_activated":
            skill = _str(a.get("skill.name")) or _str(a.get("skill_name"))
            success = None
        else:  # codex.skill_invocation
            skill = _str(a.get("skill.name")) or _str(a.get("skill_name"))
            success = None
            common["invocation"] = _str(a.get("skill.invocation_type"), 32)
        hidden = skill is None or skill in HIDDEN_NAMES
        # skill_activated and the Skill tool_result of one call share this id: stored once (two calls of
        # one skill for the same prompt are one)
        key = (
            f"skill:{session}:{prompt_id}:{'-' if hidden else skill}" if prompt_id else f"skill:{fallback_id}"
        )
        seen = self._open.get(key)
        if seen is not None:
            if seen["success"] is None:
                seen["success"] = success
            return
        ev = _event(
            self.source,
            key,
            "skill",
            at,
            agent,
            skill=None if hidden else skill,
            hidden=hidden,
            success=success,
            **common,
        )
        self.events.append(ev)
        self._open[key] = ev
        if success is not None:  # the call's other record may be stored already, without the outcome
            self.updates.append(SkillCallUpdate(key[:256], success=success))

    def _spans(self, resource_spans: Any, digest: str) -> None:
        for i, (span, resource) in enumerate(_otlp_items(resource_spans, "scopeSpans", "spans"), 1):
            if isinstance(span, dict):
                self._span(span, resource, f"{digest}:{i}")

    def _span(self, span: dict[str, Any], resource: dict[str, Any], fallback_id: str) -> None:
        a = _attrs(span.get("attributes"))
        skill = _str(a.get("gen_ai.skill.name")) or _str(a.get("skill.name")) or _str(a.get("skill_name"))
        op = a.get("gen_ai.operation.name") or str(span.get("name") or "").split(" ", 1)[0]
        if skill is None and op == "execute_tool":
            tool = _str(a.get("gen_ai.tool.name"))
            if tool is None or tool.lower() not in ("skill", "activate_skill", "load_skill"):
                return
            skill = _skill_arg(a.get("gen_ai.tool.call.arguments")) or _skill_arg(a.get("tool_parameters"))
            if skill is None:
                skill = ""
        elif skill is None:
            return
        at = _nanos(span.get("startTimeUnixNano"))
        if at is None:
            self.problems.add("a span without a valid start time", self._where)
            return
        if not in_range(at):
            self.problems.add(OUT_OF_RANGE, self._where)
            return
        status = span.get("status")
        code = status.get("code") if isinstance(status, dict) else None
        success = (
            False if code in (2, "STATUS_CODE_ERROR") else (True if code in (1, "STATUS_CODE_OK") else None)
        )
        hidden = skill in HIDDEN_NAMES
        span_id = _str(span.get("spanId"))
        self.events.append(
            _event(
                self.source,
                f"span:{span_id or fallback_id}",
                "skill",
                at,
                _agent(resource, ""),
                session_id=_str(a.get("gen_ai.conversation.id")) or _str(a.get("session.id")) or "",
                skill=None if hidden else skill,
                hidden=hidden,
                success=success,
                model=_str(a.get("gen_ai.request.model")) or _str(a.get("gen_ai.response.model")),
            )
        )
