"""A/B diff of two studies (arms) over the same sealed query set: did the edit help, or is it noise?

Pure functions over two :class:`~skillreach.scoring.artifact.Artifact` objects (no Prefect, no I/O but the
loader).

**Walls** (:class:`~skillreach.errors.RefusedError`, exit 3): an arm compared with itself (the same
folder, or the same artifact digest), different query ids, different query-set digests.

**Corroboration**: ``vary`` says which axis was meant to change (:data:`AXES`); :func:`moved_axes` reads
from the pins and digests which did. Anything else that moved refuses the diff, or with ``force`` becomes
a warning (a description edit that also changed the model is not a description test).

**Pairs** are queries with at least one scored probe in both arms; a query's attempts are averaged
within the arm, so each query weighs the same whatever the number of attempts.

- Δ top-1 accuracy, Δ trajectory reachability (in-scope queries) and per-skill Δ recall (the skill's
  queries) are differences of paired proportions (each arm's mean per-query rate): the gate's interval
  of spec/metrics.md, Newcombe's hybrid score interval for paired proportions (method 10, each arm's
  clustered interval over its attempts; :func:`skillreach.scoring.intervals.newcombe_paired`), clipped
  to [−1, 1] and never of zero width.
- Δ macro-F1 and per-skill Δ precision are ratios, not means over queries: their interval is a paired
  bootstrap over queries (the same resampled queries in both arms; percentile, seeded, ``resamples``).
  F1 per class is 2·tp / (2·tp + fp + fn) on attempt-averaged counts, the macro mean over classes with
  support, as in spec/metrics.md.
- McNemar's exact test on top-1 correctness when each arm has exactly one scored attempt per paired
  query: the discordant queries b (A right, B wrong) and c (A wrong, B right), p = two-sided binomial
  test of c in b + c at ½ (1 when b + c = 0).
- Verdict on Δ top-1: ``better`` when the interval's lower end > 0, ``worse`` when its upper end < 0,
  otherwise ``no detectable change``.
- **Staged** (``looks``): the same Δ top-1, tested after each of ``looks`` stages of the paired
  queries (a seeded shuffle) against the two-sided O'Brien–Fleming boundary
  (:func:`skillreach.baselines.sequential.staged_diff`): where a staged run would have stopped, its verdict
  and
  the probes (of both arms) it would have saved.
- **Probed in stages** (:func:`arm_b_config`, :func:`probed_staged_diff`): arm B is not read but probed
  — A's study with other skills — stage by stage, the test after each stage, and the probing stops as
  soon as Δ top-1 is decided; the probes saved are B's probes never run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from skillreach.baselines.sequential import StagedDiff, staged_diff
from skillreach.errors import InputError, RefusedError
from skillreach.models import NO_SKILL
from skillreach.scoring.artifact import Artifact, ProbeOutcome, read_artifact
from skillreach.scoring.intervals import newcombe_paired
from skillreach.scoring.query_stats import ArmQueries, bootstrap_weights, clip, f1_macro, precision, quantiles
from skillreach.study.config import StudyConfig
from skillreach.study.folder import STUDY_FILE, StudyFile, read_study_file

__all__ = [
    "AXES",
    "DIFF_SCHEMA_VERSION",
    "Arm",
    "ArmInfo",
    "Delta",
    "DiffResult",
    "Flip",
    "McNemar",
    "SkillDelta",
    "arm_b_config",
    "check_walls",
    "corroborate",
    "diff_arms",
    "diff_plan",
    "infer_vary",
    "load_arm",
    "mcnemar_exact",
    "moved_axes",
    "probed_staged_diff",
    "query_texts",
    "top1_diffs",
]

DIFF_SCHEMA_VERSION = 1

Axis = Literal["description", "rival", "scope", "runtime", "model"]
AXES: tuple[str, ...] = ("description", "rival", "scope", "runtime", "model")
"""What an A/B diff may vary: the skill's description, a rival (another resident skill added, removed
or edited), the catalog's scope (strategy, target, size), the runtime (its name, turn budget or version
from ``study.json``), the model."""

Interval = tuple[float, float]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Arm(BaseModel):
    """One arm: the study folder, its (digest-verified) artifact and, when the folder has one, its
    ``study.json`` (runtime version, the sealed query set it ran)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    folder: Path
    artifact: Artifact
    study: StudyFile | None = None

    @property
    def runtime_version(self) -> str | None:
        return None if self.study is None else self.study.runtime.get("version")


