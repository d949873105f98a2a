""":class:`ProbeTable`, probe records by columns, and the readers that build it: from records or
probes.jsonl lines (:meth:`ProbeTable.from_records`, :meth:`ProbeTable.from_lines`: the block reader,
:class:`_Builder`, on the msgspec decoders of :mod:`skillreach.scoring._decoders`) and from a whole log's
bytes (:func:`read_columns`: pyarrow, its parsing and checks in :mod:`skillreach.scoring._columns`). The
table is built where it is defined, so no module of the wing imports one that imports it back."""

from __future__ import annotations

import io
import itertools
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

import msgspec
import numpy as np
import orjson

from skillreach._gc import cyclic_gc_paused
from skillreach.errors import InputError
from skillreach.models import MAX_PROBE_COST_USD, MAX_TURNS, NO_SKILL, ProbeRecord, QuerySet
from skillreach.scoring._columns import (
    _EXACT_FLOAT,
    _MAX_DURATION,
    _finite,
    _first_lines,
    _names,
    _parse,
    _plain_lines,
    _query_codes,
    _turns_ok,
    _usage,
)
from skillreach.scoring._csr import _offsets
from skillreach.scoring._decoders import (
    _DECODER,
    _USAGE_KEYS,
    _blocks,
    _get,
    _get_names,
    _get_row_usage,
    _get_usage,
    _is_not,
    _known_decoder,
    _Line,
    _Vocab,
)
from skillreach.scoring._queries import _query_fields, _QueryFields

