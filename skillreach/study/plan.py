"""What a study measures and how its work is cut: inputs (skills, catalog, query set), the plan (study
id, output folder, fingerprint, batches still to run) and the result it hands back.

Plain functions over plain data; the Prefect tasks in ``skillreach.tasks.study`` wrap them.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from skillreach.errors import ConfigError, InputError
from skillreach.models import Catalog, Frozen, ProbeRecord, Query, QuerySet, Skill
from skillreach.study.config import StudyConfig
from skillreach.study.contract import ProbeOptions
from skillreach.study.probe_log import PROBES_FILE, completed_pairs, latest_records, refuse_two_models

__all__ = [
    "TOKEN_FILE",
    "SkillsFound",
    "StudyInputs",
    "StudyPlan",
    "StudyResult",
    "assemble_inputs",
    "batch_key",
    "batch_pairs",
    "claim_out_dir",
    "default_out_dir",
    "find_skills",
    "finer_tail",
    "plan_study",
    "probe_options",
    "restrict_query_set",
    "study_id_for",
    "study_roots",
    "study_token",
]

TOKEN_FILE = ".study-token"


@dataclass(frozen=True)
class SkillsFound:
    skills: tuple[Skill, ...]
    source: str
    """The skills folders, as one string (catalog snapshots are kept per source)."""
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class StudyInputs:
    """What a study measures: the skills found, the resident catalog and the query set."""

    skills: tuple[Skill, ...]
    catalog: Catalog
    query_set: QuerySet
    queries_path: Path
    source: str
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class StudyPlan:
    """Where and under which fingerprint a study runs, and which (query, attempt) pairs are left."""

    study_id: str
    out: Path
    probes_path: Path
    fingerprint: str
    resolved_model: str | None
    token: str
    batches: tuple[tuple[tuple[str, int], ...], ...]
    done: int
    total: int
    spent_usd: float = 0.0


class StudyResult(Frozen):
    """What a finished study hands back. ``artifact`` is a :class:`skillreach.scoring.artifact.Artifact`."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    study_id: str
    out: Path
    probes_path: Path
    artifact_path: Path
    report_path: Path | None = None
    artifact: Any = None
    gate_report: str = ""
    breaches: tuple[dict[str, Any], ...] = ()
    """Alert payloads of the gate (breaches, drift, expired or missing baselines, skills without queries)."""
    statuses: dict[str, str] = Field(default_factory=dict)
    """Every skill → ok, inconclusive, breach, drift, expired, no baseline, no queries (when gated)."""
    probes_run: int = 0
    probes_resumed: int = 0
    cost_usd: float = 0.0


# ------------------------------------------------------------------------------------------- inputs


def study_roots(config: StudyConfig) -> tuple[list[Path], Path]:
    """The skills folders and the query set of a study (the bundled example when neither is given)."""
    if config.is_example or not config.skills or config.queries is None:
        from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS

        if not config.is_example:
            missing = "--queries FILE" if config.queries is None else "--skills DIR"
            raise ConfigError(f"a study needs both --skills and --queries; pass {missing} "
                              "(or neither, for the bundled example)")
        return [EXAMPLE_SKILLS], EXAMPLE_QUERIES
    return list(config.skills), config.queries


def find_skills(config: StudyConfig, log: logging.Logger | logging.LoggerAdapter[Any]) -> SkillsFound:
    """Every skill under the study's folders (a file that does not parse is reported and skipped)."""
    from skillreach.skills.discovery import UnsafeSkill, discover

    roots, _ = study_roots(config)
    found = discover(
        roots,
        precedence=config.skill_precedence,
        follow_outside=config.follow_outside,
        on_skip=lambda line: log.warning("%s", line),
    )
    for problem in found.problems:
        if isinstance(problem, UnsafeSkill):  # a name that becomes a path or a cell: never run with it
            raise problem
    if not found.skills:
        raise ConfigError(f"no SKILL.md under {', '.join(map(str, roots))}; pass --skills DIR")
    for problem in found.problems:
        log.warning("skipped a skill: %s", problem)
    for shadowed in found.shadowed:
        log.warning("%s (skill_precedence = %s)", shadowed, config.skill_precedence)
    return SkillsFound(
        skills=tuple(found.skills),
        source=" ".join(sorted(str(Path(r).resolve()) for r in roots)),
        problems=(*(str(p) for p in found.problems), *(str(s) for s in found.shadowed)),
    )


