"""Static checks of SKILL.md files (``skillreach lint``).

Errors (exit 1):

- ``invalid-yaml`` — the frontmatter is not valid YAML, is not closed, is not a mapping, repeats a
  key, or the file is not UTF-8 / cannot be read (reported at the offending line);
- ``missing-name`` / ``invalid-name`` — no ``name``, or not lowercase kebab-case
  (``^[a-z0-9]+(-[a-z0-9]+)*$``) of at most 64 characters;
- ``name-mismatch`` — ``name`` differs from the skill's folder name;
- ``missing-description`` — no, empty, or non-string ``description``;
- ``duplicate-name`` — the same name in two SKILL.md files under the roots given (the first one found
  is loaded; each later one is flagged).

Warnings (exit 0 when there is no error):

- ``no-frontmatter`` — a file called SKILL.md with no frontmatter (a nested document): not a skill;
- ``short-description`` / ``long-description`` — fewer than 20 or more than 1024 characters;
- ``placeholder`` — template leftovers (TODO, TBD, FIXME, XXX, ``[insert …``, ``SKILL_NAME``,
  ``{{ var }}``, lorem ipsum) in the name or description;
- ``xml-tags`` — XML/HTML tags in the description (the Claude API refuses them);
- ``reserved-name`` — a name that is an agent tool's name (Bash, Read, Skill, WebFetch, … compared
  case- and hyphen-insensitively), or contains ``anthropic`` or ``claude``;
- ``listing-budget`` — the catalog listing (one ``- name: description`` line per model-invocable
  skill) is larger than the character budget (``Settings.listing_budget_chars``, ``--budget``);
- ``empty-root`` — a folder given holds no SKILL.md (when another one does).
- ``walk-skipped`` — a link leading outside the folders given, or folders nested too deep, not looked
  at (``--follow-outside`` follows such links).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from skillreach.errors import LintFailed, NoFrontmatterError, NotFoundError, SkillParseError
from skillreach.skills._fanout import fan_out, processes_for
from skillreach.skills.discovery import (
    NAME_MAX,
    NAME_PATTERN,
    read_frontmatter,
    text_problem,
    walk_skill_files,
)

__all__ = [
    "DESCRIPTION_MAX",
    "DESCRIPTION_MIN",
    "NAME_MAX",
    "NAME_PATTERN",
    "RESERVED_TOOL_NAMES",
    "Finding",
    "LintFailed",
    "LintReport",
    "description_findings",
    "format_github",
    "format_text",
    "lint",
    "listing_text",
]

Severity = Literal["error", "warning"]

DESCRIPTION_MIN = 20
DESCRIPTION_MAX = 1024

RESERVED_TOOL_NAMES = (
    "Agent",
    "Bash",
    "BashOutput",
    "Edit",
    "ExitPlanMode",
    "Glob",
    "Grep",
    "KillShell",
    "LS",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Read",
    "Skill",
    "SlashCommand",
    "Task",
    "TodoRead",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
    "Write",
)
"""Names of the tools an agent harness (Claude Code) already offers; a skill named so is confusing."""
_RESERVED = {t.lower(): t for t in RESERVED_TOOL_NAMES}
_RESERVED_WORDS = ("anthropic", "claude")
_XML_TAG = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>")

_PLACEHOLDERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(TODO|TBD|FIXME|XXX)\b"), "{0}"),
    (re.compile(r"\[\s*insert\b", re.IGNORECASE), "'[insert …'"),
    (re.compile(r"\b[A-Z]+(?:_[A-Z]+)*_NAME\b"), "{0}"),
    (re.compile(r"\{\{\s*[\w.-]+\s*\}\}"), "{0}"),
    (re.compile(r"\blorem ipsum\b", re.IGNORECASE), "lorem ipsum"),
)


@dataclass(frozen=True)
class Finding:
    severity: Severity
    code: str
    message: str
    path: str | None = None
    """The SKILL.md (absolute), or ``None`` for a finding about the whole catalog."""
    line: int | None = None


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    budget: int = 0
    listing_chars: int = 0
    listed: int = 0

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def exit_code(self) -> int:
        """0 clean or warnings only; 1 when any error was found."""
        return 1 if self.errors else 0


def listing_text(entries: Iterable[tuple[str, str]]) -> str:
    """The catalog listing an agent is shown: one ``- name: description`` line per skill."""
    return "".join(f"- {name}: {description}\n" for name, description in entries)


@dataclass
class _Checked:
    path: str
    name: str | None
    name_line: int
    description: str | None
    invocable: bool


def _check_name(path: str, value: object, line: int, out: list[Finding]) -> str | None:
    if not isinstance(value, str) or not value.strip():
        what = "is empty" if isinstance(value, str) else f"is a YAML {type(value).__name__}, not a string"
        out.append(Finding("error", "invalid-name", f"name {what}; use lowercase-kebab-case", path, line))
        return None
    name = value
    if len(name) > NAME_MAX or not NAME_PATTERN.fullmatch(name):
        why = (
            f"is {len(name)} characters (at most {NAME_MAX})"
            if len(name) > NAME_MAX
            else "is not lowercase kebab-case (letters a-z, digits, single hyphens between words)"
        )
        out.append(Finding("error", "invalid-name", f"name {name!r} {why}", path, line))
    folder = os.path.basename(os.path.dirname(path))
    if name != folder:
        out.append(
            Finding(
                "error",
                "name-mismatch",
                f"name {name!r} differs from its folder {folder!r}; rename one so they match",
                path,
                line,
            )
        )
    squashed = name.replace("-", "").replace("_", "").lower()
    if squashed in _RESERVED:
        out.append(
            Finding(
                "warning",
                "reserved-name",
                f"name {name!r} is the agent tool {_RESERVED[squashed]!r}; pick a name that says what "
                "the skill does",
                path,
                line,
            )
        )
    for word in _RESERVED_WORDS:
        if word in name.lower():
            out.append(
                Finding(
                    "warning",
                    "reserved-name",
                    f"name {name!r} contains the reserved word {word!r} (refused by the Claude API)",
                    path,
                    line,
                )
            )
    return name


def _may_hold_placeholder(text: str) -> bool:
    """Whether ``text`` holds what every pattern of :data:`_PLACEHOLDERS` needs (a literal each):
    nearly no description does, and ``in`` is ~20× faster than the patterns' search."""
    return (
        "[" in text
        or "{{" in text
        or "_NAME" in text
        or "TODO" in text
        or "TBD" in text
        or "FIXME" in text
        or "XXX" in text
        or "orem" in text.lower()
    )


