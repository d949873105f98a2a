"""One study: its configuration, its result, and the pure helpers the flows use.

A study probes every (query, attempt) pair of one query set against one catalog with one runtime, scores
the probes into an artifact, and records the run. The Prefect flow (``flows/study.py``) composes the
tasks; everything here is plain data and pure functions, usable without Prefect.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from skillreach.errors import ConfigError
from skillreach.models import ProbeRecord, Query

__all__ = [
    "CatalogStrategy",
    "StudyConfig",
    "StudyResult",
    "apply_grades",
    "batch_key",
    "batch_pairs",
    "default_out_dir",
    "describe_estimate",
    "grade_key",
    "needs_grading",
    "redact",
    "study_id_for",
    "valid_grades",
]

CatalogStrategy = Literal["full", "singleton", "neighborhood"]

_SECRET_KEY = re.compile(r"(key|token|secret|password|passwd|auth|credential|cookie)", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]*)@", re.I)
_WEBHOOK_PATH = re.compile(r"(https?://[^/\s]+)/\S+")

# The keys of a config file (or CLI flags) that belong to the study, not to Settings.
STUDY_ONLY_KEYS = frozenset(
    {"skills", "queries", "out", "target", "compliance", "runtime_options", "record_baselines", "gate",
     "judge_model", "keep_errors"}
)


class StudyConfig(BaseModel):
    """What one study runs. Empty ``skills`` and no ``queries`` mean the bundled offline example.

    Built by the CLI from flags > config file > environment > defaults (see :meth:`build`). It travels
    as a Prefect flow parameter, so it never holds a secret: API keys stay in the SDKs' own environment
    variables and the database URL is read from the settings by the task that opens the store.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    skills: tuple[Path, ...] = ()
    queries: Path | None = None
    runtime: str = "keyword"
    model: str | None = None
    catalog: CatalogStrategy = "full"
    target: str | None = None
    skill_precedence: Literal["first", "last"] = "first"
    attempts: int = Field(default=1, ge=1)
    max_turns: int = Field(default=3, ge=1)
    early_exit: bool = True
    concurrency: int = Field(default=8, ge=1)
    batch_size: int = Field(default=100, ge=1)
    out: Path | None = None
    compliance: bool = False
    max_cost: float | None = Field(default=None, gt=0)
    runtime_options: dict[str, Any] = Field(default_factory=dict)
    neighborhood_k: int = Field(default=10, ge=1)
    neighborhood_size: int = Field(default=20, ge=1)
    seed: int = 0
    home: Path = Path(".skillreach")
    record_baselines: bool = False
    """Record every queried skill's baseline from this study (``rebaseline_all``)."""
    gate: bool = True
    """Compare with the stored baselines and alert on a breach."""
    keep_errors: bool = False
    """On a resume, keep errored probes as they are (default: probe those pairs again)."""
    judge_model: str | None = None
    """The rubric judge (``None``: :func:`skillreach.judge.default_judge_model`, i.e.
    ``$SKILLREACH_JUDGE_MODEL`` or the offline fake judge)."""

    @field_validator("runtime_options")
    @classmethod
    def _no_secrets(cls, v: dict[str, Any]) -> dict[str, Any]:
        bad = [k for k in v if _SECRET_KEY.search(k)]
        if bad:
            raise ValueError(
                f"runtime option {bad[0]!r} looks like a secret; set it in the runtime's environment "
                "variable instead (flow parameters are stored)"
            )
        return v

    @property
    def is_example(self) -> bool:
        return not self.skills and self.queries is None

    @classmethod
    def build(cls, config_file: Path | None = None, **flags: Any) -> StudyConfig:
        """Flags (``None`` = not given) > config file > environment (``SKILLREACH_*``) > defaults.

        The config file may hold the study keys (skills, queries, out, target, compliance, judge_model,
        runtime_options) beside any :class:`~skillreach.settings.Settings` key; unknown keys are refused
        with the file named.
        """
        from skillreach.settings import _read_config_file, load_settings

        file_values = _read_config_file(config_file) if config_file is not None else {}
        given = {k: v for k, v in flags.items() if v is not None and v != ()}
        study_values = {k: v for k, v in {**file_values, **given}.items() if k in STUDY_ONLY_KEYS}
        settings_values = {k: v for k, v in file_values.items() if k not in STUDY_ONLY_KEYS}
        settings_flags = {k: v for k, v in given.items() if k not in STUDY_ONLY_KEYS}
        max_cost = settings_flags.pop("max_cost", None)
        try:
            settings = load_settings(None, **{**settings_values, **settings_flags})
        except ConfigError as exc:
            from_file = config_file is not None and not exc.message.startswith("environment")
            raise ConfigError(f"{config_file}: {exc.message}" if from_file else exc.message) from exc
        if isinstance(study_values.get("skills"), str | Path):
            study_values["skills"] = [study_values["skills"]]
        base = config_file.parent if config_file is not None else None
        for key in ("skills", "queries", "out"):
            if key in study_values and key not in given and base is not None:
                # paths in a config file are relative to the file, like every tool that reads one
                val = study_values[key]
                study_values[key] = (
                    [base / Path(p) for p in val] if key == "skills" else base / Path(val)
                )
        try:
            return cls(
                runtime=settings.runtime,
                model=settings.model,
                catalog=settings.catalog,
                attempts=settings.attempts,
                max_turns=settings.max_turns,
                early_exit=settings.early_exit,
                concurrency=settings.concurrency,
                batch_size=settings.batch_size,
                max_cost=max_cost if max_cost is not None else settings.max_cost_usd,
                neighborhood_k=settings.neighborhood_k,
                neighborhood_size=settings.neighborhood_size,
                seed=settings.seed,
                skill_precedence=settings.skill_precedence,
                home=settings.home,
                **study_values,
            )
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "config"
            where = f"{config_file}: " if config_file is not None and err["loc"][0] in file_values else ""
            raise ConfigError(f"{where}{field}: {err['msg']}") from exc

    def public_dict(self) -> dict[str, Any]:
        """The configuration as JSON-able data for the store and reports, with secrets redacted."""
        return redact(self.model_dump(mode="json"))


