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
from typing import Any

import yaml

from skillreach._io.json import MAX_INT_DIGITS, check_values
from skillreach.errors import InputError

__all__ = ["MAX_DEPTH", "MAX_NODES", "YamlProblem", "load_limited"]

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
