"""The review page of generated drafts (``skillreach queries review``): one self-contained HTML file
whose buttons produce the decisions file that ``queries seal --review`` applies."""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup

from skillreach.models import QuerySet
from skillreach.reports._format import template_env

__all__ = ["render_review"]


def render_review(qs: QuerySet, rows: list[dict[str, Any]], *, source: str) -> str:
    skills = sorted({q.expected_skill for q in qs.queries if q.expected_skill} | {
        s for q in qs.queries for s in q.acceptable_skills
    })
    digest = qs.provenance.digest or qs.compute_digest()
    payload = json.dumps({"rows": rows, "skills": skills, "digest": digest, "source": source},
                         ensure_ascii=False)
    # inside <script>: no HTML entities are decoded there, so only "</" must not appear
    safe = Markup(payload.replace("</", "<\\/").replace("<!--", "<\\!--"))
    return template_env(html=True).get_template("review.html.j2").render(
        rows=rows, source=source, digest=digest, payload=safe
    )
