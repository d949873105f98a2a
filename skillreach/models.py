"""The records everything else passes around: frozen pydantic models, versioned, with provenance.

Shapes follow ``spec/interfaces.md``; definitions of the numbers follow ``spec/metrics.md``.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "NO_SKILL",
    "SCHEMA_VERSION",
    "Catalog",
    "Checks",
    "Count",
    "Finite",
    "Frozen",
    "NonNegative",
    "OutputCheck",
    "ProbeRecord",
    "Provenance",
    "Query",
    "QueryKind",
    "QuerySet",
    "Rate",
    "Skill",
    "StrictNumber",
    "ToolCall",
    "ToolPattern",
    "Usage",
    "sha256_hex",
]

NO_SKILL = "(no skill)"
SCHEMA_VERSION = 1


def _not_bool(value: Any) -> Any:
    """``true``/``false`` where a number belongs is refused (pydantic reads ``true`` as 1)."""
    if isinstance(value, bool):
        raise ValueError(f"{str(value).lower()} is not a number; write a number")
    return value


StrictNumber = BeforeValidator(_not_bool)
"""Put in ``Annotated[int, StrictNumber]``: a boolean is refused where a number belongs."""
Count = Annotated[int, StrictNumber, Field(ge=0)]
"""A count read back from a file: an integer ≥ 0, never a boolean."""
Rate = Annotated[float, StrictNumber, Field(ge=0, le=1, allow_inf_nan=False)]
"""A rate or proportion read back from a file: a finite number in [0, 1]."""
Finite = Annotated[float, StrictNumber, Field(allow_inf_nan=False)]
"""A finite number (no NaN, no infinity)."""
NonNegative = Annotated[float, StrictNumber, Field(ge=0, allow_inf_nan=False)]
"""A finite number ≥ 0 (a price, a cost)."""
MAX_PROBE_COST_USD = 1_000_000.0
MAX_PROBE_LINE_BYTES = 64 << 20
"""Bytes one probes.jsonl line may hold (a record with its tool calls and final text is kilobytes): a
longer line — a sparse or binary file with no newline — is refused, naming it, never read whole."""
"""The most one probe may have cost: a record that says more (or less than 0, or NaN, or infinity) is
refused where a probe log is read, with its file and line."""
ProbeCost = Annotated[float, StrictNumber, Field(ge=0, le=MAX_PROBE_COST_USD, allow_inf_nan=False)]
MAX_TURNS = 1_000_000
"""The most model turns one probe may record (each is a paid request): a record that says more, or less
than 0, or not an integer, is refused where a probe log is read, with its file and line."""


def canonical_json(data: Any) -> bytes:
    """``json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` as UTF-8, the form
    digests are defined on — by orjson, which writes the same bytes for strings, ints, lists and
    objects about 10× faster; anything it refuses (an int beyond 64 bits) goes through json."""
    try:
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_hex(data: str | bytes) -> str:
    """Hex SHA-256 of a string (UTF-8) or bytes."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


class Frozen(BaseModel):
    """The base of every record: frozen, and unknown fields refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------------------------- skills


class Skill(Frozen):
    """One parsed SKILL.md. ``path`` is the file, ``folder`` its directory (both as given, absolute)."""

    name: str
    description: str
    body: str = ""
    path: str = ""
    folder: str = ""
    root: str = ""
    frontmatter: dict[str, Any] = Field(default_factory=dict)

    @property
    def content_digest(self) -> str:
        """``sha256:<hex>`` over name, description and body (what a model can be shown)."""
        payload = json.dumps(
            {"name": self.name, "description": self.description, "body": self.body},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return "sha256:" + sha256_hex(payload)

    @property
    def disable_model_invocation(self) -> bool:
        return bool(self.frontmatter.get("disable-model-invocation", False))


class Catalog(Frozen):
    """The skills resident for a probe. ``digest`` covers names, descriptions and bodies."""

    id: str
    strategy: str = "full"
    skills: tuple[Skill, ...]
    target: str | None = None

    @model_validator(mode="after")
    def _unique_names(self) -> Catalog:
        seen: set[str] = set()
        for s in self.skills:
            if s.name in seen:
                raise ValueError(f"catalog {self.id!r} holds skill {s.name!r} twice")
            if s.name == NO_SKILL:
                raise ValueError(f"a skill may not be named {NO_SKILL!r}")
            seen.add(s.name)
        return self

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.skills]

    def get(self, name: str) -> Skill | None:
        for s in self.skills:
            if s.name == name:
                return s
        return None

    def __contains__(self, name: object) -> bool:
        return any(s.name == name for s in self.skills)

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` over every resident skill's name, description and body, order-free."""
        payload = json.dumps(
            sorted(([s.name, s.description, s.body] for s in self.skills), key=lambda t: t[0]),
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return "sha256:" + sha256_hex(payload)


# -------------------------------------------------------------------------------------------- queries


class QueryKind(StrEnum):
    implicit = "implicit"
    contextual = "contextual"
    neighbor_negative = "neighbor_negative"
    out_of_scope = "out_of_scope"


class ToolPattern(Frozen):
    """A required or forbidden action: a tool (name, or ``*`` for any) whose arguments match ``pattern``.

    ``pattern`` is a regular expression searched in the JSON of the call's input (case-sensitive).
    """

    tool: str = "*"
    pattern: str = ""


class OutputCheck(Frozen):
    """An assertion over the agent's final answer. Exactly one of the fields is set."""

    contains: str | None = None
    not_contains: str | None = None
    regex: str | None = None

    @model_validator(mode="after")
    def _one(self) -> OutputCheck:
        if sum(v is not None for v in (self.contains, self.not_contains, self.regex)) != 1:
            raise ValueError("an output check needs exactly one of contains, not_contains, regex")
        return self


class Checks(Frozen):
    """What compliance (requires/forbids) and task quality (output/rubric) are judged on."""

    requires: tuple[ToolPattern, ...] = ()
    forbids: tuple[ToolPattern, ...] = ()
    output: tuple[OutputCheck, ...] = ()
    rubric: str | None = None
    tool_results: dict[str, str] = Field(default_factory=dict)
    """Canned results for the simulated tool environment: regex over the call's input → result text."""

    @property
    def has_compliance(self) -> bool:
        return bool(self.requires or self.forbids)

    @property
    def has_quality(self) -> bool:
        return bool(self.output or self.rubric)

    def canonical(self) -> dict[str, Any]:
        """The form that is written to files and covered by the digest (defaults left out)."""
        return self.model_dump(mode="json", exclude_defaults=True)


class Query(Frozen):
    id: str
    text: str
    expected_skill: str | None = None
    acceptable_skills: tuple[str, ...] = ()
    kind: QueryKind = QueryKind.implicit
    notes: str = ""
    checks: Checks | None = None

    @field_validator("id", "text")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("must not be empty")
        return v

    @model_validator(mode="after")
    def _expected_iff_in_scope(self) -> Query:
        if self.kind is QueryKind.out_of_scope and self.expected_skill is not None:
            raise ValueError("expected_skill must be null for an out_of_scope query")
        if self.kind is not QueryKind.out_of_scope and self.expected_skill is None:
            raise ValueError(f"expected_skill is required for a {self.kind.value} query")
        if self.expected_skill is not None and self.expected_skill in self.acceptable_skills:
            raise ValueError("expected_skill must not also be listed in acceptable_skills")
        return self

    @property
    def truth(self) -> str:
        return self.expected_skill if self.expected_skill is not None else NO_SKILL

    @property
    def in_scope(self) -> bool:
        return self.expected_skill is not None

    def canonical(self) -> dict[str, Any]:
        """Exactly the keys the digest covers, absent optional keys filled with their defaults."""
        return {
            "id": self.id,
            "text": self.text,
            "expected_skill": self.expected_skill,
            "acceptable_skills": list(self.acceptable_skills),
            "kind": self.kind.value,
            "notes": self.notes,
            "checks": self.checks.canonical() if self.checks is not None else None,
        }

    def case_digest(self) -> str:
        """``sha256:<hex>`` of the case's content (spec/metrics.md "Cases are pinned by content"): the
        canonical JSON of ``text``, ``expected_skill``, ``acceptable_skills`` (sorted), ``kind`` and
        ``checks`` — not the id, not the notes."""
        doc = {
            "text": self.text,
            "expected_skill": self.expected_skill,
            "acceptable_skills": sorted(self.acceptable_skills),
            "kind": self.kind.value,
            "checks": self.checks.canonical() if self.checks is not None else None,
        }
        return "sha256:" + sha256_hex(canonical_json(doc))


class Provenance(Frozen):
    model_config = ConfigDict(frozen=True, extra="allow")

    origin: str = "authored"  # authored | generated | imported
    created_at: str = ""
    tool_version: str = ""
    generator_model: str | None = None
    source: str = ""
    digest: str = ""


class QuerySet(Frozen):
    catalog_id: str = "all"
    queries: tuple[Query, ...]
    provenance: Provenance = Field(default_factory=Provenance)

    def compute_digest(self) -> str:
        """``sha256:<hex>`` exactly as spec/interfaces.md defines it."""
        doc = {
            "catalog_id": self.catalog_id,
            "queries": [q.canonical() for q in sorted(self.queries, key=lambda q: q.id)],
        }
        return "sha256:" + sha256_hex(canonical_json(doc))

    def by_id(self) -> dict[str, Query]:
        return {q.id: q for q in self.queries}


# --------------------------------------------------------------------------------------------- probes


class Usage(Frozen):
    input_tokens: Count = 0
    output_tokens: Count = 0
    cache_creation_input_tokens: Count = 0
    cache_read_input_tokens: Count = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
        )

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


class ToolCall(Frozen):
    """A tool call the agent made after its skill was loaded (recorded, never executed)."""

    tool: str
    input: dict[str, Any] = Field(default_factory=dict)


class ProbeRecord(Frozen):
    """One line of ``probes.jsonl``. ``invoked`` is the raw sequence kept by the trajectory tracker."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    query_id: str
    attempt: Annotated[int, StrictNumber, Field(ge=1)] = 1
    invoked: tuple[str, ...] = ()
    error: str | None = None
    turns: Annotated[int, StrictNumber, Field(ge=0, le=MAX_TURNS)] = 0
    early_exit: bool = False
    runtime: str = ""
    runtime_version: str | None = None
    """What the runtime said its version is (``claude --version``, the SDK's version …)."""
    model: str | None = None
    resolved_model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: ProbeCost | None = None
    duration_ms: Count = 0
    # additions beyond the spec's minimum
    fingerprint: str | None = None
    retrieved: tuple[str, ...] | None = None
    """For the retriever runtime: the pre-selected sub-catalog."""
    tool_calls: tuple[ToolCall, ...] = ()
    final_text: str | None = None
    rubric_grade: float | None = None
    rubric_version: str | None = None
    finished_at: str | None = None

    def to_json_line(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
