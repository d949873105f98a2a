"""The pull requests a team sends to a repository of real public skills, for ``tests/test_pr_gate.py`` and
``bench/merge_gate.py``: the 26 skills of ``tests/helpers/merge_gate.py`` (Anthropic's and
obra/superpowers), a hand-written query set (the texts are ours) of five positive cases for each of eight
skills and eight out-of-scope ones, sealed into ``evals/queries.json`` as ``skillreach init`` sets a
repository up, baselines recorded from it with the ``keyword`` runtime — and the edits of each pull
request."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.helpers import hang
from tests.helpers.merge_gate import CORPORA, SOURCES, corpora_present, edit_description, git, skillreach

__all__ = [
    "ADDED_OVERLAP",
    "ADDED_QUIET",
    "BENIGN",
    "CASES",
    "GATED",
    "RELEASE",
    "STEAL_TWO_OF_FIVE",
    "BodyFollower",
    "add_skill",
    "corpora_present",
    "edit_description",
    "git",
    "make_release_repo",
    "make_repo",
    "query_yaml",
    "record_baselines",
    "release_skill",
    "release_yaml",
    "reseal",
    "skillreach",
]

CASES: dict[str, list[str]] = {
    "algorithmic-art": [
        "generative art with p5.js and flow fields",
        "a particle systems sketch with seeded randomness",
        "algorithmic art from noise fields, rendered in p5.js",
        "generative art for the museum exhibition wall",
        "generative art prints for the exhibition catalogue",
    ],
    "brand-guidelines": [
        "apply our brand colors to this slide",
        "does this flyer follow the company design standards",
        "use the official typography and brand colors for the report",
        "the conference badge must follow our style guidelines",
        "the visual formatting of the conference badge must follow the style guidelines",
    ],
    "canvas-design": [
        "design a poster for our conference and save it as a png",
        "create a static poster design as a pdf",
        "make a piece of visual art as a .png",
        "a poster shaped by a design philosophy",
        "a static visual design for the lobby screen, pdf output",
    ],
    "slack-gif-creator": [
        "make me a gif of a cat dancing for slack",
        "an animated gif for our slack channel",
        "a looping emoji gif sized for slack",
        "animate our logo spinning as a slack gif",
        "a celebration gif for slack when the build passes",
    ],
    "theme-factory": [
        "style these slides with one of the preset themes",
        "apply a theme with new colors and fonts to the landing page",
        "generate a new theme on the fly for the report",
        "which pre-set theme fits our quarterly docs",
        "give the html landing page a coherent theme",
    ],
    "systematic-debugging": [
        "there is a bug: a test failure started after the upgrade",
        "unexpected behavior in the parser; find the cause before proposing fixes",
        "a test failure I cannot explain",
        "unexpected behavior when the cache expires",
        "help me with an unexpected behavior that crashes the worker",
    ],
    "test-driven-development": [
        "implementing a feature for CSV export, before writing implementation code",
        "before writing implementation code for the new parser, what comes first",
        "implementing the login feature the disciplined way",
        "new feature: rate limiting, implementing it from tests",
        "implementing a bugfix for the date parsing",
    ],
    "mcp-builder": [
        "build an mcp server for our ticketing api",
        "a fastmcp server in python for the weather service",
        "expose our external api to llms through mcp tools",
        "an mcp sdk server in typescript for github issues",
        "design the tools of an mcp server for the crm",
    ],
}
OUT_OF_SCOPE = [
    "what is the weather tomorrow in Lisbon",
    "translate this sentence into French",
    "book a table for two on Friday",
    "what time zone is Tokyo in",
    "convert 12 miles to kilometres",
    "who won the match last night",
    "recommend a novel for the holidays",
    "how many days until new year",
]
GATED = tuple(CASES)

BENIGN = (
    "description: Create beautiful visual art in .png and .pdf documents, guided by a design philosophy. Use "
    "this skill when the user asks to create a poster, a piece of art, a design, or another static piece. "
    "Create original visual designs, never copying existing artists' work."
)
"""canvas-design's description reworded: the same claims, the same words, in other order."""
STEAL_TWO_OF_FIVE = (
    " Also museum exhibition wall pieces and exhibition catalogue art, conference badge designs and badges"
    " that follow style guidelines."
)
"""What a pull request adds to canvas-design's description: two of algorithmic-art's five cases (the
exhibition) and two of brand-guidelines' five (the conference badge)."""
ADDED_QUIET = (
    "p5-classroom",
    "Lesson plans for teaching first programming steps to schoolchildren: bouncing balls, simple "
    "shapes and a first loop, explained for a classroom.",
    [
        "a lesson plan with bouncing balls for my classroom",
        "teaching schoolchildren a first loop with simple shapes",
        "first programming steps explained for a classroom of schoolchildren",
    ],
)
"""A skill a pull request adds next to algorithmic-art's work that takes none of its cases."""
ADDED_OVERLAP = (
    "p5-classroom",
    "Generative art with p5.js in the classroom: flow fields, particle systems, seeded randomness, noise "
    "fields and generative art series, explained for schoolchildren.",
    ADDED_QUIET[2],
)
"""The same skill described over algorithmic-art's work: it takes its cases."""


