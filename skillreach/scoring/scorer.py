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
- probes of different study fingerprints, runtimes or resolved model snapshots are refused, not mixed;
- with a catalog, a skill outside it that a query expects (a singleton or neighbourhood catalog) or
  that a probe invoked (the harness saw a skill it should not) becomes a label too, with a warning:
  Turn-1 conservation needs every truth and prediction to be a label, and paid-for probes are kept;
- outcomes, samples and every list come in query-id order, so the artifact does not depend on the
  order in which probes finished.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

import numpy as np

from skillreach import __version__
from skillreach._gc import cyclic_gc_paused
from skillreach.errors import InputError
from skillreach.models import NO_SKILL, Catalog, ProbeRecord, QuerySet
from skillreach.scoring._collisions import _attractors, _collisions
from skillreach.scoring._counting import _by_kind, _counts, _per_class, _run_level
from skillreach.scoring._probes import _probe_columns, _Probes
from skillreach.scoring._queries import _Queries, _query_columns, _query_fields, _QueryFields
from skillreach.scoring.artifact import (
    Artifact,
    ClassStats,
    ConfusionCell,
    Outcomes,
    RuntimeInfo,
    built_as_validated,
)
from skillreach.scoring.table import ProbeTable

__all__ = ["score"]


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
    probes of different studies (fingerprints, runtimes, model snapshots, models) mixed in one log,
    naming the line and field where the second value appears.
    """
    table = probes if isinstance(probes, ProbeTable) else ProbeTable.from_records(probes)
    with cyclic_gc_paused():
        return _score(query_set, table, catalog, runtime_info, attempts)


def _mixed(table: ProbeTable, name: str, values: set[str], what: str) -> InputError | None:
    """The error for a log whose ``name`` field holds two values or more: it names the line where the
    second value appears and the line of the first (``what`` says what to do); None for one value."""
    found = sorted(v for v in values if v)
    if len(found) < 2:
        return None
    lines = table.first_lines
    found.sort(key=lambda v: (lines.get((name, v), 0), v))
    first, second = found[0], found[1]
    at = lines.get((name, second))
    where = f"{table.source}:{at}" if at is not None else table.source
    since = f"line {lines[(name, first)]}" if (name, first) in lines else "another line"
    return InputError(
        f"{where}: field {name!r} is {_short(second)}, but {since} has {_short(first)}: {what}"
    )


def _short(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}…"


def _refuse_mixed(table: ProbeTable) -> None:
    """Refuse a log that mixes runtimes, model snapshots, models (unless one snapshot names them all:
    aliases of one model) or study configurations, naming the line and field (spec/metrics.md)."""
    snapshots = sorted(m for m in table.resolved_models if m)
    listed = f"{', '.join(snapshots[:3])}{', …' if len(snapshots) > 3 else ''}"
    checks = [
        ("runtime", table.runtimes, "probes of different runtimes in one log; score each runtime's probes "
         "separately"),
        ("resolved_model", table.resolved_models,
         f"probes of {len(snapshots)} different model snapshots are mixed ({listed}); the model changed "
         "during the study — score each snapshot's probes separately"),
    ]
    if len(snapshots) != 1:  # with one snapshot, two model names are aliases of that one model
        checks.append(("model", table.models, "probes of two models in one log; split them with --out per "
                       "model, or score one"))
    checks.append(("fingerprint", table.fingerprints, f"probes of {len(table.fingerprints)} different "
                   "study configurations (fingerprints) in one log; score each study's probes separately"))
    for name, values, what in checks:
        error = _mixed(table, name, values, what)
        if error is not None:
            raise error


def _score(
    query_set: QuerySet,
    table: ProbeTable,
    catalog: Catalog | None,
    runtime_info: RuntimeInfo | Mapping[str, Any] | None,
    attempts: int | None,
) -> Artifact:
    warnings = list(table.warnings)
    _refuse_mixed(table)
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
