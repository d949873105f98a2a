"""What the team's dashboard (``skillreach ui``) reads, by indexed queries (migration 0005).

- ``skill_points``: one row per (study, skill): the skill's baseline record as ``baseline record`` would
  build it from that study (the four metrics with their clustered intervals, the pins — model snapshot,
  corpus version, rubric version, runtime and its version —, the study's gate verdict for the skill and the
  positive cases it did not always reach, with who took them). Derived data: the dashboard fills it from
  the run folders (:mod:`skillreach.ui.indexer`), one study at a time, and a study's rows go with it
  (``ON DELETE CASCADE``: ``skillreach gc`` needs nothing more).
- ``skill_point_studies``: which studies were read (with what was found, or why nothing was), so a
  study is read once.
- Indexes for the pages: studies by time (and kind), alerts by skill and by event, baselines by skill and
  time, points by skill and time.

Every list is paginated (``limit``/``offset``) and every query filters on an indexed column.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    case,
    delete,
    exists,
    func,
    literal,
    select,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from skillreach.store.database import (
    AlertRow,
    ArtifactRow,
    Base,
    BaselineRow,
    ProbeRow,
    Store,
    StudyRow,
    _now,
)

__all__ = [
    "BREACH_EVENTS",
    "IndexedStudyRow",
    "SkillPointRow",
    "StudyFilter",
    "agent_folders",
    "alerts_of",
    "artifact_path",
    "index_progress",
    "latest_points",
    "pending_studies",
    "probe_page",
    "probe_row",
    "save_points",
    "skill_points",
    "skill_runtimes",
    "store_skills",
    "studies_in",
    "studies_page",
    "study_alert_counts",
    "study_kinds",
]

BREACH_EVENTS = ("skillreach.gate.breached",)
"""The alert events that make a study *breached* (as ``skillreach status`` counts them)."""


class SkillPointRow(Base):
    """One skill as one study measured it (see the module docstring)."""

    __tablename__ = "skill_points"
    __table_args__ = (
        UniqueConstraint("study_id", "skill", name="uq_skill_point"),
        Index("ix_skill_points_skill_at", "skill", "at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    study_id: Mapped[str] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    skill: Mapped[str] = mapped_column(String(200))
    at: Mapped[datetime] = mapped_column()
    kind: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(128))
    runtime: Mapped[str] = mapped_column(String(64))
    runtime_version: Mapped[str | None] = mapped_column(String(128), default=None)
    corpus_version: Mapped[str] = mapped_column(String(80))
    rubric_version: Mapped[str | None] = mapped_column(String(80), default=None)
    skill_version: Mapped[str | None] = mapped_column(String(128), default=None)
    metrics: Mapped[dict[str, Any]] = mapped_column()
    """metric → ``{value, ci95, n, cases}`` or ``None`` (the record's ``metrics``)."""
    verdict: Mapped[str | None] = mapped_column(String(32), default=None)
    """The study's gate for this skill: breach, inconclusive, ok, drift, or why it was not compared
    (``None``: the study was not gated)."""
    baseline_id: Mapped[str | None] = mapped_column(String(200), default=None)
    """The baseline the gate compared with."""
    lost: Mapped[list[Any]] = mapped_column(default=list)
    """``[case id, probes that missed, probes, {taker: probes}]`` per positive case not always reached."""


class IndexedStudyRow(Base):
    """A study the dashboard has read into ``skill_points`` (``note``: why it gave no point)."""

    __tablename__ = "skill_point_studies"

    study_id: Mapped[str] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), primary_key=True)
    indexed_at: Mapped[datetime] = mapped_column(default=_now)
    points: Mapped[int] = mapped_column(Integer, default=0)
    note: Mapped[str | None] = mapped_column(Text, default=None)


# The pages' indexes on the tables of migration 0001 (declared here so the models match the migrations).
Index("ix_studies_created_at", StudyRow.__table__.c.created_at)
Index("ix_studies_kind_created_at", StudyRow.__table__.c.kind, StudyRow.__table__.c.created_at)
Index("ix_alerts_skill_created_at", AlertRow.__table__.c.skill, AlertRow.__table__.c.created_at)
Index("ix_alerts_event_study", AlertRow.__table__.c.event, AlertRow.__table__.c.study_id)
Index("ix_baselines_skill_created_at", BaselineRow.__table__.c.skill, BaselineRow.__table__.c.created_at)


# ----------------------------------------------------------------------------------------- the index


def pending_studies(store: Store, limit: int = 50) -> list[StudyRow]:
    """Finished studies not read yet, newest first."""
    done = exists().where(IndexedStudyRow.study_id == StudyRow.id)
    stmt = (select(StudyRow).where(StudyRow.status == "done", ~done)
            .order_by(StudyRow.created_at.desc(), StudyRow.id).limit(limit))
    with store.session() as s:
        return list(s.scalars(stmt))


