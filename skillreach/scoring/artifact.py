"""The artifact of one scored study (``artifact.json``, spec/interfaces.md), and its digest.

:class:`Artifact` is what :func:`skillreach.scoring.scorer.score` returns and what reports, baselines and the
store read. Besides the spec's fields it carries ``outcomes``: one row per probe (:class:`ProbeOutcome`)
so that per-skill, per-case figures (baselines, compliance, task quality) can be computed from the
artifact alone. Outcomes are held by columns (:class:`Outcomes`) so that a million probes cost arrays,
not a million Python objects; iterating yields light named tuples, and the JSON holds one object per
probe.

:func:`write_artifact` stores ``digest`` = ``sha256:<hex>`` of the canonical JSON (sorted keys, no
spaces, UTF-8) of every field but ``digest``; :func:`read_artifact` recomputes it and raises
:class:`~skillreach.errors.TamperedError` naming the file when it differs.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import itertools
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypeVar, overload

import numpy as np
import orjson
from pydantic import BaseModel, Field, GetCoreSchemaHandler, TypeAdapter, ValidationError
from pydantic_core import core_schema
from typing_extensions import TypedDict

from skillreach._gc import cyclic_gc_paused
from skillreach.errors import InputError, TamperedError
from skillreach.models import Count, Frozen, NonNegative, Rate, StrictNumber, sha256_hex

__all__ = [
    "ARTIFACT_SCHEMA_VERSION",
    "PROPORTION_METRICS",
    "RUN_METRICS",
    "Artifact",
    "Attractor",
    "CatalogInfo",
    "ClassStats",
    "Collision",
    "ConfusionCell",
    "Counts",
    "KindStats",
    "Metrics",
    "OutcomeRow",
    "Outcomes",
    "ProbeOutcome",
    "QuerySample",
    "RuntimeInfo",
    "UsageTotals",
    "artifact_digest",
    "built_as_validated",
    "read_artifact",
    "write_artifact",
]

ARTIFACT_SCHEMA_VERSION = 1

RUN_METRICS = (
    "top1_accuracy",
    "entrypoint_accuracy",
    "trajectory_reachability",
    "step_efficiency",
    "redundancy",
    "abstention_rate",
    "false_abstention_rate",
    "oos_detection",
    "consistency",
)
"""Every run-level metric of spec/metrics.md, in the order reports show them."""

PROPORTION_METRICS = (
    "top1_accuracy",
    "entrypoint_accuracy",
    "trajectory_reachability",
    "abstention_rate",
    "false_abstention_rate",
    "oos_detection",
    "consistency",
)
"""The run-level rates that are proportions and so carry a Wilson interval."""

Interval = tuple[float, float]
_M = TypeVar("_M", bound=BaseModel)


# ------------------------------------------------------------------------------------------- outcomes


class ProbeOutcome(NamedTuple):
    """One probe as scored. ``predicted`` is ``None`` (and ``scored_inv`` empty) for an errored probe."""

    query_id: str
    attempt: int
    kind: str
    truth: str
    acceptable: tuple[str, ...]
    invoked: tuple[str, ...]
    scored_inv: tuple[str, ...]
    predicted: str | None
    error: str | None
    compliance: bool | None
    quality: float | None

    @property
    def scored(self) -> bool:
        return self.error is None


class OutcomeRow(TypedDict):
    """One probe in ``artifact.json`` (the JSON form of :class:`ProbeOutcome`)."""

    query_id: str
    attempt: int
    kind: str
    truth: str
    acceptable: list[str]
    invoked: list[str]
    scored_inv: list[str]
    predicted: str | None
    error: str | None
    compliance: bool | None
    quality: float | None


_ROWS = TypeAdapter(list[OutcomeRow])

QueryInfo = tuple[str, str, str, tuple[str, ...]]
"""(id, kind, truth, acceptable skills) of a query, shared by all its probes' rows."""


def _offsets(lengths: np.ndarray) -> np.ndarray:
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    return off


def _csr_text(flat: np.ndarray, off: np.ndarray, start: int, end: int, names: np.ndarray) -> np.ndarray:
    """The rows ``start:end`` of a CSR column as the comma-joined JSON texts of their names: one
    element-wise string addition per position over the rows of each length, no Python code per row."""
    o = off[start : end + 1]
    lengths = o[1:] - o[:-1]
    text = np.full(end - start, "", dtype=object)
    for length in np.unique(lengths).tolist():
        if length == 0:
            continue
        rows = np.flatnonzero(lengths == length)
        first = o[:-1][rows]
        acc = names[flat[first]]
        for j in range(1, length):
            acc = acc + "," + names[flat[first + j]]
        text[rows] = acc
    return text