class StudyResult(BaseModel):
    """What a finished study hands back. ``artifact`` is H3's :class:`skillreach.artifacts.Artifact`."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    study_id: str
    out: Path
    probes_path: Path
    artifact_path: Path
    report_path: Path | None = None
    artifact: Any = None
    gate_report: str = ""
    breaches: tuple[dict[str, Any], ...] = ()
    probes_run: int = 0
    probes_resumed: int = 0
    cost_usd: float = 0.0


# ------------------------------------------------------------------------------------------- helpers


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


def batch_key(fingerprint: str, pairs: Sequence[tuple[Query | str, int]]) -> str:
    """A stable cache key for one batch: the study's fingerprint plus the batch's (query id, attempt)s."""
    h = hashlib.sha256(fingerprint.encode())
    ids = sorted((a, q if isinstance(q, str) else q.id) for q, a in pairs)
    for a, qid in ids:
        h.update(f"\n{qid}\t{a}".encode())
    return "batch-" + h.hexdigest()[:32]


GradeKey = tuple[str, int, str | None, str | None]


def grade_key(record: ProbeRecord) -> GradeKey:
    """Which probe a grade belongs to: (query id, attempt, fingerprint, finished_at). A probe re-run
    after an error is another probe (another ``finished_at``), so an old grade never sticks to it."""
    return (record.query_id, record.attempt, record.fingerprint, record.finished_at)


def needs_grading(queries: Iterable[Query], records: Iterable[ProbeRecord], *, compliance: bool) -> bool:
    """Whether a study has rubrics to grade: some query has ``checks.rubric`` and the study ran in
    compliance mode or some probe carries a final answer (the judge grades answers, nothing else)."""
    if not any(q.checks is not None and q.checks.rubric for q in queries):
        return False
    return compliance or any(r.final_text is not None for r in records)


def valid_grades(
    graded: Iterable[ProbeRecord], queries: Iterable[Query], judge_model: str
) -> dict[GradeKey, ProbeRecord]:
    """The graded records (``graded.jsonl``) still valid: graded under the rubric version the study's
    queries and ``judge_model`` give now (a changed rubric, template or judge is graded again); the last
    one per probe wins."""
    from skillreach.judge import rubric_version

    versions = {
        q.id: rubric_version(q.checks.rubric, judge_model)
        for q in queries
        if q.checks is not None and q.checks.rubric
    }
    out: dict[GradeKey, ProbeRecord] = {}
    for g in graded:
        if g.rubric_grade is not None and g.rubric_version is not None and (
            versions.get(g.query_id) == g.rubric_version
        ):
            out[grade_key(g)] = g
    return out


def apply_grades(records: Iterable[ProbeRecord], grades: dict[GradeKey, ProbeRecord]) -> list[ProbeRecord]:
    """``records`` with each probe's grade (``rubric_grade``, ``rubric_version``) put on, when it has one."""
    out: list[ProbeRecord] = []
    for r in records:
        g = grades.get(grade_key(r))
        out.append(
            r if g is None else r.model_copy(
                update={"rubric_grade": g.rubric_grade, "rubric_version": g.rubric_version}
            )
        )
    return out


