"""Gating a new baseline record against a stored one: exactly spec/metrics.md "Comparing …". Pure.

1. **Pins.** Refuse (:class:`~skillreach.errors.RefusedError`, exit 3, the field named) when ``model``,
   ``rubric_version`` or the runtime version differ, when the records are of different skills, when
   either was recorded before cases were pinned by content (schema 1: re-baseline it), or when no
   positive case is **identical** — the same id and the same content digest — in both records.
2. **Identical cases only.** A case pairs only with the case of the same id and digest; cases added,
   changed and removed since the baseline are listed (:class:`CaseChanges`). Per metric, over the k
   identical cases rated in both: d̂ = p_new − p_base (each side's mean case rate) with **Newcombe's
   hybrid score interval for paired proportions** (method 10,
   :func:`skillreach.scoring.intervals.newcombe_paired`): never of zero width, clipped to [−1, 1].
3. **Verdict** for a gate g: a metric where lower is worse (activation, compliance, task quality) has
   g ≤ 0: **breach** when d̂ < g and the upper end < 0; **inconclusive** when d̂ < g and the upper end
   ≥ 0; **ok** otherwise. False activation (higher is worse) mirrors it with g ≥ 0. A metric with no
   paired case is **n/a** (not gated; the reason is said). Every *ok* says what it rules out: ``rules
   out a drop larger than N points`` (N from −lo; nothing when lo ≤ −1), or a rise (from hi).
4. **Cohorts by corpus history.** Compliance and task quality of positive cases that are not paired
   fall in two cohorts: the *baseline corpus* (identical to a case the baseline lists, but it never
   rated it for the metric: it never activated there — a broadened description now reaches old work)
   and the *new cases* (added or changed since the record). Each is gated with the metric's gate on
   its mean rate − the baseline's pooled value: Newcombe's interval with φ = 0 against the baseline's
   pooled interval.
5. Exit 1 on any breach; inconclusive fails only under ``strict``; otherwise 0.

**Smallest breach** (:func:`smallest_breach`): the fewest of a metric's k cases that, moving fully
against the skill with the others unchanged, the rule calls a breach — what a corpus can show at all.
**Advice** for an inconclusive metric (:func:`advise`) is in the units a team controls: the number of
cases at which the observed change would be decided (``add about 9 positive cases for X``), or
``--attempts R decides it`` when the spread within cases dominates (intra-case correlation below ½).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Literal

from skillreach.baselines.records import (
    LEGACY_MESSAGE,
    METRICS,
    BaselineRecord,
    case_changes,
    case_values,
    cohort_split,
)
from skillreach.errors import ConfigError, GateFailed, RefusedError
from skillreach.models import Frozen
from skillreach.scoring.intervals import icc_anova, newcombe_interval, newcombe_paired, newcombe_phi, wilson
from skillreach.settings import GateConfig

__all__ = [
    "HIGHER_IS_WORSE",
    "Advice",
    "CaseChanges",
    "Comparison",
    "GateFailed",
    "GateResult",
    "Verdict",
    "advise",
    "check_pins",
    "compare",
    "gate_verdict",
    "gated_count",
    "identical_cases",
    "paired_rate_interval",
    "parse_gate_overrides",
    "required_cases",
    "rules_out",
    "smallest_breach",
    "smallest_breach_text",
    "t_test_power",
]

HIGHER_IS_WORSE = frozenset({"false_activation"})
ALPHA = 0.05
POWER = 0.8
MAX_CASES = 100_000
MAX_RUNS = 10_000
MAX_ATTEMPTS = 50
"""The most ``--attempts`` advice ever suggests; beyond it, more cases."""


class Verdict(StrEnum):
    ok = "ok"
    inconclusive = "inconclusive"
    breach = "breach"
    na = "n/a"


def gated_count(verdicts: Iterable[str]) -> int:
    """The one count of gated metrics (gate artifact, report, scorecard): those with a verdict; a metric
    with nothing to compare (``n/a``) is listed, not gated."""
    return sum(1 for v in verdicts if str(v) != Verdict.na.value)


class Advice(Frozen):
    """What would decide an inconclusive gate, in units a team controls (spec/metrics.md)."""

    skill: str
    role: Literal["positive", "negative"]
    """Which cases to add: the skill's own (positive) or others' (negative, for false activation)."""
    cases: int
    cases_needed: int | None
    """The number of cases at which the observed change would be decided (``None``: more than 100,000,
    or never — a cohort's baseline side alone is too wide)."""
    runs_per_case: int
    attempts_needed: int | None = None
    """Attempts per case that decide it with these cases, offered only when the spread within cases
    dominates (``None``: not offered)."""

    def sentence(self) -> str:
        if self.attempts_needed is not None:
            return f"--attempts {self.attempts_needed} decides it (now {self.runs_per_case})"
        if self.cases_needed is None:
            return f"more {self.role} cases for {self.skill} cannot decide it (over {MAX_CASES:,} needed)"
        add = max(1, self.cases_needed - self.cases)
        cases = "case" if add == 1 else "cases"
        return f"add about {add} {self.role} {cases} for {self.skill} (now {self.cases})"


class CaseChanges(Frozen):
    """The cases of the new record against the baseline's: identical (same id and digest), added,
    changed (same id, another digest) and removed; ``*_positive``: those of the skill's own corpus."""

    identical: int = 0
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    added_positive: tuple[str, ...] = ()
    changed_positive: tuple[str, ...] = ()
    removed_positive: tuple[str, ...] = ()

    def line(self) -> str:
        """``cases: 12 identical; 3 added (2 positive), 1 changed, 0 removed since the baseline``."""
        parts = [
            f"{len(ids)} {what}" + (f" ({len(pos)} positive)" if ids else "")
            for ids, pos, what in (
                (self.added, self.added_positive, "added"),
                (self.changed, self.changed_positive, "changed"),
                (self.removed, self.removed_positive, "removed"),
            )
        ]
        return f"cases: {self.identical} identical; " + ", ".join(parts) + " since the baseline"

    @property
    def any(self) -> bool:
        return bool(self.added or self.changed or self.removed)


Cohort = Literal["paired", "baseline corpus", "new cases"]
"""``paired``: the identical cases rated in both records; ``baseline corpus``: cases of the baseline's
corpus it could not rate for the metric (compliance, task quality), unpaired against its rate; ``new
cases``: cases added or changed since the record, against the same rate."""


class GateResult(Frozen):
    metric: str
    cohort: Cohort = "paired"
    gate: float
    base: float | None
    new: float | None
    k: int
    mean_diff: float | None
    ci95: tuple[float, float] | None
    sd: float | None
    verdict: Verdict
    note: str = ""
    rules_out: float | None = None
    """For an *ok*: the largest change against the skill the interval leaves open (−lo for a metric
    where lower is worse, hi for false activation); ``None`` when it rules nothing out."""
    advice: Advice | None = None


class Comparison(Frozen):
    """The outcome of :func:`compare`; ``exit_code`` is 0 pass, 1 fail."""

    skill: str
    base_id: str
    new_id: str
    strict: bool
    gates: dict[str, float]
    results: list[GateResult]
    cohorts: dict[str, dict[str, dict[str, Any] | None]]
    cases: CaseChanges = CaseChanges()
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


def paired_rate_interval(
    new: Sequence[Sequence[float]], base: Sequence[Sequence[float]]
) -> tuple[float, float, float]:
    """(d̂, lo, hi) of p_new − p_base over the same cases (``new[i]``, ``base[i]``: case i's probe
    outcomes): Newcombe's hybrid score interval (:func:`skillreach.scoring.intervals.newcombe_paired`),
    in [−1, 1] and never of zero width. Every paired interval of a gate goes through here."""
    return newcombe_paired(new, base)


def rules_out(metric: str, lo: float, hi: float) -> float | None:
    """The largest change against the skill an *ok* interval leaves open: −lo for a metric where lower
    is worse, hi for false activation; ``None`` when it rules nothing out (lo ≤ −1, hi ≥ 1)."""
    if metric in HIGHER_IS_WORSE:
        return None if hi >= 1.0 else hi
    return None if lo <= -1.0 else -lo


def rules_out_note(metric: str, bound: float | None) -> str:
    """``rules out a drop larger than 12 points`` (rounded up: never claims more than the interval)."""
    if bound is None:
        return ""
    what = "rise" if metric in HIGHER_IS_WORSE else "drop"
    if bound <= 0:
        return f"rules out any {what}"
    return f"rules out a {what} larger than {math.ceil(round(bound * 100, 6))} points"


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
        if not -1 <= values[name] <= 1:  # nan and ±inf fail this too
            raise ConfigError(f"--gate {item!r}: a gate is a finite number in [-1, 1]")
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
    from scipy.stats import nct, t  # ~1 s to import: loaded where power is asked for

    df = k - 1
    crit = float(t.ppf(1 - alpha / 2, df))
    nc = abs(effect) * math.sqrt(k) / sd
    # scipy's noncentral t (Boost's) answers nan in far tails: P(T ≤ crit) for some large nc, where the
    # survival function is still right, and P(T ≤ −crit) once it is below Φ(−nc) < 1.5e-14 (T ≤ 0 iff
    # Z + nc ≤ 0, so that bounds it): then 0. tests/test_gates.py holds power finite over a grid.
    upper = 1 - float(nct.cdf(crit, df, nc))
    if math.isnan(upper):
        upper = float(nct.sf(crit, df, nc))
    lower = float(nct.cdf(-crit, df, nc))
    return float(upper + (0.0 if math.isnan(lower) else lower))


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


# ---------------------------------------------------------------------------------------- comparing


def _breaches(
    metric: str, gate: float, new: Sequence[Sequence[float]], base: Sequence[Sequence[float]]
) -> bool:
    d, lo, hi = newcombe_paired(new, base)
    return gate_verdict(metric, gate, d, lo, hi) is Verdict.breach


def smallest_breach(
    metric: str, gate: float, k: int, base_rates: Sequence[float] | None = None
) -> int | None:
    """The smallest m of ``k`` cases that, each moving fully against the skill (rate 1 → 0, or 0 → 1
    for false activation) with the others unchanged, the gate's rule calls a breach; ``None`` when even
    all k cannot. ``base_rates``: the cases' rates now (default: every case at its best, 1 or 0); the
    cases that can move furthest move first. One run per case (Wilson with n = k)."""
    if k <= 0:
        return None
    worse = 1.0 if metric in HIGHER_IS_WORSE else 0.0
    start = list(base_rates) if base_rates is not None else [1.0 - worse] * k
    rates = sorted(start, key=lambda r: abs(r - worse), reverse=True)[:k]
    base = [[r] for r in rates]

    def breach(m: int) -> bool:
        return _breaches(metric, gate, [[worse]] * m + base[m:], base)

    if not breach(len(base)):
        return None
    lo, hi = 0, len(base)  # breach(hi) holds, breach(0) does not (no change)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if breach(mid):
            hi = mid
        else:
            lo = mid
    return hi


def smallest_breach_text(metric: str, gate: float, k: int, base_rates: Sequence[float] | None = None) -> str:
    """``3 of 4 cases (a change of 0.75)``, or ``none`` (spec/metrics.md "smallest breach")."""
    m = smallest_breach(metric, gate, k, base_rates)
    return "none" if m is None else f"{m} of {k} cases (a change of {m / k:.2f})"


def _decided(
    metric: str, gate: float, sides: tuple[tuple[float, float, float], tuple[float, float, float]], phi: float
) -> bool:
    """Whether each side's (p, lo, hi) and φ make the gate's rule decide (not *inconclusive*)."""
    lo, hi = newcombe_interval(sides[0], sides[1], phi)
    d = sides[0][0] - sides[1][0]
    return gate_verdict(metric, gate, d, lo, hi) is not Verdict.inconclusive


def _side(p: float, n_eff: float) -> tuple[float, float, float]:
    ci = wilson(p * n_eff, n_eff)
    assert ci is not None
    return p, min(ci[0], p), max(ci[1], p)


def _n_eff(groups: Sequence[Sequence[float]], runs: float | None = None) -> float:
    """Effective sample size of the clustered interval (spec/metrics.md), at ``runs`` per case."""
    k = len(groups)
    m = runs if runs is not None else sum(len(g) for g in groups) / k
    rho = icc_anova(groups)
    return k * m / (1.0 + (m - 1.0) * rho)


def advise(
    metric: str,
    gate: float,
    new: Sequence[Sequence[float]],
    base: Sequence[Sequence[float]] | None,
    *,
    skill: str,
    base_side: tuple[float, float, float] | None = None,
) -> Advice:
    """What would decide an inconclusive ``metric``: the number of cases at which the observed change
    (the same rates, the same φ, the same effective size per case) would be decided — or, when the
    spread within cases dominates (ICC < ½ on each side, at least two runs per case), the attempts per
    case that decide it with these cases. ``base`` ``None``: a new-cases cohort against ``base_side``
    (p, lo, hi), which more cases do not narrow."""
    k = len(new)
    rates_new = [sum(g) / len(g) for g in new]
    p1 = sum(rates_new) / k
    per_case_new = _n_eff(new) / k
    runs = max(1, round(sum(len(g) for g in new) / k))
    role: Literal["positive", "negative"] = "negative" if metric in HIGHER_IS_WORSE else "positive"
    if base is not None:
        rates_base = [sum(g) / len(g) for g in base]
        p2 = sum(rates_base) / k
        per_case_base = _n_eff(base) / k
        phi = newcombe_phi(rates_new, rates_base)
    else:
        assert base_side is not None
        p2, phi, per_case_base = base_side[0], 0.0, 0.0

    def at_cases(kk: int) -> bool:
        other = _side(p2, per_case_base * kk) if base is not None else base_side
        assert other is not None
        return _decided(metric, gate, (_side(p1, per_case_new * kk), other), phi)

    cases_needed = _first_true(at_cases, k, MAX_CASES)
    attempts: int | None = None
    if base is not None and runs >= 2 and max(icc_anova(new), icc_anova(base)) < 0.5:

        def at_runs(r: int) -> bool:
            return _decided(metric, gate, (_side(p1, _n_eff(new, r)), _side(p2, _n_eff(base, r))), phi)

        attempts = _first_true(at_runs, runs, MAX_ATTEMPTS)
    return Advice(skill=skill, role=role, cases=k, cases_needed=cases_needed, runs_per_case=runs,
                  attempts_needed=attempts)


def identical_cases(base: BaselineRecord, new: BaselineRecord) -> set[str]:
    """Case ids rated in both records with the same content digest."""
    return {k for k, c in base.per_case.items() if k in new.per_case and new.per_case[k].digest == c.digest}


def _changes(base: BaselineRecord, new: BaselineRecord) -> CaseChanges:
    current = {k: c.digest for k, c in new.per_case.items()}
    added, changed, removed = case_changes(base.per_case, current)
    pos_new = {k for k, c in new.per_case.items() if c.role == "positive"}
    pos_base = {k for k, c in base.per_case.items() if c.role == "positive"}
    return CaseChanges(
        identical=len(identical_cases(base, new)),
        added=tuple(added),
        changed=tuple(changed),
        removed=tuple(removed),
        added_positive=tuple(k for k in added if k in pos_new),
        changed_positive=tuple(k for k in changed if k in pos_new or k in pos_base),
        removed_positive=tuple(k for k in removed if k in pos_base),
    )


def check_pins(base: BaselineRecord, new: BaselineRecord, *, drift: bool = False) -> None:
    """Refuse a comparison whose pins differ, naming the field (exit 3): skill, model (unless
    ``drift``: the comparison is then a drift report, for information, never a gate), rubric version,
    runtime version; a record of schema 1; no positive case identical (same id and digest) in both."""
    if base.skill != new.skill:
        raise RefusedError(f"skill differs: baseline is of {base.skill!r}, new record of {new.skill!r}")
    for which, rec in (("baseline", base), ("new record", new)):
        if rec.legacy:
            raise RefusedError(f"schema_version: the {which} {rec.baseline_id} was {LEGACY_MESSAGE}")
    pinned = ("rubric_version",) if drift else ("model", "rubric_version")
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
    same = identical_cases(base, new)
    positives = [k for k, c in base.per_case.items() if c.role == "positive"]
    if not any(k in same for k in positives):
        raise RefusedError(
            f"corpus_version: no positive case of {base.skill} is identical (same id and digest) in both "
            f"records (baseline {base.baseline_id}: {len(positives)} positive cases); the baseline is "
            "expired — re-baseline it (skillreach baseline record --commit) instead of comparing"
        )


def _result(
    metric: str,
    *,
    cohort: Cohort,
    gate: float,
    new_groups: list[list[float]],
    base_groups: list[list[float]] | None,
    base_side: tuple[float, float, float] | None = None,
    base_value: float | None,
    new_value: float | None,
    skill: str,
) -> GateResult:
    if base_groups is not None:
        mean, lo, hi = paired_rate_interval(new_groups, base_groups)
        diffs = [sum(n) / len(n) - sum(b) / len(b) for n, b in zip(new_groups, base_groups, strict=True)]
    else:
        assert base_side is not None
        mean, lo, hi = newcombe_paired(new_groups, base_interval=base_side)
        diffs = [sum(n) / len(n) - base_side[0] for n in new_groups]
    sd = math.sqrt(_sample_var(diffs)) if len(diffs) >= 2 else 0.0
    verdict = gate_verdict(metric, gate, mean, lo, hi)
    advice = None
    note = ""
    bound = None
    if verdict is Verdict.inconclusive:
        advice = advise(metric, gate, new_groups, base_groups, skill=skill, base_side=base_side)
        note = advice.sentence()
    elif verdict is Verdict.ok:
        bound = rules_out(metric, lo, hi)
        note = rules_out_note(metric, bound)
    return GateResult(
        metric=metric,
        cohort=cohort,
        gate=gate,
        base=base_value,
        new=new_value,
        k=len(new_groups),
        mean_diff=mean,
        ci95=(lo, hi),
        sd=sd,
        verdict=verdict,
        note=note,
        rules_out=bound,
        advice=advice,
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
    """Gate ``new`` against ``base`` over their identical cases (module docstring). Raises RefusedError
    when the pins differ; ``drift``: the same paired differences across a changed model snapshot (the
    service's drift report)."""
    check_pins(base, new, drift=drift)
    if gates is None:
        gates = GateConfig()
    gate_map = gates.model_dump() if isinstance(gates, GateConfig) else {**GateConfig().model_dump(), **gates}
    for m in METRICS:
        _check_gate(m, float(gate_map[m]))
    same = identical_cases(base, new)
    changes = _changes(base, new)
    warnings: list[str] = []
    if changes.any:
        warnings.append(changes.line() + ": compared over the identical cases only")
    if base.runtime != new.runtime:
        warnings.append(f"runtime differs: baseline {base.runtime}, new {new.runtime}")
    if base.skill_version == new.skill_version:
        warnings.append("skill_version is the same in both records: this compares two runs of one version")
    results: list[GateResult] = []
    for metric in METRICS:
        gate = float(gate_map[metric])
        bg, ng = case_values(base.per_case, metric), case_values(new.per_case, metric)
        paired = sorted(k for k in same if k in bg and k in ng)
        bm, nm = base.metrics.get(metric), new.metrics.get(metric)
        if paired:
            results.append(
                _result(
                    metric,
                    cohort="paired",
                    gate=gate,
                    new_groups=[ng[i] for i in paired],
                    base_groups=[bg[i] for i in paired],
                    base_value=bm.value if bm else None,
                    new_value=nm.value if nm else None,
                    skill=new.skill,
                )
            )
        else:
            why = "no identical case rated in both records"
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
        if metric not in ("compliance", "task_quality"):
            continue
        positive = [k for k in ng if k not in paired and new.per_case[k].role == "positive"]
        split_ids: tuple[tuple[Cohort, list[str]], ...] = (
            ("baseline corpus", sorted(k for k in positive if k in same)),  # in the corpus, never rated
            ("new cases", sorted(k for k in positive if k not in same)),  # added or changed since
        )
        for cohort, ids in split_ids:
            if ids:
                results.append(
                    _unpaired(metric, cohort, gate=gate, values=ng, ids=ids, pooled=bm, skill=new.skill)
                )
        dropped = sorted(k for k in bg if k in same and k not in ng)
        if dropped:
            warnings.append(
                f"{metric}: {len(dropped)} case(s) rated in the baseline have no {metric} probe in the new "
                f"record (e.g. {dropped[0]}): not compared"
            )
    if not any(r.cohort == "paired" and r.k > 0 for r in results):
        raise RefusedError(
            f"{new.skill}: no identical case rated in both records (baseline {base.baseline_id}: "
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
        cases=changes,
        warnings=warnings,
        verdict=overall,
        exit_code=code,
    )


def _unpaired(
    metric: str,
    cohort: Cohort,
    *,
    gate: float,
    values: Mapping[str, list[float]],
    ids: Sequence[str],
    pooled: Any,
    skill: str,
) -> GateResult:
    """A cohort compared unpaired with the baseline's pooled value (``pooled``: its MetricValue)."""
    mean_new = _mean([sum(values[i]) / len(values[i]) for i in ids])
    if pooled is None:
        return GateResult(
            metric=metric, cohort=cohort, gate=gate, base=None, new=mean_new, k=len(ids), mean_diff=None,
            ci95=None, sd=None, verdict=Verdict.na,
            note=f"the baseline has no value to compare the {cohort} cohort with",
        )
    return _result(
        metric,
        cohort=cohort,
        gate=gate,
        new_groups=[values[i] for i in ids],
        base_groups=None,
        base_side=(pooled.value, pooled.ci95[0], pooled.ci95[1]),
        base_value=pooled.value,
        new_value=mean_new,
        skill=skill,
    )