def query_yaml(
    cases: dict[str, list[str]] | None = None,
    *,
    relabel: dict[str, str] | None = None,
    extra: Sequence[tuple[str, str, str | None]] = (),
) -> str:
    """The hand-written set (YAML): ids ``<skill>-<n>`` and ``oos-<n>``; ``relabel``: id → another expected
    skill; ``extra``: (id, text, expected skill) added at the end."""
    relabel = relabel or {}
    lines = ["queries:"]

    def add(qid: str, text: str, expected: str | None) -> None:
        expected = relabel.get(qid, expected)
        kind = "implicit" if expected else "out_of_scope"
        lines.extend(
            [
                f"  - id: {qid}",
                f"    text: {json.dumps(text)}",
                f"    expected_skill: {expected or 'null'}",
                f"    kind: {kind}",
            ]
        )

    for skill, texts in (cases or CASES).items():
        for i, text in enumerate(texts, 1):
            add(f"{skill}-{i}", text, skill)
    for i, text in enumerate(OUT_OF_SCOPE, 1):
        add(f"oos-{i}", text, None)
    for qid, text, expected in extra:
        add(qid, text, expected)
    return "\n".join(lines) + "\n"


def reseal(repo: Path) -> None:
    """``evals/queries.yaml`` sealed into ``evals/queries.json``, as the README's adoption steps do."""
    done = skillreach(
        repo, "queries", "seal", "evals/queries.yaml", "--skills", "skills", "--out", "evals/queries.json"
    )
    assert done.returncode == 0, done.stdout + done.stderr


