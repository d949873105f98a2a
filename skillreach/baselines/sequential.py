"""Stop probing when the gate's answer is known: a group-sequential gate (spec/metrics.md
"Staged comparison"). Pure: numpy and scipy (its normal and t distributions, Brent's root finder).

The fixed gate probes every case, then tests the paired differences once. The staged gate probes the
cases in ``K`` planned stages (looks) and, after each, tests the paired statistic against a
**group-sequential boundary with O'Brien–Fleming-type α-spending** (Lan & DeMets 1983): each side
spends its α/2 = 0.025 as 2 − 2Φ(z₀.₉₈₇₅/√t) over the information fraction t (cases seen / cases
planned; gsDesign's ``sfLDOF``), so early looks need overwhelming evidence and the last look's
critical value is close to the fixed design's 1.96 (2.014 for four equal looks). The boundaries are
computed by the recursive numerical integration of Armitage, McPherson & Rowe (1969) and converted to
the paired t scale by matching tail probabilities (df = cases − 1).

At look k, with the first nₖ cases: d̂ₖ ± cₖ·sd/√nₖ is a *repeated confidence interval* (clipped to
[−1, 1]); all of them cover the true change together with probability ≥ 95 %. Then, for a gate g of a
metric where lower is worse (mirrored for false activation):

- **breach** (stop): d̂ₖ < g and the upper end < 0 — the fixed gate's rule with the wider interval;
- **ok** (stop): the lower end ≥ g — a fall of the gate's size is excluded;
- otherwise go on; at the last look the fixed gate's verdict (ok / inconclusive / breach) with c_K.

An interim look with fewer than two cases or sd = 0 never stops. A comparison stops at the first look
where one metric breaches or every gated metric is decided ok.

Why not an anytime-valid confidence sequence: a skill's cases are a finite, planned set, so the looks
are planned; the group-sequential boundary keeps the last look's interval almost as narrow as the fixed
design (the same power within a point or two) while a confidence sequence pays for unlimited looks with
a wider interval at every sample size.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from skillreach.baselines.gates import HIGHER_IS_WORSE, Verdict, gate_verdict
from skillreach.baselines.records import BaselineRecord, case_rates
from skillreach.errors import ConfigError
from skillreach.models import QuerySet

__all__ = [
    "ALPHA",
    "DEFAULT_LOOKS",
    "DiffLook",
    "Look",
    "MetricSequence",
    "StagedCheck",
    "StagedComparison",
    "StagedDiff",
    "obf_boundaries",
    "obf_spent",
    "plan_stages",
    "sequential_metric",
    "stage_order",
    "stage_pairs",
    "staged_compare",
    "staged_diff",
    "staged_from_records",
]

ALPHA = 0.05
DEFAULT_LOOKS = 4
_GRID = 801  # points of the numerical integration per look; boundaries agree with gsDesign to 1e-3


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# ------------------------------------------------------------------------------------- boundaries


def obf_spent(t: float, alpha: float = ALPHA) -> float:
    """Two-sided α spent by information fraction ``t``: each side spends α/2 by the Lan–DeMets
    O'Brien–Fleming-type function, 2 − 2Φ(z₁₋α/4 / √t), as gsDesign ``sfLDOF`` and ldbounds do."""
    if t <= 0:
        return 0.0
    from scipy.stats import norm  # ~1 s to import: loaded where a staged gate is planned

    z = float(norm.isf(alpha / 4))
    return float(2 * (2 - 2 * norm.cdf(z / math.sqrt(min(1.0, t)))))


def _check_fractions(fractions: Sequence[float]) -> None:
    if not fractions:
        raise ConfigError("a staged gate needs at least one look")
    prev = 0.0
    for t in fractions:
        if not prev < t <= 1.0 + 1e-12:
            raise ConfigError(f"look fractions must rise strictly within (0, 1]; got {list(fractions)}")
        prev = t


