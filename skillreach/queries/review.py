"""A person between generation and the sealed set: the drafts a reviewer sees (with the cited body line,
leak and near-duplicate flags), and the decisions file the review page downloads, applied at sealing.

The decisions file (JSON, written by the page ``skillreach queries review`` produces)::

    {"kind": "skillreach.review", "drafts_digest": "sha256:…", "reviewer": "…",
     "decisions": {"<query id>": {"decision": "accept" | "reject" | "relabel", "expected_skill": "…"}}}

``relabel`` names the skill the query belongs to instead (its kind is kept). Every draft needs a
decision; a decision for an id that is not a draft, or a relabel to a skill that is not in the set's
skills, is refused with the id named.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from skillreach.errors import InputError
from skillreach.models import Query, QuerySet

__all__ = ["NEAR_DUPLICATE_JACCARD", "apply_review", "draft_rows", "read_decisions"]

NEAR_DUPLICATE_JACCARD = 0.6
"""Drafts whose word sets overlap this much (Jaccard) are flagged as near duplicates of each other
(generation drops pairs from 0.8 on; the reviewer sees the closest that are left)."""

_WORD = re.compile(r"\w+", re.UNICODE)
_CITE = re.compile(r'cites [\w.-]+: "(.*)"\s*$', re.DOTALL)
DECISIONS = ("accept", "reject", "relabel")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def draft_rows(qs: QuerySet, leaks: dict[str, list[str]] | None = None) -> list[dict[str, Any]]:
    """One row per draft: id, text, kind, expected skill, the cited body line, leak reasons and the ids
    of its near duplicates."""
    leaks = leaks or {}
    words = {q.id: _words(q.text) for q in qs.queries}
    rows = []
    for q in qs.queries:
        near = []
        for other in qs.queries:
            if other.id == q.id:
                continue
            a, b = words[q.id], words[other.id]
            if a and b and len(a & b) / len(a | b) >= NEAR_DUPLICATE_JACCARD:
                near.append(other.id)
        cited = _CITE.search(q.notes or "")
        rows.append(
            {
                "id": q.id,
                "text": q.text,
                "kind": q.kind,
                "expected_skill": q.expected_skill,
                "cited": cited.group(1) if cited else "",
                "notes": q.notes or "",
                "leak": leaks.get(q.id, []),
                "near_duplicates": near,
            }
        )
    return rows


def read_decisions(path: Path) -> tuple[dict[str, Any], str]:
    """The decisions file and the SHA-256 of its bytes; one InputError naming the file otherwise."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(
            f"{path}: cannot read the review decisions ({exc.strerror}); pass --review FILE"
        ) from exc
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({exc}); pass the file the review page downloaded") from exc
    if not isinstance(doc, dict) or doc.get("kind") != "skillreach.review" or not isinstance(
        doc.get("decisions"), dict
    ):
        raise InputError(f"{path}: not a skillreach review decisions file (kind skillreach.review)")
    return doc, "sha256:" + hashlib.sha256(data).hexdigest()


def apply_review(qs: QuerySet, doc: dict[str, Any], *, source: str) -> tuple[QuerySet, dict[str, Any]]:
    """The reviewed set (rejected drafts dropped, relabelled ones with their new skill) and what the
    review did, for the provenance."""
    decisions: dict[str, Any] = doc["decisions"]
    ids = {q.id for q in qs.queries}
    unknown = sorted(set(decisions) - ids)
    if unknown:
        raise InputError(f"{source}: decision for {unknown[0]!r}, which is not one of the drafts")
    skills = {q.expected_skill for q in qs.queries if q.expected_skill} | {
        s for q in qs.queries for s in q.acceptable_skills
    }
    kept: list[Query] = []
    counts = dict.fromkeys(DECISIONS, 0)
    for q in qs.queries:
        d = decisions.get(q.id)
        if not isinstance(d, dict) or d.get("decision") not in DECISIONS:
            raise InputError(
                f"{source}: draft {q.id!r} has no decision (accept, reject or relabel); review it first"
            )
        what = d["decision"]
        counts[what] += 1
        if what == "reject":
            continue
        if what == "relabel":
            new = d.get("expected_skill")
            if q.kind == "out_of_scope" or not isinstance(new, str) or new not in skills:
                raise InputError(
                    f"{source}: draft {q.id!r} relabelled to {new!r}, not one of the set's skills"
                )
            kept.append(q.model_copy(update={"expected_skill": new}))
            continue
        kept.append(q)
    if not kept:
        raise InputError(f"{source}: every draft was rejected; nothing to seal")
    record = {
        "reviewer": str(doc.get("reviewer") or ""),
        "drafts_digest": str(doc.get("drafts_digest") or ""),
        "accepted": counts["accept"],
        "rejected": counts["reject"],
        "relabelled": counts["relabel"],
    }
    return qs.model_copy(update={"queries": tuple(kept)}), record