_ARROW_ROWS = 200_000
"""Outcome tables from this many rows on are written through pyarrow (:meth:`Outcomes.canonical_buffers`)
when it is installed (the ``fast`` extra); else by :meth:`Outcomes.canonical_text`, the same bytes."""


def _has_pyarrow() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyarrow") is not None

_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')
"""What JSON (orjson) writes otherwise than as itself inside a string."""


def _texts(values: np.ndarray) -> np.ndarray:
    """The decimal texts of ``values`` as an object array."""
    out = np.empty(len(values), dtype=object)
    out[:] = [str(v) for v in values.tolist()]
    return out


class Outcomes(Sequence[ProbeOutcome]):
    """One row per probe, held by columns (codes into small vocabularies) and read as rows.

    ``q`` indexes ``queries``; ``inv_*`` and ``scored_*`` are CSR-encoded sequences of codes into
    ``names``; ``predicted`` is a code into ``names`` or -1 for an errored probe; ``compliance`` is
    -1 (none), 0 or 1; ``quality`` is NaN for none; ``errors`` maps a row to its error message.
    """

    __slots__ = (
        "_attempt",
        "_compliance",
        "_errors",
        "_inv_flat",
        "_inv_off",
        "_names",
        "_predicted",
        "_q",
        "_quality",
        "_queries",
        "_scored_flat",
        "_scored_off",
    )

    def __init__(
        self,
        *,
        queries: Sequence[QueryInfo],
        names: Sequence[str],
        q: np.ndarray,
        attempt: np.ndarray,
        inv_flat: np.ndarray,
        inv_off: np.ndarray,
        scored_flat: np.ndarray,
        scored_off: np.ndarray,
        predicted: np.ndarray,
        errors: Mapping[int, str],
        compliance: np.ndarray,
        quality: np.ndarray,
    ) -> None:
        n = len(q)
        for name, arr, size in (
            ("attempt", attempt, n),
            ("inv_off", inv_off, n + 1),
            ("scored_off", scored_off, n + 1),
            ("predicted", predicted, n),
            ("compliance", compliance, n),
            ("quality", quality, n),
        ):
            if len(arr) != size:
                raise ValueError(f"outcome column {name} has {len(arr)} entries, expected {size}")
        self._queries = list(queries)
        self._names = list(names)
        self._q = np.asarray(q, dtype=np.int64)
        self._attempt = np.asarray(attempt, dtype=np.int64)
        self._inv_flat = np.asarray(inv_flat, dtype=np.int64)
        self._inv_off = np.asarray(inv_off, dtype=np.int64)
        self._scored_flat = np.asarray(scored_flat, dtype=np.int64)
        self._scored_off = np.asarray(scored_off, dtype=np.int64)
        self._predicted = np.asarray(predicted, dtype=np.int64)
        self._errors = dict(errors)
        self._compliance = np.asarray(compliance, dtype=np.int8)
        self._quality = np.asarray(quality, dtype=np.float64)

    # -- construction from rows (reading a file, tests) --------------------------------------------

    @classmethod
    def empty(cls) -> Outcomes:
        return cls.from_rows([])

    @classmethod
    def from_rows(cls, rows: Sequence[ProbeOutcome | Mapping[str, Any]]) -> Outcomes:
        """Build from row objects or dicts (validated; a bad row raises ``ValueError`` naming it)."""
        dicts = [r._asdict() if isinstance(r, ProbeOutcome) else r for r in rows]
        try:
            checked = _ROWS.validate_python(dicts)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ValueError(f"outcomes[{where}]: {err['msg']}") from exc
        qindex: dict[str, int] = {}
        queries: list[QueryInfo] = []
        names: dict[str, int] = {}
        n = len(checked)
        q = np.empty(n, dtype=np.int64)
        attempt = np.empty(n, dtype=np.int64)
        predicted = np.empty(n, dtype=np.int64)
        compliance = np.full(n, -1, dtype=np.int8)
        quality = np.full(n, np.nan)
        inv_flat: list[int] = []
        inv_len = np.empty(n, dtype=np.int64)
        sc_flat: list[int] = []
        sc_len = np.empty(n, dtype=np.int64)
        errors: dict[int, str] = {}

        def code(name: str) -> int:
            c = names.get(name)
            if c is None:
                c = names[name] = len(names)
            return c

        for i, r in enumerate(checked):
            info = (r["query_id"], r["kind"], r["truth"], tuple(r["acceptable"]))
            qi = qindex.get(info[0])
            if qi is None:
                qi = qindex[info[0]] = len(queries)
                queries.append(info)
            elif queries[qi] != info:
                raise ValueError(
                    f"outcomes[{i}]: query {info[0]!r} described differently from an earlier row"
                )
            q[i] = qi
            attempt[i] = r["attempt"]
            inv_flat.extend(code(s) for s in r["invoked"])
            inv_len[i] = len(r["invoked"])
            sc_flat.extend(code(s) for s in r["scored_inv"])
            sc_len[i] = len(r["scored_inv"])
            predicted[i] = -1 if r["predicted"] is None else code(r["predicted"])
            if r["error"] is not None:
                errors[i] = r["error"]
            if r["compliance"] is not None:
                compliance[i] = int(r["compliance"])
            if r["quality"] is not None:
                quality[i] = r["quality"]
        return cls(
            queries=queries,
            names=list(names),
            q=q,
            attempt=attempt,
            inv_flat=np.asarray(inv_flat, dtype=np.int64),
            inv_off=_offsets(inv_len),
            scored_flat=np.asarray(sc_flat, dtype=np.int64),
            scored_off=_offsets(sc_len),
            predicted=predicted,
            errors=errors,
            compliance=compliance,
            quality=quality,
        )

    # -- the Sequence protocol ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._q)

    def _row(self, i: int) -> ProbeOutcome:
        names = self._names
        qid, kind, truth, acceptable = self._queries[int(self._q[i])]
        a, b = self._inv_off[i], self._inv_off[i + 1]
        c, d = self._scored_off[i], self._scored_off[i + 1]
        p = int(self._predicted[i])
        comp = int(self._compliance[i])
        qual = float(self._quality[i])
        return ProbeOutcome(
            query_id=qid,
            attempt=int(self._attempt[i]),
            kind=kind,
            truth=truth,
            acceptable=acceptable,
            invoked=tuple(names[x] for x in self._inv_flat[a:b].tolist()),
            scored_inv=tuple(names[x] for x in self._scored_flat[c:d].tolist()),
            predicted=None if p < 0 else names[p],
            error=self._errors.get(i),
            compliance=None if comp < 0 else bool(comp),
            quality=None if math.isnan(qual) else qual,
        )

    @overload
    def __getitem__(self, index: int) -> ProbeOutcome: ...

    @overload
    def __getitem__(self, index: slice) -> list[ProbeOutcome]: ...

    def __getitem__(self, index: int | slice) -> ProbeOutcome | list[ProbeOutcome]:
        if isinstance(index, slice):
            return [self._row(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        if not -n <= index < n:
            raise IndexError("outcome index out of range")
        return self._row(index % n if n else index)

    def _values(self, seq: Callable[[list[str]], Sequence[str]]) -> Iterator[tuple[Any, ...]]:
        """Every row's values in field order; sequences built by ``seq`` (tuple for rows, list for JSON)."""
        names = self._names
        queries = [(qid, kind, truth, seq(list(acc))) for qid, kind, truth, acc in self._queries]
        inv_flat = [names[x] for x in self._inv_flat.tolist()]
        sc_flat = [names[x] for x in self._scored_flat.tolist()]
        inv_off = self._inv_off.tolist()
        sc_off = self._scored_off.tolist()
        errors = self._errors
        columns = (
            self._q.tolist(),
            self._attempt.tolist(),
            self._predicted.tolist(),
            self._compliance.tolist(),
            self._quality.tolist(),
        )
        for i, (qi, att, p, comp, qual) in enumerate(zip(*columns, strict=True)):
            qid, kind, truth, acceptable = queries[qi]
            yield (
                qid,
                att,
                kind,
                truth,
                acceptable,
                seq(inv_flat[inv_off[i] : inv_off[i + 1]]),
                seq(sc_flat[sc_off[i] : sc_off[i + 1]]),
                None if p < 0 else names[p],
                errors.get(i),
                None if comp < 0 else comp == 1,
                None if qual != qual else qual,  # noqa: PLR0124 - NaN test, faster than math.isnan
            )

    def __iter__(self) -> Iterator[ProbeOutcome]:
        return (ProbeOutcome._make(v) for v in self._values(tuple))

    def canonical_rows(self, chunk: int = 20_000) -> Iterator[list[str]]:
        """Every row as canonical JSON text — exactly ``orjson.dumps(row, OPT_SORT_KEYS)`` of its
        :meth:`to_rows` object — in lists of up to ``chunk`` rows."""
        for pieces in self._pieces(chunk):
            yield ["".join(row) for row in pieces[:, 1:].tolist()]

    def canonical_text(self, sep: str, chunk: int = 50_000) -> Iterator[str]:
        """The canonical JSON text of every row (:meth:`canonical_rows`), each row preceded by ``sep``
        but the first, in one string per chunk of up to ``chunk`` rows: one ``str.join`` of the pieces
        of a whole chunk, no string built per row."""
        first = True
        for pieces in self._pieces(chunk):
            pieces[:, 0] = sep
            if first:
                pieces[0, 0] = ""
                first = False
            yield "".join(pieces.ravel().tolist())

    def canonical_buffers(
        self, seps: Sequence[bytes], chunk: int = 100_000
    ) -> Iterator[tuple[memoryview, ...]]:
        """:meth:`canonical_text` encoded, joined once by each separator of ``seps`` (a tuple of buffers per
        chunk, the first chunk's without its leading separator); the same bytes, assembled by pyarrow's
        string kernels from the fragments :meth:`_pieces` uses (gathered by ``take``, lists joined by
        ``binary_join``), no Python string per row. Worth its import (≈ 0.4 s) from ``_ARROW_ROWS`` rows."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from skillreach.scoring._arrow import ints, repeat
        from skillreach.scoring._arrow import strings as arr

        def enc(value: Any) -> str:
            return orjson.dumps(value).decode()

        names = arr([*(enc(s) for s in self._names), "null"])  # predicted -1 → "null", the last
        n_names = len(self._names)
        ids: Sequence[str] = [qid for qid, _, _, _ in self._queries]
        kinds: Sequence[str] = [kind for _, kind, _, _ in self._queries]
        truths: Sequence[str] = [truth for _, _, truth, _ in self._queries]
        accs: Sequence[tuple[str, ...]] = [acc for _, _, _, acc in self._queries]
        # kinds, truths and acceptable lists repeat: each distinct one encoded once
        acc_text = {a: '{"acceptable":' + enc(list(a)) + ',"attempt":' for a in set(accs)}
        kind_text = {k: '],"kind":' + enc(k) + ',"predicted":' for k in set(kinds)}
        truth_text = {t: '],"truth":' + enc(t) + "}" for t in set(truths)}
        if _NEEDS_ESCAPE.search("".join(ids)):
            id_text = [',"query_id":' + enc(qid) + ',"scored_inv":[' for qid in ids]
        else:  # nothing to escape (the usual ids): the JSON text is the id in quotes
            id_text = [',"query_id":"' + qid + '","scored_inv":[' for qid in ids]
        per_query = (
            arr(list(map(acc_text.__getitem__, accs))),
            arr(list(map(kind_text.__getitem__, kinds))),
            arr(id_text),
            arr(list(map(truth_text.__getitem__, truths))),
        )
        mids = [f',"compliance":{t},"error":null,"invoked":[' for t in ("null", "false", "true")]
        top = int(self._attempt.max()) if len(self._attempt) else 0
        attempts = arr([str(a) for a in range(top + 1)])
        errored = np.array(sorted(self._errors), dtype=np.int64)

        def csr(flat: np.ndarray, off: np.ndarray, start: int, end: int) -> Any:
            o = off[start : end + 1]
            values = names.take(ints(flat[o[0] : o[-1]]))
            lists = pa.LargeListArray.from_arrays(ints(o - o[0]), values)
            return pc.binary_join(lists, repeat(",", end - start))

        n = len(self)
        for start in range(0, n, chunk):
            end = min(n, start + chunk)
            q = ints(self._q[start:end])
            # compliance (and the error, for an errored row) and quality: codes into small vocabularies
            mid_code = self._compliance[start:end].astype(np.int64) + 1  # -1, 0, 1 → null, false, true
            mid_vocab = list(mids)
            for i in errored[np.searchsorted(errored, start) : np.searchsorted(errored, end)].tolist():
                mid_code[i - start], comp = len(mid_vocab), ("null", "false", "true")[mid_code[i - start]]
                mid_vocab.append(f',"compliance":{comp},"error":{enc(self._errors[i])},"invoked":[')
            qual = self._quality[start:end]
            qual_code = np.zeros(end - start, dtype=np.int64)
            qual_vocab = [',"quality":null']
            for i in np.flatnonzero(~np.isnan(qual)).tolist():
                qual_code[i] = len(qual_vocab)
                qual_vocab.append(',"quality":' + enc(float(qual[i])))
            predicted = self._predicted[start:end]
            pieces = (
                per_query[0].take(q),
                attempts.take(ints(self._attempt[start:end])),
                arr(mid_vocab).take(ints(mid_code)),
                csr(self._inv_flat, self._inv_off, start, end),
                per_query[1].take(q),
                names.take(ints(np.where(predicted < 0, n_names, predicted))),
                arr(qual_vocab).take(ints(qual_code)),
                per_query[2].take(q),
                csr(self._scored_flat, self._scored_off, start, end),
                per_query[3].take(q),
            )
            out = []
            empty = repeat("", end - start)  # arrays, not Python strings: those make pyarrow import pandas
            for sep in seps:
                joined = pc.binary_join_element_wise(repeat(sep.decode(), end - start), *pieces, empty)
                offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)
                a, b = int(offsets[0]) + (len(sep) if start == 0 else 0), int(offsets[len(joined)])
                out.append(memoryview(joined.buffers()[2])[a:b])
            yield tuple(out)

    def _pieces(self, chunk: int) -> Iterator[np.ndarray]:
        """Every row's canonical JSON text in 11 pieces — an object array (rows × 11) per chunk of up to
        ``chunk`` rows, its first column left for a separator.

        Built from text fragments encoded once per query, per name and per attempt number, gathered by
        column, so a million rows cost neither a dict, a sort and an encoder call each nor a string
        format each.
        """

        def enc(value: Any) -> str:
            return orjson.dumps(value).decode()

        names = [enc(s) for s in self._names]
        # keys in sorted order: acceptable attempt compliance error invoked kind predicted quality
        # query_id scored_inv truth; the per-query values are fixed text around the per-probe ones
        ids: Sequence[str] = [qid for qid, _, _, _ in self._queries]
        kinds: Sequence[str] = [kind for _, kind, _, _ in self._queries]
        truths: Sequence[str] = [truth for _, _, truth, _ in self._queries]
        accs: Sequence[tuple[str, ...]] = [acc for _, _, _, acc in self._queries]
        # kinds, truths and acceptable lists repeat: each distinct one encoded once
        kind_text = {k: '],"kind":' + enc(k) + ',"predicted":' for k in set(kinds)}
        truth_text = {t: '],"truth":' + enc(t) + "}" for t in set(truths)}
        acc_text = {a: '{"acceptable":' + enc(list(a)) + ',"attempt":' for a in set(accs)}
        parts = np.empty((len(ids), 4), dtype=object)
        parts[:, 0] = list(map(acc_text.__getitem__, accs))
        parts[:, 1] = list(map(kind_text.__getitem__, kinds))
        if _NEEDS_ESCAPE.search("".join(ids)):
            parts[:, 2] = [',"query_id":' + enc(qid) + ',"scored_inv":[' for qid in ids]
        else:  # nothing to escape (the usual ids): the JSON text is the id in quotes
            parts[:, 2] = [',"query_id":"' + qid + '","scored_inv":[' for qid in ids]
        parts[:, 3] = list(map(truth_text.__getitem__, truths))
        names_obj = np.array([*names, "null"], dtype=object)  # predicted -1 → "null", the last
        mids = np.array([f',"compliance":{t},"error":null,"invoked":[' for t in ("null", "false", "true")],
                        dtype=object)  # fmt: skip
        top = int(self._attempt.max()) if len(self._attempt) else 0
        attempts = np.array([str(a) for a in range(top + 1)], dtype=object) if top <= 1 << 16 else None
        errors = self._errors
        errored = np.array(sorted(errors), dtype=np.int64)
        n = len(self)
        for start in range(0, n, chunk):
            end = min(n, start + chunk)
            q = self._q[start:end]
            comp = self._compliance[start:end].astype(np.int64) + 1  # -1, 0, 1 → null, false, true
            mid = mids[comp]
            for i in errored[np.searchsorted(errored, start) : np.searchsorted(errored, end)].tolist():
                mid[i - start] = (
                    f',"compliance":{("null", "false", "true")[comp[i - start]]},"error":{enc(errors[i])}'
                    ',"invoked":['
                )
            qual = self._quality[start:end]
            qual_text = np.full(end - start, ',"quality":null', dtype=object)
            for i in np.flatnonzero(~np.isnan(qual)).tolist():
                qual_text[i] = ',"quality":' + enc(float(qual[i]))
            att = self._attempt[start:end]
            pieces = np.empty((end - start, 11), dtype=object)
            pieces[:, 1] = parts[q, 0]
            pieces[:, 2] = attempts[att] if attempts is not None else _texts(att)
            pieces[:, 3] = mid
            pieces[:, 4] = _csr_text(self._inv_flat, self._inv_off, start, end, names_obj)
            pieces[:, 5] = parts[q, 1]
            pieces[:, 6] = names_obj[self._predicted[start:end]]
            pieces[:, 7] = qual_text
            pieces[:, 8] = parts[q, 2]
            pieces[:, 9] = _csr_text(self._scored_flat, self._scored_off, start, end, names_obj)
            pieces[:, 10] = parts[q, 3]
            yield pieces

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcomes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Outcomes({len(self)} probes, {len(self._errors)} errored)"

    # -- views used by reports and baselines --------------------------------------------------------

    @property
    def errors(self) -> dict[int, str]:
        """Row → error message of every errored probe."""
        return dict(self._errors)

    def judged(self) -> list[ProbeOutcome]:
        """The rows that carry a compliance or quality judgement (selected by column: cheap when none do)."""
        picked = np.flatnonzero((self._compliance >= 0) | ~np.isnan(self._quality))
        return [self._row(i) for i in picked.tolist()]

    def to_rows(self) -> list[dict[str, Any]]:
        """The JSON form: one object per probe."""
        return [
            {
                "query_id": qid,
                "attempt": att,
                "kind": kind,
                "truth": truth,
                "acceptable": acc,
                "invoked": inv,
                "scored_inv": sc,
                "predicted": pred,
                "error": err,
                "compliance": comp,
                "quality": qual,
            }
            for qid, att, kind, truth, acc, inv, sc, pred, err, comp, qual in self._values(list)
        ]

    @classmethod
    def _coerce(cls, value: Any) -> Outcomes:
        if isinstance(value, Outcomes):
            return value
        if isinstance(value, list | tuple):
            return cls.from_rows(value)
        raise ValueError("outcomes must be a list of probe rows")

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        rows = handler.generate_schema(list[OutcomeRow])
        return core_schema.no_info_plain_validator_function(
            cls._coerce,
            json_schema_input_schema=rows,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v: v.to_rows(), return_schema=rows, when_used="always"
            ),
        )


# ----------------------------------------------------------------------------------------- the model


class CatalogInfo(Frozen):
    id: str
    strategy: str
    """``full``, ``singleton``, ``neighborhood``, or ``inferred`` when no skills were given to score."""
    skills: list[str]
    descriptions: dict[str, str] = Field(default_factory=dict)
    digest: str | None = None


class RuntimeInfo(Frozen):
    name: str = ""
    version: str | None = None
    """The runtime's version (CLI or SDK) the probes ran with, when known."""
    model: str | None = None
    resolved_model: str | None = None
    max_turns: Annotated[int, StrictNumber, Field(ge=1)] | None = None
    early_exit: bool | None = None
    judge_model: str | None = None
    """The judge that graded the study's rubrics (``None``: not recorded, an artifact of an older run)."""


class Counts(Frozen):
    probes: Count
    """Probes in the log after a retried probe superseded its earlier record."""
    scored: Count
    errors: Count
    queries: Count = 0
    missing: Count = 0
    """Query × attempt pairs with no probe at all."""
    superseded: Count = 0
    """Earlier records of a (query, attempt) that a later line of the log replaced."""


class Metrics(Frozen):
    top1_accuracy: Rate | None
    entrypoint_accuracy: Rate | None
    trajectory_reachability: Rate | None
    step_efficiency: NonNegative | None
    redundancy: NonNegative | None
    abstention_rate: Rate | None
    false_abstention_rate: Rate | None
    oos_detection: Rate | None
    consistency: Rate | None
    macro_precision: Rate | None
    macro_recall: Rate | None
    macro_f1: Rate | None


class ClassStats(Frozen):
    label: str
    support: Count
    predicted: Count
    tp: Count
    fp: Count
    fn: Count
    precision: Rate
    recall: Rate | None
    f1: Rate | None
    trajectory_recall: Rate | None
    recall_ci: Interval | None
    precision_ci: Interval | None

    @property
    def active(self) -> bool:
        return self.support > 0 or self.predicted > 0


class KindStats(Frozen):
    """Routing figures of one query kind (implicit, contextual, neighbor_negative, out_of_scope)."""

    kind: str
    queries: Count
    scored: Count
    top1_accuracy: Rate | None
    top1_ci: Interval | None
    abstention_rate: Rate | None
    trajectory_reachability: Rate | None
    """``None`` for out-of-scope queries (nothing to reach)."""


class ConfusionCell(Frozen):
    expected: str
    predicted: str
    count: Count


class QuerySample(Frozen):
    query_id: str
    text: str


class Collision(Frozen):
    expected: str
    predicted: str
    count: Count
    queries: Count
    """Distinct queries behind ``count``."""
    samples: list[QuerySample]


class AttractorSource(Frozen):
    expected: str
    count: Count


class Attractor(Frozen):
    skill: str
    fp: Count
    predicted: Count
    precision: Rate
    pulled_from: list[AttractorSource]


class UsageTotals(Frozen):
    input_tokens: Count = 0
    output_tokens: Count = 0
    cache_creation_input_tokens: Count = 0
    cache_read_input_tokens: Count = 0
    cost_usd: NonNegative | None = None
    """Sum over probes that reported a cost; ``None`` when none did."""
    priced_probes: Count = 0
    duration_ms: Count = 0


class Artifact(Frozen):
    schema_version: Annotated[int, StrictNumber] = ARTIFACT_SCHEMA_VERSION
    tool_version: str = ""
    catalog: CatalogInfo
    queries_digest: str
    runtime: RuntimeInfo
    attempts: Annotated[int, StrictNumber, Field(ge=1)]
    counts: Counts
    metrics: Metrics
    denominators: dict[str, Count]
    """The denominator of every run-level metric (probes, or queries for consistency)."""
    intervals: dict[str, Interval | None]
    classes: list[ClassStats]
    by_kind: list[KindStats] = Field(default_factory=list)
    confusion: list[ConfusionCell]
    collisions: list[Collision]
    top_attractors: list[Attractor]
    usage: UsageTotals
    warnings: list[str] = Field(default_factory=list)
    outcomes: Outcomes = Field(default_factory=Outcomes.empty)
    digest: str | None = None

    def metric(self, name: str) -> float | None:
        return getattr(self.metrics, name)

    def interval(self, name: str) -> Interval | None:
        return self.intervals.get(name)

    def class_stats(self, label: str) -> ClassStats | None:
        return next((c for c in self.classes if c.label == label), None)


def built_as_validated(cls: type[_M], rows: Sequence[dict[str, Any]]) -> list[_M]:
    """``[cls.model_validate(row) for row in rows]`` for rows whose every value is already what validation
    makes of it (nested models already models) and whose keys are the model's fields in their declared
    order: the models are laid out directly (~1 µs each instead of ~10), once the first row is seen to
    come out exactly as validation lays it out — else every row is validated."""
    if not rows:
        return []
    first = cls.model_validate(rows[0])
    put, n, again = object.__setattr__, len(rows), itertools.repeat
    out: list[_M] = list(map(cls.__new__, again(cls, n)))  # one C-level pass per attribute
    for name, values in (
        ("__dict__", rows),
        ("__pydantic_fields_set__", map(set, rows)),
        ("__pydantic_extra__", again(None, n)),
        ("__pydantic_private__", again(None, n)),
    ):
        collections.deque(map(put, out, again(name), values), maxlen=0)
    made = out[0]
    attrs = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
    if list(made.__dict__) != list(first.__dict__) or any(
        getattr(made, a) != getattr(first, a) for a in attrs
    ) or any(type(v) is not type(first.__dict__[k]) for k, v in made.__dict__.items()):
        return [cls.model_validate(row) for row in rows]
    return out


# -------------------------------------------------------------------------------------------- digest


def _canonical(data: Any) -> bytes:
    """Canonical JSON: keys sorted, no whitespace, UTF-8 (orjson, which also refuses NaN)."""
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


_OUTCOMES_SLOT = "\u0000outcomes\u0000"


def _head(artifact: Artifact) -> dict[str, Any]:
    return artifact.model_dump(mode="json", exclude={"digest", "outcomes"})


def _stream(artifact: Artifact, write: Callable[[bytes | memoryview], Any] | None) -> str:
    """The digest of ``artifact`` (canonical JSON of every field but ``digest``), computed in one pass
    over the outcome rows; with ``write``, the file's text (indented, one compact line per outcome
    row, the digest last) is handed to it on the way."""
    head = _head(artifact)
    slot = b'"outcomes":' + orjson.dumps(_OUTCOMES_SLOT)
    before, after = _canonical({**head, "outcomes": _OUTCOMES_SLOT}).split(slot)
    hasher = hashlib.sha256(before + b'"outcomes":[')
    if write is not None:
        write(orjson.dumps(head, option=orjson.OPT_INDENT_2)[:-2] + b',\n  "outcomes": [')
    first = True
    outcomes = artifact.outcomes
    if len(outcomes) >= _ARROW_ROWS and _has_pyarrow():
        indent = b"\n    "
        for chunk in outcomes.canonical_buffers((b",",) if write is None else (b"," + indent, b",")):
            if write is not None:
                if first:
                    write(indent)
                write(chunk[0])
            hasher.update(chunk[-1])
            first = False
    elif write is None:
        for text in artifact.outcomes.canonical_text(","):
            hasher.update(text.encode())
            first = False
    else:
        # the file's rows are the canonical ones, each on a line of its own: the canonical text is the
        # file's without those line breaks (a row holds none: JSON escapes them inside strings)
        indent = b"\n    "
        for text in artifact.outcomes.canonical_text("," + indent.decode()):
            data = indent + text.encode() if first else text.encode()
            write(data)
            hasher.update(data.replace(indent, b""))
            first = False
    hasher.update(b"]" + after)
    digest = "sha256:" + hasher.hexdigest()
    if write is not None:
        write((b"]" if first else b"\n  ]") + b',\n  "digest": ' + orjson.dumps(digest) + b"\n}\n")
    return digest


def artifact_digest(artifact: Artifact) -> str:
    """``sha256:<hex>`` of the canonical JSON of every field but ``digest``."""
    with cyclic_gc_paused():
        return _stream(artifact, None)


def write_artifact(artifact: Artifact, path: str | os.PathLike[str]) -> Artifact:
    """Write ``artifact`` with its digest (atomically: a reader never sees half a file); return it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb", buffering=1 << 20) as fh, cyclic_gc_paused():
                digest = _stream(artifact, fh.write)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise InputError(f"{path}: cannot write the artifact ({exc.strerror}); check --out") from exc
    except TypeError as exc:  # orjson: an integer past 64 bits (queries × a huge attempt number)
        if "64-bit" not in str(exc):
            raise
        raise InputError(
            f"{path}: a count of the artifact is past 2**63 − 1 (queries × attempts: "
            f"{artifact.counts.queries:,} × {artifact.attempts:,}); number attempts from 1 in the probe log"
        ) from exc
    return artifact.model_copy(update={"digest": digest})


MAX_ARTIFACT_BYTES = 2 << 30
"""Bytes an artifact may hold (one of 100,000 queries is a few hundred MB); larger is refused unread."""


def read_artifact(path: str | os.PathLike[str]) -> Artifact:
    """Read and verify an artifact; :class:`TamperedError` when its digest does not match its content."""
    with cyclic_gc_paused():
        return _read_artifact(Path(path))


def _read_artifact(path: Path) -> Artifact:
    from skillreach._io.paths import refuse_special_file

    refuse_special_file(path, "artifact.json a study wrote")
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_ARTIFACT_BYTES:
                raise InputError(
                    f"{path}: {size:,} bytes, more than the {MAX_ARTIFACT_BYTES >> 30} GiB an artifact may "
                    "hold; pass the artifact.json a study wrote"
                )
            raw = fh.read(MAX_ARTIFACT_BYTES + 1)
        if len(raw) > MAX_ARTIFACT_BYTES:
            raise InputError(f"{path}: it grew past the {MAX_ARTIFACT_BYTES >> 30} GiB an artifact may hold")
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such artifact; pass the artifact.json a study wrote") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read the artifact ({exc.strerror})") from exc
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{path}: not an artifact (invalid JSON: {exc})") from exc
    if not isinstance(data, dict) or "schema_version" not in data:
        raise InputError(f"{path}: not an artifact (no schema_version); pass the artifact.json a study wrote")
    version = data.get("schema_version")
    if type(version) is not int or version != ARTIFACT_SCHEMA_VERSION:
        raise InputError(
            f"{path}: artifact schema_version {version!r} is not supported (this skillreach reads "
            f"{ARTIFACT_SCHEMA_VERSION}); re-score the probes with this version"
        )
    stored = data.get("digest")
    if not isinstance(stored, str) or not stored:
        raise TamperedError(f"{path}: the artifact carries no digest; re-score the probes to write one")
    actual = "sha256:" + sha256_hex(_canonical({k: v for k, v in data.items() if k != "digest"}))
    if actual != stored:
        raise TamperedError(
            f"{path}: digest does not match the content (stored {stored[:19]}…, content {actual[:19]}…); "
            "the artifact was changed after it was written — re-score the probes"
        )
    try:
        return Artifact.model_validate(data)
    except (ValidationError, ValueError) as exc:
        if isinstance(exc, ValidationError):
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "artifact"
            msg = err["msg"]
        else:
            where, msg = "outcomes", str(exc)
        raise InputError(f"{path}: field {where}: {msg}") from exc
