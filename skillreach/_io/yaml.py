"""One YAML reader with limits, for every YAML a user hands us (SKILL.md frontmatter, query sets,
config files).

PyYAML's ``safe_load`` is safe from code execution but not from work: a "billion laughs" document (an
alias of an alias of …, nine deep) expands to a billion nodes when constructed, and a CI job that lints
a pull request's SKILL.md spins until it is killed. This reader composes the document first and
refuses, with one line naming the file and line:

- aliases (``*name``), and so merge keys (``<< : *base``): the value has to be written out;
- more than :data:`MAX_NODES` nodes, or more than :data:`MAX_DEPTH` levels of nesting;
- a key given twice in one mapping (YAML 1.2 forbids it; the later value would silently win);
- characters YAML cannot hold (a NUL byte, other control characters).

Text larger than the caller's byte limit is refused before parsing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from skillreach._io.json import MAX_INT_DIGITS, check_values
from skillreach.errors import InputError

__all__ = ["MAX_DEPTH", "MAX_NODES", "SimpleDoc", "YamlProblem", "load_limited", "load_simple"]

MAX_NODES = 100_000
"""Nodes (scalars, sequences, mappings) one document may hold."""
MAX_DEPTH = 64
"""Levels of nesting one document may hold."""


class YamlProblem(InputError):
    """A YAML document we refuse; ``line`` is the 1-based line of the file."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line = line
        self.what = what


class _LimitedLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses aliases, duplicate keys and documents past the node/depth limits."""

    def __init__(self, stream: str, max_nodes: int, line_offset: int) -> None:
        super().__init__(stream)
        self.line_offset = line_offset
        self._max_nodes = max_nodes
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"YAML aliases are not allowed (*{event.anchor}; a merge key '<<' needs one too); "
                "write the value out",
                event.start_mark,
            )
        self._nodes += 1
        if self._nodes > self._max_nodes:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"more than {self._max_nodes:,} YAML nodes; this file is too large",
                self.peek_event().start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: the base constructor reports it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first on line "
                f"{first.start_mark.line + 1 + getattr(loader, 'line_offset', 0)}); keep one",
                key_node.start_mark,
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_LimitedLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)

_CLoader: Any = getattr(yaml, "CSafeLoader", None)
if _CLoader is not None:

    class _FastLoader(_CLoader):
        """libyaml's parser and composer (C; ~10× the pure-Python scanner), PyYAML's safe constructor."""

        line_offset = 0

    _FastLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


class _Fallback(Exception):
    """The fast path declines: the pure-Python loader reads the text again and says what is wrong."""


def _load_fast(text: str, max_nodes: int, line_offset: int) -> tuple[Any, yaml.Node | None]:
    """``(data, root node)`` through libyaml, the same limits checked on the composed tree (a node
    reached twice is an alias; libyaml itself refuses nesting past 1,000 levels); :class:`_Fallback`
    for anything else to report, so every message comes from one place (:class:`_LimitedLoader`)."""
    if _CLoader is None or yaml.reader.Reader.NON_PRINTABLE.search(text):
        raise _Fallback
    loader = _FastLoader(text)
    loader.line_offset = line_offset
    try:
        node = loader.get_single_node()
        if node is not None:
            seen: set[int] = set()
            stack: list[tuple[Any, int]] = [(node, 1)]
            while stack:
                item, depth = stack.pop()
                if id(item) in seen or depth > MAX_DEPTH or len(seen) >= max_nodes:
                    raise _Fallback  # an alias, too deep, too many nodes
                seen.add(id(item))
                if isinstance(item, yaml.SequenceNode):
                    stack.extend((child, depth + 1) for child in item.value)
                elif isinstance(item, yaml.MappingNode):
                    for key, value in item.value:
                        stack.append((key, depth + 1))
                        stack.append((value, depth + 1))
        data = loader.construct_document(node) if node is not None else None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise _Fallback from exc
    finally:
        loader.dispose()
    if check_values(data) == "int":
        raise _Fallback
    return data, node


def load_limited(
    text: str, *, max_bytes: int, max_nodes: int = MAX_NODES, line_offset: int = 0
) -> tuple[Any, yaml.Node | None]:
    """Parse one YAML document within limits: ``(data, root node)``; raises :class:`YamlProblem`.

    ``line_offset`` is the number of file lines before the text (a frontmatter block starts after its
    ``---``), so every line in a message is a line of the file. The root node is returned so callers
    can name the line of a key or an item (its marks are relative to ``text``).
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise YamlProblem(
            line_offset + 1,
            f"{size:,} bytes of YAML, more than the {max_bytes:,} allowed; is this the right file?",
        )
    try:
        return _load_fast(text, max_nodes, line_offset)
    except _Fallback:
        pass
    try:
        loader = _LimitedLoader(text, max_nodes, line_offset)
    except yaml.reader.ReaderError as exc:  # raised while the reader checks the text
        raise YamlProblem(line_offset + _reader_line(text, exc), _reader_what(exc)) from exc
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.reader.ReaderError as exc:
        raise YamlProblem(line_offset + _reader_line(text, exc), _reader_what(exc)) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise YamlProblem(line_offset + (mark.line + 1 if mark is not None else 1), what) from exc
    except yaml.YAMLError as exc:
        raise YamlProblem(line_offset + 1, str(exc).splitlines()[0] if str(exc) else "invalid YAML") from exc
    except RecursionError as exc:
        raise YamlProblem(line_offset + 1, f"nested too deeply (more than {MAX_DEPTH} levels)") from exc
    except ValueError as exc:  # int() of a literal of thousands of digits
        raise YamlProblem(line_offset + _big_int_line(text), _BIG_WHAT) from exc
    finally:
        loader.dispose()
    if check_values(data) == "int":  # whatever sys.set_int_max_str_digits allows
        raise YamlProblem(line_offset + _big_int_line(text), _BIG_WHAT)
    return data, node


