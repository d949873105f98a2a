"""Flow run names an operator can read (``nightly-2026-12-03``, ``rebaseline-skill-added-ship-it``):
Prefect's ``flow_run_name`` callables, read from the run's parameters and its expected start."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

__all__ = ["ingest_name", "live_dropped_name", "nightly_name", "rebaseline_name", "study_name", "watch_name"]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def _params() -> dict[str, Any]:
    from prefect.runtime import flow_run

    return dict(flow_run.parameters or {})


def _start() -> datetime:
    from prefect.runtime import flow_run

    start = flow_run.scheduled_start_time
    return start.astimezone(UTC) if isinstance(start, datetime) else datetime.now(UTC)


def nightly_name() -> str:
    """``nightly-<slot or expected start date>``."""
    return f"nightly-{_params().get('slot') or _start().strftime('%Y-%m-%d')}"


def rebaseline_name() -> str:
    """``rebaseline-<event without skillreach.>[-<skill>]``: ``rebaseline-skill-added-ship-it``,
    ``rebaseline-model-snapshot-changed``, ``rebaseline-manual-2026-12-03``."""
    params = _params()
    reason = str(params.get("reason") or "manual").removeprefix("skillreach.")
    skill = params.get("skill")
    tail = skill if skill and skill != "*" else ("every-skill" if skill == "*" else None)
    if reason == "manual" and not tail:
        tail = _start().strftime("%Y-%m-%d")
    return "-".join(p for p in ("rebaseline", _slug(reason), _slug(str(tail)) if tail else "") if p)


def ingest_name() -> str:
    return f"ingest-{_start().strftime('%Y-%m-%dT%H%M')}"


def live_dropped_name() -> str:
    """``live-dropped-<skill>-<date>``."""
    return f"live-dropped-{_slug(str(_params().get('skill') or 'skill'))}-{_start().strftime('%Y-%m-%d')}"


def watch_name() -> str:
    return f"watch-{_start().strftime('%Y-%m-%dT%H%M')}"


def study_name() -> str:
    """``<kind>-<runtime>-<date>`` (``study-fake-2026-12-03``, ``compliance-keyword-2026-12-03``)."""
    params = _params()
    config = params.get("config")
    runtime = config.get("runtime") if isinstance(config, dict) else getattr(config, "runtime", None)
    parts = [str(params.get("kind") or "study"), str(runtime or "configured"),
             str(params.get("slot") or _start().strftime("%Y-%m-%d"))]
    return "-".join(_slug(p) for p in parts)
