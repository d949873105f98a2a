"""``opencode``: OpenCode (npm ``opencode-ai``), run headless against the runtime's OpenAI-compatible
Chat Completions endpoint.

One probe is one process, in a fresh folder of its own (``_skillcli.SkillCliRuntime``)::

    opencode run --pure --format json [-m skillreach/MODEL] -- "<query>"  < /dev/null

- **Isolation.** ``HOME`` and the XDG folders (config, data, cache, state: OpenCode's database and its
  snapshot repository) are the probe's own; ``OPENCODE_CONFIG`` points at a generated ``opencode.json``:
  one provider (``@ai-sdk/openai-compatible``, bundled: nothing is installed at run time) with the
  ``base_url`` and the key as ``{env:<env_key>}`` (read from the environment, never written), the model,
  auto-update, sharing and the title agent off (its extra title request would be paid for), and the
  built-in ``customize-opencode`` skill denied (a denied skill is not listed). Models fetch, auto-update,
  default plugins, LSP downloads and sharing are off through OpenCode's own variables. The working folder
  holds only ``.agents/skills/<name>/`` (``OPENCODE_DISABLE_EXTERNAL_SKILLS`` / ``…CLAUDE_CODE_SKILLS``
  are left unset: they turn that discovery off).
- **ripgrep.** The ``skill`` tool lists the skill's folder with ``rg``; without it on ``PATH`` OpenCode
  tries to download it and, offline, every activation fails ("ripgrep execution failed", reported as the
  probe's error). Debian's ``ripgrep`` package is what ``.ci/run`` installs.
- **Activation.** A ``tool_use`` event whose ``part.tool`` is ``skill`` with ``part.state.status``
  ``completed``; the skill is ``part.state.input.name``. The group is SIGKILLed as soon as the tracker
  says stop.
- **Listing.** OpenCode lists every skill in full, sorted by name, at the end of its system prompt (no
  budget, no truncation).
- **Usage.** Each ``step_finish`` event's ``part.tokens`` (input, output, cache read and write).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, Usage
from skillreach.runtimes._skillcli import SkillCliOptions, SkillCliRuntime, SkillToolStream, as_int
from skillreach.settings import Settings
from skillreach.study.contract import RuntimeOptions

__all__ = ["OpenCodeOptions", "OpenCodeRuntime", "OpenCodeStream"]

BUILTIN_SKILLS = ("customize-opencode",)
QUIET_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}


@dataclass
class OpenCodeStream(SkillToolStream):
    """OpenCode's ``--format json`` events."""

    def feed(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        part = event.get("part") if isinstance(event.get("part"), dict) else {}
        if kind == "tool_use":
            state = part.get("state") or {}
            tool = str(part.get("tool") or "")
            args = state.get("input") or {}
            if tool == "skill" and isinstance(args, dict):
                name = str(args.get("name") or "")
                if state.get("status") == "completed":
                    return self.skill(name)
                if state.get("status") == "error":
                    self.skill_failed(name)
                if name in self.names and self.error is None:
                    why = state.get("error") or "error"
                    self.error = f"opencode: the skill tool failed on {name!r}: {why}"
            else:
                self.tool(tool, args)
        elif kind == "text":
            self.say(str(part.get("text") or ""))
        elif kind == "step_finish":
            self.turns += 1
            tokens = part.get("tokens") or {}
            cache = tokens.get("cache") or {}
            self.usage = self.usage + Usage(
                input_tokens=as_int(tokens.get("input")),
                output_tokens=as_int(tokens.get("output")),
                cache_read_input_tokens=as_int(cache.get("read")),
                cache_creation_input_tokens=as_int(cache.get("write")),
            )
        elif kind == "error" and self.error is None:
            err = event.get("error") or {}
            data = err.get("data") if isinstance(err, dict) else None
            message = (data or {}).get("message") if isinstance(data, dict) else None
            name = err.get("name") if isinstance(err, dict) else err
            self.error = f"opencode: {message or name or 'error'}"
        return not self.stopped


class OpenCodeOptions(SkillCliOptions):
    """``runtime_options`` of the opencode runtime."""

    opencode_path: str | None = None
    """The ``opencode`` program (default: ``opencode`` on PATH)."""
    base_url: str | None = None
    """The Chat Completions base URL, ending in ``/v1`` (default: ``OPENAI_BASE_URL``, else OpenAI's)."""
    env_key: str = "OPENAI_API_KEY"
    """The name of the environment variable holding the key (OpenCode reads it as ``{env:…}``)."""
    context_window: int = 128_000
    """The model's context window as OpenCode is told it."""
    max_output_tokens: int = 8192


class OpenCodeRuntime(SkillCliRuntime):
    name: ClassVar[str] = "opencode"
    request_tokens: ClassVar[int | None] = 7_700
    Options: ClassVar[type[RuntimeOptions]] = OpenCodeOptions
    program: ClassVar[str] = "opencode"
    packages: ClassVar[tuple[str, ...]] = ("opencode-ai",)
    Stream: ClassVar[type[SkillToolStream]] = OpenCodeStream
    install_hint: ClassVar[str] = (
        "install it with `npm install opencode-ai@1.18.33` (into a folder) and pass opencode_path=…"
    )
    provider: ClassVar[str] = "skillreach"

    def __init__(
        self,
        model: str | None = None,
        *,
        settings: Settings | None = None,
        opencode_path: str | None = None,
        base_url: str | None = None,
        env_key: str = "OPENAI_API_KEY",
        api_key: str | None = None,
        context_window: int = 128_000,
        max_output_tokens: int = 8192,
        concurrency: int | None = None,
        timeout_s: float | None = None,
        extra_args: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
        keep_workdirs: bool = False,
        relay: bool = True,
    ) -> None:
        import os

        super().__init__(
            model,
            settings=settings,
            path=opencode_path,
            path_option="opencode_path",
            base_url=base_url,
            default_base_url=os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
            env_key=env_key,
            api_key=api_key,
            concurrency=concurrency,
            timeout_s=timeout_s,
            extra_args=extra_args,
            extra_env=extra_env,
            keep_workdirs=keep_workdirs,
            relay=relay,
        )
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.ripgrep = shutil.which("rg")
        """OpenCode's skill tool needs ``rg`` on PATH (offline it cannot fetch one)."""

    def listing_warning(self, catalog: Catalog) -> str | None:
        if self.ripgrep is None:
            return "ripgrep (rg) is not on PATH: the skill tool downloads it, and fails offline"
        return None

    def config(self, model: str | None, base_url: str | None = None) -> dict[str, Any]:
        model_id = model or "default"
        if not re.fullmatch(r"[^\s/]+(/[^\s]+)?", model_id):
            raise ConfigError(f"model {model_id!r} cannot be an OpenCode model id")
        return {
            "$schema": "https://opencode.ai/config.json",
            "model": f"{self.provider}/{model_id}",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"*": "allow", "skill": {"*": "allow", **dict.fromkeys(BUILTIN_SKILLS, "deny")}},
            "agent": {"title": {"disable": True}},
            "provider": {
                self.provider: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "skillreach",
                    "options": {"baseURL": base_url or self.base_url, "apiKey": f"{{env:{self.env_key}}}"},
                    "models": {
                        model_id: {
                            "name": model_id,
                            "tool_call": True,
                            "limit": {"context": self.context_window, "output": self.max_output_tokens},
                        }
                    },
                }
            },
        }

    def write_config(self, root: Path, model: str | None, base_url: str) -> None:
        config = self.config(model, base_url)
        (root / "opencode.json").write_text(json.dumps(config, indent=2), encoding="utf-8")

    def env(self, root: Path, model: str | None, base_url: str) -> dict[str, str]:
        env = super().env(root, model, base_url)
        env.update(QUIET_ENV)
        env["OPENCODE_CONFIG"] = str(root / "opencode.json")
        env.update(self.extra_env)
        return env

    def command(self, query: Query, model: str | None, root: Path) -> list[str]:
        return [self.executable, "run", "--pure", "--format", "json", *self.extra_args, "--", query.text]
