"""Gating a new baseline record against a stored one: exactly spec/metrics.md "Comparing …". Pure.

1. **Pins.** Refuse (:class:`~skillreach.errors.RefusedError`, exit 3, the field named) when
   ``corpus_version``, ``model`` or ``rubric_version`` differ — or when the records are of different
   skills.
2. **Paired interval by case**, per metric: over the cases rated in both records,
   dᵢ = new rate of case i − baseline rate of case i; d̂ = mean dᵢ; 95 % interval d̂ ± t(0.975, k − 1)·
   sd(d)/√k (:func:`skillreach.scoring.intervals.paired_t_interval`; [d̂, d̂] when k < 2 or sd = 0), clipped to
   [−1, 1]: a difference of two rates cannot leave it (:func:`paired_rate_interval`).
3. **Verdict** for a gate g: a metric where lower is worse (activation, compliance, task quality) has
   g ≤ 0: **breach** when d̂ < g and the upper end < 0; **inconclusive** when d̂ < g and the upper end
   ≥ 0; **ok** otherwise. False activation (higher is worse) mirrors it with g ≥ 0. A metric with no
   paired case is **n/a** (not gated; the reason is said). A comparison in which *no* metric has a
   paired case is refused (:class:`~skillreach.errors.RefusedError`): nothing was gated, so it is
   never *ok*.
4. **Cohorts.** Cases rated in the new record only — never reached under the baseline (a broadened
   description pulls in new work) — cannot be paired. They form the *new cases* cohort, gated with the
   same gate and the same t interval on dᵢ = new rate of case i − the baseline's pooled value (the
   rate the baseline promised). Compliance (and task quality) is also reported by cohort.
5. Exit 1 on any breach; inconclusive fails only under ``strict``; otherwise 0.

For an inconclusive result, :func:`power_advice` says how many cases — or runs per case — a paired
t-test needs to detect a change of the gate's size (α = 0.05 two-sided, power 0.8, the observed sd;
noncentral t from scipy); a gate of 0 is sized as a change of 0.01. The between-case part of the spread
cannot be shrunk by more runs per case; the advice says so when that part alone is too wide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Literal

from skillreach.baselines.records import METRICS, BaselineRecord, CaseOutcomes, case_values, cohort_split
from skillreach.errors import ConfigError, GateFailed, RefusedError
from skillreach.models import Frozen
from skillreach.scoring.intervals import paired_t_interval
from skillreach.settings import GateConfig

__all__ = [
    "HIGHER_IS_WORSE",
    "Comparison",
    "GateFailed",
    "GateResult",
    "PowerAdvice",
    "Verdict",
    "check_pins",
    "compare",
    "gate_verdict",
    "paired_rate_interval",
    "parse_gate_overrides",
    "power_advice",
    "required_cases",
    "t_test_power",
]

HIGHER_IS_WORSE = frozenset({"false_activation"})
ALPHA = 0.05
POWER = 0.8
MAX_CASES = 100_000
MAX_RUNS = 10_000


class Verdict(StrEnum):
    ok = "ok"
    inconclusive = "inconclusive"
    breach = "breach"
    na = "n/a"


class PowerAdvice(Frozen):
    """What would resolve an inconclusive gate: a change of ``effect`` detected with power 0.8."""

    effect: float
    sd: float
    cases: int
    runs_per_case: int
    cases_needed: int | None
    """Cases needed at the current runs per case (``None``: more than 100,000)."""
    runs_per_case_needed: int | None
    """Runs per case needed with the current cases (``None``: more runs alone cannot resolve it)."""

    def sentence(self) -> str:
        size = f"to resolve a change of {abs(self.effect):.3f} (sd {self.sd:.3f}, power 0.8)"
        parts = []
        if self.runs_per_case_needed is not None:
            parts.append(f"{self.runs_per_case_needed} runs per case (now {self.runs_per_case})")
        elif self.runs_per_case < 2:
            parts.append("runs per case: unknown from one run per case (no within-case spread to measure)")
        elif self.cases >= 2:
            parts.append("more runs per case alone cannot (the spread is between cases)")
        if self.cases_needed is not None:
            parts.append(f"{self.cases_needed} cases at {self.runs_per_case} runs each (now {self.cases})")
        if self.cases_needed is None and self.runs_per_case_needed is None:
            parts.append("no feasible study: more than 100,000 cases")
        return f"{size}: " + "; ".join(parts)


class GateResult(Frozen):
    metric: str
    cohort: Literal["paired", "new cases"] = "paired"
    gate: float
    base: float | None
    new: float | None
    k: int
    mean_diff: float | None
    ci95: tuple[float, float] | None
    sd: float | None
    verdict: Verdict
    note: str = ""
    power: PowerAdvice | None = None


class Comparison(Frozen):
    """The outcome of :func:`compare`; ``exit_code`` is 0 pass, 1 fail."""

    skill: str
    base_id: str
    new_id: str
    strict: bool
    gates: dict[str, float]
    results: list[GateResult]
    cohorts: dict[str, dict[str, dict[str, Any] | None]]
    warnings: list[str]
    verdict: Verdict
    exit_code: int

    def failure(self) -> GateFailed | None:
        """The error to raise when the comparison fails (one line naming the failing metrics)."""
        if self.exit_code == 0:
            return None
        bad = [r for r in self.results if r.verdict in (Verdict.breach, Verdict.inconclusive)]
        bad = [r for r in bad if r.verdict is Verdict.breach or self.strict]
        parts = [
            f"{r.metric}{'' if r.cohort == 'paired' else ' (new cases)'} {r.verdict.value} "
            f"(Δ {r.mean_diff:+.3f}, gate {r.gate:+.2f})"
            for r in bad
        ]
        return GateFailed(f"{self.skill}: gate failed: " + "; ".join(parts))


# -------------------------------------------------------------------------------------------- gates


def gate_verdict(metric: str, gate: float, mean: float, lo: float, hi: float) -> Verdict:
    """The spec's verdict for one metric (see the module docstring)."""
    if metric in HIGHER_IS_WORSE:
        if mean > gate:
            return Verdict.breach if lo > 0 else Verdict.inconclusive
        return Verdict.ok
    if mean < gate:
        return Verdict.breach if hi < 0 else Verdict.inconclusive
    return Verdict.ok


