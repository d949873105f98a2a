"""All-pairs BM25 overlap on a synthetic catalog: the vectorised path against rank-bm25.

A seeded vocabulary of 20,000 made-up words with Zipf-like frequencies (plus common English function
words, which the tokenizer drops), descriptions of 50–150 words, names of 2–4 words. Prints seconds for
:func:`skillreach.skills.bm25.rivals` (all pairs, top 10) and :func:`overlap_matrix` (the dense n × n matrix)
on the whole catalog, for the rank-bm25 reference (:class:`LuceneBM25`, one ``get_scores`` per skill)
on a 200-skill sample, that reference extrapolated to the full catalog (quadratic: × (n/200)²), and
checks the two agree on the sample. Then the top 10 rivals of every skill of a 50,000-skill catalog
(blocks of rows, never the dense n² matrix), with the process's peak memory.

Goals (seconds converted to the quiet machine's by the same-process reference, bench/_calibrate.py):
5,000 skills ≤ 1.0 s; 50,000 skills ≤ 30 s and ≤ 4 GiB peak memory.

On a shared machine the load moves during a run, so the reference is measured just before and just
after each timed call and the two averaged, both in wall seconds and in CPU seconds. The GOAL lines
use the CPU-based conversion (CPU seconds of the call, all threads, × the quiet reference / the CPU
reference now): it does not count the time other work held the cores. The wall-based figure is
printed beside it. scipy.sparse is imported (and its import timed and printed) before the calls: the
goal is the computation, not a one-time import every command that uses BM25 pays once. The BLAS
runs on ``--threads`` threads (default 1, through threadpoolctl, which scikit-learn of the test
extra brings): the goals' machine had one core busy with other work, and a second BLAS thread on a
loaded machine adds CPU (synchronisation) without taking wall time off, so the CPU-based figure
means one core's work.

From 20,000² pairs :func:`rivals` screens with a compiled loop (numba, loaded on first use: its import
and the load of its cached machine code, ~1–2 s of CPU, are inside the 50,000-skill figure).
``--compare`` also times the scipy screen (``compiled=False``) on the big catalog in the same process,
and prints the ratio and whether both name the same rivals.

    .venv/bin/python bench/overlap.py [--skills 5000] [--large 50000] [--sample 200] [--seed 0] [--threads 1]
                                      [--compare]
"""

from __future__ import annotations

import argparse
import itertools
import random
import resource
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from _calibrate import QUIET_US_PER_LINE, load, reference_us_per_line, verdict

from skillreach.models import Skill
from skillreach.skills.bm25 import LuceneBM25, overlap_matrix, rivals, skill_text, tokenize

T = TypeVar("T")

FUNCTION_WORDS = [
    "the",
    "a",
    "to",
    "for",
    "and",
    "of",
    "in",
    "with",
    "when",
    "use",
    "this",
    "that",
    "or",
    "on",
    "by",
    "from",
    "is",
    "are",
]


def synthetic_catalog(n: int, seed: int, vocabulary: int = 20_000) -> list[Skill]:
    rng = random.Random(seed)
    words = sorted(
        {"".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))) for _ in range(vocabulary * 2)}
    )[:vocabulary]
    rng.shuffle(words)
    cum_weights = list(itertools.accumulate(1.0 / (rank + 1) ** 1.05 for rank in range(len(words))))
    skills: list[Skill] = []
    for i in range(n):
        name = "-".join(rng.choices(words[:3000], k=rng.randint(2, 4))) + f"-{i}"
        length = rng.randint(40, 120)  # + a quarter function words: 50–150 words in all
        content = rng.choices(words, cum_weights=cum_weights, k=length)
        for j in range(0, length, 4):  # roughly a quarter function words, as in real prose
            content.insert(j, rng.choice(FUNCTION_WORDS))
        skills.append(Skill(name=name, description=" ".join(content).capitalize() + "."))
    return skills


REFERENCE_LINES = 50_000
REFERENCE_REPEAT = 3


@dataclass
class Timed:
    wall: float
    cpu: float
    ref_wall_us: float
    ref_cpu_us: float

    def quiet_wall(self) -> float:
        return self.wall * QUIET_US_PER_LINE / self.ref_wall_us

    def quiet_cpu(self) -> float:
        return self.cpu * QUIET_US_PER_LINE / self.ref_cpu_us

    def line(self) -> str:
        return (
            f"{self.wall:.2f} s wall, CPU {self.cpu:.2f} s (all threads); at the quiet reference's speed: "
            f"{self.quiet_cpu():.2f} s CPU-based, {self.quiet_wall():.2f} s wall-based (reference now "
            f"{self.ref_cpu_us:.2f} µs CPU, {self.ref_wall_us:.2f} µs wall per line)"
        )


def json_reference() -> tuple[float, float]:
    """(wall, CPU) µs per probe line of the stdlib json reference now (wall: best of 3; CPU: mean)."""
    c0 = time.process_time()
    wall = reference_us_per_line(REFERENCE_LINES, REFERENCE_REPEAT)
    return wall, (time.process_time() - c0) / (REFERENCE_LINES * REFERENCE_REPEAT) * 1e6


