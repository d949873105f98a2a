"""A team's skills repository, as the merge-gate tests and ``bench/merge_gate.py`` use it: 26 real public
skills from ``../shared/corpora`` (Anthropic's and obra/superpowers, Apache-2.0 and MIT), a hand-written
query set of 38 queries (8 positive cases for each of four gated skills; the texts are ours), the
``keyword`` runtime (offline, deterministic) — and the pull requests a team sends."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.conftest import SHARED
from tests.helpers import hang

CORPORA = SHARED / "corpora"
SOURCES = ("anthropics__skills", "obra__superpowers")
GATED = ("algorithmic-art", "canvas-design", "systematic-debugging", "test-driven-development")

QUERIES: dict[str, list[str]] = {
    "algorithmic-art": [
        "generative art with p5.js and flow fields",
        "make a particle systems sketch with seeded randomness",
        "code some generative art: flow fields drawn in p5.js",
        "generative art with interactive parameter exploration",
        "an animation of particle systems driven by seeded randomness",
        "write p5.js code that draws a flow field",
        "generative art where I can explore the parameters interactively",
        "a p5.js sketch of particle systems with seeded randomness",
    ],
    "canvas-design": [
        "design a poster for our conference and save it as a png",
        "create a static poster design as a pdf",
        "make a piece of visual art as a .png",
        "a poster shaped by a design philosophy",
        "a static visual design for the lobby screen, pdf output",
        "create a beautiful poster png",
        "visual art for a poster in a pdf document",
        "a static design piece for print as .pdf",
    ],
    "systematic-debugging": [
        "there is a bug: a test failure started after the upgrade",
        "unexpected behavior in the parser; find the cause before proposing fixes",
        "a test failure I cannot explain",
        "we hit a bug in production, investigate it before proposing fixes",
        "unexpected behavior when the cache expires",
        "this bug keeps coming back after every fix",
        "a test failure that happens in CI only",
        "help me with an unexpected behavior that crashes the worker",
    ],
    "test-driven-development": [
        "implementing a feature for CSV export, before writing implementation code",
        "before writing implementation code for the new parser, what comes first",
        "a bugfix: plan it before writing implementation code",
        "implementing the login feature the disciplined way",
        "new feature: rate limiting, implementing it from tests",
        "implementing any feature in this repo: how do we start",
        "implementing a bugfix for the date parsing",
        "implementing a feature flag system",
    ],
}
OUT_OF_SCOPE = [
    "what is the weather tomorrow in Lisbon",
    "translate this sentence into French",
    "book a table for two on Friday",
    "what time zone is Tokyo in",
    "convert 12 miles to kilometres",
    "who won the match last night",
]
STEAL = (
    " Also generative art in p5.js, generative art with flow fields, particle systems and seeded"
    " randomness; p5.js sketches of flow fields and particle systems with seeded randomness and"
    " interactive parameter exploration."
)
"""What the pull request adds to canvas-design's description: its neighbour's work."""


def corpora_present() -> bool:
    return all((CORPORA / s).is_dir() for s in SOURCES)


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "team",
        "GIT_AUTHOR_EMAIL": "team@example.invalid",
        "GIT_COMMITTER_NAME": "team",
        "GIT_COMMITTER_EMAIL": "team@example.invalid",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def query_set_yaml(extra: Sequence[tuple[str, str, str]] = ()) -> str:
    """The hand-written set (YAML), plus ``extra`` (id, text, expected skill)."""
    lines = ["queries:"]

    def add(qid: str, text: str, expected: str | None, kind: str) -> None:
        lines.append(f"  - id: {qid}")
        lines.append(f"    text: {json.dumps(text)}")
        lines.append(f"    expected_skill: {expected if expected else 'null'}")
        lines.append(f"    kind: {kind}")

    for skill, texts in QUERIES.items():
        for i, text in enumerate(texts, 1):
            add(f"{skill}-{i}", text, skill, "implicit")
    for i, text in enumerate(OUT_OF_SCOPE, 1):
        add(f"oos-{i}", text, None, "out_of_scope")
    for qid, text, expected in extra:
        add(qid, text, expected, "implicit")
    return "\n".join(lines) + "\n"


EXPORT_BUGS = [
    ("systematic-debugging-9", "the poster png we export has a bug", "systematic-debugging"),
    ("systematic-debugging-10", "a bug in the pdf export", "systematic-debugging"),
    ("systematic-debugging-11", "a bug in the png export", "systematic-debugging"),
    ("systematic-debugging-12", "a bug when we export a poster", "systematic-debugging"),
    ("systematic-debugging-13", "fix the bug in our png export", "systematic-debugging"),
    ("systematic-debugging-14", "a bug exporting png files", "systematic-debugging"),
]
"""Debugging cases about exported posters: the first is canvas-design's already on ``main`` (a confusion
pair, systematic-debugging → canvas-design, in the baseline records), the others are won by
systematic-debugging until canvas-design's description speaks of exports."""
EXPORTS = " When a poster export crashes, export again; exports, exporting."
"""What a pull request adds to canvas-design's description: words of systematic-debugging's export cases,
none of its description's (the two stay out of each other's BM25 rivals)."""


def make_team_repo(root: Path, extra: Sequence[tuple[str, str, str]] = ()) -> Path:
    """The team's repository on ``main``: skills and ``evals/queries.yaml`` (plus ``extra`` queries)."""
    repo = root / "team"
    skills = repo / "skills"
    skills.mkdir(parents=True)
    for source in SOURCES:
        for folder in sorted((CORPORA / source).iterdir()):
            if (folder / "SKILL.md").is_file():
                shutil.copytree(folder, skills / folder.name)
    (repo / "evals").mkdir()
    (repo / "evals" / "queries.yaml").write_text(query_set_yaml(extra), encoding="utf-8")
    (repo / ".gitignore").write_text("runs/\n.skillreach/\n", encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "skills and their query set")
    return repo


def skillreach(cwd: Path, *args: str, timeout: float = 300) -> hang.Outcome:
    """The command a user types (the installed entry point), in ``cwd``; ``timeout``: the CPU seconds
    and the seconds without progress after which it is judged hung (:mod:`tests.helpers.hang`)."""
    exe = Path(sys.executable).with_name("skillreach")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    return hang.finish([str(exe), *args], limit_s=timeout, cwd=cwd, env=env)


def edit_description(skill_md: Path, extra: str) -> None:
    """Append ``extra`` to the one-line ``description:`` of a SKILL.md."""
    text = skill_md.read_text(encoding="utf-8")
    lines = text.split("\n")
    i = next(n for n, line in enumerate(lines) if line.startswith("description:"))
    lines[i] = lines[i].rstrip() + extra
    skill_md.write_text("\n".join(lines), encoding="utf-8")
