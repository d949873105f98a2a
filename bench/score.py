"""Scoring throughput: 1,000,000 synthetic probe records over 200 skills.

Prints the seconds to parse the probes.jsonl lines into a ProbeTable, the seconds to score them into
an artifact, and scikit-learn's ``precision_recall_fscore_support`` on the same labels (integer-coded,
and as the label strings). Goal: scoring within 2× sklearn's time on the integer-coded labels.

    .venv/bin/python bench/score.py [--probes N] [--skills K] [--attempts A] [--seed S] [--pydantic]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import cast

import numpy as np

from skillreach.artifacts import Artifact
from skillreach.models import NO_SKILL, Catalog, ProbeRecord, Provenance, Query, QueryKind, QuerySet, Skill
from skillreach.scoring import ProbeTable, score


def make_study(
    n_probes: int, n_skills: int, attempts: int, seed: int, *, uniform: bool = False
) -> tuple[QuerySet, Catalog, list[bytes]]:
    """A study whose confusions fall among each skill's 10 nearest rivals (as real ones do), or
    anywhere (``uniform``: the worst case, every cell of the confusion matrix filled)."""
    rng = random.Random(seed)
    skills = [f"skill-{i:03d}" for i in range(n_skills)]
    near = {s: rng.sample([r for r in skills if r != s], 10) for s in skills}
    rivals = {s: near[s][:3] for s in skills}
    n_queries = max(1, n_probes // attempts)
    queries = []
    for i in range(n_queries):
        if i % 10 == 9:
            queries.append(Query(id=f"q-{i:06d}", text=f"unrelated request {i}", kind=QueryKind.out_of_scope))
            continue
        s = skills[i % n_skills]
        acceptable = (rivals[s][2],) if i % 10 == 3 else ()
        queries.append(
            Query(
                id=f"q-{i:06d}",
                text=f"please do {s} thing {i}",
                expected_skill=s,
                acceptable_skills=acceptable,
            )
        )
    catalog = Catalog(
        id="bench",
        skills=tuple(Skill(name=s, description=f"does {s}", body="") for s in skills),
    )
    lines: list[bytes] = []
    for n in range(n_probes):
        qu = queries[n % n_queries]
        attempt = n // n_queries + 1
        r = rng.random()
        error = None
        if qu.expected_skill is None:
            invoked = [] if r < 0.8 else [rng.choice(skills if uniform else skills[:20])]
        else:
            s = qu.expected_skill
            riv = rivals[s]
            if r < 0.02:
                invoked, error = [], "rate limited after 6 retries"
            elif r < 0.70:
                invoked = [s]
            elif r < 0.78:
                invoked = [riv[0], s]  # Turn-2 recovery
            elif r < 0.84:
                invoked = [riv[1]]
            elif r < 0.88:
                invoked = [riv[0], riv[1], s]
            elif r < 0.93:
                invoked = []
            elif r < 0.96 and qu.acceptable_skills:
                invoked = [qu.acceptable_skills[0], s]
            else:
                invoked = [rng.choice(skills if uniform else near[s])]
        rec = {
            "query_id": qu.id,
            "attempt": attempt,
            "invoked": invoked,
            "error": error,
            "turns": len(invoked),
            "early_exit": bool(invoked) and invoked[-1] == qu.expected_skill,
            "runtime": "fake",
            "model": "fake-1",
            "resolved_model": "fake-1",
            "usage": {
                "input_tokens": 1200 + (n % 97),
                "output_tokens": 40,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 1000,
            },
            "cost_usd": 0.0004,
            "duration_ms": 350,
        }
        lines.append(json.dumps(rec, separators=(",", ":")).encode() + b"\n")
    qs = QuerySet(queries=tuple(queries))
    return qs.model_copy(update={"provenance": Provenance(digest=qs.compute_digest())}), catalog, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probes", type=int, default=1_000_000)
    ap.add_argument("--skills", type=int, default=200)
    ap.add_argument("--attempts", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pydantic", action="store_true", help="also time one ProbeRecord model per line")
    ap.add_argument("--uniform", action="store_true", help="confusions anywhere (every matrix cell filled)")
    ap.add_argument("--repeat", type=int, default=3, help="time scoring and sklearn this many times; best")
    ap.add_argument("--write", action="store_true", help="also time writing and verifying artifact.json")
    args = ap.parse_args()

    from sklearn.metrics import precision_recall_fscore_support

    t0 = time.perf_counter()
    qs, catalog, lines = make_study(args.probes, args.skills, args.attempts, args.seed, uniform=args.uniform)
    print(
        f"generated {len(lines):,} probe lines over {args.skills} skills, {len(qs.queries):,} queries "
        f"in {time.perf_counter() - t0:.1f} s"
    )

    t0 = time.perf_counter()
    table = ProbeTable.from_lines(lines, source="bench")
    t_parse = time.perf_counter() - t0
    print(f"parse  (lines → ProbeTable):            {t_parse:7.3f} s")
    if args.pydantic:
        t0 = time.perf_counter()
        records = [ProbeRecord.model_validate_json(line) for line in lines]
        print(f"parse  (lines → ProbeRecord, pydantic): {time.perf_counter() - t0:7.3f} s  (for comparison)")
        del records

    def best(fn: Callable[[], object]) -> tuple[float, object]:
        times, out = [], None
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
        return min(times), out

    t_score, result = best(lambda: score(qs, table, catalog))
    artifact = cast(Artifact, result)
    print(f"score  (ProbeTable → Artifact):          {t_score:7.3f} s  (best of {args.repeat})")
    print(f"       confusion cells {len(artifact.confusion):,}, collisions {len(artifact.collisions):,}")

    # The same label arrays sklearn sees: truth and Turn-1 prediction of every scored probe.
    labels = [c.label for c in artifact.classes]
    code = {name: i for i, name in enumerate(labels)}
    truth_s = np.array([o.truth for o in artifact.outcomes if o.scored], dtype=object)
    pred_s = np.array([o.predicted for o in artifact.outcomes if o.scored], dtype=object)
    truth_i = np.array([code[x] for x in truth_s], dtype=np.int64)
    pred_i = np.array([code[x] for x in pred_s], dtype=np.int64)

    t_sk_int, result = best(
        lambda: precision_recall_fscore_support(
            truth_i, pred_i, labels=list(range(len(labels))), average=None, zero_division=0
        )
    )
    p, r, _f, s = cast(tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], result)
    print(f"sklearn precision_recall_fscore_support, int labels:    {t_sk_int:7.3f} s")
    t_sk_str, _ = best(
        lambda: precision_recall_fscore_support(truth_s, pred_s, labels=labels, average=None, zero_division=0)
    )
    print(f"sklearn precision_recall_fscore_support, string labels: {t_sk_str:7.3f} s")

    if args.write:
        import tempfile
        from pathlib import Path

        from skillreach.artifacts import read_artifact, write_artifact

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "artifact.json"
            t0 = time.perf_counter()
            write_artifact(artifact, path)
            t_write = time.perf_counter() - t0
            t0 = time.perf_counter()
            read_artifact(path)
            t_read = time.perf_counter() - t0
            size = path.stat().st_size
        print(f"write artifact.json ({size / 1e6:.0f} MB, digest included): {t_write:7.3f} s")
        print(f"read + verify artifact.json:                  {t_read:7.3f} s")

    ok = all(
        abs(c.precision - p[i]) < 1e-12
        and c.support == s[i]
        and (c.recall is None or abs(c.recall - r[i]) < 1e-12)
        for i, c in enumerate(artifact.classes)
    )
    print(f"per-class precision/recall equal sklearn's: {ok}")
    print(
        f"scored {artifact.counts.scored:,} of {artifact.counts.probes:,} probes; "
        f"top1_accuracy {artifact.metrics.top1_accuracy:.4f}; labels {len(labels)} (incl. {NO_SKILL})"
    )
    ratio = t_score / t_sk_int
    print(
        f"score / sklearn(int labels) = {ratio:.2f}×  (goal ≤ 2×: {'met' if ratio <= 2 else 'NOT met'}); "
        f"score / sklearn(string labels) = {t_score / t_sk_str:.2f}×"
    )


if __name__ == "__main__":
    main()