def make_repo(root: Path) -> Path:
    """The team's repository on ``main``: skills, ``evals/queries.yaml`` and its sealed ``queries.json``."""
    repo = root / "team"
    skills = repo / "skills"
    skills.mkdir(parents=True)
    for source in SOURCES:
        for folder in sorted((CORPORA / source).iterdir()):
            if (folder / "SKILL.md").is_file():
                shutil.copytree(folder, skills / folder.name)
    (repo / "evals").mkdir()
    (repo / "evals" / "queries.yaml").write_text(query_yaml(), encoding="utf-8")
    (repo / ".gitignore").write_text("runs/\n.skillreach/\n", encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    reseal(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "skills and their query set")
    return repo


def record_baselines(repo: Path) -> None:
    """A study of the sealed set (``keyword``) and every skill's baseline, committed in one commit."""
    for args in (
        (
            "run",
            "--skills",
            "skills",
            "--queries",
            "evals/queries.json",
            "--runtime",
            "keyword",
            "--out",
            "runs/base",
        ),
        ("baseline", "record", "--artifact", "runs/base/artifact.json", "--all", "--commit"),
    ):
        done = skillreach(repo, *args)
        assert done.returncode == 0, done.stdout + done.stderr


def add_skill(repo: Path, name: str, description: str, body: str = "") -> None:
    folder = repo / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    front = f"name: {name}\ndescription: {json.dumps(description)}\n"
    (folder / "SKILL.md").write_text(f"---\n{front}---\n\n# {name}\n\n{body}\n", encoding="utf-8")


def skillreach_bin() -> Path:
    return Path(sys.executable).with_name("skillreach")


def run(args: Sequence[str], cwd: Path) -> hang.Outcome:
    return hang.finish(list(args), limit_s=600, cwd=cwd)


# -- the compliance story: a broadened description over a grown corpus ------------------------------

RELEASE = "release-notes"
NARROW = "Write the release notes of a version from the git history of the repository."
BROAD = NARROW + " Also the changelog entry of a hotfix or a patch release."
RULE_RELEASE = "- If the request mentions a release: run `git log --oneline` first and group the commits."
RULE_HOTFIX = "- If the request mentions a hotfix: run `git tag --contains HEAD` first to find the tag."
RELEASE_CASES = [
    "write the release notes for version 2.3",
    "release notes of the 1.0 release, please",
    "draft the release notes for our next release",
    "what goes into the release notes of version 4.1",
    "prepare the release notes of the spring release",
    "the release notes for release 3.2.0",
    "summarise the git history as release notes for the release",
    "release notes for the mobile app release",
    "write notes for the 0.9 release of the cli",
]
HOTFIX_CASES = [
    "the changelog entry of the hotfix for the login bug",
    "write a changelog entry for this hotfix",
    "changelog of the hotfix we shipped last night",
    "a changelog entry for the security hotfix",
    "hotfix 2.3.1 needs its changelog entry",
    "changelog entry of a hotfix to the payment service",
]


def release_yaml(*, grown: bool) -> str:
    """The compliance story's cases: the release cases (``git log`` required), and — ``grown`` — the
    hotfix cases a broadened description brings (``git tag`` required), and two out of scope."""
    lines = ["queries:"]

    def add(qid: str, text: str, expected: str | None, command: str | None) -> None:
        lines.extend(
            [
                f"  - id: {qid}",
                f"    text: {json.dumps(text)}",
                f"    expected_skill: {expected or 'null'}",
                f"    kind: {'implicit' if expected else 'out_of_scope'}",
            ]
        )
        if command:
            lines.extend(
                [
                    "    checks:",
                    "      requires:",
                    "        - tool: Bash",
                    f"          pattern: {json.dumps(command)}",
                ]
            )

    for i, text in enumerate(RELEASE_CASES, 1):
        add(f"release-{i}", text, RELEASE, "git log")
    for i, text in enumerate(HOTFIX_CASES if grown else [], 1):
        add(f"hotfix-{i}", text, RELEASE, "git tag")
    add("oos-1", "what is the weather tomorrow in Lisbon", None, None)
    add("oos-2", "book a table for two on Friday", None, None)
    return "\n".join(lines) + "\n"


def release_skill(repo: Path, *, broad: bool, hotfix_rule: bool) -> None:
    rules = [RULE_RELEASE] + ([RULE_HOTFIX] if hotfix_rule else [])
    add_skill(repo, RELEASE, BROAD if broad else NARROW, "\n".join(rules))


def make_release_repo(root: Path) -> Path:
    """A repository of ``release-notes`` (ours) beside two real public skills, its sealed query set."""
    repo = root / "team"
    (repo / "skills").mkdir(parents=True)
    for name in ("canvas-design", "systematic-debugging"):
        source = next(CORPORA / s / name for s in SOURCES if (CORPORA / s / name / "SKILL.md").is_file())
        shutil.copytree(source, repo / "skills" / name)
    release_skill(repo, broad=False, hotfix_rule=False)
    (repo / "evals").mkdir()
    (repo / "evals" / "queries.yaml").write_text(release_yaml(grown=False), encoding="utf-8")
    (repo / ".gitignore").write_text("runs/\n.skillreach/\n", encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    reseal(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "release-notes and its cases")
    return repo


class BodyFollower:
    """A model behind the Messages API stand-in that reads what it is shown: it loads the listed skill whose
    name and description share the most words with the request (two at least; a skill named outright
    wins), then does what the loaded body says — each ``If the request mentions X: run `CMD``` rule whose
    X the request mentions becomes a ``Bash`` call — and ends with a short answer. So compliance follows
    the body: a branch the body lacks is a rule the agent cannot follow."""

    _LISTED = re.compile(r"^- ([a-z0-9-]+): (.*)$", re.M)
    _RULE = re.compile(r"If the request mentions (?:an? |the )?(\w+)[^:\n]*: run `([^`]+)`")

    def __call__(self, body: dict[str, Any]) -> Any:
        from skillreach.skills.bm25 import tokenize
        from tests.fakes.messages_api import query_text, skill_call, text_reply, tool_call, tool_results

        text = query_text(body)
        results = tool_results(body)
        if not results:
            tools = body.get("tools") or []
            listing = next((t.get("description", "") for t in tools if t.get("name") == "Skill"), "")
            skills = dict(self._LISTED.findall(listing))
            named = [n for n in skills if n in text]
            if named:
                return [skill_call(max(named, key=len))]
            words = set(tokenize(text))
            scored = sorted((-len(words & set(tokenize(f"{n} {d}"))), n) for n, d in skills.items())
            if scored and -scored[0][0] >= 2:
                return [skill_call(scored[0][1])]
            return text_reply("No skill fits; answering directly.")
        last = body["messages"][-2] if len(body["messages"]) >= 2 else {}
        loaded = [
            b
            for b in last.get("content") or []
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == "Skill"
        ]
        if loaded:
            shown = "\n".join(str(r.get("content")) for r in results)
            calls = [
                tool_call("Bash", {"command": cmd})
                for word, cmd in self._RULE.findall(shown)
                if word.lower() in text.lower()
            ]
            if calls:
                return calls
        return text_reply("Done.")
