"""``claude-code``: the real ``claude`` program, headless, in a fresh folder holding exactly the catalog.

Per probe:

1. A fresh temporary working folder whose ``.claude/skills/<name>/`` holds exactly the resident skills
   (each skill's folder copied, hard-linked from a per-catalog template when possible), and an isolated
   ``HOME`` / ``CLAUDE_CONFIG_DIR`` inside it: no user skills, settings, plugins or sessions leak in.
2. ``claude -p <query> --output-format stream-json --verbose --max-turns N [--model M]`` with
   ``--setting-sources project``, ``--settings`` (bundled skills and built-in plugins off),
   ``--tools Skill`` (plus Bash/Read/Write/Edit in compliance mode), ``--strict-mcp-config`` and
   ``--no-session-persistence``; environment ``CLAUDE_CODE_DISABLE_BUNDLED_SKILLS=1``,
   ``DISABLE_DOCTOR_COMMAND=1``, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, ``DISABLE_AUTOUPDATER=1``.
   The process starts in its own session (its own process group).
3. The stream is read line by line as it arrives: the ``system``/``init`` event's ``skills`` are checked
   against the catalog (a catalog skill missing, or a stranger present, is the probe's error; built-ins
   that cannot be switched off — :data:`KNOWN_NON_CATALOG` — are reported in ``non_catalog_residents``,
   never mixed into the catalog); every ``tool_use`` named ``Skill`` is an activation fed to the tracker
   at once; at early exit (or ``max_turns``) the whole process group is ended (SIGTERM, then SIGKILL).
   The ``result`` event gives cost, usage and turns; without it (early exit) usage is summed from the
   assistant messages and priced with ``Settings.price_for``.
4. A timeout ends the process group too, and the probe carries the error.

In compliance mode the agent may call Bash, Read, Write and Edit after loading its skill; the CLI runs
with no permission granted, so in ``-p`` mode tools that need permission are refused, never run — the
calls are recorded as :class:`~skillreach.models.ToolCall`. The last text after the skill loaded is
``final_text`` (``""`` when the agent ended with none).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, Usage
from skillreach.runtimes._agentcli import (
    AgentStream,
    Removals,
    base_env,
    find_executable,
    run_json_lines,
    write_skill,
)
from skillreach.runtimes._anthropic_common import usage_of
from skillreach.runtimes._version import program_version
from skillreach.settings import Settings
from skillreach.skills.agent_listing import AgentListing, claude_code_listing
from skillreach.study.contract import (
    Outcome,
    RuntimeOptions,
    Tracker,
    cost_of,
    default_settings,
)

__all__ = ["KNOWN_NON_CATALOG", "ClaudeCodeOptions", "ClaudeCodeRuntime", "StreamState"]

log = logging.getLogger("skillreach.runtimes.claude_code")

KNOWN_NON_CATALOG = frozenset({"doctor", "plugin-authoring"})
"""Built-in skills some Claude Code versions keep listing even with bundled skills off."""

BUILTIN_PLUGINS = (
    "cc-plugin-plugin-authoring@builtin",
    "cc-plugin-agents-md@builtin",
    "cc-plugin-privacy@builtin",
)
CLI_SETTINGS = {"disableBundledSkills": True, "enabledPlugins": dict.fromkeys(BUILTIN_PLUGINS, False)}
ISOLATION_ENV = {
    "CLAUDE_CODE_DISABLE_BUNDLED_SKILLS": "1",
    "DISABLE_DOCTOR_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
PASSED_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
    "LANG",
    "LC_ALL",
    "TZ",
)
COMPLIANCE_TOOLS = "Skill,Bash,Read,Write,Edit"
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_HOLD_HOOK = (
    "import json, os, sys, time\n"
    "call = json.load(sys.stdin)\n"
    "name = str((call.get('tool_input') or {}).get('skill', '')).lstrip('/')\n"
    "if name == sys.argv[1]:\n"
    "    open(os.path.join(sys.argv[2], 'hold-%d' % os.getpid()), 'w').close()\n"
    "    agent = os.getppid()\n"
    "    try:\n"
    "        head, tail = open('/proc/%d/stat' % agent).read().rsplit(')', 1)\n"
    "        if head.split('(', 1)[1] in ('sh', 'dash', 'bash'):\n"
    "            agent = int(tail.split()[1])\n"
    "    except (OSError, ValueError, IndexError):\n"
    "        pass\n"
    "    end = time.time() + float(sys.argv[3]) if agent > 1 else 0\n"
    "    while time.time() < end:\n"
    "        try:\n"
    "            os.kill(agent, 0)\n"
    "        except OSError:\n"
    "            break\n"
    "        time.sleep(0.2)\n"
)
"""The hook that parks the target's Skill call. Claude Code starts hooks in their own session, out of
reach of the process group that is ended, so the hook leaves ``hold-<pid>`` in the probe's folder (the
runtime ends it), and ends itself within 0.2 s of the agent's end (at once when the agent is already
gone), or at the probe's timeout."""


