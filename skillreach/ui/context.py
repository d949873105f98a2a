"""What every page reads from: the store, the settings, the cached sources, whether decisions may be
written; and the small helpers the pages share (a report rendered by the commands, embedded in a page)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillreach.ui.sources import Sources

__all__ = ["DEPLOYMENTS", "UiContext", "embed_report", "when"]

DEPLOYMENTS = {"compliance": "nightly-compliance", "rebaseline": "rebaseline-all", "study": "study"}
"""Study kinds in the store → the deployment that runs them (as ``skillreach status`` names them)."""


@dataclass
class UiContext:
    store: Any
    settings: Any
    sources: Sources
    writes: bool = False
    """Decisions may be written (``skillreach ui --allow-writes``)."""
    prefect_ui: str | None = None
    """The Prefect UI a flow run's page is linked to (``PREFECT_UI_URL``)."""
    started: datetime | None = None
    warmed: threading.Event = field(default_factory=threading.Event)
    """Set once the start-up reads are done (the skills table once, the live events once)."""

    @classmethod
    def build(cls, *, store: Any, settings: Any, baselines_dir: Path, branch: str | None,
              skills_dirs: list[Path], writes: bool, prefect_ui: str | None) -> UiContext:
        sources = Sources(store=store, settings=settings, baselines_dir=baselines_dir, branch=branch,
                          skills_dirs=skills_dirs)
        return cls(store, settings, sources, writes, prefect_ui, datetime.now(UTC))


def when(value: datetime | None) -> str:
    """``2026-12-03 02:14 UTC``; ``-`` for nothing."""
    if value is None:
        return "-"
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


_STYLE = re.compile(r"<style>(.*?)</style>", re.DOTALL)
_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.DOTALL)


def embed_report(document: str, scope: str = "report") -> tuple[str, str]:
    """(its CSS scoped to ``.{scope}`` with ``@scope``, its body) of a page the commands render (the
    report, the diff page, the agents' matrix): the same markup, inside the dashboard's page. The
    document is ours (every text in it escaped by its renderer), so its ``<style>`` and ``<body>`` are
    found by their tags."""
    from skillreach._io.redact import redact_text

    css = "\n".join(_STYLE.findall(document))
    body = _BODY.search(document)
    inner = redact_text(body.group(1) if body else document)  # the one redaction, as every page's text
    css = css.replace(":root", ":scope").replace("body {", ":scope {")
    return f"@scope (.{scope}) {{\n{css}\n}}", inner
