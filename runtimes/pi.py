"""``pi``: the pi coding agent (``@mariozechner/pi-coding-agent`` on the npm registry), run headless.

One probe is one process::

    pi -p --mode json --no-session --provider P --model M --tools read
       --no-skills --skill <dir>/<name> ... --no-extensions --no-prompt-templates --no-context-files
       --no-themes "<query>"

in a fresh folder: ``HOME``, ``PI_CODING_AGENT_DIR`` (pi's config dir) and the working folder are
temporary, ``--no-skills`` turns discovery off and each resident skill is passed with ``--skill`` from
a copy of its folder, so the catalog is exactly the catalog. pi lists the skills in its system prompt
(name, description, location of SKILL.md) and loads one by reading its file with the ``read`` tool:
**an activation is a read of a file inside a resident skill's folder**. Tools are limited to reading
(``read`` by default; ``grep,find,ls`` may be added with ``tools=``).

Events (``--mode json``, one JSON object a line, seen from pi 0.73): a ``session`` header, then
``agent_start``, ``turn_start``, ``message_start``/``message_update``/``message_end`` (assistant
messages carry ``model``, ``usage`` {input, output, cacheRead, cacheWrite, cost.total},
``stopReason``, ``errorMessage``), ``tool_execution_start`` {toolName, args} / ``tool_execution_end``,
``turn_end``, ``auto_retry_start``/``auto_retry_end``, ``agent_end``. Activations are taken from
``tool_execution_start`` as they arrive; when the tracker says stop (early exit or ``max_turns``) the
whole process group is ended at once (live early exit).

Endpoint: pi does not read ``ANTHROPIC_BASE_URL``. Its own configuration is ``models.json`` in its
config dir, where ``{"providers": {"anthropic": {"baseUrl": URL}}}`` reroutes a built-in provider
(keeping its models). The runtime writes that file per probe from ``base_url`` (option, else
``ANTHROPIC_BASE_URL`` for the anthropic provider, ``OPENAI_BASE_URL`` for openai); ``models_json``
copies a file of your own instead (custom providers such as Ollama or vLLM).

The relay (``relay = true``, the default): each probe runs pi against its own
:class:`~runtimes._relay.ModelRelay` (``models.json``'s ``baseUrl`` is the relay's, on 127.0.0.1), which
forwards to the endpoint and reads what it served. pi counts a turn only once it has read a reply, and
its request after the target's read goes out before a kill lands; through the relay that request is
held, never forwarded nor paid, the probe's tokens and turns are the responses the server served
(``turns`` = responses served; a reply cut off leaves the cost unknown, never 0) and skills are
credited in the order the model called them (:class:`~runtimes._relay.Sequencer`). The wire is the
provider's: ``anthropic`` speaks the Messages API (``messages``), ``openai`` the Responses API; with
``models_json`` the provider's own ``api`` (``anthropic-messages``, ``openai-completions``,
``openai-responses``, ``google-generative-ai``) and ``baseUrl`` say it, and a provider the relay cannot
read (another API, or no ``baseUrl``) runs without it. ``relay = false``: pi talks to the endpoint
itself and a probe's figures are pi's own ``message_end`` events (a probe ended at its target may have
paid for one more request).

Retries, turns, cost: pi retries transient provider errors itself (``settings.json`` ``retry``, bounded
by ``max_retries``; its provider SDK honours ``retry-after``); usage is priced from the settings' price
table (pi's own figure for unpriced models, when pi saw every reply). Tested with the real pi 0.73.1
from npm against the local Messages API stand-in, and in CI with a stand-in executable printing the
event format recorded from it.

Residency: pi reports its catalog only in RPC mode, so once per catalog the runtime starts pi in the
same isolated layout with ``--mode rpc``, asks ``get_commands`` and checks that its ``skill:*``
commands are exactly the resident skills; a mismatch fails the probes with the difference named.

The process, isolation and layout plumbing is :mod:`runtimes._agentcli`, shared with the other CLI
runtimes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, Usage
from skillreach.runtimes._agentcli import (
    AgentStream,
    ResidencyCache,
    base_env,
    find_executable,
    lay_out_skills,
    run_error,
    run_json_lines,
    skill_for_path,
)
from skillreach.runtimes._relay import ModelRelay, Sequencer, Wire
from skillreach.runtimes._version import program_version
from skillreach.settings import Settings
from skillreach.study.contract import Outcome, RuntimeOptions, Tracker, cost_of, default_settings

__all__ = ["PiOptions", "PiRuntime", "PiStream", "parse_pi_events"]

PI_INSTALL_HINT = "install it with `npm install -g @mariozechner/pi-coding-agent` or pass pi_path=/path/to/pi"

_READ_TOOLS = {"read"}
_BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
_PROVIDER_WIRE: dict[str, tuple[Wire, str]] = {
    "anthropic": ("messages", "https://api.anthropic.com"),
    "openai": ("responses", "https://api.openai.com/v1"),
}
"""A built-in provider's API (what the relay reads) and endpoint, as pi's model table gives them."""
_API_WIRE: dict[str, Wire] = {
    "anthropic-messages": "messages",
    "openai-completions": "chat",
    "openai-responses": "responses",
    "google-generative-ai": "gemini",
}
"""A ``models.json`` provider's ``api`` and the relay's wire for it."""
MAX_MODELS_JSON = 2**20


class PiOptions(RuntimeOptions):
    """``runtime_options`` of the pi runtime."""

    pi_path: str | None = None
    provider: str = "anthropic"
    base_url: str | None = None
    models_json: str | None = None
    tools: str = "read"
    thinking: str | None = None
    timeout_s: float | None = None
    """Seconds a probe may take (default: the ``timeout_s`` setting)."""
    env: dict[str, str] | None = None
    check_residency: bool = True
    max_retries: int | None = None
    """pi's own retries of transient provider errors (default: the ``max_retries`` setting)."""
    relay: bool = True
    """Run pi through the probe's relay (:mod:`runtimes._relay`): tokens and turns as served, skills in
    the model's order, no request after the target. False: pi talks to the endpoint itself and the
    figures are its own events'."""