def assemble_inputs(
    config: StudyConfig, found: SkillsFound, log: logging.Logger | logging.LoggerAdapter[Any]
) -> StudyInputs:
    """The resident catalog and the validated query set of a study."""
    from skillreach.queries.sets import load_query_set
    from skillreach.skills.catalog import build_catalog

    _, queries_path = study_roots(config)
    if config.catalog != "full" and config.target is None:
        raise ConfigError(
            f"--catalog {config.catalog} measures one target skill; pass --target NAME "
            "(or target = \"NAME\" in --config)"
        )
    catalog = build_catalog(
        found.skills,
        config.catalog,
        target=config.target,
        k=config.neighborhood_k,
        size=config.neighborhood_size,
        seed=config.seed,
    )
    query_set = load_query_set(queries_path, catalog=[s.name for s in found.skills])
    if catalog.strategy != "full":
        query_set = restrict_query_set(query_set, catalog, config.target, queries_path)
        log.info("catalog %s: %d queries have a resident expected skill or are out of scope",
                 catalog.id, len(query_set.queries))
    return StudyInputs(
        skills=found.skills,
        catalog=catalog,
        query_set=query_set,
        queries_path=Path(queries_path),
        source=found.source,
        problems=found.problems,
    )


def restrict_query_set(query_set: QuerySet, catalog: Catalog, target: str | None, path: Path) -> QuerySet:
    """The queries a target catalog can answer: those whose expected skill is resident, and the
    out-of-scope ones (a fresh, unsealed set: its digest is its own)."""
    resident = set(catalog.names)
    kept = tuple(q for q in query_set.queries if q.expected_skill is None or q.expected_skill in resident)
    if not any(q.expected_skill == target for q in kept):
        raise InputError(f"{path}: no query expects the target skill {target!r}; add positive queries for it")
    provenance = query_set.provenance.model_copy(
        update={"digest": "", "source": f"{query_set.provenance.source or path} restricted to {catalog.id}"}
    )
    return QuerySet(catalog_id=catalog.id, queries=kept, provenance=provenance)


def probe_options(config: StudyConfig) -> ProbeOptions:
    """What every probe of the study shares (the timeout included: it comes from the configuration)."""
    return ProbeOptions(
        max_turns=config.max_turns,
        early_exit=config.early_exit,
        model=config.model,
        compliance=config.compliance,
        timeout_s=config.timeout_s,
        routing_max_tokens=config.routing_max_tokens,
    )


# --------------------------------------------------------------------------------------------- plan


def batch_pairs(
    queries: Sequence[Query],
    attempts: int,
    batch_size: int,
    *,
    done: Iterable[tuple[str, int]] = (),
) -> list[list[tuple[Query, int]]]:
    """Split the (query, attempt) pairs still to run into batches of at most ``batch_size``.

    Attempt-major (every query's attempt 1 before any attempt 2), so a stopped study has the widest
    coverage; pairs in ``done`` are left out (resume).
    """
    if attempts < 1 or batch_size < 1:
        raise ValueError("attempts and batch_size must be at least 1")
    finished = set(done)
    todo = [
        (q, a) for a in range(1, attempts + 1) for q in queries if (q.id, a) not in finished
    ]
    return [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]


