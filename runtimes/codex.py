"""``codex``: OpenAI's Codex CLI (npm ``@openai/codex``), run headless against the runtime's provider.

One probe is one process, in a fresh folder of its own::

    codex exec --json --skip-git-repo-check --ephemeral --disable plugins --disable remote_plugin
          -c analytics.enabled=false -c skills.bundled.enabled=false [-m MODEL] -- "<query>"  < /dev/null

- **Isolation.** ``CODEX_HOME`` (config, state, logs, bundled skills) and ``HOME`` (Codex reads user skills
  from ``$HOME/.agents/skills``) are the probe's own, empty folders; the working folder holds only
  ``.agents/skills/<name>/`` with exactly the resident skills (hard-linked from a per-catalog template;
  a catalog skill nested inside another's folder is left out of the outer copy, or Codex would list it
  twice). ``$CODEX_HOME/config.toml`` is generated: the model, one provider (``base_url``, ``env_key``:
  the *name* of the variable holding the key, ``wire_api = "responses"``), ``approval_policy = "never"``,
  the sandbox, ``model_context_window`` when set, bundled skills, analytics and plugins off (the
  phone-home switches of Codex 0.171.0: the plugin marketplace and ``ab.chatgpt.com``), and an OTLP/HTTP
  JSON log exporter pointed at the probe's own receiver.
- **Activation.** Codex has no skill tool: it lists the skills in a developer message and the model reads
  a ``SKILL.md`` through its shell. Codex itself recognises that read and emits the OpenTelemetry log
  record ``codex.skill_invocation`` (``skill.name``, ``skill.scope``, ``skill.invocation_type``); the
  runtime starts a small OTLP/HTTP receiver on 127.0.0.1 per probe and takes activations from those
  records (``OTEL_BLRP_SCHEDULE_DELAY`` makes Codex export them at once rather than at exit: they arrive
  before the command runs). The ``command_execution`` item of ``--json`` whose command reads
  ``…/<skill>/SKILL.md`` is the fallback: each skill is counted once per read, whichever signal comes
  first (:class:`CodexStream`), and :attr:`CodexRuntime.signals` counts which one did.
- **Early exit.** When the tracker says stop, the whole process group is SIGKILLed at once.
- **Residency.** Codex lists no skills in its output; a catalog skill it could not load (its stderr says
  ``failed to load skill …``) fails the probe with the skill and the reason named. Bundled system skills
  are off; a skill Codex reports outside the catalog is kept in :attr:`CodexRuntime.outside`, never
  scored. Whether the listing holds every skill is :meth:`listing`'s question (Codex caps it).
- **Usage.** Per model response from the ``codex.sse_event`` records of ``response.completed`` (input,
  cached, output tokens), else the ``turn.completed`` event; priced with the settings' price table.

The catalog's listing is capped by Codex (:mod:`skillreach.skills.agent_listing`); :meth:`listing`
predicts it and :meth:`listing_warning` says when descriptions are shortened or skills dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, Usage
from skillreach.runtimes._agentcli import AgentStream, base_env, find_executable, run_json_lines
from skillreach.runtimes._relay import Sequencer
from skillreach.runtimes._skillcli import CatalogTemplates, CliProbeLoop
from skillreach.settings import Settings
from skillreach.skills.agent_listing import CODEX_FALLBACK_CONTEXT_WINDOW, AgentListing, codex_listing
from skillreach.study.contract import Outcome, RuntimeOptions, Tracker, cost_of, default_settings

__all__ = [
    "CODEX_FALLBACK_CONTEXT_WINDOW",
    "CodexOptions",
    "CodexRuntime",
    "CodexStream",
    "OtlpReceiver",
    "codex_command_skill",
    "unloaded",
]

log = logging.getLogger("skillreach.runtimes.codex")

CODEX_INSTALL_HINT = (
    "install it with `npm install -g @openai/codex` (or into a folder) and pass codex_path=/path/to/codex"
)

_SKILL_READ = re.compile(r"""([^\s'"`;|&<>()]*?)([A-Za-z0-9][A-Za-z0-9._-]*)/SKILL\.md""")
PASSED_ENV = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "SSL_CERT_FILE", "LANG", "LC_ALL", "TZ")


def codex_command_skill(command: str, names: frozenset[str] | set[str]) -> str | None:
    """The resident skill whose ``SKILL.md`` a shell command reads (``cat .agents/skills/x/SKILL.md``)."""
    for match in _SKILL_READ.finditer(command):
        if match.group(2) in names:
            return match.group(2)
    return None


_FAILED_LOAD = re.compile(r"failed to load skill (\S+)/SKILL\.md: (.*)")


def unloaded(stderr: str, skills: Path, names: frozenset[str]) -> str | None:
    """The residency error when Codex said it could not load a catalog skill (its stderr: ``failed to load
    skill <path>/SKILL.md: <why>``); a ``SKILL.md`` deeper in a skill's folder is a resource, not a skill."""
    failed = []
    for match in _FAILED_LOAD.finditer(stderr):
        folder = Path(match.group(1))
        if folder.parent == skills and folder.name in names:
            failed.append(f"{folder.name} ({match.group(2).strip()})")
    if not failed:
        return None
    return "residency check failed: codex could not load catalog skills: " + "; ".join(sorted(set(failed)))


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


# ============================================================================ the OTLP receiver


class _QuietServer(ThreadingHTTPServer):
    """A probe killed while Codex exports leaves a broken connection: said at debug level, never as a
    traceback on the terminal."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("OTLP receiver: a connection from %s ended mid-request", client_address)


class OtlpReceiver:
    """An OTLP/HTTP receiver of JSON log exports on 127.0.0.1 (one per probe): every log record's
    attributes, flattened to ``{key: value}``, go to ``on_record`` on the event loop as they arrive.

    It answers from a thread of its own, not from the event loop: Codex waits for each export's answer
    (and, at exit, for its last), so an event loop busy with the other probes and the study's own work
    made every probe ~0.3 s longer (``bench/agent_clis.py``)."""

    def __init__(self, on_record: Callable[[dict[str, Any]], None]) -> None:
        self.on_record = on_record
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open = 0
        self._lock = threading.Lock()
        self.records = 0

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1/logs"

    async def __aenter__(self) -> OtlpReceiver:
        self._loop = asyncio.get_running_loop()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                with receiver._lock:
                    receiver._open += 1
                try:
                    size = int(self.headers.get("content-length") or 0)
                    raw = self.rfile.read(size) if size > 0 else b""
                    receiver._take(raw, self.headers.get("content-encoding", ""))
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                finally:
                    with receiver._lock:
                        receiver._open -= 1

        server = _QuietServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(server.shutdown)
            server.server_close()

    async def drain(self, timeout_s: float = 1.0) -> None:
        """Wait until no export is being received (Codex flushes its last records as it exits), then
        until the records received are handed to ``on_record``."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self._open and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0)

    def _deliver(self, attrs: dict[str, Any]) -> None:
        self.records += 1
        self.on_record(attrs)

    def _take(self, raw: bytes, encoding: str) -> None:
        try:
            if encoding == "gzip":
                raw = gzip.decompress(raw)
            elif encoding == "deflate":
                raw = zlib.decompress(raw)
            payload = json.loads(raw)
        except (OSError, ValueError, zlib.error):
            log.debug("codex sent an OTLP export that is not JSON (%d bytes)", len(raw))
            return
        loop = self._loop
        for resource in payload.get("resourceLogs") or []:
            for scope in resource.get("scopeLogs") or []:
                for record in scope.get("logRecords") or []:
                    attrs = _attributes(record.get("attributes") or [])
                    if loop is not None and not loop.is_closed():
                        loop.call_soon_threadsafe(self._deliver, attrs)


def _attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        value = item.get("value") or {}
        for kind in ("stringValue", "intValue", "boolValue", "doubleValue"):
            if kind in value:
                out[str(item.get("key"))] = value[kind]
                break
    return out


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


# ================================================================================= the stream


@dataclass
class CodexStream(AgentStream):
    """One probe's two signals folded together: ``--json`` events and OTel log records."""

    names: frozenset[str] = frozenset()
    on_stop: Callable[[], None] | None = None
    _halted: bool = False
    seq: Sequencer | None = None
    """Credits reads in the model's order (a probe through the relay); None: as they come."""
    usage_otel: Usage = field(default_factory=Usage)
    usage_json: Usage = field(default_factory=Usage)
    responses: int = 0
    turns_json: int = 0
    signals: Counter[str] = field(default_factory=Counter)
    """Which signal counted each activation first: ``otel`` or ``command``."""
    outside: set[str] = field(default_factory=set)
    """Skills Codex invoked that are not in the catalog (reported, never scored)."""
    _seen: dict[str, Counter[str]] = field(default_factory=lambda: {"otel": Counter(), "command": Counter()})
    _credited: Counter[str] = field(default_factory=Counter)
    _items: set[str] = field(default_factory=set)
    otel_tools: bool = False
    """Tool calls come from the OTel ``codex.tool_result`` records (every call Codex ran or refused:
    ``--json`` leaves out a command the sandbox refused), else from ``command_execution`` items."""

    def _tool(self, tool: str, arguments: str) -> None:
        """A tool call Codex ran: recorded in compliance mode once the expected skill was read."""
        if not (self.tracker.options.compliance and self.tracker.expected_loaded):
            return
        try:
            args = json.loads(arguments)
        except ValueError:
            args = {"arguments": arguments}
        if not isinstance(args, dict):
            args = {"arguments": args}
        command = args.get("cmd") or args.get("command")
        if isinstance(command, str) and codex_command_skill(command, self.names) is not None:
            return  # a skill's read is an activation, not a step
        self.record(tool, args)

    @property
    def stopped(self) -> bool:
        return self._halted or (self.seq is not None and self.seq.stopped)

    @staticmethod
    def call_skill(tool: str, args: dict[str, Any], names: frozenset[str]) -> str | None:
        """The catalog skill a model's shell call reads (``exec_command {"cmd": "cat …/x/SKILL.md"}``)."""
        command = args.get("cmd") if tool == "exec_command" else args.get("command")
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        return codex_command_skill(command, names) if isinstance(command, str) else None

    def credit(self, skill: str, source: str) -> None:
        """A read of ``skill`` seen by ``source``: each n-th read counts once, from the first signal; in
        the model's order when the probe runs through the relay."""
        if self.stopped:
            return
        self._seen[source][skill] += 1
        if self._seen[source][skill] <= self._credited[skill]:
            return
        self._credited[skill] = self._seen[source][skill]
        self.signals[source] += 1
        if self.seq is not None:
            self.seq.loaded(skill)
        elif not self.activate(skill):
            self.stop()

    def stop(self) -> None:
        if self.seq is not None:
            self.seq.stop()
        if not self._halted:
            self._halted = True
            if self.on_stop is not None:
                self.on_stop()

    # ------------------------------------------------------------------------------------- OTel
    def record_otel(self, attrs: dict[str, Any]) -> None:
        self._otel(attrs)
        if self.seq is not None:
            self.seq.poke()

    def _otel(self, attrs: dict[str, Any]) -> None:
        name = attrs.get("event.name")
        if name == "codex.skill_invocation":
            skill = str(attrs.get("skill.name") or "")
            if skill in self.names:
                self.credit(skill, "otel")
            elif skill:
                self.outside.add(skill)
        elif name == "codex.tool_result" and self.otel_tools:
            self._tool(str(attrs.get("tool_name") or ""), str(attrs.get("arguments") or ""))
        elif (
            name == "codex.sse_event"
            and attrs.get("event.kind") == "response.completed"
            and "input_token_count" in attrs
        ):
            self.responses += 1
            cached = _int(attrs.get("cached_token_count"))
            self.usage_otel = self.usage_otel + Usage(
                input_tokens=max(_int(attrs.get("input_token_count")) - cached, 0),
                output_tokens=_int(attrs.get("output_token_count")),
                cache_read_input_tokens=cached,
            )

    # ------------------------------------------------------------------------------------- JSON
    def feed(self, event: dict[str, Any]) -> bool:
        """One ``--json`` event; False when the probe must stop now."""
        kind = event.get("type")
        item = event.get("item") if isinstance(event.get("item"), dict) else None
        if kind in ("item.started", "item.completed") and item is not None:
            self._item(item, kind)
        elif kind == "turn.completed":
            self.turns_json += 1
            raw = event.get("usage") or {}
            cached = _int(raw.get("cached_input_tokens"))
            self.usage_json = self.usage_json + Usage(
                input_tokens=max(_int(raw.get("input_tokens")) - cached, 0),
                output_tokens=_int(raw.get("output_tokens")),
                cache_read_input_tokens=cached,
            )
        elif kind == "turn.failed":
            self.error = f"codex: {(event.get('error') or {}).get('message') or 'the turn failed'}"
        elif kind == "error":
            self.error = f"codex: {event.get('message') or 'error'}"
        if self.seq is not None:
            self.seq.poke()
        return not self.stopped

    def _item(self, item: dict[str, Any], kind: str) -> None:
        itype = item.get("type")
        if itype == "agent_message" and kind == "item.completed":
            if item.get("text"):
                self.final_text = str(item["text"])
            return
        if itype != "command_execution":
            return
        iid = str(item.get("id") or "")
        if iid in self._items:
            return
        self._items.add(iid)
        command = str(item.get("command") or "")
        skill = codex_command_skill(command, self.names)
        if skill is not None:
            self.credit(skill, "command")
        elif not self.otel_tools:
            self._tool("exec_command", json.dumps({"cmd": command}))

    @property
    def usage(self) -> Usage:
        return self.usage_otel if self.responses else self.usage_json

    @property
    def turns(self) -> int:
        return self.responses or self.turns_json


# ================================================================================ the runtime


class CodexOptions(RuntimeOptions):
    """``runtime_options`` of the codex runtime."""

    codex_path: str | None = None
    """The ``codex`` program (default: ``codex`` on PATH)."""
    base_url: str | None = None
    """The provider's base URL, ending in ``/v1`` (default: ``OPENAI_BASE_URL``, else OpenAI's)."""
    env_key: str = "OPENAI_API_KEY"
    """The name of the environment variable holding the provider's key (passed to Codex, never written)."""
    provider: str = "skillreach"
    """The provider's id in the generated ``config.toml``."""
    context_window: int | None = None
    """``model_context_window`` for Codex (its skills listing is capped at 2 % of it)."""
    sandbox: str = "read-only"
    """Codex's ``sandbox_mode`` (``read-only``: a probe reads skills, it never writes)."""
    concurrency: int | None = None
    timeout_s: float | None = None
    """Seconds a probe may take (default: the ``timeout_s`` setting)."""
    extra_args: list[str] | None = None
    extra_env: dict[str, str] | None = None
    otel: bool = True
    """Read activations from Codex's OTel ``codex.skill_invocation`` records (the ``cat`` command stays
    the fallback); False uses the command alone."""
    keep_workdirs: bool = False
    relay: bool = True
    """Run Codex through the probe's relay to ``base_url`` (:mod:`runtimes._relay`): tokens, turns and
    cost as served, reads in the model's order (Codex runs one response's calls at once and reports
    them as they finish), no request after the target."""


class CodexRuntime(CliProbeLoop):
    name: ClassVar[str] = "codex"
    Options: ClassVar[type[RuntimeOptions]] = CodexOptions
    paid: ClassVar[bool] = True
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    packages: ClassVar[tuple[str, ...]] = ("@openai/codex",)
    version_line: ClassVar[str] = "codex-cli {version}"
    request_tokens: ClassVar[int | None] = 10_150
    """Tokens Codex's developer instructions and tool definitions add to every request (its first
    request as captured in ``../shared/design/agent-clis/``, bytes / 4, the listing taken off)."""
    wants_all_probes: bool = False

    def __init__(
        self,
        model: str | None = None,
        *,
        settings: Settings | None = None,
        codex_path: str | None = None,
        base_url: str | None = None,
        env_key: str = "OPENAI_API_KEY",
        api_key: str | None = None,
        provider: str = "skillreach",
        context_window: int | None = None,
        sandbox: str = "read-only",
        concurrency: int | None = None,
        timeout_s: float | None = None,
        extra_args: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
        otel: bool = True,
        keep_workdirs: bool = False,
        relay: bool = True,
    ) -> None:
        self.settings = settings or default_settings()
        self.model = model or self.settings.model
        self.executable = find_executable(
            codex_path, "codex", "runtime_options.codex_path", CODEX_INSTALL_HINT
        )
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env_key):
            raise ConfigError(f"runtime_options.env_key {env_key!r} is not an environment variable name")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", provider):
            raise ConfigError(f"runtime_options.provider {provider!r}: use letters, digits, '-' and '_'")
        self.env_key = env_key
        self.provider = provider
        self._key = api_key or os.environ.get(env_key)
        if not self._key:
            raise ConfigError(
                f"the codex runtime runs codex with an isolated CODEX_HOME, so a stored login is not seen: "
                f"set {env_key} (or runtime_options.env_key to the variable that holds the provider's key)"
            )
        if sandbox not in ("read-only", "workspace-write", "danger-full-access"):
            raise ConfigError(
                f"runtime_options.sandbox {sandbox!r}: read-only, workspace-write or danger-full-access"
            )
        self.sandbox = sandbox
        self.context_window = context_window
        self.timeout_s = timeout_s if timeout_s is not None else self.settings.timeout_s
        self._sem = asyncio.Semaphore(concurrency or self.settings.concurrency)
        self.extra_args = list(extra_args or [])
        self.extra_env = dict(extra_env or {})
        self.otel = otel
        self.keep_workdirs = keep_workdirs
        self.relay = relay
        if relay and not re.match(r"https?://[^/\s]+", self.base_url):
            raise ConfigError(f"runtime_options.base_url {self.base_url!r} is not an http(s) URL")
        self.pids: list[int] = []
        """Process ids of every ``codex`` started (tests check they are gone)."""
        self.signals: Counter[str] = Counter()
        """Activations counted first from each signal (``otel``, ``command``), over all probes."""
        self.outside: set[str] = set()
        self._root = Path(tempfile.mkdtemp(prefix="skillreach-codex-"))
        self._templates = CatalogTemplates(self._root)

    # ------------------------------------------------------------------------------------ listing
    @property
    def effective_context_window(self) -> int:
        """The window Codex budgets the listing with (for a model it has no metadata for)."""
        return min(self.context_window or CODEX_FALLBACK_CONTEXT_WINDOW, CODEX_FALLBACK_CONTEXT_WINDOW)

    def listing(self, catalog: Catalog) -> AgentListing:
        return codex_listing(catalog.skills, context_window=self.effective_context_window)

    def listing_warning(self, catalog: Catalog) -> str | None:
        """One line when Codex will shorten descriptions or drop skills of ``catalog``."""
        return self.listing(catalog).warning(catalog.id, "Codex")

    # ------------------------------------------------------------------------------------ folders
    def _template(self, catalog: Catalog) -> Path:
        return self._templates.get(catalog)

    def _workdir(self, catalog: Catalog) -> Path:
        tpl = self._template(catalog)
        root = Path(tempfile.mkdtemp(prefix="probe-", dir=self._root))
        dest = root / "work" / ".agents" / "skills"
        link = os.link if self.sandbox == "read-only" else shutil.copy2
        try:
            shutil.copytree(tpl / "skills", dest, copy_function=link)
        except OSError:
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(tpl / "skills", dest)
        (root / "home").mkdir()
        (root / "codex-home").mkdir()
        return root

    def _config(self, model: str | None, otlp: str | None, base_url: str | None = None) -> str:
        lines = []
        if model:
            lines.append(f"model = {_toml(model)}")
        lines += [
            f"model_provider = {_toml(self.provider)}",
            'approval_policy = "never"',
            f"sandbox_mode = {_toml(self.sandbox)}",
            "check_for_update_on_startup = false",
        ]
        if self.context_window:
            lines.append(f"model_context_window = {int(self.context_window)}")
        lines += [
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[skills.bundled]",
            "enabled = false",
            "",
            f"[model_providers.{self.provider}]",
            f"name = {_toml(self.provider)}",
            f"base_url = {_toml(base_url or self.base_url)}",
            f"env_key = {_toml(self.env_key)}",
            'wire_api = "responses"',
        ]
        if otlp:
            lines += [
                "",
                "[otel]",
                'environment = "skillreach"',
                "log_user_prompt = false",
                "",
                '[otel.exporter."otlp-http"]',
                f"endpoint = {_toml(otlp)}",
                'protocol = "json"',
            ]
        return "\n".join(lines) + "\n"

    def _env(self, root: Path, relayed: bool = False) -> dict[str, str]:
        env = base_env(home=root / "home", passed=PASSED_ENV)
        if relayed:  # the relay on 127.0.0.1: never through the caller's proxy
            caller = os.environ.get("NO_PROXY") or os.environ.get("no_proxy")
            env["NO_PROXY"] = env["no_proxy"] = ",".join(filter(None, ("127.0.0.1,localhost", caller)))
        env["CODEX_HOME"] = str(root / "codex-home")
        env["OTEL_BLRP_SCHEDULE_DELAY"] = "20"  # export each record at once, not at exit
        env.update(self.extra_env)
        env[self.env_key] = self._key or ""
        return env

    def _command(self, query: Query, model: str | None) -> list[str]:
        cmd = [
            self.executable,
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--ephemeral",
            "--disable",
            "plugins",
            "--disable",
            "remote_plugin",
            "-c",
            "analytics.enabled=false",
            "-c",
            "skills.bundled.enabled=false",
        ]
        if model:
            cmd += ["-m", model]
        return [*cmd, *self.extra_args, "--", query.text]

    async def _run(self, query: Query, catalog: Catalog, tracker: Tracker, root: Path) -> Outcome:
        work = root / "work"
        skills = work / ".agents" / "skills"
        names = frozenset(catalog.names)
        state = CodexStream(
            {n: skills / n for n in catalog.names},
            work,
            tracker,
            names=names,
            otel_tools=self.otel,
        )
        seq = Sequencer(state.activate, lambda tool, args: CodexStream.call_skill(tool, args, names))
        state.seq = seq
        model = tracker.options.model or self.model
        timeout = min(self.timeout_s, tracker.options.timeout_s)  # the runtime's and the study's limits
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with contextlib.AsyncExitStack() as stack:
            otlp = None
            receiver = None
            if self.otel:
                receiver = await stack.enter_async_context(OtlpReceiver(state.record_otel))
                otlp = receiver.endpoint
            relay = await stack.enter_async_context(self._metered(seq, "responses", timeout))
            endpoint = relay.base_url if relay is not None else self.base_url
            config = self._config(model, otlp, endpoint)
            (root / "codex-home" / "config.toml").write_text(config, encoding="utf-8")
            result = await run_json_lines(
                self._command(query, model),
                env=self._env(root, relayed=relay is not None),
                cwd=work,
                on_event=state.feed,
                timeout_s=timeout,
                kill_grace_s=0.0,
                on_start=self.pids.append,
                stop=seq.ending,
            )
            if receiver is not None and not state.stopped and not result.timed_out:
                await receiver.drain()
            seq.finish()
            if relay is not None:
                await relay.settle(max(deadline - loop.time(), 1.0))
            usage, turns, unknown = self._figures(relay, state.usage, state.turns, state.stopped)
        self.signals.update(state.signals)
        self.outside |= state.outside
        error = state.error or unloaded(result.stderr, skills, names)
        if result.timed_out:
            error = f"codex did not finish within {timeout:g}s"
        elif error is None and not state.stopped and result.returncode != 0:
            error = f"codex exited with {result.describe()}"
        return Outcome.from_tracker(
            tracker,
            turns=turns,
            error=self._scrub(error) if error else None,
            usage=usage,
            cost_usd=None if unknown else cost_of(usage, self.settings.price_for(model)),
            resolved_model=model,
            tool_calls=state.tool_calls,
            final_text=state.answer(),
        )
