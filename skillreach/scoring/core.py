"""Scoring: a query set and its probe records → the :class:`~skillreach.scoring.artifact.Artifact`. Pure.

Every number follows spec/metrics.md. The work is done on columns: probes are held in a
:class:`ProbeTable` (codes into small vocabularies, the invocation sequences CSR-encoded), labels are
integers (catalog skills in name order, then ``NO_SKILL``), and every count is a ``numpy.bincount``, so
a million probes score in a fraction of a second. A list of :class:`~skillreach.models.ProbeRecord`
goes through the same table (:meth:`ProbeTable.from_records`); probes.jsonl lines are read straight
into one (:meth:`ProbeTable.from_lines`) without a pydantic model per line, the required fields
still checked.

Policies beyond the spec, each stated in the artifact when it applies:

- a later record of the same (query, attempt) supersedes an earlier one (a resumed study retried an
  errored probe); the earlier one is counted in ``counts.superseded`` and still in ``usage``;
- probes of different study fingerprints, or of different runtimes, are refused, not mixed;
- with a catalog, a skill outside it that a query expects (a singleton or neighbourhood catalog) or
  that a probe invoked (the harness saw a skill it should not) becomes a label too, with a warning:
  Turn-1 conservation needs every truth and prediction to be a label, and paid-for probes are kept;
- outcomes, samples and every list come in query-id order, so the artifact does not depend on the
  order in which probes finished.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
import operator
import os
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Annotated, Any, BinaryIO, Literal, NamedTuple, cast

import msgspec
import numpy as np
import orjson

from skillreach import __version__
from skillreach._gc import cyclic_gc_paused
from skillreach.errors import InputError
from skillreach.models import NO_SKILL, Catalog, ProbeRecord, Query, QueryKind, QuerySet
from skillreach.scoring.artifact import (
    PROPORTION_METRICS,
    Artifact,
    Attractor,
    AttractorSource,
    ClassStats,
    Collision,
    ConfusionCell,
    Outcomes,
    QueryInfo,
    QuerySample,
    RuntimeInfo,
    built_as_validated,
)
from skillreach.scoring.intervals import wilson

__all__ = ["ProbeTable", "prepare_queries", "score"]

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_get_usage = {name: attrgetter(name) for name in _USAGE_KEYS}
_get_row_usage = {name: attrgetter(f"usage.{name}") for name in _USAGE_KEYS}
_RICH_KEYS = ("tool_calls", "final_text", "rubric_grade")
"""Fields that only compliance and quality judging read; lines carrying them are kept whole."""

_MAX_DENSE_CONFUSION = 1 << 22
_KINDS = tuple(k.value for k in QueryKind)
_KIND_CODE = {k: i for i, k in enumerate(_KINDS)}
_KIND_CODE_NAME = {k: k for k in _KINDS}
"""A query's kind (a ``QueryKind``, a ``str``) → its value as a plain string."""
_SAMPLES = 3


# ------------------------------------------------------------------------------------------ probe table


@dataclass(eq=False)
class ProbeTable:
    """Probe records by columns. Row ``i`` is the ``i``-th record read, in log order."""

    query_vocab: list[str]
    q: np.ndarray
    """Row → index into ``query_vocab``."""
    attempt: np.ndarray
    skill_vocab: list[str]
    inv_flat: np.ndarray
    inv_off: np.ndarray
    """``invoked`` of row i is ``skill_vocab[inv_flat[inv_off[i]:inv_off[i+1]]]``."""
    inv_len: np.ndarray
    """Row → its number of invocations (``inv_off``'s differences, as the reader counted them: int32)."""
    errors: dict[int, str]
    lines: np.ndarray
    """Row → 1-based line of the log (or position in the record list)."""
    usage: dict[str, int]
    cost_usd: float
    priced: int
    duration_ms: int
    runtimes: set[str]
    models: set[str]
    resolved_models: set[str]
    fingerprints: set[str]
    source: str = "probes"
    query_codes: Mapping[str, int] | None = None
    """``query_vocab`` inverted (query id → index), when the builder kept it; else built when scored."""
    query_ids: Sequence[str] | None = None
    """When set, ``query_vocab`` begins with exactly these ids, in this order: the sorted ids of the query
    set the table was read for (``queries=`` of :meth:`from_lines`), so that scoring with that set needs
    no mapping of the vocabulary onto it."""
    rich: dict[int, Any] = field(default_factory=dict)
    """Row → the full record (a ``ProbeRecord``, or the parsed line) for rows judged on more than routing."""
    warnings: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.q)

    def where(self, row: int) -> str:
        return f"{self.source}:{int(self.lines[row])}"

    def record(self, row: int) -> ProbeRecord:
        """The full :class:`ProbeRecord` of a row (for compliance and quality judging)."""
        kept = self.rich.get(row)
        if isinstance(kept, ProbeRecord):
            return kept
        if kept is not None:
            try:
                return ProbeRecord.model_validate(kept)
            except ValueError as exc:
                raise InputError(f"{self.where(row)}: {str(exc).splitlines()[0]}") from exc
        a, b = int(self.inv_off[row]), int(self.inv_off[row + 1])
        return ProbeRecord(
            query_id=self.query_vocab[int(self.q[row])],
            attempt=int(self.attempt[row]),
            invoked=tuple(self.skill_vocab[x] for x in self.inv_flat[a:b].tolist()),
            error=self.errors.get(row),
        )

    # -- building ----------------------------------------------------------------------------------

    @classmethod
    def from_records(cls, records: Iterable[ProbeRecord], *, source: str = "probe") -> ProbeTable:
        """A table of already validated records (``source`` names them in messages: ``probe:3``)."""
        b = _Builder(source)
        for i, r in enumerate(records, 1):
            u = r.usage
            b.add(
                i,
                r.query_id,
                r.attempt,
                r.invoked,
                r.error,
                (u.input_tokens, u.output_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens),
                r.cost_usd,
                r.duration_ms,
                r.runtime,
                r.model,
                r.resolved_model,
                r.fingerprint,
                r if (r.tool_calls or r.final_text is not None or r.rubric_grade is not None) else None,
            )
        return b.build()

    @classmethod
    def from_lines(
        cls,
        lines: Iterable[bytes | str] | BinaryIO,
        *,
        source: str = "probes.jsonl",
        queries: QuerySet | None = None,
    ) -> ProbeTable:
        """Read probes.jsonl lines under the probe log's one rule for a damaged log
        (:func:`skillreach.study.probe_log.parse_lines`); a bad field raises :class:`InputError` naming
        ``source:line`` and the field.

        Given a file opened in binary mode of ``_COLUMNAR_MIN`` to ``_COLUMNAR_MAX`` bytes, it is first
        read whole by the columnar reader (:func:`skillreach.scoring._columns.read_columns`: pyarrow, no
        Python object per row, every rule below checked on the columns); a log it refuses is read as
        follows. Otherwise it is read in blocks that msgspec decodes straight into
        typed rows (:class:`_Line`, as strict as the per-line checks or stricter); a block it refuses,
        or one holding blank lines, is read again line by line, so every message and the torn-line
        rule are those of the line-by-line reader.

        Given the query set the probes will be scored with (``queries``), query ids are coded by their
        place in it, so scoring maps no vocabulary (the table still reads a probe of a query outside the
        set: scoring refuses it, naming its line).
        """
        b = _Builder(source)
        if queries is not None:
            b.align(_query_fields(queries))
        with cyclic_gc_paused():
            if hasattr(lines, "read"):
                fh = cast(BinaryIO, lines)
                if _COLUMNAR_MIN <= _size(fh) <= _COLUMNAR_MAX:
                    from skillreach.scoring._columns import read_columns

                    data = fh.read()
                    table = read_columns(data, source=source, query_ids=b.query_ids)
                    if table is not None:
                        return table
                    fh = io.BytesIO(data)  # shares the bytes; read again, every line checked
                line0 = 1
                for block in _blocks(fh):
                    line0 += b.add_block(block, line0)
            else:
                from skillreach.study.probe_log import parse_lines

                for lineno, obj in parse_lines(cast(Iterable[bytes | str], lines), source=source,
                                               warnings=b.warnings):  # fmt: skip
                    b.add_raw(lineno, obj)
        return b.build()


