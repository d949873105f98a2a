"""Capacity sweep: how many skills can this agent hold before routing breaks?

Pure planning and analysis (no Prefect, no I/O); the ``sweep`` flow runs each size as an ordinary study.

**Designs** (which skills are resident at size n):

- ``corpus`` — fixed *anchor* skills (the skills whose queries are measured) plus a seeded sample of the
  whole corpus as filler. The filler is one seeded permutation of the other skills and size n takes its
  first n − |core| skills, so each catalog contains the smaller ones and the mix of near and far rivals
  stays that of the corpus at every size: the curve measures scale, not a changing composition.
- ``target`` — one skill's neighbourhood grown with seeded filler: the target and its ``k`` nearest BM25
  rivals (always resident; they are the anchors), then the same nested seeded filler. At small sizes the
  catalog is almost all near rivals, so the curve mixes scale with density: the worst case of one skill.

The **core** (always resident) is the anchors plus every acceptable skill of their queries. The **query
set** is the same at every size: the queries that expect an anchor, plus the out-of-scope ones — so the
sizes are comparable (and paired, query by query).

**Analysis** over the sizes run (log-size axis) of one metric — macro-F1 by default, or the pass rate
(top-1 accuracy; ``metric``): Kneedle (``kneed.KneeLocator``, concave, decreasing) on the metric against
ln(size); the knee is accepted only strictly inside the sizes run and when the metric's spread over the
sizes exceeds the noise floor (the median half-width of the sizes' intervals: the uncertainty of one
size's figure). The SLA sizes are the largest catalog that keeps the metric ≥ 0.90 and ≥ 0.85,
interpolated linearly in ln(size) between the last size above and the first below (``None`` when even
the smallest size is below; the largest size run when none falls below, with ``beyond`` set). The
sweep stops early once a size's upper bound falls below ``stop_below`` (0.80).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from skillreach.errors import InputError
from skillreach.models import Query, QuerySet, Skill
from skillreach.scoring.artifact import Artifact, ProbeOutcome
from skillreach.scoring.query_stats import ArmQueries, bootstrap_weights, f1_macro, precision, quantiles
from skillreach.skills.bm25 import rivals
from skillreach.study import StudyConfig

__all__ = [
    "DESIGNS",
    "METRICS",
    "SLA_LEVELS",
    "Knee",
    "SizePoint",
    "SlaSize",
    "SweepAnalysis",
    "SweepConfig",
    "SweepPlan",
    "SweepResult",
    "analyse",
    "catalog_at",
    "log_sizes",
    "plan_sweep",
    "restrict_queries",
    "scope_size",
    "should_stop",
    "size_folder",
    "size_point",
]

Design = Literal["corpus", "target"]
Metric = Literal["f1", "pass_rate"]
METRICS: tuple[str, ...] = ("f1", "pass_rate")
METRIC_NAMES = {"f1": "F1", "pass_rate": "pass rate"}
DESIGNS: tuple[str, ...] = ("corpus", "target")
SLA_LEVELS: tuple[float, ...] = (0.90, 0.85)
STOP_BELOW = 0.80
Interval = tuple[float, float]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def log_sizes(max_size: int, points: int, *, min_size: int = 5) -> list[int]:
    """``points`` catalog sizes log-spaced from ``min_size`` to ``max_size`` (rounded, distinct)."""
    if points < 2:
        raise InputError(f"--points {points}: a curve needs at least 2 sizes")
    if max_size <= min_size:
        raise InputError(f"--max {max_size}: must be larger than the smallest size {min_size}")
    raw = np.geomspace(min_size, max_size, points)
    return sorted({round(float(x)) for x in raw})


class SweepPlan(_Frozen):
    design: Design
    seed: int
    target: str | None
    anchors: list[str]
    core: list[str]
    """Always resident: the anchors and their queries' acceptable skills."""
    filler: list[str]
    """The other skills in their seeded order; size n holds ``core + filler[: n − len(core)]``."""
    sizes: list[int]
    clipped: list[int] = Field(default_factory=list)
    """Sizes asked for that the corpus could not fill (dropped), or below the core (dropped)."""