_BIG_WHAT = f"an integer of more than {MAX_INT_DIGITS} digits; is this the right file?"
_BIG_INT = re.compile(rf"[-+]?\d[\d_]{{{MAX_INT_DIGITS},}}")


def _big_int_line(text: str) -> int:
    m = _BIG_INT.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def _reader_line(text: str, exc: yaml.reader.ReaderError) -> int:
    return text.count("\n", 0, max(0, exc.position)) + 1


def _reader_what(exc: yaml.reader.ReaderError) -> str:
    char = exc.character
    code = ord(char) if isinstance(char, str) else int(char)
    if code == 0:
        return "a NUL byte (\\0) is not allowed in YAML; remove it"
    return f"control character U+{code:04X} is not allowed in YAML; remove it"


# ------------------------------------------------------------------------------ the simple fast path


@dataclass(frozen=True)
class SimpleDoc:
    """What :func:`load_simple` read: the mapping, the 0-based line of each top-level key in the
    text, and the style of each top-level scalar value (``plain``; lists and mappings have none)."""

    data: dict[str, Any]
    key_lines: dict[str, int]
    styles: dict[str, str]


_SIMPLE_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_-]{0,127}):(?: +(.*))?")
_SIMPLE_SUB = re.compile(r"( +)([A-Za-z][A-Za-z0-9_-]{0,127}): +(.+)")
_SIMPLE_ITEM = re.compile(r"( *)- +(.+)")
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
"""What a one-line plain scalar may not start with here (YAML's indicators)."""
_NOT_SIMPLE = re.compile("[\t\r\x85\u2028\u2029\ufeff#]")
"""Anywhere in the text: tabs, the other line breaks YAML knows, a BOM, and ``#`` (a comment, or a
character that may start one): such text goes through libyaml."""
_RESOLVERS: dict[Any, list[tuple[str, re.Pattern[str]]]] = yaml.resolver.Resolver.yaml_implicit_resolvers
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "null", "timestamp"))


class _NotSimple(Exception):
    pass


def _plain(value: str) -> Any:
    """A one-line plain scalar as PyYAML's ``SafeLoader`` resolves and constructs it."""
    # an indicator first, ': ' or a final ':' (a mapping), ' #' (a comment), a trailing space
    # (stripped by YAML; simpler to let libyaml do it)
    if value[0] in _INDICATORS or ": " in value or " #" in value or value[-1] in ": ":
        raise _NotSimple
    for tag, regexp in _RESOLVERS.get(value[0], ()):
        if regexp.match(value):
            if tag not in _SCALAR_TAGS:
                raise _NotSimple
            try:
                return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, value))
            except ValueError as exc:  # an integer of thousands of digits: the full reader says so
                raise _NotSimple from exc
    return value


