"""Reports of an artifact: a self-contained HTML page, a terminal scorecard and a markdown summary."""

from __future__ import annotations

from skillreach.reports._format import fmt_num, fmt_rate
from skillreach.reports.html import render_html
from skillreach.reports.markdown import render_markdown
from skillreach.reports.scorecard import print_scorecard

__all__ = ["fmt_num", "fmt_rate", "print_scorecard", "render_html", "render_markdown"]