def describe_estimate(
    usd: float,
    probes: int,
    model: str,
    *,
    cached: bool,
    batch: bool,
    max_cost: float | None = None,
    spent: float = 0.0,
) -> str:
    """One line of a cost estimate: "about $0.42 for 142 probes (claude-sonnet-4-6, cached listing)",
    and, when the estimate passes what ``--max-cost`` leaves, what the cap will do."""
    how = [model] + (["cached listing"] if cached else []) + (["batch: half price"] if batch else [])
    spent_s = f"; ${spent:.2f} already spent" if spent else ""
    line = f"about ${usd:.2f} for {probes} probe{'s' if probes != 1 else ''} ({', '.join(how)}){spent_s}"
    if max_cost is not None:
        left = max(0.0, max_cost - spent)
        if usd > left:
            if left <= 0:
                when = "before its first probe"
            else:  # the probe that crosses the cap still runs
                share = max(1, min(probes, math.ceil(probes * left / usd)))
                when = f"after about {share} probe{'s' if share != 1 else ''}"
            line += (
                f". That is more than the ${left:.2f} --max-cost leaves: the cap will stop the run {when}, "
                "keeping the results so far (re-run with a higher --max-cost to resume)"
            )
    return line


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "study"


def default_out_dir(
    config: StudyConfig, now: datetime | None = None, root: Path = Path("runs"), kind: str = "study"
) -> Path:
    """``runs/<UTC stamp>[-<kind>]-<runtime>[-<model>]`` for a study that was given no ``--out``."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    parts = [stamp] + ([] if kind == "study" else [_slug(kind)]) + [_slug(config.runtime)]
    if config.model:
        parts.append(_slug(config.model))
    return root / "-".join(parts)


def study_id_for(fingerprint: str, out: Path) -> str:
    """Deterministic: the same fingerprint written to the same folder is the same (resumable) study."""
    digest = hashlib.sha256(f"{fingerprint}\n{out.resolve().as_posix()}".encode()).hexdigest()
    return "st-" + digest[:16]


def redact(value: Any) -> Any:
    """Recursively blank secret-looking keys, passwords in URLs, and webhook paths (they carry tokens)."""
    if isinstance(value, dict):
        return {
            k: ("***" if isinstance(k, str) and _SECRET_KEY.search(k) and v else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        value = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", value)
        if "hooks." in value or "/webhook" in value or "/services/" in value:
            value = _WEBHOOK_PATH.sub(r"\1/***", value)
        return value
    return value
