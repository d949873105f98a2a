"""The msgspec side of reading probes.jsonl in blocks (:class:`skillreach.scoring.table._Builder`): the
file cut into blocks of whole lines, the typed rows a block decodes into, the decoder of the names already
seen, and the vocabularies that code names as they are met."""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Iterator
from operator import attrgetter
from typing import Annotated, Any, BinaryIO, Literal

import msgspec

from skillreach.errors import InputError
from skillreach.models import MAX_PROBE_COST_USD, MAX_PROBE_LINE_BYTES, MAX_TURNS

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_get_usage = {name: attrgetter(name) for name in _USAGE_KEYS}
_get_row_usage = {name: attrgetter(f"usage.{name}") for name in _USAGE_KEYS}
_RICH_KEYS = ("tool_calls", "final_text", "rubric_grade")
"""Fields that only compliance and quality judging read; lines carrying them are kept whole."""

_BLOCK = 1 << 23


def _blocks(fh: BinaryIO, source: str = "probes.jsonl") -> Iterator[bytes]:
    """The file in blocks of whole lines (about ``_BLOCK`` bytes each); the last may lack its newline.
    A line longer than :data:`MAX_PROBE_LINE_BYTES` (a sparse file, say) is refused, naming it."""
    parts: list[bytes] = []
    held = 0
    lines = 0
    while chunk := fh.read(_BLOCK):
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            parts.append(chunk)
            held += len(chunk)
            if held > MAX_PROBE_LINE_BYTES:
                raise InputError(
                    f"{source}:{lines + 1}: a line longer than {MAX_PROBE_LINE_BYTES >> 20} MiB (no "
                    "newline); not a probe log: pass the probes.jsonl a study wrote"
                )
            continue
        block = b"".join([*parts, chunk[:cut]]) if parts else chunk[:cut]
        lines += block.count(b"\n")
        yield block
        parts, held = ([chunk[cut:]], len(chunk) - cut) if cut < len(chunk) else ([], 0)
    if parts:
        yield b"".join(parts)


_Count = Annotated[int, msgspec.Meta(ge=0)]
_Cost = (
    Annotated[int, msgspec.Meta(ge=0, le=int(MAX_PROBE_COST_USD))]
    | Annotated[float, msgspec.Meta(ge=0, le=MAX_PROBE_COST_USD)]
    | None
)
"""A probe's cost: a line outside [0, MAX_PROBE_COST_USD] leaves the decoder for the line-by-line
checks, which name it."""


class _Usage(msgspec.Struct, gc=False):
    input_tokens: _Count = 0
    output_tokens: _Count = 0
    cache_creation_input_tokens: _Count = 0
    cache_read_input_tokens: _Count = 0


class _Lean(msgspec.Struct, gc=False):
    """The fields of a probes.jsonl line that routing scores read (others are skipped undecoded). Every
    value it accepts, the line-by-line checks of :meth:`_Builder.add_raw` accept and read the same way."""

    query_id: str
    attempt: Annotated[int, msgspec.Meta(ge=1)] = 1
    invoked: list[Annotated[str, msgspec.Meta(min_length=1)]] = msgspec.field(default_factory=list)
    error: str | None = None
    usage: _Usage | None = None
    cost_usd: _Cost = None
    duration_ms: Annotated[int, msgspec.Meta(ge=0)] | Annotated[float, msgspec.Meta(ge=0)] | None = None
    turns: Annotated[int, msgspec.Meta(ge=0, le=MAX_TURNS)] | None = None
    runtime: str | None = None
    model: str | None = None
    resolved_model: str | None = None
    fingerprint: str | None = None


class _Line(_Lean, gc=False):
    """:class:`_Lean` plus the fields only compliance and quality judging read (:data:`_RICH_KEYS`)."""

    tool_calls: Any = None
    final_text: Any = None
    rubric_grade: Any = None


_DECODER = msgspec.json.Decoder(_Line)


def _one_of(values: Iterable[str]) -> Any:
    """``Literal[*values]`` (msgspec decodes such a string to the one shared object: no new string, its
    hash already computed, and anything else refused)."""
    return Literal.__getitem__(tuple(sorted(values)))


@functools.lru_cache(maxsize=64)
def _known_decoder(
    skills: frozenset[str],
    runtimes: frozenset[str],
    models: frozenset[str],
    resolved: frozenset[str],
    fingerprints: frozenset[str],
) -> msgspec.json.Decoder[_Line]:
    """A decoder of :class:`_Line` rows that accepts only names already seen: skills in ``invoked``,
    and the runtime, model, resolved model and fingerprint, and no rich field (:data:`_RICH_KEYS`). A
    block it refuses (a new name, a rich line) is decoded again by :data:`_DECODER`. Every row it accepts
    adds no name to the builder's sets, so those are not gathered again; ``""`` and ``null`` add nothing
    but to ``runtimes`` (as ``""``)."""
    blank = {""}
    # a row without a runtime adds "" to the builder's runtimes: allowed only when "" is there already
    runtime: tuple[Any, ...] = (
        ("runtime", _one_of(runtimes) | None, None) if "" in runtimes else ("runtime", _one_of(runtimes))
    )
    known = msgspec.defstruct(
        "_Known",
        [
            ("invoked", list[_one_of(skills)], msgspec.field(default_factory=list)),  # type: ignore[misc]
            runtime,
            ("model", _one_of(models | blank) | None, None),
            ("resolved_model", _one_of(resolved | blank) | None, None),
            ("fingerprint", _one_of(fingerprints | blank) | None, None),
            # a line judged on more than routing is refused: the general decoder keeps it whole
            ("tool_calls", Annotated[list[Any], msgspec.Meta(max_length=0)] | None, None),
            ("final_text", None, None),
            ("rubric_grade", None, None),
        ],
        bases=(_Line,),
        kw_only=True,
        gc=False,
    )
    return msgspec.json.Decoder(known)


_get = {name: attrgetter(name) for name in _Line.__struct_fields__}
_get_names = attrgetter("runtime", "model", "resolved_model", "fingerprint")
_is_not = operator.is_not


class _Vocab(dict[str, int]):
    """Name → code. Looking up a name not seen before gives it the next code and notes it in
    ``fresh`` (``__missing__``), so a column of names becomes codes in one C-level ``map``."""

    def __init__(self) -> None:
        super().__init__()
        self.fresh: list[str] = []

    def __missing__(self, key: str) -> int:
        code = self[key] = len(self)
        self.fresh.append(key)
        return code

    def codes(self, names: Iterable[str]) -> list[int]:
        """The codes of ``names``; the names new to the vocabulary are in ``fresh`` afterwards."""
        self.fresh = []
        return list(map(self.__getitem__, names))  # a name not seen before: ``__missing__``

    def forget_fresh(self) -> None:
        """Take back the codes :meth:`codes` just gave (a block read again line by line)."""
        for key in self.fresh:
            del self[key]
        self.fresh = []
