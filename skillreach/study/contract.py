"""The contract every runtime keeps, and the trajectory tracker they all share.

A runtime is one class with an async :meth:`Runtime.select`: given a query and the resident catalog it
runs the agent and reports every skill invocation to the :class:`Tracker`, stopping as soon as the
tracker says so. The tracker, not the runtime, decides what is recorded: consecutive repeats collapse,
every skill read (neutral ``acceptable_skills`` included) uses one of ``max_turns``, and with early exit
the probe stops the moment the expected skill is invoked; nothing after that is recorded.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError

from skillreach.errors import ConfigError
from skillreach.models import Catalog, Query, ToolCall, Usage
from skillreach.settings import Price, Settings

__all__ = [
    "Outcome",
    "ProbeOptions",
    "Runtime",
    "RuntimeOptions",
    "Tracker",
    "check_options",
    "compliance_answer",
    "cost_of",
    "default_settings",
]


@dataclass(frozen=True)
class ProbeOptions:
    """What every probe of a study shares. ``compliance``: keep going after the target."""

    max_turns: int = 3
    early_exit: bool = True
    model: str | None = None
    timeout_s: float = 120.0
    compliance: bool = False
    step_budget: int = 8
    keep_answer: bool = False
    """Report the agent's last text as ``final_text`` even when the expected skill was never loaded
    (``skillreach uplift``: task quality without the skill). Off for studies."""
    routing_max_tokens: int = 256
    """The reply budget of a routing request (API runtimes): enough for a tool call, so a model that
    answers in prose instead stops early and costs little. Compliance mode keeps its own budget."""

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ConfigError(f"max_turns must be at least 1 (got {self.max_turns})")
        if self.step_budget < 1:
            raise ConfigError(f"step_budget must be at least 1 (got {self.step_budget})")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s must be positive (got {self.timeout_s:g})")
        if self.routing_max_tokens < 1:
            raise ConfigError(f"routing_max_tokens must be at least 1 (got {self.routing_max_tokens})")


class Tracker:
    """Keeps the raw invocation sequence of one probe (spec/metrics.md ``raw``)."""

    def __init__(
        self,
        expected: str | None,
        acceptable: tuple[str, ...] | list[str] = (),
        *,
        max_turns: int = 3,
        early_exit: bool = True,
        options: ProbeOptions | None = None,
        attempt: int = 1,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.options = options or ProbeOptions(max_turns=max_turns, early_exit=early_exit)
        """The study's options, so a runtime can read ``model``, ``timeout_s``, ``compliance`` …"""
        self.attempt = attempt
        self.expected = expected
        self.acceptable = frozenset(acceptable)
        self.max_turns = max_turns
        self.early_exit_enabled = early_exit
        self.invoked: list[str] = []
        self.early_exit = False
        self.exhausted = False

    @classmethod
    def for_query(cls, query: Query, options: ProbeOptions, attempt: int = 1) -> Tracker:
        return cls(
            query.expected_skill,
            query.acceptable_skills,
            max_turns=options.max_turns,
            early_exit=options.early_exit,
            options=options,
            attempt=attempt,
        )

    @property
    def done(self) -> bool:
        return self.early_exit or self.exhausted

    @property
    def turns_used(self) -> int:
        return len(self.invoked)

    @property
    def expected_loaded(self) -> bool:
        """The expected skill has been invoked (with or without early exit)."""
        return self.expected is not None and self.expected in self.invoked

    def invoke(self, skill: str) -> bool:
        """Record an invocation; return True when the probe may go on, False when it must stop."""
        if self.done:
            return False
        if not (self.invoked and self.invoked[-1] == skill):
            self.invoked.append(skill)
        if self.early_exit_enabled and self.expected is not None and skill == self.expected:
            self.early_exit = True
        elif len(self.invoked) >= self.max_turns:
            self.exhausted = True
        return not self.done