_BLOCK = 1 << 23
_COLUMNAR_MIN = 48 << 20
"""Logs from this size on are read by the columnar reader first: below it, importing pyarrow (≈ 0.4 s)
costs more than it saves (≈ 3 µs of CPU a line; even at ≈ 125,000 lines of the bench's, ≈ 40 MB)."""
_COLUMNAR_MAX = 1 << 30
"""The columnar reader holds the whole file's bytes beside its columns (0.93 GiB peak for 1,000,000
lines, 310 MB): a larger log is read in blocks, its memory the columns and one block."""


def _size(fh: BinaryIO) -> int:
    """The bytes left to read in ``fh`` when it is a regular file; else 0 (read in blocks)."""
    try:
        return os.fstat(fh.fileno()).st_size - fh.tell()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 0


def _blocks(fh: BinaryIO) -> Iterator[bytes]:
    """The file in blocks of whole lines (about ``_BLOCK`` bytes each); the last may lack its newline."""
    rest = b""
    while chunk := fh.read(_BLOCK):
        buf = rest + chunk if rest else chunk
        cut = buf.rfind(b"\n") + 1
        if cut == 0:
            rest = buf
            continue
        yield buf[:cut]
        rest = buf[cut:]
    if rest:
        yield rest


_Count = Annotated[int, msgspec.Meta(ge=0)]


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
    cost_usd: int | float | None = None
    duration_ms: int | float | None = None
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


class _Builder:
    """Accumulates rows into columns; one place that interns names and checks fields."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.qvocab = _Vocab()
        self.svocab = _Vocab()
        self.q: list[int] = []
        self.attempt: list[int] = []
        self.inv_flat: list[int] = []
        self.inv_len: list[int] = []
        self.lines: list[int] = []
        """The lines of the rows added one by one since the last block's (:meth:`add`)."""
        self.line_blocks: list[np.ndarray] = []
        self.errors: dict[int, str] = {}
        self.usage = [0, 0, 0, 0]
        self.costs: list[float] = []
        self.duration = 0
        self.runtimes: set[str] = set()
        self.models: set[str] = set()
        self.resolved: set[str] = set()
        self.fingerprints: set[str] = set()
        self.rich: dict[int, Any] = {}
        self.warnings: list[str] = []
        self._known: msgspec.json.Decoder[_Line] | None = None
        self.query_ids: Sequence[str] | None = None

    def align(self, qf: _QueryFields) -> None:
        """Code the query ids of ``qf`` 0, 1, … in id order when the table is built, ids outside it after
        them (not when an id repeats: scoring refuses that set).

        The rows are coded in log order as they are read and recoded once at the end: looking each
        row's id up among the query set's own strings instead was measured ~1 s slower a million
        rows (the two sets of strings lie apart in memory; the log's first-seen ones lie in order)."""
        if qf.dup is None:
            self.query_ids = qf.ids

    def _bad(self, line: int, name: str, what: str) -> InputError:
        return InputError(f"{self.source}:{line}: field {name!r} {what}; fix or remove the line")

    def add(  # noqa: PLR0917 - the per-row hot path; positional arguments are measurably faster
        self,
        line: int,
        query_id: str,
        attempt: int,
        invoked: Sequence[str],
        error: str | None,
        usage: Sequence[int],
        cost: float | None,
        duration: int,
        runtime: str,
        model: str | None,
        resolved: str | None,
        fingerprint: str | None,
        rich: Any,
    ) -> None:
        row = len(self.q)
        qc = self.qvocab.get(query_id)
        if qc is None:
            qc = self.qvocab[query_id] = len(self.qvocab)
        self.q.append(qc)
        self.attempt.append(attempt)
        svocab = self.svocab
        flat = self.inv_flat
        for s in invoked:
            c = svocab.get(s)
            if c is None:
                if type(s) is not str or not s:
                    raise self._bad(line, "invoked", "must be a list of skill names")
                if s == NO_SKILL:
                    raise self._bad(line, "invoked", f"names {NO_SKILL!r}, which is not a skill")
                c = svocab[s] = len(svocab)
            flat.append(c)
        self.inv_len.append(len(invoked))
        self.lines.append(line)
        if error is not None:
            self.errors[row] = error
        u = self.usage
        u[0] += usage[0]
        u[1] += usage[1]
        u[2] += usage[2]
        u[3] += usage[3]
        if cost is not None:
            self.costs.append(cost)
        self.duration += duration
        self.runtimes.add(runtime)
        if model:
            self.models.add(model)
        if resolved:
            self.resolved.add(resolved)
        if fingerprint:
            self.fingerprints.add(fingerprint)
        if rich is not None:
            self.rich[row] = rich

    def add_raw(self, line: int, obj: dict[str, Any]) -> None:
        """Check one parsed probes.jsonl object (the fields scoring reads) and add it."""
        get = obj.get
        qid = get("query_id")
        if type(qid) is not str or not qid.strip():
            raise self._bad(line, "query_id", "must be a non-empty string")
        attempt = get("attempt", 1)
        if type(attempt) is not int or attempt < 1:
            raise self._bad(line, "attempt", "must be an integer ≥ 1")
        invoked = get("invoked", ())
        if type(invoked) is not list and invoked != ():
            raise self._bad(line, "invoked", "must be a list of skill names")
        error = get("error")
        if error is not None and type(error) is not str:
            raise self._bad(line, "error", "must be null or a message")
        raw_usage = get("usage")
        if raw_usage is None:
            usage: Sequence[int] = (0, 0, 0, 0)
        else:
            if type(raw_usage) is not dict:
                raise self._bad(line, "usage", "must be an object of token counts")
            usage = [raw_usage.get(k) or 0 for k in _USAGE_KEYS]
            for k, v in zip(_USAGE_KEYS, usage, strict=True):
                if type(v) is not int or v < 0:
                    raise self._bad(line, f"usage.{k}", "must be a non-negative integer")
        cost = get("cost_usd")
        if cost is not None and (type(cost) not in (int, float) or not math.isfinite(cost)):
            raise self._bad(line, "cost_usd", "must be null or a number")
        duration = get("duration_ms") or 0
        if type(duration) not in (int, float) or not math.isfinite(duration):
            raise self._bad(line, "duration_ms", "must be a number of milliseconds")
        runtime = get("runtime") or ""
        model = get("model")
        resolved = get("resolved_model")
        fingerprint = get("fingerprint")
        for name, text in (("runtime", runtime), ("model", model), ("resolved_model", resolved)):
            if text is not None and type(text) is not str:
                raise self._bad(line, name, "must be a string")
        if fingerprint is not None and type(fingerprint) is not str:
            raise self._bad(line, "fingerprint", "must be a string")
        rich = (
            obj
            if (get("tool_calls") or get("final_text") is not None or get("rubric_grade") is not None)
            else None
        )
        try:
            self.add(
                line, qid, attempt, invoked, error, usage, cost, int(duration),
                runtime, model, resolved, fingerprint, rich,
            )  # fmt: skip
        except TypeError as exc:  # an unhashable entry in ``invoked``
            raise self._bad(line, "invoked", "must be a list of skill names") from exc

    def add_block(self, block: bytes, line0: int) -> int:
        """Add the lines of ``block`` (the first being line ``line0``); return how many lines it held.

        A block is first decoded by the decoder of names already seen (:func:`_known_decoder`); one it
        refuses (a new name, a rich line), by the general one (the names it adds are learnt then).
        """
        n_lines = block.count(b"\n") + (not block.endswith(b"\n"))
        rows = None
        known = self._known is not None
        if known:
            rows = self._decode_block(block, n_lines, cast(msgspec.json.Decoder[_Line], self._known))
            known = rows is not None
        if rows is None:
            rows = self._decode_block(block, n_lines, _DECODER)
        if rows is not None and self._add_rows(rows, block, line0, known=known):
            if not known:
                self._learn()
        else:
            parts = block.split(b"\n")
            lines = [x + b"\n" for x in parts[:-1]]
            if parts[-1]:
                lines.append(parts[-1])
            # not at import: ``skillreach.study`` brings the settings (pydantic-settings, 0.3 s of start-up)
            from skillreach.study.probe_log import parse_lines

            for lineno, obj in parse_lines(lines, source=self.source, warnings=self.warnings, start=line0):
                self.add_raw(lineno, obj)
        return n_lines

    @staticmethod
    def _decode_block(
        block: bytes, n_lines: int, decoder: msgspec.json.Decoder[Any]
    ) -> Sequence[_Line] | None:
        try:
            rows = decoder.decode_lines(block)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        return rows if len(rows) == n_lines else None  # a blank line: read line by line

    def _learn(self) -> None:
        """The decoder of the names seen so far (after names were added)."""
        if self.svocab and self.runtimes:
            self._known = _known_decoder(
                frozenset(self.svocab), frozenset(self.runtimes), frozenset(self.models),
                frozenset(self.resolved), frozenset(self.fingerprints),
            )  # fmt: skip

    def _add_rows(self, rows: Sequence[_Line], block: bytes, line0: int, *, known: bool = False) -> bool:
        """Add decoded rows as columns; False (nothing added) when a value needs the per-line checks.

        One C-level pass per column (``map`` over attribute getters and vocabulary lookups), no Python
        code per row: names are coded as they are met (:class:`_Vocab`), and only the names new to the
        vocabulary are checked. Rows of the known-names decoder (``known``) name no skill, runtime,
        model or fingerprint not seen before and carry nothing rich, so those passes are skipped.
        """
        n = len(rows)
        invoked = list(map(_get["invoked"], rows))
        q = self.qvocab.codes(list(map(_get["query_id"], rows)))  # codes in log order: nothing depends on it
        if known:
            flat = list(map(self.svocab.__getitem__, itertools.chain.from_iterable(invoked)))
        else:
            flat = self.svocab.codes(list(itertools.chain.from_iterable(invoked)))
        if any(not x.strip() for x in self.qvocab.fresh) or NO_SKILL in self.svocab.fresh:
            self.qvocab.forget_fresh()
            self.svocab.forget_fresh()
            return False
        row0 = len(self.q)
        self.q.extend(q)
        self.attempt.extend(map(_get["attempt"], rows))
        self.inv_flat.extend(flat)
        self.inv_len.extend(map(len, invoked))
        if self.lines:
            self.line_blocks.append(np.asarray(self.lines, dtype=np.int64))
            self.lines = []
        self.line_blocks.append(np.arange(line0, line0 + n, dtype=np.int64))
        errors = list(map(_get["error"], rows))
        if errors.count(None) < n:
            for i in itertools.compress(range(n), map(_is_not, errors, itertools.repeat(None))):
                self.errors[row0 + i] = errors[i]
        self._add_numbers(rows)
        # rows of the known-names decoder name nothing new (their names are sets' members already)
        for runtime, model, resolved, fingerprint in () if known else set(map(_get_names, rows)):
            self.runtimes.add(runtime or "")
            for target, x in ((self.models, model), (self.resolved, resolved),
                              (self.fingerprints, fingerprint)):  # fmt: skip
                if x:
                    target.add(x)
        if known:
            return True
        tool_calls = list(map(_get["tool_calls"], rows))
        finals = list(map(_get["final_text"], rows))
        grades = list(map(_get["rubric_grade"], rows))
        if any(tool_calls) or finals.count(None) < n or grades.count(None) < n:
            lines = block.split(b"\n")
            for i in range(n):
                if tool_calls[i] or finals[i] is not None or grades[i] is not None:
                    self.rich[row0 + i] = orjson.loads(lines[i])
        return True

    def _add_numbers(self, rows: Sequence[_Line]) -> None:
        """Usage, cost and duration totals of decoded rows (filtering ``None`` out only when present)."""
        # msgspec refuses what JSON cannot hold (NaN, ±inf, 1e400), so every number here is finite
        costs = list(map(_get["cost_usd"], rows))
        if None in costs:
            costs = [c for c in costs if c is not None]
        self.costs.extend(costs)
        # a null meets ``sum`` (TypeError) or the getter (AttributeError) first: no scan for one before
        durations = list(map(_get["duration_ms"], rows))
        try:
            total = sum(durations)  # an int exactly when every duration is one
        except TypeError:
            durations = [d for d in durations if d is not None]
            total = sum(durations)
        self.duration += total if type(total) is int else sum(map(int, durations))
        try:  # a row without usage (null) meets the getter: AttributeError
            sums = [sum(map(_get_row_usage[name], rows)) for name in _USAGE_KEYS]
        except AttributeError:
            usages = [u for u in map(_get["usage"], rows) if u is not None]
            sums = [sum(map(_get_usage[name], usages)) for name in _USAGE_KEYS]
        for k, v in enumerate(sums):
            self.usage[k] += v

    def build(self) -> ProbeTable:
        inv_len = np.asarray(self.inv_len, dtype=np.int32)
        off = _offsets(inv_len)
        q = np.asarray(self.q, dtype=np.int64)
        query_vocab: list[str] = list(self.qvocab)
        query_codes: Mapping[str, int] | None = self.qvocab
        if self.query_ids is not None:
            q, query_vocab = _recode(q, query_vocab, self.qvocab, self.query_ids)
            query_codes = None  # built when scored with another query set
        return ProbeTable(
            query_vocab=query_vocab,
            query_codes=query_codes,
            query_ids=self.query_ids,
            q=q,
            attempt=np.asarray(self.attempt, dtype=np.int64),
            skill_vocab=list(self.svocab),
            inv_flat=np.asarray(self.inv_flat, dtype=np.int64),
            inv_off=off,
            inv_len=inv_len,
            errors=self.errors,
            lines=np.concatenate([*self.line_blocks, np.asarray(self.lines, dtype=np.int64)]),
            usage=dict(zip(_USAGE_KEYS, self.usage, strict=True)),
            cost_usd=math.fsum(self.costs),  # exactly rounded: the same total in any log order
            priced=len(self.costs),
            duration_ms=self.duration,
            runtimes=self.runtimes,
            models=self.models,
            resolved_models=self.resolved,
            fingerprints=self.fingerprints,
            source=self.source,
            rich=self.rich,
            warnings=self.warnings,
        )


