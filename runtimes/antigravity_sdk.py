"""``antigravity-sdk``: Google's Antigravity agent SDK (``google-antigravity`` on PyPI).

The SDK drives a compiled agent harness (``localharness``, shipped inside the wheel) that calls the
Gemini API. One probe is one ``Agent`` session with:

- ``skills_paths`` = a temporary folder holding copies of exactly the resident skills (the harness lists
  each as ``- <name> (<path to SKILL.md>): <description>`` in its instructions and tells the model to
  read the SKILL.md of a relevant skill before proceeding);
- only the read-only ``view_file`` tool enabled; a temporary workspace, app-data folder, save folder and
  ``HOME`` per probe;
- a ``pre_tool_call_decide`` hook that sees every tool call before it runs. **An activation** is a
  ``view_file`` of a file inside a resident skill's folder; it is reported to the shared tracker, and
  when the tracker says stop (early exit, ``max_turns``) the hook **denies the call** (the model never
  receives that body) and the turn is cancelled at once: live early exit.

Endpoint: ``base_url`` (option, else ``GOOGLE_GEMINI_BASE_URL`` / ``GEMINI_BASE_URL``) reroutes the
Gemini API endpoint (``GeminiAPIEndpoint(base_url=...)``); the key is ``api_key``, else
``GEMINI_API_KEY`` / ``GOOGLE_API_KEY``; ``vertex=True`` with ``project``/``location`` uses Vertex AI.
Retries of transient API errors are the harness's own (``RetryConfig.api_retry``), bounded by
``max_retries``. Usage comes from the turn's ``usage_metadata``.

Residency: the SDK does not report the skills it loaded, so residency rests on the isolated
``skills_paths`` (nothing else is discovered: the workspace and ``HOME`` are empty). Tests run the real
SDK and harness against a local stand-in of the Gemini API (``tests/fakes/antigravity_gemini.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, ToolCall, Usage
from skillreach.runtimes._agentcli import lay_out_skills, report_skill, skill_for_path
from skillreach.runtimes._version import package_version
from skillreach.settings import Settings
from skillreach.study.contract import Outcome, RuntimeOptions, Tracker, compliance_answer, default_settings

__all__ = ["AntigravitySdkOptions", "AntigravitySdkRuntime"]

_PATH_ARGS = ("AbsolutePath", "absolute_path", "path", "file_path")


class AntigravitySdkOptions(RuntimeOptions):
    """``runtime_options`` of the antigravity-sdk runtime."""

    base_url: str | None = None
    vertex: bool = False
    project: str | None = None
    location: str | None = None
    max_retries: int | None = None
    """The harness's retries of transient API errors (default: the ``max_retries`` setting)."""
    backoff_s: float = 1.0
    timeout_s: float | None = None
    """Seconds a probe may take (default: the ``timeout_s`` setting)."""