class ArmInfo(_Frozen):
    name: str
    folder: str
    artifact_digest: str | None
    queries_digest: str
    catalog_id: str
    catalog_digest: str | None
    skills: int
    runtime: str
    model: str | None
    resolved_model: str | None
    attempts: int
    probes: int
    scored: int


class Delta(_Frozen):
    """B − A of one figure, with its 95 % paired interval over ``pairs`` queries."""

    metric: str
    a: float | None
    b: float | None
    delta: float | None
    ci95: Interval | None
    pairs: int
    method: Literal["Newcombe paired", "paired t", "paired bootstrap"]


class McNemar(_Frozen):
    lost: int
    """b: queries A routed right and B wrong."""
    won: int
    """c: queries A routed wrong and B right."""
    pvalue: float


class Flip(_Frozen):
    """A query whose top-1 correctness moved between the arms."""

    query_id: str
    kind: str
    truth: str
    a_rate: float
    b_rate: float
    a_predicted: str
    b_predicted: str
    text: str | None = None


class SkillDelta(_Frozen):
    skill: str
    support: int
    """Paired queries that expect this skill."""
    recall: Delta
    precision: Delta
    won: list[str] = Field(default_factory=list)
    """Its own queries now routed to it that were not."""
    lost: list[str] = Field(default_factory=list)
    """Its own queries no longer routed to it."""
    stolen: list[str] = Field(default_factory=list)
    """Other labels' queries that B routes to it and A did not (traffic it takes from neighbours)."""
    released: list[str] = Field(default_factory=list)
    """Other labels' queries that A wrongly routed to it and B no longer does."""


class DiffResult(_Frozen):
    schema_version: int = DIFF_SCHEMA_VERSION
    a: ArmInfo
    b: ArmInfo
    vary: str | None
    skill: str | None
    moved: dict[str, str]
    forced: bool
    warnings: list[str]
    pairs: int
    unpaired: list[str]
    headline: list[Delta]
    mcnemar: McNemar | None
    mcnemar_note: str
    verdict: Literal["better", "worse", "no detectable change", "no pairs"]
    won: list[Flip]
    lost: list[Flip]
    skills: list[SkillDelta]
    resamples: int
    seed: int
    staged: StagedDiff | None = None
    """With ``--staged``: the group-sequential replay of Δ top-1 over the paired queries."""

    def largest_loss(self) -> SkillDelta | None:
        """The skill whose recall fell the most among those that fell significantly (the interval's upper
        end below 0); ``None`` when no skill lost significantly."""
        lost = [
            s for s in self.skills
            if s.recall.delta is not None and s.recall.ci95 is not None and s.recall.ci95[1] < 0
        ]
        return min(lost, key=lambda s: (s.recall.delta or 0.0, s.skill), default=None)

    def takers(self, skill: SkillDelta) -> dict[str, int]:
        """Who now takes the queries ``skill`` lost: other skills whose ``stolen`` holds them."""
        lost = set(skill.lost)
        counts = {s.skill: len(lost & set(s.stolen)) for s in self.skills if s.skill != skill.skill}
        return dict(sorted(((k, v) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0])))

    def loss_line(self) -> str | None:
        """``algorithmic-art: recall 1.000 → 0.375 (Δ -0.625 [-0.863, -0.170]; 5 queries lost to
        canvas-design)``, or ``None``."""
        s = self.largest_loss()
        if s is None or s.recall.ci95 is None:
            return None
        takers = self.takers(s)
        to = ", ".join(f"{n} × {c}" for n, c in takers.items()) if len(takers) > 1 else next(iter(takers), "")
        where = f"; {len(s.lost)} queries lost" + (f" to {to}" if to else "")
        return (
            f"{s.skill}: recall {s.recall.a:.3f} → {s.recall.b:.3f} (Δ {s.recall.delta:+.3f} "
            f"[{s.recall.ci95[0]:+.3f}, {s.recall.ci95[1]:+.3f}]{where})"
        )

    def delta(self, metric: str) -> Delta:
        return next(d for d in self.headline if d.metric == metric)