def timed(call: Callable[[], T]) -> tuple[T, Timed]:
    """``call()``, its wall and CPU seconds, and the reference averaged from just before and after."""
    before = json_reference()
    t0, c0 = time.perf_counter(), time.process_time()
    result = call()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    after = json_reference()
    return result, Timed(wall, cpu, (before[0] + after[0]) / 2, (before[1] + after[1]) / 2)


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=5000)
    parser.add_argument("--large", type=int, default=50_000, help="the big catalog (0 to skip)")
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads for the timed calls")
    parser.add_argument("--compare", action="store_true", help="also time the scipy screen at --large")
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    threadpool_limits(args.threads, user_api="blas")
    print(f"BLAS threads: {args.threads}")
    goals: list[str] = []

    ref_wall, ref_cpu = json_reference()
    print(
        f"reference: stdlib json.loads of a probe line {ref_wall:.2f} µs wall, {ref_cpu:.2f} µs CPU "
        f"({QUIET_US_PER_LINE} µs when the goals were set)"
    )
    t0 = time.perf_counter()
    import scipy.sparse  # noqa: F401  (timed apart: see the docstring)

    print(f"import scipy.sparse: {time.perf_counter() - t0:.2f} s (not in the figures below)")
    t0 = time.perf_counter()
    skills = synthetic_catalog(args.skills, args.seed)
    words = [len(s.description.split()) for s in skills]
    print(
        f"catalog: {len(skills):,} synthetic skills, description words min/median/max "
        f"{min(words)}/{int(np.median(words))}/{max(words)} (built in {time.perf_counter() - t0:.2f} s)"
    )

    result, small = timed(lambda: rivals(skills, top=10))
    t_rivals = small.wall
    print(f"vectorised rivals (all pairs, top 10), {len(skills):,} skills: {small.line()}")
    goals.append(
        verdict(f"rivals of {len(skills):,} skills, quiet seconds (CPU-based)", small.quiet_cpu(), 1.0, " s")
    )

    sample = random.Random(args.seed + 1).sample(skills, args.sample)
    docs = [tokenize(skill_text(s)) for s in sample]
    t0 = time.perf_counter()
    reference = LuceneBM25(docs)
    ref_scores = np.array([reference.get_scores(q) for q in docs])
    t_ref = time.perf_counter() - t0
    extrapolated = t_ref * (len(skills) / args.sample) ** 2
    fast = overlap_matrix(sample)
    diff = float(np.abs(fast - ref_scores).max())
    print(
        f"rank-bm25 reference, {args.sample} skills: {t_ref:.2f} s; "
        f"extrapolated to {len(skills):,}: ~{extrapolated:,.0f} s"
    )
    print(f"speed-up at {len(skills):,}: ~{extrapolated / t_rivals:,.0f}× (rivals)")
    print(f"max |vectorised − reference| on the sample: {diff:.2e}")
    assert diff < 1e-9, "the vectorised path disagrees with rank-bm25"
    assert len(result) == len(skills)
    del result

    if args.large:
        big = synthetic_catalog(args.large, args.seed + 2)
        rss0 = peak_rss_gib()
        found, large = timed(lambda: rivals(big, top=10))
        rss = peak_rss_gib()
        print(
            f"vectorised rivals (top 10 per skill), {len(big):,} skills: {large.line()}; "
            f"peak memory (max RSS) {rss:.2f} GiB (before: {rss0:.2f} GiB)"
        )
        # spot check: a few skills' rivals computed alone (pure sparse product, another summation
        # order) name the same skills with the same scores to 1e-9
        index_rows = sorted(random.Random(args.seed).sample(range(len(big)), 5))
        check = rivals(big, top=10, only={big[i].name for i in index_rows})
        for alone, i in zip(check, index_rows, strict=True):
            assert [r.name for r in alone.rivals] == [r.name for r in found[i].rivals]
            assert all(
                abs(a.score - b.score) < 1e-9 for a, b in zip(alone.rivals, found[i].rivals, strict=True)
            )
        print("spot check of 5 skills computed alone: same rivals, scores within 1e-9")
        if args.compare:
            scipy_found, scipy_timed = timed(lambda: rivals(big, top=10, compiled=False))
            same = all(
                [r.name for r in a.rivals] == [r.name for r in b.rivals]
                and all(abs(x.score - y.score) < 1e-9 for x, y in zip(a.rivals, b.rivals, strict=True))
                for a, b in zip(found, scipy_found, strict=True)
            )
            print(
                f"scipy screen (compiled=False), {len(big):,} skills: {scipy_timed.line()}; the compiled one "
                f"took {large.quiet_cpu() / scipy_timed.quiet_cpu():.2f}× its CPU-based time; "
                f"same rivals and scores (1e-9) for every skill: {same}"
            )
            del scipy_found
        goals.append(
            verdict(
                f"rivals of {len(big):,} skills, quiet seconds (CPU-based)", large.quiet_cpu(), 30.0, " s"
            )
        )
        goals.append(verdict(f"rivals of {len(big):,} skills, peak memory", rss, 4.0, " GiB"))

    for line in goals:
        print(line)
    print(load())


if __name__ == "__main__":
    main()
