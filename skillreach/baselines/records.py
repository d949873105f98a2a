"""Baseline records (spec/interfaces.md): one skill's four metrics from one study, pinned.

A record holds, for skill ``S``, ``activation``, ``false_activation``, ``compliance`` and
``task_quality`` (spec/metrics.md "Baseline metrics") as ``{value, ci95, n, cases}`` with the clustered
interval, the per-case outcomes that paired comparison needs, and the pins that make a comparison
legitimate or refused:

- ``skill_version``: ``git:<tree hash>`` of the skill's folder (``git rev-parse HEAD:<path>``) when the
  folder is committed and clean; otherwise ``sha256:<hex>``, a content digest over the folder's files
  (path + SHA-256 of each, sorted), with ``skill_version_origin`` saying why: ``uncommitted`` (inside a
  git work tree, with changes or untracked) or ``content`` (outside git).
- ``per_case``: every case the record rated, ``{digest, outcomes}`` in the file: the case's content
  digest (:meth:`skillreach.models.Query.case_digest`: text, expected and acceptable skills, kind,
  checks — not the id) beside its outcomes. A comparison pairs a case only with the case of the same id
  and the same digest. A positive case's outcomes also say which skills took it (``taken_by``: the
  skill that came first on each probe that did not activate S), the study's confusion pairs that
  ``check --scope neighbours`` links skills by; the field is optional (absent when empty), so records
  written before it read as before.
- ``corpus_version``: ``sha256:<hex>`` of the sorted lines ``<id> <case digest>\n`` of the record's
  **positive** cases (the skill's own corpus, :func:`corpus_digest`): content, never a path, and a
  query added, edited or removed for another skill never changes it. ``corpus_path`` (the path relative
  to the git work tree's top when inside one, else absolute) and ``corpus_commit`` (the last commit
  that touched the file when it is tracked and unmodified) are information, never compared.
- ``runtime``: ``{name, version}`` — the runtime and its version (CLI or SDK); a changed version expires
  the record.
- ``model``: the resolved snapshot the study ran; ``rubric_version``: :func:`skillreach.study.judge.
  rubric_version` over the rubrics of S's positive cases and the judge model (``None`` without rubrics).

Expiry (:func:`expiry`): a record whose model, runtime version or rubric no longer matches the current
configuration, or none of whose positive cases is still in the query set unchanged, is expired and never
compared silently; cases added, changed or removed since only make it *stale* (:func:`staleness`: still
gated, on the cases that are identical). A record of ``schema_version`` 1 (before cases were pinned by
content) is read, and reported as needing re-baselining.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
from pydantic import Field, SerializerFunctionWrapHandler, ValidationError, field_validator, model_serializer

from skillreach.errors import InputError, NotFoundError, TamperedError
from skillreach.models import NO_SKILL, Count, Finite, Frozen, QuerySet, Rate, StrictNumber
from skillreach.scoring.intervals import clustered_wilson

__all__ = [
    "BASELINE_SCHEMA_VERSION",
    "METRICS",
    "BaselineRecord",
    "CaseOutcomes",
    "MetricValue",
    "RecordedUplift",
    "RuntimePin",
    "baseline_digest",
    "case_changes",
    "case_rates",
    "changes_between",
    "cohort_split",
    "corpus_digest",
    "corpus_location",
    "corpus_version",
    "current_rubric_version",
    "expiry",
    "metric_value",
    "read_baseline",
    "record_baseline",
    "restrict_record",
    "seal_baseline",
    "skill_version",
    "staleness",
    "write_baseline",
]

BASELINE_SCHEMA_VERSION = 2
"""2: ``per_case`` holds ``{digest, outcomes}`` and ``corpus_version`` is over the positive cases."""
LEGACY_SCHEMA_VERSIONS = frozenset({1})
"""Read, never gated: recorded before cases were pinned by content; re-baseline them."""
METRICS = ("activation", "false_activation", "compliance", "task_quality")
MetricName = Literal["activation", "false_activation", "compliance", "task_quality"]


class MetricValue(Frozen):
    """``{value, ci95, n, cases}``: the pooled value over ``n`` probes of ``cases`` cases."""

    value: Rate
    ci95: tuple[Rate, Rate]
    n: Count
    cases: Count


class CaseOutcomes(Frozen):
    """One case's probes as the metrics see them (scored probes only, by attempt).

    ``activated``: 1 when S ∈ scored_inv, per scored probe (activation for a positive case, false
    activation for a negative one); ``compliance``: per probe that activated S and was judged;
    ``quality``: per probe with a quality score.
    """

    role: Literal["positive", "negative"]
    kind: str
    probes: Count
    errors: Count = 0
    activated: tuple[Annotated[int, StrictNumber, Field(ge=0, le=1)], ...] = ()
    compliance: tuple[bool, ...] = ()
    quality: tuple[Rate, ...] = ()
    taken_by: dict[str, Count] = Field(default_factory=dict)
    """For a positive case: per skill that came first (``scored_inv[0]``) on a scored probe that did not
    activate S, how many such probes — which skill took the case (a confusion pair of the study, what
    ``check --scope neighbours`` links skills by). Empty when S was activated on every probe, when no
    skill was invoked, for a negative case, and in records written before the field existed (left out
    of the JSON when empty, so such a record reads, and keeps its digest)."""
    digest: str | None = None
    """The case's content digest when it was rated (``None``: a record of schema 1, or one built in
    memory without its query set). In the file it stands beside the outcomes: ``{digest, outcomes}``."""


class CaseCounts(Frozen):
    positive: Count
    negative: Count


class RuntimePin(Frozen):
    """The runtime a record was measured with, and its version (``None``: not known)."""

    name: str
    version: str | None = None

    def __str__(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name


class RecordedUplift(Frozen):
    """The skill's task-quality uplift (``skillreach uplift``): quality with it in the catalog − quality
    without it, paired per case, with the paired 95 % t interval over ``n`` cases, and how many cases
    with a routing miss fell in each class (*didn't need it*, *wrongly skipped*, *unclear*)."""

    value: Annotated[float, StrictNumber, Field(ge=-1, le=1, allow_inf_nan=False)]
    ci95: tuple[Finite, Finite]
    n: Count
    margin: Finite
    misses: dict[str, Count]
    queries_digest: str | None = None
    runtime: str | None = None
    model: str | None = None
    attempts: Annotated[int, StrictNumber, Field(ge=1)] | None = None

    def line(self) -> str:
        misses = ", ".join(f"{k} {v}" for k, v in self.misses.items())
        return (
            f"{self.value:+.3f} [{self.ci95[0]:+.3f}, {self.ci95[1]:+.3f}] over {self.n} cases"
            + (f"; routing misses: {misses}" if misses else "")
        )


class BaselineRecord(Frozen):
    schema_version: Annotated[int, StrictNumber] = BASELINE_SCHEMA_VERSION
    baseline_id: str
    skill: str
    created_at: str
    skill_version: str
    skill_version_origin: Literal["git", "uncommitted", "content"]
    skill_path: str | None = None
    corpus_version: str
    corpus_path: str | None = None
    corpus_commit: str | None = None
    model: str
    runtime: RuntimePin
    runs_per_case: Annotated[int, StrictNumber, Field(ge=1)]
    cases: CaseCounts
    rubric_version: str | None = None
    judge_model: str | None = None
    metrics: dict[str, MetricValue | None]
    per_case: dict[str, CaseOutcomes]
    artifact_digest: str | None = None
    catalog_digest: str | None = None
    tool_version: str = ""
    uplift: RecordedUplift | None = None
    """Task-quality uplift of the skill when an uplift run was made for it (``baseline record
    --uplift FILE``, or ``uplift-<skill>.json`` beside the artifact). Left out of the JSON when absent,
    so a record written before the field existed keeps its digest."""
    digest: str | None = None
    """``sha256:<hex>`` of the canonical JSON of every other field (:func:`seal_baseline`); verified on
    every read, so an edited value or an emptied ``per_case`` is refused rather than gated."""

    @model_serializer(mode="wrap")
    def _without_empty_uplift(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("uplift", 0) is None:
            del data["uplift"]
        cases = data.get("per_case")
        if isinstance(cases, dict):
            def outcomes(c: Mapping[str, Any]) -> dict[str, Any]:
                return {f: v for f, v in c.items() if f != "digest" and not (f == "taken_by" and not v)}

            if self.legacy:  # as it was read: flat outcomes, no digest
                data["per_case"] = {k: outcomes(c) for k, c in cases.items()}
            else:
                data["per_case"] = {
                    k: {"digest": c.get("digest"), "outcomes": outcomes(c)} for k, c in cases.items()
                }
        return data

    @field_validator("per_case", mode="before")
    @classmethod
    def _per_case_entries(cls, v: Any) -> Any:
        """``{digest, outcomes}`` (schema 2) or flat outcomes (schema 1) → :class:`CaseOutcomes`."""
        if not isinstance(v, Mapping):
            return v
        out: dict[Any, Any] = {}
        for k, c in v.items():
            if isinstance(c, Mapping) and "outcomes" in c and isinstance(c["outcomes"], Mapping):
                if set(c) - {"digest", "outcomes"}:
                    raise ValueError(f"case {k}: expected {{digest, outcomes}}, got {sorted(c)}")
                out[k] = {**c["outcomes"], "digest": c.get("digest")}
            else:
                out[k] = c
        return out

    @property
    def legacy(self) -> bool:
        """Recorded before cases were pinned by content (schema 1): read, never gated."""
        return self.schema_version in LEGACY_SCHEMA_VERSIONS

    @field_validator("runtime", mode="before")
    @classmethod
    def _runtime_pin(cls, v: Any) -> Any:
        return {"name": v, "version": None} if isinstance(v, str) else v

    def metric(self, name: str) -> MetricValue | None:
        return self.metrics.get(name)


# ----------------------------------------------------------------------------------------------- git


def git_output(args: Sequence[str], cwd: Path) -> str | None:
    """stdout of ``git args`` in ``cwd`` (stripped), ``None`` when git fails or is absent."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip()


def git_toplevel(path: Path) -> Path | None:
    folder = path if path.is_dir() else path.parent
    top = git_output(["rev-parse", "--show-toplevel"], folder)
    return Path(top) if top else None


def _relative(path: Path, top: Path) -> str:
    return Path(os.path.relpath(path.resolve(), top.resolve())).as_posix()


def _content_digest(folder: Path, files: Iterable[str] | None = None) -> str:
    """``sha256:`` over (relative path, SHA-256 of bytes) of every file, sorted by path."""
    if files is None:
        names = [
            Path(root, f).relative_to(folder).as_posix() for root, _dirs, fs in os.walk(folder) for f in fs
        ]
        names = [n for n in names if not {".git", "__pycache__"} & set(Path(n).parts)]
    else:
        names = list(files)
    h = hashlib.sha256()
    for name in sorted(set(names)):
        p = folder / name
        if not p.is_file():
            continue
        h.update(name.encode("utf-8") + b"\0" + hashlib.sha256(p.read_bytes()).hexdigest().encode() + b"\n")
    return "sha256:" + h.hexdigest()


def skill_version(folder: str | os.PathLike[str]) -> tuple[str, Literal["git", "uncommitted", "content"]]:
    """(version, origin) of a skill's folder: git tree hash when committed and clean, else a digest."""
    folder = Path(folder)
    if not folder.is_dir():
        raise NotFoundError(f"{folder}: no such skill folder")
    top = git_toplevel(folder)
    if top is None:
        return _content_digest(folder), "content"
    rel = _relative(folder, top)
    spec = "." if rel == "." else rel
    files_out = git_output(["ls-files", "-co", "--exclude-standard", "-z", "--", spec], top)
    files = [f for f in (files_out or "").split("\0") if f]
    prefix = "" if spec == "." else spec + "/"
    rel_files = [f[len(prefix) :] for f in files if f.startswith(prefix)]
    dirty = git_output(["status", "--porcelain", "--untracked-files=all", "--", spec], top)
    tree = git_output(["rev-parse", f"HEAD:{'' if spec == '.' else spec}"], top)
    if dirty or dirty is None or not tree:
        return _content_digest(folder, rel_files or None), "uncommitted"
    return f"git:{tree}", "git"


def _display_path(path: Path) -> tuple[str, Path | None]:
    """The path a pin shows: relative to the git top when inside a work tree, else absolute.

    Either way it does not depend on the folder the command was run from.
    """
    top = git_toplevel(path)
    if top is not None:
        return _relative(path, top), top
    return path.resolve().as_posix(), None


def corpus_digest(cases: Iterable[tuple[str, str | None]]) -> str:
    """``sha256:<hex>`` of the sorted lines ``<id> <case digest>\n`` of (id, digest) pairs."""
    lines = sorted(f"{qid} {digest or ''}\n" for qid, digest in cases)
    return "sha256:" + hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def corpus_version(query_set: QuerySet, skill: str) -> str:
    """The corpus pin of ``skill`` in ``query_set``: :func:`corpus_digest` of its positive cases (the
    skill's own corpus; another skill's queries never change it)."""
    return corpus_digest((q.id, q.case_digest()) for q in query_set.queries if q.expected_skill == skill)


def _record_corpus_version(per_case: Mapping[str, CaseOutcomes]) -> str:
    return corpus_digest((k, c.digest) for k, c in per_case.items() if c.role == "positive")


def case_changes(
    recorded: Mapping[str, CaseOutcomes], current: Mapping[str, str | None], *, positive_only: bool = False
) -> tuple[list[str], list[str], list[str]]:
    """(added, changed, removed) case ids from ``recorded`` (a record's ``per_case``) to ``current``
    (case id → digest: a later record's cases, or a query set's). ``positive_only``: of the recorded
    positive cases only (``current`` then holds the skill's positive cases)."""
    rec = {k: c.digest for k, c in recorded.items() if c.role == "positive" or not positive_only}
    added = sorted(k for k in current if k not in rec)
    changed = sorted(k for k in current if k in rec and rec[k] != current[k])
    removed = sorted(k for k in rec if k not in current)
    return added, changed, removed


def corpus_location(path: str | os.PathLike[str]) -> tuple[str, str | None]:
    """(the query set's path as records show it, last commit of the file when tracked and unmodified)."""
    shown, top = _display_path(Path(path))
    commit = None
    if top is not None:
        modified = git_output(["status", "--porcelain", "--", shown], top)
        if modified == "":
            commit = git_output(["log", "-1", "--format=%H", "--", shown], top) or None
    return shown, commit


# ------------------------------------------------------------------------------------------- metrics


def _rows(artifact: Any) -> list[Any]:
    outcomes = getattr(artifact, "outcomes", None)
    if outcomes is None:
        raise InputError("the artifact carries no outcomes; re-score the probes with this version")
    return list(outcomes)


def _field(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, Mapping) else getattr(row, name)


def per_case_outcomes(
    artifact: Any, skill: str, digests: Mapping[str, str] | None = None
) -> dict[str, CaseOutcomes]:
    """The per-case outcomes of ``skill`` from an artifact's outcome rows (one row per probe);
    ``digests``: case id → content digest (:meth:`~skillreach.models.Query.case_digest`)."""
    by_case: dict[str, list[Any]] = {}
    for row in _rows(artifact):
        by_case.setdefault(str(_field(row, "query_id")), []).append(row)
    out: dict[str, CaseOutcomes] = {}
    for qid, rows in sorted(by_case.items()):
        rows.sort(key=lambda r: int(_field(r, "attempt")))
        truth = str(_field(rows[0], "truth"))
        positive = truth == skill
        scored = [r for r in rows if _field(r, "error") is None]
        activated = tuple(int(skill in tuple(_field(r, "scored_inv"))) for r in scored)
        compliance: tuple[bool, ...] = ()
        quality: tuple[float, ...] = ()
        taken_by: dict[str, int] = {}
        if positive:
            for r in scored:
                inv = tuple(_field(r, "scored_inv"))
                if inv and skill not in inv:
                    taken_by[str(inv[0])] = taken_by.get(str(inv[0]), 0) + 1
            compliance = tuple(
                bool(_field(r, "compliance"))
                for r in scored
                if _field(r, "compliance") is not None and skill in tuple(_field(r, "scored_inv"))
            )
            quality = tuple(float(_field(r, "quality")) for r in scored if _field(r, "quality") is not None)
        out[qid] = CaseOutcomes(
            role="positive" if positive else "negative",
            kind=str(_field(rows[0], "kind")),
            probes=len(rows),
            errors=len(rows) - len(scored),
            activated=activated,
            compliance=compliance,
            quality=quality,
            taken_by=dict(sorted(taken_by.items())),
            digest=(digests or {}).get(qid),
        )
    return out


def case_values(per_case: Mapping[str, CaseOutcomes], metric: str) -> dict[str, list[float]]:
    """Case id → the per-probe values ``metric`` is computed on (cases with none left out)."""
    out: dict[str, list[float]] = {}
    for qid, c in per_case.items():
        positive = c.role == "positive"
        if (metric == "activation" and positive) or (metric == "false_activation" and not positive):
            vals = [float(v) for v in c.activated]
        elif metric == "compliance" and positive:
            vals = [1.0 if v else 0.0 for v in c.compliance]
        elif metric == "task_quality" and positive:
            vals = list(c.quality)
        else:
            continue
        if vals:
            out[qid] = vals
    return out


def metric_value(per_case: Mapping[str, CaseOutcomes], metric: str) -> MetricValue | None:
    """``{value, ci95, n, cases}`` with the clustered interval; ``None`` with no eligible probe."""
    groups = case_values(per_case, metric)
    n = sum(len(g) for g in groups.values())
    if n == 0:
        return None
    ci = clustered_wilson(list(groups.values()))
    assert ci is not None
    value = sum(sum(g) for g in groups.values()) / n
    # The Wilson interval always holds p̂; clamp away floating-point noise (5e-17 above 0 at p̂ = 0).
    lo, hi = min(ci[0], value), max(ci[1], value)
    return MetricValue(value=value, ci95=(lo, hi), n=n, cases=len(groups))


def case_rates(per_case: Mapping[str, CaseOutcomes], metric: str) -> dict[str, float]:
    """Case id → the case's rate (mean of its probes) for ``metric``."""
    return {qid: sum(v) / len(v) for qid, v in case_values(per_case, metric).items()}


def cohort_split(
    record: BaselineRecord, reference: BaselineRecord | None, metric: str = "compliance"
) -> dict[str, MetricValue | None]:
    """``metric`` of ``record`` by cohort, split by the corpus's history (spec/metrics.md "Comparing a
    new record with a baseline"): the cases of the reference's corpus (the record lists every case it
    rated: same id, same content) vs the cases added or changed since it was recorded.

    A case the reference could not rate for ``metric`` (it never activated there) stays in the
    *baseline corpus* cohort: a broadened description that now reaches old work is judged on that work
    as the old corpus, and only cases new to the corpus form ``new_cases``.
    """
    known = (
        {k: c.digest for k, c in reference.per_case.items()} if reference is not None else {}
    )
    ours = case_values(record.per_case, metric)
    old = {k: record.per_case[k] for k in ours if k in known and known[k] == record.per_case[k].digest}
    new = {k: record.per_case[k] for k in ours if k not in old}
    return {"baseline_cases": metric_value(old, metric), "new_cases": metric_value(new, metric)}


def current_rubric_version(query_set: QuerySet, skill: str, judge_model: str | None) -> str | None:
    """The rubric version of ``skill``'s positive cases under ``judge_model`` (``None``: no rubric).

    Without ``judge_model``: :func:`skillreach.study.judge.default_judge_model`.
    """
    from skillreach.study.judge import default_judge_model, rubric_version

    judge_model = judge_model or default_judge_model()
    rubrics = {
        q.id: q.checks.rubric
        for q in query_set.queries
        if q.expected_skill == skill and q.checks is not None and q.checks.rubric
    }
    return rubric_version(rubrics, judge_model)


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _skill_names(artifact: Any) -> list[str]:
    catalog = getattr(artifact, "catalog", None)
    return list(getattr(catalog, "skills", []) or [])


def record_baseline(
    artifact: Any,
    query_set_path: str | os.PathLike[str],
    skill: str,
    *,
    skill_folder: str | os.PathLike[str] | None = None,
    query_set: QuerySet | None = None,
    judge_model: str | None = None,
    now: datetime | None = None,
    uplift: RecordedUplift | None = None,
) -> BaselineRecord:
    """The baseline record of ``skill`` from one study's artifact (a
    :class:`~skillreach.scoring.artifact.Artifact`).

    ``query_set_path`` is the query set the study ran (its digest must be the artifact's
    ``queries_digest``); ``skill_folder`` the skill's folder (for ``skill_version``; without it the
    version is the digest of what the artifact shows of the skill, origin ``content``). ``uplift``: the
    skill's uplift when one was measured (its query set must be the study's).
    """
    from skillreach.queries.sets import load_query_set

    qpath = Path(query_set_path)
    qs = query_set if query_set is not None else load_query_set(qpath)
    digest = qs.compute_digest()
    art_digest = getattr(artifact, "queries_digest", None)
    if art_digest and art_digest != digest:
        raise InputError(
            f"{qpath}: its digest {digest[:19]}… is not the artifact's queries_digest "
            f"{str(art_digest)[:19]}…; pass --queries with the query set the study ran"
        )
    names = _skill_names(artifact)
    if names and skill not in names:
        raise NotFoundError(
            f"skill {skill!r} is not in the study's catalog; known: {', '.join(sorted(names)[:20])}"
        )
    if skill == NO_SKILL:
        raise InputError(f"{NO_SKILL!r} is not a skill; pass --skill NAME")
    if uplift is not None and uplift.queries_digest not in (None, digest):
        raise InputError(
            f"--uplift: measured on query set {uplift.queries_digest[:19]}…, not the study's {digest[:19]}…; "
            "run skillreach uplift with the query set the study ran"
        )
    per_case = per_case_outcomes(artifact, skill, {q.id: q.case_digest() for q in qs.queries})
    if not per_case:
        raise InputError("the artifact holds no probes; run the study first")
    if skill_folder is not None:
        version, origin = skill_version(skill_folder)
        shown_skill_path: str | None = _display_path(Path(skill_folder))[0]
    else:
        desc = getattr(getattr(artifact, "catalog", None), "descriptions", {}) or {}
        payload = json.dumps({"name": skill, "description": desc.get(skill, "")}, sort_keys=True)
        version, origin, shown_skill_path = (
            "sha256:" + hashlib.sha256(payload.encode()).hexdigest(),
            "content",
            None,
        )
    corpus_shown, commit = corpus_location(qpath)
    runtime = getattr(artifact, "runtime", None)
    model = getattr(runtime, "resolved_model", None) or getattr(runtime, "model", None) or ""
    if not model:
        model = getattr(runtime, "name", "") or "unknown"
    stamp = now or _now()
    from skillreach.study.judge import default_judge_model

    judge_model = judge_model or default_judge_model()
    rubric = current_rubric_version(qs, skill, judge_model)
    metrics = {m: metric_value(per_case, m) for m in METRICS}
    from skillreach import __version__ as tool_version

    record = BaselineRecord(
        baseline_id=f"{skill}@{stamp.strftime('%Y-%m-%dT%H:%M:%SZ')}",
        skill=skill,
        created_at=stamp.isoformat().replace("+00:00", "Z"),
        skill_version=version,
        skill_version_origin=origin,
        skill_path=shown_skill_path,
        corpus_version=_record_corpus_version(per_case),
        corpus_path=corpus_shown,
        corpus_commit=commit,
        model=str(model),
        runtime=RuntimePin(name=str(getattr(runtime, "name", "") or ""),
                           version=getattr(runtime, "version", None)),
        runs_per_case=int(getattr(artifact, "attempts", 1) or 1),
        cases=CaseCounts(
            positive=sum(1 for c in per_case.values() if c.role == "positive"),
            negative=sum(1 for c in per_case.values() if c.role == "negative"),
        ),
        rubric_version=rubric,
        judge_model=judge_model if rubric is not None else None,
        metrics=metrics,
        per_case=per_case,
        artifact_digest=getattr(artifact, "digest", None),
        catalog_digest=getattr(getattr(artifact, "catalog", None), "digest", None),
        tool_version=str(tool_version),
        uplift=uplift,
    )
    return seal_baseline(record)


def restrict_record(
    record: BaselineRecord, parent: QuerySet, *, judge_model: str | None = None
) -> BaselineRecord:
    """``record`` (of a study on a grown query set) restricted to the cases of ``parent``, its
    ``corpus_version`` that of the cases kept: what a study of the parent set measured. Sealed again."""
    keep = {q.id for q in parent.queries}
    per_case = {k: v for k, v in record.per_case.items() if k in keep}
    rubric = current_rubric_version(parent, record.skill, judge_model or record.judge_model)
    return seal_baseline(record.model_copy(update={
        "corpus_version": _record_corpus_version(per_case),
        "per_case": per_case,
        "cases": CaseCounts(positive=sum(1 for c in per_case.values() if c.role == "positive"),
                            negative=sum(1 for c in per_case.values() if c.role == "negative")),
        "metrics": {m: metric_value(per_case, m) for m in METRICS},
        "rubric_version": rubric,
        "judge_model": record.judge_model if rubric is not None else None,
        "digest": None,
    }))


# ------------------------------------------------------------------------------------------ file I/O


def baseline_digest(data: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of canonical JSON (keys sorted, no whitespace, UTF-8) of ``data`` but ``digest``."""
    body = {k: v for k, v in data.items() if k != "digest"}
    return "sha256:" + hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def seal_baseline(record: BaselineRecord) -> BaselineRecord:
    """``record`` with its ``digest`` set (the same scheme as artifacts)."""
    return record.model_copy(update={"digest": baseline_digest(record.model_dump(mode="json"))})


def write_baseline(record: BaselineRecord, path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(seal_baseline(record).model_dump_json(indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot write the baseline ({exc.strerror}); check --out") from exc
    return path


MAX_BASELINE_BYTES = 256 * 2**20
"""Bytes a baseline record may hold (one of 100,000 cases is a few tens of MB); larger is refused unread."""


def read_baseline(path: str | os.PathLike[str]) -> BaselineRecord:
    from skillreach._io.json import decode_utf8, read_bytes_limited
    from skillreach._io.paths import refuse_special_file

    path = Path(path)
    refuse_special_file(path, "baseline record (baselines/NAME.json)")
    raw = read_bytes_limited(path, max_bytes=MAX_BASELINE_BYTES, what="baseline record")
    return parse_baseline(decode_utf8(raw, source=str(path)), str(path))


def parse_baseline(text: str, where: str) -> BaselineRecord:
    """The record in ``text`` (read from ``where``) under the bounded JSON reader's rules (depth,
    digits, duplicate keys), its digest verified and every field range-checked (counts ≥ 0, rates in
    [0, 1], finite numbers, no ``true`` where a number belongs)."""
    from skillreach._io.json import JsonProblem, load_json

    try:
        data = load_json(text, source=where)
    except JsonProblem as exc:
        raise InputError(f"{where}:{exc.line}: not a baseline record ({exc.what})") from exc
    if not isinstance(data, dict) or "baseline_id" not in data:
        raise InputError(
            f"{where}: not a baseline record (no baseline_id); write one with skillreach baseline record"
        )
    version = data.get("schema_version", BASELINE_SCHEMA_VERSION)
    if type(version) is not int or (
        version != BASELINE_SCHEMA_VERSION and version not in LEGACY_SCHEMA_VERSIONS
    ):
        raise InputError(f"{where}: baseline schema_version {version!r} is not supported; re-record it")
    stored = data.get("digest")
    if not isinstance(stored, str) or not stored:
        raise TamperedError(
            f"{where}: the baseline record carries no digest; re-record it with skillreach baseline record"
        )
    try:
        actual = baseline_digest(data)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise InputError(f"{where}: not a baseline record ({exc})") from exc
    if actual != stored:
        raise TamperedError(
            f"{where}: digest does not match the content (stored {stored[:19]}…, content {actual[:19]}…); "
            "the record was changed after it was written — re-record it"
        )
    try:
        return BaselineRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "record"
        raise InputError(f"{where}: field {field}: {err['msg']}") from exc


# -------------------------------------------------------------------------------------------- expiry


_SNAPSHOT = re.compile(r"^(?P<alias>.+)-(?:\d{8}|latest)$")


def model_matches(recorded: str, configured: str | None) -> bool:
    """Whether the recorded snapshot is what ``configured`` (snapshot or alias) names."""
    if configured is None or recorded == configured:
        return True
    m = _SNAPSHOT.match(recorded)
    return bool(m and m.group("alias") == configured)


LEGACY_MESSAGE = (
    "recorded before cases were pinned by content (schema_version 1); re-baseline it "
    "(skillreach baseline record --commit)"
)


def _positive_digests(query_set: QuerySet, skill: str) -> dict[str, str]:
    return {q.id: q.case_digest() for q in query_set.queries if q.expected_skill == skill}


def expiry(
    record: BaselineRecord,
    *,
    query_set: QuerySet | None = None,
    model: str | None = None,
    rubric: str | Literal["unknown"] | None = "unknown",
    runtime_version: str | None = None,
) -> list[str]:
    """Why ``record`` no longer matches the current configuration (empty: it is current, perhaps
    stale — :func:`staleness`).

    ``query_set`` is the current query set (expired when none of the record's positive cases is in it
    unchanged), ``model`` the configured model (alias or snapshot), ``rubric`` the current rubric
    version (``"unknown"``: not checked). ``None`` skips a check. A record of schema 1 is expired.
    """
    reasons: list[str] = []
    if record.legacy:
        reasons.append(LEGACY_MESSAGE)
    elif query_set is not None:
        current = _positive_digests(query_set, record.skill)
        recorded = {k: c.digest for k, c in record.per_case.items() if c.role == "positive"}
        if recorded and not any(current.get(k) == d for k, d in recorded.items()):
            reasons.append(f"none of its {len(recorded)} positive cases is in the query set unchanged")
    if model is not None and not model_matches(record.model, model):
        reasons.append(f"model changed: {record.model} → {model}")
    if rubric not in ("unknown", record.rubric_version):
        reasons.append(f"rubric changed: {record.rubric_version} → {rubric}")
    if runtime_version is not None and record.runtime.version not in (None, runtime_version):
        reasons.append(f"runtime version changed: {record.runtime} → {record.runtime.name} {runtime_version}")
    return reasons


def _cases(n: int) -> str:
    return f"{n} case{'' if n == 1 else 's'}"


def staleness(record: BaselineRecord, query_set: QuerySet) -> list[str]:
    """What changed in the skill's own corpus since ``record`` was recorded (empty: nothing): still
    gated, on the identical cases; re-baselining records the grown corpus. E.g. ``3 cases added since
    recorded``."""
    if record.legacy:
        return []
    added, changed, removed = case_changes(
        record.per_case, _positive_digests(query_set, record.skill), positive_only=True
    )
    return [
        f"{_cases(len(ids))} {what} since recorded"
        for ids, what in ((added, "added"), (changed, "changed"), (removed, "removed"))
        if ids
    ]


def changes_between(old: BaselineRecord | None, new: BaselineRecord) -> list[str]:
    """What changed from ``old`` to ``new``, for a commit message: model, corpus, rubric, skill."""
    if old is None:
        return ["first baseline"]
    out: list[str] = []
    if old.model != new.model:
        out.append(f"model {old.model} → {new.model}")
    if old.corpus_version != new.corpus_version:
        out.append(f"corpus {_short(old.corpus_version)} → {_short(new.corpus_version)}")
    if old.rubric_version != new.rubric_version:
        out.append(f"rubric {_short(old.rubric_version)} → {_short(new.rubric_version)}")
    if old.skill_version != new.skill_version:
        out.append(f"skill {_short(old.skill_version)} → {_short(new.skill_version)}")
    if old.runtime != new.runtime:
        out.append(f"runtime {old.runtime} → {new.runtime}")
    if old.runs_per_case != new.runs_per_case:
        out.append(f"runs per case {old.runs_per_case} → {new.runs_per_case}")
    return out or ["re-measured (same pins)"]


def _short(v: str | None) -> str:
    if v is None:
        return "none"
    m = re.search(r"(sha256:|git:)([0-9a-f]{12})[0-9a-f]*", v)
    if m:
        return v[: m.start()] + m.group(1) + m.group(2)
    return v


def metrics_line(record: BaselineRecord) -> str:
    parts = []
    for m in METRICS:
        mv = record.metrics.get(m)
        parts.append(f"{m} {mv.value:.3f}" if mv is not None else f"{m} n/a")
    return ", ".join(parts)


# ----------------------------------------------------------------------------------- changed skills


class ChangeSet(Frozen):
    """The skills a pull request touched, from ``git diff`` against ``since``."""

    since: str
    changed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    every_skill: tuple[str, ...] = ()
    skill_files: dict[str, str] = Field(default_factory=dict)
    """Skill name → its SKILL.md path relative to the git top (for annotations)."""
    problems: tuple[tuple[str, int, str], ...] = ()
    """Changed SKILL.md files that do not parse: (path relative to the git top, line, what is wrong)."""

    @property
    def routing_changed(self) -> bool:
        return bool(self.added or self.removed)

    @property
    def to_check(self) -> list[str]:
        """The changed skills; every existing skill when one was added or removed."""
        if self.routing_changed:
            return sorted(self.every_skill)
        return sorted(self.changed)


def resolve_since(anchor: str | os.PathLike[str], since: str | None) -> tuple[str, str]:
    """(commit, how it was chosen): ``since`` when given, else merge-base with origin/main, else HEAD~1."""
    where = Path(anchor).resolve()
    top = git_toplevel(where)
    if top is None:
        raise InputError(f"{anchor}: not inside a git work tree; skillreach check --changed needs git")
    cut = shallow_boundary(top)
    if since is not None:
        commit = git_output(["rev-parse", "--verify", "--quiet", f"{since}^{{commit}}"], top)
        if not commit:
            raise InputError(
                f"--since {since}: no such revision in {top}; fetch it or pass another"
                + (f" ({SHALLOW_ADVICE})" if cut is not None else "")
            )
        _refuse_at_the_cut(top, commit, cut, f"--since {since}")
        return commit, f"--since {since}"
    for upstream in ("origin/main", "origin/master"):
        base = git_output(["merge-base", upstream, "HEAD"], top)
        if base:
            _refuse_at_the_cut(top, base, cut, f"the merge-base with {upstream}")
            return base, f"merge-base with {upstream}"
    if cut is not None:  # HEAD~1 of a shallow clone is no pull request's base
        raise InputError(f"{top}: a shallow clone without the base branch's history: {SHALLOW_ADVICE}")
    prev = git_output(["rev-parse", "--verify", "--quiet", "HEAD~1^{commit}"], top)
    if prev:
        return prev, "HEAD~1 (no origin/main to take a merge-base with)"
    raise InputError(f"{top}: no base revision (no origin/main, no HEAD~1); pass --since REV")


SHALLOW_ADVICE = (
    "fetch more history (`git fetch --unshallow`, or `fetch-depth: 0` in actions/checkout) so that the "
    "base revision is in the clone"
)


def shallow_boundary(top: Path) -> set[str] | None:
    """The commits a shallow clone is cut at (their parents are missing), ``None`` in a full clone."""
    if git_output(["rev-parse", "--is-shallow-repository"], top) != "true":
        return None
    path = git_output(["rev-parse", "--git-path", "shallow"], top)
    try:
        text = (top / path).read_text(encoding="ascii", errors="replace") if path else ""
    except OSError:
        text = ""
    return {line.strip() for line in text.splitlines() if line.strip()}


def _refuse_at_the_cut(top: Path, base: str, cut: set[str] | None, what: str) -> None:
    """In a shallow clone, refuse a base whose history is cut off: the diff against it would say what
    the clone lacks, not what the pull request changed."""
    if cut is None:
        return
    if base in cut or git_output(["merge-base", "--is-ancestor", base, "HEAD"], top) is None:
        raise InputError(
            f"{top}: a shallow clone: {what} ({base[:12]}) is cut off from HEAD; {SHALLOW_ADVICE}"
        )


def changed_skills(skill_dirs: Sequence[str | os.PathLike[str]], since: str) -> ChangeSet:
    """Which skills under ``skill_dirs`` changed since ``since`` (commits, staged, unstaged, untracked)."""
    from skillreach.skills.discovery import discover

    roots = [Path(d).resolve() for d in skill_dirs]
    top = git_toplevel(roots[0])
    if top is None:
        raise InputError(f"{roots[0]}: not inside a git work tree")
    found = discover(roots)
    folders = {s.name: Path(s.folder or Path(s.path).parent).resolve() for s in found.skills}
    rel_folders = {name: _relative(f, top) for name, f in folders.items()}
    diff = git_output(["diff", "--name-status", "--no-renames", "-z", since, "--"], top) or ""
    parts = [p for p in diff.split("\0") if p]
    entries: list[tuple[str, str]] = [(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
    untracked = git_output(["ls-files", "--others", "--exclude-standard", "-z"], top) or ""
    entries += [("A", p) for p in untracked.split("\0") if p]
    rel_roots = [_relative(r, top) for r in roots]

    def inside(path: str, folder: str) -> bool:
        return folder in (".", path) or path.startswith(folder + "/")

    changed = {name for name, folder in rel_folders.items() for _, path in entries if inside(path, folder)}
    added = {
        name
        for name, folder in rel_folders.items()
        if name in changed and git_output(["cat-file", "-e", f"{since}:{folder}/SKILL.md"], top) is None
    }
    removed: set[str] = set()
    for status, path in entries:
        if status.startswith("D") and path.endswith("SKILL.md") and any(inside(path, r) for r in rel_roots):
            folder = path.rsplit("/", 1)[0] if "/" in path else "."
            if not (top / path).exists() and folder not in rel_folders.values():
                removed.add(Path(folder).name)
    skill_files = {
        name: _relative(Path(s.path).resolve(), top) for s in found.skills for name in [s.name] if s.path
    }
    changed_paths = {path for _, path in entries}
    problems = tuple(
        sorted(
            (_relative(Path(p.path).resolve(), top), p.line, p.what)
            for p in found.problems
            if _relative(Path(p.path).resolve(), top) in changed_paths
        )
    )
    return ChangeSet(
        since=since,
        problems=problems,
        changed=tuple(sorted(changed)),
        added=tuple(sorted(added)),
        removed=tuple(sorted(removed)),
        every_skill=tuple(sorted(folders)),
        skill_files=skill_files,
    )
