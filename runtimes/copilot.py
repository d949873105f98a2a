"""``copilot``: GitHub's Copilot CLI (npm ``@github/copilot``), run headless in its documented BYOK offline
mode against the runtime's OpenAI-compatible Chat Completions endpoint (no GitHub sign-in).

One probe is one process, in a fresh folder of its own (``_skillcli.SkillCliRuntime``)::

    copilot -p "<query>" --output-format json --allow-tool=skill --no-auto-update  < /dev/null

- **Isolation.** ``HOME`` and ``COPILOT_HOME`` are the probe's own; the working folder holds only
  ``.agents/skills/<name>/`` (Copilot finds them as ``"source": "project"``). ``COPILOT_OFFLINE=true``,
  ``COPILOT_PROVIDER_BASE_URL`` (the ``base_url``), ``COPILOT_PROVIDER_API_KEY`` (from ``env_key``, never
  written), ``COPILOT_MODEL`` and ``COPILOT_AUTO_UPDATE=false``: in an offline namespace its only traffic
  went to the model endpoint.
- **Consent.** ``--allow-tool=skill`` approves the skill tool alone (no ``--yolo``).
- **Built-in skills.** Copilot CLI 1.0.102 also lists two built-in skills (``customize-cloud-agent``,
  ``github-pr-media``) and has no switch to turn them off: they are counted and reported
  (:attr:`CopilotRuntime.builtin`, the ``session.skills_loaded`` event), never scored; loading one is an
  activation outside the catalog.
- **Activation.** ``tool.execution_complete`` (``success``) of a ``skill`` call whose
  ``tool.execution_start`` named ``arguments.skill``. The group is SIGKILLed as soon as the tracker says
  stop.
- **Listing.** Every skill it accepts in full at the end of the system prompt, XML-escaped (no budget,
  no truncation); a skill with a name or description it refuses is left out
  (:func:`~skillreach.skills.agent_listing.copilot_listing`, ``listing_warning``).
- **Usage.** Copilot CLI's JSON output carries no token counts (its ``result`` event has
  ``premiumRequests`` and durations only): the probe's relay (:mod:`runtimes._relay`) reads them from
  the responses it served. Without the relay (``relay = false``) usage is unknown and the cost is
  recorded as unknown (``None``), never $0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query
from skillreach.runtimes._relay import Wire
from skillreach.runtimes._skillcli import SkillCliOptions, SkillCliRuntime, SkillToolStream
from skillreach.settings import Settings
from skillreach.study.contract import RuntimeOptions, Tracker

__all__ = ["BUILTIN_SKILLS", "CopilotOptions", "CopilotRuntime", "CopilotStream"]

BUILTIN_SKILLS = ("customize-cloud-agent", "github-pr-media")


@dataclass
class CopilotStream(SkillToolStream):
    """Copilot CLI's ``--output-format json`` events."""

    builtin: set[str] = field(default_factory=set)
    """Skills Copilot loaded from outside the workspace (``session.skills_loaded``, source not project)."""
    _calls: dict[str, tuple[str, Any]] = field(default_factory=dict)
    skill_tool: ClassVar[tuple[str, str]] = ("skill", "skill")

    def feed(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        if kind == "session.skills_loaded":
            for skill in data.get("skills") or []:
                if isinstance(skill, dict) and skill.get("source") != "project":
                    self.builtin.add(str(skill.get("name")))
        elif kind == "tool.execution_start":
            tool = str(data.get("toolName") or "")
            args = data.get("arguments") or {}
            self._calls[str(data.get("toolCallId"))] = (tool, args)
            if tool != "skill":
                self.tool(tool, args)
        elif kind == "tool.execution_complete":
            tool, args = self._calls.get(str(data.get("toolCallId")), ("", {}))
            if tool == "skill" and isinstance(args, dict):
                name = str(args.get("skill") or "")
                if data.get("success"):
                    return self.skill(name)
                self.skill_failed(name)
                if name in self.names and self.error is None:
                    result = data.get("result") or data.get("error") or {}
                    why = result.get("content") if isinstance(result, dict) else result
                    self.error = f"copilot: the skill tool failed on {name!r}: {why or 'error'}"
        elif kind == "assistant.turn_start":
            self.turns += 1
        elif kind == "assistant.message":
            self.say(str(data.get("content") or ""))
        elif kind == "result" and event.get("exitCode") not in (0, None) and self.error is None:
            self.error = f"copilot: the run ended with exit code {event.get('exitCode')}"
        elif kind in ("error", "session.error") and self.error is None:
            self.error = f"copilot: {data.get('message') or event.get('message') or 'error'}"
        return not self.stopped


class CopilotOptions(SkillCliOptions):
    """``runtime_options`` of the copilot runtime."""

    copilot_path: str | None = None
    """The ``copilot`` program (default: ``copilot`` on PATH)."""
    base_url: str | None = None
    """The Chat Completions base URL, ending in ``/v1`` (default: ``OPENAI_BASE_URL``, else OpenAI's)."""
    env_key: str = "OPENAI_API_KEY"
    """The name of the environment variable holding the key (passed as ``COPILOT_PROVIDER_API_KEY``)."""
    wire_api: str | None = None
    """``COPILOT_PROVIDER_WIRE_API`` (``responses``); default: Chat Completions."""


class CopilotRuntime(SkillCliRuntime):
    name: ClassVar[str] = "copilot"
    request_tokens: ClassVar[int | None] = 12_100
    reports_usage: ClassVar[bool] = False
    Options: ClassVar[type[RuntimeOptions]] = CopilotOptions
    program: ClassVar[str] = "copilot"
    packages: ClassVar[tuple[str, ...]] = ("@github/copilot",)
    version_line: ClassVar[str] = "GitHub Copilot CLI {version}."
    install_hint: ClassVar[str] = (
        "install it with `npm install @github/copilot@1.0.102` (into a folder) and pass copilot_path=…"
    )

    def __init__(
        self,
        model: str | None = None,
        *,
        settings: Settings | None = None,
        copilot_path: str | None = None,
        base_url: str | None = None,
        env_key: str = "OPENAI_API_KEY",
        api_key: str | None = None,
        wire_api: str | None = None,
        concurrency: int | None = None,
        timeout_s: float | None = None,
        extra_args: list[str] | None = None,
        extra_env: dict[str, str] | None = None,
        keep_workdirs: bool = False,
        relay: bool = True,
    ) -> None:
        super().__init__(
            model,
            settings=settings,
            path=copilot_path,
            path_option="copilot_path",
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
        if not self.model:
            raise ConfigError(
                "the copilot runtime runs Copilot CLI with your own provider (BYOK), which needs an explicit "
                "model: pass --model (or model = … in the study's config)"
            )
        self.wire_api_option = wire_api
        self.builtin: set[str] = set()
        """Built-in skills Copilot listed beside the catalog (reported, never scored)."""

    def listing_warning(self, catalog: Catalog) -> str | None:
        dropped = self.listing(catalog).dropped
        line = (
            f"Copilot CLI also lists its built-in skills ({', '.join(BUILTIN_SKILLS)}) beside the catalog; "
            "loading one counts as no catalog skill"
        )
        if dropped:
            line += (
                f"; it leaves out {len(dropped)} of the catalog's skills ({', '.join(dropped[:5])}"
                f"{', …' if len(dropped) > 5 else ''}): see `skillreach listing --agent copilot`"
            )
        return line

    def wire_api(self) -> Wire:
        return "responses" if self.wire_api_option == "responses" else "chat"

    def env(self, root: Path, model: str | None, base_url: str) -> dict[str, str]:
        env = super().env(root, model, base_url)
        env.update(
            COPILOT_HOME=str(root / "home" / ".copilot"),
            COPILOT_OFFLINE="true",
            COPILOT_PROVIDER_BASE_URL=base_url,
            COPILOT_PROVIDER_API_KEY=self._key or "",
            COPILOT_AUTO_UPDATE="false",
        )
        if model:
            env["COPILOT_MODEL"] = model
        if self.wire_api_option:
            env["COPILOT_PROVIDER_WIRE_API"] = self.wire_api_option
        env.update(self.extra_env)
        return env

    def command(self, query: Query, model: str | None, root: Path) -> list[str]:
        return [
            self.executable,
            f"--prompt={query.text}",
            "--output-format",
            "json",
            "--allow-tool=skill",
            "--no-auto-update",
            *self.extra_args,
        ]

    def stream(self, catalog: Catalog, work: Path, tracker: Tracker) -> SkillToolStream:
        skills = work / ".agents" / "skills"
        return _Tracked(
            {n: skills / n for n in catalog.names},
            work,
            tracker,
            names=frozenset(catalog.names),
            runtime=self,
        )


@dataclass
class _Tracked(CopilotStream):
    runtime: CopilotRuntime | None = None

    def feed(self, event: dict[str, Any]) -> bool:
        go = super().feed(event)
        if self.runtime is not None and event.get("type") == "session.skills_loaded":
            self.runtime.builtin |= self.builtin
        return go