def _placeholders(text: str) -> list[str]:
    if not _may_hold_placeholder(text):
        return []
    found: list[str] = []
    for pattern, shown in _PLACEHOLDERS:
        for m in pattern.finditer(text):
            label = shown.format(m.group(0))
            if label not in found:
                found.append(label)
    return found


def _check_description(path: str, value: object, line: int, out: list[Finding]) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        out.append(
            Finding(
                "error",
                "missing-description",
                "missing description: agents route on it; say what the skill does and when to use it",
                path,
                line,
            )
        )
        return None
    if not isinstance(value, str):
        out.append(
            Finding(
                "error",
                "missing-description",
                f"description is a YAML {type(value).__name__}, not a string; quote it",
                path,
                line,
            )
        )
        return None
    tags = sorted(set(_XML_TAG.findall(value)))
    if tags:
        out.append(
            Finding(
                "warning",
                "xml-tags",
                f"description contains XML tags ({', '.join(tags[:3])}); the Claude API refuses them — "
                "reword without angle brackets",
                path,
                line,
            )
        )
    n = len(value)
    if n < DESCRIPTION_MIN:
        out.append(
            Finding(
                "warning",
                "short-description",
                f"description is {n} characters (under {DESCRIPTION_MIN}); say what the skill does and "
                "when to use it",
                path,
                line,
            )
        )
    elif n > DESCRIPTION_MAX:
        out.append(
            Finding(
                "warning",
                "long-description",
                f"description is {n} characters (over {DESCRIPTION_MAX}, the Agent Skills limit); "
                "some agents truncate or refuse it",
                path,
                line,
            )
        )
    return value


