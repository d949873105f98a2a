"""``skillreach lint`` of a generated catalog, through the real command: the figure for 100,000 skills.

Each skill is a folder with a SKILL.md whose frontmatter looks like the ones people write: name,
description (60–300 characters), and on a third of them ``allowed-tools`` (a list) and a ``metadata``
mapping. The catalog is written once into a temporary folder (or ``--keep DIR``), then
``.venv/bin/skillreach lint DIR`` runs ``--repeat`` times; each run prints its wall seconds and the CPU
seconds of the child process (user + system: what other work on a shared machine does not inflate).

Goal (issue 30): 100,000 skills within 60 s. Before this bench, 5,000 took 5.3 s and 100,000 did not
finish in 60 s; a profile put ≈ 75 % of the time in PyYAML's pure-Python scanner composing each
frontmatter. ``skillreach._io.yaml.load_limited`` now composes with libyaml (C) and checks its limits on
the composed tree (a node reached twice is an alias; too many nodes, too deep), falling back to the
pure-Python loader only to word an error: 20,000 skills went from 91 s to 11 s of profiled CPU.
Round 3: the common frontmatter without a parser (``load_simple``), no ``realpath`` per file, the
files checked in forked processes: 100,000 skills 15.0 s → 5.8–6.3 s of CPU (DEVELOPERS.md).

    .venv/bin/python bench/lint.py [--skills 100000] [--repeat 1] [--seed 0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _calibrate import load, verdict

GOAL_S = 60.0


def write_catalog(root: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(5_000)]
    for i in range(n):
        name = f"{rng.choice(words)}-{i:06d}"
        folder = root / name
        folder.mkdir(parents=True)
        desc = " ".join(rng.choices(words, k=rng.randint(10, 40)))
        extra = ""
        if i % 3 == 0:
            extra = (
                "allowed-tools:\n  - Read\n  - Grep\n  - Bash\n"
                f"metadata:\n  owner: team-{i % 17}\n  version: 1.{i % 9}\n"
            )
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Use when the user asks to {desc}.\n{extra}---\n\n"
            f"# {name}\n\nSteps for {desc}.\n",
            encoding="utf-8",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skills", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="write (or reuse) the catalog here")
    args = parser.parse_args()
    exe = Path(sys.executable).with_name("skillreach")
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp) / "skills"
        if not root.exists():
            start = time.perf_counter()
            write_catalog(root, args.skills, args.seed)
            print(f"wrote {args.skills:,} skills in {time.perf_counter() - start:.1f} s under {root}")
        best = float("inf")
        for run in range(1, args.repeat + 1):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(
                [str(exe), "lint", str(root)],
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "NO_COLOR": "1"},
            )
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            last = (proc.stdout.strip().splitlines() or [""])[-1]
            print(f"run {run}: lint of {args.skills:,} skills: {wall:.1f} s wall, {cpu:.1f} s CPU; "
                  f"exit {proc.returncode}: {last}")
            best = min(best, wall)
        print(load())
        print(verdict(f"lint of {args.skills:,} skills (wall)", best, GOAL_S, " s"))


if __name__ == "__main__":
    main()