@lru_cache(maxsize=256)
def _boundaries(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    _check_fractions(fractions)
    from scipy.optimize import brentq
    from scipy.stats import norm

    out: list[float] = []
    # density of the score S(t) ~ Brownian motion on the continuation region of the previous look
    grid: np.ndarray | None = None
    dens: np.ndarray | None = None
    prev_t = 0.0
    for t in fractions:
        spend = obf_spent(t, alpha) - obf_spent(prev_t, alpha)
        dt = t - prev_t
        if grid is None or dens is None:
            c = float(norm.ppf(1 - spend / 2)) if spend > 0 else math.inf
        else:
            g, f, step = grid, dens, grid[1] - grid[0]
            sd = math.sqrt(dt)

            def excess(
                b: float,
                *,
                g: np.ndarray = g,
                f: np.ndarray = f,
                sd: float = sd,
                dx: float = step,
                sp: float = spend,
            ) -> float:
                """P(crossing ±b now, not before) − the α this look may spend."""
                tail = norm.cdf((-b - g) / sd) + norm.sf((b - g) / sd)
                return float(np.trapezoid(f * tail, dx=dx)) - sp

            if spend <= 0:
                c = math.inf
            else:
                b = float(brentq(excess, 1e-6, 40.0, xtol=1e-10))
                c = b / math.sqrt(t)
        out.append(c)
        b_abs = c * math.sqrt(t) if math.isfinite(c) else 12.0 * math.sqrt(t)
        new_grid = np.linspace(-b_abs, b_abs, _GRID)
        if grid is None or dens is None:
            new_dens = norm.pdf(new_grid / math.sqrt(t)) / math.sqrt(t)
        else:
            sd = math.sqrt(dt)
            kernel = norm.pdf((new_grid[:, None] - grid[None, :]) / sd) / sd
            new_dens = np.trapezoid(kernel * dens[None, :], dx=grid[1] - grid[0], axis=1)
        grid, dens, prev_t = new_grid, new_dens, t
    return tuple(out)


def obf_boundaries(fractions: Sequence[float], alpha: float = ALPHA) -> tuple[float, ...]:
    """Two-sided z boundaries c₁ … c_K for looks at information ``fractions`` (the last should be 1)."""
    return _boundaries(tuple(round(float(t), 12) for t in fractions), float(alpha))


@lru_cache(maxsize=4096)
def _t_critical(z: float, df: int) -> float:
    """The paired-t critical value with the same two-sided tail as the z boundary ``z``."""
    if not math.isfinite(z):
        return math.inf
    from scipy.stats import norm, t

    return float(t.isf(float(norm.sf(z)), df))


# ---------------------------------------------------------------------------------------- stages


def plan_stages(n: int, looks: int = DEFAULT_LOOKS, screen: int = 0) -> list[int]:
    """Cumulative case counts at each look: ``looks`` near-equal stages of ``n`` cases (fewer looks
    when there are too few cases for two per stage). ``screen``: the first ``screen`` cases (the
    cases most at risk) are split into ``looks`` − 1 near-equal stages and the rest is the last; a
    screen of none or of every case is no screen."""
    if looks < 1:
        raise ConfigError(f"--looks must be at least 1 (got {looks})")
    if n <= 0:
        return []
    if 0 < screen < n and looks > 1:
        return [*plan_stages(screen, looks - 1), n]
    looks = max(1, min(looks, n // 2))
    return sorted({math.ceil(n * (k + 1) / looks) for k in range(looks)})


class Look(_Frozen):
    look: int
    cases: int
    fraction: float
    mean_diff: float
    ci: tuple[float, float]
    critical: float
    decision: Literal["ok", "breach", "go on", "inconclusive", "ok (screen quiet)"]


class MetricSequence(_Frozen):
    metric: str
    gate: float
    planned_cases: int
    looks: list[Look]
    verdict: Verdict | None
    """``None``: not decided yet (more stages to probe); ``n/a``: no paired case planned."""
    decided_at: int | None
    """The comparison's 1-based look at which the verdict was decided."""


def _interval(diffs: np.ndarray, crit: float) -> tuple[float, float, float, float]:
    n = len(diffs)
    mean = float(diffs.mean())
    sd = float(diffs.std(ddof=1)) if n >= 2 else 0.0
    if n < 2 or sd == 0:
        return mean, mean, mean, sd
    half = crit * sd / math.sqrt(n)
    return mean, max(-1.0, mean - half), min(1.0, mean + half), sd


def _interim(metric: str, gate: float, mean: float, lo: float, hi: float) -> Literal["ok", "breach", "go on"]:
    if gate_verdict(metric, gate, mean, lo, hi) is Verdict.breach:
        return "breach"
    decided_ok = hi <= gate if metric in HIGHER_IS_WORSE else lo >= gate
    return "ok" if decided_ok else "go on"


def sequential_metric(
    metric: str,
    gate: float,
    looks: Sequence[tuple[int, float, Sequence[float]]],
    *,
    planned_cases: int,
    final: bool,
    alpha: float = ALPHA,
) -> MetricSequence:
    """The staged test of one metric. ``looks`` holds, per look taken so far, (the comparison's look
    number, the information fraction — planned cases of this metric probed / planned — and the paired
    differences available then, in probing order). ``final``: the last of ``looks`` is the plan's last.

    Lan–DeMets boundaries at a look depend only on the fractions up to it, so the test can run while
    probing goes on. Looks whose fraction did not grow are skipped (no new information).
    """
    kept: list[tuple[int, float, Sequence[float]]] = []
    for number, t, diffs in looks:
        if t > 0 and (not kept or t > kept[-1][1]) and len(diffs) > 0:
            kept.append((number, min(1.0, t), diffs))
    if not kept:
        verdict = Verdict.na if final or planned_cases == 0 else None
        return MetricSequence(
            metric=metric, gate=gate, planned_cases=planned_cases, looks=[], verdict=verdict, decided_at=None
        )
    crits = obf_boundaries([t for _, t, _ in kept], alpha)
    taken: list[Look] = []
    for i, (number, t, diffs) in enumerate(kept):
        arr = np.asarray(diffs, dtype=float)
        n = len(arr)
        crit = _t_critical(crits[i], max(1, n - 1))
        mean, lo, hi, sd = _interval(arr, crit)
        # every planned case probed (t = 1), or the plan's last look: the fixed rule decides — a metric
        # whose cases all came in earlier stages is finished at its own last look, never left undecided
        is_last = t >= 1.0 or (final and i == len(kept) - 1)
        decision: Literal["ok", "breach", "go on", "inconclusive"]
        if is_last:
            decision = gate_verdict(metric, gate, mean, lo, hi).value  # type: ignore[assignment]
        elif n < 2 or sd == 0:
            decision = "go on"
        else:
            decision = _interim(metric, gate, mean, lo, hi)
        taken.append(
            Look(
                look=number,
                cases=n,
                fraction=t,
                mean_diff=mean,
                ci=(lo, hi),
                critical=crit,
                decision=decision,
            )
        )
        if decision != "go on":
            return MetricSequence(
                metric=metric,
                gate=gate,
                planned_cases=planned_cases,
                looks=taken,
                verdict=Verdict(decision),
                decided_at=number,
            )
    return MetricSequence(
        metric=metric, gate=gate, planned_cases=planned_cases, looks=taken, verdict=None, decided_at=None
    )


# ----------------------------------------------------------------------------------- comparisons


class StagedComparison(_Frozen):
    """A comparison probed in stages: where it stopped, what it decided and what that saved."""

    looks_planned: int
    looks_taken: int
    finished: bool
    """A verdict is known (decided early, or the plan is exhausted); else probe the next stage."""
    verdict: Verdict | None
    metrics: list[MetricSequence]
    cases_used: int
    cases_planned: int
    probes_used: int
    probes_planned: int
    stages: list[int]
    """Cumulative case counts at each planned look."""
    screen: int = 0
    """Cases of the first look when it is a screen (the cases most at risk, probed first); 0: none."""
    screen_moved: bool | None = None
    """Some screened case of this skill moved against it (``None``: no screen, or not probed yet)."""

    @property
    def probes_saved(self) -> int:
        return self.probes_planned - self.probes_used

    def sentence(self) -> str:
        saved = self.probes_saved
        pct = 100.0 * saved / self.probes_planned if self.probes_planned else 0.0
        what = self.verdict.value if self.verdict is not None else "undecided"
        quiet = (
            "; the screen was quiet: no case at risk moved"
            if self.screen and self.looks_taken < self.looks_planned and self.verdict is Verdict.ok
            else ""
        )
        return (
            f"staged: {what} at look {self.looks_taken} of {self.looks_planned} "
            f"({self.cases_used} of {self.cases_planned} cases, {self.probes_used} of "
            f"{self.probes_planned} probes; {saved} probes saved, {pct:.0f} %{quiet})"
        )


def stage_order(case_ids: Sequence[str], seed: int = 0) -> list[str]:
    """The order cases are probed in: a seeded shuffle, so every stage is a random sample of the plan."""
    ids = sorted(set(case_ids))
    random.Random(seed).shuffle(ids)
    return ids


def staged_compare(
    case_diffs: Mapping[str, Mapping[str, float]],
    gates: Mapping[str, float],
    order: Sequence[str],
    probes_per_case: Mapping[str, int],
    *,
    planned: Mapping[str, Sequence[str]] | None = None,
    looks: int = DEFAULT_LOOKS,
    probed_looks: int | None = None,
    alpha: float = ALPHA,
    tail: Sequence[str] = (),
    screen: int = 0,
    quiet_elsewhere: bool = True,
) -> StagedComparison:
    """The staged gate over every metric.

    ``order``: every case of the plan in probing order; stages split it into ``looks`` near-equal parts.
    ``case_diffs[metric][case]``: the paired difference of each case probed so far. ``planned[metric]``:
    the cases the metric is planned to pair (default: those of ``case_diffs``) — its information
    fraction at a look is the share of them probed. ``probed_looks``: how many stages have been probed
    (default: all). The comparison stops at the first look where a metric breaches or every metric is
    decided ok; at the last look every metric gets the fixed gate's verdict with the last boundary.
    ``tail``: cases outside ``order`` (none of the baseline's), probed with the last stage
    (:func:`stage_pairs`).

    ``screen``: the first ``screen`` cases of ``order`` are the cases most at risk, probed in the
    looks before the last (:func:`plan_stages`); the rest is the last look. Every look applies the
    breach boundary; and at the look that completes the screen, when no screened case moved against
    the skill in any paired metric (activation did not fall, false activation did not rise, compliance
    and task quality did not fall on any case) and ``quiet_elsewhere`` (no screened case moved against
    any other skill of the check either), every paired metric still undecided is decided *ok*: a
    non-binding futility stop, which can turn a would-be breach into an ok but never the reverse, so
    the false-breach rate stays within α. The unpaired cohorts (new cases) are never decided by it.
    """
    stages = plan_stages(len(order), looks, screen)
    screened = set(order[:screen]) if screen > 0 and screen in stages[:-1] else set()
    screen_look = stages.index(screen) + 1 if screened else 0
    tail = [c for c in tail if c not in set(order)]

    def seen(j: int) -> list[str]:
        """The cases probed by look ``j``."""
        return list(order[: stages[j - 1]]) + (list(tail) if j == len(stages) else [])

    k_max = len(stages) if probed_looks is None else max(0, min(probed_looks, len(stages)))
    plan = {
        m: set(planned[m]) if planned is not None and m in planned else set(case_diffs.get(m, {}))
        for m in gates
    }
    metrics = [m for m in gates if plan[m]]
    paired = [m for m in metrics if " (" not in m]  # "compliance (new cases)": an unpaired cohort
    moved: bool | None = None
    if screened and k_max >= screen_look:
        moved = any(
            (d > 0 if m in HIGHER_IS_WORSE else d < 0)
            for m in paired
            for c, d in case_diffs.get(m, {}).items()
            if c in screened
        )
    states: dict[str, MetricSequence] = {}
    stopped = 0
    for k in range(1, k_max + 1):
        for m in metrics:
            if m in states and states[m].verdict is not None:
                continue  # decided at an earlier look
            per_look = []
            for j in range(1, k + 1):
                upto = seen(j)
                t = sum(1 for c in upto if c in plan[m]) / len(plan[m])
                diffs = [float(case_diffs[m][c]) for c in upto if c in case_diffs.get(m, {})]
                per_look.append((j, t, diffs))
            states[m] = sequential_metric(
                m, float(gates[m]), per_look, planned_cases=len(plan[m]), final=k == len(stages), alpha=alpha
            )
        if k == screen_look and moved is False and quiet_elsewhere:  # a quiet screen: futility, ok
            for m in paired:
                st_m = states[m]
                if st_m.verdict is not None:
                    continue
                quiet_looks = [lk.model_copy(update={"decision": "ok (screen quiet)"}) for lk in st_m.looks]
                states[m] = st_m.model_copy(
                    update={"looks": quiet_looks, "verdict": Verdict.ok, "decided_at": k}
                )
        stopped = k
        verdicts = [states[m].verdict for m in metrics]
        if Verdict.breach in verdicts or all(v is not None for v in verdicts):
            break
    final = [states[m] for m in metrics if m in states]
    verdicts = [r.verdict for r in final]
    finished = (
        Verdict.breach in verdicts
        or (stopped == len(stages) and bool(stages))
        or (bool(final) and all(v is not None for v in verdicts))
    )
    overall: Verdict | None
    if not finished:
        overall = None
    elif Verdict.breach in verdicts:
        overall = Verdict.breach
    elif Verdict.inconclusive in verdicts or None in verdicts:
        overall = Verdict.inconclusive
    elif not final:
        overall = Verdict.na
    else:
        overall = Verdict.ok
    used = seen(stopped) if stopped else []
    every = list(order) + list(tail)
    return StagedComparison(
        looks_planned=len(stages),
        looks_taken=stopped,
        finished=finished,
        verdict=overall,
        metrics=final,
        cases_used=len(used),
        cases_planned=len(every),
        probes_used=sum(probes_per_case.get(c, 0) for c in used),
        probes_planned=sum(probes_per_case.get(c, 0) for c in every),
        stages=stages,
        screen=len(screened),
        screen_moved=moved,
    )


def staged_from_records(
    base: BaselineRecord,
    new: BaselineRecord,
    gates: Mapping[str, float],
    *,
    looks: int = DEFAULT_LOOKS,
    seed: int = 0,
    probed_looks: int | None = None,
    query_set: QuerySet | None = None,
    order: Sequence[str] | None = None,
    screen: int = 0,
    quiet_elsewhere: bool = True,
) -> StagedComparison:
    """The staged gate between two records (the comparison's pins are checked by the caller).

    Cases pair as in the fixed gate (:func:`~skillreach.baselines.gates.compare`): by content, a case
    only with the case of the same id and the same digest. The stages split every case of the baseline;
    each metric is planned to pair the cases the baseline rated for it that are identical in the cases
    probed now — ``query_set``, the set the new study probes, or, without it, the cases ``new`` rated
    (a complete record). Compliance and task quality also get a *new cases* cohort, as in the fixed
    gate: the skill's positive cases not planned to pair for the metric (added or changed since the
    baseline, or not rated by it), each compared with the baseline's pooled value (``"compliance (new
    cases)"``, with the metric's gate); cases outside the baseline are probed with the last stage.
    ``new`` may hold only the stages probed so far (``probed_looks``; pass ``query_set`` then); given a
    complete record, this replays the staged design over it: where it would have stopped and what it
    saved. ``order``: the cases in the order the study probes them, when a check group's stages split
    more than this baseline's cases (default: :func:`stage_order` of the baseline's). ``screen``,
    ``quiet_elsewhere``: the first look is the first ``screen`` cases of ``order``, the cases most at
    risk (:func:`staged_compare`).
    """
    current: dict[str, str | None]
    if query_set is not None:
        current = {q.id: q.case_digest() for q in query_set.queries}
        positives = {q.id for q in query_set.queries if q.expected_skill == base.skill}
    else:
        current = {c: o.digest for c, o in new.per_case.items()}
        positives = {c for c, o in new.per_case.items() if o.role == "positive"}
    identical = {c for c, o in base.per_case.items() if c in current and current[c] == o.digest}
    order = list(order) if order is not None else stage_order(list(base.per_case), seed)
    planned_ids = set(order)
    tail = sorted(c for c in current if c not in planned_ids)
    case_diffs: dict[str, dict[str, float]] = {}
    planned: dict[str, list[str]] = {}
    all_gates = dict(gates)
    for m in gates:
        b, n = case_rates(base.per_case, m), case_rates(new.per_case, m)
        planned[m] = sorted(c for c in b if c in identical)
        case_diffs[m] = {
            c: n[c] - b[c]
            for c in planned[m]
            if c in n and new.per_case[c].digest == base.per_case[c].digest
        }
        pooled = base.metrics.get(m)
        if m in ("compliance", "task_quality") and pooled is not None:
            unpaired = sorted(c for c in positives if c not in planned[m])
            for cohort, fresh in (  # by the corpus's history, as the fixed gate splits them
                (f"{m} (baseline corpus)", [c for c in unpaired if c in identical]),
                (f"{m} (new cases)", [c for c in unpaired if c not in identical]),
            ):
                if fresh:
                    all_gates[cohort] = gates[m]
                    planned[cohort] = fresh
                    case_diffs[cohort] = {c: n[c] - pooled.value for c in fresh if c in n}
    runs = max(1, new.runs_per_case or base.runs_per_case)
    probes = {  # a case the set probed now no longer holds is never probed
        c: (new.per_case[c].probes if c in new.per_case else runs if c in current else 0)
        for c in [*order, *tail]
    }
    return staged_compare(
        case_diffs, all_gates, order, probes, planned=planned, looks=looks, probed_looks=probed_looks,
        tail=tail, screen=screen, quiet_elsewhere=quiet_elsewhere,
    )


def stage_pairs(
    pairs: Sequence[tuple[str, int]], order: Sequence[str], looks: int = DEFAULT_LOOKS, screen: int = 0
) -> list[list[tuple[str, int]]]:
    """A study plan's (query id, attempt) pairs by stage: the cases of ``order`` split as
    :func:`plan_stages` does; cases outside ``order`` (no baseline can pair them) go with the last."""
    stages = plan_stages(len(order), looks, screen)
    if not stages:
        return [list(pairs)] if pairs else []
    stage_of = {c: next(k for k, s in enumerate(stages) if i < s) for i, c in enumerate(order)}
    out: list[list[tuple[str, int]]] = [[] for _ in stages]
    for qid, attempt in pairs:
        out[stage_of.get(qid, len(stages) - 1)].append((qid, attempt))
    return out


class StagedCheck(_Frozen):
    """One check group probed in stages: per skill its new record (of the stages probed) and its staged
    result; the probes run and planned for the group."""

    outcomes: dict[str, tuple[BaselineRecord, StagedComparison]]
    probes_run: int
    probes_planned: int


# ------------------------------------------------------------------------------------------- diff


DiffDecision = Literal["better", "worse", "go on", "no detectable change"]


class DiffLook(_Frozen):
    look: int
    cases: int
    fraction: float
    mean_diff: float
    ci: tuple[float, float]
    critical: float
    decision: DiffDecision


class StagedDiff(_Frozen):
    """``diff --staged``: Δ top-1 (B − A, paired per query) tested after each stage of queries against
    the two-sided O'Brien–Fleming boundary; where it stopped, what it decided and what that saved."""

    metric: str = "top1_accuracy"
    looks_planned: int
    looks_taken: int
    stages: list[int]
    """Cumulative query counts at each planned look."""
    looks: list[DiffLook]
    verdict: Literal["better", "worse", "no detectable change", "no pairs"]
    decided_at: int | None
    """The look that decided ``better`` / ``worse`` (``None``: the plan ran out, or nothing to test)."""
    cases_used: int
    cases_planned: int
    probes_used: int
    probes_planned: int
    seed: int

    @property
    def probes_saved(self) -> int:
        return self.probes_planned - self.probes_used

    @property
    def finished(self) -> bool:
        """Decided (better / worse), or every planned look taken."""
        return self.decided_at is not None or self.looks_taken >= self.looks_planned

    def sentence(self) -> str:
        pct = 100.0 * self.probes_saved / self.probes_planned if self.probes_planned else 0.0
        return (
            f"staged: {self.verdict} at look {self.looks_taken} of {self.looks_planned} "
            f"({self.cases_used} of {self.cases_planned} queries, {self.probes_used} of "
            f"{self.probes_planned} probes; {self.probes_saved} probes saved, {pct:.0f} %)"
        )


def staged_diff(
    diffs: Mapping[str, float],
    probes_per_case: Mapping[str, int],
    *,
    looks: int = DEFAULT_LOOKS,
    seed: int = 0,
    alpha: float = ALPHA,
    probed_looks: int | None = None,
) -> StagedDiff:
    """The staged test of a paired A/B difference (``diffs[query]`` = B − A of one query).

    The queries, in a seeded shuffle (:func:`stage_order`), are split into ``looks`` near-equal stages
    (:func:`plan_stages`). At look k with the first nₖ queries: d̂ₖ ± c′ₖ·sd/√nₖ, c′ₖ the paired-t value
    with the tail of the two-sided O'Brien–Fleming boundary at tₖ = nₖ / n (the repeated confidence
    interval of :func:`staged_compare`). An interim look stops with **better** when the lower end > 0
    and **worse** when the upper end < 0 (never with nₖ < 2 or sd = 0); the last look gives the fixed
    diff's verdict with c′_K (*no detectable change* when the interval holds 0). There is no futility
    boundary: a diff with no true change runs to its last look, as a fixed design would, at the same
    level. ``probes_per_case``: the probes of both arms per query (what a stage costs).
    ``probed_looks``: only the first that many stages are probed yet (a diff probing B stage by stage):
    the test stops there undecided (:attr:`StagedDiff.finished` false) when no boundary is crossed;
    ``diffs`` of the stages not probed yet are never read.
    """
    order = stage_order(list(diffs), seed)
    stages = plan_stages(len(order), looks)
    planned = sum(probes_per_case.get(c, 0) for c in order)
    if not stages:
        return StagedDiff(
            looks_planned=0, looks_taken=0, stages=[], looks=[], verdict="no pairs", decided_at=None,
            cases_used=0, cases_planned=0, probes_used=0, probes_planned=planned, seed=seed,
        )
    n_all = len(order)
    crits = obf_boundaries([s / n_all for s in stages], alpha)
    taken: list[DiffLook] = []
    verdict: Literal["better", "worse", "no detectable change", "no pairs"] = "no detectable change"
    decided_at: int | None = None
    for k, (upto, z) in enumerate(zip(stages, crits, strict=True), 1):
        arr = np.asarray([diffs[c] for c in order[:upto]], dtype=float)
        crit = _t_critical(z, max(1, len(arr) - 1))
        mean, lo, hi, sd = _interval(arr, crit)
        last = k == len(stages)
        decision: DiffDecision = "go on"
        if last or (len(arr) >= 2 and sd > 0):
            decision = "better" if lo > 0 else "worse" if hi < 0 else "go on"
        if last and decision == "go on":
            decision = "no detectable change"
        taken.append(
            DiffLook(look=k, cases=len(arr), fraction=upto / n_all, mean_diff=mean, ci=(lo, hi),
                     critical=crit, decision=decision)
        )
        if decision != "go on":
            verdict = decision
            decided_at = k if decision in ("better", "worse") else None
            break
        if probed_looks is not None and k >= probed_looks:
            break
    used = order[: stages[len(taken) - 1]]
    return StagedDiff(
        looks_planned=len(stages),
        looks_taken=len(taken),
        stages=stages,
        looks=taken,
        verdict=verdict,
        decided_at=decided_at,
        cases_used=len(used),
        cases_planned=n_all,
        probes_used=sum(probes_per_case.get(c, 0) for c in used),
        probes_planned=planned,
        seed=seed,
    )