# ------------------------------------------------------------------------------------ loading, walls


def load_arm(folder: Path, name: str) -> Arm:
    """The arm of one study folder (or an ``artifact.json`` named directly)."""
    path = folder / "artifact.json" if folder.is_dir() else folder
    if not path.is_file():
        raise InputError(f"{folder}: no artifact.json there; pass a study folder written by skillreach run")
    art = read_artifact(path)
    if not len(art.outcomes):
        raise InputError(
            f"{path}: the artifact holds no per-probe outcomes; score it again with skillreach score"
        )
    study = read_study_file(path.parent) if (path.parent / STUDY_FILE).is_file() else None
    return Arm(name=name, folder=path.parent, artifact=art, study=study)


def _query_ids(art: Artifact) -> set[str]:
    return {o.query_id for o in art.outcomes}


def check_walls(a: Arm, b: Arm, *, partial_b: bool = False) -> None:
    """Refuse (exit 3) a diff that would not be a comparison: one arm twice, other queries.
    ``partial_b``: B is being probed in stages, so it may have run only some of A's queries."""
    if a.folder.resolve() == b.folder.resolve():
        raise RefusedError(f"{a.folder}: an arm compared with itself; pass two different study folders")
    if a.artifact.digest is not None and a.artifact.digest == b.artifact.digest:
        raise RefusedError(
            f"{b.folder}: the same study as {a.folder} (artifact digest {a.artifact.digest[:19]}…); "
            "an arm compared with itself tells nothing"
        )
    ids_a, ids_b = _query_ids(a.artifact), _query_ids(b.artifact)
    if ids_a != ids_b and not (partial_b and ids_b <= ids_a):
        only_a, only_b = sorted(ids_a - ids_b), sorted(ids_b - ids_a)
        parts = (
            [f"only in A: {', '.join(only_a[:5])}{' …' if len(only_a) > 5 else ''}"] if only_a else []
        ) + ([f"only in B: {', '.join(only_b[:5])}{' …' if len(only_b) > 5 else ''}"] if only_b else [])
        raise RefusedError(
            f"{b.folder}: the arms ran different query ids ({'; '.join(parts)}); "
            "run both on the same sealed set"
        )
    if a.artifact.queries_digest != b.artifact.queries_digest:
        raise RefusedError(
            f"{b.folder}: query-set digest {b.artifact.queries_digest} differs from A's "
            f"{a.artifact.queries_digest}; run both arms on the same sealed query set"
        )


def moved_axes(
    a: Artifact, b: Artifact, skill: str | None = None, versions: tuple[str | None, str | None] = (None, None)
) -> dict[str, str]:
    """Which axes moved between the arms, each with a short account of what changed.

    A resident skill's description edit is ``description`` (with ``skill``: only that skill's edit;
    another skill's is ``rival``); skills added or removed are ``rival``; another catalog id (strategy,
    target, size) is ``scope``; a catalog digest that changed with names and descriptions equal (bodies
    edited) counts as ``description``.
    """
    moved: dict[str, str] = {}
    ca, cb = a.catalog, b.catalog
    names_a, names_b = set(ca.skills), set(cb.skills)
    edited = sorted(n for n in names_a & names_b if ca.descriptions.get(n) != cb.descriptions.get(n))
    own = [n for n in edited if skill is None or n == skill]
    others = [n for n in edited if n not in own]
    if own:
        moved["description"] = f"description of {', '.join(own)} changed"
    elif not edited and names_a == names_b and ca.digest != cb.digest:
        moved["description"] = "skill bodies changed (catalog digest differs, descriptions equal)"
    rival = []
    if names_b - names_a:
        rival.append(f"added {', '.join(sorted(names_b - names_a))}")
    if names_a - names_b:
        rival.append(f"removed {', '.join(sorted(names_a - names_b))}")
    if others:
        rival.append(f"description of {', '.join(others)} changed")
    if rival:
        moved["rival"] = "; ".join(rival)
    if ca.id != cb.id or ca.strategy != cb.strategy:
        moved["scope"] = f"catalog {ca.id} → {cb.id}"
    ra, rb = a.runtime, b.runtime
    runtime = [
        f"{field} {va} → {vb}"
        for field, va, vb in (
            ("runtime", ra.name, rb.name),
            ("max_turns", ra.max_turns, rb.max_turns),
            ("early_exit", ra.early_exit, rb.early_exit),
            ("version", *versions),
        )
        if va != vb
    ]
    if runtime:
        moved["runtime"] = ", ".join(runtime)
    ma, mb = ra.resolved_model or ra.model, rb.resolved_model or rb.model
    if ma != mb:
        moved["model"] = f"model {ma} → {mb}"
    return moved


