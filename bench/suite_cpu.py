"""Where the test suite's time goes: wall and CPU per module, from a run with SKILLREACH_TEST_CPU_LOG.

    SKILLREACH_TEST_CPU_LOG=/tmp/cpu.jsonl make test
    .venv/bin/python bench/suite_cpu.py /tmp/cpu.jsonl [--top 25]

CPU is the test process's own plus its reaped descendants' (servers, CLIs, Prefect workers and the flow
run processes they reaped); a process still alive at the end of a test (a module's server) is counted in
the test that reaps it. On two cores the suite's wall cannot be under the sum of CPU / 2.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.log.read_text().splitlines() if line.strip()]
    by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for r in rows:
        m = by[r["test"].split("::", 1)[0]]
        m[0] += r["wall_s"]
        m[1] += r["cpu_s"]
        m[2] += r["children_cpu_s"]
        m[3] += 1
    wall = sum(m[0] for m in by.values())
    cpu = sum(m[1] + m[2] for m in by.values())
    print(f"{len(rows)} tests, {len(by)} modules: {wall:,.0f} s of test wall, {cpu:,.0f} s CPU "
          f"(floor on 2 cores {cpu / 2:,.0f} s)")
    print(f"{'module':58} {'tests':>5} {'wall s':>8} {'cpu s':>8} {'own':>7} {'children':>9} {'cpu/wall':>8}")
    for name, (w, own, kids, n) in sorted(by.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[: args.top]:
        ratio = (own + kids) / max(w, 1e-9)
        print(f"{name:58} {n:5d} {w:8.0f} {own + kids:8.0f} {own:7.0f} {kids:9.0f} {ratio:8.2f}")


if __name__ == "__main__":
    main()