def description_findings(text: str, path: str = "", line: int = 1) -> list[Finding]:
    """What ``lint`` says about one description alone: missing, XML tags, too short or long, and
    template placeholders (``skillreach optimize`` filters its candidates with it)."""
    out: list[Finding] = []
    value = _check_description(path, text, line, out)
    marks = _placeholders(value) if value else []
    if marks:
        out.append(
            Finding(
                "warning",
                "placeholder",
                f"description holds template placeholder(s) {', '.join(marks)}; fill them in",
                path,
                line,
            )
        )
    return out


def _check_file(path: str, out: list[Finding]) -> _Checked | None:
    try:
        fm = read_frontmatter(path)
    except NoFrontmatterError as exc:
        out.append(Finding("warning", "no-frontmatter", exc.what, exc.path, exc.line))
        return None
    except SkillParseError as exc:
        out.append(Finding("error", "invalid-yaml", exc.what, exc.path, exc.line))
        return None
    path = fm.path
    if "name" not in fm.data:
        out.append(
            Finding(
                "error",
                "missing-name",
                "missing name (required by the Agent Skills spec; Claude Code falls back to the folder "
                "name); add name: " + os.path.basename(os.path.dirname(path)),
                path,
                fm.line,
            )
        )
        name = None
    else:
        name = _check_name(path, fm.data["name"], fm.line_of("name"), out)
    desc_line = fm.line_of("description") if "description" in fm.data else fm.line
    description = _check_description(path, fm.data.get("description"), desc_line, out)
    for field_name, text, line in (
        ("name", name, fm.line_of("name")),
        ("description", description, desc_line),
    ):
        if text:
            marks = _placeholders(text)
            if marks:
                out.append(
                    Finding(
                        "warning",
                        "placeholder",
                        f"{field_name} holds template placeholder(s) {', '.join(marks)}; fill them in",
                        path,
                        line,
                    )
                )
    for field_name, text, line in (
        ("name", name, fm.line_of("name")),
        ("description", description, desc_line),
        ("body", fm.body, fm.line),
    ):
        problem = text_problem(text) if text else None
        if problem is not None:
            out.append(Finding("error", "bad-character", f"{field_name} {problem}", path, line))
    invocable = not bool(fm.data.get("disable-model-invocation", False))
    return _Checked(path, name, fm.line_of("name"), description, invocable)


def _check_files(paths: Sequence[str]) -> tuple[list[Finding], list[_Checked]]:
    """Every file's findings and what the catalog checks need of it (one process's share)."""
    findings: list[Finding] = []
    checked: list[_Checked] = []
    for path in paths:
        result = _check_file(path, findings)
        if result is not None:
            checked.append(result)
    return findings, checked