def infer_vary(moved: Mapping[str, str], vary: str | None) -> str | None:
    """``vary`` as given, else the one axis that moved (``None`` when none or several did)."""
    if vary is not None:
        return vary
    return next(iter(moved)) if len(moved) == 1 else None


def corroborate(moved: Mapping[str, str], vary: str | None, *, force: bool) -> list[str]:
    """Refuse (exit 3) when something other than ``vary`` moved; with ``force``, warnings instead.

    Without ``vary``, arms that differ in exactly one axis are taken as varying it (said in a warning);
    arms that differ in several must say which was meant.
    """
    if vary is not None and vary not in AXES:
        raise InputError(f"--vary {vary}: use one of {', '.join(AXES)}")
    warnings: list[str] = []
    if vary is None and len(moved) == 1:
        axis, what = next(iter(moved.items()))
        return [f"no --vary: the arms differ in {axis} alone ({what}); that is what this diff measures"]
    stray = {k: v for k, v in moved.items() if k != vary}
    if vary is not None and vary not in moved:
        warnings.append(f"--vary {vary}, but nothing of that kind changed between the arms")
    if not stray:
        return warnings
    what = "; ".join(f"{k}: {v}" for k, v in stray.items())
    if not force:
        if vary is None:
            raise RefusedError(
                f"the arms differ in several ways ({what}); say which was meant with --vary, "
                "compare arms that differ in one thing, or pass --force to report it anyway"
            )
        raise RefusedError(
            f"the arms differ in more than --vary {vary} says ({what}); "
            "compare arms that differ in one thing, or pass --force to report it anyway"
        )
    return [
        *warnings,
        f"--force: the arms also differ in {what}; the diff does not isolate {vary or 'anything'}",
    ]


# ------------------------------------------------------------------------------------- statistics


def mcnemar_exact(lost: int, won: int) -> float:
    """Two-sided exact McNemar p: binomial test of ``won`` in ``lost + won`` discordant pairs at ½."""
    n = lost + won
    if n == 0:
        return 1.0
    from scipy.stats import binomtest  # ~1 s to import: loaded where a diff is tested

    return float(binomtest(won, n, 0.5).pvalue)


def _outcomes(rate: float, attempts: int) -> list[float]:
    """A query's scored attempts as 0/1 outcomes, from its rate (hits of ``attempts``)."""
    hits = round(rate * attempts)
    return [1.0] * hits + [0.0] * (attempts - hits)


def _paired_delta(
    metric: str,
    a: Sequence[float],
    b: Sequence[float],
    attempts_a: Sequence[int],
    attempts_b: Sequence[int],
) -> Delta:
    """B − A of a paired proportion with Newcombe's interval (each query: its rate over its attempts)."""
    k = len(a)
    if k == 0:
        return Delta(metric=metric, a=None, b=None, delta=None, ci95=None, pairs=0, method="Newcombe paired")
    groups_a = [_outcomes(r, m) for r, m in zip(a, attempts_a, strict=True)]
    groups_b = [_outcomes(r, m) for r, m in zip(b, attempts_b, strict=True)]
    mean, lo, hi = newcombe_paired(groups_b, groups_a)
    return Delta(
        metric=metric,
        a=float(np.mean(a)),
        b=float(np.mean(b)),
        delta=mean,
        ci95=clip(lo, hi),
        pairs=k,
        method="Newcombe paired",
    )


def _flip(
    qid: str, i: int, qa: ArmQueries, qb: ArmQueries, *, meta: tuple[str, str], texts: Mapping[str, str]
) -> Flip:
    return Flip(
        query_id=qid,
        kind=meta[0],
        truth=meta[1],
        a_rate=float(qa.top1[i]),
        b_rate=float(qb.top1[i]),
        a_predicted=qa.mode[i],
        b_predicted=qb.mode[i],
        text=texts.get(qid),
    )


