"""The catalog as an agent will list it to its model, computed before any probe.

**Codex** (``@openai/codex`` 0.171.0, ``codex-rs/core-skills/src/render.rs``) lists skills in a developer
message, one ``- name: description (file: r0/<name>/SKILL.md)`` line each under a ``### Skill roots``
table, sorted by name, within a budget: 2 % of the model's context window in tokens (a token ≈ 4 bytes,
rounded up) when the window is known, else 8,000 characters; the root table's cost comes off it first.
When the full lines do not fit, every description is shortened: the room left over the name-and-path
lines is handed out one character at a time, to each skill in turn, so short descriptions keep all of
theirs and long ones are cut evenly. When even the lines without any description do not fit, every
description is removed and skills are kept in order while they fit: the rest are **dropped**, and a
dropped skill can never be reached, whatever its description says.

**Claude Code** lists every skill in its ``Skill`` tool; **Gemini CLI** (0.61.0, ``renderAgentSkills``: the
system instruction and the ``activate_skill`` enum), **OpenCode** (1.18.33: the system prompt, sorted by
name) and **Copilot CLI** (1.0.102: the system prompt) list every enabled skill in full, with no budget and no
truncation: this module reports their listing unchanged.

:func:`codex_listing` gives the lines, what was shortened and what was dropped; :func:`codex_listing_text`
the ``<skills_instructions>`` block exactly as Codex sends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from skillreach.models import Skill

__all__ = [
    "AGENTS",
    "CODEX_DEFAULT_CHAR_BUDGET",
    "CODEX_FALLBACK_CONTEXT_WINDOW",
    "AgentListing",
    "ListedSkill",
    "codex_budget",
    "codex_listing",
    "codex_listing_text",
    "listing_for",
]

AGENTS = ("codex", "claude-code", "gemini-cli", "opencode", "copilot")
"""The agents whose listing this module computes."""

CODEX_DEFAULT_CHAR_BUDGET = 8_000
CODEX_FALLBACK_CONTEXT_WINDOW = 272_000
"""The context window Codex 0.171.0 assumes for a model it has no metadata for; a configured
``model_context_window`` above it is not used (both checked against the requests it sent)."""
CODEX_CONTEXT_PERCENT = 2
_BYTES_PER_TOKEN = 4
_INTRO_ALIASES = (
    "A skill is a set of local instructions to follow that is stored in a `SKILL.md` file. Below is the list "
    "of skills that can be used. Each entry includes a name, description, and a short path that can be "
    "expanded into an absolute path using the skill roots table."
)
_INTRO_ABSOLUTE = (
    "A skill is a set of local instructions to follow that is stored in a `SKILL.md` file. Below is the list "
    "of skills that can be used. Each entry includes a name, description, and file path so you can open the "
    "source for full instructions when using a specific skill."
)


@dataclass(frozen=True)
class ListedSkill:
    """One skill of the catalog as the agent lists it."""

    name: str
    description: str
    """The description as the model sees it (shortened when ``shortened``; empty when dropped)."""
    full_length: int
    """Characters of the skill's own description."""
    dropped: bool = False

    @property
    def shortened(self) -> bool:
        return not self.dropped and len(self.description) < self.full_length


@dataclass(frozen=True)
class AgentListing:
    """What an agent will show its model of a catalog."""

    agent: str
    skills: tuple[ListedSkill, ...]
    budget: str
    """The budget in words (``2000 tokens (2% of a 100000-token context window)``; ``none``)."""
    lines: tuple[str, ...] = field(default=())
    """The listing's skill lines, as sent."""

    @property
    def dropped(self) -> list[str]:
        return [s.name for s in self.skills if s.dropped]

    @property
    def shortened(self) -> list[str]:
        return [s.name for s in self.skills if s.shortened]

    @property
    def overflows(self) -> bool:
        return bool(self.dropped or self.shortened)

    def summary(self) -> str:
        """One line: how many skills the agent shows, shortens and drops."""
        total = len(self.skills)
        if not self.overflows:
            return f"{self.agent} lists all {total} skills in full (budget {self.budget})"
        line = (
            f"{self.agent} lists {total - len(self.dropped)} of {total} skills: "
            f"{len(self.shortened)} descriptions shortened, {len(self.dropped)} skills dropped "
            f"(budget {self.budget})"
        )
        return line + ("; a dropped skill can never be activated" if self.dropped else "")