def finer_tail(
    batches: Sequence[Sequence[tuple[str, int]]], workers: int, *, share: int = 4, parts: int = 8
) -> list[tuple[tuple[str, int], ...]]:
    """The same pairs, in the same order, in batches that shrink as the study nears its end (guided
    self-scheduling): each batch is ``1 / (share × workers)`` of the pairs left after it starts, at most
    the batches' size and at least a ``parts``-th of it. When the queue runs dry, one worker still holding
    a full batch (a task worker holds up to three: two running, one received) while the others idle is
    what a distributed study waits for; with shrinking batches the last full one is handed out long
    before the end and the workers run out together. Early batches keep their size (a batch costs a
    task run)."""
    flat = [pair for batch in batches for pair in batch]
    size = max((len(b) for b in batches), default=0)
    if not flat or workers < 1 or size < 2:
        return [tuple(b) for b in batches]
    smallest = max(1, -(-size // parts))
    out: list[tuple[tuple[str, int], ...]] = []
    i = 0
    while i < len(flat):
        k = min(size, max(smallest, -(-(len(flat) - i) // (share * workers))))
        out.append(tuple(flat[i : i + k]))
        i += k
    return out


def batch_key(fingerprint: str, pairs: Sequence[tuple[Query | str, int]]) -> str:
    """A stable cache key for one batch: the study's fingerprint plus the batch's (query id, attempt)s."""
    h = hashlib.sha256(fingerprint.encode())
    ids = sorted((a, q if isinstance(q, str) else q.id) for q, a in pairs)
    for a, qid in ids:
        h.update(f"\n{qid}\t{a}".encode())
    return "batch-" + h.hexdigest()[:32]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "study"


def default_out_dir(
    config: StudyConfig,
    now: datetime | None = None,
    root: Path = Path("runs"),
    kind: str = "study",
    *,
    fingerprint: str | None = None,
    slot: str | None = None,
) -> Path:
    """The folder of a study that was given no ``--out``, derived from what it measures:
    ``runs/<kind>-<runtime>[-<model>]-<fingerprint[:12]>[-<slot>]``, so running the same study again
    (a crashed nightly re-run by hand or retried by Prefect, a second ``make demo``) resumes in it.
    ``slot`` is a scheduled run's slot (e.g. ``2026-12-01``): the next night starts a fresh folder.

    Without a fingerprint (a sweep: many studies under one folder) it is the time stamp
    ``runs/<UTC stamp>[-<kind>]-<runtime>[-<model>]``.
    """
    model = [_slug(config.model)] if config.model else []
    if fingerprint is not None:
        tail = [fingerprint.rsplit(":", 1)[-1][:12]] + ([_slug(slot)] if slot else [])
        return root / "-".join([_slug(kind), _slug(config.runtime), *model, *tail])
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    parts = [stamp] + ([] if kind == "study" else [_slug(kind)]) + [_slug(config.runtime)]
    return root / "-".join(parts + model)


def claim_out_dir(base: Path) -> Path:
    """The study's folder, created if new. Derived folders are shared on purpose (that is how a re-run
    resumes); two processes never probe one study at once because the study holds a lock
    (:func:`skillreach.store.database.lock_study`)."""
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{base}: cannot create the study's folder ({exc.strerror}); "
                          "pass --out DIR") from exc
    return base


def study_id_for(fingerprint: str, out: Path) -> str:
    """Deterministic: the same fingerprint written to the same folder is the same (resumable) study."""
    digest = hashlib.sha256(f"{fingerprint}\n{out.resolve().as_posix()}".encode()).hexdigest()
    return "st-" + digest[:16]


def study_token(out: Path, *, renew: bool = False) -> str:
    """A random token that the batch cache keys include. It is renewed whenever the probe log lost
    records (deleted, truncated, edited), so a cached batch is never taken for probes that are gone."""
    path = out / TOKEN_FILE
    if path.exists() and not renew:
        return path.read_text(encoding="utf-8").strip()
    out.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex
    path.write_text(token + "\n", encoding="utf-8")
    return token


def plan_study(
    config: StudyConfig,
    inputs: StudyInputs,
    *,
    out: Path,
    fingerprint: str,
    resolved_model: str | None,
    existing: Sequence[ProbeRecord],
    recorded_in_store: int,
) -> StudyPlan:
    """The batches still to run given the records already in the folder's probe log (resume).

    Errored records count as not done (their pairs are probed again) unless ``keep_errors``.
    """
    current = latest_records(existing, fingerprint)
    probes_path = out / PROBES_FILE
    ids = {q.id for q in inputs.query_set.queries}
    planted = next((r for r in current if r.query_id not in ids), None)
    if planted is not None:  # the fingerprint covers the query set: only an edit puts such a line there
        raise InputError(
            f"{probes_path}: a probe of query {planted.query_id!r} (attempt {planted.attempt}) under this "
            "study's fingerprint, though its query set has no such query; the log was edited: remove "
            "that line, or pass another --out"
        )
    refuse_two_models(probes_path, existing, fingerprint)
    done = completed_pairs(existing, fingerprint)
    if config.keep_errors:
        done |= {(r.query_id, r.attempt) for r in current}
    wanted = {(q.id, a) for q in inputs.query_set.queries for a in range(1, config.attempts + 1)}
    # attempts past this study's (a folder shared with a study of more attempts) are not its spend
    spent = sum(r.cost_usd or 0.0 for r in current if (r.query_id, r.attempt) in wanted)
    batches = batch_pairs(inputs.query_set.queries, config.attempts, config.batch_size, done=done)
    token = study_token(out, renew=not probes_path.exists() or recorded_in_store > len(current))
    return StudyPlan(
        study_id=study_id_for(fingerprint, out),
        out=out,
        probes_path=probes_path,
        fingerprint=fingerprint,
        resolved_model=resolved_model,
        token=token,
        batches=tuple(tuple((q.id, a) for q, a in b) for b in batches),
        done=len(done & wanted),
        total=len(wanted),
        spent_usd=spent,
    )
