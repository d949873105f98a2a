"""What a pull request can affect, and what it is judged against.

- :func:`classify_edits`: each changed skill's edit, read against the base revision: ``added``,
  ``removed``, ``description`` (its name or description changed: the routing table every other skill
  is routed against changed too) or ``body`` (only what the skill says once loaded).
- :func:`base_records`: the baseline records as they are at the base revision (``git show``), never the
  pull request's tree — the base is the trusted side, so a branch cannot delete or rewrite its own bar —
  and the record files the pull request itself changes (named in the summary).
- :func:`skills_to_gate`: whose records a change can move. A routing change re-gates every skill with a
  record (``scope="all"``), or the edited skills, their BM25 rivals in both directions and every skill
  the base records' confusion pairs link to them (:func:`confusion_links`: the skills that took an
  edited skill's cases, and those whose cases an edited skill took) (``scope="neighbours"``); a
  body-only edit re-gates that skill.
- :func:`losses`: for a skill whose activation fell, which of its cases were lost and to which skill —
  the victim is named first, with the skill that took its traffic.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from skillreach.baselines.records import (
    BaselineRecord,
    ChangeSet,
    case_rates,
    git_output,
    parse_baseline,
)
from skillreach.errors import SkillreachError
from skillreach.models import Frozen, QuerySet, Skill

__all__ = [
    "BaseRecords",
    "Loss",
    "Scope",
    "SkillEdit",
    "base_records",
    "case_takers",
    "classify_edits",
    "confusion_links",
    "linked_by_confusion",
    "losses",
    "neighbourhood_cases",
    "neighbours",
    "reachable_cases",
    "screen_cases",
    "skills_to_gate",
    "within",
]

Scope = Literal["affected", "all", "neighbours"]
EditKind = Literal["added", "removed", "description", "body"]
MAX_RECORD_BYTES = 64 * 2**20
"""A base record larger than this is refused (records are a few hundred KiB at most)."""


class SkillEdit(Frozen):
    name: str
    how: EditKind
    file: str | None = None
    """The SKILL.md relative to the git top (``None`` for a removed skill)."""
    base_description: str | None = None
    """The description at the base revision (a description edit), for the boundary of a take."""

    @property
    def routing(self) -> bool:
        """The edit changes what every skill is routed against (the listing an agent sees)."""
        return self.how != "body"


def _frontmatter_of(text: str) -> tuple[Any, Any] | None:
    """(name, description) of a SKILL.md's text; ``None`` when it does not parse."""
    from skillreach.skills.discovery import read_frontmatter

    with tempfile.TemporaryDirectory(prefix="skillreach-base-") as tmp:
        path = Path(tmp, "SKILL.md")
        path.write_text(text, encoding="utf-8")
        try:
            data = read_frontmatter(path).data
        except SkillreachError:
            return None
    return data.get("name"), data.get("description")


def classify_edits(changes: ChangeSet, top: Path, rev: str) -> list[SkillEdit]:
    """Each skill ``changes`` lists, with what kind of edit it is against ``rev``."""
    edits = [SkillEdit(name=n, how="added", file=changes.skill_files.get(n)) for n in changes.added]
    edits += [SkillEdit(name=n, how="removed") for n in changes.removed]
    for name in changes.changed:
        if name in changes.added:
            continue
        file = changes.skill_files.get(name)
        base_text = git_output(["show", f"{rev}:{file}"], top) if file else None
        now = (top / file).read_text(encoding="utf-8", errors="replace") if file else None
        before_desc: str | None = None
        if base_text is None or now is None:
            how: EditKind = "description"  # moved or unreadable: treat it as a routing change
        else:
            before, after = _frontmatter_of(base_text), _frontmatter_of(now)
            how = "body" if before is not None and before == after else "description"
            if before is not None and isinstance(before[1], str):
                before_desc = before[1]
        edits.append(SkillEdit(name=name, how=how, file=file, base_description=before_desc))
    return sorted(edits, key=lambda e: e.name)


class BaseRecords(Frozen):
    rev: str
    folder: str
    """The records' folder relative to the git top."""
    records: dict[str, BaselineRecord]
    problems: tuple[str, ...] = ()
    """Base records that could not be read (one line each)."""
    changed_here: tuple[str, ...] = ()
    """Record files the pull request adds, edits or deletes (``M baselines/x.json``): not used."""
    files: dict[str, str] = Field(default_factory=dict)
    """Record file (relative to the git top) at the base → the skill it holds."""


