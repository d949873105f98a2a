"""Scoring throughput: 1,000,000 synthetic probe records (100,000 queries × 10 attempts, 200 skills).

Two figures, each a ratio to a reference run in the same process on the same data:

1. the WHOLE ``skillreach score --queries Q --probes P --skills S --out O --quiet`` command, run as a
   subprocess (start-up, reading the query set and the 200 SKILL.md folders, parsing probes.jsonl,
   scoring, writing and digesting artifact.json), against the stdlib ``json`` module decoding the same
   probes.jsonl line by line (``for line in fh: json.loads(line)``, nothing kept). Goal ≤ 1.0×, and the
   command's peak memory (max RSS) ≤ 1.5 GiB;
2. scoring alone (ProbeTable → Artifact, in process: every figure of spec/metrics.md and the
   artifact's outcomes, what the command's ``score()`` call does) against scikit-learn's
   ``precision_recall_fscore_support`` on the same integer-coded labels. Goal ≤ 1.0×. As in the command,
   the query set is loaded from queries.json and prepared (:func:`skillreach.scoring.prepare_queries`,
   its query side built once, timed apart), and probes.jsonl is read for it.

Also printed: the in-process split (parse, score) and sklearn on the label strings.

    .venv/bin/python bench/score.py [--probes N] [--skills K] [--attempts A] [--seed S] [--pydantic]
                                    [--data DIR]

Score and sklearn (int labels) are timed in turn, best of ``--repeat`` each, wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import numpy as np

from skillreach.models import NO_SKILL, Catalog, ProbeRecord, Provenance, Query, QueryKind, QuerySet, Skill
from skillreach.queries.sets import load_query_set
from skillreach.scoring import ProbeTable, prepare_queries, score
from skillreach.scoring.artifact import Artifact, write_artifact


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


def write_inputs(folder: Path, qs: QuerySet, catalog: Catalog, lines: list[bytes]) -> tuple[Path, Path, Path]:
    """probes.jsonl, a sealed queries.json and one SKILL.md folder per skill, under ``folder``."""
    from skillreach.queries.sets import seal, write_query_set

    probes = folder / "probes.jsonl"
    with probes.open("wb") as fh:
        fh.writelines(lines)
    queries = write_query_set(seal(qs, source="bench", catalog_id=catalog.id), folder / "queries.json")
    skills = folder / "skills"
    for s in catalog.skills:
        (skills / s.name).mkdir(parents=True)
        (skills / s.name / "SKILL.md").write_text(
            f"---\nname: {s.name}\ndescription: {s.description}\n---\n\n# {s.name}\n", encoding="utf-8"
        )
    return probes, queries, skills


def stdlib_decode(path: Path) -> tuple[float, float]:
    """(wall, CPU) seconds for the stdlib json module to decode every line of ``path`` (the reference)."""
    t0, c0 = time.perf_counter(), time.process_time()
    with path.open("rb") as fh:
        for line in fh:
            json.loads(line)
    return time.perf_counter() - t0, time.process_time() - c0


def run_command(probes: Path, queries: Path, skills: Path, out: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS bytes) of the whole ``skillreach score`` command in a
    subprocess."""
    exe = Path(sys.executable).parent / "skillreach"
    argv = [str(exe), "score", "--queries", str(queries), "--probes", str(probes), "--skills", str(skills)]
    argv += ["--out", str(out), "--quiet"]
    code = (
        "import resource, subprocess, sys, time\n"
        "t0 = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:]).returncode\n"
        "t = time.perf_counter() - t0\n"
        "ru = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(rc, t, ru.ru_utime + ru.ru_stime, ru.ru_maxrss)\n"
    )
    # A fresh wrapper per run, so RUSAGE_CHILDREN's max RSS is this command's alone.
    res = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
    rc, wall, cpu, rss_kib = res.stdout.split()
    if rc != "0":
        raise SystemExit(f"skillreach score failed ({rc}): {res.stderr}")
    return float(wall), float(cpu), int(rss_kib) * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probes", type=int, default=1_000_000)
    ap.add_argument("--skills", type=int, default=200)
    ap.add_argument("--attempts", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pydantic", action="store_true", help="also time one ProbeRecord model per line")
    ap.add_argument("--uniform", action="store_true", help="confusions anywhere (every matrix cell filled)")
    ap.add_argument("--repeat", type=int, default=3, help="time each side this many times; best")
    ap.add_argument("--skip-command", action="store_true", help="only the in-process figures")
    ap.add_argument(
        "--data",
        type=Path,
        help="keep the generated inputs in this folder and reuse them when they are there (generating a "
        "million probe lines takes ~50 s); its study.pickle must match the size flags",
    )
    args = ap.parse_args()

    from sklearn.metrics import precision_recall_fscore_support

    t0 = time.perf_counter()
    sizes = (args.probes, args.skills, args.attempts, args.seed, args.uniform)
    kept = args.data / "study.pickle" if args.data else None
    if kept is not None and kept.exists() and pickle.loads(kept.read_bytes())[0] == sizes:
        qs, catalog = pickle.loads(kept.read_bytes())[1:]
        n_lines = sum(1 for _ in (args.data / "probes.jsonl").open("rb"))
        lines: list[bytes] = []
        print(f"reusing {n_lines:,} probe lines, {len(qs.queries):,} queries from {args.data}")
    else:
        qs, catalog, lines = make_study(*sizes[:4], uniform=args.uniform)
        print(
            f"generated {len(lines):,} probe lines over {args.skills} skills, {len(qs.queries):,} queries "
            f"in {time.perf_counter() - t0:.1f} s"
        )
    repeat = max(1, args.repeat)
    results: list[tuple[str, float, float]] = []

    with tempfile.TemporaryDirectory(prefix="bench-score-") as tmp:
        folder = Path(tmp)
        if args.data is None:
            probes, queries, skills = write_inputs(folder, qs, catalog, lines)
        elif lines:  # fresh inputs: written to --data
            shutil.rmtree(args.data, ignore_errors=True)
            args.data.mkdir(parents=True)
            probes, queries, skills = write_inputs(args.data, qs, catalog, lines)
            (args.data / "study.pickle").write_bytes(pickle.dumps((sizes, qs, catalog)))
        else:
            probes, queries, skills = (args.data / n for n in ("probes.jsonl", "queries.json", "skills"))
        size = probes.stat().st_size
        if not args.skip_command:
            t_cmd, c_cmd, rss, t_ref, c_ref = math.inf, math.inf, 0, math.inf, math.inf
            for i in range(repeat):  # interleaved, so a busy neighbour slows both sides alike
                wall, cpu = stdlib_decode(probes)
                t_ref, c_ref = min(t_ref, wall), min(c_ref, cpu)
                wall, cpu, peak = run_command(probes, queries, skills, folder / f"out{i}")
                t_cmd, c_cmd, rss = min(t_cmd, wall), min(c_cmd, cpu), max(rss, peak)
            gib = rss / 2**30
            print(f"probes.jsonl: {size / 1e6:.0f} MB")
            print(f"stdlib json.loads, line by line (reference):   {t_ref:7.3f} s  (best of {repeat})")
            print(f"skillreach score, whole command (subprocess):  {t_cmd:7.3f} s  (best of {repeat})")
            print(f"skillreach score peak memory (max RSS):        {gib:7.3f} GiB")
            print(
                f"CPU seconds (less sensitive to the neighbours' load): command {c_cmd:.3f} s, "
                f"reference {c_ref:.3f} s, ratio {c_cmd / c_ref:.2f}×"
            )
            results.append(("skillreach score / stdlib json decode", t_cmd / t_ref, 1.0))
            results.append(("skillreach score peak memory, GiB", gib, 1.5))
        # the command's own steps: the query set loaded and prepared (its query side built once), the
        # probes read for it (query ids coded by their place in it), then scored and written
        t0, c0 = time.perf_counter(), time.process_time()
        qs = load_query_set(queries)
        t_q, c_q = time.perf_counter() - t0, time.process_time() - c0
        print(f"in process: load the query set:                {t_q:7.3f} s  (CPU {c_q:.3f} s)")
        t0, c0 = time.perf_counter(), time.process_time()
        prepare_queries(qs)
        t_q, c_q = time.perf_counter() - t0, time.process_time() - c0
        print(f"in process: prepare the query side of scoring: {t_q:7.3f} s  (CPU {c_q:.3f} s)")
        t0, c0 = time.perf_counter(), time.process_time()
        with probes.open("rb") as fh:
            table = ProbeTable.from_lines(fh, source=str(probes), queries=qs)
        t_parse, c_parse = time.perf_counter() - t0, time.process_time() - c0
        print(f"in process: parse (probes.jsonl → ProbeTable): {t_parse:7.3f} s  (CPU {c_parse:.3f} s)")
        t0, c0 = time.perf_counter(), time.process_time()
        write_artifact(score(qs, table, catalog), folder / "in-process.json")
        t_w, c_w = time.perf_counter() - t0, time.process_time() - c0
        print(f"in process: score and write artifact.json:     {t_w:7.3f} s  (CPU {c_w:.3f} s)")
    if args.pydantic:
        if not lines:
            lines = probes.read_bytes().splitlines()
        t0 = time.perf_counter()
        records = [ProbeRecord.model_validate_json(line) for line in lines]
        print(f"in process: parse (lines → ProbeRecord):       {time.perf_counter() - t0:7.3f} s  (pydantic)")
        del records

    cpu_best: dict[str, float] = {}
    spread: dict[str, tuple[list[float], list[float]]] = {}

    def best(fn: Callable[[], object], name: str = "") -> tuple[float, object]:
        times, cpus, out = [], [], None
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            out = fn()
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        cpu_best[name] = min(cpus)
        return min(times), out

    def interleaved(fns: dict[str, Callable[[], object]]) -> dict[str, tuple[float, object]]:
        """Best (wall, last result) of each, the runs taken in turn, so a busy neighbour slows all alike."""
        walls: dict[str, list[float]] = {k: [] for k in fns}
        cpus: dict[str, list[float]] = {k: [] for k in fns}
        out: dict[str, object] = {}
        for _ in range(repeat):
            for k, fn in fns.items():
                t0, c0 = time.perf_counter(), time.process_time()
                out[k] = fn()
                walls[k].append(time.perf_counter() - t0)
                cpus[k].append(time.process_time() - c0)
        cpu_best.update({k: min(v) for k, v in cpus.items()})
        spread.update({k: (walls[k], cpus[k]) for k in fns})
        return {k: (min(walls[k]), out[k]) for k in fns}

    artifact = score(qs, table, catalog)  # once untimed: the label arrays sklearn sees come from it
    # The same label arrays sklearn sees: truth and Turn-1 prediction of every scored probe.
    labels = [c.label for c in artifact.classes]
    code = {name: i for i, name in enumerate(labels)}
    truth_s = np.array([o.truth for o in artifact.outcomes if o.scored], dtype=object)
    pred_s = np.array([o.predicted for o in artifact.outcomes if o.scored], dtype=object)
    truth_i = np.array([code[x] for x in truth_s], dtype=np.int64)
    pred_i = np.array([code[x] for x in pred_s], dtype=np.int64)
    del artifact

    runs = interleaved(
        {
            "score": lambda: score(qs, table, catalog),
            "sklearn": lambda: precision_recall_fscore_support(
                truth_i, pred_i, labels=list(range(len(labels))), average=None, zero_division=0
            ),
        }
    )
    t_score, t_sk_int = runs["score"][0], runs["sklearn"][0]
    artifact = cast(Artifact, runs["score"][1])
    print(f"in process: score (ProbeTable → Artifact):     {t_score:7.3f} s  (best of {repeat}, runs")
    print("       taken in turn with sklearn's, int labels)")
    print(f"       confusion cells {len(artifact.confusion):,}, collisions {len(artifact.collisions):,}")
    p, r, _f, s = cast(tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], runs["sklearn"][1])
    print(f"sklearn precision_recall_fscore_support, int labels:    {t_sk_int:7.3f} s")
    t_sk_str, _ = best(
        lambda: precision_recall_fscore_support(truth_s, pred_s, labels=labels, average=None, zero_division=0)
    )
    print(f"sklearn precision_recall_fscore_support, string labels: {t_sk_str:7.3f} s")
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
    results.append(("score alone / sklearn p_r_f_s (int labels)", t_score / t_sk_int, 1.0))
    print(f"(score / sklearn int labels in CPU seconds = {cpu_best['score'] / cpu_best['sklearn']:.2f}×)")
    mine, theirs = spread["score"], spread["sklearn"]
    print(
        f"(score / sklearn int labels, median of {repeat}: wall "
        f"{statistics.median(mine[0]) / statistics.median(theirs[0]):.2f}×, CPU "
        f"{statistics.median(mine[1]) / statistics.median(theirs[1]):.2f}×)"
    )
    print(f"(score / sklearn string labels = {t_score / t_sk_str:.2f}×)")
    for what, value, goal in results:
        print(f"GOAL {what}: {value:.2f} (goal ≤ {goal:g}): {'met' if value <= goal else 'NOT met'}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    assert ok, "scoring disagrees with scikit-learn"


if __name__ == "__main__":
    main()
