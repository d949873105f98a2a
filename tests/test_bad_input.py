"""Hostile and broken input, through the command a user runs: no traceback, no hang, one line that names it.

Every case is a real ``.venv/bin/skillreach …`` process with a 30 s limit, run three at a time (the
whole file runs in a few minutes on two busy cores). Each asserts its exit code, that no output holds
a Python traceback, and that the message names what is wrong — the file, the line, the field, the
setting or the endpoint — on one ``skillreach: error:`` line (``lint`` reports its findings as a
table instead, one finding per line with the file and line, and exits 1).

Categories (the counts are asserted at the end of the file):

- ``skill``: SKILL.md files as an attacker or a careless author writes them (alias bombs, merge keys,
  NUL bytes, control characters, deep nesting, huge files, FIFOs, not UTF-8, …), through ``lint`` and
  ``overlap``;
- ``queries``: query sets (YAML/JSON/JSONL/CSV) through ``queries seal`` and ``queries verify``;
- ``config``: ``--config`` files through ``run``;
- ``flags``: options of ``run`` and ``check``;
- ``paths``: output and input paths (folders, missing parents outside the working folder, ``/proc``);
- ``env``: database URLs, ``SKILLREACH_HOME`` and other environment settings;
- ``artifacts``: probe logs and artifacts through ``score`` and ``report``;
- ``baselines``: tampered, empty-case, unsealed and unpaired baseline records through
  ``baseline compare|show``;
- ``signals``: Ctrl-C during a study.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from skillreach.baselines.records import (
    BaselineRecord,
    CaseCounts,
    CaseOutcomes,
    metric_value,
    write_baseline,
)
from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS
from skillreach.models import ProbeRecord
from skillreach.queries.sets import load_query_set
from skillreach.scoring import ProbeTable, score
from skillreach.scoring.artifact import write_artifact
from tests.helpers import hang

EXE = Path(sys.executable).with_name("skillreach")
LIMIT_S = 30.0
WORKERS = 3

# ------------------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One invocation: ``args`` after ``skillreach``; ``{w}`` in an argument is the world folder."""

    category: str
    name: str
    args: tuple[str, ...]
    code: int
    needles: tuple[str, ...] = ()
    """Must all appear in the error line (exit 2/3), else anywhere in the output."""
    env: dict[str, str] = field(default_factory=dict)
    interrupt_after_s: float | None = None


@dataclass
class Result:
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    hung: bool = False


W = "{w}"
EX_SKILLS = str(EXAMPLE_SKILLS)
EX_QUERIES = str(EXAMPLE_QUERIES)

# --------------------------------------------------------------------------------- SKILL.md files

GOOD = "---\nname: {name}\ndescription: {desc}\n---\n\n# {name}\n\nBody text.\n"


