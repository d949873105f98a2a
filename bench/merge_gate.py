"""What ``check --changed`` pays for a pull request, beside a full study, and whether it misses a victim.

The team repository of ``tests/test_pr_gate.py`` (26 real public skills from ../shared/corpora, 48 sealed
hand-written queries, five positive cases for each of eight gated skills, the ``keyword`` runtime), its
baselines recorded with ``baseline record --all --commit``. Every pull request is checked in a fresh clone
of its branch, as CI runs it, with the default scope (what the change can reach); probes are counted from
the check's ``probes.jsonl`` and set beside a full study of the set (48 probes).

- **benign**: eight rewordings, one per gated skill (its description's sentences in reverse order: the
  same words) — goal: at most 0.3 of a full study's probes each, and every one passes;
- **steal**: the pull request of ``tests/test_pr_gate.py`` that takes two of five cases from each of two
  neighbours — goal: caught (exit 1) on at most 0.6 of a full study;
- **seeded steals**: 20 pull requests (seed 0…19): a random skill's description gains the words of one
  to three cases of a random gated skill. The victims are what a full study of the branch says lost a
  case its baseline won; the check must name every one (a victim line, or a significant take naming it)
  — goal: no victim missed.

    .venv/bin/python bench/merge_gate.py [--steals 20] [--seeds 7,18] [--staged]

``--staged`` runs every check with ``--staged`` (the same goals); ``--seeds`` runs only those seeded
steals.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.pr_gate import (
    CASES,
    GATED,
    STEAL_TWO_OF_FIVE,
    corpora_present,
    edit_description,
    git,
    make_repo,
    record_baselines,
    skillreach,
)

FULL = sum(len(v) for v in CASES.values()) + 8


def probes(folder: Path) -> int:
    path = folder / "probes.jsonl"
    return (
        sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
        if path.is_file()
        else 0
    )


def set_description(md: Path, description: str) -> None:
    """Rewrite the frontmatter with another description (any YAML form the file used: block scalars too)."""
    import yaml

    text = md.read_text(encoding="utf-8")
    _, front, body = text.split("---", 2)
    data = yaml.safe_load(front)
    data["description"] = description
    dumped = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100_000)
    md.write_text(f"---\n{dumped}---{body}", encoding="utf-8")


def description_of(md: Path) -> str:
    from skillreach.skills.discovery import read_frontmatter

    return str(read_frontmatter(md).data["description"])


def pull_request(team: Path, root: Path, name: str, edit: object) -> Path:
    git(team, "checkout", "-q", "-f", "-B", name, "main")
    edit(team)  # type: ignore[operator]
    git(team, "commit", "-q", "-am", name)
    git(team, "checkout", "-q", "-f", "main")
    git(root, "clone", "-q", str(team), name)
    clone = root / name
    git(clone, "checkout", "-q", name)
    return clone


STAGED: list[str] = []
"""``["--staged"]`` when the bench runs every check staged (``--staged``)."""


def check(clone: Path) -> tuple[int, int, dict[str, object], float]:
    """(exit code, probes, the --json payload, wall seconds) of ``check --changed`` in ``clone``."""
    started = time.perf_counter()
    res = skillreach(clone, "check", "--changed", "--skills", "skills", "--in-process", "--json", *STAGED)
    wall = time.perf_counter() - started
    payload = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {"results": []}
    return res.returncode, probes(clone / ".skillreach" / "check"), payload, wall


def named_victims(payload: dict[str, object]) -> set[str]:
    """Skills the check names as losing cases: victim lines, and the victims of a significant take."""
    out: set[str] = set()
    for r in payload.get("results", []):  # type: ignore[union-attr]
        if r.get("victim"):
            out.add(r["skill"])
        if r.get("status") == "takes":
            out |= set(r["take"]["taken"])
    return out


def true_victims(team_base: Path, clone: Path) -> set[str]:
    """Gated skills a full study of the branch shows losing a case their base study won."""
    res = skillreach(
        clone,
        "run",
        "--skills",
        "skills",
        "--queries",
        "evals/queries.json",
        "--runtime",
        "keyword",
        "--out",
        "runs/full",
    )
    assert res.returncode == 0, res.stdout + res.stderr

    def won(artifact: Path) -> dict[str, bool]:
        rows = json.loads(artifact.read_text(encoding="utf-8"))["outcomes"]
        return {r["query_id"]: r["predicted"] == r["truth"] for r in rows if r["truth"] in GATED}

    before, after = (
        won(team_base / "runs" / "base" / "artifact.json"),
        won(clone / "runs" / "full" / "artifact.json"),
    )
    return {re.sub(r"-\d+$", "", q) for q, ok in before.items() if ok and not after.get(q, False)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steals", type=int, default=20)
    parser.add_argument(
        "--seeds", default="", help="only these seeded steals (comma-separated, e.g. 7,18): nothing else"
    )
    parser.add_argument(
        "--staged",
        action="store_true",
        help="every check with --staged (the screen, then the rest when it moves)",
    )
    args = parser.parse_args()
    if args.staged:
        STAGED.append("--staged")
    only = [int(s) for s in args.seeds.split(",") if s.strip()]
    if not corpora_present():
        print("skipped: ../shared/corpora is not present")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-merge-gate-") as tmp:
        root = Path(tmp)
        team = make_repo(root / "main")
        record_baselines(team)
        print(f"full study of the set: {FULL} probes; checks {'staged' if STAGED else 'fixed'}\n")
        print(f"{'pull request':44} {'probes':>6} {'× full':>7} {'exit':>5} {'wall s':>7}")
        benign: list[float] = []
        benign_ok = True
        for skill in [] if only else GATED:
            md_rel = Path("skills") / skill / "SKILL.md"

            def reword(repo: Path, md_rel: Path = md_rel) -> None:
                md = repo / md_rel
                parts = [p.strip() for p in re.split(r"(?<=[.!?])\s+", description_of(md)) if p.strip()]
                text = " ".join(reversed(parts)) if len(parts) > 1 else parts[0].rstrip(".") + ", always."
                set_description(md, text)

            clone = pull_request(team, root, f"reword-{skill}", reword)
            code, n, _, wall = check(clone)
            benign.append(n / FULL)
            benign_ok &= code == 0
            print(f"{'benign rewording of ' + skill:44} {n:6d} {n / FULL:7.2f} {code:5d} {wall:7.1f}")
        steal_n, steal_caught = FULL, False
        if only:
            print("(--seeds: the benign rewordings and the steal are not run)")
        else:
            clone = pull_request(
                team,
                root,
                "steal",
                lambda r: edit_description(r / "skills" / "canvas-design" / "SKILL.md", STEAL_TWO_OF_FIVE),
            )
            code, steal_n, _, wall = check(clone)
            steal_caught = code == 1
            print(
                f"{'steal: 2 of 5 from each of two neighbours':44} {steal_n:6d} {steal_n / FULL:7.2f} "
                f"{code:5d} {wall:7.1f}"
            )
        skills = sorted(p.name for p in (team / "skills").iterdir() if (p / "SKILL.md").is_file())
        missed: list[str] = []
        seeded_probes: list[float] = []
        found = total = false_alarms = 0
        for seed in only or range(args.steals):
            rng = random.Random(seed)
            victim = rng.choice(GATED)
            thief = rng.choice([s for s in skills if s != victim])
            taken = rng.sample(CASES[victim], rng.randint(1, 3))

            def steal(repo: Path, thief: str = thief, taken: list[str] = taken) -> None:
                md = repo / "skills" / thief / "SKILL.md"
                set_description(md, description_of(md).rstrip() + " Also " + "; ".join(taken) + ".")

            clone = pull_request(team, root, f"seeded-{seed}", steal)
            code, n, payload, wall = check(clone)
            truth = true_victims(team, clone)
            named = named_victims(payload)
            seeded_probes.append(n / FULL)
            found += len(truth & named)
            total += len(truth)
            missed += [f"seed {seed}: {v}" for v in sorted(truth - named)]
            label = f"seeded {seed}: {thief} ← {len(taken)} of {victim}"
            print(
                f"{label[:44]:44} {n:6d} {n / FULL:7.2f} {code:5d} {wall:7.1f}   victims {sorted(truth)}, "
                f"named {sorted(named)}"
            )
            if code != 0 and not truth:  # a failure with no victim: say what failed
                false_alarms += 1
                for r in payload.get("results", []):  # type: ignore[union-attr]
                    if r.get("status") not in ("ok", "n/a", "added"):
                        print(f"    {r.get('skill')}: {r.get('status')} {r.get('message') or ''}".rstrip())
        worst_benign = max(benign, default=0.0)
        print()
        print(
            f"benign: {len(benign)} rewordings, probes {min(benign, default=0.0):.2f}–{worst_benign:.2f} of "
            f"a full study (mean {sum(benign) / max(1, len(benign)):.2f}); all passed: "
            f"{'yes' if benign_ok else 'NO'}; "
            f"goal ≤ 0.3: {'met' if worst_benign <= 0.3 and benign_ok else 'NOT met'}"
        )
        print(
            f"steal caught: {'yes' if steal_caught else 'NO'} with {steal_n / FULL:.2f} of a full study; "
            f"goal ≤ 0.6: {'met' if steal_caught and steal_n / FULL <= 0.6 else 'NOT met'}"
        )
        print(
            f"seeded steals: {len(only) or args.steals}, victims {total}, named {found} (recall "
            f"{found / total if total else 1.0:.2f}), probes {min(seeded_probes):.2f}–"
            f"{max(seeded_probes):.2f} of a full study; missed: {', '.join(missed) or 'none'}; failed with "
            f"no victim: {false_alarms}"
        )
        ok = worst_benign <= 0.3 and benign_ok and steal_caught and steal_n / FULL <= 0.6 and not missed
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