def base_records(top: Path, rev: str, folder: str | os.PathLike[str]) -> BaseRecords:
    """The records under ``folder`` as they are at ``rev``, and the record files changed since."""
    rel = Path(os.path.relpath(Path(folder).resolve(), top.resolve())).as_posix()
    listing = git_output(["ls-tree", "-z", "--name-only", f"{rev}:{rel}"], top) if rel != ".." else None
    records: dict[str, BaselineRecord] = {}
    files: dict[str, str] = {}
    problems: list[str] = []
    for name in sorted(p for p in (listing or "").split("\0") if p.endswith(".json")):
        where = f"{rev[:12]}:{rel}/{name}"
        size = git_output(["cat-file", "-s", f"{rev}:{rel}/{name}"], top)
        if size is None or not size.isdigit() or int(size) > MAX_RECORD_BYTES:
            problems.append(f"{where}: not readable, or larger than {MAX_RECORD_BYTES // 2**20} MiB")
            continue
        text = git_output(["show", f"{rev}:{rel}/{name}"], top)
        if text is None:
            problems.append(f"{where}: not readable at the base revision")
            continue
        try:
            rec = parse_baseline(text, where)
        except SkillreachError as exc:
            problems.append(exc.message)
            continue
        if rec.skill != Path(name).stem:  # a skill is only ever gated against its own record
            problems.append(
                f"{where}: holds the record of {rec.skill!r}, not of {Path(name).stem!r}; a skill's record "
                f"is {rel}/<skill>.json — move it, or re-record it"
            )
            continue
        records[rec.skill] = rec
        files[f"{rel}/{name}"] = rec.skill
    diff = git_output(["diff", "--name-status", "--no-renames", rev, "--", rel], top) or ""
    untracked = git_output(["ls-files", "--others", "--exclude-standard", "--", rel], top) or ""
    changed = [" ".join(line.split("\t")) for line in diff.splitlines() if line.strip()]
    changed += [f"A {p}" for p in untracked.splitlines() if p.strip()]
    return BaseRecords(rev=rev, folder=rel, records=records, problems=tuple(problems),
                       changed_here=tuple(changed), files=files)


def neighbours(edited: Iterable[str], skills: Sequence[Skill], k: int) -> set[str]:
    """The skills among the top ``k`` BM25 rivals of an edited skill, and those that count an edited
    skill among their own top ``k`` (both directions)."""
    from skillreach.skills.bm25 import rivals

    names = set(edited)
    out: set[str] = set()
    for entry in rivals(list(skills), top=k):
        near = {r.name for r in entry.rivals}
        if entry.name in names:
            out |= near
        elif near & names:
            out.add(entry.name)
    return out - names


def confusion_links(records: Mapping[str, BaselineRecord]) -> dict[str, set[str]]:
    """Per skill with a record, the skills that took some of its positive cases in the study it was
    recorded from (each case's ``taken_by``): the confusion pairs ``truth → taker`` the records hold.
    Skills without such a pair (or records written before ``taken_by`` existed) are left out."""
    out: dict[str, set[str]] = {}
    for name, rec in records.items():
        takers = {t for c in rec.per_case.values() if c.role == "positive" for t in c.taken_by if t != name}
        if takers:
            out[name] = takers
    return out


def linked_by_confusion(edited: Iterable[str], taken_from: Mapping[str, set[str]]) -> set[str]:
    """The skills a confusion pair links to an edited one, both directions: those that took an edited
    skill's cases, and those whose cases an edited skill took."""
    names = set(edited)
    out: set[str] = set()
    for name, takers in taken_from.items():
        if name in names:
            out |= takers
        elif takers & names:
            out.add(name)
    return out - names