def lint(
    roots: Sequence[str | os.PathLike[str]], *, budget: int = 15000, follow_outside: bool = False
) -> LintReport:
    """Check every SKILL.md under ``roots``.

    Raises :class:`NotFoundError` (exit 2) for a root that does not exist or when no root holds a
    SKILL.md. Every file is checked even when others are broken.
    """
    if not roots:
        raise NotFoundError("no folder given; pass one or more DIR holding skills")
    report = LintReport(budget=budget)
    seen: set[str] = set()
    empty: list[str] = []
    skipped: list[str] = []  # links outside the roots, folders too deep (discovery names them)
    for root in roots:
        files = list(  # raises NotFoundError for a missing root
            walk_skill_files(root, within=roots, follow_outside=follow_outside, on_skip=skipped.append)
        )
        if not files:
            empty.append(os.fspath(root))
        for path, real in files:
            if real not in seen:
                seen.add(real)
                report.files.append(path)
    if not report.files:
        where = ", ".join(os.fspath(r) for r in roots)
        also = f" ({skipped[0]})" if skipped else ""
        raise NotFoundError(f"no SKILL.md under {where}{also}; pass the folder that holds your skills")
    for line in skipped:
        report.findings.append(Finding("warning", "walk-skipped", line, None, None))
    for root in empty:
        report.findings.append(Finding("warning", "empty-root", f"no SKILL.md under {root}", root, None))

    checked: list[_Checked] = []
    for findings, results in fan_out(_check_files, report.files, processes_for(len(report.files))):
        report.findings.extend(findings)
        checked.extend(results)

    first: dict[str, _Checked] = {}
    for c in checked:
        if c.name is None:
            continue
        if c.name in first:
            other = first[c.name]
            report.findings.append(
                Finding(
                    "error",
                    "duplicate-name",
                    f"name {c.name!r} is also used by {_display(other.path)}:{other.name_line}; "
                    "only the first is loaded — rename one",
                    c.path,
                    c.name_line,
                )
            )
        else:
            first[c.name] = c

    listed = [(c.name, c.description) for c in first.values() if c.invocable and c.description]
    report.listed = len(listed)
    report.listing_chars = len(listing_text((n, d) for n, d in listed if n is not None and d is not None))
    if report.listing_chars > budget:
        report.findings.append(
            Finding(
                "warning",
                "listing-budget",
                f"the catalog listing (names + descriptions of {report.listed} skills) is "
                f"{report.listing_chars:,} characters, over the budget of {budget:,}; an agent may be shown "
                "a truncated list — shorten descriptions or split the catalog",
            )
        )
    order = {p: i for i, p in enumerate(report.files)}
    report.findings.sort(
        key=lambda f: (f.path is None, order.get(f.path or "", -1), f.line or 0, f.severity != "error")
    )
    return report


# ------------------------------------------------------------------------------------------ output


def _display(path: str) -> str:
    """``path`` relative to the working folder when it lies under it, else as is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


def format_text(report: LintReport) -> str:
    """Findings grouped by file, then a summary line."""
    lines: list[str] = []
    current: object = object()
    for f in report.findings:
        if f.path != current:
            current = f.path
            lines.append(_display(f.path) if f.path is not None else "(catalog)")
        where = str(f.line) if f.line is not None else "-"
        lines.append(f"  {where:>4}  {f.severity:<7}  {f.message}  [{f.code}]")
    n_err, n_warn = len(report.errors), len(report.warnings)
    with_findings = len({f.path for f in report.findings if f.path is not None})
    checked = f"{len(report.files)} SKILL.md checked"
    if not report.findings:
        lines.append(f"{checked}: no problems")
    else:
        if lines:
            lines.append("")
        lines.append(
            f"{n_err} error{'s' * (n_err != 1)}, {n_warn} warning{'s' * (n_warn != 1)} "
            f"in {with_findings} file{'s' * (with_findings != 1)} ({checked})"
        )
    return "\n".join(lines)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(report: LintReport) -> str:
    """GitHub Actions workflow commands: ``::error file=PATH,line=N,title=...::message`` per finding."""
    out: list[str] = []
    for f in report.findings:
        props: list[str] = []
        if f.path is not None:
            props.append(f"file={_escape_property(_display(f.path))}")
            if f.line is not None:
                props.append(f"line={f.line}")
        props.append(f"title={_escape_property(f'skillreach lint {f.code}')}")
        out.append(f"::{f.severity} {','.join(props)}::{_escape_data(f.message)}")
    n_err, n_warn = len(report.errors), len(report.warnings)
    out.append(f"{n_err} error(s), {n_warn} warning(s) in {len(report.files)} SKILL.md")
    return "\n".join(out)
