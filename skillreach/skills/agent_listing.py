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

**Claude Code** (``@anthropic-ai/claude-code`` 2.1.328; the rule read from its bundled code and checked
against the requests it sent) lists the skills the model may invoke in a ``<system-reminder>`` of the first
user message (for a model it does not know, a system message): ``The following skills are available for
use with the Skill tool:``, a blank line, then one ``- name: description`` line each, sorted by name. The
description is the frontmatter's ``description`` (and `` - `` + ``when_to_use`` when there is one), every
run of control, format and line-separator characters made one space, ``<``/``>`` escaped, trimmed, and
capped at 1,536 characters (UTF-16 units: 1,535 and ``…``). The budget is 1 % of the model's context
window at 4 characters a token for the Claude models it knows (3 otherwise), counted in columns (a wide
character, most emoji among them, counts two): 8,000 for ``claude-sonnet-4-6`` (200,000 tokens), 40,000
with ``[1m]``, 30,000 for a model it has no figures for (it assumes 1,000,000 tokens). When the full
lines do not fit, every description is first taken away (``- name`` alone); then, in name order (the
skills' usage score breaks ties, and a probe's fresh home has none), each skill whose whole description
still fits in what is left gets it back. **No skill is ever dropped**: a skill listed by name alone can
still be activated, but its description never reaches the model. Skills with
``disable-model-invocation: true`` are not listed at all.

**Gemini CLI** (0.61.0, ``renderAgentSkills``: the system instruction and the ``activate_skill`` enum) and
**OpenCode** (1.18.33: the system prompt, sorted by name) list every enabled skill in full, with no budget
and no truncation: this module reports their listing unchanged.