def _laughs(levels: int = 9) -> str:
    lines = ["name: bad", "description: fine words here for a description", 'a0: &a0 ["lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines)


def _deep(levels: int) -> str:
    return "name: bad\ndescription: a nested document\nx: " + "[" * levels + "1" + "]" * levels


# (variant, frontmatter-or-raw bytes, is the whole file raw?, lint exit, needles)
SKILL_VARIANTS: list[tuple[str, bytes, int, tuple[str, ...]]] = [
    (
        "alias-bomb",
        ("---\n" + _laughs() + "\n---\nbody\n").encode(),
        1,
        ("SKILL.md", "aliases are not allowed"),
    ),
    (
        "merge-key",
        b"---\nbase: &b {x: 1}\nname: bad\nmeta:\n  <<: *b\ndescription: merges a key\n---\nb\n",
        1,
        ("aliases are not allowed", "merge key"),
    ),
    ("nul-description", b"---\nname: bad\ndescription: bad\0words\n---\nbody\n", 1, ("NUL byte",)),
    ("nul-name", b"---\nname: b\0ad\ndescription: some words to describe\n---\nbody\n", 1, ("NUL byte",)),
    ("nul-body", b"---\nname: bad\ndescription: a body that holds a NUL\n---\nbo\0dy\n", 0, ()),
    (
        "esc-in-description",
        b"---\nname: bad\ndescription: \x1b[31mred\x1b[0m text\n---\nbody\n",
        1,
        ("control character",),
    ),
    (
        "bel-in-description",
        b"---\nname: bad\ndescription: ring \x07 the bell\n---\nbody\n",
        1,
        ("control character",),
    ),
    ("deep-nesting", ("---\n" + _deep(200) + "\n---\nbody\n").encode(), 1, ("nested more than",)),
    (
        "many-nodes",
        (
            "---\nname: bad\ndescription: many nodes here\nx: [" + ",".join(["1"] * 6000) + "]\n---\nb\n"
        ).encode(),
        1,
        ("YAML nodes",),
    ),
    (
        "huge-frontmatter",
        ("---\nname: bad\ndescription: big\npad: " + "x" * 70_000 + "\n---\nbody\n").encode(),
        1,
        ("bytes of YAML",),
    ),
    (
        "huge-file",
        b"---\nname: bad\ndescription: a huge body\n---\n" + b"y" * (5 * 2**20),
        1,
        ("larger than",),
    ),
    ("tab-indent", b"---\nname: bad\ndescription: x\n\tkey: v\n---\nbody\n", 1, ("invalid YAML",)),
    ("unclosed", b"---\nname: bad\ndescription: never closed\nbody\n", 1, ("SKILL.md",)),
    ("no-frontmatter", b"# just a heading\n\nno frontmatter at all\n", 0, ("no YAML frontmatter",)),
    ("empty-file", b"", 0, ("no YAML frontmatter",)),
    ("only-dashes", b"---\n---\n", 1, ("SKILL.md",)),
    ("list-frontmatter", b"---\n- a\n- b\n---\nbody\n", 1, ("SKILL.md",)),
    ("scalar-frontmatter", b"---\njust a string\n---\nbody\n", 1, ("SKILL.md",)),
    (
        "python-tag",
        b"---\nname: bad\ndescription: !!python/object:os.system [ls]\n---\nb\n",
        1,
        ("invalid YAML",),
    ),
    ("binary-tag", b"---\nname: bad\ndescription: !!binary aGVsbG8=\n---\nbody\n", 0, ("short-description",)),
    ("duplicate-key", b"---\nname: bad\ndescription: one\ndescription: two\n---\nb\n", 1, ("duplicate key",)),
    (
        "name-not-kebab",
        b"---\nname: Bad_Name\ndescription: a skill with a bad name\n---\nb\n",
        1,
        ("SKILL.md",),
    ),
    ("name-is-number", b"---\nname: 42\ndescription: a skill named by a number\n---\nb\n", 1, ("SKILL.md",)),
    ("name-traversal", b"---\nname: ../../etc\ndescription: tries to climb out\n---\nb\n", 1, ("SKILL.md",)),
    ("missing-description", b"---\nname: bad\n---\nbody\n", 1, ("description",)),
    ("description-list", b"---\nname: bad\ndescription: [a, b]\n---\nbody\n", 1, ("description",)),
    ("not-utf8", b"---\nname: bad\ndescription: caf\xe9 latin-1\n---\nbody\n", 1, ("UTF-8",)),
    ("utf16", "---\nname: bad\ndescription: sixteen bits wide\n---\nb\n".encode("utf-16"), 1, ("SKILL.md",)),
    (
        "crlf-is-fine",
        b"---\r\nname: bad\r\ndescription: windows line endings are fine here\r\n---\r\nb\r\n",
        0,
        (),
    ),
    (
        "bom-is-fine",
        b"\xef\xbb\xbf---\nname: bad\ndescription: a byte order mark is fine too\n---\nb\n",
        0,
        (),
    ),
]


OVERLAP_TOO = frozenset(
    {"alias-bomb", "merge-key", "nul-description", "deep-nesting", "many-nodes", "huge-file"}
)
"""The hostile variants also run through ``overlap`` (which skips a broken skill with a warning)."""


def _write_skills(root: Path, variant: str, raw: bytes) -> Path:
    folder = root / "skills" / variant
    for name, desc in (
        ("alpha-tool", "Formats alpha reports for weekly review."),
        ("beta-tool", "Builds beta dashboards."),
    ):
        (folder / name).mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(GOOD.format(name=name, desc=desc), encoding="utf-8")
    (folder / "bad").mkdir()
    (folder / "bad" / "SKILL.md").write_bytes(raw)
    return folder


def _special_skill_roots(root: Path) -> list[Case]:
    """SKILL.md as a folder, as a FIFO, a symlink loop; a skills root that is a file."""
    cases = []
    d = root / "skills" / "skill-md-is-folder"
    (d / "bad" / "SKILL.md").mkdir(parents=True)
    (d / "ok").mkdir()
    (d / "ok" / "SKILL.md").write_text(
        GOOD.format(name="ok", desc="A fine skill for tests."), encoding="utf-8"
    )
    cases.append(Case("skill", "lint-skill-md-is-folder", ("lint", str(d)), 0, ()))
    f = root / "skills" / "fifo"
    (f / "bad").mkdir(parents=True)
    os.mkfifo(f / "bad" / "SKILL.md")
    # discovery reads regular files only: a FIFO named SKILL.md is never opened (no hang)
    cases.append(Case("skill", "lint-skill-md-is-fifo", ("lint", str(f)), 2, ("no SKILL.md under", "fifo")))
    cases.append(Case("skill", "overlap-skill-md-is-fifo", ("overlap", str(f)), 2, ("no SKILL.md under",)))
    loop = root / "skills" / "loop"
    (loop / "real").mkdir(parents=True)
    (loop / "real" / "SKILL.md").write_text(
        GOOD.format(name="real", desc="A skill beside a loop."), encoding="utf-8"
    )
    (loop / "real" / "again").symlink_to(loop)
    cases.append(Case("skill", "lint-symlink-loop", ("lint", str(loop)), 0, ()))
    afile = root / "skills" / "a-file.txt"
    afile.write_text("not a folder", encoding="utf-8")
    cases.append(Case("skill", "lint-root-is-a-file", ("lint", str(afile)), 2, ("a-file.txt",)))
    cases.append(Case("skill", "lint-root-missing", ("lint", str(root / "nope")), 2, ("nope",)))
    cases.append(Case("skill", "overlap-root-missing", ("overlap", str(root / "nope")), 2, ("nope",)))
    return cases


# ----------------------------------------------------------------------------------------- queries

QUERY_FILES: dict[str, tuple[str, bytes, tuple[str, ...]]] = {
    # name: (file name, content, needles of seal's error)
    "alias-bomb": (
        "q.yaml",
        ("queries:\n" + "\n".join("  " + ln for ln in _laughs().splitlines())).encode(),
        ("q.yaml:", "aliases are not allowed"),
    ),
    "merge-key": (
        "q.yaml",
        b"base: &b {kind: implicit}\nqueries:\n  - id: a\n    text: hello there\n    <<: *b\n",
        ("q.yaml:5", "aliases are not allowed"),
    ),
    "nul-yaml": ("q.yaml", b"queries:\n  - id: a\n    text: he\0llo\n", ("q.yaml:3", "NUL byte")),
    "esc-yaml": ("q.yaml", b"queries:\n  - id: a\n    text: he\x1bllo\n", ("q.yaml:3", "control character")),
    "tab-yaml": ("q.yaml", b"queries:\n\t- id: a\n", ("q.yaml:2", "invalid YAML")),
    "deep-yaml": ("q.yaml", ("queries: " + "[" * 300 + "]" * 300 + "\n").encode(), ("q.yaml:1", "nested")),
    "dup-key-yaml": (
        "q.yaml",
        b"queries:\n  - id: a\n    text: one\n    text: two\n",
        ("q.yaml:4", "duplicate key"),
    ),
    "scalar-yaml": ("q.yaml", b"just words\n", ("q.yaml",)),
    "empty-yaml": ("q.yaml", b"", ("q.yaml",)),
    "bad-json": ("q.json", b'{"queries": [', ("q.json",)),
    "deep-json": ("q.json", b"[" * 100_000 + b"]" * 100_000, ("q.json",)),
    "dup-key-json": ("q.json", b'{"queries": [], "queries": []}', ("q.json", "queries")),
    "nul-json": ("q.json", b'{"queries": [{"id": "a", "text": "x\\u0000y"}]}', ("q.json",)),
    "json-number-root": ("q.json", b"42", ("q.json",)),
    "unknown-kind": (
        "q.json",
        json.dumps(
            {
                "queries": [
                    {"id": "a", "text": "deploy it", "expected_skill": "release-deploy", "kind": "weird"}
                ]
            }
        ).encode(),
        ("q.json", "kind"),
    ),
    "missing-text": (
        "q.json",
        json.dumps({"queries": [{"id": "a", "expected_skill": "release-deploy"}]}).encode(),
        ("q.json", "text"),
    ),
    "duplicate-id": (
        "q.json",
        json.dumps({"queries": [{"id": "a", "text": "one"}, {"id": "a", "text": "two"}]}).encode(),
        ("q.json", "'a'"),
    ),
    "unknown-skill": (
        "q.json",
        json.dumps({"queries": [{"id": "a", "text": "do it", "expected_skill": "no-such-skill"}]}).encode(),
        ("q.json", "no-such-skill"),
    ),
    "text-is-list": (
        "q.json",
        json.dumps({"queries": [{"id": "a", "text": ["x"]}]}).encode(),
        ("q.json", "text"),
    ),
    "jsonl-bad-line": ("q.jsonl", b'{"id": "a", "text": "ok"}\n{broken\n', ("q.jsonl:2",)),
    "csv-bad-header": ("q.csv", b"ident,words\n1,hello\n", ("q.csv",)),
    "csv-bad-checks": ("q.csv", b'id,text,checks\na,hello,"{not json"\n', ("q.csv", "checks")),
    "csv-nul": ("q.csv", b"id,text\na,hel\0lo\n", ("q.csv",)),
    "not-utf8": ("q.json", b'{"queries": [{"id": "a", "text": "caf\xe9"}]}', ("q.json", "UTF-8")),
    "unknown-suffix": ("q.txt", b"hello\n", ("q.txt",)),
}


# ------------------------------------------------------------------------------------------ config

CONFIGS: dict[str, tuple[str, bytes, tuple[str, ...]]] = {
    "alias-bomb": (
        "c.yaml",
        _laughs().replace("name: bad\ndescription: fine words here for a description\n", "").encode(),
        ("c.yaml:", "aliases are not allowed"),
    ),
    "merge-key": (
        "c.yaml",
        b"base: &b {attempts: 2}\ngates:\n  <<: *b\n",
        ("c.yaml:3", "aliases are not allowed"),
    ),
    "nul-yaml": ("c.yaml", b"attempts: 1\0\n", ("c.yaml:1", "NUL byte")),
    "nul-toml": ("c.toml", b"attempts = 1\0\n", ("c.toml:1", "NUL byte")),
    "flag-named-key": ("c.toml", b"budget = 5\n", ("c.toml", "budget", "listing_budget_chars")),
    "misspelt": ("c.yaml", b"attemps: 3\n", ("c.yaml", "attemps", "did you mean attempts")),
    "attempts-1e9": ("c.toml", b"attempts = 1e9\n", ("attempts", "max_probes")),
    "attempts-zero": ("c.toml", b"attempts = 0\n", ("c.toml", "attempts")),
    "attempts-word": ("c.yaml", b"attempts: many\n", ("c.yaml", "attempts")),
    "budget-negative": ("c.toml", b"listing_budget_chars = -3\n", ("c.toml", "listing_budget_chars")),
    "concurrency-zero": ("c.toml", b"concurrency = 0\n", ("c.toml", "concurrency")),
    "bad-toml": ("c.toml", b"runtime = \n", ("c.toml", "toml")),
    "bad-yaml": ("c.yaml", b"runtime: [unclosed\n", ("c.yaml", "invalid YAML")),
    "list-root": ("c.yaml", b"- a\n- b\n", ("c.yaml", "mapping")),
    "not-utf8": ("c.toml", b'runtime = "caf\xe9"\n', ("c.toml", "UTF-8")),
    "huge": ("c.toml", b"# " + b"x" * (2 * 2**20) + b"\n", ("c.toml", "bytes")),
    "deep-yaml": ("c.yaml", ("x: " + "[" * 300 + "]" * 300 + "\n").encode(), ("c.yaml:1", "nested")),
    "secret-option": ("c.yaml", b"runtime_options:\n  api_key: sk-123\n", ("api_key", "secret")),
    "unknown-runtime": ("c.toml", b'runtime = "nope"\n', ("nope",)),
    "bad-precedence": ("c.toml", b'skill_precedence = "middle"\n', ("c.toml", "skill_precedence")),
    "gates-unknown": ("c.toml", b"[gates]\nactivaton = -0.1\n", ("c.toml", "activaton")),
}


# --------------------------------------------------------------------------------------- the world


def _probes_lines(attempts: int = 1) -> list[str]:
    qs = load_query_set(EXAMPLE_QUERIES)
    lines = []
    for q in qs.queries:
        for a in range(1, attempts + 1):
            lines.append(
                ProbeRecord(
                    query_id=q.id,
                    attempt=a,
                    invoked=(q.expected_skill,) if q.expected_skill else (),
                    runtime="keyword",
                ).to_json_line()
            )
    return lines


def _record(per_case: dict[str, list[int]], bid: str, **pins: Any) -> BaselineRecord:
    cases = {
        k: CaseOutcomes(role="positive", kind="implicit", probes=len(v), activated=tuple(v))
        for k, v in per_case.items()
    }
    return BaselineRecord(
        baseline_id=bid,
        skill="deploy",
        created_at="2026-11-30T00:00:00Z",
        skill_version=pins.get("skill_version", "git:1111"),
        skill_version_origin="git",
        corpus_version=pins.get("corpus", "queries.json@sha256:" + "a" * 64),
        model=pins.get("model", "claude-sonnet-4-5-20250929"),
        runtime="anthropic",
        runs_per_case=max(len(v) for v in per_case.values()),
        cases=CaseCounts(positive=len(cases), negative=0),
        metrics={
            m: metric_value(cases, m)
            for m in ("activation", "false_activation", "compliance", "task_quality")
        },
        per_case=cases,
    )


def build_world(root: Path) -> list[Case]:
    (root / "out").mkdir()
    cases: list[Case] = []
    add = cases.append

    # skill
    for variant, raw, lint_code, needles in SKILL_VARIANTS:
        folder = _write_skills(root, variant, raw)
        file_needles = ("bad/SKILL.md", *needles) if needles else ()
        add(Case("skill", f"lint-{variant}", ("lint", str(folder)), lint_code, file_needles))
        if variant in OVERLAP_TOO:
            add(Case("skill", f"overlap-{variant}", ("overlap", str(folder), "--top", "2"), 0, ()))
    cases.extend(_special_skill_roots(root))

    # queries
    qdir = root / "queries"
    for name, (fname, raw, needles) in QUERY_FILES.items():
        path = qdir / name / fname
        path.parent.mkdir(parents=True)
        path.write_bytes(raw)
        add(
            Case(
                "queries",
                f"seal-{name}",
                (
                    "queries",
                    "seal",
                    str(path),
                    "--skills",
                    EX_SKILLS,
                    "--out",
                    str(path.parent / "sealed.json"),
                ),
                2,
                needles,
            )
        )
    sealed = json.loads(EXAMPLE_QUERIES.read_text(encoding="utf-8"))
    tampered = json.loads(json.dumps(sealed))
    tampered["queries"][3]["text"] = "something else entirely"
    (qdir / "tampered.json").write_text(json.dumps(tampered), encoding="utf-8")
    add(
        Case(
            "queries",
            "verify-tampered",
            ("queries", "verify", str(qdir / "tampered.json")),
            2,
            ("tampered.json", tampered["queries"][3]["id"]),
        )
    )
    nodigest = json.loads(json.dumps(sealed))
    nodigest.get("provenance", {}).pop("digest", None)
    (qdir / "nodigest.json").write_text(json.dumps(nodigest), encoding="utf-8")
    add(
        Case(
            "queries",
            "verify-no-digest",
            ("queries", "verify", str(qdir / "nodigest.json")),
            2,
            ("nodigest.json",),
        )
    )
    add(Case("queries", "verify-missing", ("queries", "verify", str(qdir / "none.json")), 2, ("none.json",)))
    add(
        Case(
            "queries",
            "verify-folder",
            ("queries", "verify", str(qdir)),
            2,
            ("a sealed query set is a .json",),
        )
    )
    os.mkfifo(qdir / "fifo.json")
    add(
        Case(
            "queries",
            "verify-fifo",
            ("queries", "verify", str(qdir / "fifo.json")),
            2,
            ("fifo.json", "not a regular file"),
        )
    )
    add(
        Case(
            "queries",
            "seal-out-missing-root",
            (
                "queries",
                "seal",
                str(EXAMPLE_QUERIES.with_suffix(".yaml")),
                "--out",
                "/nonexistent/dir/q.json",
            ),
            2,
            ("/nonexistent/dir", "--out"),
        )
    )
    add(
        Case(
            "queries",
            "seal-out-is-folder",
            ("queries", "seal", str(EXAMPLE_QUERIES.with_suffix(".yaml")), "--out", str(qdir)),
            2,
            ("is a folder", "--out"),
        )
    )
    add(
        Case(
            "queries",
            "import-unknown-format",
            (
                "queries",
                "import",
                str(qdir / "tampered.json"),
                "--format",
                "nope",
                "--out",
                str(qdir / "imp.json"),
            ),
            2,
            ("nope",),
        )
    )
    add(
        Case(
            "queries",
            "import-nul",
            (
                "queries",
                "import",
                str(qdir / "nul-json" / "q.json"),
                "--format",
                "auto",
                "--out",
                str(qdir / "imp.json"),
            ),
            2,
            ("q.json",),
        )
    )

    # config
    cdir = root / "config"
    for name, (fname, raw, needles) in CONFIGS.items():
        path = cdir / name / fname
        path.parent.mkdir(parents=True)
        path.write_bytes(raw)
        add(
            Case(
                "config",
                f"run-config-{name}",
                ("run", "--config", str(path), "--out", str(root / "out" / name)),
                2,
                needles,
            )
        )
    add(Case("config", "run-config-missing", ("run", "--config", str(cdir / "none.toml")), 2, ("none.toml",)))
    add(Case("config", "run-config-folder", ("run", "--config", str(cdir)), 2, (str(cdir),)))
    os.mkfifo(cdir / "fifo.toml")
    add(
        Case(
            "config",
            "compare-config-fifo",
            (
                "baseline",
                "compare",
                "{w}/baselines/base.json",
                "{w}/baselines/same.json",
                "--config",
                str(cdir / "fifo.toml"),
            ),
            2,
            ("fifo.toml", "not a regular file"),
        )
    )

    # flags
    out = str(root / "out" / "flags")
    for name, args, needles in (
        ("attempts-billion", ("--attempts", "1000000000"), ("1,000,000,000", "max_probes")),
        ("attempts-twenty-thousand", ("--attempts", "20000"), ("71 queries", "max_probes")),
        ("max-probes-small", ("--max-probes", "10"), ("71 planned probes", "max_probes 10")),
        ("max-probes-zero", ("--max-probes", "0"), ("--max-probes",)),
        ("attempts-zero", ("--attempts", "0"), ("--attempts",)),
        ("attempts-negative", ("--attempts", "-1"), ("--attempts",)),
        ("attempts-word", ("--attempts", "many"), ("--attempts",)),
        ("catalog-bogus", ("--catalog", "bogus"), ("--catalog bogus",)),
        ("runtime-bogus", ("--runtime", "bogus"), ("bogus",)),
        ("target-without-catalog", ("--target", "log-search"), ("--target log-search", "--catalog")),
        (
            "skills-missing",
            ("--skills", "/nonexistent/skills", "--queries", EX_QUERIES),
            ("/nonexistent/skills",),
        ),
        (
            "queries-missing",
            ("--skills", EX_SKILLS, "--queries", "/nonexistent/q.json"),
            ("/nonexistent/q.json",),
        ),
        ("skills-without-queries", ("--skills", EX_SKILLS), ("--queries",)),
        ("batch-keyword", ("--batch",), ("--batch", "keyword")),
        ("concurrency-zero", ("--concurrency", "0"), ("--concurrency",)),
        ("unknown-option", ("--atempts", "2"), ("--atempts",)),
        ("max-cost-word", ("--max-cost", "lots"), ("--max-cost",)),
    ):
        add(Case("flags", f"run-{name}", ("run", *args, "--out", out), 2, needles))
    add(Case("flags", "check-without-changed", ("check",), 2, ("--changed",)))
    add(
        Case(
            "flags",
            "check-strict-and-lenient",
            ("check", "--changed", "--strict", "--lenient"),
            2,
            ("--strict", "--lenient"),
        )
    )
    add(
        Case(
            "flags",
            "check-skills-missing",
            ("check", "--changed", "--skills", "/nonexistent/skills"),
            2,
            ("/nonexistent/skills",),
        )
    )
    add(Case("flags", "lint-budget-zero", ("lint", EX_SKILLS, "--budget", "0"), 2, ("--budget",)))
    add(Case("flags", "lint-bad-format", ("lint", EX_SKILLS, "--format", "xml"), 2, ("xml",)))
    add(Case("flags", "overlap-top-zero", ("overlap", EX_SKILLS, "--top", "0"), 2, ("--top",)))
    add(Case("flags", "unknown-command", ("frobnicate",), 2, ("frobnicate",)))

    # paths
    (root / "afile").write_text("x", encoding="utf-8")
    run_dir = root / "run"
    run_dir.mkdir()
    (run_dir / "probes.jsonl").write_text("\n".join(_probes_lines()) + "\n", encoding="utf-8")
    qs = load_query_set(EXAMPLE_QUERIES)
    write_artifact(
        score(qs, ProbeTable.from_lines((run_dir / "probes.jsonl").open("rb"), source="p")),
        run_dir / "artifact.json",
    )
    art = str(run_dir / "artifact.json")
    score_args = ("score", "--queries", EX_QUERIES, "--probes", str(run_dir / "probes.jsonl"), "-q")
    add(
        Case(
            "paths",
            "run-out-of-another-runtime",
            ("run", "--runtime", "fake", "--out", str(run_dir)),
            2,
            ("holds probes of runtime 'keyword'", "--force"),
        )
    )
    add(
        Case(
            "paths",
            "run-out-is-a-file",
            ("run", "--out", str(root / "afile")),
            2,
            ("afile", "not a folder", "--out"),
        )
    )
    add(
        Case(
            "paths",
            "run-out-under-a-file",
            ("run", "--out", str(root / "afile" / "x")),
            2,
            ("afile/x", "--out"),
        )
    )
    add(
        Case(
            "paths",
            "run-out-proc",
            ("run", "--out", "/proc/skillreach-x"),
            2,
            ("/proc/skillreach-x", "--out"),
        )
    )
    add(
        Case(
            "paths",
            "run-out-missing-root",
            ("run", "--out", "/nonexistent/dir/run"),
            2,
            ("/nonexistent/dir", "--out"),
        )
    )
    add(Case("paths", "score-out-trailing-slash", (*score_args, "--out", str(root / "scored") + "/"), 0, ()))
    add(
        Case(
            "paths",
            "score-out-missing-root",
            (*score_args, "--out", "/nonexistent/dir/a.json"),
            2,
            ("/nonexistent/dir", "--out"),
        )
    )
    add(Case("paths", "score-out-proc", (*score_args, "--out", "/proc/x/a.json"), 2, ("/proc/x", "--out")))
    add(
        Case(
            "paths",
            "score-out-under-a-file",
            (*score_args, "--out", str(root / "afile" / "a.json")),
            2,
            ("afile", "--out"),
        )
    )
    add(
        Case(
            "paths",
            "score-html-missing-root",
            (*score_args, "--out", str(root / "s2") + "/", "--html", "/nonexistent/dir/r.html"),
            2,
            ("/nonexistent/dir", "--html"),
        )
    )
    add(
        Case(
            "paths",
            "report-html-missing-root",
            ("report", art, "-q", "--html", "/nonexistent/dir/r.html"),
            2,
            ("/nonexistent/dir/r.html", "--html"),
        )
    )
    add(
        Case(
            "paths",
            "report-html-proc",
            ("report", art, "-q", "--html", "/proc/x/r.html"),
            2,
            ("/proc/x/r.html", "--html"),
        )
    )
    add(
        Case(
            "paths",
            "report-html-is-folder",
            ("report", art, "-q", "--html", str(root)),
            2,
            ("is a folder", "--html"),
        )
    )
    add(
        Case(
            "paths",
            "report-markdown-proc",
            ("report", art, "-q", "--markdown", "/proc/x.md"),
            2,
            ("/proc/x.md",),
        )
    )
    add(
        Case(
            "paths",
            "report-markdown-under-file",
            ("report", art, "-q", "--markdown", str(root / "afile" / "s.md")),
            2,
            ("afile", "--markdown"),
        )
    )
    add(
        Case(
            "paths",
            "record-out-missing-root",
            (
                "baseline",
                "record",
                "--artifact",
                art,
                "--skill",
                "log-search",
                "--queries",
                EX_QUERIES,
                "--skills",
                EX_SKILLS,
                "--out",
                "/nonexistent/dir/b.json",
            ),
            2,
            ("/nonexistent/dir", "--out"),
        )
    )

    # env
    env_cases = (
        (
            "database-url-garbage",
            {"SKILLREACH_DATABASE_URL": "garbage://///"},
            ("SKILLREACH_DATABASE_URL", "garbage"),
        ),
        (
            "database-url-mysql",
            {"SKILLREACH_DATABASE_URL": "mysql://u:p@127.0.0.1/db"},
            ("SKILLREACH_DATABASE_URL", "MySQLdb"),
        ),
        ("database-url-not-a-url", {"SKILLREACH_DATABASE_URL": "not a url"}, ("SKILLREACH_DATABASE_URL",)),
        (
            "database-url-sqlite-missing-root",
            {"SKILLREACH_DATABASE_URL": "sqlite:////nonexistent/dir/x.db"},
            ("/nonexistent/dir", "SKILLREACH_DATABASE_URL"),
        ),
        (
            "database-url-postgres-closed-port",
            {"SKILLREACH_DATABASE_URL": "postgresql+psycopg://u:secretpw@127.0.0.1:9/db"},
            ("cannot open the database", "127.0.0.1:9"),
        ),
        (
            "home-proc",
            {"SKILLREACH_HOME": "/proc/skillreach-home"},
            ("/proc/skillreach-home", "SKILLREACH_HOME"),
        ),
        ("home-is-a-file", {"SKILLREACH_HOME": str(root / "afile")}, ("afile", "SKILLREACH_HOME")),
        ("attempts-env-word", {"SKILLREACH_ATTEMPTS": "many"}, ("attempts",)),
        ("max-probes-env-zero", {"SKILLREACH_MAX_PROBES": "0"}, ("max_probes",)),
        ("webhooks-not-json", {"SKILLREACH_ALERT_WEBHOOKS": "http://x"}, ("SKILLREACH_ALERT_WEBHOOKS",)),
        ("precedence-env-bad", {"SKILLREACH_SKILL_PRECEDENCE": "middle"}, ("skill_precedence",)),
    )
    for name, env, needles in env_cases:
        add(
            Case(
                "env", f"run-{name}", ("run", "--out", str(root / "out" / f"env-{name}")), 2, needles, env=env
            )
        )

    # artifacts
    adir = root / "artifacts"
    adir.mkdir()
    (adir / "empty.jsonl").write_text("", encoding="utf-8")
    (adir / "garbage.jsonl").write_bytes(b"\x00\x01\x02 not json at all\n{\n")
    (adir / "wrong-shape.jsonl").write_text('{"hello": "world"}\n', encoding="utf-8")
    os.mkfifo(adir / "fifo.jsonl")
    data = json.loads((run_dir / "artifact.json").read_text(encoding="utf-8"))
    data["metrics"]["top1_accuracy"] = 0.99
    (adir / "tampered.json").write_text(json.dumps(data), encoding="utf-8")
    (adir / "notjson.json").write_text("{nope", encoding="utf-8")
    (adir / "list.json").write_text("[]", encoding="utf-8")
    no_digest = json.loads((run_dir / "artifact.json").read_text(encoding="utf-8"))
    no_digest.pop("digest")
    (adir / "nodigest.json").write_text(json.dumps(no_digest), encoding="utf-8")
    future = json.loads((run_dir / "artifact.json").read_text(encoding="utf-8"))
    future["schema_version"] = 999
    (adir / "future.json").write_text(json.dumps(future), encoding="utf-8")
    (adir / "empty-folder").mkdir()
    base_score = ("score", "--queries", EX_QUERIES, "-q", "--out", str(root / "out" / "scored") + "/")
    for name, probes, code, needles in (
        ("empty-probes", adir / "empty.jsonl", 2, ("empty.jsonl", "no probes")),
        ("garbage-probes", adir / "garbage.jsonl", 2, ("garbage.jsonl",)),
        ("wrong-shape-probes", adir / "wrong-shape.jsonl", 2, ("wrong-shape.jsonl",)),
        ("probes-missing", adir / "none.jsonl", 2, ("none.jsonl",)),
        ("probes-folder", adir, 2, ("is a folder",)),
        ("probes-fifo", adir / "fifo.jsonl", 2, ("fifo.jsonl",)),
    ):
        add(Case("artifacts", f"score-{name}", (*base_score, "--probes", str(probes)), code, needles))
    add(
        Case(
            "artifacts",
            "score-queries-tampered",
            (
                "score",
                "--queries",
                str(qdir / "tampered.json"),
                "--probes",
                str(run_dir / "probes.jsonl"),
                "-q",
                "--out",
                str(root / "out" / "t") + "/",
            ),
            2,
            ("tampered.json",),
        )
    )
    for name, path, needles in (
        ("tampered", adir / "tampered.json", ("tampered.json", "digest does not match")),
        ("not-json", adir / "notjson.json", ("notjson.json",)),
        ("list", adir / "list.json", ("list.json",)),
        ("no-digest", adir / "nodigest.json", ("nodigest.json", "no digest")),
        ("future-schema", adir / "future.json", ("future.json", "schema_version")),
        ("missing", adir / "none.json", ("none.json",)),
        ("folder-without-artifact", adir / "empty-folder", ("artifact.json",)),
    ):
        add(Case("artifacts", f"report-{name}", ("report", str(path), "-q"), 2, needles))
    add(
        Case(
            "artifacts",
            "record-tampered-artifact",
            (
                "baseline",
                "record",
                "--artifact",
                str(adir / "tampered.json"),
                "--skill",
                "log-search",
                "--queries",
                EX_QUERIES,
            ),
            2,
            ("tampered.json",),
        )
    )
    add(
        Case(
            "artifacts",
            "record-unknown-skill",
            ("baseline", "record", "--artifact", art, "--skill", "nope", "--queries", EX_QUERIES),
            2,
            ("'nope'",),
        )
    )

    # baselines
    bdir = root / "baselines"
    cases_all = {f"q{i:02d}": [1, 1, 1, 1, 1] for i in range(20)}
    base = write_baseline(_record(cases_all, "deploy@base"), bdir / "base.json")
    write_baseline(_record(cases_all, "deploy@same"), bdir / "same.json")
    fallen = write_baseline(
        _record({k: [0, 0, 0, 0, 0] for k in cases_all}, "deploy@new"), bdir / "fallen.json"
    )
    write_baseline(_record({f"x{i}": [1, 1] for i in range(5)}, "deploy@other"), bdir / "unpaired.json")
    write_baseline(_record(cases_all, "deploy@m", model="other-model-20250101"), bdir / "othermodel.json")
    rec = json.loads(fallen.read_text(encoding="utf-8"))
    for name, edit in (
        ("value-edited", lambda r: r["metrics"]["activation"].__setitem__("value", 1.0)),
        ("per-case-emptied", lambda r: r.__setitem__("per_case", {})),
        ("digest-removed", lambda r: r.pop("digest")),
        ("digest-garbage", lambda r: r.__setitem__("digest", "sha256:00")),
        ("case-flipped", lambda r: r["per_case"]["q00"]["outcomes"].__setitem__("activated", [1] * 5)),
    ):
        r = json.loads(json.dumps(rec))
        edit(r)
        (bdir / f"{name}.json").write_text(json.dumps(r), encoding="utf-8")
        needle = "carries no digest" if name == "digest-removed" else "digest does not match"
        add(
            Case(
                "baselines",
                f"compare-{name}",
                ("baseline", "compare", str(base), str(bdir / f"{name}.json")),
                2,
                (f"{name}.json", needle),
            )
        )
        if name in ("value-edited", "per-case-emptied"):
            add(
                Case(
                    "baselines",
                    f"compare-{name}-strict",
                    ("baseline", "compare", str(base), str(bdir / f"{name}.json"), "--strict"),
                    2,
                    (f"{name}.json", needle),
                )
            )
    future_b = json.loads(json.dumps(rec))
    future_b["schema_version"] = 99
    (bdir / "future.json").write_text(json.dumps(future_b), encoding="utf-8")
    (bdir / "notjson.json").write_text("{", encoding="utf-8")
    add(
        Case(
            "baselines",
            "compare-no-paired-case",
            ("baseline", "compare", str(base), str(bdir / "unpaired.json")),
            3,
            ("no positive case of deploy is identical",),
        )
    )
    add(
        Case(
            "baselines",
            "compare-no-paired-case-json",
            ("baseline", "compare", str(base), str(bdir / "unpaired.json"), "--json"),
            3,
            ("no positive case of deploy is identical",),
        )
    )
    add(
        Case(
            "baselines",
            "compare-model-differs",
            ("baseline", "compare", str(base), str(bdir / "othermodel.json")),
            3,
            ("model differs",),
        )
    )
    add(
        Case(
            "baselines",
            "compare-breach",
            ("baseline", "compare", str(base), str(fallen)),
            1,
            ("activation breach",),
        )
    )
    add(
        Case(
            "baselines",
            "compare-same-ok",
            ("baseline", "compare", str(base), str(bdir / "same.json")),
            0,
            ("verdict: ok",),
        )
    )
    add(
        Case(
            "baselines",
            "compare-future-schema",
            ("baseline", "compare", str(base), str(bdir / "future.json")),
            2,
            ("future.json", "schema_version"),
        )
    )
    add(
        Case(
            "baselines",
            "compare-not-json",
            ("baseline", "compare", str(base), str(bdir / "notjson.json")),
            2,
            ("notjson.json",),
        )
    )
    add(
        Case(
            "baselines",
            "compare-missing",
            ("baseline", "compare", str(base), str(bdir / "none.json")),
            2,
            ("none.json",),
        )
    )
    add(Case("baselines", "compare-folder", ("baseline", "compare", str(base), str(bdir)), 2, (str(bdir),)))
    add(
        Case(
            "baselines",
            "compare-gate-unknown-metric",
            ("baseline", "compare", str(base), str(fallen), "--gate", "activaton=-0.1"),
            2,
            ("activaton",),
        )
    )
    add(
        Case(
            "baselines",
            "compare-gate-not-a-number",
            ("baseline", "compare", str(base), str(fallen), "--gate", "activation=lots"),
            2,
            ("activation",),
        )
    )
    add(
        Case(
            "baselines",
            "show-tampered",
            ("baseline", "show", str(bdir / "value-edited.json")),
            2,
            ("value-edited.json", "digest does not match"),
        )
    )
    add(
        Case("baselines", "status-tampered", ("baseline", "status", "--baselines", str(bdir)), 2, ("digest",))
    )

    # signals
    add(
        Case(
            "signals",
            "run-ctrl-c",
            ("run", "--out", str(root / "out" / "interrupted")),
            130,
            ("interrupted",),
            interrupt_after_s=1.0,
        )
    )
    return cases


# ------------------------------------------------------------------------------------------ runner


def _env(root: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SKILLREACH_", "ANTHROPIC_", "OPENAI_", "PREFECT_API"))
    }
    env.update(
        SKILLREACH_HOME=str(root / "home"),
        PREFECT_HOME=str(root / "prefect"),
        COLUMNS="80",
        NO_COLOR="1",
        GITHUB_STEP_SUMMARY="",
    )
    env.update(extra)
    return env


_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
"""Run ``argv[1:]`` with SIGINT's disposition reset: a pytest started from a background job ignores
SIGINT, children inherit that through exec, and Python then installs no KeyboardInterrupt handler."""


def _run(case: Case, root: Path) -> Result:
    args = [str(EXE), *(a.replace(W, str(root)) for a in case.args)]
    if case.interrupt_after_s is not None:
        args = [sys.executable, "-c", _DEFAULT_SIGINT, *args]

    def interrupt(proc: subprocess.Popen[bytes]) -> None:
        if case.interrupt_after_s is None:
            return
        # Ctrl-C once the command is running (its --out folder exists), whatever the machine's load
        marker = Path(args[-1])
        start = time.monotonic()
        while not marker.exists() and proc.poll() is None and time.monotonic() - start < 10 * LIMIT_S:
            time.sleep(0.1)
        time.sleep(case.interrupt_after_s)
        proc.send_signal(signal.SIGINT)

    res = hang.run(args, limit_s=LIMIT_S, cwd=root / "cwd", env=_env(root, case.env), started=interrupt)
    return Result(res.code, res.stdout, res.stderr, res.seconds, hung=res.hung)


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[Path, dict[str, Case], dict[str, Result]]:
    root = tmp_path_factory.mktemp("bad-input")
    (root / "cwd").mkdir()
    selected = {
        item.callspec.params["name"]
        for item in request.session.items
        if hasattr(item, "callspec") and "name" in item.callspec.params
    }
    cases = [c for c in build_world(root) if c.name in selected or not selected]
    by_name = {c.name: c for c in cases}
    assert len(by_name) == len(cases), "case names must be unique"
    # the slow ones first, so the pool is not left waiting on one at the end
    order = sorted(cases, key=lambda c: (c.args[0] != "run", c.name))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = dict(zip([c.name for c in order], pool.map(lambda c: _run(c, root), order), strict=True))
    return root, by_name, results


def _case_names() -> list[str]:
    return [name for name, *_ in _CASE_INDEX]


def _index() -> list[tuple[str, str]]:
    """(name, category) of every case, computed without building the world (for test ids)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cwd").mkdir()
        return [(c.name, c.category) for c in build_world(Path(tmp))]


_CASE_INDEX = _index()


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("skillreach: error:")]


@pytest.mark.parametrize("name", _case_names())
def test_case(world: tuple[Path, dict[str, Case], dict[str, Result]], name: str) -> None:
    root, cases, results = world
    case, res = cases[name], results[name]
    shown = f"{name}: exit {res.code}\n--- stdout\n{res.stdout[-2000:]}\n--- stderr\n{res.stderr[-2000:]}"
    assert not res.hung, f"{name}: no progress within {LIMIT_S:.0f} s (a hang)\n{shown}"
    assert "Traceback" not in res.stdout + res.stderr, shown
    assert res.code == case.code, shown
    errors = _error_lines(res.stderr)
    if case.code in (2, 3):
        assert len(errors) == 1, f"expected one error line\n{shown}"
        line = errors[0]
        for needle in case.needles:
            assert needle.replace(W, str(root)) in line, f"{needle!r} not in the error line\n{shown}"
        assert "\x1b" not in line, shown
        assert "\x07" not in line, shown
    else:
        text = res.stdout + res.stderr
        for needle in case.needles:
            assert needle in text, f"{needle!r} not in the output\n{shown}"
        assert len(errors) <= 1, shown


def test_enough_cases_in_every_category() -> None:
    counts = Counter(cat for _, cat in _CASE_INDEX)
    assert sum(counts.values()) >= 150, counts
    for cat in ("skill", "queries", "config", "flags", "paths", "env", "artifacts", "baselines", "signals"):
        assert counts[cat] >= 1, counts


def test_side_effects(world: tuple[Path, dict[str, Case], dict[str, Result]]) -> None:
    """Refused output paths created nothing; a path ending in '/' is a folder; no secret was printed."""
    root, _, results = world
    assert not Path("/nonexistent").exists()
    if "score-out-trailing-slash" in results:
        assert (root / "scored" / "artifact.json").is_file()
    for res in results.values():
        assert "secretpw" not in res.stdout + res.stderr