@dataclass
class StreamState(AgentStream):
    """What the stream said so far (one probe): the shared stream state of the agent CLIs
    (:class:`~runtimes._agentcli.AgentStream`: activations, other tool calls, the final answer, the
    error) and what Claude Code's stream adds (init event, usage per message, result, turns)."""

    init_skills: list[str] | None = None
    cli_model: str | None = None
    resolved_model: str | None = None
    usage_by_message: dict[str, Usage] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    stop: bool = False
    compliance: bool = False
    assistant_turns: set[str] = field(default_factory=set)
    compliance_turns: set[str] = field(default_factory=set)
    """Assistant messages after the expected skill was loaded (compliance mode's steps)."""
    served: dict[str, Usage] = field(default_factory=dict)
    """Per model response (``--include-partial-messages``): its usage as the server said it, from its
    ``message_start`` and ``message_delta`` events (an assistant line carries the start's output
    count, 1, not the 7 served)."""
    finished: set[str] = field(default_factory=set)
    """Responses whose ``message_delta`` (final usage) was read."""
    current: str | None = None
    draining: bool = False
    """The probe has stopped, and waits for the current response's final usage before the end."""

    @property
    def usage(self) -> Usage:
        if self.result is not None and isinstance(self.result.get("usage"), dict):
            return usage_of(self.result["usage"])
        total = Usage()
        for mid, u in self.usage_by_message.items():
            total = total + self.served.get(mid, u)
        for mid, u in self.served.items():
            if mid not in self.usage_by_message:
                total = total + u
        return total

    @property
    def turns(self) -> int:
        """Model responses: those whose stream started (never the CLI's ``num_turns``, which counts
        more than the requests it sent), else the assistant messages seen."""
        return len(self.served) or len(self.assistant_turns)

    @property
    def settled(self) -> bool:
        """Every response started has its final usage."""
        return set(self.served) <= self.finished


class ClaudeCodeOptions(RuntimeOptions):
    """``runtime_options`` of the claude-code runtime."""

    claude_path: str | None = None
    """The ``claude`` program (default: the ``claude_path`` setting, ``claude`` on PATH)."""
    concurrency: int | None = None
    timeout_s: float | None = None
    """Seconds a probe may take (default: the ``timeout_s`` setting)."""
    base_url: str | None = None
    extra_env: dict[str, str] | None = None
    extra_args: list[str] | None = None
    known_non_catalog: frozenset[str] = KNOWN_NON_CATALOG
    keep_workdirs: bool = False
    kill_grace_s: float = 0.25
    drain_s: float = 10.0
    """Seconds a probe stopped at its target waits for that response's final usage (the hook holds the
    call meanwhile: no request follows)."""