def plan_sweep(
    skills: Sequence[Skill],
    query_set: QuerySet,
    sizes: Sequence[int],
    *,
    design: Design = "corpus",
    target: str | None = None,
    anchors: Sequence[str] = (),
    n_anchors: int = 5,
    k: int = 4,
    seed: int = 0,
) -> SweepPlan:
    """Which skills each size holds (see the module docstring). Bad options raise :class:`InputError`."""
    if design not in DESIGNS:
        raise InputError(f"--design {design}: use corpus or target")
    names = sorted(s.name for s in skills)
    known = set(names)
    queried = sorted({q.expected_skill for q in query_set.queries if q.expected_skill} & known)
    if design == "target":
        if target is None:
            raise InputError("--design target needs --target NAME (the skill whose neighbourhood grows)")
        if target not in known:
            raise InputError(f"--target {target}: no such skill among the {len(names)} found")
        near = next(r for r in rivals(skills, top=k, only={target}) if r.name == target)
        chosen = [target, *(r.name for r in near.rivals)]
    elif anchors:
        chosen = list(dict.fromkeys(anchors))
        stray = [a for a in chosen if a not in known]
        if stray:
            raise InputError(f"--anchor {stray[0]}: no such skill among the {len(names)} found")
    else:
        if not queried:
            raise InputError("the query set expects none of these skills; pass the skills it was written for")
        chosen = sorted(random.Random(seed).sample(queried, min(n_anchors, len(queried))))
    without = [a for a in chosen if a not in queried]
    if design == "corpus" and without:
        raise InputError(
            f"--anchor {without[0]}: no query of the set expects it; anchors are measured skills"
        )
    if design == "target" and target not in queried:
        raise InputError(f"--target {target}: no query of the set expects it; add positive queries for it")
    core = list(chosen)
    for q in query_set.queries:
        if q.expected_skill in chosen:
            core.extend(s for s in q.acceptable_skills if s in known and s not in core)
    rest = [n for n in names if n not in core]
    random.Random(seed).shuffle(rest)
    wanted = sorted(set(sizes))
    ok = [n for n in wanted if len(core) <= n <= len(core) + len(rest)]
    if not ok:
        raise InputError(
            f"--sizes: none of {', '.join(map(str, wanted))} fits between the core ({len(core)} skills) "
            f"and the corpus ({len(names)} skills)"
        )
    return SweepPlan(
        design=design,
        seed=seed,
        target=target,
        anchors=chosen,
        core=core,
        filler=rest,
        sizes=ok,
        clipped=[n for n in wanted if n not in ok],
    )


def catalog_at(plan: SweepPlan, size: int) -> list[str]:
    """The resident skill names at ``size`` (the core first, then the filler in its seeded order)."""
    return [*plan.core, *plan.filler[: size - len(plan.core)]]


def restrict_queries(query_set: QuerySet, plan: SweepPlan) -> QuerySet:
    """The sweep's query set: queries expecting an anchor, and the out-of-scope ones (unsealed)."""
    anchors = set(plan.anchors)
    kept: tuple[Query, ...] = tuple(
        q for q in query_set.queries if q.expected_skill in anchors or q.expected_skill is None
    )
    return QuerySet(catalog_id=f"sweep:{plan.design}", queries=kept, provenance=query_set.provenance)


# -------------------------------------------------------------------------------------- measuring


class SizePoint(_Frozen):
    """One size's figures, each with its 95 % interval."""

    size: int
    study: str
    queries: int
    probes: int
    scored: int
    errors: int
    pass_rate: float | None
    """Top-1 accuracy (Wilson interval from the artifact)."""
    pass_rate_ci: Interval | None
    recall: float | None
    recall_ci: Interval | None
    precision: float | None
    precision_ci: Interval | None
    f1: float | None
    f1_ci: Interval | None
    abstention: float | None
    abstention_ci: Interval | None
    prompt_tokens: float
    prompt_tokens_measured: bool
    """False: estimated from the listing (names + descriptions, 4 characters a token, + system prompt)."""

    def figure(self, metric: Metric) -> tuple[float | None, Interval | None]:
        """The value and interval of ``metric`` (``f1`` or ``pass_rate``)."""
        if metric == "pass_rate":
            return self.pass_rate, self.pass_rate_ci
        return self.f1, self.f1_ci


