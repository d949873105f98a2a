"""What a study is summed up by: its headline figures (stored with the study, published as a Prefect
table) and, when it fails, one redacted line."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["HEADLINE_METRICS", "describe", "headline"]

HEADLINE_METRICS = (
    "top1_accuracy",
    "trajectory_reachability",
    "false_abstention_rate",
    "oos_detection",
    "consistency",
    "macro_f1",
)


def headline(artifact: Any) -> dict[str, Any]:
    """The figures a run is summed up by (stored with the study, published as a Prefect table)."""
    out: dict[str, Any] = {}
    for name in HEADLINE_METRICS:
        value = artifact.metric(name)
        ci = artifact.interval(name)
        out[name] = None if value is None else round(float(value), 4)
        out[f"{name}_ci"] = None if ci is None else [round(float(ci[0]), 4), round(float(ci[1]), 4)]
    out["probes"] = artifact.counts.probes
    out["scored"] = artifact.counts.scored
    out["errors"] = artifact.counts.errors
    out["cost_usd"] = artifact.usage.cost_usd
    return out


def describe(error: BaseException | str) -> str:
    """One line for the study row: our errors' messages as they are, others as type: text, redacted."""
    from skillreach.errors import SkillreachError
    from skillreach.study.config import redact

    if isinstance(error, str):
        text = error
    elif isinstance(error, SkillreachError):
        text = error.message
    elif isinstance(error, KeyboardInterrupt | asyncio.CancelledError):
        text = "interrupted"
    else:
        text = f"{type(error).__name__}: {error}"
    return str(redact(" ".join(text.split())))[:2000]