class PiRuntime:
    """The pi CLI, one isolated process per probe."""

    name: ClassVar[str] = "pi"
    Options: ClassVar[type[RuntimeOptions]] = PiOptions
    paid: ClassVar[bool] = False
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    wants_all_probes: bool = False
    packages: ClassVar[tuple[str, ...]] = ("@mariozechner/pi-coding-agent",)
    """The npm package ``pi`` ships in (its version is read from its ``package.json``)."""
    version_line: ClassVar[str] = "{version}"

    def __init__(
        self,
        *,
        model: str | None = None,
        settings: Settings | None = None,
        pi_path: str | None = None,
        provider: str = "anthropic",
        base_url: str | None = None,
        models_json: str | Path | None = None,
        tools: str = "read",
        thinking: str | None = None,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
        check_residency: bool = True,
        max_retries: int | None = None,
        relay: bool = True,
    ) -> None:
        self.settings = settings or default_settings()
        self.model = model or self.settings.model
        self.executable = find_executable(
            pi_path or self.settings.pi_path, "pi", "SKILLREACH_PI_PATH", PI_INSTALL_HINT
        )
        self.provider = provider
        env_var = _BASE_URL_ENV.get(provider)
        self.base_url = base_url or (os.environ.get(env_var) if env_var else None) or None
        self.models_json = Path(models_json) if models_json else None
        self._models: dict[str, Any] | None = None
        if self.models_json is not None:
            self._models = _read_models_json(self.models_json)
        self.relayed: tuple[Wire, str] | None = self._relay_target() if relay else None
        """(wire, endpoint) of the probes' relay; None: pi talks to its endpoint itself."""
        names = [t.strip() for t in tools.split(",") if t.strip()]
        writing = sorted(set(names) - {"read", "grep", "find", "ls"})
        if writing:
            raise ConfigError(f"pi tools must be read-only (read, grep, find, ls); got {', '.join(writing)}")
        self.tools = ",".join(names) or "read"
        self.thinking = thinking
        self.timeout_s = timeout_s if timeout_s is not None else self.settings.timeout_s
        self.extra_env = dict(env or {})
        self.max_retries = max_retries if max_retries is not None else self.settings.max_retries
        self._residency = ResidencyCache(self._check, enabled=check_residency)

    async def aclose(self) -> None:
        return None

    async def version(self) -> str | None:
        """pi's version: from its npm package's ``package.json`` when it has one, else ``pi --version``."""
        return await program_version(self.executable, packages=self.packages, line=self.version_line)

    def _relay_target(self) -> tuple[Wire, str] | None:
        """The wire and endpoint of pi's provider, when the relay can read its API."""
        if self._models is not None:
            entry = (self._models.get("providers") or {}).get(self.provider)
            if not isinstance(entry, dict):
                return None
            wire = _API_WIRE.get(str(entry.get("api") or ""))
            if wire is None and self.provider in _PROVIDER_WIRE and not entry.get("api"):
                wire = _PROVIDER_WIRE[self.provider][0]  # a built-in provider rerouted
            url = entry.get("baseUrl")
            if wire is None or not isinstance(url, str) or not url.startswith(("http://", "https://")):
                return None
            models = entry.get("models") if isinstance(entry.get("models"), list) else []
            if any(isinstance(m, dict) and m.get("api") not in (None, entry.get("api")) for m in models):
                return None  # a model of another API: one relay reads one wire
            return wire, url
        if self.provider not in _PROVIDER_WIRE:
            return None
        wire, default = _PROVIDER_WIRE[self.provider]
        url = self.base_url or default
        if not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"runtime_options.base_url {url!r} is not an http(s) URL (the pi runtime relays each "
                "probe's requests to it; relay = false to let pi read it itself)"
            )
        return wire, url

    def _cost(self, state: PiStream, usage: Usage, model: str | None, complete: bool) -> float | None:
        """The price table's cost (as for every runtime), else the cost pi computed itself when pi saw
        every reply the probe was served (``complete``)."""
        priced = cost_of(usage, self.settings.price_for(model or self.model))
        if priced is not None:
            return priced
        return state.cost if complete and state.cost > 0 else None

    # ---------------------------------------------------------------------------------- layout
    def _write_config(self, agent_dir: Path, endpoint: str | None = None) -> None:
        """pi's config dir: ``models.json`` pointing at ``endpoint`` (the probe's relay; the runtime's
        ``base_url`` when None), and ``settings.json``."""
        agent_dir.mkdir(parents=True, exist_ok=True)
        if self._models is not None:
            config = json.loads(json.dumps(self._models))
            entry = (config.get("providers") or {}).get(self.provider)
            if endpoint is not None and isinstance(entry, dict):
                entry["baseUrl"] = endpoint
            (agent_dir / "models.json").write_text(json.dumps(config), encoding="utf-8")
        elif endpoint or self.base_url:
            config = {"providers": {self.provider: {"baseUrl": endpoint or self.base_url}}}
            (agent_dir / "models.json").write_text(json.dumps(config), encoding="utf-8")
        # No startup chatter; pi's own retries (429, 5xx, overloaded: exponential backoff, and the
        # provider SDK honours retry-after) are bounded by our max_retries.
        settings = {
            "quietStartup": True,
            "enableSkillCommands": True,
            "retry": {"enabled": self.max_retries > 0, "maxRetries": self.max_retries, "baseDelayMs": 1000},
        }
        (agent_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")

    def _env(self, root: Path, relayed: bool = False) -> dict[str, str]:
        env = base_env(home=root / "home", extra=self.extra_env)
        if relayed:  # the relay on 127.0.0.1: never through a proxy
            env["NO_PROXY"] = env["no_proxy"] = ",".join(
                filter(None, ("127.0.0.1,localhost", env.get("NO_PROXY") or env.get("no_proxy")))
            )
        env["PI_CODING_AGENT_DIR"] = str(root / "agent")
        env["PI_CODING_AGENT_SESSION_DIR"] = str(root / "sessions")
        env["PI_OFFLINE"] = "1"
        env["PI_TELEMETRY"] = "0"
        return env

    def _args(self, skill_dirs: dict[str, Path]) -> list[str]:
        args = [self.executable, "--no-session", "--provider", self.provider]
        if self.model:
            args += ["--model", self.model]
        if self.thinking:
            args += ["--thinking", self.thinking]
        args += ["--tools", self.tools, "--no-skills"]
        for folder in skill_dirs.values():
            args += ["--skill", str(folder)]
        args += ["--no-extensions", "--no-prompt-templates", "--no-context-files", "--no-themes"]
        return args

    # ------------------------------------------------------------------------------- residency
    async def _check(self, catalog: Catalog) -> str | None:
        with tempfile.TemporaryDirectory(prefix="skillreach-pi-") as tmp:
            root = Path(tmp)
            skill_dirs = lay_out_skills(catalog, root / "skills")
            self._write_config(root / "agent")
            (root / "work").mkdir()
            cmd = [*self._args(skill_dirs), "--mode", "rpc"]
            request = json.dumps({"id": "residency", "type": "get_commands"}) + "\n"
            seen: list[str] = []

            def on_event(event: dict[str, Any]) -> bool:
                if event.get("id") == "residency" and event.get("type") == "response":
                    for c in (event.get("data") or {}).get("commands", []):
                        if c.get("source") == "skill" and str(c.get("name", "")).startswith("skill:"):
                            seen.append(str(c["name"])[len("skill:") :])
                    return False
                return True

            result = await run_json_lines(
                cmd,
                env=self._env(root),
                cwd=root / "work",
                on_event=on_event,
                timeout_s=min(self.timeout_s, 60.0),
                stdin=request,
            )
            if not result.stopped_early:
                return f"pi did not report its skills (--mode rpc get_commands): {result.describe()}"
            missing = sorted(set(catalog.names) - set(seen))
            extra = sorted(set(seen) - set(catalog.names))
            if missing or extra:
                return (
                    "pi's resident skills differ from the catalog: "
                    f"missing {missing or '[]'}, not in the catalog {extra or '[]'} "
                    "(a skill whose frontmatter pi rejects is left out; run `skillreach lint`)"
                )
            return None

    # ----------------------------------------------------------------------------------- probe
    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        problem = await self._residency.problem(catalog)
        if problem is not None:
            return Outcome.from_tracker(tracker, error=problem)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        with tempfile.TemporaryDirectory(prefix="skillreach-pi-") as tmp:
            root = Path(tmp)
            skill_dirs = lay_out_skills(catalog, root / "skills")
            work = root / "work"
            work.mkdir()
            state = PiStream(skill_dirs, work, tracker)
            cmd = [*self._args(skill_dirs), "-p", "--mode", "json", query.text]
            async with self._metered(state) as relay:
                endpoint = relay.base_url if relay is not None else None
                await asyncio.to_thread(self._write_config, root / "agent", endpoint)
                result = await run_json_lines(
                    cmd,
                    env=self._env(root, relayed=relay is not None),
                    cwd=work,
                    on_event=state.take,
                    timeout_s=self.timeout_s,
                    kill_grace_s=0.0 if relay is not None else 2.0,
                    stop=state.seq.ending if state.seq is not None else None,
                )
                if state.seq is not None:
                    state.seq.finish()
                if relay is not None:
                    await relay.settle(max(deadline - loop.time(), 1.0))
                # pi's own figures without the relay, or when pi reached its model some other way
                relayed = relay is not None and bool(relay.snapshot() or not state.requests)
                if relay is not None and relayed:
                    usage, turns, unknown = relay.usage(), relay.turns(), relay.unknown()
                    model = state.model or relay.model()
                else:
                    usage, turns, unknown, model = state.usage, state.requests, False, state.model
        complete = not relayed or (not unknown and turns == state.requests)
        return Outcome.from_tracker(
            tracker,
            turns=turns,
            error=run_error("pi", state.error, result, self.timeout_s),
            usage=usage,
            cost_usd=None if unknown else self._cost(state, usage, model, complete),
            resolved_model=model,
            tool_calls=state.tool_calls,
            final_text=state.answer(),
        )

    @contextlib.asynccontextmanager
    async def _metered(self, state: PiStream) -> AsyncIterator[ModelRelay | None]:
        """The probe's relay (None without one); ``state`` credits its skill reads in the model's order."""
        if self.relayed is None:
            yield None
            return
        wire, upstream = self.relayed

        def skill_of(tool: str, args: dict[str, Any]) -> str | None:
            if tool not in _READ_TOOLS:
                return None
            return skill_for_path(args.get("path"), state.skill_dirs, state.cwd)

        seq = Sequencer(state.activate, skill_of)
        state.seq = seq
        async with ModelRelay(upstream, wire, admit=seq.admit, timeout_s=self.timeout_s) as relay:
            seq.relay = relay
            yield relay


@dataclass
class PiStream(AgentStream):
    """Folds pi's JSON events into tracker calls, usage and the final text."""

    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    requests: int = 0
    """Model replies seen (assistant messages): the probe's turns without the relay."""
    seq: Sequencer | None = None
    """Credits skill reads in the model's order (a probe through the relay); None: as they come."""
    _halted: bool = False

    @property
    def stopped(self) -> bool:
        return self._halted or (self.seq is not None and self.seq.stopped)

    def take(self, event: dict[str, Any]) -> bool:
        """One event of a live probe (:meth:`feed`); False when the probe must stop now."""
        go = self.feed(event)
        if self.seq is not None:
            self.seq.poke()
        return go and not self.stopped

    def feed(self, event: dict[str, Any]) -> bool:
        """Take one event; return False when the probe must stop now."""
        kind = event.get("type")
        if kind == "message_end":
            self._message(event.get("message") or {})
        elif kind == "auto_retry_start":
            self.error = None  # pi retries a transient provider error itself; judge the retry
        elif kind == "auto_retry_end" and not event.get("success", True):
            self.error = f"pi: {event.get('finalError') or 'retries exhausted'}"
        elif kind == "tool_execution_start":
            name = str(event.get("toolName", ""))
            raw_args = event.get("args")
            args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
            skill = self.path_skill(args, ("path",)) if name in _READ_TOOLS else None
            if skill is None:
                return self.record(name, args)
            if self.seq is None:
                self._halted = self._halted or not self.activate(skill)
                return not self._halted
            self.seq.loaded(skill)  # credited once every earlier call of the model's is reported
            return not self.stopped
        return True

    def _message(self, message: dict[str, Any]) -> None:
        if message.get("role") != "assistant":
            return
        self.requests += 1
        usage = message.get("usage") or {}
        self.usage = self.usage + Usage(
            input_tokens=int(usage.get("input") or 0),
            output_tokens=int(usage.get("output") or 0),
            cache_creation_input_tokens=int(usage.get("cacheWrite") or 0),
            cache_read_input_tokens=int(usage.get("cacheRead") or 0),
        )
        self.cost += float((usage.get("cost") or {}).get("total") or 0.0)
        self.model = message.get("model") or self.model
        text = "".join(
            str(b.get("text", "")) for b in message.get("content") or [] if b.get("type") == "text"
        )
        if text:
            self.final_text = text
        if message.get("stopReason") in ("error", "aborted"):
            self.error = f"pi: {message.get('errorMessage') or message.get('stopReason')}"


def _read_models_json(path: Path) -> dict[str, Any]:
    """``models_json`` (bounded), or one clear error naming the file."""
    if not path.is_file():  # missing, a folder, a pipe or a device: never opened
        raise ConfigError(f"{path}: models_json file not found (a regular JSON file)")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_MODELS_JSON + 1)
    except OSError as exc:
        raise ConfigError(
            f"{path}: models_json cannot be read ({exc.strerror or type(exc).__name__})"
        ) from None
    if len(raw) > MAX_MODELS_JSON:
        raise ConfigError(f"{path}: models_json is over {MAX_MODELS_JSON:,} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ConfigError(
            f"{path}: models_json is not a JSON file pi can read ({type(exc).__name__})"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f'{path}: models_json must be a JSON object ({{"providers": {{...}}}})')
    return data


def parse_pi_events(lines: list[str], skill_dirs: dict[str, Path], cwd: Path, tracker: Tracker) -> PiStream:
    """Fold recorded event lines (for tests and replays) as a live probe would."""
    state = PiStream(skill_dirs, cwd, tracker)
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and not state.feed(event):
            break
    return state