def _recode(
    q: np.ndarray, vocab: list[str], codes: Mapping[str, int], ids: Sequence[str]
) -> tuple[np.ndarray, list[str]]:
    """Rows coded by ``vocab`` recoded so that ``ids`` are 0, 1, … and the names outside them follow."""
    where = np.fromiter(map(codes.get, ids, itertools.repeat(-1)), dtype=np.int64, count=len(ids))
    new = np.full(len(vocab), -1, dtype=np.int64)
    probed = where >= 0
    new[where[probed]] = np.flatnonzero(probed)
    outside = np.flatnonzero(new < 0)
    new[outside] = len(ids) + np.arange(len(outside), dtype=np.int64)
    return new[q], [*ids, *(vocab[i] for i in outside.tolist())]


# --------------------------------------------------------------------------------------------- helpers


def _rate(hits: float, n: int) -> float | None:
    return None if n == 0 else float(hits) / n


def _ci(hits: int, n: int) -> tuple[float, float] | None:
    """Wilson interval; at 0 of n and n of n its end is exactly 0 (1), not 5.6e-17 off by rounding."""
    ci = wilson(hits, n)
    if ci is None:
        return None
    lo, hi = ci
    return (0.0 if hits == 0 else lo, 1.0 if hits == n else hi)


def _offsets(lengths: np.ndarray) -> np.ndarray:
    off = np.empty(len(lengths) + 1, dtype=np.int64)
    off[0] = 0
    off[1:] = lengths  # summed in place: a cumsum casting int32 into int64 is ≈ 5× slower
    np.cumsum(off[1:], out=off[1:])
    return off


