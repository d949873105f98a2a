"""``goose``: Block's goose agent CLI, run headless with a JSON event stream.

**Tested against a stand-in executable written from goose's public documentation and source**
(``tests/fakes/goose_stub/goose``); the real goose ships as a binary download from its release page,
which this project's machines cannot fetch, so no real-goose test runs here.

One probe is one process::

    goose run --text "<query>" --no-session --output-format stream-json --no-profile
              --with-builtin summon --max-turns N [--provider P] [--model M]

in a fresh folder. goose (1.25+) discovers Agent Skills in ``~/.claude/skills``,
``~/.config/agents/skills``, ``~/.config/goose/skills`` and, in the working folder, ``.claude/skills``,
``.goose/skills`` and ``.agents/skills``; it lists their names and descriptions in its instructions
and loads one with the Summon extension's ``load`` tool (``{"source": "<skill name>"}``; goose
1.15-1.24 had a ``skills`` extension with ``loadSkill`` ``{"name": ...}``, also understood). Here
``HOME``, the XDG folders and ``GOOSE_PATH_ROOT`` are temporary, ``--no-profile`` drops the user's
extensions, and the working folder holds exactly the resident skills in ``.agents/skills/``.
**An activation** is a ``load``/``loadSkill`` call naming a resident skill, or a file-reading tool call
(``text_editor`` ``view``, ``read``, …) on a path inside a resident skill's folder.

Events (``--output-format stream-json``, one JSON object a line): ``{"type": "message", "message":
{"role", "created", "content": [{"type": "text", "text"} | {"type": "toolRequest", "id", "toolCall":
{"status": "success", "value": {"name", "arguments"}}} | {"type": "toolResponse", ...}]}}``,
``{"type": "notification", "extension_id", ...}``, ``{"type": "model_change", "model", "mode"}``,
``{"type": "error", "error"}`` and last ``{"type": "complete", "total_tokens"}``. Activations are taken
from ``toolRequest`` blocks as they arrive; when the tracker says stop the process group is ended.
goose reports only a total token count, so ``usage`` stays empty and ``total_tokens`` is kept nowhere
it could be mistaken for input or output tokens.

Endpoint: goose reads its provider from ``GOOSE_PROVIDER``/``GOOSE_MODEL`` and the Anthropic endpoint
from ``ANTHROPIC_HOST`` (``OPENAI_HOST`` for openai, ``OLLAMA_HOST`` for ollama); ``base_url`` (or
``ANTHROPIC_BASE_URL``) is passed as the right one. Residency: ``goose skills list`` is run once per
catalog in the same layout and every resident skill must appear in it (goose's built-in skills are
reported as known non-catalog residents, never mixed into the catalog).
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query
from skillreach.runtimes._agentcli import (
    AgentStream,
    ResidencyCache,
    base_env,
    find_executable,
    lay_out_skills,
    run_command,
    run_error,
    run_json_lines,
)
from skillreach.runtimes._version import program_version
from skillreach.settings import Settings
from skillreach.study.contract import Outcome, RuntimeOptions, Tracker, default_settings

__all__ = ["GooseOptions", "GooseRuntime", "GooseStream"]

GOOSE_INSTALL_HINT = "install the goose CLI (see its documentation) or pass goose_path=/path/to/goose"
_HOST_ENV = {"anthropic": "ANTHROPIC_HOST", "openai": "OPENAI_HOST", "ollama": "OLLAMA_HOST"}
_BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
_LOAD_TOOLS = {"load": "source", "loadSkill": "name", "load_skill": "name"}
_PATH_KEYS = ("path", "file_path", "filepath", "file")
_WRITE_COMMANDS = {"write", "str_replace", "insert", "undo_edit", "create"}


class GooseOptions(RuntimeOptions):
    """``runtime_options`` of the goose runtime."""

    goose_path: str | None = None
    provider: str = "anthropic"
    base_url: str | None = None
    skills_extension: str = "summon"
    extra_builtins: tuple[str, ...] = ()
    timeout_s: float | None = None
    """Seconds a probe may take (default: the ``timeout_s`` setting)."""
    env: dict[str, str] | None = None
    check_residency: bool = True


class GooseRuntime:
    """The goose CLI, one isolated process per probe."""

    name: ClassVar[str] = "goose"
    Options: ClassVar[type[RuntimeOptions]] = GooseOptions
    paid: ClassVar[bool] = False
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    wants_all_probes: bool = False

    def __init__(
        self,
        *,
        model: str | None = None,
        settings: Settings | None = None,
        goose_path: str | None = None,
        provider: str = "anthropic",
        base_url: str | None = None,
        skills_extension: str = "summon",
        extra_builtins: tuple[str, ...] = (),
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
        check_residency: bool = True,
    ) -> None:
        self.settings = settings or default_settings()
        self.model = model or self.settings.model
        self.executable = find_executable(
            goose_path or self.settings.goose_path, "goose", "SKILLREACH_GOOSE_PATH", GOOSE_INSTALL_HINT
        )
        self.provider = provider
        env_var = _BASE_URL_ENV.get(provider)
        self.base_url = base_url or (os.environ.get(env_var) if env_var else None) or None
        if self.base_url and provider not in _HOST_ENV:
            raise ConfigError(
                f"goose: no known endpoint variable for provider {provider!r}; "
                f"base_url works with {', '.join(sorted(_HOST_ENV))}"
            )
        self.builtins = [skills_extension, *extra_builtins]
        self.timeout_s = timeout_s if timeout_s is not None else self.settings.timeout_s
        self.extra_env = dict(env or {})
        self.non_catalog_residents: list[str] = []
        self._residency = ResidencyCache(self._check, enabled=check_residency)

    async def aclose(self) -> None:
        return None

    async def version(self) -> str | None:
        return await program_version(self.executable)

    # ---------------------------------------------------------------------------------- layout
    def _layout(self, root: Path, catalog: Catalog) -> tuple[Path, dict[str, Path]]:
        work = root / "work"
        skill_dirs = lay_out_skills(catalog, work / ".agents" / "skills")
        return work, skill_dirs

    def _env(self, root: Path, max_turns: int | None = None) -> dict[str, str]:
        env = base_env(home=root / "home", extra=None)
        env.update(
            {
                "GOOSE_PATH_ROOT": str(root / "goose"),
                "GOOSE_DISABLE_KEYRING": "1",
                "GOOSE_MODE": "auto",  # headless: never wait for an approval
                "GOOSE_TELEMETRY_ENABLED": "false",
                "GOOSE_CLI_SHOW_THINKING": "false",
                "GOOSE_PROVIDER": self.provider,
            }
        )
        if self.model:
            env["GOOSE_MODEL"] = self.model
        if self.base_url:
            env[_HOST_ENV[self.provider]] = self.base_url
        if max_turns is not None:
            env["GOOSE_MAX_TURNS"] = str(max_turns)
        env.update(self.extra_env)
        return env

    def _args(self, query_text: str, max_turns: int) -> list[str]:
        args = [
            self.executable,
            "run",
            "--text",
            query_text,
            "--no-session",
            "--output-format",
            "stream-json",
            "--no-profile",
            "--with-builtin",
            ",".join(self.builtins),
            "--max-turns",
            str(max_turns),
            "--provider",
            self.provider,
        ]
        if self.model:
            args += ["--model", self.model]
        return args

    # ------------------------------------------------------------------------------- residency
    async def _check(self, catalog: Catalog) -> str | None:
        with tempfile.TemporaryDirectory(prefix="skillreach-goose-") as tmp:
            root = Path(tmp)
            work, _ = self._layout(root, catalog)
            ran = await run_command(
                [self.executable, "skills", "list"],
                env=self._env(root),
                cwd=work,
                timeout_s=min(self.timeout_s, 60.0),
            )
        if ran is None:
            return "goose skills list timed out; cannot check which skills are resident"
        returncode, text = ran
        if returncode != 0:
            return None  # a goose without `skills list`: residency rests on the isolated layout alone
        listed = set(re.findall(r"[A-Za-z0-9][A-Za-z0-9_.:-]*", text))
        missing = sorted(n for n in catalog.names if n not in listed)
        if missing:
            return (
                f"goose does not list resident skills {missing} (`goose skills list`); "
                "check their frontmatter with `skillreach lint`"
            )
        return None

    # ----------------------------------------------------------------------------------- probe
    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        problem = await self._residency.problem(catalog)
        if problem is not None:
            return Outcome.from_tracker(tracker, error=problem)
        # goose counts a turn per model reply; allow the invocations plus an answer and a little slack.
        max_turns = tracker.max_turns + 2
        with tempfile.TemporaryDirectory(prefix="skillreach-goose-") as tmp:
            root = Path(tmp)
            work, skill_dirs = self._layout(root, catalog)
            state = GooseStream(skill_dirs, work, tracker, catalog)
            result = await run_json_lines(
                self._args(query.text, max_turns),
                env=self._env(root, max_turns),
                cwd=work,
                on_event=state.feed,
                timeout_s=self.timeout_s,
            )
        return Outcome.from_tracker(
            tracker,
            turns=state.requests,
            error=run_error("goose", state.error, result, self.timeout_s),
            resolved_model=state.model or self.model,
            tool_calls=state.tool_calls,
            final_text=state.answer(),
        )


@dataclass
class GooseStream(AgentStream):
    """Folds goose's stream-json events into tracker calls and the final text."""

    catalog: Catalog
    total_tokens: int | None = None
    seen_requests: set[str] = field(default_factory=set)
    requests: int = 0
    """Assistant messages seen: the model's replies."""
    _last_id: Any = None

    def feed(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "message":
            return self._message(event.get("message") or {})
        if kind == "model_change":
            self.model = str(event.get("model") or "") or self.model
        elif kind == "error":
            self.error = f"goose: {event.get('error')}"
        elif kind == "complete":
            total = event.get("total_tokens")
            self.total_tokens = int(total) if isinstance(total, int) else None
        return True

    def _message(self, message: dict[str, Any]) -> bool:
        """One assistant message, or one streamed chunk of it (chunks share the message ``id``)."""
        if message.get("role") != "assistant":
            return True
        message_id = message.get("id")
        chunk = message_id is not None and message_id == self._last_id
        if not chunk:
            self.requests += 1
            self._text = []
        self._last_id = message_id
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and block.get("text"):
                self._text.append(str(block["text"]))
            elif block.get("type") == "toolRequest" and not self._tool_request(block):
                return False
        if self._text:
            self.final_text = "".join(self._text)
        return True

    def _tool_request(self, block: dict[str, Any]) -> bool:
        request_id = str(block.get("id", ""))
        if request_id and request_id in self.seen_requests:
            return True  # the same request repeated in a later, fuller message
        self.seen_requests.add(request_id)
        call = block.get("toolCall") or {}
        value = call.get("value") if call.get("status", "success") == "success" else None
        if not isinstance(value, dict):
            return True
        full_name = str(value.get("name", ""))
        short = full_name.rsplit("__", 1)[-1]
        raw_args = value.get("arguments")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        skill = self._skill_of(short, args)
        return self.record(full_name, args) if skill is None else self.activate(skill)

    def _skill_of(self, short: str, args: dict[str, Any]) -> str | None:
        key = _LOAD_TOOLS.get(short)
        if key is not None:
            name = str(args.get(key) or "").strip()
            return name if name in self.catalog else None
        if str(args.get("command", "view")) in _WRITE_COMMANDS:
            return None
        return self.path_skill(args, _PATH_KEYS)
