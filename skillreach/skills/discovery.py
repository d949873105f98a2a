"""Find and parse ``SKILL.md`` files.

Discovery walks every root itself, iteratively (``glob('**')`` silently skips hidden folders such as
``.claude/skills``, ``.agents/skills`` and ``.github/skills``; the recursive ``os.walk`` died of a
``RecursionError`` 1,000 levels down), follows symbolic links that stay inside the roots given (one
leading outside is named and skipped, unless ``--follow-outside``), guards against cycles with the set
of real paths already visited, and is bounded in depth and in folders. Every ``SKILL.md`` at any depth is a
candidate, nested skills inside other skills included. Folders that never hold skills (``.git``,
``node_modules``, ``.venv``, caches; see :data:`SKIPPED_DIRS`) are not entered.

Parsing survives real files: a UTF-8 byte-order mark, CRLF line endings, quoted, folded (``>-``) and
literal (``|-``) descriptions (PyYAML ``safe_load`` semantics, so a folded block whose last lines are
more indented keeps its ``"\\n  "``), extra keys (kept in :attr:`Skill.frontmatter`, made JSON-safe:
a YAML date becomes its ISO string), non-ASCII. A file that cannot be parsed raises
:class:`~skillreach.errors.SkillParseError` whose text is ``path:line: what is wrong`` (the line of the
file, not of the YAML block). Discovery collects these as problems and goes on with the other files; a
file with no frontmatter at all (a nested phase document called ``SKILL.md``) is such a problem, not a
skill.

Duplicate names: with ``precedence="first"`` (the default) the skill found first wins, roots taken in
the order given and, within a root, in walk order (sub-folders by name, a folder before its
sub-folders); with ``"last"`` the skill found last wins, so later roots override earlier ones (as a
project folder overrides a personal one). The losers are reported in :attr:`Discovery.shadowed`.
"""

from __future__ import annotations

import base64
import datetime
import logging
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from skillreach._io.yaml import YamlProblem, load_limited, load_simple
from skillreach.errors import InputError, NoFrontmatterError, NotFoundError, SkillParseError
from skillreach.models import Skill

__all__ = [
    "NAME_MAX",
    "NAME_PATTERN",
    "SKILL_FILE",
    "SKIPPED_DIRS",
    "Discovery",
    "Frontmatter",
    "NoFrontmatterError",
    "Precedence",
    "Shadowed",
    "UnsafeSkill",
    "discover",
    "find_skill_files",
    "load_skills",
    "parse_skill",
    "read_frontmatter",
    "text_problem",
    "walk_skill_files",
]

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
"""A skill's name: lowercase kebab-case (the Agent Skills spec). Names become file names (records,
uplift reports) and CSV cells, so a run refuses any other (``../../x``, ``x|y``, ``(no skill)``)."""
NAME_MAX = 64
_SURROGATE = re.compile("[\ud800-\udfff]")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_EITHER = re.compile("[\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def text_problem(text: str, *, bidi: bool = True) -> str | None:
    """What makes ``text`` unfit to pass on, or ``None``: a lone surrogate (no UTF-8 file, database row
    or API request can carry it) or, with ``bidi``, a bidirectional control character (U+202E and the
    like: the text displays in another order than it reads)."""
    if _EITHER.search(text) is None:  # nearly every text: one scan, not two
        return None
    m = _SURROGATE.search(text)
    if m is not None:
        return (
            f"holds a lone surrogate (U+{ord(m.group()):04X}) at character {m.start() + 1:,}, which no "
            "UTF-8 file or API request can carry; remove it"
        )
    m = _BIDI.search(text) if bidi else None
    if m is not None:
        return (
            f"holds the bidirectional control character U+{ord(m.group()):04X} at character "
            f"{m.start() + 1:,}, which makes the text display in another order than it reads; remove it"
        )
    return None


class UnsafeSkill(SkillParseError):
    """A SKILL.md whose name ``lint`` rejects, or whose text holds a lone surrogate: a run refuses it."""


SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".skillreach",
    }
)
"""Folder names discovery never enters (version control, dependencies, caches)."""

Precedence = Literal["first", "last"]