class AntigravitySdkRuntime:
    """The Antigravity SDK with its bundled harness, one isolated session per probe."""

    name: ClassVar[str] = "antigravity-sdk"
    Options: ClassVar[type[RuntimeOptions]] = AntigravitySdkOptions
    paid: ClassVar[bool] = False
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    wants_all_probes: bool = False

    def __init__(
        self,
        *,
        model: str | None = None,
        settings: Settings | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        vertex: bool = False,
        project: str | None = None,
        location: str | None = None,
        max_retries: int | None = None,
        backoff_s: float = 1.0,
        timeout_s: float | None = None,
    ) -> None:
        try:
            import google.antigravity  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                "the antigravity-sdk runtime needs the google-antigravity package; "
                "pip install google-antigravity"
            ) from exc
        from google.antigravity.models import DEFAULT_MODEL

        self.settings = settings or default_settings()
        self.model = model or self.settings.model or DEFAULT_MODEL
        self.base_url = (
            base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or os.environ.get("GEMINI_BASE_URL") or None
        )
        self._api_key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        self.vertex = vertex
        self.project = project
        self.location = location
        if not (self._api_key or self.base_url or vertex):
            raise ConfigError(
                "the antigravity-sdk runtime needs a Gemini API key: set GEMINI_API_KEY (or pass base_url "
                "for a local endpoint, or vertex=True with project and location)"
            )
        self.max_retries = max_retries if max_retries is not None else self.settings.max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s if timeout_s is not None else self.settings.timeout_s

    def __repr__(self) -> str:  # never shows the key
        return f"AntigravitySdkRuntime(model={self.model!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        return None

    async def version(self) -> str | None:
        return package_version("google-antigravity")

    def _config(self, root: Path, skills: Path, hook: Any) -> Any:
        from google.antigravity import (
            BuiltinTools,
            CapabilitiesConfig,
            GeminiAPIEndpoint,
            LocalAgentConfig,
            ModelAPIRetryConfig,
            ModelTarget,
            ModelType,
            RetryConfig,
            VertexEndpoint,
        )

        key = self._api_key or "not-needed"
        endpoint: Any
        if self.vertex:
            endpoint = VertexEndpoint(
                base_url=self.base_url, project=self.project, location=self.location, api_key=self._api_key
            )
        else:
            endpoint = GeminiAPIEndpoint(base_url=self.base_url, api_key=key)
        home = root / "home"
        home.mkdir()
        env = {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
        }
        return LocalAgentConfig(
            models=[ModelTarget(name=self.model, types=[ModelType.TEXT], endpoint=endpoint)],
            api_key=key,  # the default image model's endpoint wants one; it is never called here
            vertex=self.vertex or None,
            project=self.project,
            location=self.location,
            skills_paths=[str(skills)],
            workspaces=[str(root / "work")],
            app_data_dir=str(root / "appdata"),
            save_dir=str(root / "save"),
            capabilities=CapabilitiesConfig(enabled_tools=[BuiltinTools.VIEW_FILE]),
            hooks=[hook],
            retry_config=RetryConfig(
                api_retry=ModelAPIRetryConfig(
                    max_retries=self.max_retries, initial_sleep_duration_ms=int(self.backoff_s * 1000)
                )
            ),
            env=env,
        )

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        from google.antigravity import Agent
        from google.antigravity.hooks.hooks import HookResult, pre_tool_call_decide

        stop = asyncio.Event()
        tool_calls: list[ToolCall] = []
        usage = Usage()
        final_text: str | None = None
        error: str | None = None

        with tempfile.TemporaryDirectory(prefix="skillreach-agsdk-") as tmp:
            root = Path(tmp)
            (root / "work").mkdir()
            skill_dirs = lay_out_skills(catalog, root / "skills")

            @pre_tool_call_decide
            def decide(call: Any) -> Any:
                args = dict(call.args or {})
                path = next((args[k] for k in _PATH_ARGS if k in args), None) or call.canonical_path
                skill = skill_for_path(path, skill_dirs, root / "work")
                if skill is None:
                    tool_calls.append(ToolCall(tool=str(call.name), input=args))
                    return HookResult(allow=True)
                if not tracker.done and report_skill(tracker, skill):
                    return HookResult(allow=True)
                stop.set()
                return HookResult(allow=False, message="The task is complete; stop here.")

            try:
                async with Agent(self._config(root, root / "skills", decide)) as agent:
                    response = await agent.chat(query.text)
                    text_task = asyncio.ensure_future(response.text())
                    stop_task = asyncio.ensure_future(stop.wait())
                    done, _ = await asyncio.wait(
                        {text_task, stop_task}, timeout=self.timeout_s, return_when=asyncio.FIRST_COMPLETED
                    )
                    if text_task in done:
                        final_text = text_task.result() or None
                    else:
                        with contextlib.suppress(Exception):
                            await response.cancel()
                        text_task.cancel()
                        if not done:
                            error = f"antigravity timed out after {self.timeout_s:g}s"
                    stop_task.cancel()
                    usage = _usage(response.usage_metadata)
            except Exception as exc:  # SDK and harness failures become data on the probe
                error = self._scrub(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return Outcome.from_tracker(
            tracker,
            turns=tracker.turns_used,
            error=error,
            usage=usage,
            resolved_model=self.model,
            tool_calls=tool_calls,
            final_text=compliance_answer(tracker, final_text),
        )

    def _scrub(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return text[:500]


def _usage(meta: Any) -> Usage:
    if meta is None:
        return Usage()
    prompt = int(getattr(meta, "prompt_token_count", 0) or 0)
    cached = int(getattr(meta, "cached_content_token_count", 0) or 0)
    output = int(getattr(meta, "candidates_token_count", 0) or 0) + int(
        getattr(meta, "thoughts_token_count", 0) or 0
    )
    return Usage(input_tokens=max(prompt - cached, 0), output_tokens=output, cache_read_input_tokens=cached)