def skills_to_gate(
    edits: Sequence[SkillEdit],
    with_records: Iterable[str],
    *,
    scope: Scope,
    skills: Sequence[Skill],
    rivals_k: int,
    taken_from: Mapping[str, set[str]] | None = None,
) -> list[str]:
    """The skills whose records a change can move.

    ``with_records``: the skills that have a base record and still exist. ``taken_from``: per skill, the
    skills that took its cases in the study its base record was recorded from
    (:func:`confusion_links`), linking it to its neighbours in both directions.
    """
    present = {s.name for s in skills}
    gated = set(with_records) & present
    routing = [e.name for e in edits if e.routing]
    body = {e.name for e in edits if not e.routing and e.name in present}
    if not routing:
        return sorted(body)
    if scope == "all":
        return sorted(gated | body | ({e.name for e in edits if e.how != "removed"} & present))
    near = neighbours(routing, skills, rivals_k) | linked_by_confusion(routing, taken_from or {})
    return sorted(((near & gated) | set(routing) | body) & present)


class Loss(Frozen):
    skill: str
    lost: int
    """Positive cases whose activation rate fell since the baseline."""
    cases: int
    """Positive cases the two records share."""
    whole: bool = True
    """Every fallen case fell all the way (rate 0 now): the cases were *lost*, not only less often won."""
    taken_by: dict[str, int]
    """Skill (or ``(no skill)``) that now comes first most often on a fallen case → how many cases."""

    def sentence(self) -> str:
        if len(self.taken_by) == 1:
            takers = next(iter(self.taken_by))
        else:
            takers = ", ".join(f"{n} × {c}" for n, c in self.taken_by.items())
        if self.whole:
            return f"lost {self.lost} of {self.cases} cases" + (f" to {takers}" if takers else "")
        return f"fell on {self.lost} of {self.cases} cases" + (f", to {takers}" if takers else "")


def losses(base: BaselineRecord, new: BaselineRecord, outcomes: Iterable[Any]) -> Loss:
    """The base record's positive cases that ``new`` activates less often, and who took each: the skill
    that came first most often on it in the new study's probes (``outcomes``: the artifact's rows,
    :class:`~skillreach.scoring.artifact.ProbeOutcome`)."""
    before, after = case_rates(base.per_case, "activation"), case_rates(new.per_case, "activation")
    shared = [q for q in before if q in after and base.per_case[q].digest == new.per_case[q].digest]
    fell = {q for q in shared if after[q] < before[q]}
    firsts: dict[str, Counter[str]] = {q: Counter() for q in fell}
    for row in outcomes:
        if row.query_id in firsts and row.predicted is not None and row.predicted != base.skill:
            firsts[row.query_id][row.predicted] += 1
    taken: Counter[str] = Counter(c.most_common(1)[0][0] for c in firsts.values() if c)
    return Loss(
        skill=base.skill, lost=len(fell), cases=len(shared), whole=all(after[q] == 0 for q in fell),
        taken_by=dict(taken.most_common()),
    )


def neighbourhood_cases(query_set: QuerySet, skills: Iterable[str]) -> QuerySet:
    """The cases ``--scope neighbours`` probes: the positive cases of ``skills`` and every case that
    expects no skill or a neighbour's (``out_of_scope``, ``neighbor_negative``). Other skills' positive
    cases are left out: a false activation of a gated skill on them goes unseen, the price of the
    cheaper scope. The set is re-sealed (its digest is its own); each case keeps its content digest, so
    the comparison pairs it with the baseline's."""
    names = set(skills)
    kept = tuple(
        q
        for q in query_set.queries
        if q.expected_skill in names or q.kind.value in ("out_of_scope", "neighbor_negative")
    )
    from skillreach.queries.sets import seal

    subset = QuerySet(catalog_id=query_set.catalog_id, queries=kept)
    source = query_set.provenance.source or "query set"
    return seal(subset, source=f"{source} (neighbours of {', '.join(sorted(names))})")


def _top_k(text: str, skills: Sequence[Skill], k: int) -> set[str]:
    """The skills among the top ``k`` BM25 matches of ``text`` (a positive score only)."""
    return set(_top_list(text, skills, k))