MAX_SKILL_FILE_BYTES = 4 * 2**20
"""A SKILL.md larger than this is refused (it is a short document an agent loads whole)."""
MAX_FRONTMATTER_BYTES = 64 * 2**10
"""The frontmatter (name, description and a few keys) may not exceed this many bytes."""
MAX_FRONTMATTER_NODES = 5_000
"""… nor this many YAML nodes. Aliases are refused outright (see :mod:`skillreach._io.yaml`)."""


# ------------------------------------------------------------------------------------------ parsing


@dataclass(frozen=True)
class Frontmatter:
    """The raw parts of a SKILL.md: the frontmatter mapping, where each key sits, and the body."""

    path: str
    data: dict[str, Any]
    body: str
    line: int
    """Line of the opening ``---`` (1-based)."""
    key_lines: dict[str, int] = field(default_factory=dict)
    """File line (1-based) of each top-level key."""
    styles: dict[str, str] = field(default_factory=dict)
    """YAML scalar style of each top-level scalar value: ``plain``, ``'``, ``"``, ``|`` or ``>``."""

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


def _decode(path: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SkillParseError(
            path, line, f"not valid UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _json_safe(value: Any) -> Any:
    """YAML values made JSON-friendly: dates as ISO strings, sets as sorted lists, keys as strings."""
    if type(value) is str:  # most values: said first
        return value
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_json_safe(v) for v in value), key=str)
    if isinstance(value, datetime.date):  # datetime.datetime included
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
)
# O_NONBLOCK: opening a FIFO returns at once (fstat then refuses it) instead of waiting for a writer