def paired_rate_interval(diffs: Sequence[float]) -> tuple[float, float, float]:
    """(d̂, lo, hi): the paired t interval of per-case differences of two rates, clipped to [−1, 1].

    Every paired interval of a rate difference — a gate's, a new-cases cohort's, a drift report's —
    goes through here: the t interval of a few strongly moved cases reaches past −1 (−1.367 for
    differences −1, −1, −⅔), which no difference of two rates can be.
    """
    mean, lo, hi = paired_t_interval(diffs)
    mean = min(1.0, max(-1.0, mean))
    return mean, min(mean, max(-1.0, lo)), max(mean, min(1.0, hi))


def _check_gate(metric: str, gate: float) -> None:
    if metric in HIGHER_IS_WORSE and gate < 0:
        raise ConfigError(f"gate {metric}={gate}: {metric} may only rise, so its gate must be ≥ 0")
    if metric not in HIGHER_IS_WORSE and gate > 0:
        raise ConfigError(f"gate {metric}={gate}: {metric} may only fall, so its gate must be ≤ 0")


def parse_gate_overrides(base: GateConfig, overrides: Sequence[str]) -> GateConfig:
    """Apply ``metric=value`` overrides (``--gate``) to ``base``; bad ones raise ConfigError."""
    values = base.model_dump()
    for item in overrides:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in values:
            raise ConfigError(
                f"--gate {item!r}: expected METRIC=VALUE with METRIC one of {', '.join(METRICS)}"
            )
        try:
            values[name] = float(raw)
        except ValueError as exc:
            raise ConfigError(f"--gate {item!r}: {raw!r} is not a number") from exc
    gates = GateConfig(**values)
    for m in METRICS:
        _check_gate(m, float(getattr(gates, m)))
    return gates


# -------------------------------------------------------------------------------------------- power