**Copilot CLI** (1.0.102; the rule read off the requests it sent, :func:`copilot_listing`) has no budget
either, but it is stricter about what it lists and says it in XML: at the end of its system prompt, one
``<skill>`` entry per skill, sorted by name, the description XML-escaped (``&``, ``<``, ``>``, ``"`` and
``'`` as ``&amp;``, ``&lt;``, ``&gt;``, ``&quot;``, ``&apos;``: the model reads ``service&apos;s``) and
otherwise as written (line breaks, surrounding spaces and control characters kept), then its own
built-in skills. A skill whose name is not lowercase letters and digits in single-hyphen groups (at most
64 characters), or whose description is not a non-empty string of at most 1,024 UTF-16 units, is left
out without a word: **dropped**, it can never be activated.

:func:`codex_listing` gives the lines, what was shortened and what was dropped; :func:`codex_listing_text`
the ``<skills_instructions>`` block exactly as Codex sends it; :func:`claude_code_listing` and
:func:`claude_code_listing_text` the same for Claude Code.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from skillreach.models import Skill

__all__ = [
    "AGENTS",
    "CLAUDE_CODE_DEFAULT_MODEL",
    "CLAUDE_CODE_HEADER",
    "CODEX_DEFAULT_CHAR_BUDGET",
    "CODEX_FALLBACK_CONTEXT_WINDOW",
    "AgentListing",
    "ListedSkill",
    "claude_code_budget",
    "claude_code_description",
    "claude_code_listing",
    "claude_code_listing_text",
    "codex_budget",
    "codex_listing",
    "codex_listing_text",
    "copilot_listing",
    "copilot_listing_text",
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

    @property
    def name_only(self) -> list[str]:
        """Skills listed by name alone (their description never reaches the model)."""
        return [s.name for s in self.skills if not s.dropped and not s.description and s.full_length]

    def warning(self, catalog_id: str, agent_name: str) -> str | None:
        """One line when the agent (``Codex``, ``Claude Code``) shortens or drops any skill; else None."""
        if not self.overflows:
            return None
        return f"catalog {catalog_id!r} overflows {agent_name}'s skills listing: {self.summary()}"

    def summary(self) -> str:
        """One line: how many skills the agent shows, shortens and drops."""
        total = len(self.skills)
        if not self.overflows:
            return f"{self.agent} lists all {total} skills in full (budget {self.budget})"
        if self.agent == "claude-code":
            bare = len(self.name_only)
            capped = len(self.shortened) - bare
            return (
                f"{self.agent} lists all {total} skills, {bare} of them by name alone (no description "
                f"reaches the model)"
                + (f", {capped} descriptions capped at 1,536 characters" if capped else "")
                + f" (budget {self.budget})"
            )
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


CLAUDE_CODE_HEADER = "The following skills are available for use with the Skill tool:"
CLAUDE_CODE_DEFAULT_MODEL = "claude-sonnet-4-6"
"""The model ``skillreach listing --agent claude-code`` assumes when none is named."""
CLAUDE_CODE_BUDGET_PERCENT = 1
CLAUDE_CODE_DEFAULT_WINDOW = 200_000
CLAUDE_CODE_LONG_WINDOW = 1_000_000
"""The window of a ``[1m]`` model, and the one Claude Code 2.1.328 assumes for a model it has no
figures for."""
CLAUDE_CODE_MAX_DESCRIPTION = 1536
_CLAUDE_CODE_KNOWN = frozenset(
    {
        "claude-3-opus", "claude-3-sonnet", "claude-3-haiku", "claude-3-5-sonnet", "claude-3-5-haiku",
        "claude-3-7-sonnet", "claude-opus-4-0", "claude-opus-4-1", "claude-opus-4-5", "claude-opus-4-6",
        "claude-sonnet-4-0", "claude-sonnet-4-5", "claude-sonnet-4-6", "claude-haiku-4-5",
    }
)  # fmt: skip
"""The model families Claude Code 2.1.328 counts at 4 characters a token (3 for any other)."""
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp"})


def _claude_family(model: str) -> str:
    """``claude-sonnet-4-6`` of ``claude-sonnet-4-6-20260115``, ``us.anthropic.claude-sonnet-4-6[1m]``,
    ``claude-sonnet-4.6``."""
    name = model.lower().removesuffix("[1m]").rsplit("/", 1)[-1]
    name = re.sub(r"^(?:[a-z]{2}\.)?anthropic\.", "", name)
    name = re.sub(r"[._]", "-", name)
    return re.sub(r"(?:-v\d+(?::\d+)?|-\d{8}|@\d{8})$", "", name)


def claude_code_budget(model: str | None, context_window: int | None = None) -> tuple[int, str]:
    """Claude Code's listing budget in characters, and the same in words."""
    model = model or CLAUDE_CODE_DEFAULT_MODEL
    known = _claude_family(model) in _CLAUDE_CODE_KNOWN
    per_token = 4 if known else 3
    if context_window is None or context_window <= 0:
        long = model.lower().endswith("[1m]") or not known
        context_window = CLAUDE_CODE_LONG_WINDOW if long else CLAUDE_CODE_DEFAULT_WINDOW
    chars = max(1, context_window * per_token * CLAUDE_CODE_BUDGET_PERCENT // 100)
    return chars, (
        f"{chars} characters ({CLAUDE_CODE_BUDGET_PERCENT}% of a {context_window}-token context window at "
        f"{per_token} characters a token, {model})"
    )


def _claude_clean(text: str) -> str:
    out: list[str] = []
    hidden = False
    for ch in text:
        if unicodedata.category(ch) in _HIDDEN_CATEGORIES:
            if not hidden:
                out.append(" ")
            hidden = True
            continue
        hidden = False
        out.append(ch)
    return "".join(out).replace("<", "&lt;").replace(">", "&gt;").strip()


def _claude_full(skill: Skill) -> str:
    text = _claude_clean(skill.description)
    when = skill.frontmatter.get("when_to_use")
    return text if when is None else f"{text} - {_claude_clean(str(when))}"


def _claude_cap(text: str) -> str:
    if _js_len(text) <= CLAUDE_CODE_MAX_DESCRIPTION:
        return text
    kept = _js(text)[: 2 * (CLAUDE_CODE_MAX_DESCRIPTION - 1)]
    return kept.decode("utf-16-le", errors="surrogatepass") + "\u2026"


def claude_code_description(skill: Skill) -> str:
    """The description as Claude Code lists it: description (`` - when_to_use``), cleaned, capped."""
    return _claude_cap(_claude_full(skill))


def _js(text: str) -> bytes:
    """``text`` as JavaScript counts it (UTF-16 code units, two bytes each)."""
    return text.encode("utf-16-le", errors="surrogatepass")


def _js_len(text: str) -> int:
    return len(_js(text)) // 2


def _width(text: str) -> int:
    """Terminal columns of ``text``, as Claude Code measures its listing: East Asian wide and fullwidth
    characters (most emoji among them) count two, combining marks and invisible characters none."""
    total = 0
    for ch in text:
        category = unicodedata.category(ch)
        if category in ("Mn", "Me", "Cc", "Cf") or "\u200b" <= ch <= "\u200f":
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


def claude_code_listing(
    skills: Sequence[Skill], *, model: str | None = None, context_window: int | None = None
) -> AgentListing:
    """The catalog as Claude Code lists it to ``model`` (see the module's docstring)."""
    limit, budget = claude_code_budget(model, context_window)
    ordered = sorted((s for s in skills if not s.disable_model_invocation), key=lambda s: _js(s.name))
    whole = [_claude_full(s) for s in ordered]
    shown = [_claude_cap(w) for w in whole]
    bare = [f"- {s.name}" for s in ordered]
    full = [f"{b}: {d}" for b, d in zip(bare, shown, strict=True)]
    gaps = max(0, len(ordered) - 1)
    if sum(map(_width, full)) + gaps <= limit:
        listed = tuple(ListedSkill(s.name, d, len(w)) for s, d, w in zip(ordered, shown, whole, strict=True))
        return AgentListing("claude-code", listed, budget, tuple(full))
    room = limit - (sum(map(_width, bare)) + gaps)
    lines: list[str] = []
    listed_list: list[ListedSkill] = []
    for skill, b, f, d, w in zip(ordered, bare, full, shown, whole, strict=True):
        cost = _width(f) - _width(b)
        if cost <= room:
            room -= cost
            lines.append(f)
            listed_list.append(ListedSkill(skill.name, d, len(w)))
        else:
            lines.append(b)
            listed_list.append(ListedSkill(skill.name, "", len(w)))
    return AgentListing("claude-code", tuple(listed_list), budget, tuple(lines))


def claude_code_listing_text(listing: AgentListing) -> str:
    """The listing block exactly as Claude Code sends it (inside its ``<system-reminder>``)."""
    return f"{CLAUDE_CODE_HEADER}\n\n" + "\n".join(listing.lines)


COPILOT_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
COPILOT_MAX_NAME = 64
COPILOT_MAX_DESCRIPTION = 1024
_XML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"})


def _copilot_refuses(skill: Skill) -> bool:
    """Copilot CLI 1.0.102 leaves the skill out of its listing (and out of reach)."""
    written = skill.frontmatter.get("description", skill.description)
    return (
        not COPILOT_NAME.fullmatch(skill.name)
        or len(skill.name) > COPILOT_MAX_NAME
        or not isinstance(written, str)
        or not skill.description
        or _js_len(skill.description) > COPILOT_MAX_DESCRIPTION
    )


def _copilot_entry(skill: Skill) -> str:
    return (
        f"<skill>\n  <name>{skill.name}</name>\n  <description>{skill.description.translate(_XML)}"
        "</description>\n  <location>project</location>\n</skill>"
    )


def copilot_listing(skills: Sequence[Skill]) -> AgentListing:
    """The catalog as Copilot CLI lists it: each skill's ``<skill>`` entry, as sent, sorted by name; the
    skills it refuses dropped (see the module's docstring)."""
    ordered = sorted(skills, key=lambda s: _js(s.name))
    listed: list[ListedSkill] = []
    lines: list[str] = []
    for skill in ordered:
        if _copilot_refuses(skill):
            listed.append(ListedSkill(skill.name, "", len(skill.description), dropped=True))
            continue
        shown = skill.description.translate(_XML)
        listed.append(ListedSkill(skill.name, shown, len(shown)))
        lines.append(_copilot_entry(skill))
    return AgentListing("copilot", tuple(listed), "none", tuple(lines))


def copilot_listing_text(listing: AgentListing) -> str:
    """The catalog's ``<skill>`` entries exactly as Copilot CLI sends them (inside its
    ``<available_skills>`` block, before its built-in skills' entries)."""
    return "\n".join(listing.lines)


def listing_for(
    agent: str, skills: Sequence[Skill], *, context_window: int | None = None, model: str | None = None
) -> AgentListing:
    """``agent``'s listing of ``skills`` (:data:`AGENTS`); ``model`` counts for Claude Code only."""
    if agent == "codex":
        return codex_listing(skills, context_window=context_window)
    if agent == "claude-code":
        return claude_code_listing(skills, model=model, context_window=context_window)
    if agent == "copilot":
        return copilot_listing(skills)
    if agent in AGENTS:
        ordered = sorted(skills, key=lambda s: s.name)
        listed = tuple(ListedSkill(s.name, s.description, len(s.description)) for s in ordered)
        return AgentListing(agent, listed, "none", tuple(f"- {s.name}: {s.description}" for s in ordered))
    raise ValueError(f"unknown agent {agent!r}; known: {', '.join(AGENTS)}")
