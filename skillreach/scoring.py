"""Scoring: a query set and its probe records → the :class:`~skillreach.artifacts.Artifact`. Pure.

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
- with a catalog, a skill outside it that a probe invoked (and that is not acceptable for the query)
  or that a query expects is refused: Turn-1 conservation needs every prediction to be a label.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillreach import __version__
from skillreach.artifacts import (
    PROPORTION_METRICS,
    Artifact,
    Outcomes,
    QueryInfo,
    RuntimeInfo,
)
from skillreach.errors import InputError
from skillreach.models import NO_SKILL, Catalog, ProbeRecord, QuerySet
from skillreach.stats import wilson

try:  # orjson is several times faster on a million lines; the standard library reads the same JSON
    import orjson

    _loads: Any = orjson.loads
except ImportError:  # pragma: no cover - orjson ships with prefect
    import json

    _loads = json.loads

__all__ = ["ProbeTable", "score"]

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_RICH_KEYS = ("tool_calls", "final_text", "rubric_grade")
"""Fields that only compliance and quality judging read; lines carrying them are kept whole."""

_MAX_DENSE_CONFUSION = 1 << 22
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
    def from_lines(cls, lines: Iterable[bytes | str], *, source: str = "probes.jsonl") -> ProbeTable:
        """Read probes.jsonl lines. Bad lines raise :class:`InputError` naming ``source:line`` and field.

        A last line cut short (no newline, not valid JSON: the writer was killed mid-line) is skipped
        with a warning; every other bad line is refused.
        """
        b = _Builder(source)
        pending: tuple[int, str] | None = None
        for lineno, line in enumerate(lines, 1):
            if pending is not None:
                raise InputError(f"{source}:{pending[0]}: {pending[1]}")
            text = line.strip()
            if not text:
                continue
            try:
                obj = _loads(text)
            except ValueError as exc:
                msg = f"not valid JSON ({exc}); fix or remove the line"
                ends = line.endswith(b"\n") if isinstance(line, bytes) else line.endswith("\n")
                if not ends and lineno > 1:
                    pending = (lineno, msg)  # refused unless it turns out to be the last line
                    continue
                raise InputError(f"{source}:{lineno}: {msg}") from exc
            if type(obj) is not dict:
                raise InputError(f"{source}:{lineno}: a probe line must be a JSON object")
            b.add_raw(lineno, obj)
        if pending is not None:
            b.warnings.append(f"{source}:{pending[0]}: last line cut short (not valid JSON); skipped")
        return b.build()


class _Builder:
    """Accumulates rows into columns; one place that interns names and checks fields."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.qvocab: dict[str, int] = {}
        self.svocab: dict[str, int] = {}
        self.q: list[int] = []
        self.attempt: list[int] = []
        self.inv_flat: list[int] = []
        self.inv_len: list[int] = []
        self.lines: list[int] = []
        self.errors: dict[int, str] = {}
        self.usage = [0, 0, 0, 0]
        self.cost = 0.0
        self.priced = 0
        self.duration = 0
        self.runtimes: set[str] = set()
        self.models: set[str] = set()
        self.resolved: set[str] = set()
        self.fingerprints: set[str] = set()
        self.rich: dict[int, Any] = {}
        self.warnings: list[str] = []

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
            self.cost += cost
            self.priced += 1
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
        if type(duration) not in (int, float):
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

    def build(self) -> ProbeTable:
        inv_len = np.asarray(self.inv_len, dtype=np.int64)
        off = np.zeros(len(inv_len) + 1, dtype=np.int64)
        np.cumsum(inv_len, out=off[1:])
        return ProbeTable(
            query_vocab=list(self.qvocab),
            q=np.asarray(self.q, dtype=np.int64),
            attempt=np.asarray(self.attempt, dtype=np.int64),
            skill_vocab=list(self.svocab),
            inv_flat=np.asarray(self.inv_flat, dtype=np.int64),
            inv_off=off,
            errors=self.errors,
            lines=np.asarray(self.lines, dtype=np.int64),
            usage=dict(zip(_USAGE_KEYS, self.usage, strict=True)),
            cost_usd=self.cost,
            priced=self.priced,
            duration_ms=self.duration,
            runtimes=self.runtimes,
            models=self.models,
            resolved_models=self.resolved,
            fingerprints=self.fingerprints,
            source=self.source,
            rich=self.rich,
            warnings=self.warnings,
        )