def save_points(
    store: Store, study_id: str, points: Sequence[Mapping[str, Any]], note: str | None = None
) -> int:
    """Replace the study's points with ``points`` (each a ``skill_points`` row's columns but the id) and
    mark it read; one transaction. Returns the points written."""
    with store.writing() as s:
        s.execute(delete(SkillPointRow).where(SkillPointRow.study_id == study_id))
        s.execute(delete(IndexedStudyRow).where(IndexedStudyRow.study_id == study_id))
        s.add_all([SkillPointRow(study_id=study_id, **dict(p)) for p in points])
        s.add(IndexedStudyRow(study_id=study_id, points=len(points), note=note))
    return len(points)


def index_progress(store: Store) -> tuple[int, int]:
    """(finished studies read, finished studies)."""
    with store.session() as s:
        total = s.scalar(select(func.count()).select_from(StudyRow).where(StudyRow.status == "done")) or 0
        read = s.scalar(
            select(func.count()).select_from(IndexedStudyRow)
            .join(StudyRow, StudyRow.id == IndexedStudyRow.study_id).where(StudyRow.status == "done")
        ) or 0
    return int(read), int(total)


# --------------------------------------------------------------------------------------------- points


def skill_points(
    store: Store, skill: str, *, runtime: str | None = None, limit: int = 1000
) -> list[SkillPointRow]:
    """The skill's newest ``limit`` points (of one runtime, when given), oldest first."""
    stmt = select(SkillPointRow).where(SkillPointRow.skill == skill)
    if runtime is not None:
        stmt = stmt.where(SkillPointRow.runtime == runtime)
    stmt = stmt.order_by(SkillPointRow.at.desc(), SkillPointRow.id.desc()).limit(limit)
    with store.session() as s:
        return list(reversed(list(s.scalars(stmt))))


def skill_runtimes(store: Store, skill: str) -> list[tuple[str, int, datetime]]:
    """(runtime, points, newest) of every runtime that measured the skill, the newest first."""
    newest = func.max(SkillPointRow.at)
    stmt = (select(SkillPointRow.runtime, func.count(), newest).where(SkillPointRow.skill == skill)
            .group_by(SkillPointRow.runtime).order_by(newest.desc()))
    with store.session() as s:
        return [(str(r), int(n), at) for r, n, at in s.execute(stmt)]


def latest_points(store: Store, *, kinds: Collection[str] | None = None,
                  skills: Collection[str] | None = None, gated: bool = False) -> dict[str, SkillPointRow]:
    """Every skill's newest point (of a study of one of ``kinds``, when given; ``gated``: whose study
    gated the skill). One ``ORDER BY at DESC LIMIT 1`` per skill, on the (skill, at) index: the newest
    rows are read first and the first that matches ends the search (a ``GROUP BY`` joined back would
    read every point of every skill)."""
    conditions = []
    if kinds is not None:
        conditions.append(SkillPointRow.kind.in_(list(kinds)))
    if gated:
        conditions.append(SkillPointRow.verdict.is_not(None))
    out: dict[str, SkillPointRow] = {}
    with store.session() as s:
        names = list(skills) if skills is not None else _point_skills(s)
        for name in names:
            stmt = (select(SkillPointRow).where(SkillPointRow.skill == name, *conditions)
                    .order_by(SkillPointRow.at.desc()).limit(1))
            row = s.scalars(stmt).first()
            if row is not None:
                out[name] = row
    return out


_SKIP_SCAN = text(
    "WITH RECURSIVE names(skill) AS ("
    " SELECT min(skill) FROM {table}"
    " UNION ALL SELECT (SELECT min(skill) FROM {table} WHERE skill > names.skill) FROM names"
    " WHERE names.skill IS NOT NULL) SELECT skill FROM names WHERE skill IS NOT NULL"
)


def _distinct_skills(s: Any, table: str) -> list[str]:
    """The distinct skills of ``table``, one index probe per skill (a recursive skip scan on the
    ``skill`` index: ``SELECT DISTINCT`` reads every row on PostgreSQL, which has no skip scan)."""
    return [str(r) for r in s.scalars(text(_SKIP_SCAN.text.format(table=table)))]


def _point_skills(s: Any) -> list[str]:
    return _distinct_skills(s, SkillPointRow.__tablename__)


def store_skills(store: Store) -> list[str]:
    """Every skill with a point or a stored baseline."""
    with store.session() as s:
        named = set(_point_skills(s)) | set(_distinct_skills(s, BaselineRow.__tablename__))
    return sorted(named)


# ---------------------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class StudyFilter:
    """The runs list's filters (``None``: any)."""

    kind: str | None = None
    status: str | None = None
    verdict: str | None = None
    """``breached`` (a gate-breach alert), ``ok`` (done, none), or a status."""
    runtime: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def _filtered(stmt: Any, f: StudyFilter) -> Any:
    if f.kind:
        stmt = stmt.where(StudyRow.kind == f.kind)
    if f.status:
        stmt = stmt.where(StudyRow.status == f.status)
    if f.runtime:
        stmt = stmt.where(StudyRow.runtime == f.runtime)
    if f.since is not None:
        stmt = stmt.where(StudyRow.created_at >= f.since)
    if f.until is not None:
        stmt = stmt.where(StudyRow.created_at < f.until)
    if f.verdict in ("breached", "ok"):
        breached = exists().where(AlertRow.study_id == StudyRow.id, AlertRow.event.in_(BREACH_EVENTS))
        stmt = stmt.where(breached) if f.verdict == "breached" else stmt.where(
            StudyRow.status == "done", ~breached)
    elif f.verdict:
        stmt = stmt.where(StudyRow.status == f.verdict)
    return stmt


