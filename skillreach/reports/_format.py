"""Number formatting shared by every report: rates as ``0.800 [0.376, 0.964]``, nulls as ``n/a``."""

from __future__ import annotations

from collections.abc import Sequence

import jinja2

__all__ = ["METRIC_HELP", "METRIC_TITLES", "fmt_ci", "fmt_num", "fmt_rate"]

NULL = "n/a"

METRIC_TITLES = {
    "top1_accuracy": "Top-1 accuracy",
    "entrypoint_accuracy": "Entry-point accuracy",
    "trajectory_reachability": "Trajectory reachability",
    "step_efficiency": "Step efficiency",
    "redundancy": "Redundancy",
    "abstention_rate": "Abstention rate",
    "false_abstention_rate": "False abstention rate",
    "oos_detection": "Out-of-scope detection",
    "consistency": "Consistency",
    "macro_precision": "Macro precision",
    "macro_recall": "Macro recall",
    "macro_f1": "Macro F1",
}

METRIC_HELP = {
    "top1_accuracy": "first skill invoked (acceptable ones aside) is the expected one; none if out of scope",
    "entrypoint_accuracy": "same figure as top-1 accuracy",
    "trajectory_reachability": "expected skill reached at any turn (in-scope probes)",
    "step_efficiency": "mean 1/rank of the expected skill in the trajectory (in-scope probes)",
    "redundancy": "mean extra skills invoked beyond the first (in-scope probes)",
    "abstention_rate": "no skill invoked (all scored probes)",
    "false_abstention_rate": "no skill invoked although one was expected",
    "oos_detection": "no skill invoked for an out-of-scope request",
    "consistency": "queries whose first invocation is the same on every attempt",
    "macro_precision": "mean precision over classes expected or predicted",
    "macro_recall": "mean recall over classes expected at least once",
    "macro_f1": "mean F1 over classes expected at least once",
}


def fmt_num(value: float | None, digits: int = 3) -> str:
    return NULL if value is None else f"{value:.{digits}f}"


def fmt_ci(ci: Sequence[float] | None, digits: int = 3) -> str:
    return "" if ci is None else f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def fmt_rate(value: float | None, ci: Sequence[float] | None = None, digits: int = 3) -> str:
    """``0.800 [0.376, 0.964]``; the value alone without an interval; ``n/a`` for a null rate."""
    if value is None:
        return NULL
    return f"{fmt_num(value, digits)} {fmt_ci(ci, digits)}".rstrip()


def template_env(*, html: bool) -> jinja2.Environment:
    """A Jinja2 environment over ``skillreach/templates`` with the shared number filters (``num``, ``ci``,
    ``rate``, ``json``): autoescaped for HTML, not for markdown (whose cells go through ``md``). Each
    report adds its own filters to the environment it caches."""
    import json

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("skillreach", "templates"),
        autoescape=html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=not html,
    )
    env.filters.update(num=fmt_num, ci=fmt_ci, rate=fmt_rate, json=json.dumps)
    return env