def _csr_gather(
    flat: np.ndarray, off: np.ndarray, lengths: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The CSR sequences of ``rows`` (in that order) of the CSR ``flat``, ``off`` (whose sequences are
    ``lengths`` long): (flat, offsets, lengths, the position in ``rows`` of every element of flat)."""
    lengths = lengths[rows]
    new_off = _offsets(lengths)
    rowof = np.repeat(np.arange(len(rows), dtype=np.int32 if len(rows) < 1 << 31 else np.int64), lengths)
    # element k of row i is element (off[rows[i]] + k - new_off[i]) of ``flat``
    index = (off[:-1][rows] - new_off[:-1])[rowof]
    index += np.arange(int(new_off[-1]), dtype=np.int64)
    return flat[index], new_off, lengths, rowof


def _firsts(flat: np.ndarray, off: np.ndarray, lengths: np.ndarray, empty: int) -> np.ndarray:
    """The first element of every CSR sequence, ``empty`` for an empty one."""
    if len(flat) == 0:
        return np.full(len(lengths), empty, dtype=np.int64)
    # only empty sequences at the end start past the last element: clipped, then replaced
    return np.where(lengths > 0, flat.take(off[:-1], mode="clip"), empty)


class _Latest(NamedTuple):
    """The rows that count, the last of each (query, attempt), in (query, attempt) order."""

    sel: np.ndarray
    """Position → row."""
    q: np.ndarray
    attempt: np.ndarray
    key: np.ndarray
    """Position → its key, ascending (a row's key: ``row_key``)."""
    row_key: np.ndarray
    """Row → ``query << bits | attempt``."""


def _latest(q: np.ndarray, attempt: np.ndarray) -> _Latest:
    """The last row of every (query, attempt) pair, in (query, attempt) order. The pairs are keyed
    ``query << bits | attempt``: with no more than 8 slots a row, a table indexed by key finds the last
    row of each in two passes (the keys that occur, ascending, are its filled slots), else a sort."""
    n = len(q)
    if n == 0:
        none = np.zeros(0, dtype=np.int64)
        return _Latest(none, none, none, none, none)
    bits = int(attempt.max()).bit_length()
    if int(q.max()).bit_length() + bits > 62:  # huge attempt numbers: keyed by their rank instead
        values, rank = np.unique(attempt, return_inverse=True)
        found = _latest(q, rank.astype(np.int64))
        return found._replace(attempt=values[found.attempt])
    row_key = q << bits
    row_key |= attempt
    index: type[np.signedinteger[Any]] = np.int32 if n < 1 << 31 else np.int64  # half the traffic
    size = (int(q.max()) + 1) << bits
    if size <= max(8 * n, 1 << 20):  # a direct table: O(n + size), no sort
        rows = np.arange(n, dtype=index)
        if n > 1 and bool(np.all(row_key[1:] > row_key[:-1])):
            sel, key = rows, row_key  # already in order, no repeat
        else:
            last = np.full(size, -1, dtype=index)
            last[row_key] = rows  # well defined when no key repeats: then every row fills a slot of its own
            key = np.flatnonzero(last >= 0)
            if len(key) < n:  # a key repeats (which row won its slot is not defined): the latest, exactly
                last.fill(-1)
                np.maximum.at(last, row_key, rows)
            sel = last[key]
    else:
        order = np.argsort(row_key, kind="stable")
        ks = row_key[order]
        keep = np.ones(n, dtype=bool)
        keep[:-1] = ks[1:] != ks[:-1]
        sel, key = order[keep], ks[keep]
    return _Latest(sel, key >> bits, key & ((1 << bits) - 1), key, row_key)


# ------------------------------------------------------------------------------------ the two sides


@dataclass
class _Queries:
    """The query set by columns, sorted by id (so that samples and outcomes come in id order)."""

    items: list[Query]
    ids: Sequence[str]
    truth: np.ndarray
    """Query → label code of its truth (``NO_SKILL`` for out of scope)."""
    in_scope: np.ndarray
    acceptable: np.ndarray
    """(queries × widest acceptable list) codes, -1 padded."""
    checked: np.ndarray
    """Query → carries compliance or quality checks."""
    any_checked: bool
    info: list[QueryInfo]
    kind: np.ndarray
    """Query → index into :data:`_KINDS` (int8)."""

    def __len__(self) -> int:
        return len(self.items)


class _QueryFields(NamedTuple):
    """The query set by columns, queries sorted by id, independent of the labels: built once per query
    set (:func:`prepare_queries`) and coded into a study's labels by :func:`_query_columns` per score."""

    items: list[Query]
    ids: tuple[str, ...]
    dup: str | None
    """An id that appears twice (refused when the set is scored), else ``None``."""
    names: list[str]
    """The skills the queries name: acceptable ones in order of first appearance (queries in id order),
    then the expected ones among no acceptable list, in name order."""
    expected: np.ndarray
    """Query → index into ``names`` of its expected skill, -1 for none (out of scope)."""
    acceptable: np.ndarray
    """(queries × widest acceptable list) indices into ``names``, -1 padded."""
    kind: np.ndarray
    checked: np.ndarray
    any_checked: bool
    info: list[QueryInfo]
    expected_names: frozenset[str]
    acceptable_names: frozenset[str]


_QUERY_FIELDS = operator.itemgetter("id", "expected_skill", "acceptable_skills", "kind", "checks")
_FIELDS_OF = attrgetter("__dict__")
_PREPARED: dict[int, tuple[weakref.ref[QuerySet], _QueryFields]] = {}
_PREPARED_LOCK = threading.Lock()


def prepare_queries(query_set: QuerySet) -> None:
    """Build the query side of scoring once, where the query set is loaded (100,000 queries: ~0.3 s):
    every later :func:`score` of this query set (a frozen model) reuses it while the set lives. A
    query set never prepared is prepared by its first score."""
    _query_fields(query_set)


def _query_fields(query_set: QuerySet) -> _QueryFields:
    """The label-independent query columns of ``query_set`` (kept, keyed by the object, while it lives)."""
    key = id(query_set)
    kept = _PREPARED.get(key)
    if kept is not None and kept[0]() is query_set:
        return kept[1]
    with cyclic_gc_paused():  # 100,000s of tuples: no collector passes over the models meanwhile
        qf = _build_query_fields(query_set)

    def forget(_: object, key: int = key) -> None:
        with _PREPARED_LOCK:
            _PREPARED.pop(key, None)

    with _PREPARED_LOCK:
        _PREPARED[key] = (weakref.ref(query_set, forget), qf)
    return qf


def _build_query_fields(query_set: QuerySet) -> _QueryFields:
    """One C-level pass over the query models (an ``itemgetter`` over each model's field dict, transposed
    by ``zip``: a fifth faster than ``attrgetter`` on the models); the columns are reordered by id only
    when the set is not already in strictly ascending id order."""
    queries = query_set.queries
    n = len(queries)
    if not queries:
        none = np.zeros(0, dtype=np.int64)
        return _QueryFields([], (), None, [], none, np.zeros((0, 0), dtype=np.int64), none.astype(np.int8),
                            np.zeros(0, dtype=bool), False, [], frozenset(), frozenset())  # fmt: skip
    ids, expected, acceptable, kinds, checks = zip(*map(_QUERY_FIELDS, map(_FIELDS_OF, queries)), strict=True)
    items = list(queries)
    dup = None
    if any(map(operator.ge, ids, ids[1:])):
        # n ≥ 2 here, so ``itemgetter`` of the order gives tuples
        pick = operator.itemgetter(*sorted(range(n), key=ids.__getitem__))
        items, ids, expected, acceptable, kinds, checks = (
            list(pick(queries)), pick(ids), pick(expected), pick(acceptable), pick(kinds), pick(checks)
        )  # fmt: skip
        if any(map(operator.eq, ids, ids[1:])):  # sorted: a repeated id sits by itself
            dup = next(a for a, b in itertools.pairwise(ids) if a == b)
    # the names: acceptable skills in order of first appearance, then the other expected ones
    flat = list(itertools.chain.from_iterable(acceptable))
    code: dict[str | None, int] = dict.fromkeys(flat, 0)
    acceptable_names = frozenset(flat)
    expected_names = frozenset(expected) - {None}
    for name in sorted(cast(frozenset[str], expected_names) - acceptable_names):
        code[name] = 0
    names = cast(list[str], list(code))
    code = {name: i for i, name in enumerate(names)}
    code[None] = -1
    lengths = np.fromiter(map(len, acceptable), dtype=np.int64, count=n)
    width = int(lengths.max())
    acc = np.full((n, width), -1, dtype=np.int64)
    if width:
        off = _offsets(lengths)
        rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
        acc[rows, np.arange(len(flat), dtype=np.int64) - off[rows]] = np.fromiter(
            map(code.__getitem__, flat), dtype=np.int64, count=len(flat)
        )
    no_skill: dict[str | None, str] = {None: NO_SKILL}
    truths = cast(list[str], list(map(no_skill.get, expected, expected)))  # None → NO_SKILL, else itself
    kind_names = list(map(_KIND_CODE_NAME.__getitem__, kinds))
    checked = np.fromiter(map(operator.is_not, checks, itertools.repeat(None)), dtype=bool, count=n)
    return _QueryFields(
        items=items,
        ids=ids,
        dup=dup,
        names=names,
        expected=np.fromiter(map(code.__getitem__, expected), dtype=np.int64, count=n),
        acceptable=acc,
        kind=np.fromiter(map(_KIND_CODE.__getitem__, kinds), dtype=np.int8, count=n),
        checked=checked,
        any_checked=bool(checked.any()),
        info=list(zip(ids, kind_names, truths, acceptable, strict=True)),
        expected_names=cast(frozenset[str], expected_names),
        acceptable_names=acceptable_names,
    )


def _labels(qf: _QueryFields, table: ProbeTable, catalog: Catalog | None, warnings: list[str]) -> list[str]:
    """The labels in name order, then ``NO_SKILL``: every catalog skill, plus any skill a query expects
    or a probe invoked outside it (warned: with a singleton or neighbourhood catalog a non-resident
    expected skill can only be missed; an invoked one means the harness saw skills it should not).
    Without a catalog: every skill seen in the queries and probes."""
    expected = qf.expected_names
    acceptable = qf.acceptable_names
    invoked = set(table.skill_vocab)
    if catalog is None:
        return [*sorted(expected | invoked | acceptable), NO_SKILL]
    known = set(catalog.names)
    missing, stray = sorted(expected - known), sorted(invoked - known - acceptable)
    if missing:
        warnings.append(
            f"{len(missing)} expected skill(s) not in catalog {catalog.id!r}, so never reachable: "
            + ", ".join(missing[:10])
            + (" …" if len(missing) > 10 else "")
        )
    if stray:
        warnings.append(
            f"probes invoked {len(stray)} skill(s) outside catalog {catalog.id!r}: "
            + ", ".join(stray[:10])
            + (" …" if len(stray) > 10 else "")
            + "; is the harness isolated?"
        )
    return [*sorted(known | expected | invoked), NO_SKILL]


def _query_columns(qf: _QueryFields, ext: dict[str, int]) -> _Queries:
    """The query columns coded into the labels ``ext``, which gains any acceptable skill outside them
    (in order of first appearance, queries in id order)."""
    if qf.dup is not None:
        raise InputError(f"query set: query id {qf.dup!r} appears twice; ids must be unique")
    no = ext[NO_SKILL]
    lut = np.array([ext.setdefault(name, len(ext)) for name in qf.names] + [-1], dtype=np.int64)
    acc = lut[qf.acceptable]  # -1 (padding) picks the last entry: -1
    lut[-1] = no
    truth = lut[qf.expected]  # -1 (out of scope) picks NO_SKILL
    return _Queries(
        items=qf.items,
        ids=qf.ids,
        truth=truth,
        in_scope=truth != no,
        acceptable=acc,
        checked=qf.checked,
        any_checked=qf.any_checked,
        info=qf.info,
        kind=qf.kind,
    )


@dataclass
class _Probes:
    """The probes that count (superseded records dropped), in (query id, attempt) order."""

    sel: np.ndarray
    """Position → row of the table."""
    q: np.ndarray
    attempt: np.ndarray
    err: np.ndarray
    errors: dict[int, str]
    raw: np.ndarray
    raw_off: np.ndarray
    kept: np.ndarray
    """``scored_inv`` of every scored probe, CSR (errored probes have none)."""
    kept_off: np.ndarray
    kept_len: np.ndarray
    predicted: np.ndarray
    """Label code of ``predicted``; -1 for an errored probe."""
    raw_predicted: np.ndarray
    truth: np.ndarray
    in_scope: np.ndarray
    reach: np.ndarray
    """Expected skill ∈ scored_inv."""
    correct: np.ndarray
    """predicted == truth (never for an errored probe)."""
    ranks: np.ndarray
    """How many probes reached the expected skill at each rank (its 1-based position in scored_inv)."""

    @functools.cached_property
    def scored(self) -> np.ndarray:
        return ~self.err

    def only_scored(self, column: np.ndarray) -> np.ndarray:
        """``column`` restricted to scored probes (the column itself when none errored)."""
        return column[self.scored] if self.errors else column

    @functools.cached_property
    def t(self) -> np.ndarray:
        """Truth of every scored probe."""
        return self.only_scored(self.truth)

    @functools.cached_property
    def p(self) -> np.ndarray:
        """Prediction of every scored probe."""
        return self.only_scored(self.predicted)

    @functools.cached_property
    def sq(self) -> np.ndarray:
        """Query of every scored probe."""
        return self.only_scored(self.q)


def _probe_columns(table: ProbeTable, qs: _Queries, ext: dict[str, int], n_labels: int) -> _Probes:
    if table.query_ids is qs.ids:  # read for this query set: its codes are the set's (module doc)
        row_q = table.q
        outside = len(table.query_vocab) > len(qs)
    else:
        # query → its code in the table's vocabulary (-1: never probed), inverted into code → query
        vocab = table.query_codes
        if vocab is None:
            vocab = dict(zip(table.query_vocab, range(len(table.query_vocab)), strict=True))
        codes = np.fromiter(map(vocab.get, qs.ids, itertools.repeat(-1)), dtype=np.int64, count=len(qs))
        probed = codes >= 0
        vq = np.full(len(table.query_vocab), -1, dtype=np.int64)
        vq[codes[probed]] = np.flatnonzero(probed)
        row_q = vq[table.q]
        outside = bool((vq < 0).any())
    if outside:
        row = int(np.flatnonzero((row_q < 0) | (row_q >= len(qs)))[0])  # the first such line of the log
        bad = int(table.q[row])
        raise InputError(
            f"{table.where(row)}: probe of query {table.query_vocab[bad]!r}, which is not in the query "
            "set; score with the query set the probes were run with"
        )
    sel, q, attempt, key, row_key = _latest(row_q, table.attempt)
    m = len(sel)
    err = np.zeros(m, dtype=bool)
    errors: dict[int, str] = {}
    if table.errors:
        # an errored row's place: its key among the sorted keys, where that row won (not superseded)
        rows = np.fromiter(table.errors, dtype=np.int64, count=len(table.errors))
        needles = row_key[rows]
        order = np.argsort(needles)  # sorted needles: each search starts where the last one ended
        at = np.empty_like(order)
        at[order] = np.searchsorted(key, needles[order])
        won = sel[np.minimum(at, m - 1)] == rows
        err[at[won]] = True
        pairs = zip(at.tolist(), table.errors.values(), strict=True)
        errors = dict(pairs if won.all() else itertools.compress(pairs, won.tolist()))

    lut = np.array([ext[s] for s in table.skill_vocab], dtype=np.int64)
    raw_flat, raw_off, raw_len, rowof = _csr_gather(table.inv_flat, table.inv_off, table.inv_len, sel)
    raw = lut[raw_flat] if len(raw_flat) else raw_flat
    drop = np.zeros(0, dtype=np.int64)
    if len(raw) and (errors or qs.acceptable.shape[1]):
        # only the invocations of errored probes and of probes whose query accepts a skill can be dropped
        special = err | (qs.acceptable[:, 0] >= 0)[q] if qs.acceptable.shape[1] else err
        cand = np.flatnonzero(special[rowof])
        cand_row = rowof[cand]
        dropped = err[cand_row]
        if qs.acceptable.shape[1]:
            acc_of = qs.acceptable[q[cand_row]]
            named = raw[cand]
            for j in range(qs.acceptable.shape[1]):
                dropped |= named == acc_of[:, j]
        drop = cand[dropped]
    if len(drop):
        keep = np.ones(len(raw), dtype=bool)
        keep[drop] = False
        kept, kept_row = raw[keep], rowof[keep]
        kept_len = raw_len.copy()
        np.subtract.at(kept_len, rowof[drop], 1)
        kept_off = _offsets(kept_len)
    else:
        kept, kept_row, kept_len, kept_off = raw, rowof, raw_len, raw_off
    no = n_labels - 1
    raw_predicted = _firsts(raw, raw_off, raw_len, no)
    predicted = raw_predicted.copy()
    if len(drop):  # only a probe that lost an invocation can predict other than its raw prediction
        fix = rowof[drop]
        fix = fix[np.r_[True, fix[1:] != fix[:-1]]]  # ascending, each once
        if len(kept):
            first = kept[np.minimum(kept_off[fix], len(kept) - 1)]
            predicted[fix] = np.where(kept_len[fix] > 0, first, no)
        else:
            predicted[fix] = no
    predicted[err] = -1
    truth = qs.truth[q]
    in_scope = qs.in_scope[q]
    correct = predicted == truth

    # the expected skill's first position in scored_inv: 1 exactly when an in-scope probe is correct (an
    # out-of-scope probe's truth, NO_SKILL, is never invoked); later ones are found among the invocations
    # after their probe's first (positions rise within a probe)
    reach = correct & in_scope
    at_first = int(np.count_nonzero(reach))
    later = np.flatnonzero(kept_row[1:] == kept_row[:-1]) + 1
    later = later[kept[later] == truth[kept_row[later]]]
    later_row = kept_row[later]
    first_hit = ~reach[later_row]  # not reached at position 1
    first_hit[1:] &= later_row[1:] != later_row[:-1]
    later, later_row = later[first_hit], later_row[first_hit]
    reach[later_row] = True
    ranks = np.bincount(later - kept_off[later_row] + 1, minlength=2)
    ranks[1] = at_first
    return _Probes(
        sel=sel,
        q=q,
        attempt=attempt,
        err=err,
        errors=errors,
        raw=raw,
        raw_off=raw_off,
        kept=kept,
        kept_off=kept_off,
        kept_len=kept_len,
        predicted=predicted,
        raw_predicted=raw_predicted,
        truth=truth,
        in_scope=in_scope,
        reach=reach,
        correct=correct,
        ranks=ranks,
    )


# ------------------------------------------------------------------------------------------ figures


class _Tally:
    """Counts of scored probes by (query kind, in scope, reached, abstained, correct): every run-level and
    per-kind count is a sum of its cells (``h``, axes in that order)."""

    def __init__(self, h: np.ndarray) -> None:
        self.h = h

    @classmethod
    def of_probes(cls, pr: _Probes, qs: _Queries, no: int) -> _Tally:
        """From one ``bincount`` over a code combining the five (the scored ones)."""
        code = qs.kind[pr.q] << 5  # int8: 4 kinds × 32
        code |= pr.in_scope.view(np.int8) << 4
        code |= pr.reach.view(np.int8) << 3  # reach, abstain and correct imply scored
        code |= (pr.predicted == no).view(np.int8) << 2  # an errored probe predicts -1
        code |= pr.correct.view(np.int8) << 1
        code |= pr.scored.view(np.int8)
        h = np.bincount(code.view(np.uint8), minlength=len(_KINDS) * 32)
        return cls(h.reshape(len(_KINDS), 2, 2, 2, 2, 2)[..., 1])  # the last axis: scored

    @classmethod
    def of_cells(cls, scored: np.ndarray, no: int) -> _Tally:
        """From the counts of scored probes by (kind, r, truth, predicted) (:func:`_counts`), r being
        "reached" for an in-scope probe: every other bit is a function of (truth, predicted)."""
        n_kinds, _, n_labels, _ = scored.shape
        t = np.arange(n_labels)[:, None]
        p = np.arange(n_labels)[None, :]
        in_scope = np.broadcast_to(t != no, (n_labels, n_labels)).astype(np.int64)
        rest = ((p == no) << 1) | (t == p)  # abstained, correct
        # the bits (in scope, reached, abstained, correct) of every (r, truth, predicted) cell
        bits = np.stack([in_scope << 3 | rest, in_scope << 3 | in_scope << 2 | rest])
        h = np.stack([np.bincount(bits.ravel(), scored[k].ravel(), minlength=16) for k in range(n_kinds)])
        return cls(h.astype(np.int64).reshape(n_kinds, 2, 2, 2, 2))

    def count(self, *, kind: int | None = None, **bits: int) -> int:
        """Scored probes with the given bits (in_scope, reach, abstain, correct) set (1) or clear (0)."""
        index: list[Any] = [slice(None) if kind is None else kind]
        index += [bits.get(name, slice(None)) for name in ("in_scope", "reach", "abstain", "correct")]
        return int(self.h[tuple(index)].sum())


_MAX_DENSE_COUNTS = 1 << 22
"""Up to this many (kind, r, truth, predicted) cells (≈ 510 labels), every count comes from one
``bincount`` of the probes (:func:`_counts`)."""


def _counts(pr: _Probes, qs: _Queries, n_labels: int) -> tuple[_Tally, _Confusion, np.ndarray]:
    """The tally, the confusion and, per truth label, the probes that reached it along their trajectory
    (``trajectory_recall``'s numerator: in scope, the expected skill in scored_inv; out of scope, nothing
    kept).

    With few enough labels, one ``bincount`` over every probe of the code (kind, r, truth, predicted + 1)
    — r being that trajectory bit, which for an in-scope probe is "reached" (an out-of-scope one never
    reaches) — gives all three: every other bit is a function of (truth, predicted), and an errored
    probe (predicted -1) falls in a column of its own. Else each is counted apart."""
    no = n_labels - 1
    n_kinds = len(_KINDS)
    traj_ok = np.where(pr.in_scope, pr.reach, pr.kept_len == 0)
    size = n_kinds * 2 * n_labels * (n_labels + 1)
    if size > _MAX_DENSE_COUNTS or n_labels * n_labels > _MAX_DENSE_CONFUSION:
        tally = _Tally.of_probes(pr, qs, no)
        conf = _confusion(pr.t, pr.p, n_labels)
        return tally, conf, np.bincount(pr.t[pr.only_scored(traj_ok)], minlength=n_labels)
    # each query's part of the code (kind, truth) once, then per probe: + r, + predicted + 1
    base = (qs.kind.astype(np.int64) * (2 * n_labels) + qs.truth) * (n_labels + 1) + 1
    code = base[pr.q]
    code += traj_ok * (n_labels * (n_labels + 1))  # (a masked add is slower)
    code += pr.predicted
    h = np.bincount(code, minlength=size).reshape(n_kinds, 2, n_labels, n_labels + 1)
    scored = h[..., 1:]  # column 0: errored probes
    dense = scored.sum(axis=(0, 1))
    cells = np.flatnonzero(dense)
    conf = _Confusion(cells, dense.ravel()[cells], dense.ravel())
    return _Tally.of_cells(scored, no), conf, scored[:, 1].sum(axis=(0, 2))


def _run_level(
    pr: _Probes, tally: _Tally
) -> tuple[dict[str, float | None], dict[str, int], dict[str, tuple[float, float] | None]]:
    """Every run-level rate of spec/metrics.md with its denominator and Wilson interval."""
    n_scored, n_in = tally.count(), tally.count(in_scope=1)
    n_oos = n_scored - n_in
    # consistency: probes are in query order, so each query's scored attempts are contiguous
    n_queries = n_consistent = 0
    if n_scored:
        # a query is inconsistent when two of its scored attempts, side by side, predict apart
        sq, rp = pr.sq, pr.only_scored(pr.raw_predicted)
        same = sq[1:] == sq[:-1]
        n_queries = len(sq) - int(np.count_nonzero(same))
        apart = sq[1:][same & (rp[1:] != rp[:-1])]
        n_consistent = n_queries - (int(np.count_nonzero(apart[1:] != apart[:-1])) + 1 if len(apart) else 0)
    correct = tally.count(correct=1)
    hits = {
        "top1_accuracy": (correct, n_scored),
        "entrypoint_accuracy": (correct, n_scored),
        "trajectory_reachability": (tally.count(reach=1, in_scope=1), n_in),
        "abstention_rate": (tally.count(abstain=1), n_scored),
        "false_abstention_rate": (tally.count(abstain=1, in_scope=1), n_in),
        "oos_detection": (tally.count(abstain=1, in_scope=0), n_oos),
        "consistency": (n_consistent, n_queries),
    }
    assert tuple(hits) == PROPORTION_METRICS
    metrics: dict[str, float | None] = {k: _rate(h, n) for k, (h, n) in hits.items()}
    # the sum of 1/rank over the probes that reached (only in-scope ones can: an out-of-scope probe's
    # truth, NO_SKILL, is never invoked), exactly rounded, so the same in any probe order
    recip = math.fsum(k / r for r, k in enumerate(pr.ranks.tolist()) if k)
    metrics["step_efficiency"] = _rate(recip, n_in)
    isc_len = pr.kept_len[pr.in_scope]  # errored probes keep nothing: length 0
    metrics["redundancy"] = _rate(float(int(isc_len.sum()) - int(np.count_nonzero(isc_len))), n_in)
    denominators = {k: n for k, (_, n) in hits.items()}
    denominators["step_efficiency"] = denominators["redundancy"] = n_in
    intervals = {k: _ci(h, n) for k, (h, n) in hits.items()}
    return metrics, denominators, intervals


def _per_class(
    labels: Sequence[str], confusion: _Confusion, trajectory: np.ndarray
) -> tuple[list[dict[str, Any]], dict[str, float | None]]:
    """Turn-1 conservation counts and rates for every label, and the macro averages."""
    n_labels = len(labels)
    support, n_pred, tp = (x.tolist() for x in confusion.margins(n_labels))
    traj = trajectory.tolist()
    classes: list[dict[str, Any]] = []
    for i, label in enumerate(labels):
        s_, pr_, tp_ = support[i], n_pred[i], tp[i]
        precision = tp_ / pr_ if pr_ else 0.0
        recall = tp_ / s_ if s_ else None
        if recall is None:
            f1 = None
        else:
            f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
        classes.append(
            {
                "label": label,
                "support": s_,
                "predicted": pr_,
                "tp": tp_,
                "fp": pr_ - tp_,
                "fn": s_ - tp_,
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "trajectory_recall": traj[i] / s_ if s_ else None,
                "recall_ci": _ci(tp_, s_),
                "precision_ci": _ci(tp_, pr_),
            }
        )
    active = [c["precision"] for c in classes if c["support"] > 0 or c["predicted"] > 0]
    supported = [c for c in classes if c["support"] > 0]
    macro = {
        "macro_precision": math.fsum(active) / len(active) if active else None,
        "macro_recall": math.fsum(c["recall"] for c in supported) / len(supported) if supported else None,
        "macro_f1": math.fsum(c["f1"] for c in supported) / len(supported) if supported else None,
    }
    return classes, macro


def _by_kind(qs: _Queries, tally: _Tally) -> list[dict[str, Any]]:
    """Top-1 accuracy, abstention and reachability per query kind present in the set."""
    queries = np.bincount(qs.kind, minlength=len(_KINDS)).tolist()
    out = []
    for i, name in enumerate(_KINDS):
        if not queries[i]:
            continue
        n_scored = tally.count(kind=i)
        correct = tally.count(kind=i, correct=1)
        out.append(
            {
                "kind": name,
                "queries": queries[i],
                "scored": n_scored,
                "top1_accuracy": _rate(correct, n_scored),
                "top1_ci": _ci(correct, n_scored),
                "abstention_rate": _rate(tally.count(kind=i, abstain=1), n_scored),
                "trajectory_reachability": None
                if name == QueryKind.out_of_scope.value
                else _rate(tally.count(kind=i, reach=1), n_scored),
            }
        )
    return out


class _Confusion(NamedTuple):
    cells: np.ndarray
    """The cells with a count, ascending; cell = truth · L + predicted."""
    counts: np.ndarray
    dense: np.ndarray | None
    """Every cell's count (L × L), when that is small enough to hold."""

    def margins(self, n_labels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(support, predicted, tp) of every label: row sums, column sums and the diagonal."""
        if self.dense is not None:
            m = self.dense.reshape(n_labels, n_labels)
            return m.sum(axis=1), m.sum(axis=0), np.diagonal(m)
        t, p = np.divmod(self.cells, n_labels)
        return (np.bincount(t, self.counts, n_labels).astype(np.int64),
                np.bincount(p, self.counts, n_labels).astype(np.int64),
                np.bincount(t[t == p], self.counts[t == p], n_labels).astype(np.int64))  # fmt: skip


def _confusion(t: np.ndarray, p: np.ndarray, n_labels: int) -> _Confusion:
    """The confusion of the scored probes' truth ``t`` and prediction ``p``."""
    cell = t * n_labels + p
    if n_labels * n_labels <= _MAX_DENSE_CONFUSION:
        dense = np.bincount(cell, minlength=n_labels * n_labels)
        cells = np.flatnonzero(dense)
        return _Confusion(cells, dense[cells], dense)
    cells, counts = np.unique(cell, return_counts=True)
    return _Confusion(cells, counts, None)


def _collisions(pr: _Probes, qs: _Queries, labels: Sequence[str], rank: np.ndarray) -> list[Collision]:
    """Confusion pairs with predicted ≠ truth and predicted ≠ NO_SKILL, with up to 3 sample queries."""
    n_labels, no = len(labels), len(labels) - 1
    t, p = pr.truth, pr.predicted
    mask = ~pr.correct  # an errored probe predicts -1, which is neither
    mask &= p != no
    mask &= ~pr.err
    at = np.flatnonzero(mask)
    if not len(at):
        return []
    c_cell = t[at] * n_labels + p[at]
    n_q = len(qs)
    # distinct (cell, query) pairs, sorted by cell then query id
    pair = np.sort(c_cell * n_q + pr.q[at])
    pair = pair[np.r_[True, pair[1:] != pair[:-1]]]
    per_cell = np.bincount(c_cell)
    cells = np.flatnonzero(per_cell)
    counts = per_cell[cells]
    start = np.searchsorted(pair, cells * n_q)
    distinct = np.searchsorted(pair, (cells + 1) * n_q) - start
    # by count descending, then expected and predicted name
    expected, predicted = np.divmod(cells, n_labels)
    order = np.lexsort((rank[predicted], rank[expected], -counts))
    expected, predicted, counts, start, distinct = (
        x[order] for x in (expected, predicted, counts, start, distinct)
    )
    # the first few distinct queries of each cell, in id order
    take = np.minimum(distinct, _SAMPLES)
    off = _offsets(take)
    picked = (pair[np.repeat(start - off[:-1], take) + np.arange(int(off[-1]))] % n_q).tolist()
    items = qs.items
    samples = built_as_validated(QuerySample, [{"query_id": items[j].id, "text": items[j].text}
                                               for j in picked])  # fmt: skip
    out = [
        {"expected": labels[e], "predicted": labels[p], "count": k, "queries": d, "samples": samples[a:b]}
        for e, p, k, d, a, b in zip(expected.tolist(), predicted.tolist(), counts.tolist(), distinct.tolist(),
                                    off[:-1].tolist(), off[1:].tolist(), strict=True)
    ]  # fmt: skip
    return built_as_validated(Collision, out)


def _attractors(
    labels: Sequence[str], rank: np.ndarray, classes: Sequence[Mapping[str, Any]], conf: _Confusion
) -> list[Attractor]:
    """Skills (not NO_SKILL) with fp > 0, by fp descending then name, with the (up to 3) expected skills
    they pull from most, by count descending then name: every skill predicted in an off-diagonal cell."""
    n_labels = len(labels)
    expected, predicted = np.divmod(conf.cells, n_labels)
    off = (expected != predicted) & (predicted != n_labels - 1)
    expected, predicted, counts = expected[off], predicted[off], conf.counts[off]
    order = np.lexsort((rank[expected], -counts, predicted))
    expected, predicted, counts = expected[order], predicted[order], counts[order]
    skills, first, size = np.unique(predicted, return_index=True, return_counts=True)
    top = np.arange(len(predicted)) - np.repeat(first, size) < _SAMPLES
    flat = built_as_validated(
        AttractorSource,
        [{"expected": labels[e], "count": k} for e, k in zip(expected[top].tolist(), counts[top].tolist(),
                                                              strict=True)],
    )  # fmt: skip
    ends = _offsets(np.minimum(size, _SAMPLES)).tolist()
    out = [
        {
            "skill": labels[i],
            "fp": classes[i]["fp"],
            "predicted": classes[i]["predicted"],
            "precision": classes[i]["precision"],
            "pulled_from": flat[a:b],
        }
        for i, a, b in zip(skills.tolist(), ends[:-1], ends[1:], strict=True)
    ]
    out.sort(key=lambda a: (-a["fp"], a["skill"]))
    return built_as_validated(Attractor, out)


def _judge(pr: _Probes, qs: _Queries, table: ProbeTable) -> tuple[np.ndarray, np.ndarray]:
    """Compliance (-1 none, 0, 1) and quality (NaN none) of every scored probe whose query has checks."""
    m = len(pr.q)
    compliance = np.full(m, -1, dtype=np.int8)
    quality = np.full(m, np.nan)
    todo = np.flatnonzero(qs.checked[pr.q] & pr.scored) if qs.any_checked else ()
    if len(todo):
        from skillreach.queries.compliance import evaluate_probe

        for i in cast(np.ndarray, todo).tolist():
            judgement = evaluate_probe(qs.items[int(pr.q[i])], table.record(int(pr.sel[i])))
            if judgement.compliance is not None:
                compliance[i] = int(judgement.compliance)
            if judgement.quality is not None:
                quality[i] = judgement.quality
    return compliance, quality


# ---------------------------------------------------------------------------------------------- score


def score(
    query_set: QuerySet,
    probes: ProbeTable | Iterable[ProbeRecord],
    catalog: Catalog | None = None,
    *,
    runtime_info: RuntimeInfo | Mapping[str, Any] | None = None,
    attempts: int | None = None,
) -> Artifact:
    """Score ``probes`` of ``query_set`` into an :class:`Artifact` (``digest`` is set when written).

    ``catalog`` gives the labels (every skill of it, plus ``NO_SKILL``); without one they are the
    skills seen in the queries and probes, and the artifact's catalog strategy says ``inferred``.
    ``runtime_info`` defaults to what the probes record; ``attempts`` to the highest attempt seen.
    Raises :class:`InputError` for a probe of a query outside the set, duplicate query ids, or
    probes of different studies (fingerprints, runtimes) mixed in one log.
    """
    table = probes if isinstance(probes, ProbeTable) else ProbeTable.from_records(probes)
    with cyclic_gc_paused():
        return _score(query_set, table, catalog, runtime_info, attempts)


def _score(
    query_set: QuerySet,
    table: ProbeTable,
    catalog: Catalog | None,
    runtime_info: RuntimeInfo | Mapping[str, Any] | None,
    attempts: int | None,
) -> Artifact:
    warnings = list(table.warnings)
    if len(table.fingerprints) > 1:
        raise InputError(
            f"{table.source}: probes of {len(table.fingerprints)} different study configurations "
            "(fingerprints) are mixed; score each study's probes separately"
        )
    runtimes = sorted(r for r in table.runtimes if r)
    if len(runtimes) > 1:
        raise InputError(
            f"{table.source}: probes of different runtimes are mixed ({', '.join(runtimes)}); "
            "score each runtime's probes separately"
        )
    qf = _query_fields(query_set)
    labels = _labels(qf, table, catalog, warnings)
    n_labels = len(labels)
    rank = np.empty(n_labels, dtype=np.int64)  # label → its place in name order (NO_SKILL is last in code)
    rank[sorted(range(n_labels), key=labels.__getitem__)] = np.arange(n_labels)
    ext = {name: i for i, name in enumerate(labels)}
    qs = _query_columns(qf, ext)
    for s in table.skill_vocab:
        ext.setdefault(s, len(ext))
    pr = _probe_columns(table, qs, ext, n_labels)

    m = len(pr.q)
    superseded = len(table) - m
    if superseded:
        warnings.append(
            f"{superseded} earlier probe record(s) superseded by a later record of the same query "
            "and attempt (a resumed study); their usage is still counted"
        )
    if attempts is None:
        attempts = max(int(pr.attempt.max()) if m else 1, 1)
    missing = max(0, len(qs) * attempts - int(np.count_nonzero(pr.attempt <= attempts)))
    if missing:
        warnings.append(f"{missing} of {len(qs) * attempts} query × attempt pairs have no probe")

    tally, conf, trajectory = _counts(pr, qs, n_labels)
    metrics, denominators, intervals = _run_level(pr, tally)
    classes, macro = _per_class(labels, conf, trajectory)
    metrics.update(macro)
    n_scored = tally.count()
    confusion = [
        {"expected": labels[c // n_labels], "predicted": labels[c % n_labels], "count": k}
        for c, k in zip(conf.cells.tolist(), conf.counts.tolist(), strict=True)
    ]
    compliance, quality = _judge(pr, qs, table)
    outcomes = Outcomes(
        queries=qs.info,
        names=list(ext),
        q=pr.q,
        attempt=pr.attempt,
        inv_flat=pr.raw,
        inv_off=pr.raw_off,
        scored_flat=pr.kept,
        scored_off=pr.kept_off,
        predicted=pr.predicted,
        errors=pr.errors,
        compliance=compliance,
        quality=quality,
    )
    # the small parts validated; the long lists built as validation builds them (every value already
    # of its field's type: ints, floats, strings, tuples), ~9,000 models at a million probes
    head = Artifact.model_validate(
        {
            "tool_version": __version__,
            "catalog": _catalog_info(query_set, catalog, labels[:-1]),
            "queries_digest": query_set.provenance.digest or query_set.compute_digest(),
            "runtime": _runtime_info(table, runtime_info, warnings),
            "attempts": attempts,
            "counts": {
                "probes": m,
                "scored": n_scored,
                "errors": m - n_scored,
                "queries": len(qs),
                "missing": missing,
                "superseded": superseded,
            },
            "metrics": metrics,
            "denominators": denominators,
            "intervals": intervals,
            "classes": [],
            "by_kind": _by_kind(qs, tally),
            "confusion": [],
            "collisions": [],
            "top_attractors": [],
            "usage": {
                **table.usage,
                "cost_usd": table.cost_usd if table.priced else None,
                "priced_probes": table.priced,
                "duration_ms": table.duration_ms,
            },
            "warnings": warnings,
            "outcomes": outcomes,
        }
    )
    return head.model_copy(
        update={
            "classes": built_as_validated(ClassStats, classes),
            "confusion": built_as_validated(ConfusionCell, confusion),
            "collisions": _collisions(pr, qs, labels, rank),
            "top_attractors": _attractors(labels, rank, classes, conf),
        }
    )


def _catalog_info(query_set: QuerySet, catalog: Catalog | None, skill_names: list[str]) -> dict[str, Any]:
    if catalog is None:
        return {"id": query_set.catalog_id, "strategy": "inferred", "skills": skill_names, "digest": None}
    return {
        "id": catalog.id,
        "strategy": catalog.strategy,
        "skills": sorted(catalog.names),
        "descriptions": {s.name: s.description for s in catalog.skills},
        "digest": catalog.digest,
    }


def _runtime_info(
    table: ProbeTable, given: RuntimeInfo | Mapping[str, Any] | None, warnings: list[str]
) -> RuntimeInfo:
    if isinstance(given, RuntimeInfo):
        return given
    if given is not None:
        return RuntimeInfo.model_validate(dict(given))

    def one(values: set[str], what: str) -> str | None:
        if len(values) > 1:
            warnings.append(f"probes name {len(values)} different {what}s: {', '.join(sorted(values))}")
            return ", ".join(sorted(values))
        return next(iter(values), None)

    return RuntimeInfo(
        name=next((r for r in table.runtimes if r), ""),
        model=one(table.models, "model"),
        resolved_model=one(table.resolved_models, "resolved model"),
    )