# --------------------------------------------------------------------------------------------- helpers


def _rate(hits: int | float, n: int) -> float | None:
    return None if n == 0 else float(hits) / n


def _ci(hits: int, n: int) -> tuple[float, float] | None:
    """Wilson interval; at 0 of n and n of n its end is exactly 0 (1), not 5.6e-17 off by rounding."""
    ci = wilson(hits, n)
    if ci is None:
        return None
    lo, hi = ci
    return (0.0 if hits == 0 else lo, 1.0 if hits == n else hi)


def _csr_gather(flat: np.ndarray, off: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR sequences of ``rows`` (in that order): (flat, lengths)."""
    lengths = (off[1:] - off[:-1])[rows]
    total = int(lengths.sum())
    starts = off[:-1][rows]
    new_off = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_off[1:])
    index = np.repeat(starts - new_off[:-1], lengths) + np.arange(total, dtype=np.int64)
    return flat[index], lengths


def _firsts(flat: np.ndarray, lengths: np.ndarray, empty: int) -> np.ndarray:
    """The first element of every sequence, ``empty`` for an empty one."""
    out = np.full(len(lengths), empty, dtype=np.int64)
    has = lengths > 0
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    out[has] = flat[starts[has]]
    return out


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
    """
    table = probes if isinstance(probes, ProbeTable) else ProbeTable.from_records(probes)
    warnings = list(table.warnings)
    queries = sorted(query_set.queries, key=lambda q: q.id)
    ids = [q.id for q in queries]
    if len(set(ids)) != len(ids):
        dup = next(i for i, j in itertools.pairwise(ids) if i == j)
        raise InputError(f"query set: query id {dup!r} appears twice; ids must be unique")
    n_q = len(queries)
    qindex = {qid: i for i, qid in enumerate(ids)}

    # ---- provenance checks
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

    # ---- labels
    if catalog is not None:
        skill_names = sorted(catalog.names)
        known = set(skill_names)
        for qu in queries:
            if qu.expected_skill is not None and qu.expected_skill not in known:
                raise InputError(
                    f"query {qu.id!r} expects skill {qu.expected_skill!r}, which is not in the catalog "
                    f"{catalog.id!r}; pass the --skills the queries were written for"
                )
    else:
        seen: set[str] = set(table.skill_vocab)
        for qu in queries:
            if qu.expected_skill is not None:
                seen.add(qu.expected_skill)
            seen.update(qu.acceptable_skills)
        seen.discard(NO_SKILL)
        skill_names = sorted(seen)
    labels = [*skill_names, NO_SKILL]
    n_labels = len(labels)
    no = n_labels - 1
    # The extended name space: labels, then names outside the catalog (acceptable or invoked).
    ext: dict[str, int] = {name: i for i, name in enumerate(labels)}
    for qu in queries:
        for a in qu.acceptable_skills:
            ext.setdefault(a, len(ext))
    for s in table.skill_vocab:
        ext.setdefault(s, len(ext))
    n_ext = len(ext)
    names = list(ext)

    truth_q = np.array([ext[qu.truth] for qu in queries], dtype=np.int64)
    in_scope_q = np.array([qu.in_scope for qu in queries], dtype=bool)

    # ---- probes → queries, superseded records dropped
    vq = np.array([qindex.get(v, -1) for v in table.query_vocab], dtype=np.int64)
    if len(vq) and (vq < 0).any():
        bad = int(np.flatnonzero(vq < 0)[0])
        row = int(np.flatnonzero(table.q == bad)[0])
        raise InputError(
            f"{table.where(row)}: probe of query {table.query_vocab[bad]!r}, which is not in the query "
            "set; score with the query set the probes were run with"
        )
    row_q = vq[table.q] if len(table) else np.zeros(0, dtype=np.int64)
    max_att = int(table.attempt.max()) if len(table) else 0
    key = row_q * (max_att + 1) + table.attempt
    order = np.argsort(key, kind="stable")
    ks = key[order]
    last = np.ones(len(ks), dtype=bool)
    if len(ks):
        last[:-1] = ks[1:] != ks[:-1]
    sel = order[last]  # rows kept, in (query id, attempt) order
    superseded = len(table) - len(sel)
    if superseded:
        warnings.append(
            f"{superseded} earlier probe record(s) superseded by a later record of the same query "
            "and attempt (a resumed study); their usage is still counted"
        )
    m = len(sel)
    qi = row_q[sel]
    att = table.attempt[sel]
    pos = np.full(len(table), -1, dtype=np.int64)
    pos[sel] = np.arange(m, dtype=np.int64)
    err = np.zeros(m, dtype=bool)
    errors: dict[int, str] = {}
    for r, msg in table.errors.items():
        at = int(pos[r])
        if at >= 0:
            err[at] = True
            errors[at] = msg

    if attempts is None:
        attempts = max(max_att, 1)
    within = int((att <= attempts).sum())
    missing = max(0, n_q * attempts - within)
    if missing:
        warnings.append(f"{missing} of {n_q * attempts} query × attempt pairs have no probe")

    # ---- raw sequences, acceptable skills removed
    lut = np.array([ext[s] for s in table.skill_vocab], dtype=np.int64)
    raw_flat, raw_len = _csr_gather(table.inv_flat, table.inv_off, sel)
    raw = lut[raw_flat] if len(raw_flat) else raw_flat
    rowof = np.repeat(np.arange(m, dtype=np.int64), raw_len)
    acc_keys = np.array(
        sorted(i * n_ext + ext[a] for i, qu in enumerate(queries) for a in qu.acceptable_skills),
        dtype=np.int64,
    )
    drop = err[rowof]
    if len(acc_keys):
        drop |= np.isin(qi[rowof] * n_ext + raw, acc_keys)
    kept = raw[~drop]
    kept_row = rowof[~drop]
    kept_len = np.bincount(kept_row, minlength=m).astype(np.int64)
    outside = kept >= n_labels
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        r = int(sel[kept_row[i]])
        raise InputError(
            f"{table.where(r)}: probe of query {table.query_vocab[int(table.q[r])]!r} invoked "
            f"{names[int(kept[i])]!r}, which is not in the catalog; pass the --skills the probes were "
            "run with"
        )

    predicted = _firsts(kept, kept_len, no)
    predicted[err] = -1
    raw_pred = _firsts(raw, raw_len, no)
    truth = truth_q[qi]
    in_scope = in_scope_q[qi]
    scored = ~err

    # ---- trajectory: first position of the expected skill in scored_inv
    hit = kept == truth[kept_row]
    hit_idx = np.flatnonzero(hit)
    reach = np.zeros(m, dtype=bool)
    recip = np.zeros(m, dtype=np.float64)
    if len(hit_idx):
        hit_rows = kept_row[hit_idx]
        first = np.ones(len(hit_rows), dtype=bool)
        first[1:] = hit_rows[1:] != hit_rows[:-1]
        rows = hit_rows[first]
        kept_off = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(kept_len, out=kept_off[1:])
        rank = hit_idx[first] - kept_off[rows] + 1
        reach[rows] = True
        recip[rows] = 1.0 / rank

    # ---- run-level metrics
    n_scored = int(scored.sum())
    isc = scored & in_scope
    oos = scored & ~in_scope
    n_in, n_oos = int(isc.sum()), int(oos.sum())
    abstain = predicted == no
    correct = int((scored & (predicted == truth)).sum())
    reached = int(reach[isc].sum())
    abst_all = int((abstain & scored).sum())
    abst_in = int((abstain & isc).sum())
    abst_oos = int((abstain & oos).sum())
    sq = qi[scored]
    pairs = np.unique(sq * (n_ext + 1) + raw_pred[scored])
    per_query = np.bincount(pairs // (n_ext + 1), minlength=n_q)
    n_queries_scored = int((per_query > 0).sum())
    n_consistent = int((per_query == 1).sum())

    hits = {
        "top1_accuracy": (correct, n_scored),
        "entrypoint_accuracy": (correct, n_scored),
        "trajectory_reachability": (reached, n_in),
        "abstention_rate": (abst_all, n_scored),
        "false_abstention_rate": (abst_in, n_in),
        "oos_detection": (abst_oos, n_oos),
        "consistency": (n_consistent, n_queries_scored),
    }
    assert set(hits) == set(PROPORTION_METRICS)
    metrics: dict[str, float | None] = {k: _rate(h, n) for k, (h, n) in hits.items()}
    metrics["step_efficiency"] = _rate(float(recip[isc].sum()), n_in)
    metrics["redundancy"] = _rate(float(np.maximum(kept_len[isc] - 1, 0).sum()), n_in)
    denominators = {k: n for k, (_, n) in hits.items()}
    denominators["step_efficiency"] = n_in
    denominators["redundancy"] = n_in
    intervals = {k: _ci(h, n) for k, (h, n) in hits.items()}

    # ---- per class (Turn-1 conservation)
    t, p = truth[scored], predicted[scored]
    support = np.bincount(t, minlength=n_labels)
    n_pred = np.bincount(p, minlength=n_labels)
    tp = np.bincount(t[t == p], minlength=n_labels)
    fp = n_pred - tp
    fn = support - tp
    traj_ok = np.where(in_scope, reach, kept_len == 0)[scored]
    traj = np.bincount(t[traj_ok], minlength=n_labels)
    classes: list[dict[str, Any]] = []
    for i, label in enumerate(labels):
        s_, pr_, tp_ = int(support[i]), int(n_pred[i]), int(tp[i])
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
                "fp": int(fp[i]),
                "fn": int(fn[i]),
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "trajectory_recall": int(traj[i]) / s_ if s_ else None,
                "recall_ci": _ci(tp_, s_),
                "precision_ci": _ci(tp_, pr_),
            }
        )
    active = [c for c in classes if c["support"] > 0 or c["predicted"] > 0]
    supported = [c for c in classes if c["support"] > 0]
    metrics["macro_precision"] = math.fsum(c["precision"] for c in active) / len(active) if active else None
    metrics["macro_recall"] = (
        math.fsum(c["recall"] for c in supported) / len(supported) if supported else None
    )
    metrics["macro_f1"] = math.fsum(c["f1"] for c in supported) / len(supported) if supported else None

    # ---- confusion, collisions, attractors
    cell = t * n_labels + p
    if n_labels * n_labels <= _MAX_DENSE_CONFUSION:
        dense = np.bincount(cell, minlength=n_labels * n_labels)
        cells = np.flatnonzero(dense)
        counts = dense[cells]
    else:
        cells, counts = np.unique(cell, return_counts=True)
    confusion = [
        {"expected": labels[c // n_labels], "predicted": labels[c % n_labels], "count": int(k)}
        for c, k in zip(cells.tolist(), counts.tolist(), strict=True)
    ]
    collisions = _collisions(queries, labels, cell, sq, t, p, no)
    top_attractors = _attractors(labels, classes, confusion)

    # ---- compliance and quality, for probes whose query carries checks
    compliance = np.full(m, -1, dtype=np.int8)
    quality = np.full(m, np.nan)
    checked = np.array([qu.checks is not None for qu in queries], dtype=bool)
    if checked.any():
        from skillreach.compliance import evaluate_probe

        for i in np.flatnonzero(checked[qi] & scored).tolist():
            judgement = evaluate_probe(queries[int(qi[i])], table.record(int(sel[i])))
            if judgement.compliance is not None:
                compliance[i] = int(judgement.compliance)
            if judgement.quality is not None:
                quality[i] = judgement.quality

    qinfo: list[QueryInfo] = [(qu.id, qu.kind.value, qu.truth, tuple(qu.acceptable_skills)) for qu in queries]
    kept_off_all = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(kept_len, out=kept_off_all[1:])
    raw_off = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(raw_len, out=raw_off[1:])
    outcomes = Outcomes(
        queries=qinfo,
        names=names,
        q=qi,
        attempt=att,
        inv_flat=raw,
        inv_off=raw_off,
        scored_flat=kept,
        scored_off=kept_off_all,
        predicted=predicted,
        errors=errors,
        compliance=compliance,
        quality=quality,
    )

    return Artifact.model_validate(
        {
            "tool_version": __version__,
            "catalog": _catalog_info(query_set, catalog, skill_names),
            "queries_digest": query_set.compute_digest(),
            "runtime": _runtime_info(table, runtime_info, warnings),
            "attempts": attempts,
            "counts": {
                "probes": m,
                "scored": n_scored,
                "errors": m - n_scored,
                "queries": n_q,
                "missing": missing,
                "superseded": superseded,
            },
            "metrics": metrics,
            "denominators": denominators,
            "intervals": intervals,
            "classes": classes,
            "confusion": confusion,
            "collisions": collisions,
            "top_attractors": top_attractors,
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


def _collisions(  # noqa: PLR0917 - private, called once with columns
    queries: Sequence[Any],
    labels: Sequence[str],
    cell: np.ndarray,
    sq: np.ndarray,
    t: np.ndarray,
    p: np.ndarray,
    no: int,
) -> list[dict[str, Any]]:
    """Confusion pairs with predicted ≠ truth and predicted ≠ NO_SKILL, with up to 3 sample queries."""
    n_labels = len(labels)
    mask = (p != t) & (p != no)
    if not mask.any():
        return []
    c_cell, c_q = cell[mask], sq[mask]
    cells, counts = np.unique(c_cell, return_counts=True)
    # distinct (cell, query) pairs, sorted by cell then query id
    pair = np.unique(c_cell * len(queries) + c_q)
    pair_cell = pair // len(queries)
    pair_q = pair % len(queries)
    start = np.searchsorted(pair_cell, cells)
    end = np.searchsorted(pair_cell, cells, side="right")
    out = []
    for c, k, a, b in zip(cells.tolist(), counts.tolist(), start.tolist(), end.tolist(), strict=True):
        out.append(
            {
                "expected": labels[c // n_labels],
                "predicted": labels[c % n_labels],
                "count": int(k),
                "queries": b - a,
                "samples": [
                    {"query_id": queries[j].id, "text": queries[j].text}
                    for j in pair_q[a : min(b, a + _SAMPLES)].tolist()
                ],
            }
        )
    out.sort(key=lambda c: (-c["count"], c["expected"], c["predicted"]))
    return out


def _attractors(
    labels: Sequence[str], classes: Sequence[Mapping[str, Any]], confusion: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Skills (not NO_SKILL) with fp > 0, by fp descending then name, with whom they pull from."""
    sources: dict[str, list[tuple[int, str]]] = {}
    for c in confusion:
        if c["predicted"] != c["expected"]:
            sources.setdefault(c["predicted"], []).append((c["count"], c["expected"]))
    out = [
        {
            "skill": c["label"],
            "fp": c["fp"],
            "predicted": c["predicted"],
            "precision": c["precision"],
            "pulled_from": [
                {"expected": e, "count": k}
                for k, e in sorted(sources.get(c["label"], []), key=lambda x: (-x[0], x[1]))[:_SAMPLES]
            ],
        }
        for c in classes
        if c["label"] != NO_SKILL and c["fp"] > 0
    ]
    out.sort(key=lambda a: (-a["fp"], a["skill"]))
    return out


def _catalog_info(query_set: QuerySet, catalog: Catalog | None, skill_names: list[str]) -> dict[str, Any]:
    if catalog is None:
        return {"id": query_set.catalog_id, "strategy": "inferred", "skills": skill_names, "digest": None}
    return {
        "id": catalog.id,
        "strategy": catalog.strategy,
        "skills": skill_names,
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