_STRING_KEYS: set[str] = set()
"""Keys already seen to resolve to strings (``name``, ``description`` …), at most 4,096."""


def _key(name: str) -> str:
    if name in _STRING_KEYS:
        return name
    if any(regexp.match(name) for _tag, regexp in _RESOLVERS.get(name[0], ())):
        raise _NotSimple  # yes, on, null …: a key that is not a string
    if len(_STRING_KEYS) < 4096:
        _STRING_KEYS.add(name)
    return name


def load_simple(text: str, *, max_nodes: int = MAX_NODES) -> SimpleDoc | None:
    """The common frontmatter read without a YAML parser, or ``None`` for anything else.

    "Simple" is a mapping of one-line ``key: value`` entries whose values are plain scalars, a
    mapping of such entries one level down, or a list of plain scalars (``- item``); no quotes, no
    block scalars, no comments, no flow collections, no continuation lines, no repeated key. That is
    what most SKILL.md files hold, and it is read ~10× faster than through libyaml and PyYAML's
    constructor. Scalars are resolved and constructed by PyYAML's own resolver and ``SafeConstructor``
    (``true``, ``1.0``, ``2026-01-02``, ``~``), so the result equals :func:`yaml.safe_load`'s
    (``tests/test_yaml_simple.py`` checks it on generated documents). Anything else returns ``None``
    and goes through :func:`load_limited`, which also words every error.
    """
    if _NOT_SIMPLE.search(text) or yaml.reader.Reader.NON_PRINTABLE.search(text):
        return None
    lines = text.split("\n")
    data: dict[str, Any] = {}
    key_lines: dict[str, int] = {}
    nodes = 1
    i, n = 0, len(lines)
    try:
        while i < n:
            line = lines[i]
            if not line.strip(" "):
                i += 1
                continue
            m = _SIMPLE_KEY.fullmatch(line)
            if m is None:
                return None
            key = _key(m.group(1))
            if key in data:
                return None  # a repeated key: the full reader names both lines
            key_lines[key] = i
            raw = m.group(2)
            i += 1
            if raw:
                data[key] = _plain(raw)
                nodes += 2
                continue
            value, i, used = _block(lines, i)
            data[key] = value
            nodes += 1 + used
        if not data or nodes > max_nodes:
            return None
    except _NotSimple:
        return None
    styles = {k: "plain" for k, v in data.items() if not isinstance(v, list | dict)}
    return SimpleDoc(data, key_lines, styles)


def _block(lines: list[str], i: int) -> tuple[Any, int, int]:
    """The value of a ``key:`` with nothing after it, from line ``i``: ``(value, next line, nodes)``.

    A list of ``- plain`` at one indentation (0 allowed), a mapping of ``sub: plain`` at one
    indentation > 0, or ``None`` when the next entry is at the left margin (or there is none)."""
    n = len(lines)
    j = i
    while j < n and not lines[j].strip(" "):
        j += 1
    if j == n:
        return None, j, 1
    first = lines[j]
    item = _SIMPLE_ITEM.fullmatch(first)
    if item is not None:
        indent = item.group(1)
        items: list[Any] = []
        while j < n:
            line = lines[j]
            if not line.strip(" "):
                j += 1
                continue
            m = _SIMPLE_ITEM.fullmatch(line)
            if m is not None and m.group(1) == indent:
                items.append(_plain(m.group(2)))
                j += 1
                continue
            if line[0] != " " and not line.startswith("-"):
                break  # the next top-level key
            raise _NotSimple
        return items, j, 1 + len(items)
    if first[0] != " ":
        return None, i, 1  # the next top-level key: this one's value is null
    sub = _SIMPLE_SUB.fullmatch(first)
    if sub is None:
        raise _NotSimple
    indent = sub.group(1)
    mapping: dict[str, Any] = {}
    while j < n:
        line = lines[j]
        if not line.strip(" "):
            j += 1
            continue
        m = _SIMPLE_SUB.fullmatch(line)
        if m is not None and m.group(1) == indent:
            name = _key(m.group(2))
            if name in mapping:
                raise _NotSimple
            mapping[name] = _plain(m.group(3))
            j += 1
            continue
        if line[0] != " ":
            break
        raise _NotSimple
    return mapping, j, 1 + 2 * len(mapping)
