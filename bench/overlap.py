"""All-pairs BM25 overlap on a synthetic catalog: the vectorised path against rank-bm25.

A seeded vocabulary of 20,000 made-up words with Zipf-like frequencies (plus common English function
words, which the tokenizer drops), descriptions of 50–150 words, names of 2–4 words. Prints seconds for
:func:`skillreach.bm25.rivals` (all pairs, top 10) and :func:`overlap_matrix` (the dense n × n matrix)
on the whole catalog, for the rank-bm25 reference (:class:`LuceneBM25`, one ``get_scores`` per skill)
on a 200-skill sample, that reference extrapolated to the full catalog (quadratic: × (n/200)²), and
checks the two agree on the sample. Then the top 10 rivals of every skill of a 50,000-skill catalog
(blocks of rows, never the dense n² matrix), with the process's peak memory.

Goals (seconds converted to the quiet machine's by the same-process reference, bench/_calibrate.py):
5,000 skills ≤ 1.0 s; 50,000 skills ≤ 30 s and ≤ 4 GiB peak memory.

    .venv/bin/python bench/overlap.py [--skills 5000] [--large 50000] [--sample 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import itertools
import random
import resource
import string
import time

import numpy as np
from _calibrate import QUIET_US_PER_LINE, load, quiet_seconds, reference_us_per_line, verdict

from skillreach.bm25 import LuceneBM25, overlap_matrix, rivals, skill_text, tokenize
from skillreach.models import Skill

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


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=5000)
    parser.add_argument("--large", type=int, default=50_000, help="the big catalog (0 to skip)")
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    goals: list[str] = []

    ref = reference_us_per_line()
    print(
        f"reference: stdlib json.loads of a probe line {ref:.2f} µs "
        f"({QUIET_US_PER_LINE} µs when the goals were set)"
    )
    t0 = time.perf_counter()
    skills = synthetic_catalog(args.skills, args.seed)
    words = [len(s.description.split()) for s in skills]
    print(
        f"catalog: {len(skills):,} synthetic skills, description words min/median/max "
        f"{min(words)}/{int(np.median(words))}/{max(words)} (built in {time.perf_counter() - t0:.2f} s)"
    )

    t0, c0 = time.perf_counter(), time.process_time()
    result = rivals(skills, top=10)
    t_rivals, c_rivals = time.perf_counter() - t0, time.process_time() - c0
    q_rivals = quiet_seconds(t_rivals, ref)
    print(
        f"vectorised rivals (all pairs, top 10), {len(skills):,} skills: {t_rivals:.2f} s "
        f"(CPU {c_rivals:.2f} s, all threads; {q_rivals:.2f} s at the reference's quiet speed)"
    )
    goals.append(verdict(f"rivals of {len(skills):,} skills, quiet seconds", q_rivals, 1.0, " s"))

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
        t0, c0 = time.perf_counter(), time.process_time()
        found = rivals(big, top=10)
        t_big, c_big = time.perf_counter() - t0, time.process_time() - c0
        q_big = quiet_seconds(t_big, ref)
        rss = peak_rss_gib()
        print(
            f"vectorised rivals (top 10 per skill), {len(big):,} skills: {t_big:.1f} s (CPU {c_big:.1f} s; "
            f"{q_big:.1f} s at the reference's quiet speed); peak memory (max RSS) {rss:.2f} GiB "
            f"(before: {rss0:.2f} GiB)"
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
        goals.append(verdict(f"rivals of {len(big):,} skills, quiet seconds", q_big, 30.0, " s"))
        goals.append(verdict(f"rivals of {len(big):,} skills, peak memory", rss, 4.0, " GiB"))

    for line in goals:
        print(line)
    print(load())


if __name__ == "__main__":
    main()
