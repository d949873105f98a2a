"""Uplift reports kept in a study folder (``uplift-<skill>.json``, written by ``skillreach uplift SKILL
--json``): the study's reports show each skill's uplift with its interval beside compliance and task
quality. A report of another query set than the artifact's is ignored (it measured other cases)."""

from __future__ import annotations

import os
from pathlib import Path

from skillreach.author.uplift import UPLIFT_FILE, UpliftReport, read_uplift_report

__all__ = ["read_uplift_reports"]


def read_uplift_reports(folder: str | os.PathLike[str], queries_digest: str | None) -> list[UpliftReport]:
    """The uplift reports of ``folder`` that ran the artifact's query set, by skill name."""
    prefix, suffix = UPLIFT_FILE.split("{skill}")
    out = []
    for path in sorted(Path(folder).glob(f"{prefix}*{suffix}")):
        skill = path.name[len(prefix) : len(path.name) - len(suffix)]
        report = read_uplift_report(path, skill)
        if queries_digest is None or report.queries_digest in (None, queries_digest):
            out.append(report)
    return out
