"""Scoring: probe records, or the lines of a probes.jsonl, read into a :class:`ProbeTable` (by msgspec in
blocks, or by pyarrow in columns for a large log); a query set and its probes scored into the counts of
every class, query kind and the run, with their intervals (:func:`score`); the :class:`Artifact` that
holds them, written and read digest-checked; and the intervals and per-query statistics with which
artifacts are compared.

The names below are imported from their modules on first use, so importing one module of the wing
(``intervals``, say) loads no other."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillreach.scoring._queries import prepare_queries
    from skillreach.scoring.artifact import (
        RUN_METRICS,
        Artifact,
        ClassStats,
        ProbeOutcome,
        RuntimeInfo,
        read_artifact,
        write_artifact,
    )
    from skillreach.scoring.intervals import clustered_wilson, newcombe_paired, paired_t_interval
    from skillreach.scoring.query_stats import (
        ArmQueries,
        bootstrap_weights,
        clip,
        f1_macro,
        precision,
        quantiles,
    )
    from skillreach.scoring.scorer import score
    from skillreach.scoring.table import ProbeTable

__all__ = [
    "RUN_METRICS",
    "ArmQueries",
    "Artifact",
    "ClassStats",
    "ProbeOutcome",
    "ProbeTable",
    "RuntimeInfo",
    "bootstrap_weights",
    "clip",
    "clustered_wilson",
    "f1_macro",
    "newcombe_paired",
    "paired_t_interval",
    "precision",
    "prepare_queries",
    "quantiles",
    "read_artifact",
    "score",
    "write_artifact",
]

_MODULES = {
    "_queries": ("prepare_queries",),
    "artifact": ("RUN_METRICS", "Artifact", "ClassStats", "ProbeOutcome", "RuntimeInfo", "read_artifact",
                 "write_artifact"),
    "intervals": ("clustered_wilson", "newcombe_paired", "paired_t_interval"),
    "query_stats": ("ArmQueries", "bootstrap_weights", "clip", "f1_macro", "precision", "quantiles"),
    "scorer": ("score",),
    "table": ("ProbeTable",),
}  # fmt: skip
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A name of ``__all__`` from its module, on first use (then kept here)."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
