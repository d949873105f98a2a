"""What ``check --changed`` pays for a pull request, beside a full study of the branch.

The team repository of the merge-gate tests (26 real public skills from ../shared/corpora, 38
hand-written queries, 8 positive cases for each of four gated skills, the ``keyword`` runtime), its
baselines recorded with ``baseline record --all --commit``, and the pull request that broadens
canvas-design's description over algorithmic-art's work. In a fresh clone of that branch, as CI runs it:
a full study of the branch, then ``check --changed`` with ``--scope all`` and ``--scope neighbours``,
each with and without ``--staged``. Probes are counted from each run's ``probes.jsonl``.

Goals: ``--scope all`` never more than the full study (each query probed once for every skill);
``--scope neighbours --staged`` at most 0.6 of it.

    .venv/bin/python bench/merge_gate.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.merge_gate import (
    STEAL,
    corpora_present,
    edit_description,
    git,
    make_team_repo,
    skillreach,
)


def probes(folder: Path) -> int:
    path = folder / "probes.jsonl"
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def main() -> int:
    if not corpora_present():
        print("skipped: ../shared/corpora is not present")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-merge-gate-") as tmp:
        root = Path(tmp)
        team = make_team_repo(root)
        for args in (
            ("run", "--skills", "skills", "--queries", "evals/queries.yaml", "--runtime", "keyword",
             "--out", "runs/base"),
            ("baseline", "record", "--artifact", "runs/base/artifact.json", "--all", "--commit"),
        ):
            done = skillreach(team, *args)
            if done.returncode != 0:
                print(done.stdout + done.stderr)
                return 1
        git(team, "checkout", "-q", "-b", "steal")
        edit_description(team / "skills" / "canvas-design" / "SKILL.md", STEAL)
        git(team, "commit", "-q", "-am", "canvas-design: cover generative art too")
        git(team, "checkout", "-q", "main")
        git(root, "clone", "-q", str(team), "ci")
        ci = root / "ci"
        git(ci, "checkout", "-q", "steal")
        rows: list[tuple[str, int, float, int]] = []
        started = time.perf_counter()
        full = skillreach(ci, "run", "--skills", "skills", "--queries", "evals/queries.yaml", "--runtime",
                          "keyword", "--out", "runs/full")
        rows.append(("full study of the branch", probes(ci / "runs" / "full"),
                     time.perf_counter() - started, full.returncode))
        for scope in ("all", "neighbours"):
            for staged in (False, True):
                out = ci / ".skillreach" / f"check-{scope}{'-staged' if staged else ''}"
                args = ["check", "--changed", "--since", "origin/main", "--skills", "skills", "--in-process",
                        "--scope", scope, "--out", str(out)] + (["--staged"] if staged else [])
                started = time.perf_counter()
                res = skillreach(ci, *args)
                label = f"check --scope {scope}" + (" --staged" if staged else "")
                rows.append((label, probes(out), time.perf_counter() - started, res.returncode))
        base = rows[0][1]
        print(f"{'what':36} {'probes':>7} {'× full':>7} {'wall s':>7} {'exit':>5}")
        for label, n, wall, code in rows:
            print(f"{label:36} {n:7d} {n / base:7.2f} {wall:7.1f} {code:5d}")
        by = {label: n for label, n, _, _ in rows}
        all_ok = by["check --scope all"] <= base and by["check --scope all --staged"] <= base
        near = by["check --scope neighbours --staged"] / base
        print(f"--scope all ≤ the full study: {'met' if all_ok else 'NOT met'}")
        print(f"--scope neighbours --staged ≤ 0.6 of it: {'met' if near <= 0.6 else 'NOT met'} ({near:.2f})")
        gated = all(code == 1 for _, _, _, code in rows[1:])
        print(f"every check failed the pull request (exit 1): {'yes' if gated else 'NO'}")
        return 0 if all_ok and near <= 0.6 and gated else 1


if __name__ == "__main__":
    raise SystemExit(main())
