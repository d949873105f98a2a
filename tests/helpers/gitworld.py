"""The flow tests' small world (tests/helpers/world.py) in a git repository of its own, for the service's
baselines branch."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.helpers.world import make_queries, make_skills, script

__all__ = ["BRANCH", "git", "git_world", "on_branch"]

BRANCH = "skillreach/baselines"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def git_world(root: Path) -> dict[str, Path]:
    """Three skills, 13 queries, the fake runtime's script and a home for the store, committed in
    ``root`` (the store, the run folders and the script stay out of git)."""
    world = {
        "skills": make_skills(root / "skills"),
        "queries": make_queries(root / "queries.json"),
        "good": script(root / "good.json"),
        "home": root / "home",
        "root": root,
    }
    (root / ".gitignore").write_text("home/\nruns/\n/good.json\n/script*.json\n/r*/\n/n*/\n/w*/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "team@example.invalid")
    git(root, "config", "user.name", "Team")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "skills and queries")
    return world


def on_branch(repo: Path) -> list[str]:
    return sorted(git(repo, "ls-tree", "-r", "--name-only", BRANCH, "baselines").splitlines())
