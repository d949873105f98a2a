"""What ``check --changed`` measures with, and what it probes: the yardstick read at the base revision
(:mod:`skillreach.baselines.yardstick`), one study group per set of pins, and each group's cases by scope
(:mod:`skillreach.baselines.scope`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillreach.baselines.records import BaselineRecord
    from skillreach.baselines.scope import BaseRecords, SkillEdit
    from skillreach.baselines.yardstick import Yardstick
    from skillreach.models import QuerySet, Skill

__all__ = ["Group", "base_catalog", "group_out", "read_yardstick", "scope_cases"]


@dataclass
class Group:
    """One study of a check: the skills gated with one query set, runtime, model and runs per case."""

    qrel: str
    """The query set as the records name it (relative to the repository's top, or absolute)."""
    runtime: str
    model: str
    runs: int
    members: list[tuple[str, BaselineRecord]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    """Skills the pull request adds whose cases this set holds: scored, not gated."""


def _relative(path: Path, top: Path) -> str:
    p = path if path.is_absolute() else (Path.cwd() / path)
    try:
        return Path(os.path.relpath(p.resolve(), top.resolve())).as_posix()
    except ValueError:
        return p.resolve().as_posix()


def read_yardstick(
    top: Path,
    rev: str,
    base: BaseRecords,
    *,
    queries: Path | None,
    accepted: Sequence[str],
    accepted_how: str,
) -> tuple[Yardstick, dict[str, QuerySet]]:
    """The yardstick change of this pull request and, per query set (by its repository path), the set
    the check probes (:func:`~skillreach.baselines.yardstick.yardstick_set`)."""
    from skillreach.baselines.yardstick import (
        Yardstick,
        diff_query_sets,
        read_query_set_at,
        record_changes,
        yardstick_set,
    )
    from skillreach.queries.sets import MAX_QUERY_FILE_BYTES, load_query_set

    paths: list[str] = []
    for rec in base.records.values():
        if rec.corpus_path and rec.corpus_path not in paths:
            paths.append(rec.corpus_path)
    if queries is not None:
        rel = _relative(queries, top)
        if rel not in paths:
            paths.append(rel)
    changes = []
    sets: dict[str, QuerySet] = {}
    for rel in paths:
        here = Path(rel) if Path(rel).is_absolute() else top / rel
        head = load_query_set(here) if here.is_file() else None
        at_base = (
            read_query_set_at(top, rev, rel, max_bytes=MAX_QUERY_FILE_BYTES)
            if not Path(rel).is_absolute() and not rel.startswith("../")
            else head  # outside the repository: no base revision to read it at
        )
        if at_base is None and head is None:
            continue  # named by a record, in neither tree: the group says it is missing
        changes.append(diff_query_sets(rel, at_base, head))
        sets[rel] = yardstick_set(
            at_base, head, accepted=accepted, source=f"{rel} at {rev[:12]} and the cases the change adds"
        )
    ys = Yardstick(
        rev=rev,
        query_sets=tuple(c for c in changes if c.any),
        records=record_changes(base.changed_here, base.files, top),
        accepted=tuple(sorted(set(accepted))),
        accepted_how=accepted_how,
    )
    return ys, sets


def base_catalog(now: Sequence[Skill], edits: Sequence[SkillEdit]) -> list[Skill]:
    """The catalog as it was at the base, as far as BM25 reach needs it: the skills of now with each
    edited description as it was, without the skills the change adds."""
    before = {e.name: e.base_description for e in edits if e.how == "description" and e.base_description}
    added = {e.name for e in edits if e.how == "added"}
    return [
        s.model_copy(update={"description": before[s.name]}) if s.name in before else s
        for s in now
        if s.name not in added
    ]


def scope_cases(
    scope: str,
    qs: QuerySet,
    edits: Sequence[SkillEdit],
    members: Sequence[str],
    *,
    skills_now: Sequence[Skill],
    records: Mapping[str, BaselineRecord],
    rivals_k: int,
) -> tuple[QuerySet, dict[str, str]]:
    """The cases a group probes under ``scope`` (and why each, for ``affected``)."""
    from skillreach.baselines.scope import case_takers, neighbourhood_cases, reachable_cases
    from skillreach.models import QuerySet as QS
    from skillreach.queries.sets import seal

    routing = [e for e in edits if e.routing]
    if scope == "all":
        return qs, {}
    if scope in ("neighbours", "neighbors"):
        return (neighbourhood_cases(qs, members), {}) if routing else (qs, {})
    why = reachable_cases(
        qs,
        edits,
        skills_now=skills_now,
        skills_base=base_catalog(skills_now, edits),
        taken_from=case_takers(records),
        k=rivals_k,
    )
    kept = tuple(q for q in qs.queries if q.id in why)
    source = qs.provenance.source or "query set"
    return seal(QS(catalog_id=qs.catalog_id, queries=kept), source=f"{source} (what the change reaches)"), why


def group_out(out: Path | None, index: int) -> Path:
    """The study folder of group ``index`` (0: ``--out`` itself, default ``.skillreach/check``)."""
    folder = out or Path(".skillreach") / "check"
    return folder if index == 0 else folder.with_name(f"{folder.name}-{index + 1}")


def merge_pins(groups: dict[tuple[str, str, str, int], Group], key: tuple[str, str, str, int]) -> Group:
    if key not in groups:
        groups[key] = Group(qrel=key[0], runtime=key[1], model=key[2], runs=key[3])
    return groups[key]


def metrics_sentence(record: Any) -> str:
    """``activation 0.875 [0.529, 0.978] over 8 cases, false activation 0.000 [0.000, 0.121], …``: a new
    skill's figures with their intervals (``unknown`` for what was not measured)."""
    parts = []
    for m in ("activation", "false_activation", "compliance", "task_quality"):
        mv = record.metrics.get(m)
        name = m.replace("_", " ")
        if mv is None:
            parts.append(f"{name} unknown")
        else:
            parts.append(f"{name} {mv.value:.3f} [{mv.ci95[0]:.3f}, {mv.ci95[1]:.3f}] over {mv.cases} cases")
    return ", ".join(parts)