class ClaudeCodeRuntime:
    name: ClassVar[str] = "claude-code"
    Options: ClassVar[type[RuntimeOptions]] = ClaudeCodeOptions
    paid: ClassVar[bool] = True
    cached_listing: ClassVar[bool] = True
    batch_mode: ClassVar[bool] = False
    packages: ClassVar[tuple[str, ...]] = ("@anthropic-ai/claude-code",)
    """The npm packages ``claude`` ships in (its version is read from their ``package.json``)."""
    version_line: ClassVar[str] = "{version} (Claude Code)"
    request_tokens: ClassVar[int | None] = 8_100
    """Tokens Claude Code 2.1.328's system prompt, reminders and tool definitions add to every request
    (its first request to the stand-in, bytes / 4, the listing taken off)."""
    wants_all_probes: bool = False

    def __init__(
        self,
        model: str | None = None,
        *,
        settings: Settings | None = None,
        claude_path: str | None = None,
        concurrency: int | None = None,
        timeout_s: float | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        extra_env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
        known_non_catalog: frozenset[str] = KNOWN_NON_CATALOG,
        keep_workdirs: bool = False,
        kill_grace_s: float = 0.25,
        drain_s: float = 10.0,
    ) -> None:
        self.settings = settings or default_settings()
        self.model = model or self.settings.model
        self.claude_path = find_executable(
            claude_path or self.settings.claude_path,
            "claude",
            "SKILLREACH_CLAUDE_PATH",
            "install Claude Code (npm install -g @anthropic-ai/claude-code) or set SKILLREACH_CLAUDE_PATH",
        )
        self.timeout_s = timeout_s if timeout_s is not None else self.settings.timeout_s
        self._sem = asyncio.Semaphore(concurrency or self.settings.concurrency)
        self.env_overrides: dict[str, str] = dict(extra_env or {})
        if base_url:
            self.env_overrides["ANTHROPIC_BASE_URL"] = base_url
        if api_key:
            self.env_overrides["ANTHROPIC_API_KEY"] = api_key
        self.extra_args = list(extra_args or [])
        credentials = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
        if not any(self.env_overrides.get(k) or os.environ.get(k) for k in credentials):
            raise ConfigError(
                "the claude-code runtime runs claude with an isolated config folder, so a login stored "
                "in ~/.claude is not seen: set ANTHROPIC_API_KEY "
                "(or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`)"
            )
        self.known_non_catalog = known_non_catalog
        self.keep_workdirs = keep_workdirs
        self.kill_grace_s = kill_grace_s
        self.drain_s = drain_s
        """Seconds a stopped probe waits for its last response's final usage (its ``message_delta``)."""
        self.non_catalog_residents: set[str] = set()
        """Built-ins seen beside the catalog (reported, never scored)."""
        self.pids: list[int] = []
        """Process ids of every ``claude`` started (tests check they are gone)."""
        self._templates: dict[str, Path] = {}
        self._templates_lock = threading.Lock()
        self.template_builds = 0
        """Per-catalog template folders built (one per catalog, however many probes run at once)."""
        self._root = Path(tempfile.mkdtemp(prefix="skillreach-claude-code-"))
        self._removals = Removals()

    # -------------------------------------------------------------------------------- folders

    def _template(self, catalog: Catalog) -> Path:
        """The catalog's skills laid out once per runtime (``catalog-<digest>/skills``).

        Probes run in worker threads at once: the first one to ask builds the folder under a lock, in a
        temporary folder renamed into place, so no probe ever sees a half-built template and no two
        probes build it (issue 13: concurrent builds failed with ``FileExistsError``).
        """
        key = hashlib.sha256(catalog.digest.encode()).hexdigest()[:16]
        with self._templates_lock:
            tpl = self._templates.get(key)
            if tpl is None:
                tpl = self._build_template(catalog, self._root / f"catalog-{key}")
                self._templates[key] = tpl
                self.template_builds += 1
        return tpl

    def _build_template(self, catalog: Catalog, dest: Path) -> Path:
        bad = [s.name for s in catalog.skills if not _FOLDER_NAME.fullmatch(s.name)]
        if bad:
            raise ConfigError(
                f"catalog {catalog.id!r}: skill names that cannot be folder names under .claude/skills: "
                f"{', '.join(map(repr, bad))}; rename them (letters, digits, '-', '_', '.')"
            )
        building = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=self._root))
        try:
            for skill in catalog.skills:
                write_skill(skill, building / "skills" / skill.name, symlinks=False)
            os.rename(building, dest)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        return dest

    def _workdir(self, catalog: Catalog, *, writable: bool) -> Path:
        """A fresh folder; skills hard-linked from the catalog's template, or copied when the agent
        may write (compliance mode), so no probe can change what the next one sees."""
        tpl = self._template(catalog)
        work = Path(tempfile.mkdtemp(prefix="probe-", dir=self._root))
        dest = work / "project" / ".claude" / "skills"
        try:
            shutil.copytree(tpl / "skills", dest, copy_function=shutil.copy2 if writable else os.link)
        except OSError:
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(tpl / "skills", dest)
        (work / "home" / ".claude").mkdir(parents=True)
        return work

    def _env(self, work: Path) -> dict[str, str]:
        """The shared isolated environment (:func:`~runtimes._agentcli.base_env`: a private HOME and
        XDG folders, PATH, locale, provider keys) with Claude Code's own variables and config folder."""
        env = base_env(home=work / "home", passed=PASSED_ENV)
        env["CLAUDE_CONFIG_DIR"] = str(work / "home" / ".claude")
        env["TMPDIR"] = str(work)
        env.update(ISOLATION_ENV)
        env.update(self.env_overrides)
        return env

    def _settings(self, tracker: Tracker, work: Path) -> dict[str, Any]:
        """CLI settings; with early exit, a PreToolUse hook holds the target's Skill call.

        The CLI sends its next request a few milliseconds after a tool call, faster than the process
        group can be ended; the hook parks the call of the expected skill (the stream has already
        shown it) so that no request follows the target before the group is ended. The hook runs in
        its own session: it says its pid in ``work`` and :meth:`_end_holds` ends it (and it never
        outlives the probe's timeout).
        """
        settings: dict[str, Any] = dict(CLI_SETTINGS)
        if tracker.options.early_exit and tracker.expected is not None and not tracker.options.compliance:
            args = " ".join(shlex.quote(a) for a in (tracker.expected, str(work), f"{self.timeout_s:g}"))
            hold = f"{shlex.quote(sys.executable)} -c {shlex.quote(_HOLD_HOOK)} {args}"
            settings["hooks"] = {
                "PreToolUse": [
                    {"matcher": "Skill", "hooks": [{"type": "command", "command": hold, "timeout": 3600}]}
                ]
            }
        return settings

    def _command(self, query: Query, tracker: Tracker, work: Path) -> list[str]:
        opts = tracker.options
        turns = opts.max_turns + 1 + (opts.step_budget if opts.compliance else 0)
        cmd = [
            self.claude_path,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--max-turns",
            str(turns),
            "--setting-sources",
            "project",
            "--settings",
            json.dumps(self._settings(tracker, work), separators=(",", ":")),
            "--tools",
            COMPLIANCE_TOOLS if opts.compliance else "Skill",
            "--strict-mcp-config",
            "--no-session-persistence",
            "--include-partial-messages",
        ]
        model = opts.model or self.model
        if model:
            cmd += ["--model", model]
        return [*cmd, *self.extra_args, "--", query.text]

    def _scrub(self, text: str) -> str:
        for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
            secret = self.env_overrides.get(key) or os.environ.get(key)
            if secret:
                text = text.replace(secret, "***")
        return text

    # ---------------------------------------------------------------------------------- stream

    def _residency(self, state: StreamState, catalog: Catalog) -> str | None:
        seen = set(state.init_skills or [])
        missing = sorted(set(catalog.names) - seen)
        extra = seen - set(catalog.names)
        known = extra & self.known_non_catalog
        strangers = sorted(extra - known)
        for name in sorted(known - self.non_catalog_residents):
            log.warning("claude-code lists the built-in skill %r beside the catalog; it is not scored", name)
        self.non_catalog_residents |= known
        if missing or strangers:
            parts = []
            if missing:
                parts.append(f"catalog skills missing from the agent: {', '.join(missing)}")
            if strangers:
                parts.append(f"skills present that are not in the catalog: {', '.join(strangers)}")
            return "residency check failed: " + "; ".join(parts)
        return None

    def handle_event(
        self, event: dict[str, Any], state: StreamState, catalog: Catalog, tracker: Tracker
    ) -> None:
        """Apply one stream-json event to the probe's state (and the tracker)."""
        kind = event.get("type")
        if kind == "stream_event":
            self._partial(event.get("event") or {}, state)
        elif state.draining:
            return  # stopped: only the response's final usage is still read
        elif kind == "system" and event.get("subtype") == "init":
            state.init_skills = [str(s) for s in event.get("skills") or []]
            state.cli_model = event.get("model")
            state.error = self._residency(state, catalog)
            state.stop = state.error is not None
        elif kind == "assistant":
            message = event.get("message") or {}
            mid = str(message.get("id") or len(state.usage_by_message))
            if state.compliance and mid not in state.compliance_turns:
                if len(state.compliance_turns) >= tracker.options.step_budget:
                    state.stop = True  # the step budget is spent: this turn is not recorded
                    return
                state.compliance_turns.add(mid)
            state.assistant_turns.add(mid)
            if message.get("model"):
                state.resolved_model = str(message["model"])
            if isinstance(message.get("usage"), dict):
                state.usage_by_message[mid] = usage_of(message["usage"])
            for block in message.get("content") or []:
                self._block(block, state, catalog, tracker)
                if state.stop:
                    return
        elif kind == "result":
            state.result = event
            if event.get("is_error") and event.get("subtype") not in ("success", "error_max_turns"):
                state.error = self._scrub(
                    f"claude: {event.get('subtype')}: {event.get('result', '')}".strip()
                )
            elif event.get("is_error") and str(event.get("result", "")).startswith("API Error"):
                state.error = self._scrub(f"claude: {event.get('result')}")

    @staticmethod
    def _partial(raw: dict[str, Any], state: StreamState) -> None:
        """A raw Messages API stream event (``--include-partial-messages``): the usage it carries."""
        kind = raw.get("type")
        if kind == "message_start" and isinstance(raw.get("message"), dict):
            message = raw["message"]
            mid = str(message.get("id") or f"#{len(state.served)}")
            state.current = mid
            state.served[mid] = usage_of(message.get("usage") or {})
        elif kind == "message_delta" and state.current is not None and isinstance(raw.get("usage"), dict):
            delta = {k: v for k, v in raw["usage"].items() if isinstance(v, int)}
            before = state.served.get(state.current, Usage())
            state.served[state.current] = before.model_copy(update={k: v for k, v in delta.items()
                                                                    if k in Usage.model_fields})  # fmt: skip
            state.finished.add(state.current)

    def _block(self, block: dict[str, Any], state: StreamState, catalog: Catalog, tracker: Tracker) -> None:
        if block.get("type") == "text" and block.get("text"):
            if state.compliance:  # the answer is what the agent says after it read its skill
                state.final_text = str(block["text"])
            return
        if block.get("type") != "tool_use":
            return
        name = block.get("name")
        raw_input = block.get("input")
        args: dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
        if name == "Skill":
            skill = str(args.get("skill", "")).strip().lstrip("/")
            if skill not in catalog or state.compliance:
                return
            if not state.activate(skill):
                state.stop = True
            state.compliance = tracker.options.compliance and tracker.expected_loaded
        elif state.compliance:
            state.record(str(name), dict(args))

    # ---------------------------------------------------------------------------------- process

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        async with self._sem:
            work = await asyncio.to_thread(self._workdir, catalog, writable=tracker.options.compliance)
            try:
                return await self._run(query, catalog, tracker, work)
            finally:
                if not self.keep_workdirs:  # off the probe's path; aclose waits for it
                    self._removals.add(work)

    async def _run(self, query: Query, catalog: Catalog, tracker: Tracker, work: Path) -> Outcome:
        timeout = self.timeout_s
        skills = work / "project" / ".claude" / "skills"
        state = StreamState({name: skills / name for name in catalog.names}, work / "project", tracker)

        ending = asyncio.Event()

        def on_event(event: dict[str, Any]) -> bool:
            self.handle_event(event, state, catalog, tracker)
            if not state.stop:
                return True
            if state.settled or state.error is not None:
                return False
            if not state.draining:  # the response's final usage comes next; the hook holds the call
                state.draining = True
                asyncio.get_running_loop().call_later(self.drain_s, ending.set)
            return True

        result = await run_json_lines(
            self._command(query, tracker, work),
            env=self._env(work),
            cwd=work / "project",
            on_event=on_event,
            timeout_s=timeout,
            kill_grace_s=self.kill_grace_s,
            on_start=self.pids.append,
            stop=ending,
        )
        self._end_holds(work)
        if result.timed_out:
            state.error = f"claude did not finish within {timeout:g}s"
        if state.error is None and state.result is None and not result.killed and not tracker.done:
            tail = self._scrub(result.stderr.strip()[-500:])
            state.error = f"claude exited with code {result.returncode} without a result" + (
                f": {tail}" if tail else ""
            )
        if state.error is None and state.init_skills is None:
            state.error = "claude printed no init event: cannot check which skills were resident"
        return self._outcome(state, tracker)

    @staticmethod
    def _end_holds(work: Path) -> None:
        """End the hooks that parked a Skill call in this probe (they said their pid in ``work``)."""
        for mark in work.glob("hold-*"):
            with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                os.kill(int(mark.name.removeprefix("hold-")), signal.SIGKILL)
            mark.unlink(missing_ok=True)

    def _outcome(self, state: StreamState, tracker: Tracker) -> Outcome:
        usage = state.usage
        cost: float | None = None
        if state.result is not None and state.result.get("total_cost_usd") is not None:
            cost = float(state.result["total_cost_usd"])
        elif state.result is None and not state.settled:
            cost = None  # a response was cut off before its final usage: unknown, never a guess
        else:
            model = state.resolved_model or state.cli_model or self.model
            cost = cost_of(usage, self.settings.price_for(model))
        final_text = state.answer()
        return Outcome.from_tracker(
            tracker,
            turns=state.turns,
            error=state.error,
            usage=usage,
            cost_usd=cost,
            resolved_model=state.resolved_model or state.cli_model,
            tool_calls=state.tool_calls,
            final_text=final_text,
        )

    async def resolve_model(self, model: str | None = None) -> str | None:
        return model or self.model

    def listing(self, catalog: Catalog) -> AgentListing:
        """The catalog as Claude Code will list it to this runtime's model."""
        return claude_code_listing(catalog.skills, model=self.model)

    def listing_warning(self, catalog: Catalog) -> str | None:
        """One line when Claude Code will list some skills of ``catalog`` by name alone."""
        return self.listing(catalog).warning(catalog.id, "Claude Code")

    async def version(self) -> str | None:
        """``2.1.328 (Claude Code)``: from the npm package's ``package.json`` when it has one, else
        ``claude --version``."""
        return await program_version(self.claude_path, packages=self.packages, line=self.version_line)

    async def aclose(self) -> None:
        await self._removals.wait()
        await asyncio.to_thread(shutil.rmtree, self._root, True)