def codex_budget(context_window: int | None) -> tuple[str, int]:
    """Codex's budget: (``"tokens"``, 2 % of the window) or (``"chars"``, 8,000)."""
    if context_window is not None and context_window > 0:
        return "tokens", max(1, context_window * CODEX_CONTEXT_PERCENT // 100)
    return "chars", CODEX_DEFAULT_CHAR_BUDGET


def _cost(unit: str, text: str) -> int:
    if unit == "chars":
        return len(text)
    return -(-len(text.encode("utf-8")) // _BYTES_PER_TOKEN)


def _line(name: str, description: str, path: str) -> str:
    return f"- {name}: {description} (file: {path})" if description else f"- {name}: (file: {path})"


def _body(root_lines: Sequence[str]) -> str:
    head = ["## Skills"]
    if root_lines:
        head += [_INTRO_ALIASES, "### Skill roots", *root_lines]
    else:
        head.append(_INTRO_ABSOLUTE)
    return "\n".join([*head, "### Available skills"])


def _root_line(root: str) -> str:
    return f"- `r0` = `{root}`"


def codex_listing(
    skills: Sequence[Skill], *, context_window: int | None = None, root: str = "<workspace>/.agents/skills"
) -> AgentListing:
    """The catalog as Codex lists it, from one skills root (``root``, the ``.agents/skills`` folder)."""
    unit, limit = codex_budget(context_window)
    root_lines = [_root_line(root)]
    table_cost = _cost(unit, _body(root_lines)) - _cost(unit, _body([]))
    table_cost = 0  # 0.171.0 does not charge the root table to the budget (checked against its requests)
    ordered = sorted(skills, key=lambda s: (s.name.encode("utf-8"), s.name))
    paths = [f"r0/{s.name}/SKILL.md" for s in ordered]
    full = [_line(s.name, s.description, p) for s, p in zip(ordered, paths, strict=True)]
    minimal = [_line(s.name, "", p) for s, p in zip(ordered, paths, strict=True)]
    budget = (
        f"{limit + table_cost} tokens ({CODEX_CONTEXT_PERCENT}% of a {context_window}-token context window)"
        if unit == "tokens"
        else f"{limit + table_cost} characters (no context window known)"
    )
    listed: list[ListedSkill] = []
    if sum(_cost(unit, line + "\n") for line in full) <= limit:
        listed = [ListedSkill(s.name, s.description, len(s.description)) for s in ordered]
        return AgentListing("codex", tuple(listed), budget, tuple(full))
    minimum = sum(_cost(unit, line + "\n") for line in minimal)
    if minimum <= limit:
        chars = _share_out(unit, ordered, minimal, limit - minimum)
        listed = [
            ListedSkill(s.name, s.description[:n], len(s.description))
            for s, n in zip(ordered, chars, strict=True)
        ]
        lines = [_line(s.name, s.description[:n], p) for s, n, p in zip(ordered, chars, paths, strict=True)]
        return AgentListing("codex", tuple(listed), budget, tuple(lines))
    used = 0
    lines = []
    for skill, line in zip(ordered, minimal, strict=True):
        cost = _cost(unit, line + "\n")
        if used + cost <= limit:
            used += cost
            lines.append(line)
            listed.append(ListedSkill(skill.name, "", len(skill.description)))
        else:
            listed.append(ListedSkill(skill.name, "", len(skill.description), dropped=True))
    return AgentListing("codex", tuple(listed), budget, tuple(lines))


def _share_out(unit: str, ordered: Sequence[Skill], minimal: Sequence[str], room: int) -> list[int]:
    """Characters of each description kept: one character at a time to each skill in turn, while the
    next character's cost fits in what is left (Codex's ``render_lines_with_description_budget``)."""
    extra: list[list[int]] = []
    for skill, line in zip(ordered, minimal, strict=True):
        base_chars, base_bytes = len(line) + 1, len(line.encode("utf-8")) + 1
        base = base_chars if unit == "chars" else -(-base_bytes // _BYTES_PER_TOKEN)
        costs = [0]
        nbytes = 0
        for chars, ch in enumerate(skill.description, start=1):
            nbytes += len(ch.encode("utf-8"))
            total = (
                base_chars + chars + 1
                if unit == "chars"
                else -(-(base_bytes + nbytes + 1) // _BYTES_PER_TOKEN)
            )
            costs.append(max(0, total - base))
        extra.append(costs)
    kept = [0] * len(ordered)
    spent = [0] * len(ordered)
    while True:
        changed = False
        for i, costs in enumerate(extra):
            if kept[i] >= len(costs) - 1:
                continue
            delta = max(0, costs[kept[i] + 1] - spent[i])
            if delta <= room:
                kept[i] += 1
                spent[i] = costs[kept[i]]
                room -= delta
                changed = True
        if not changed:
            return kept


def codex_listing_text(listing: AgentListing, root: str) -> str:
    """The ``<skills_instructions>`` block Codex sends for ``listing`` (skills under ``root``)."""
    body = "\n".join([_body([_root_line(root)]), *listing.lines])
    return f"<skills_instructions>\n{body}\n</skills_instructions>"


def listing_for(agent: str, skills: Sequence[Skill], *, context_window: int | None = None) -> AgentListing:
    """``agent``'s listing of ``skills`` (:data:`AGENTS`)."""
    if agent == "codex":
        return codex_listing(skills, context_window=context_window)
    if agent in AGENTS:
        ordered = sorted(skills, key=lambda s: s.name)
        listed = tuple(ListedSkill(s.name, s.description, len(s.description)) for s in ordered)
        return AgentListing(agent, listed, "none", tuple(f"- {s.name}: {s.description}" for s in ordered))
    raise ValueError(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")