def _listing_tokens(artifact: Artifact) -> float:
    listing = sum(len(n) + len(artifact.catalog.descriptions.get(n, "")) + 4 for n in artifact.catalog.skills)
    return float(math.ceil(listing / 4) + 150 + 120 + 60)


def _macro(
    tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, pred: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Macro recall, precision, F1 of spec/metrics.md on the last axis (leading axes: resamples)."""
    support = tp + fn
    has = support > 0
    active = has | (pred > 0)
    rec_cls = np.divide(tp, support, out=np.zeros_like(tp), where=has)
    prec_cls = precision(tp, pred)

    def mean(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        n = mask.sum(axis=-1)
        total = np.where(mask, values, 0.0).sum(axis=-1)
        return np.divide(total, n, out=np.full(n.shape, np.nan), where=n > 0)

    return mean(rec_cls, has), mean(prec_cls, active), f1_macro(tp, fp, fn)


def size_point(
    size: int, study: str, artifact: Artifact, *, resamples: int = 1000, seed: int = 0
) -> SizePoint:
    """One size's figures: rates and their Wilson intervals from the artifact; macro recall, precision
    and F1 (spec/metrics.md: precision over active classes, recall and F1 over classes with support) with
    a percentile bootstrap over queries (attempts averaged within a query)."""
    rows: dict[str, list[ProbeOutcome]] = {}
    for o in artifact.outcomes:
        if o.scored:
            rows.setdefault(o.query_id, []).append(o)
    qids = sorted(rows)
    labels = sorted({rows[q][0].truth for q in qids} | {str(o.predicted) for q in qids for o in rows[q]})
    t = ArmQueries(rows, qids, labels)
    k = len(qids)
    figures: dict[str, float | None] = {"recall": None, "precision": None, "f1": None}
    intervals: dict[str, Interval | None] = dict.fromkeys(figures)
    if k:
        point = _macro(t.tp.sum(0), t.fp.sum(0), t.fn.sum(0), t.pred_share.sum(0))
        w = bootstrap_weights(k, resamples, seed)
        boot = _macro(w @ t.tp, w @ t.fp, w @ t.fn, w @ t.pred_share)
        for name, value, sample in zip(figures, point, boot, strict=True):
            figures[name] = _f(value)
            intervals[name] = quantiles(sample)
    usage = artifact.usage
    measured_tokens = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
    priced = usage.priced_probes or artifact.counts.scored
    return SizePoint(
        size=size,
        study=study,
        queries=k,
        probes=artifact.counts.probes,
        scored=artifact.counts.scored,
        errors=artifact.counts.errors,
        pass_rate=artifact.metric("top1_accuracy"),
        pass_rate_ci=artifact.interval("top1_accuracy"),
        recall=figures["recall"],
        recall_ci=intervals["recall"],
        precision=figures["precision"],
        precision_ci=intervals["precision"],
        f1=figures["f1"],
        f1_ci=intervals["f1"],
        abstention=artifact.metric("abstention_rate"),
        abstention_ci=artifact.interval("abstention_rate"),
        prompt_tokens=(
            round(measured_tokens / priced, 1) if measured_tokens and priced else _listing_tokens(artifact)
        ),
        prompt_tokens_measured=bool(measured_tokens),
    )


def _f(x: np.ndarray) -> float | None:
    v = float(x)
    return None if math.isnan(v) else v


def should_stop(point: SizePoint, stop_below: float = STOP_BELOW, metric: Metric = "f1") -> bool:
    """Early stop: the metric's upper bound fell below ``stop_below`` (bigger catalogs will not do better)."""
    _, ci = point.figure(metric)
    return ci is not None and ci[1] < stop_below


# -------------------------------------------------------------------------------------- analysis


class Knee(_Frozen):
    size: int | None
    accepted: bool
    reason: str


class SlaSize(_Frozen):
    level: float
    size: float | None
    """The interpolated largest size keeping the metric ≥ level (``None``: even the smallest is below)."""
    beyond: bool = False
    """True: no size run fell below the level; ``size`` is then the largest size run."""


class SweepAnalysis(_Frozen):
    metric: Metric = "f1"
    knee: Knee
    noise_floor: float | None
    spread: float | None
    """max − min of the metric over the sizes run."""
    sla: list[SlaSize]
    stopped_at: int | None


def _curve(points: Sequence[SizePoint], metric: Metric) -> list[tuple[int, float, Interval | None]]:
    out = []
    for p in points:
        value, ci = p.figure(metric)
        if value is not None:
            out.append((p.size, value, ci))
    return out


def _sla(curve: Sequence[tuple[int, float, Interval | None]], level: float) -> SlaSize:
    if not curve or curve[0][1] < level:
        return SlaSize(level=level, size=None)
    for (na, fa, _), (nb, fb, _) in itertools.pairwise(curve):
        if fb < level <= fa:
            share = (fa - level) / (fa - fb)
            la, lb = math.log(na), math.log(nb)
            return SlaSize(level=level, size=round(math.exp(la + share * (lb - la)), 1))
    return SlaSize(level=level, size=float(curve[-1][0]), beyond=True)


def kneedle_decreasing_concave(
    x: Sequence[float], y: Sequence[float], sensitivity: float = 1.0
) -> float | None:
    """The knee of a decreasing concave curve by Kneedle (Satopää et al. 2011), offline, no smoothing:
    kneed 0.9's ``KneeLocator(x, y, curve="concave", direction="decreasing", S=sensitivity).knee``
    (ported when scipy, which kneed needs, was not a dependency; its relative extrema are scipy's
    ``argrelextrema`` now, as in kneed). ``tests/test_sweep.py`` holds the two equal on 1,500 curves."""
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if xs.size != ys.size:
        raise ValueError("x and y must be the same length")
    x_norm = (xs - xs.min()) / (xs.max() - xs.min())
    y_norm = np.flip((ys - ys.min()) / (ys.max() - ys.min()))  # decreasing concave → increasing concave
    x_norm = np.flip(1 - x_norm)  # mirror x by value too, keeping ascending order
    diff = y_norm - x_norm
    from scipy.signal import argrelextrema

    maxima = argrelextrema(diff, np.greater_equal, order=1, mode="clip")[0]
    minima = argrelextrema(diff, np.less_equal, order=1, mode="clip")[0]
    if not maxima.size:
        return None
    thresholds = diff[maxima] - sensitivity * np.abs(np.diff(x_norm).mean())
    seen_maxima = 0
    threshold = 0.0
    threshold_index = 0
    active = True
    for i in range(int(maxima[0]), diff.size - 1):
        if (maxima == i).any():
            threshold = float(thresholds[seen_maxima])
            threshold_index = i
            seen_maxima += 1
            active = True
        if (minima == i).any():
            threshold = 0.0
            active = False
        if active and diff[i + 1] < threshold:
            return float(xs[-(threshold_index + 1)])
    return None


def _knee(
    curve: Sequence[tuple[int, float, Interval | None]], floor: float | None, spread: float | None, name: str
) -> Knee:
    if len(curve) < 3:
        return Knee(
            size=None, accepted=False, reason=f"{len(curve)} sizes with a figure; a knee needs 3 or more"
        )
    if spread is not None and spread == 0:
        return Knee(size=None, accepted=False, reason=f"{name} is the same at every size (no bend)")
    x = [math.log(n) for n, _, _ in curve]
    y = [v for _, v, _ in curve]
    found = kneedle_decreasing_concave(x, y)
    if found is None:
        return Knee(size=None, accepted=False, reason="Kneedle found no knee (the curve has no bend)")
    size = curve[x.index(found)][0]
    if size in (curve[0][0], curve[-1][0]):
        reason = f"Kneedle's knee is the end point {size}: no bend inside"
        return Knee(size=size, accepted=False, reason=reason)
    assert spread is not None
    if floor is not None and spread <= floor:
        return Knee(
            size=size,
            accepted=False,
            reason=f"{name} moves {spread:.3f} over the sizes, within the noise floor {floor:.3f}: no knee",
        )
    return Knee(
        size=size, accepted=True, reason=f"{name} moves {spread:.3f}, above the noise floor {floor or 0:.3f}"
    )


def analyse(
    points: Sequence[SizePoint],
    *,
    metric: Metric = "f1",
    levels: Sequence[float] = SLA_LEVELS,
    stopped_at: int | None = None,
) -> SweepAnalysis:
    """Knee, noise floor and SLA sizes of ``metric`` over the sizes (see the module docstring)."""
    curve = _curve(sorted(points, key=lambda p: p.size), metric)
    widths = [(ci[1] - ci[0]) / 2 for _, _, ci in curve if ci is not None]
    floor = float(np.median(widths)) if widths else None
    values = [v for _, v, _ in curve]
    spread = (max(values) - min(values)) if values else None
    return SweepAnalysis(
        metric=metric,
        knee=_knee(curve, floor, spread, METRIC_NAMES[metric]),
        noise_floor=None if floor is None else round(floor, 6),
        spread=None if spread is None else round(spread, 6),
        sla=[_sla(curve, lv) for lv in levels],
        stopped_at=stopped_at,
    )


# ------------------------------------------------------------------------------------ configuration


class SweepConfig(BaseModel):
    """One capacity sweep: the base study (skills, queries, runtime, model, attempts, … resolved once)
    and what varies. Each size runs as that study with its own resident skills and folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    study: StudyConfig
    out: Path
    sizes: tuple[int, ...]
    design: Design = "corpus"
    target: str | None = None
    anchors: tuple[str, ...] = ()
    n_anchors: int = Field(default=5, ge=1)
    k: int = Field(default=4, ge=0)
    seed: int = 0
    metric: Metric = "f1"
    """The figure the knee, the SLA sizes and the early stop read: macro ``f1`` or ``pass_rate`` (top-1)."""
    stop_below: float | None = STOP_BELOW
    """Stop once a size's upper bound of ``metric`` is below this (``None``: run every size)."""
    resamples: int = Field(default=1000, ge=100)


class SweepResult(_Frozen):
    schema_version: int = 1
    out: str
    design: Design
    runtime: str
    model: str | None
    seed: int
    anchors: list[str]
    core: int
    corpus: int
    queries: int
    queries_digest: str
    sizes: list[int]
    clipped: list[int]
    points: list[SizePoint]
    analysis: SweepAnalysis


def scope_size(result: SweepResult) -> tuple[int, str]:
    """The largest community a catalog split should allow, from a sweep: the interpolated size that
    keeps the metric ≥ 0.90, else the accepted knee; :class:`InputError` when the sweep has neither."""
    name = METRIC_NAMES[result.analysis.metric]
    for sla in result.analysis.sla:
        if sla.level == max(SLA_LEVELS) and sla.size is not None and not sla.beyond:
            return max(2, math.floor(sla.size)), f"the largest catalog keeping {name} ≥ {sla.level:.2f}"
    knee = result.analysis.knee
    if knee.accepted and knee.size is not None:
        return max(2, knee.size), f"the knee of {name}"
    raise InputError(
        f"{result.out}: the sweep has neither a size keeping {name} ≥ {max(SLA_LEVELS):.2f} nor an accepted "
        "knee; pass --target-size N"
    )


def size_folder(out: Path, size: int) -> Path:
    """``OUT/n-0050``: one study folder per size (zero-padded so folders sort by size)."""
    return out / f"n-{size:04d}"
