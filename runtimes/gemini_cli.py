"""``gemini-cli``: Google's Gemini CLI (npm ``@google/gemini-cli``), run headless against the runtime's
Gemini API endpoint.

One probe is one process, in a fresh folder of its own (``_skillcli.SkillCliRuntime``)::

    gemini --prompt=<query> --output-format stream-json --policy <root>/policy.toml [-m MODEL]  < /dev/null

- **Isolation.** ``HOME`` and ``GEMINI_CLI_HOME`` (the CLI's home: ``~/.gemini/settings.json``, user
  skills in ``~/.gemini/skills`` and ``~/.agents/skills``) are the probe's own folder; the working folder
  holds only ``.agents/skills/<name>/``. ``settings.json`` is generated: auto-update, usage statistics and
  telemetry off, skills on with the two built-in ones (``antigravity-support``, ``skill-creator``)
  disabled, and the auth type ``gemini-api-key`` — with only ``GOOGLE_GEMINI_BASE_URL`` set, Gemini CLI
  0.61.0 picks the ``gateway`` auth type and then refuses it (exit 41). The workspace is trusted through
  ``GEMINI_CLI_TRUST_WORKSPACE`` (an untrusted folder exits 55, and workspace skills are found only in
  trusted folders).
- **Consent.** Headless in the default approval mode Gemini CLI leaves ``activate_skill`` out of its
  tools (every activation would fail with ``Tool "activate_skill" not found``); a policy file allows that
  one tool and nothing else (no ``--approval-mode yolo``).
- **Endpoint and key.** ``base_url`` → ``GOOGLE_GEMINI_BASE_URL`` (none: Google's); the key from
  ``env_key`` (default ``GEMINI_API_KEY``) is passed as ``GEMINI_API_KEY``, never written.
- **Activation.** The ``tool_result`` event (status ``success``) of an ``activate_skill`` ``tool_use``;
  the skill is the call's ``parameters.name``. The group is SIGKILLed as soon as the tracker says stop.
  A failed activation of a catalog skill fails the probe with the CLI's reason.
- **Listing.** Gemini CLI lists every enabled skill in full in its system instruction (no budget, no
  truncation): :meth:`GeminiCliRuntime.listing` is the catalog as it is.
- **Model.** The study's model, else ``gemini-2.5-flash``: Gemini CLI's own default (``auto``) sends a
  routing classifier request before each turn (paid, and a stand-in must answer it with JSON).
- **Usage.** The ``result`` event's ``stats`` (input, cached, output tokens): a probe ended early has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from skillreach.models import Catalog, Query, Usage
from skillreach.runtimes._relay import Wire
from skillreach.runtimes._skillcli import SkillCliOptions, SkillCliRuntime, SkillToolStream, as_int
from skillreach.settings import Settings
from skillreach.study.contract import RuntimeOptions

__all__ = ["GeminiCliOptions", "GeminiCliRuntime", "GeminiStream"]

BUILTIN_SKILLS = ("antigravity-support", "skill-creator")
POLICY = '[[rule]]\ntoolName = "activate_skill"\ndecision = "allow"\npriority = 500\n'


@dataclass
class GeminiStream(SkillToolStream):
    """Gemini CLI's ``--output-format stream-json`` events."""

    _calls: dict[str, tuple[str, Any]] = field(default_factory=dict)
    skill_tool: ClassVar[tuple[str, str]] = ("activate_skill", "name")

    def feed(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "tool_use":
            tool = str(event.get("tool_name") or "")
            params = event.get("parameters") or {}
            self._calls[str(event.get("tool_id"))] = (tool, params)
            if tool != "activate_skill":
                self.tool(tool, params)
        elif kind == "tool_result":
            tool, params = self._calls.get(str(event.get("tool_id")), ("", {}))
            if tool == "activate_skill" and isinstance(params, dict):
                name = str(params.get("name") or "")
                if event.get("status") == "success":
                    return self.skill(name)
                self.skill_failed(name)
                if name in self.names and self.error is None:
                    why = event.get("error") or event.get("output") or "failed"
                    if isinstance(why, dict):
                        why = why.get("message") or json.dumps(why)
                    self.error = f"gemini-cli: activate_skill {name!r} failed: {why}"
        elif kind == "message" and event.get("role") == "assistant":
            self.say(str(event.get("content") or ""), delta=bool(event.get("delta")))
        elif kind == "result":
            stats = event.get("stats") or {}
            cached = as_int(stats.get("cached"))
            total_in = as_int(stats.get("input_tokens"))
            self.usage = Usage(
                input_tokens=max(total_in - cached, 0),
                output_tokens=as_int(stats.get("output_tokens")),
                cache_read_input_tokens=cached,
            )
            self.turns = as_int(stats.get("tool_calls")) + 1
            if event.get("status") == "error" and self.error is None:
                err = event.get("error") or {}
                self.error = f"gemini-cli: {err.get('message') or 'the run failed'}"
        elif kind == "error" and self.error is None:
            self.error = f"gemini-cli: {event.get('message') or 'error'}"
        return not self.stopped

    @property
    def calls(self) -> int:
        return len(self._calls)


class GeminiCliOptions(SkillCliOptions):
    """``runtime_options`` of the gemini-cli runtime."""

    gemini_path: str | None = None
    """The ``gemini`` program (default: ``gemini`` on PATH)."""
    base_url: str | None = None
    """The Gemini API's base URL, without ``/v1beta`` (default: Google's)."""
    env_key: str = "GEMINI_API_KEY"
    """The name of the environment variable holding the key (passed as ``GEMINI_API_KEY``, never written)."""


GEMINI_API = "https://generativelanguage.googleapis.com"


class GeminiCliRuntime(SkillCliRuntime):
    name: ClassVar[str] = "gemini-cli"
    request_tokens: ClassVar[int | None] = 12_100
    Options: ClassVar[type[RuntimeOptions]] = GeminiCliOptions
    program: ClassVar[str] = "gemini"
    wire: ClassVar[Wire] = "gemini"
    packages: ClassVar[tuple[str, ...]] = ("@google/gemini-cli",)
    Stream: ClassVar[type[SkillToolStream]] = GeminiStream
    default_model: ClassVar[str | None] = "gemini-2.5-flash"
    """Never Gemini CLI's own ``auto``: that routes each prompt with a classifier request first."""
    install_hint: ClassVar[str] = (
        "install it with `npm install @google/gemini-cli@0.61.0` (into a folder) and pass gemini_path=…"
    )

    def __init__(
        self,
        model: str | None = None,
        *,
        settings: Settings | None = None,
        gemini_path: str | None = None,
        base_url: str | None = None,
        env_key: str = "GEMINI_API_KEY",
        api_key: str | None = None,
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
            path=gemini_path,
            path_option="gemini_path",
            base_url=base_url,
            default_base_url=GEMINI_API,
            env_key=env_key,
            api_key=api_key,
            concurrency=concurrency,
            timeout_s=timeout_s,
            extra_args=extra_args,
            extra_env=extra_env,
            keep_workdirs=keep_workdirs,
            relay=relay,
        )

    def listing_warning(self, catalog: Catalog) -> str | None:
        return None  # every skill is listed in full

    def settings_json(self) -> dict[str, Any]:
        return {
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "skills": {"enabled": True, "disabled": list(BUILTIN_SKILLS)},
            "security": {"auth": {"selectedType": "gemini-api-key"}},
        }

    def write_config(self, root: Path, model: str | None, base_url: str) -> None:
        gemini = root / "home" / ".gemini"
        gemini.mkdir(parents=True, exist_ok=True)
        (gemini / "settings.json").write_text(json.dumps(self.settings_json(), indent=2), encoding="utf-8")
        (root / "policy.toml").write_text(POLICY, encoding="utf-8")

    def env(self, root: Path, model: str | None, base_url: str) -> dict[str, str]:
        env = super().env(root, model, base_url)
        env["GEMINI_CLI_HOME"] = str(root / "home")
        env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
        if base_url:
            env["GOOGLE_GEMINI_BASE_URL"] = base_url
        env["GEMINI_API_KEY"] = self._key or ""
        return env

    def command(self, query: Query, model: str | None, root: Path) -> list[str]:
        cmd = [
            self.executable,
            f"--prompt={query.text}",
            "--output-format",
            "stream-json",
            "--policy",
            str(root / "policy.toml"),
        ]
        if model:
            cmd += ["-m", model]
        return [*cmd, *self.extra_args]