__all__ = ["ProbeTable", "read_columns"]


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
    first_lines: dict[tuple[str, str], int] = field(default_factory=dict)
    """(field, value) → the line where that value first appears, for ``runtime``, ``model``,
    ``resolved_model`` and ``fingerprint`` (so a log that mixes them is refused naming the line)."""
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
        read whole by the columnar reader (:func:`read_columns`: pyarrow, no
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
                size = _size(fh)
                if size > MAX_PROBE_LOG_BYTES:
                    raise InputError(
                        f"{source}: {size:,} bytes, more than the {MAX_PROBE_LOG_BYTES >> 30} GiB a "
                        "probe log may hold; pass the probes.jsonl a study wrote"
                    )
                if _COLUMNAR_MIN <= size <= _COLUMNAR_MAX:
                    data = fh.read()
                    table = read_columns(data, source=source, query_ids=b.query_ids)
                    if table is not None:
                        return table
                    fh = io.BytesIO(data)  # shares the bytes; read again, every line checked
                line0 = 1
                for block in _blocks(fh, source):
                    line0 += b.add_block(block, line0)
            else:
                from skillreach.study.probe_log import parse_lines

                for lineno, obj in parse_lines(cast(Iterable[bytes | str], lines), source=source,
                                               warnings=b.warnings):  # fmt: skip
                    b.add_raw(lineno, obj)
        return b.build()


MAX_PROBE_LOG_BYTES = 8 << 30
"""Bytes a probe log may hold (≈ 25 million probes); a larger file (a sparse one, say) is refused unread."""
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


_INT64_MAX = 2**63 - 1


def _short(value: Any) -> str:
    """``repr`` of a value from a line, cut to 60 characters (a hostile line may hold megabytes)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}…"


def _summed_cost(costs: Sequence[float], source: str) -> float:
    """``math.fsum`` of the probes' costs (exactly rounded: the same total in any log order); one line
    when the total passes the largest float."""
    try:
        total = math.fsum(costs)
    except OverflowError:
        total = math.inf
    if not math.isfinite(total):
        raise InputError(
            f"{source}: cost_usd adds up past the largest number a float holds (about 1.8e308) over the "
            "log; a cost that large is not a real probe's — fix or remove those lines"
        )
    return total


MAX_ATTEMPT = _INT64_MAX
"""The largest attempt number a probe log may hold (the attempt column is int64; numbers too large for
a key of their own are keyed by rank in scoring)."""


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
        self.first_lines: dict[tuple[str, str], int] = {}
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
        if (
            runtime not in self.runtimes
            or (model and model not in self.models)
            or (resolved and resolved not in self.resolved)
            or (fingerprint and fingerprint not in self.fingerprints)
        ):
            self._note_names(line, runtime, model, resolved, fingerprint)
        if rich is not None:
            self.rich[row] = rich

    def _note_names(
        self, line: int, runtime: str, model: str | None, resolved: str | None, fingerprint: str | None
    ) -> None:
        """Add a row's names to their sets, noting the line of each value not seen before."""
        first = self.first_lines
        for name, target, x in (
            ("runtime", self.runtimes, runtime or ""),
            ("model", self.models, model),
            ("resolved_model", self.resolved, resolved),
            ("fingerprint", self.fingerprints, fingerprint),
        ):
            if (x or name == "runtime") and x not in target:
                target.add(cast(str, x))
                first.setdefault((name, cast(str, x)), line)

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
        if cost is not None and (
            type(cost) not in (int, float) or not math.isfinite(cost) or not 0 <= cost <= MAX_PROBE_COST_USD
        ):
            what = f"is {cost!r}: must be null or a number of USD in [0, {MAX_PROBE_COST_USD:,.0f}]"
            raise self._bad(line, "cost_usd", what)
        duration = get("duration_ms") or 0
        if type(duration) not in (int, float) or not math.isfinite(duration) or duration < 0:
            raise self._bad(line, "duration_ms", "must be a non-negative number of milliseconds")
        turns = get("turns", 0)
        if turns is not None and (type(turns) is not int or not 0 <= turns <= MAX_TURNS):
            what = f"is {_short(turns)}: must be a non-negative integer, at most {MAX_TURNS:,}"
            raise self._bad(line, "turns", what)
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
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None  # read line by line: the line's own message (a nesting too deep: orjson's limit)
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
        if not known:
            names = list(map(_get_names, rows))
            # each combination once, with its first row (reversed: the first row's index is kept last)
            firsts = dict(zip(reversed(names), range(n - 1, -1, -1), strict=True))
            for tup, i in sorted(firsts.items(), key=lambda kv: kv[1]):
                self._note_names(line0 + i, *tup)
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

    def _bounded(self, lines: np.ndarray) -> tuple[np.ndarray, float]:
        """The attempt column and the summed cost, or one line when they do not fit: an attempt past
        :data:`MAX_ATTEMPT` (queries × attempts counts what is missing), token totals past 2**63 − 1
        (the artifact's JSON integers), a cost total past the largest float."""
        if max(self.attempt, default=1) > MAX_ATTEMPT:
            row, big = next((i, a) for i, a in enumerate(self.attempt) if a > MAX_ATTEMPT)
            raise self._bad(
                int(lines[row]), "attempt", f"is {big:,}, more than {MAX_ATTEMPT:,}; number attempts from 1"
            )
        attempt = np.asarray(self.attempt, dtype=np.int64)
        for name, total in zip(_USAGE_KEYS, self.usage, strict=True):
            if total > _INT64_MAX:
                raise InputError(
                    f"{self.source}: usage.{name} adds up to {total:.3g} tokens over the log, more than "
                    "2**63 − 1; a token count that large is not a real probe's — fix or remove those lines"
                )
        return attempt, _summed_cost(self.costs, self.source)

    def build(self) -> ProbeTable:
        lines = np.concatenate([*self.line_blocks, np.asarray(self.lines, dtype=np.int64)])
        attempt, cost = self._bounded(lines)
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
            attempt=attempt,
            skill_vocab=list(self.svocab),
            inv_flat=np.asarray(self.inv_flat, dtype=np.int64),
            inv_off=off,
            inv_len=inv_len,
            errors=self.errors,
            lines=lines,
            usage=dict(zip(_USAGE_KEYS, self.usage, strict=True)),
            cost_usd=cost,
            priced=len(self.costs),
            duration_ms=self.duration,
            runtimes=self.runtimes,
            models=self.models,
            resolved_models=self.resolved,
            fingerprints=self.fingerprints,
            source=self.source,
            first_lines=self.first_lines,
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


# ------------------------------------------------------------------------------ the columnar reader


def read_columns(data: bytes, *, source: str, query_ids: Sequence[str] | None = None) -> ProbeTable | None:
    """The probe table of a whole log's bytes, or ``None`` when the validating reader must read it.

    ``query_ids``: as ``ProbeTable.query_ids`` (the sorted ids of a query set without repeats): rows are
    coded by their place among them, ids outside them after, in the order first seen. ``None`` too when
    pyarrow is not installed (it is the ``fast`` extra): the block reader reads every log."""
    try:
        import pyarrow.compute as pc
    except ImportError:
        return None

    from skillreach.scoring._arrow import view

    n_lines = _plain_lines(data)
    if n_lines is None:
        return None
    table = _parse(data)
    if table is None or table.num_rows != n_lines:
        return None
    cols = {name: table.column(name) for name in table.column_names}  # chunked: few are joined
    del table
    qcol, acol, icol = cols["query_id"], cols["attempt"], cols["invoked"].combine_chunks()
    if qcol.null_count or acol.null_count or icol.null_count:
        return None  # missing or null: only the other reader tells the two apart
    if pc.max(pc.list_value_length(cols["tool_calls"])).as_py():
        return None  # tool calls: compliance judges the line, kept whole by the other reader
    attempt = view(acol, np.int64).copy()
    if len(attempt) and (int(attempt.min()) < 1 or int(attempt.max()) > MAX_ATTEMPT):
        return None  # the other reader names the line
    skills = pc.list_flatten(icol)
    if skills.null_count:
        return None
    coded_skills = pc.dictionary_encode(skills)
    skill_vocab: list[str] = coded_skills.dictionary.to_pylist()
    if NO_SKILL in skill_vocab or "" in skill_vocab:
        return None
    usage = _usage(cols["usage"])
    costs = _finite(cols["cost_usd"], _EXACT_FLOAT)
    if costs is not None and len(costs) and not (costs.min() >= 0 and costs.max() <= MAX_PROBE_COST_USD):
        return None  # a negative or huge cost: the other reader names the line
    durations = _finite(cols["duration_ms"], _MAX_DURATION)
    if durations is not None and len(durations) and durations.min() < 0:
        return None  # a negative duration: the other reader names the line
    if usage is None or costs is None or durations is None or not _turns_ok(cols["turns"]):
        return None
    coded = _query_codes(qcol, query_ids)
    if coded is None:
        return None
    q, query_vocab, query_codes = coded
    lengths = view(pc.list_value_length(icol), np.int32)
    off = _offsets(lengths)
    ecol = cols["error"]
    errors: dict[int, str] = {}
    if ecol.null_count < len(ecol):
        rows = view(pc.indices_nonzero(pc.is_valid(ecol)), np.uint64)
        errors = dict(zip(rows.tolist(), ecol.drop_null().to_pylist(), strict=True))
    return ProbeTable(
        query_vocab=query_vocab,
        query_codes=query_codes,
        query_ids=query_ids,
        q=q,
        attempt=attempt,
        skill_vocab=skill_vocab,
        inv_flat=view(coded_skills.indices, np.int32).astype(np.int64),
        inv_off=off,
        inv_len=lengths,
        errors=errors,
        lines=np.arange(1, len(attempt) + 1, dtype=np.int64),
        usage=usage,
        cost_usd=_summed_cost(costs.tolist(), source),  # exactly rounded, as the other reader's
        priced=len(costs),
        duration_ms=int(np.trunc(durations).astype(np.int64).sum()),
        runtimes={r or "" for r in _names(cols["runtime"])},
        models={m for m in _names(cols["model"]) if m},
        resolved_models={m for m in _names(cols["resolved_model"]) if m},
        fingerprints={m for m in _names(cols["fingerprint"]) if m},
        source=source,
        first_lines=_first_lines(cols),
    )
