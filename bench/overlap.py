"""All-pairs BM25 overlap on a synthetic catalog: the vectorised path against rank-bm25.

A seeded vocabulary of 20,000 made-up words with Zipf-like frequencies (plus common English function
words, which the tokenizer drops), descriptions of 50–150 words, names of 2–4 words. Prints seconds for
:func:`skillreach.bm25.rivals` (all pairs, top 10) and :func:`overlap_matrix` (the dense n × n matrix)
on the whole catalog, for the rank-bm25 reference (:class:`LuceneBM25`, one ``get_scores`` per skill)
on a 200-skill sample, that reference extrapolated to the full catalog (quadratic: × (n/200)²), and
checks the two agree on the sample. Goal: 5,000 skills in ≤ 3 s.

    .venv/bin/python bench/overlap.py [--skills 5000] [--sample 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import string
import time

import numpy as np

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=5000)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

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
    print(
        f"vectorised rivals (all pairs, top 10), {len(skills):,} skills: {t_rivals:.2f} s "
        f"(CPU {c_rivals:.2f} s, all threads)"
    )

    t0 = time.perf_counter()
    matrix = overlap_matrix(skills)
    t_matrix = time.perf_counter() - t0
    print(f"vectorised overlap_matrix (dense {matrix.shape[0]:,}²), {len(skills):,} skills: {t_matrix:.2f} s")
    del matrix

    sample = random.Random(args.seed + 1).sample(skills, args.sample)
    docs = [tokenize(skill_text(s)) for s in sample]
    t0 = time.perf_counter()
    reference = LuceneBM25(docs)
    ref = np.array([reference.get_scores(q) for q in docs])
    t_ref = time.perf_counter() - t0
    extrapolated = t_ref * (len(skills) / args.sample) ** 2
    t0 = time.perf_counter()
    fast = overlap_matrix(sample)
    t_fast_sample = time.perf_counter() - t0
    diff = float(np.abs(fast - ref).max())
    print(
        f"rank-bm25 reference, {args.sample} skills: {t_ref:.2f} s "
        f"(vectorised on the same: {t_fast_sample:.3f} s)"
    )
    print(f"rank-bm25 extrapolated to {len(skills):,} skills: ~{extrapolated:,.0f} s")
    print(f"speed-up at {len(skills):,}: ~{extrapolated / t_rivals:,.0f}× (rivals)")
    print(f"max |vectorised − reference| on the sample: {diff:.2e}")
    print(f"goal ≤ 3 s for {len(skills):,} skills: {'met' if t_rivals <= 3.0 else 'NOT met'}", end="")
    print(
        f" (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
        if hasattr(os, "getloadavg")
        else ""
    )
    assert diff < 1e-9, "the vectorised path disagrees with rank-bm25"
    assert len(result) == len(skills)


if __name__ == "__main__":
    main()
