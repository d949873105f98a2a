"""``antigravity-cli``: Google's Antigravity CLI (``agy``), run headless with a JSON event stream.

**Not run for real here**: ``agy`` is a binary download (its install script fetches it from Google), it
needs an interactive Google sign-in, and it talks to Google's own backend with no documented way to
point it at a local endpoint. This module follows agy's documented headless interface and is tested
against a stand-in executable (``tests/fakes/antigravity_cli_stub/agy``) written from that public
format. The same agent harness runs for real in the ``antigravity-sdk`` runtime.

One probe is one process::

    agy -p "<query>" --output-format stream-json [--model M]

in a fresh folder: ``HOME`` and the XDG folders are temporary (so ``~/.gemini/config/skills`` and
``~/.gemini/antigravity/skills`` are empty) and the working folder holds exactly the resident skills in
``.agents/skills/<name>/`` (agy's workspace skills folder). agy's sign-in state is not copied: pass
``credentials_dir`` (your ``~/.gemini/antigravity-cli``) to link it into each probe's ``HOME``.
**An activation** is a file-reading tool call (``view_file`` ``AbsolutePath``, ``read_file``
``file_path``, …) on a path inside a resident skill's folder; agy lists skills by name and description
and the model reads a skill's ``SKILL.md`` to load it.

Events (``--output-format stream-json``, the headless format agy shares with Gemini CLI, one JSON object a
line): ``init`` {session_id, model}, ``message`` {role, content, delta}, ``tool_use`` {tool_name,
tool_id, parameters}, ``tool_result`` {tool_id, status, output}, ``error`` {severity, message} and last
``result`` {status, stats: {input_tokens, output_tokens, total_tokens, …}}. Activations are taken from
``tool_use`` as they arrive; when the tracker says stop the whole process group is ended.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, Usage
from skillreach.runtimes._agentcli import (
    AgentStream,
    base_env,
    find_executable,
    lay_out_skills,
    run_error,
    run_json_lines,
)
from skillreach.runtimes._version import program_version
from skillreach.settings import Settings
from skillreach.study.contract import Outcome, RuntimeOptions, Tracker, default_settings

__all__ = ["AgyStream", "AntigravityCliOptions", "AntigravityCliRuntime"]

AGY_INSTALL_HINT = "install the Antigravity CLI (agy), sign in once, or pass agy_path=/path/to/agy"
_PATH_KEYS = ("AbsolutePath", "absolute_path", "file_path", "path", "TargetFile")
_WRITE_TOOLS = {"write_file", "create_file", "edit_file", "replace", "write_to_file"}


class AntigravityCliOptions(RuntimeOptions):
    """``runtime_options`` of the antigravity-cli runtime."""

    agy_path: str | None = None
    credentials_dir: str | None = None
    extra_args: tuple[str, ...] = ()
    timeout_s: float | None = None
    """Seconds a probe may take (default: the ``timeout_s`` setting)."""
    env: dict[str, str] | None = None


class AntigravityCliRuntime:
    """The agy CLI, one isolated process per probe."""

    name: ClassVar[str] = "antigravity-cli"
    Options: ClassVar[type[RuntimeOptions]] = AntigravityCliOptions
    paid: ClassVar[bool] = False
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    wants_all_probes: bool = False

    def __init__(
        self,
        *,
        model: str | None = None,
        settings: Settings | None = None,
        agy_path: str | None = None,
        credentials_dir: str | Path | None = None,
        extra_args: tuple[str, ...] = (),
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings or default_settings()
        self.model = model or self.settings.model
        self.executable = find_executable(
            agy_path or self.settings.agy_path, "agy", "SKILLREACH_AGY_PATH", AGY_INSTALL_HINT
        )
        self.credentials_dir = Path(credentials_dir).expanduser() if credentials_dir else None
        if self.credentials_dir is not None and not self.credentials_dir.is_dir():
            raise ConfigError(
                f"{self.credentials_dir}: credentials_dir is not a folder (agy's sign-in state)"
            )
        self.extra_args = tuple(extra_args)
        self.timeout_s = timeout_s if timeout_s is not None else self.settings.timeout_s
        self.extra_env = dict(env or {})

    async def aclose(self) -> None:
        return None

    async def version(self) -> str | None:
        return await program_version(self.executable)

    def _args(self, query_text: str) -> list[str]:
        args = [self.executable, "-p", query_text, "--output-format", "stream-json"]
        if self.model:
            args += ["--model", self.model]
        return [*args, *self.extra_args]

    def _env(self, root: Path) -> dict[str, str]:
        home = root / "home"
        env = base_env(home=home, extra=self.extra_env)
        if self.credentials_dir is not None:
            (home / ".gemini").mkdir(parents=True, exist_ok=True)
            (home / ".gemini" / "antigravity-cli").symlink_to(self.credentials_dir, target_is_directory=True)
        return env

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        with tempfile.TemporaryDirectory(prefix="skillreach-agy-") as tmp:
            root = Path(tmp)
            work = root / "work"
            skill_dirs = lay_out_skills(catalog, work / ".agents" / "skills")
            state = AgyStream(skill_dirs, work, tracker)
            result = await run_json_lines(
                self._args(query.text),
                env=self._env(root),
                cwd=work,
                on_event=state.feed,
                timeout_s=self.timeout_s,
            )
        return Outcome.from_tracker(
            tracker,
            turns=tracker.turns_used,
            error=run_error("agy", state.error, result, self.timeout_s),
            usage=state.usage,
            resolved_model=state.model or self.model,
            tool_calls=state.tool_calls,
            final_text=state.answer(),
        )


@dataclass
class AgyStream(AgentStream):
    """Folds agy's stream-json events into tracker calls, usage and the final text."""

    usage: Usage = field(default_factory=Usage)

    def feed(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "init":
            self.model = str(event.get("model") or "") or self.model
        elif kind == "message" and event.get("role") == "assistant":
            content = str(event.get("content") or "")
            if event.get("delta"):
                self._text.append(content)
            else:
                self._text = [content]
            self.final_text = "".join(self._text) or None
        elif kind == "tool_use":
            return self._tool_use(event)
        elif kind == "error" and event.get("severity", "error") == "error":
            self.error = f"agy: {event.get('message')}"
        elif kind == "result":
            self._result(event)
        return True

    def _tool_use(self, event: dict[str, Any]) -> bool:
        name = str(event.get("tool_name") or event.get("name") or "")
        raw = event.get("parameters", event.get("args", event.get("input")))
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        self._text = []  # text before a tool call is not the final answer
        skill = None if name in _WRITE_TOOLS else self.path_skill(params, _PATH_KEYS)
        return self.record(name, params) if skill is None else self.activate(skill)

    def _result(self, event: dict[str, Any]) -> None:
        stats = event.get("stats") or {}
        self.usage = Usage(
            input_tokens=max(int(stats.get("input_tokens") or 0) - int(stats.get("cached") or 0), 0),
            output_tokens=int(stats.get("output_tokens") or 0),
            cache_read_input_tokens=int(stats.get("cached") or 0),
        )
        if event.get("status") == "error" and self.error is None:
            err = event.get("error")
            message = err.get("message") if isinstance(err, dict) else err
            self.error = f"agy: {message or 'the run failed'}"