def top1_diffs(a: Artifact, b: Artifact) -> dict[str, float]:
    """Per paired query (a scored probe in both arms): B's top-1 correctness − A's (attempt means)."""
    rows_a, rows_b = _scored_rows(a), _scored_rows(b)
    qids = sorted(q for q in _query_ids(a) if rows_a.get(q) and rows_b.get(q))
    labels = sorted({str(rows_a[q][0].truth) for q in qids}
                    | {str(o.predicted) for q in qids for o in (*rows_a[q], *rows_b[q])})
    qa, qb = ArmQueries(rows_a, qids, labels), ArmQueries(rows_b, qids, labels)
    return {q: float(qb.top1[i] - qa.top1[i]) for i, q in enumerate(qids)}


def diff_plan(a: Artifact, pairs: Sequence[tuple[str, int]]) -> list[str]:
    """The queries a probed diff tests: those of B's plan that A scored."""
    scored = set(_scored_rows(a))
    return sorted({q for q, _ in pairs if q in scored})


def probed_staged_diff(
    a: Artifact, b: Artifact, planned: Sequence[str], attempts: int, *, looks: int, look: int, seed: int
) -> StagedDiff:
    """The staged test after stage ``look`` of a diff that probes B stage by stage (``planned``: the
    queries of :func:`diff_plan`; each costs B ``attempts`` probes). A query of a probed stage whose B
    probes all failed counts as no change."""
    diffs = top1_diffs(a, b)
    full = {q: diffs.get(q, 0.0) for q in planned}
    return staged_diff(full, dict.fromkeys(planned, attempts), looks=looks, seed=seed, probed_looks=look)


def arm_b_config(a: Arm, skills: Sequence[Path], out: Path, secrets_from: StudyConfig) -> StudyConfig:
    """Arm B of a probed diff: the study A ran (its ``study.json``: the sealed query set copied beside it,
    runtime, the model snapshot A resolved, attempts and every option) with the skills in ``skills``,
    written to ``out``; the database URL and webhooks from ``secrets_from``."""
    from pydantic import ValidationError

    if a.study is None:
        raise InputError(f"{a.folder}: no {STUDY_FILE}; probing arm B needs the study A ran "
                         "(a folder written by skillreach run)")
    values = dict(a.study.config)
    values.update(
        skills=[str(p) for p in skills], queries=str(a.study.query_set_path(a.folder)), out=str(out),
        model=a.study.model.get("resolved") or a.study.model.get("requested") or values.get("model"),
        record_baselines=False, gate=False,
    )
    values = {k: v for k, v in values.items()
              if k in StudyConfig.model_fields and k not in ("database_url", "alert_webhooks")}
    try:
        config = StudyConfig.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{a.folder / STUDY_FILE}: config.{'.'.join(map(str, err['loc']))}: {err['msg']}; "
                         "run study A again with this version of skillreach") from exc
    return config.with_secrets_from(secrets_from)


def _scored_rows(art: Artifact) -> dict[str, list[ProbeOutcome]]:
    rows: dict[str, list[ProbeOutcome]] = defaultdict(list)
    for o in art.outcomes:
        if o.scored:
            rows[o.query_id].append(o)
    return rows


def _info(arm: Arm) -> ArmInfo:
    art = arm.artifact
    return ArmInfo(
        name=arm.name,
        folder=str(arm.folder),
        artifact_digest=art.digest,
        queries_digest=art.queries_digest,
        catalog_id=art.catalog.id,
        catalog_digest=art.catalog.digest,
        skills=len(art.catalog.skills),
        runtime=art.runtime.name,
        model=art.runtime.model,
        resolved_model=art.runtime.resolved_model,
        attempts=art.attempts,
        probes=art.counts.probes,
        scored=art.counts.scored,
    )