def studies_page(
    store: Store, f: StudyFilter, *, offset: int = 0, limit: int = 50
) -> tuple[list[StudyRow], int]:
    """One page of studies (newest first) and how many match."""
    rows_stmt = _filtered(select(StudyRow), f).order_by(StudyRow.created_at.desc(), StudyRow.id)
    count_stmt = _filtered(select(func.count()).select_from(StudyRow), f)
    with store.session() as s:
        rows = list(s.scalars(rows_stmt.offset(offset).limit(limit)))
        total = int(s.scalar(count_stmt) or 0)
    return rows, total


def study_kinds(store: Store) -> list[str]:
    """Every kind of study in the store (the (kind, created_at) index: one entry per kind read)."""
    with store.session() as s:
        return sorted(str(k) for k in s.scalars(select(StudyRow.kind).distinct()))


def study_alert_counts(store: Store, study_ids: Iterable[str]) -> dict[str, tuple[int, int]]:
    """study id → (gate breaches, alerts) for each study given (absent: none)."""
    ids = list(study_ids)
    if not ids:
        return {}
    breach = func.sum(case((AlertRow.event.in_(BREACH_EVENTS), 1), else_=0))
    stmt = (select(AlertRow.study_id, breach, func.count()).where(AlertRow.study_id.in_(ids))
            .group_by(AlertRow.study_id))
    with store.session() as s:
        return {str(sid): (int(b or 0), int(n)) for sid, b, n in s.execute(stmt)}


def alerts_of(store: Store, *, skill: str | None = None, study_id: str | None = None,
              limit: int = 50) -> list[AlertRow]:
    """The newest ``limit`` alerts of a skill and/or a study, newest first."""
    stmt = select(AlertRow).order_by(AlertRow.created_at.desc(), AlertRow.id.desc()).limit(limit)
    if skill is not None:
        stmt = stmt.where(AlertRow.skill == skill)
    if study_id is not None:
        stmt = stmt.where(AlertRow.study_id == study_id)
    with store.session() as s:
        return list(s.scalars(stmt))


# -------------------------------------------------------------------------------------------- probes


def probe_page(
    store: Store, study_id: str, *, offset: int = 0, limit: int = 50
) -> tuple[list[ProbeRow], int]:
    """One page of a study's probe rows (by query id, then attempt) and how many it has."""
    stmt = (select(ProbeRow).where(ProbeRow.study_id == study_id)
            .order_by(ProbeRow.query_id, ProbeRow.attempt).offset(offset).limit(limit))
    with store.session() as s:
        rows = list(s.scalars(stmt))
        total = s.scalar(select(func.count()).select_from(ProbeRow).where(ProbeRow.study_id == study_id))
    return rows, int(total or 0)


def probe_row(store: Store, study_id: str, query_id: str, attempt: int) -> ProbeRow | None:
    """One stored probe (the unique key's index)."""
    stmt = select(ProbeRow).where(ProbeRow.study_id == study_id, ProbeRow.query_id == query_id,
                                  ProbeRow.attempt == attempt)
    with store.session() as s:
        return s.scalars(stmt).first()


# ---------------------------------------------------------------------------------- artifacts, agents


def artifact_path(store: Store, digest: str) -> str | None:
    """Where the artifact of this digest was written (the newest row of it; the digest is indexed)."""
    stmt = (select(ArtifactRow.path).where(ArtifactRow.digest == digest)
            .order_by(ArtifactRow.created_at.desc(), ArtifactRow.id.desc()).limit(1))
    with store.session() as s:
        return s.scalar(stmt)


def agent_folders(store: Store, *, limit: int = 50) -> list[str]:
    """The folders of finished studies named after their runtime (``OUT/<runtime>``: what ``skillreach run
    --runtime a,b,…`` writes), the newest first (one row per folder, however many studies wrote it)."""
    named = StudyRow.out_dir.like(literal("%/").concat(StudyRow.runtime))
    newest = func.max(StudyRow.created_at)
    stmt = (select(StudyRow.out_dir).where(StudyRow.status == "done", named).group_by(StudyRow.out_dir)
            .order_by(newest.desc()).limit(limit))
    with store.session() as s:
        return [str(d) for d in s.scalars(stmt)]


def studies_in(store: Store, out_dirs: Collection[str]) -> list[StudyRow]:
    """The newest finished study of each of these folders."""
    stmt = (select(StudyRow).where(StudyRow.status == "done", StudyRow.out_dir.in_(list(out_dirs)))
            .order_by(StudyRow.created_at.desc(), StudyRow.id))
    with store.session() as s:
        out: dict[str, StudyRow] = {}
        for row in s.scalars(stmt):
            out.setdefault(row.out_dir, row)
    return list(out.values())
