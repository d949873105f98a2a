"""The simple frontmatter reader (``skillreach._io.yaml.load_simple``) against PyYAML itself.

Whatever ``load_simple`` accepts must read exactly as ``yaml.safe_load`` (pure Python) and libyaml's
``CSafeLoader`` read it, with each key on its line; what it declines goes through the full reader.
Documents are generated from fragments chosen to sit on the edges of YAML's plain scalars (indicators,
``: ``, `` #``, resolvable words and numbers, timestamps, sexagesimal integers, non-ASCII, trailing
spaces, indentation) and from arbitrary text.
"""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillreach._io.yaml import load_simple

_WORDS = [
    "x",
    "Use when",
    "a, b",
    "x: y",
    "x:y",
    "http://h/p?q=1",
    "x #c",
    "x#c",
    "#c",
    "- x",
    "-x",
    "? x",
    ":x",
    "[a]",
    "{a}",
    "a]",
    "a}",
    "'q'",
    '"q"',
    "q'",
    "!t",
    "&a",
    "*a",
    "|",
    ">",
    "%x",
    "@x",
    "`x",
    "yes",
    "No",
    "on",
    "OFF",
    "true",
    "null",
    "~",
    "",
    " ",
    "1",
    "-1",
    "+1",
    "0o17",
    "0x1F",
    "1_000",
    "190:20:30",
    "1.0",
    ".5",
    "1e3",
    ".inf",
    ".NaN",
    "2026-01-02",
    "2001-12-14t21:59:43.10-05:00",
    "1" * 30,
    "é ünï",
    "日本",
    "a\u00a0b",
    "x ",
    "x\t",
    "<<",
    "=",
    "...",
    "---",
    "a  b",
]
_KEYS = ["name", "description", "allowed-tools", "metadata", "on", "yes", "null", "k1", "a_b", "1x", "x"]
_INDENTS = ["", " ", "  ", "   ", "    "]


@st.composite
def documents(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        key = draw(st.sampled_from(_KEYS))
        kind = draw(st.sampled_from(["scalar", "scalar", "list", "map", "null", "blank", "raw"]))
        if kind == "scalar":
            lines.append(f"{key}:{draw(st.sampled_from([' ', '  ', '']))}{draw(st.sampled_from(_WORDS))}")
        elif kind == "list":
            lines.append(f"{key}:")
            indent = draw(st.sampled_from(_INDENTS))
            for _ in range(draw(st.integers(1, 3))):
                ind = indent if draw(st.integers(0, 5)) else draw(st.sampled_from(_INDENTS))
                lines.append(f"{ind}- {draw(st.sampled_from(_WORDS))}")
        elif kind == "map":
            lines.append(f"{key}:")
            indent = draw(st.sampled_from(_INDENTS[1:]))
            for _ in range(draw(st.integers(1, 3))):
                ind = indent if draw(st.integers(0, 5)) else draw(st.sampled_from(_INDENTS))
                lines.append(f"{ind}{draw(st.sampled_from(_KEYS))}: {draw(st.sampled_from(_WORDS))}")
        elif kind == "null":
            lines.append(f"{key}:")
        elif kind == "blank":
            lines.append(draw(st.sampled_from(["", " ", "  "])))
        else:
            lines.append(draw(st.sampled_from(_INDENTS)) + draw(st.sampled_from(_WORDS)))
    return "\n".join(lines)


def _reference(text: str, loader: type) -> tuple[object, dict[str, int]] | None:
    try:
        node = yaml.compose(text, Loader=loader)
        data = yaml.load(text, Loader=loader)
    except (yaml.YAMLError, ValueError):
        return None
    lines = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            lines.setdefault(str(key_node.value), key_node.start_mark.line)
    return data, lines


def _agrees(text: str) -> bool:
    simple = load_simple(text)
    if simple is None:
        return False
    for loader in (yaml.SafeLoader, yaml.CSafeLoader):
        ref = _reference(text, loader)
        assert ref is not None, f"load_simple read what {loader.__name__} refuses: {text!r}"
        data, lines = ref
        assert simple.data == data, (text, simple.data, data)
        assert [type(v) for v in simple.data.values()] == [type(v) for v in data.values()]  # 1 vs True
        assert simple.key_lines == lines, text
    return True


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_simple_reads_as_pyyaml(text: str) -> None:
    _agrees(text)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab:- #\n'\"[]{}!&*|>%@`\t\r\u2028\x85\ufeffé1.~"), max_size=40))
def test_simple_on_arbitrary_text(text: str) -> None:
    _agrees(text)


def test_simple_takes_the_common_shapes() -> None:
    """The fast path is used for what real files hold (else it would pay for nothing)."""
    text = (
        "name: pdf-tools\ndescription: Use when the user asks to fill a PDF form, e.g. w-9.\n"
        "license: Apache-2.0\nallowed-tools:\n  - Read\n  - Bash\nmetadata:\n  version: 1.0\n"
        "  owner: docs-team\n"
    )
    assert _agrees(text)
    assert load_simple(text).styles == {"name": "plain", "description": "plain", "license": "plain"}
    assert load_simple("name: x\ndescription: 'quoted'\n") is None  # quotes: the full reader
    assert load_simple("name: x\nname: y\n") is None  # a repeated key: the full reader names it