def _headline(qa: ArmQueries, qb: ArmQueries, weights: np.ndarray) -> list[Delta]:
    """Δ top-1 and Δ reachability (Newcombe paired), Δ macro-F1 (paired bootstrap with ``weights``)."""
    k = len(qa.top1)
    headline = [_paired_delta("top1_accuracy", list(qa.top1), list(qb.top1), qa.attempts, qb.attempts)]
    in_scope = ~np.isnan(qa.reach)
    kept = [i for i in range(k) if in_scope[i]]
    headline.append(_paired_delta(
        "trajectory_reachability", list(qa.reach[in_scope]), list(qb.reach[in_scope]),
        [qa.attempts[i] for i in kept], [qb.attempts[i] for i in kept],
    ))
    if k == 0:
        headline.append(
            Delta(
                metric="macro_f1", a=None, b=None, delta=None, ci95=None, pairs=0, method="paired bootstrap"
            )
        )
        return headline
    f1a = float(f1_macro(qa.tp.sum(0), qa.fp.sum(0), qa.fn.sum(0)))
    f1b = float(f1_macro(qb.tp.sum(0), qb.fp.sum(0), qb.fn.sum(0)))
    boot = f1_macro(weights @ qb.tp, weights @ qb.fp, weights @ qb.fn) - f1_macro(
        weights @ qa.tp, weights @ qa.fp, weights @ qa.fn
    )
    headline.append(
        Delta(
            metric="macro_f1",
            a=f1a,
            b=f1b,
            delta=f1b - f1a,
            ci95=quantiles(boot),
            pairs=k,
            method="paired bootstrap",
        )
    )
    return headline


def diff_arms(
    a: Arm,
    b: Arm,
    *,
    vary: str | None = None,
    force: bool = False,
    skill: str | None = None,
    texts: Mapping[str, str] | None = None,
    resamples: int = 2000,
    seed: int = 0,
    looks: int | None = None,
    partial_b: bool = False,
) -> DiffResult:
    """The paired diff B − A (see the module docstring). Walls and corroboration raise first.
    ``looks``: also replay the staged design with that many planned looks. ``partial_b``: B was probed
    in stages and stopped early: the pairs are the queries B ran."""
    check_walls(a, b, partial_b=partial_b)
    if skill is not None and skill not in set(a.artifact.catalog.skills) | set(b.artifact.catalog.skills):
        raise InputError(f"--skill {skill}: not resident in either arm's catalog")
    moved = moved_axes(a.artifact, b.artifact, skill, (a.runtime_version, b.runtime_version))
    warnings = corroborate(moved, vary, force=force)
    vary = infer_vary(moved, vary)
    texts = texts or {}
    rows_a, rows_b = _scored_rows(a.artifact), _scored_rows(b.artifact)
    all_ids = sorted(_query_ids(b.artifact) if partial_b else _query_ids(a.artifact))
    qids = [q for q in all_ids if rows_a.get(q) and rows_b.get(q)]
    unpaired = [q for q in all_ids if q not in set(qids)]
    if unpaired:
        warnings.append(f"{len(unpaired)} queries have no scored probe in one arm (errors) and are left out")
    meta = {q: (rows_a[q][0].kind, rows_a[q][0].truth) for q in qids}
    labels = sorted(
        {m[1] for m in meta.values()} | {str(o.predicted) for q in qids for o in (*rows_a[q], *rows_b[q])}
    )
    qa, qb = ArmQueries(rows_a, qids, labels), ArmQueries(rows_b, qids, labels)
    k = len(qids)
    weights = bootstrap_weights(k, resamples, seed)
    headline = _headline(qa, qb, weights)
    one_attempt = k > 0 and all(m == 1 for m in (*qa.attempts, *qb.attempts))
    won_idx = [i for i in range(k) if qb.top1[i] > qa.top1[i]]
    lost_idx = [i for i in range(k) if qb.top1[i] < qa.top1[i]]
    if one_attempt:
        test = McNemar(
            lost=len(lost_idx), won=len(won_idx), pvalue=mcnemar_exact(len(lost_idx), len(won_idx))
        )
        note = ""
    else:
        test = None
        note = "McNemar needs exactly one scored attempt per query in each arm; Newcombe's interval stands"
    top1 = headline[0]
    if top1.ci95 is None:
        verdict: Literal["better", "worse", "no detectable change", "no pairs"] = "no pairs"
    elif top1.ci95[0] > 0:
        verdict = "better"
    elif top1.ci95[1] < 0:
        verdict = "worse"
    else:
        verdict = "no detectable change"
    skills = _skill_deltas(qids, labels, meta=meta, qa=qa, qb=qb, weights=weights)
    staged = None
    if looks is not None:
        probes: dict[str, int] = defaultdict(int)
        for o in (*a.artifact.outcomes, *b.artifact.outcomes):
            probes[o.query_id] += 1
        per_query = {q: float(qb.top1[i] - qa.top1[i]) for i, q in enumerate(qids)}
        staged = staged_diff(per_query, {q: probes[q] for q in qids}, looks=looks, seed=seed)
    return DiffResult(
        a=_info(a),
        b=_info(b),
        vary=vary,
        skill=skill,
        moved=moved,
        forced=force and any(x != vary for x in moved),
        warnings=warnings,
        pairs=k,
        unpaired=unpaired,
        headline=headline,
        mcnemar=test,
        mcnemar_note=note,
        verdict=verdict,
        won=[_flip(qids[i], i, qa, qb, meta=meta[qids[i]], texts=texts) for i in won_idx],
        lost=[_flip(qids[i], i, qa, qb, meta=meta[qids[i]], texts=texts) for i in lost_idx],
        skills=skills,
        resamples=resamples,
        seed=seed,
        staged=staged,
    )


