"""The gates' numbers over many generated comparisons, to hold one revision's statistics to another's.

Every function of the gates that calls a distribution or a root finder is run on generated input (a
fixed seed): the paired-t interval and its verdict (``optimize``, ``uplift``), the t-test's power and the
cases it needs (``advise``), the O'Brien–Fleming boundaries and the staged gate's looks (``check
--staged``, ``diff --staged``), the exact McNemar p of ``diff``, and the fixed gate (``compare``: Newcombe's
interval, verdict and advice) on generated baseline records. ``--dump FILE`` writes them as JSON;
``--against FILE`` compares this revision's with a dump of another: the verdicts must be equal and every
number within ``--tol`` (absolute, default 1e-9). Prints the counts and the largest difference.

Issue 42 used it to show that moving the statistics onto scipy alone changed nothing: a dump on the
revision before (its scipy path, and its numpy fallback with scipy hidden), then ``--against`` after.

Usage: ``python bench/verdicts.py --dump before.json [--n 2000]``;
``python bench/verdicts.py --against before.json``
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

from skillreach.baselines.gates import (
    HIGHER_IS_WORSE,
    MAX_CASES,
    advise,
    gate_verdict,
    required_cases,
    t_test_power,
)
from skillreach.baselines.records import METRICS
from skillreach.baselines.sequential import obf_boundaries, sequential_metric
from skillreach.scoring.intervals import newcombe_paired, paired_t_interval


def _mcnemar(lost: int, won: int) -> float:
    from skillreach.author.diff import mcnemar_exact

    return mcnemar_exact(lost, won)


def _outcomes(rng: random.Random, k: int, runs: int, p: float, spread: float) -> list[list[float]]:
    """k cases of ``runs`` 0/1 outcomes, each case's rate drawn around ``p``."""
    out = []
    for _ in range(k):
        q = min(1.0, max(0.0, rng.gauss(p, spread)))
        out.append([1.0 if rng.random() < q else 0.0 for _ in range(runs)])
    return out


def _rates(groups: list[list[float]]) -> list[float]:
    return [sum(g) / len(g) for g in groups]


