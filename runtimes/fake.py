"""``fake``: scripted selections per query id, optionally per attempt (tests and demos, no network).

A script maps a query id to an entry; ``"*"`` is the entry for any other query (default: no skill).
An entry is one of

- a list of skill names, invoked in order: ``["docx", "pdf"]``;
- an object ``{"invoked": [...], "tool_calls": [{"tool": "Bash", "input": {...}}], "final_text": "...",
  "error": "...", "turns": N}`` — ``tool_calls`` and ``final_text`` are reported in compliance mode,
  once the expected skill was loaded (no ``final_text`` then is ``""``: the agent ended with no text);
  ``error`` makes the probe fail (kept as data); ``raise`` makes ``select`` raise a ``RuntimeError``
  with that message (a runtime's bug: the probe's error, never the end of the study);
- an object ``{"attempts": {"1": entry, "2": entry}, "*": entry}`` or a list of entries under
  ``"attempts"`` (attempt *n* takes item *n − 1*, cycling), for per-attempt behaviour.

Every name goes through the shared tracker, so ``max_turns``, early exit and acceptable skills apply
exactly as for a real agent; a name that is not resident in the catalog is not an invocation (the agent
cannot load a skill that is not there). The script comes from a dict or a JSON file.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, ToolCall
from skillreach.runtimes._version import own_version
from skillreach.study.contract import Outcome, RuntimeOptions, Tracker, compliance_answer

__all__ = ["FakeRuntime"]


def _load_script(script: dict[str, Any] | str | Path | None) -> dict[str, Any]:
    if script is None:
        return {}
    if isinstance(script, dict):
        return dict(script)
    path = Path(script)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the fake runtime's script ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        what = f"the fake runtime's script is not valid JSON: {exc.msg}"
        raise ConfigError(f"{path}:{exc.lineno}: {what}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the fake runtime's script must be an object mapping query ids to entries")
    return data


class FakeOptions(RuntimeOptions):
    """``runtime_options`` of the fake runtime."""

    script: dict[str, Any] | str | None = None
    """The script: a JSON file, or the mapping itself."""
    latency_s: float = 0.0


class FakeRuntime:
    name: ClassVar[str] = "fake"
    Options: ClassVar[type[RuntimeOptions]] = FakeOptions
    paid: ClassVar[bool] = False
    cached_listing: ClassVar[bool] = False
    batch_mode: ClassVar[bool] = False
    wants_all_probes: bool = False

    def __init__(
        self,
        script: dict[str, Any] | str | Path | None = None,
        *,
        model: str | None = None,
        latency_s: float = 0.0,
        settings: object | None = None,
    ) -> None:
        self.script = _load_script(script)
        self.model = model
        self.latency_s = latency_s
        self.calls: list[tuple[str, int]] = []
        """(query id, attempt) of every probe run, in order (tests count duplicates with it)."""

    @property
    def blind_hint(self) -> str | None:
        """Why every canary selected nothing, when the reason is the missing script."""
        if self.script:
            return None
        return (
            "it has no script, so it selects no skill; pass runtime_options: {script: FILE.json} "
            "(query id → skills) in --config, or use --runtime keyword"
        )

    def _entry(self, query: Query, attempt: int) -> dict[str, Any]:
        raw = self.script.get(query.id, self.script.get("*", []))
        entry = self._normalise(raw, query.id)
        per_attempt = entry.get("attempts")
        if per_attempt is not None:
            if isinstance(per_attempt, list):
                chosen = per_attempt[(attempt - 1) % len(per_attempt)] if per_attempt else []
            elif isinstance(per_attempt, dict):
                chosen = per_attempt.get(str(attempt), entry.get("*", []))
            else:
                raise ConfigError(f"fake script, query {query.id}: 'attempts' must be a list or an object")
            entry = self._normalise(chosen, query.id)
        return entry

    @staticmethod
    def _normalise(raw: Any, qid: str) -> dict[str, Any]:
        if isinstance(raw, list):
            return {"invoked": raw}
        if isinstance(raw, str):
            return {"invoked": [raw]}
        if isinstance(raw, dict):
            return raw
        raise ConfigError(f"fake script, query {qid}: an entry must be a list of skills or an object")

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        self.calls.append((query.id, tracker.attempt))
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        entry = self._entry(query, tracker.attempt)
        if entry.get("raise"):
            raise RuntimeError(str(entry["raise"]))
        if entry.get("error"):
            return Outcome.from_tracker(tracker, error=str(entry["error"]), resolved_model=self.model)
        turns = 0
        for name in entry.get("invoked", []):
            if name not in catalog:
                continue
            turns += 1
            if not tracker.invoke(str(name)):
                break
        tool_calls: list[ToolCall] = []
        final_text: str | None = None
        if tracker.options.compliance and tracker.expected_loaded:
            tool_calls = [
                ToolCall(tool=str(c.get("tool", "*")), input=dict(c.get("input", {})))
                for c in entry.get("tool_calls", [])[: tracker.options.step_budget]
            ]
            final_text = compliance_answer(tracker, entry.get("final_text"))
        return Outcome.from_tracker(
            tracker,
            turns=int(entry.get("turns", turns)),
            resolved_model=self.model,
            tool_calls=tool_calls,
            final_text=final_text,
            cost_usd=0.0,
        )

    async def aclose(self) -> None:
        return None

    async def version(self) -> str | None:
        """This runtime is skillreach's own code: skillreach's version."""
        return own_version()