def _skill_deltas(
    qids: Sequence[str],
    labels: Sequence[str],
    *,
    meta: Mapping[str, tuple[str, str]],
    qa: ArmQueries,
    qb: ArmQueries,
    weights: np.ndarray,
) -> list[SkillDelta]:
    out: list[SkillDelta] = []
    k = len(qids)
    for j, label in enumerate(labels):
        if label == NO_SKILL:
            continue
        own = [i for i in range(k) if meta[qids[i]][1] == label]
        ever = own or qa.pred_share[:, j].any() or qb.pred_share[:, j].any()
        if not ever:
            continue
        recall = _paired_delta("recall", [qa.top1[i] for i in own], [qb.top1[i] for i in own],
                               [qa.attempts[i] for i in own], [qb.attempts[i] for i in own])
        pa = float(precision(qa.tp[:, j].sum(), qa.pred_share[:, j].sum()))
        pb = float(precision(qb.tp[:, j].sum(), qb.pred_share[:, j].sum()))
        boot = precision(weights @ qb.tp[:, j], weights @ qb.pred_share[:, j]) - precision(
            weights @ qa.tp[:, j], weights @ qa.pred_share[:, j]
        )
        prec = Delta(
            metric="precision",
            a=pa,
            b=pb,
            delta=pb - pa,
            ci95=quantiles(boot),
            pairs=k,
            method="paired bootstrap",
        )
        others = [i for i in range(k) if meta[qids[i]][1] != label]
        out.append(
            SkillDelta(
                skill=label,
                support=len(own),
                recall=recall,
                precision=prec,
                won=[qids[i] for i in own if qb.top1[i] > qa.top1[i]],
                lost=[qids[i] for i in own if qb.top1[i] < qa.top1[i]],
                stolen=[qids[i] for i in others if qb.pred_share[i, j] > qa.pred_share[i, j]],
                released=[qids[i] for i in others if qb.pred_share[i, j] < qa.pred_share[i, j]],
            )
        )
    out.sort(key=lambda s: (-abs(s.recall.delta or 0.0) - abs(s.precision.delta or 0.0), s.skill))
    return out


def query_texts(path: Path | None, digest: str, arm: Arm | None = None) -> dict[str, str]:
    """Query texts from the sealed set the arms ran: ``--queries``, checked against their digest, else
    the copy in the study folder of ``arm`` (``query_set.json``) when it has one."""
    from skillreach.queries.sets import read_query_file

    if path is None:
        if arm is None or arm.study is None:
            return {}
        copy = arm.study.query_set_path(arm.folder)
        if not copy.is_file():
            return {}
        qs = read_query_file(copy)
        return {q.id: q.text for q in qs.queries} if qs.compute_digest() == digest else {}
    qs = read_query_file(path)
    mine = qs.provenance.digest or qs.compute_digest()
    if mine != digest and qs.compute_digest() != digest:
        raise InputError(
            f"{path}: its digest {mine} is not the arms' query-set digest {digest}; pass the set they ran"
        )
    return {q.id: q.text for q in qs.queries}