def generate(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` generated comparisons, each with every figure the gates compute from it."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for i in range(n):
        metric = rng.choice(METRICS)
        gate = round(rng.uniform(0.01, 0.2), 3) * (1 if metric in HIGHER_IS_WORSE else -1)
        k = rng.choice([2, 3, 5, 8, 12, 20, 40, 80, 150, 300])
        runs = rng.choice([1, 2, 3, 5])
        p_base = rng.uniform(0.0, 1.0)
        p_new = min(1.0, max(0.0, p_base + rng.uniform(-0.3, 0.3)))
        base = _outcomes(rng, k, runs, p_base, rng.uniform(0.0, 0.3))
        new = _outcomes(rng, k, runs, p_new, rng.uniform(0.0, 0.3))
        diffs = [a - b for a, b in zip(_rates(new), _rates(base), strict=True)]
        row: dict[str, Any] = {"i": i, "metric": metric, "gate": gate, "k": k, "runs": runs}
        mean, lo, hi = paired_t_interval(diffs)
        row["t"] = [mean, lo, hi, gate_verdict(metric, gate, mean, lo, hi).value]
        d, nlo, nhi = newcombe_paired(new, base)
        verdict = gate_verdict(metric, gate, d, nlo, nhi)
        row["newcombe"] = [d, nlo, nhi, verdict.value]
        if verdict.value == "inconclusive":
            advice = advise(metric, gate, new, base, skill="s")
            row["advice"] = [advice.cases_needed, advice.attempts_needed]
        sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (k - 1)) if k > 1 else 0.0
        effect = rng.uniform(0.01, 0.5)
        row["power"] = t_test_power(effect, sd if sd > 0 else 0.3, k)
        if i % 4 == 0:  # a binary search of power calls: a quarter of the rows
            row["required"] = required_cases(effect, sd if sd > 0 else 0.3, limit=MAX_CASES)
        looks = rng.choice([1, 2, 3, 4, 5])
        cuts = sorted(rng.sample(range(1, k), min(looks - 1, k - 1))) if k > 1 else []
        stages = [*cuts, k]
        fractions = [s / k for s in stages]
        row["obf"] = list(obf_boundaries(fractions))
        order = diffs[:]
        rng.shuffle(order)
        seq = sequential_metric(
            metric, gate, [(j + 1, fractions[j], order[: stages[j]]) for j in range(len(stages))],
            planned_cases=k, final=True,
        )
        row["staged"] = [seq.verdict.value if seq.verdict else None, seq.decided_at,
                         [[lk.cases, lk.mean_diff, *lk.ci, lk.critical, lk.decision] for lk in seq.looks]]
        lost, won = rng.randint(0, 300), rng.randint(0, 300)
        row["mcnemar"] = [lost, won, _mcnemar(lost, won)]
        rows.append(row)
    return rows


def _walk(a: Any, b: Any, path: str, out: dict[str, Any], tol: float) -> None:
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for j, (x, y) in enumerate(zip(a, b, strict=True)):
            _walk(x, y, f"{path}[{j}]", out, tol)
    elif isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for key in a:
            _walk(a[key], b[key], f"{path}.{key}", out, tol)
    elif isinstance(a, float) and isinstance(b, float):
        out["numbers"] += 1
        if math.isnan(b) and not math.isnan(a):
            out["was_nan"].append(path)  # the other revision's answer was nan (scipy's far-tail nct)
            return
        if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
            same = a == b or (math.isnan(a) and math.isnan(b))
            diff = 0.0 if same else math.inf
        else:
            diff = abs(a - b)
        if diff > out["max"][0]:
            out["max"] = (diff, path)
        if diff > tol:
            out["beyond"].append(f"{path}: {a!r} vs {b!r}")
    else:
        out["exact"] += 1
        if a != b:
            out["unequal"].append(f"{path}: {a!r} vs {b!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="generated comparisons (default 2000)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--dump", type=Path, help="write this revision's figures here")
    ap.add_argument("--against", type=Path, help="compare this revision's figures with a dump")
    ap.add_argument("--tol", type=float, default=1e-9, help="absolute tolerance of a number")
    args = ap.parse_args()
    t0 = time.process_time()
    rows = generate(args.n, args.seed)
    cpu = time.process_time() - t0
    verdicts = sum(1 for r in rows for key in ("t", "newcombe") if r[key][3] != "ok")
    print(f"{len(rows)} comparisons (seed {args.seed}) in {cpu:.1f} s CPU; {verdicts} verdicts not ok")
    if args.dump:
        args.dump.write_text(json.dumps({"n": args.n, "seed": args.seed, "rows": rows}))
        print(f"written to {args.dump}")
    if args.against:
        other = json.loads(args.against.read_text())
        if (other["n"], other["seed"]) != (args.n, args.seed):
            raise SystemExit(f"{args.against} holds n={other['n']} seed={other['seed']}: pass the same")
        out: dict[str, Any] = {"numbers": 0, "exact": 0, "max": (0.0, ""), "beyond": [], "unequal": [],
                               "was_nan": []}
        _walk(json.loads(json.dumps(rows)), other["rows"], "", out, args.tol)
        print(f"against {args.against}: {out['exact']} verdicts, counts and decisions compared, "
              f"{len(out['unequal'])} unequal; {out['numbers']} numbers compared, {len(out['beyond'])} "
              f"beyond {args.tol:g}; largest difference {out['max'][0]:.3g} ({out['max'][1] or '-'})")
        if out["was_nan"]:
            keys = sorted({p.rsplit(".", 1)[-1] for p in out["was_nan"]})
            print(f"  {len(out['was_nan'])} numbers were nan in {args.against} and are numbers now "
                  f"({', '.join(keys)}): a nan the other revision answered, not a difference of value")
        for line in (out["unequal"] + out["beyond"])[:20]:
            print("  " + line)
        if out["unequal"] or out["beyond"]:
            sys.exit(1)


if __name__ == "__main__":
    main()