def t_test_power(effect: float, sd: float, k: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided one-sample (paired) t-test with k cases to detect a mean of ``effect``."""
    if k < 2:
        return 0.0
    if sd <= 0:
        return 1.0 if effect != 0 else alpha
    from scipy import stats as sps  # ~1 s to import: only an inconclusive gate needs it

    df = k - 1
    crit = float(sps.t.ppf(1 - alpha / 2, df))
    nc = abs(effect) * math.sqrt(k) / sd
    return float(1 - sps.nct.cdf(crit, df, nc) + sps.nct.cdf(-crit, df, nc))


def _first_true(pred: Callable[[int], bool], start: int, limit: int) -> int | None:
    """Smallest n in [start, limit] with ``pred(n)``, for a monotone ``pred`` (None when none)."""
    if pred(start):
        return start
    lo, hi = start, start * 2
    while not pred(hi):
        if hi >= limit:
            return None
        lo, hi = hi, min(limit, hi * 2)
    while hi - lo > 1:  # pred(lo) is false, pred(hi) true
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def required_cases(
    effect: float, sd: float, *, alpha: float = ALPHA, power: float = POWER, limit: int = MAX_CASES
) -> int | None:
    """Smallest k with ``t_test_power(effect, sd, k) ≥ power`` (``None`` beyond ``limit``)."""
    if effect == 0:
        return None
    return _first_true(lambda k: t_test_power(effect, sd, k, alpha) >= power, 2, limit)


def _sample_var(values: Sequence[float]) -> float:
    n = len(values)
    if n < 2:
        return 0.0
    m = sum(values) / n
    return sum((v - m) ** 2 for v in values) / (n - 1)


def power_advice(
    effect: float,
    diffs: Sequence[float],
    within: float,
    cases: int,
    runs_per_case: int,
) -> PowerAdvice:
    """Cases (at these runs per case) or runs per case (with these cases) to detect ``effect``.

    ``within`` is the part of var(d) due to sampling inside cases at the current runs per case (mean
    of s²/m over both records); the rest is true spread between cases, which more runs cannot shrink:
    var(d; r runs) = between + within·R/r.
    """
    sd = math.sqrt(_sample_var(diffs)) if len(diffs) >= 2 else 0.0
    var = sd * sd
    between = max(0.0, var - within)
    need_k = required_cases(effect, sd) if sd > 0 else (2 if cases < 2 else None)
    need_r: int | None = None
    runs = max(1, runs_per_case)
    if cases >= 2 and within > 0 and runs >= 2:

        def enough(r: int) -> bool:
            return t_test_power(effect, math.sqrt(between + within * runs / r), cases) >= POWER

        need_r = _first_true(enough, runs, MAX_RUNS)
    return PowerAdvice(
        effect=effect,
        sd=sd,
        cases=cases,
        runs_per_case=runs,
        cases_needed=need_k,
        runs_per_case_needed=need_r,
    )


# ---------------------------------------------------------------------------------------- comparing


def check_pins(base: BaselineRecord, new: BaselineRecord, *, drift: bool = False) -> None:
    """Refuse a comparison whose pins differ, naming the field (exit 3). ``drift``: the model snapshot
    may differ — the comparison is then a drift report, for information, never a gate."""
    if base.skill != new.skill:
        raise RefusedError(f"skill differs: baseline is of {base.skill!r}, new record of {new.skill!r}")
    pinned = ("corpus_version", "rubric_version") if drift else ("corpus_version", "model", "rubric_version")
    for field in pinned:
        a, b = getattr(base, field), getattr(new, field)
        if a != b:
            raise RefusedError(
                f"{field} differs: baseline {a} vs new {b}; the baseline is expired — record a new one "
                "(skillreach baseline record --commit) instead of comparing"
            )
    a_rt, b_rt = base.runtime, new.runtime
    if a_rt.name == b_rt.name and a_rt.version and b_rt.version and a_rt.version != b_rt.version:
        raise RefusedError(
            f"runtime version differs: baseline {a_rt} vs new {b_rt}; the baseline is expired — record a new "
            "one (skillreach baseline record --commit) instead of comparing"
        )


def _within_var(
    base_pc: Mapping[str, CaseOutcomes], new_pc: Mapping[str, CaseOutcomes], metric: str, ids: Sequence[str]
) -> float:
    bg, ng = case_values(base_pc, metric), case_values(new_pc, metric)
    parts = []
    for i in ids:
        b, n = bg[i], ng[i]
        parts.append(_sample_var(b) / len(b) + _sample_var(n) / len(n))
    return sum(parts) / len(parts) if parts else 0.0


def _result(
    metric: str,
    *,
    cohort: Literal["paired", "new cases"],
    gate: float,
    diffs: list[float],
    base_value: float | None,
    new_value: float | None,
    within: float,
    runs: int,
) -> GateResult:
    mean, lo, hi = paired_rate_interval(diffs)
    sd = math.sqrt(_sample_var(diffs)) if len(diffs) >= 2 else 0.0
    verdict = gate_verdict(metric, gate, mean, lo, hi)
    advice = None
    note = ""
    if verdict is Verdict.inconclusive:
        effect = gate if gate != 0 else (0.01 if metric in HIGHER_IS_WORSE else -0.01)
        advice = power_advice(effect, diffs, within, len(diffs), runs)
        note = advice.sentence()
    return GateResult(
        metric=metric,
        cohort=cohort,
        gate=gate,
        base=base_value,
        new=new_value,
        k=len(diffs),
        mean_diff=mean,
        ci95=(lo, hi),
        sd=sd,
        verdict=verdict,
        note=note,
        power=advice,
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def compare(
    base: BaselineRecord,
    new: BaselineRecord,
    gates: GateConfig | Mapping[str, float] | None = None,
    strict: bool = False,
    *,
    drift: bool = False,
) -> Comparison:
    """Gate ``new`` against ``base`` (module docstring). Raises RefusedError when the pins differ;
    ``drift``: the same paired differences across a changed model snapshot (the service's drift report)."""
    check_pins(base, new, drift=drift)
    if gates is None:
        gates = GateConfig()
    gate_map = gates.model_dump() if isinstance(gates, GateConfig) else {**GateConfig().model_dump(), **gates}
    for m in METRICS:
        _check_gate(m, float(gate_map[m]))
    warnings: list[str] = []
    if base.runtime != new.runtime:
        warnings.append(f"runtime differs: baseline {base.runtime}, new {new.runtime}")
    if base.skill_version == new.skill_version:
        warnings.append("skill_version is the same in both records: this compares two runs of one version")
    results: list[GateResult] = []
    runs = new.runs_per_case
    for metric in METRICS:
        gate = float(gate_map[metric])
        bg, ng = case_values(base.per_case, metric), case_values(new.per_case, metric)
        brates = {k: sum(v) / len(v) for k, v in bg.items()}
        nrates = {k: sum(v) / len(v) for k, v in ng.items()}
        paired = sorted(set(brates) & set(nrates))
        bm, nm = base.metrics.get(metric), new.metrics.get(metric)
        if paired:
            diffs = [nrates[i] - brates[i] for i in paired]
            within = _within_var(base.per_case, new.per_case, metric, paired)
            results.append(
                _result(
                    metric,
                    cohort="paired",
                    gate=gate,
                    diffs=diffs,
                    base_value=bm.value if bm else None,
                    new_value=nm.value if nm else None,
                    within=within,
                    runs=runs,
                )
            )
        else:
            why = "no case rated in both records"
            if bm is None and nm is None:
                why = "no eligible probes in either record"
            elif nm is None:
                why = "no eligible probes in the new record"
            elif bm is None:
                why = "no eligible probes in the baseline"
            results.append(
                GateResult(
                    metric=metric,
                    gate=gate,
                    base=bm.value if bm else None,
                    new=nm.value if nm else None,
                    k=0,
                    mean_diff=None,
                    ci95=None,
                    sd=None,
                    verdict=Verdict.na,
                    note=why,
                )
            )
        fresh = sorted(set(nrates) - set(brates))
        if fresh:
            if bm is None:
                results.append(
                    GateResult(
                        metric=metric,
                        cohort="new cases",
                        gate=gate,
                        base=None,
                        new=_mean([nrates[i] for i in fresh]),
                        k=len(fresh),
                        mean_diff=None,
                        ci95=None,
                        sd=None,
                        verdict=Verdict.na,
                        note="the baseline has no value to compare new cases with",
                    )
                )
            else:
                diffs = [nrates[i] - bm.value for i in fresh]
                within = sum(_sample_var(ng[i]) / len(ng[i]) for i in fresh) / len(fresh)
                results.append(
                    _result(
                        metric,
                        cohort="new cases",
                        gate=gate,
                        diffs=diffs,
                        base_value=bm.value,
                        new_value=_mean([nrates[i] for i in fresh]),
                        within=within,
                        runs=runs,
                    )
                )
        dropped = sorted(set(brates) - set(nrates))
        if dropped and metric in ("compliance", "task_quality"):
            warnings.append(
                f"{metric}: {len(dropped)} case(s) rated in the baseline have no {metric} probe in the new "
                f"record (e.g. {dropped[0]}): not compared"
            )
    if not any(r.cohort == "paired" and r.k > 0 for r in results):
        raise RefusedError(
            f"{new.skill}: no case rated in both records (baseline {base.baseline_id}: "
            f"{len(base.per_case)} cases, new {new.baseline_id}: {len(new.per_case)}); nothing to gate — "
            "re-record the baseline on the same query set"
        )
    cohorts: dict[str, dict[str, dict[str, Any] | None]] = {}
    for metric in ("compliance", "task_quality"):
        split = cohort_split(new, base, metric)
        cohorts[metric] = {
            k: (v.model_dump(mode="json") if v is not None else None) for k, v in split.items()
        }
    verdicts = [r.verdict for r in results]
    if Verdict.breach in verdicts:
        overall, code = Verdict.breach, 1
    elif Verdict.inconclusive in verdicts:
        overall, code = Verdict.inconclusive, (1 if strict else 0)
    else:
        overall, code = Verdict.ok, 0
    return Comparison(
        skill=new.skill,
        base_id=base.baseline_id,
        new_id=new.baseline_id,
        strict=strict,
        gates={m: float(gate_map[m]) for m in METRICS},
        results=results,
        cohorts=cohorts,
        warnings=warnings,
        verdict=overall,
        exit_code=code,
    )