def reachable_cases(
    query_set: QuerySet,
    edits: Sequence[SkillEdit],
    *,
    skills_now: Sequence[Skill],
    skills_base: Sequence[Skill],
    taken_from: Mapping[str, Mapping[str, set[str]]],
    k: int,
) -> dict[str, str]:
    """The cases ``--scope affected`` (the default) probes, each with why: what a change can reach.

    - a body-only edit: the skill's own cases;
    - a routing edit (description, added, removed): the edited skills' own cases; every case whose
      top ``k`` BM25 matches include an edited skill under the new descriptions (the new text reaches
      it) or under the base's (the old text reached it, and may let go of it); every case a base record
      says an edited skill took (``taken_from``: case owner → case → the skills that took it).

    Cases out of every edited skill's reach are not probed: they are gated when a change reaches them.
    """
    routing = {e.name for e in edits if e.routing}
    body = {e.name for e in edits if not e.routing}
    edited_now = [s for s in skills_now if s.name in routing]
    out: dict[str, str] = {}
    for q in query_set.queries:
        owner = q.expected_skill
        if owner in routing or owner in body:
            out[q.id] = f"a case of {owner}"
            continue
        if not routing:
            continue
        takers = (taken_from.get(owner or "", {}) or {}).get(q.id, set()) & routing
        if takers:
            out[q.id] = f"taken by {min(takers)} at the base"
            continue
        near = _top_k(q.text, skills_now, k) & routing if edited_now else set()
        if near:
            out[q.id] = f"{min(near)}'s new description reaches it"
            continue
        before = _top_k(q.text, skills_base, k) & routing if skills_base else set()
        if before:
            out[q.id] = f"{min(before)}'s description at the base reached it"
    return out


def _top_list(text: str, skills: Sequence[Skill], k: int) -> tuple[str, ...]:
    """The top ``k`` BM25 matches of ``text`` in order (a positive score only)."""
    from skillreach.skills.bm25 import rank

    return tuple(name for name, score in rank(text, skills)[:k] if score > 0)


def screen_cases(
    query_set: QuerySet,
    edits: Sequence[SkillEdit],
    *,
    skills_now: Sequence[Skill],
    skills_base: Sequence[Skill],
    taken_from: Mapping[str, Mapping[str, set[str]]],
    k: int,
) -> list[str]:
    """The cases most at risk from a change, which ``check --staged`` probes first (its *screen*,
    docs/spec/metrics.md "Staged comparison"): the edited skills' own cases, every case a base record says
    an edited skill took, and every case whose top ``k`` BM25 matches hold an edited skill, new or old,
    and are not the same list, in the same order, under the new descriptions as under the base's (the
    edit moved the case's ranking). A rewording that keeps its words moves no ranking: its screen is the
    skill's own cases and what it took at the base."""
    edited = {e.name for e in edits}
    routing = {e.name for e in edits if e.routing}
    out: list[str] = []
    for q in query_set.queries:
        owner = q.expected_skill
        if owner in edited or (taken_from.get(owner or "", {}) or {}).get(q.id, set()) & routing:
            out.append(q.id)
            continue
        if not routing:
            continue
        now, before = _top_list(q.text, skills_now, k), _top_list(q.text, skills_base, k)
        if now != before and (set(now) | set(before)) & routing:
            out.append(q.id)
    return sorted(out)


def case_takers(records: Mapping[str, BaselineRecord]) -> dict[str, dict[str, set[str]]]:
    """Per skill with a record, per positive case: the skills that took it in the study the record was
    recorded from (:func:`confusion_links` by case)."""
    return {
        name: {q: {t for t in c.taken_by if t != name} for q, c in rec.per_case.items() if c.taken_by}
        for name, rec in records.items()
    }


def within(record: BaselineRecord, ids: Iterable[str], *, keep: Iterable[str] = ()) -> BaselineRecord:
    """``record`` (in memory, not sealed) with only the cases ``ids`` and ``keep`` (cases that left the
    corpus since it was recorded, which a comparison lists): what a check that probed ``ids`` compares
    with. Activation and false activation are recomputed over the cases kept, so that both sides of the
    table are the same cases; compliance and task quality keep the record's pooled values, the rate the
    unpaired cohorts are compared with."""
    from skillreach.baselines.records import metric_value

    wanted = set(ids) | set(keep)
    per_case = {q: c for q, c in record.per_case.items() if q in wanted}
    metrics = dict(record.metrics)
    for m in ("activation", "false_activation"):
        metrics[m] = metric_value(per_case, m)
    return record.model_copy(update={"per_case": per_case, "metrics": metrics})