def _read_bounded(spath: str) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_SKILL_FILE_BYTES`: one open, one fstat, reads
    (no separate stat of the path; a FIFO, device or socket is refused without being read)."""
    try:
        fd = os.open(spath, _OPEN_FLAGS)
    except OSError as exc:
        raise SkillParseError(spath, 1, f"cannot read the file ({exc.strerror or exc})") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SkillParseError(
                spath, 1, "not a regular file (a FIFO, device or socket); pass a SKILL.md file"
            )
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_SKILL_FILE_BYTES:
            chunk = os.read(fd, MAX_SKILL_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SkillParseError(spath, 1, f"cannot read the file ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if size > MAX_SKILL_FILE_BYTES:
        raise SkillParseError(
            spath, 1, f"larger than {MAX_SKILL_FILE_BYTES // 2**20} MiB; a SKILL.md is a short document"
        )
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_CLOSING = re.compile(r"^---[^\S\n]*$", re.MULTILINE)
"""The line that closes the frontmatter: ``---`` and nothing but white space (what ``rstrip`` drops)."""


def _split(spath: str, text: str) -> tuple[int, str, str]:
    """``(index of the opening line, the YAML between the markers, the body after them)``.

    The common file (``---`` on its first line) is cut with one search, not split into lines: a
    catalog's bodies are most of its bytes. Any other start takes :func:`_split_lines`, the reference
    (``tests/test_skills.py`` checks both agree)."""
    if not text.startswith("---\n"):
        return _split_lines(spath, text)
    m = _CLOSING.search(text, 4)
    if m is None:
        raise SkillParseError(
            spath, 1, "the frontmatter opened here with '---' is never closed by a '---' line"
        )
    yaml_text = text[4 : max(4, m.start() - 1)]
    return 0, yaml_text, text[m.end() + 1 :]


def _split_lines(spath: str, text: str) -> tuple[int, str, str]:
    lines = text.split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    if start == len(lines) or lines[start].rstrip() != "---":
        raise NoFrontmatterError(
            spath,
            start + 1 if start < len(lines) else 1,
            "no YAML frontmatter (a SKILL.md starts with a '---' line, then name: and description:); "
            "not a skill",
        )
    end = next((i for i in range(start + 1, len(lines)) if lines[i].rstrip() == "---"), None)
    if end is None:
        raise SkillParseError(
            spath, start + 1, "the frontmatter opened here with '---' is never closed by a '---' line"
        )
    return start, "\n".join(lines[start + 1 : end]), "\n".join(lines[end + 1 :])


_TEXT_KEYS = ("name", "description")
"""Frontmatter keys that must be text: a YAML value resolving to a date or timestamp is refused, never
turned into its ISO string (``name: 2024-01-01`` is not the name ``2024-01-01`` to every YAML reader)."""


def _no_dates(spath: str, data: dict[Any, Any], key_lines: dict[str, int]) -> None:
    for key in _TEXT_KEYS:
        value = data.get(key)
        if isinstance(value, datetime.date):  # datetime.datetime included
            kind = "timestamp" if isinstance(value, datetime.datetime) else "date"
            raise SkillParseError(
                spath,
                key_lines.get(key, 1),
                f"{key} is a YAML {kind} ({value.isoformat()}), not a string; quote it: {key}: '…'",
            )


def read_frontmatter(path: str | os.PathLike[str]) -> Frontmatter:
    """Split a SKILL.md into its YAML frontmatter (parsed) and body. Raises :class:`SkillParseError`.

    The frontmatter is the block between a first line ``---`` (blank lines before it are allowed) and
    the next line that is ``---``. YAML errors carry the file line of the YAML error mark.
    """
    spath = os.path.abspath(os.fspath(path))
    raw = _read_bounded(spath)
    text = _decode(spath, raw)
    start, yaml_text, body = _split(spath, text)
    offset = start + 1  # 0-based YAML line 0 is file line offset + 1
    # within the byte limit whatever the characters (4 bytes at most each); larger: the full reader
    short = len(yaml_text) <= MAX_FRONTMATTER_BYTES // 4
    simple = load_simple(yaml_text, max_nodes=MAX_FRONTMATTER_NODES) if short else None
    if simple is not None:  # the common frontmatter, read without a YAML parser (same result)
        key_lines = {k: offset + line + 1 for k, line in simple.key_lines.items()}
        _no_dates(spath, simple.data, key_lines)
        return Frontmatter(
            path=spath,
            data=_json_safe(simple.data),
            body=body,
            line=start + 1,
            key_lines=key_lines,
            styles=simple.styles,
        )
    try:
        data, node = load_limited(
            yaml_text, max_bytes=MAX_FRONTMATTER_BYTES, max_nodes=MAX_FRONTMATTER_NODES, line_offset=offset
        )
    except YamlProblem as exc:
        raise SkillParseError(spath, exc.line, f"invalid YAML in the frontmatter: {exc.what}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SkillParseError(
            spath, offset + 1, f"the frontmatter is a YAML {type(data).__name__}, not a mapping of keys"
        )
    key_lines = {}
    styles: dict[str, str] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            key_lines.setdefault(key, offset + key_node.start_mark.line + 1)
            if isinstance(value_node, yaml.ScalarNode):
                styles.setdefault(key, value_node.style or "plain")
    _no_dates(spath, data, key_lines)
    return Frontmatter(
        path=spath,
        data=_json_safe(data),
        body=body,
        line=start + 1,
        key_lines=key_lines,
        styles=styles,
    )


def _require_text(fm: Frontmatter, key: str) -> str | None:
    value = fm.data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SkillParseError(
            fm.path, fm.line_of(key), f"{key} must be a string, not a YAML {type(value).__name__}"
        )
    return value


def parse_skill(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> Skill:
    """Parse one SKILL.md into a :class:`Skill`. Raises :class:`SkillParseError` (``path:line: what``).

    ``name`` falls back to the folder name when the key is absent (as Claude Code does; ``lint`` still
    reports it). A missing or empty ``description`` is an error: a skill without one cannot be routed.
    ``frontmatter`` keeps the whole mapping, ``name`` and ``description`` included.
    """
    fm = read_frontmatter(path)
    folder = os.path.dirname(fm.path)
    name = _require_text(fm, "name")
    if name is None or not name.strip():
        if "name" in fm.data:
            raise SkillParseError(fm.path, fm.line_of("name"), "name is empty")
        name = os.path.basename(folder)
    description = _require_text(fm, "description")
    if description is None or not description.strip():
        where = fm.line_of("description") if "description" in fm.data else fm.line
        raise SkillParseError(
            fm.path, where, "missing description (the text an agent routes on); add description: ..."
        )
    name = name.strip()
    if len(name) > NAME_MAX or not NAME_PATTERN.fullmatch(name):
        raise UnsafeSkill(
            fm.path,
            fm.line_of("name") if "name" in fm.data else fm.line,
            f"name {name!r} is not lowercase kebab-case of at most {NAME_MAX} characters; rename the "
            "skill (skillreach lint says what is wrong)",
        )
    for key, text in (("description", description), ("body", fm.body)):
        problem = text_problem(text, bidi=False)
        if problem is not None:
            raise UnsafeSkill(fm.path, fm.line_of(key) if key in fm.data else fm.line, f"{key} {problem}")
    return Skill(
        name=name,
        description=description,
        body=fm.body,
        path=fm.path,
        folder=folder,
        root=os.path.abspath(os.fspath(root)) if root is not None else folder,
        frontmatter=fm.data,
    )


# ---------------------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class Shadowed:
    """A skill hidden by another of the same name (the ``winner`` is the one that is loaded)."""

    skill: Skill
    winner: Skill

    def __str__(self) -> str:
        return f"{self.skill.path}: skill {self.skill.name!r} is shadowed by {self.winner.path}"


@dataclass
class Discovery:
    """What :func:`discover` found: the loaded skills, the files it could not use, and duplicates."""

    skills: list[Skill] = field(default_factory=list)
    problems: list[SkillParseError] = field(default_factory=list)
    shadowed: list[Shadowed] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """Every SKILL.md looked at (absolute, as reached), in discovery order."""
    parsed: list[Skill] = field(default_factory=list)
    """Every skill that parsed, duplicates included, in discovery order."""


def _check_root(root: str | os.PathLike[str]) -> str:
    spath = os.path.abspath(os.fspath(root))
    if not os.path.exists(spath):
        raise NotFoundError(f"{os.fspath(root)}: no such folder; pass a folder that holds skills")
    if os.path.isfile(spath) and os.path.basename(spath) != SKILL_FILE:
        raise InputError(f"{os.fspath(root)}: not a folder or a {SKILL_FILE} file")
    return spath


MAX_WALK_DEPTH = 64
"""Folder levels below a root that discovery enters; deeper folders are named once and skipped."""
MAX_WALK_FOLDERS = 500_000
"""Folders one discovery may enter; more is one error naming the root (is it the right folder?)."""


def _is_inside(real: str, roots: Sequence[str]) -> bool:
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def find_skill_files(
    root: str | os.PathLike[str],
    *,
    within: Sequence[str | os.PathLike[str]] | None = None,
    follow_outside: bool = False,
    on_skip: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Every SKILL.md under ``root``: the paths of :func:`walk_skill_files`."""
    for path, _real in walk_skill_files(root, within=within, follow_outside=follow_outside, on_skip=on_skip):
        yield path


def walk_skill_files(
    root: str | os.PathLike[str],
    *,
    within: Sequence[str | os.PathLike[str]] | None = None,
    follow_outside: bool = False,
    on_skip: Callable[[str], None] | None = None,
) -> Iterator[tuple[str, str]]:
    """``(path as reached, real path)`` of every SKILL.md under ``root`` (absolute paths as reached),
    hidden folders and symlinks included. The real path is known from the walk (a folder's real path
    joined with the name; ``realpath`` only for links), so callers need no ``lstat`` per component.

    Sorted within each folder, a folder before its sub-folders; each real folder is entered once
    (cycle guard), and a file reached twice through links is yielded once. The walk is iterative (no
    recursion) and bounded: folders more than :data:`MAX_WALK_DEPTH` levels down are named once (to
    ``on_skip``, default a warning) and not entered, and more than :data:`MAX_WALK_FOLDERS` folders
    is an :class:`InputError`.

    A symbolic link (to a folder or a SKILL.md) whose target lies outside ``within`` (default: the
    root itself; :func:`discover` passes every root it was given) is named once and skipped, unless
    ``follow_outside``: a pull request adding ``skills/x -> /`` must not make CI walk the machine.
    """
    spath = _check_root(root)
    skip = on_skip or log.warning
    if os.path.isfile(spath):
        yield spath, os.path.realpath(spath)
        return
    allowed = [os.path.realpath(os.fspath(r)) for r in (within if within is not None else [spath])]
    root_real = os.path.realpath(spath)
    if root_real not in allowed:
        allowed.append(root_real)
    visited: set[str] = set()
    seen_files: set[str] = set()
    deep_named = False
    # (path as reached, its real path, depth below the root); popped last-in first-out
    stack: list[tuple[str, str, int]] = [(spath, root_real, 0)]
    while stack:
        dirpath, real, depth = stack.pop()
        if real in visited:
            continue
        visited.add(real)
        if len(visited) > MAX_WALK_FOLDERS:
            raise InputError(
                f"{os.fspath(root)}: more than {MAX_WALK_FOLDERS:,} folders to look through; "
                "pass the folder that holds your skills"
            )
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            skip(f"{dirpath}: cannot read folder ({exc.strerror})")
            continue
        subdirs: list[tuple[str, str, int]] = []
        for entry in entries:
            name = entry.name
            try:
                is_link = entry.is_symlink()
                if name == SKILL_FILE:
                    if not entry.is_file():  # a FIFO, a folder, a dangling link: never opened
                        continue
                    file_real = os.path.realpath(entry.path) if is_link else os.path.join(real, name)
                    if is_link and not follow_outside and not _is_inside(file_real, allowed):
                        skip(
                            f"{entry.path}: a link to {file_real}, outside the folders given; skipped "
                            "(--follow-outside follows it)"
                        )
                        continue
                    if file_real not in seen_files:
                        seen_files.add(file_real)
                        yield entry.path, file_real
                    continue
                if name in SKIPPED_DIRS or not entry.is_dir():
                    continue
            except OSError:
                continue
            sub_real = os.path.realpath(entry.path) if is_link else os.path.join(real, name)
            if sub_real in visited:
                continue
            if is_link and not follow_outside and not _is_inside(sub_real, allowed):
                skip(
                    f"{entry.path}: a link to {sub_real}, outside the folders given; skipped "
                    "(--follow-outside follows it)"
                )
                continue
            if depth + 1 > MAX_WALK_DEPTH:
                if not deep_named:
                    deep_named = True
                    skip(
                        f"{entry.path}: more than {MAX_WALK_DEPTH} folder levels below {os.fspath(root)}; "
                        "deeper folders are not looked at"
                    )
                continue
            subdirs.append((entry.path, sub_real, depth + 1))
        stack.extend(reversed(subdirs))


def discover(
    roots: Iterable[str | os.PathLike[str]],
    *,
    precedence: Precedence = "first",
    follow_outside: bool = False,
    on_skip: Callable[[str], None] | None = None,
) -> Discovery:
    """Find and parse every SKILL.md under ``roots``; never stops at a bad file.

    Raises :class:`NotFoundError` for a root that does not exist. The same file reached through two
    roots (or two links) is read once.
    """
    if precedence not in ("first", "last"):
        raise InputError(f"precedence must be 'first' or 'last', not {precedence!r}")
    root_list = [_check_root(r) for r in roots]
    found = Discovery()
    seen_real: set[str] = set()
    for root in root_list:
        root_dir = root if os.path.isdir(root) else os.path.dirname(root)
        for path, real in walk_skill_files(
            root, within=root_list, follow_outside=follow_outside, on_skip=on_skip
        ):
            if real in seen_real:
                continue
            seen_real.add(real)
            found.files.append(path)
            try:
                found.parsed.append(parse_skill(path, root=root_dir))
            except SkillParseError as exc:
                found.problems.append(exc)

    order = found.parsed if precedence == "first" else list(reversed(found.parsed))
    winners: dict[str, Skill] = {}
    for skill in order:
        if skill.name in winners:
            found.shadowed.append(Shadowed(skill=skill, winner=winners[skill.name]))
        else:
            winners[skill.name] = skill
    keep = {id(s) for s in winners.values()}
    found.skills = [s for s in found.parsed if id(s) in keep]
    return found


def load_skills(
    roots: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    precedence: Precedence = "first",
    on_problem: Callable[[str], None] | None = None,
    follow_outside: bool = False,
) -> list[Skill]:
    """The skills a run uses. Problems and shadowed duplicates are reported, not raised.

    Each is passed as one line to ``on_problem`` (default: a warning on the ``skillreach.skills.discovery``
    logger). Raises :class:`InputError` when no skill was found.
    """
    if isinstance(roots, str | os.PathLike):
        roots = [roots]
    report = on_problem or log.warning
    found = discover(roots, precedence=precedence, follow_outside=follow_outside, on_skip=report)
    for problem in found.problems:
        if isinstance(problem, UnsafeSkill):  # a name that becomes a path or a cell: never run with it
            raise problem
        report(str(problem))
    for dup in found.shadowed:
        report(str(dup))
    if not found.skills:
        where = ", ".join(os.fspath(r) for r in roots) or "(no folder given)"
        raise InputError(f"no SKILL.md under {where}; pass --skills DIR")
    return found.skills