def compliance_answer(tracker: Tracker, text: str | None) -> str | None:
    """The ``final_text`` a probe reports: in compliance mode, once the expected skill was loaded, the
    agent's last text, or ``""`` when it ended its turn with none — so that an activated probe with no
    tool calls and no answer is judged (a compliance failure), not taken for a routing-only probe
    (``skillreach.queries.compliance.evaluate_probe``). Otherwise ``text`` as it is."""
    if tracker.options.compliance and tracker.expected_loaded:
        return text or ""
    if tracker.options.keep_answer:
        return text or ""
    return text


def cost_of(usage: Usage, price: Price | None, *, batch: bool = False) -> float | None:
    """USD for ``usage`` at ``price`` (per million tokens; half in batch mode), None when not priced."""
    if price is None:
        return None
    usd = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    ) / 1_000_000
    return usd * (0.5 if batch else 1.0)


@dataclass
class Outcome:
    """What a runtime reports for one probe; the runner turns it into a ``ProbeRecord``."""

    invoked: list[str] = field(default_factory=list)
    early_exit: bool = False
    turns: int = 0
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    resolved_model: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    final_text: str | None = None
    retrieved: list[str] | None = None

    @classmethod
    def from_tracker(cls, tracker: Tracker, **kwargs: object) -> Outcome:
        return cls(invoked=list(tracker.invoked), early_exit=tracker.early_exit, **kwargs)  # type: ignore[arg-type]


class RuntimeOptions(BaseModel):
    """The options a runtime takes from a study's ``runtime_options``: each runtime declares one subclass
    as its ``Options``; an unknown or misspelt key is refused (:func:`check_options`) with the valid ones
    named. Dependencies that are not configuration (a client, a retry policy for tests) are constructor
    arguments only."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_options(
    runtime: str, options_model: type[RuntimeOptions], options: dict[str, Any]
) -> dict[str, Any]:
    """``options`` validated against a runtime's ``Options``: the keys given, with their values coerced.

    A misspelt or unknown key, or a value of the wrong type, is a :class:`ConfigError` naming the option
    and the valid ones (``runtime_options.<key>``: what the user wrote in the config file).
    """
    valid = sorted(options_model.model_fields)
    unknown = [k for k in options if k not in options_model.model_fields]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"runtime_options.{key}: the {runtime} runtime has no option {key!r}; {hint}"
            f"valid options: {', '.join(valid) or 'none'}"
        )
    try:
        checked = options_model.model_validate(options)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"runtime_options.{where}: {err['msg']} (the {runtime} runtime)") from exc
    return {k: getattr(checked, k) for k in options}


def default_settings() -> Settings:
    """The settings' defaults, for a runtime built without a ``settings`` object (tests, scripts).

    Never read from the environment here: a runtime gets its settings from the task that builds it
    (one resolved configuration), so a config file and a flag reach every runtime alike."""
    return Settings.model_construct()


@runtime_checkable
class Runtime(Protocol):
    """One agent runtime. ``name`` is its registry name; the capabilities are class attributes:

    - ``paid``: it bills per token from the price table (a cost estimate is said before a run);
    - ``cached_listing``: the stable prefix (system prompt + skill listing) is served from the prompt
      cache after the first request;
    - ``batch_mode``: it has a batch API at half price (``--batch``);
    - ``wants_all_probes``: run every probe in flight at once (true for a runtime in batch mode).
    """

    name: ClassVar[str]
    paid: ClassVar[bool]
    cached_listing: ClassVar[bool]
    batch_mode: ClassVar[bool]
    wants_all_probes: bool

    async def select(self, query: Query, catalog: Catalog, tracker: Tracker) -> Outcome:
        """Run one probe, reporting invocations to ``tracker``; failures become ``Outcome.error``."""
        ...

    async def version(self) -> str | None:
        """The runtime's version (``claude --version``, the SDK's version …), asked once and cached;
        ``None`` when it cannot be told. Recorded on every probe (``ProbeRecord.runtime_version``)."""
        ...

    async def aclose(self) -> None:
        """Release clients and processes."""
        ...
