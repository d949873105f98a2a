"""Round two's held-out hostile cases that still failed (issue 40), through the command a user runs.

Each case is a real ``.venv/bin/skillreach …`` process judged by the shared hang limit
(:mod:`tests.helpers.hang`: CPU or output progress, not wall time), run two at a time; each asserts its
exit code, no Python traceback, the one ``skillreach: error:`` line and what it names.

Categories (counted at the end of the file):

- ``hangs``: a 5,000-skill templated catalog through ``cluster`` and ``run --runtime keyword``; ``cluster
  --out /dev/full``; a 2 GiB sparse ``probes.jsonl`` (no newline) through ``score`` and a resumed
  ``run``; a 100 MB line without a newline;
- ``digests``: ``queries verify`` of a set whose stated per-query digest lies (the set digest holds);
  ``seal`` and ``verify`` of a JSON set holding an escaped ESC (``\\u001b``);
- ``score``: negative ``turns`` and ``duration_ms`` (named with their line), a line nested 5,000 deep;
- ``resume``: a probe of a query the set does not hold planted in ``probes.jsonl`` (refused, named); an
  attempt outside the plan (not counted, not paid);
- ``ranges``: a 5,000-digit and a 10**30 integer in ``study.json`` under ``baseline record``;
- ``messages``: the flag (``--max-cost``), the config file and field, ``schema_version`` named;
- ``lint``: ``name: 2024-01-01`` and a ``description`` YAML resolves to a timestamp.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS
from tests.helpers import hang

EXE = Path(sys.executable).with_name("skillreach")
LIMIT_S = 60.0
"""CPU seconds a case may burn (and wall seconds without progress): the issue's 60 s."""
WORKERS = 2


@dataclass(frozen=True)
class Case:
    category: str
    name: str
    args: tuple[str, ...]
    code: int
    needles: tuple[str, ...] = ()
    """Must all appear in the one error line (exit 2), else in stdout + stderr."""
    check: Callable[[Path], None] | None = None


def _skill(folder: Path, name: str, desc: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {desc}\n---\n\nBody.\n", encoding="utf-8"
    )


def _big_catalog(root: Path) -> tuple[Path, Path]:
    """5,000 skills of one template (every skill ties with thousands of others) and 40 queries."""
    skills = root / "big" / "skills"
    for i in range(5000):
        _skill(
            skills / f"skill-{i:04d}", f"skill-{i:04d}", f"A templated skill number {i} for generic tasks."
        )
    queries = [
        {
            "id": f"q{i:02d}",
            "text": f"Please use skill-{i * 97:04d} for this.",
            "expected_skill": f"skill-{i * 97:04d}",
            "kind": "contextual",
        }
        for i in range(20)
    ] + [
        {
            "id": f"i{i:02d}",
            "text": f"A templated helper number {i} for generic tasks.",
            "expected_skill": f"skill-{i:04d}",
            "kind": "implicit",
        }
        for i in range(20)
    ]
    qpath = root / "big" / "queries.json"
    qpath.write_text(json.dumps({"catalog_id": "big", "queries": queries}), encoding="utf-8")
    return skills, qpath


def _example_study(root: Path) -> Path:
    """A finished keyword study of the bundled example (its probe log and sealed set)."""
    study = root / "study"
    res = hang.run(
        [str(EXE), "run", "--runtime", "keyword", "--out", str(study)],
        limit_s=LIMIT_S,
        cwd=root,
        env=_env(root),
    )
    assert res.code == 0, res.stderr
    return study


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLREACH_", "PREFECT_"))}
    return {**env, "SKILLREACH_HOME": str(root / "home"), "NO_COLOR": "1", "COLUMNS": "200"}


def _edit_line(src: Path, dst: Path, lineno: int, edit: Callable[[dict[str, object]], None]) -> None:
    lines = src.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[lineno - 1])
    edit(rec)
    lines[lineno - 1] = json.dumps(rec)
    dst.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _not_counted(root: Path) -> None:
    """The planted attempt 7 (of 1, costing $123) is neither scored nor paid for."""
    artifact = json.loads((root / "planted-attempt" / "artifact.json").read_text(encoding="utf-8"))
    assert artifact["counts"]["probes"] == 71
    assert artifact["usage"]["cost_usd"] == 0.0


def build_world(root: Path) -> list[Case]:
    cases: list[Case] = []
    add = cases.append
    study = _example_study(root)
    probes, qset = study / "probes.jsonl", study / "query_set.json"
    score = ("score", "--queries", str(qset), "--out", str(root / "scored.json"), "--probes")

    # ---------------------------------------------------------------------------------------- hangs
    big_skills, big_queries = _big_catalog(root)
    add(
        Case(
            "hangs",
            "cluster_of_5000_templated_skills",
            ("cluster", str(big_skills), "--format", "json"),
            0,
            ('"skills": 5000',),
        )
    )
    add(
        Case(
            "hangs",
            "keyword_run_of_5000_skills",
            (
                "run",
                "--runtime",
                "keyword",
                "--skills",
                str(big_skills),
                "--queries",
                str(big_queries),
                "--out",
                str(root / "big-run"),
            ),
            0,
            ("40 probed",),
        )
    )
    add(
        Case(
            "hangs",
            "cluster_out_dev_full",
            ("cluster", str(EXAMPLE_SKILLS), "--out", "/dev/full"),
            2,
            ("--out /dev/full", "No space left"),
        )
    )
    sparse = root / "sparse"
    sparse.mkdir()
    (sparse / "query_set.json").write_bytes(qset.read_bytes())
    with (sparse / "probes.jsonl").open("wb") as fh:
        fh.truncate(2 << 30)  # 2 GiB of holes, not one newline
    add(
        Case(
            "hangs",
            "score_of_a_sparse_probe_log",
            (*score, str(sparse / "probes.jsonl")),
            2,
            ("probes.jsonl:1", "longer than 64 MiB"),
        )
    )
    add(
        Case(
            "hangs",
            "run_resuming_over_a_sparse_probe_log",
            ("run", "--runtime", "keyword", "--out", str(sparse)),
            2,
            ("probes.jsonl:1", "longer than 64 MiB"),
        )
    )
    long_line = root / "long.jsonl"
    with long_line.open("wb") as fh:
        fh.write(probes.read_bytes().split(b"\n")[0] + b"\n")
        fh.write(b"x" * (100 << 20))
    add(
        Case(
            "hangs",
            "score_of_a_100_mb_line_without_newline",
            (*score, str(long_line)),
            2,
            ("long.jsonl:2", "longer than 64 MiB"),
        )
    )

    # -------------------------------------------------------------------------------------- digests
    sealed = json.loads(qset.read_text(encoding="utf-8"))
    stated = sealed["provenance"]["query_digests"]
    first = sorted(stated)[0]
    stated[first] = "sha256:" + "0" * 64
    (root / "lie.json").write_text(json.dumps(sealed), encoding="utf-8")
    add(
        Case(
            "digests",
            "verify_a_lying_per_query_digest",
            ("queries", "verify", str(root / "lie.json")),
            2,
            ("provenance.query_digests", repr(first)),
        )
    )
    del stated[first]
    (root / "lie2.json").write_text(json.dumps(sealed), encoding="utf-8")
    add(
        Case(
            "digests",
            "verify_a_missing_per_query_digest",
            ("queries", "verify", str(root / "lie2.json")),
            2,
            ("provenance.query_digests", repr(first)),
        )
    )
    plain = json.loads(EXAMPLE_QUERIES.read_text(encoding="utf-8"))
    plain["queries"][0]["text"] = "ship it \u001b[2J now"
    (root / "esc.json").write_text(json.dumps(plain), encoding="utf-8")  # ensure_ascii: the \\u001b escape
    assert "\\u001b" in (root / "esc.json").read_text(encoding="utf-8")
    add(
        Case(
            "digests",
            "seal_an_escaped_esc",
            ("queries", "seal", str(root / "esc.json"), "--out", str(root / "esc-sealed.json")),
            2,
            ("esc.json", "U+001B", "text"),
        )
    )
    esc_sealed = json.loads(qset.read_text(encoding="utf-8"))
    esc_sealed["queries"][1]["text"] += "\u0007"
    (root / "bel-sealed.json").write_text(json.dumps(esc_sealed), encoding="utf-8")
    add(
        Case(
            "digests",
            "verify_a_bel_in_a_sealed_set",
            ("queries", "verify", str(root / "bel-sealed.json")),
            2,
            ("U+0007",),
        )
    )

    # ---------------------------------------------------------------------------------------- score
    _edit_line(probes, root / "neg-turns.jsonl", 3, lambda r: r.update(turns=-3))
    add(
        Case(
            "score",
            "negative_turns",
            (*score, str(root / "neg-turns.jsonl")),
            2,
            ("neg-turns.jsonl:3", "'turns'"),
        )
    )
    _edit_line(probes, root / "neg-duration.jsonl", 4, lambda r: r.update(duration_ms=-5))
    add(
        Case(
            "score",
            "negative_duration",
            (*score, str(root / "neg-duration.jsonl")),
            2,
            ("neg-duration.jsonl:4", "'duration_ms'"),
        )
    )
    deep = probes.read_text(encoding="utf-8").splitlines()
    deep[1] = deep[1][:-1] + ',"x":' + '{"a":' * 5000 + "1" + "}" * 5000 + "}"
    (root / "deep.jsonl").write_text("\n".join(deep) + "\n", encoding="utf-8")
    add(
        Case(
            "score",
            "a_line_nested_5000_deep",
            (*score, str(root / "deep.jsonl")),
            2,
            ("deep.jsonl:2", "depth"),
        )
    )

    # --------------------------------------------------------------------------------------- resume
    for folder, planted in (
        ("planted-query", {"query_id": "planted-q"}),
        ("planted-attempt", {"attempt": 7}),
    ):
        copy = root / folder
        copy.mkdir()
        (copy / "query_set.json").write_bytes(qset.read_bytes())
        lines = probes.read_text(encoding="utf-8").splitlines()
        rec = json.loads(lines[0])
        rec.update(planted, cost_usd=123.0)
        (copy / "probes.jsonl").write_text("\n".join([*lines[5:], json.dumps(rec)]) + "\n", encoding="utf-8")
    add(
        Case(
            "resume",
            "run_over_a_planted_query",
            ("run", "--runtime", "keyword", "--out", str(root / "planted-query")),
            2,
            ("planted-query/probes.jsonl", "'planted-q'", "remove that line"),
        )
    )
    add(
        Case(
            "resume",
            "run_over_a_planted_attempt",
            ("run", "--runtime", "keyword", "--out", str(root / "planted-attempt")),
            0,
            check=_not_counted,
        )
    )

    # -------------------------------------------------------------------------------------- ranges
    for folder, attempts in (("huge-digits", "9" * 5000), ("huge-int", str(10**30))):
        copy = root / folder
        copy.mkdir()
        (copy / "artifact.json").write_bytes((study / "artifact.json").read_bytes())
        data = json.loads((study / "study.json").read_text(encoding="utf-8"))
        data["config"]["attempts"] = 0
        (copy / "study.json").write_text(json.dumps(data).replace('"attempts": 0', f'"attempts": {attempts}'))
        assert attempts in (copy / "study.json").read_text(encoding="utf-8")
    add(
        Case(
            "ranges",
            "baseline_record_over_a_5000_digit_study_json",
            (
                "baseline",
                "record",
                "--artifact",
                str(root / "huge-digits" / "artifact.json"),
                "--skill",
                "release-deploy",
            ),
            2,
            ("huge-digits/study.json", "5,000 digits"),
        )
    )
    add(
        Case(
            "ranges",
            "baseline_record_over_a_huge_int_in_study_json",
            (
                "baseline",
                "record",
                "--artifact",
                str(root / "huge-int" / "artifact.json"),
                "--skill",
                "release-deploy",
            ),
            2,
            ("huge-int/study.json", "config.attempts", "64-bit"),
        )
    )

    # ------------------------------------------------------------------------------------- messages
    (root / "ok.toml").write_text("attempts = 1\n", encoding="utf-8")
    add(
        Case(
            "messages",
            "max_cost_flag_named_beside_a_config_file",
            (
                "run",
                "--config",
                str(root / "ok.toml"),
                "--runtime",
                "keyword",
                "--max-cost",
                "-5",
                "--out",
                str(root / "mc"),
            ),
            2,
            ("--max-cost -5.0", "greater than 0"),
        )
    )
    (root / "bad.toml").write_text('attempts = "x"\n', encoding="utf-8")
    add(
        Case(
            "messages",
            "config_file_and_field_named",
            ("run", "--config", str(root / "bad.toml"), "--runtime", "keyword", "--out", str(root / "mc2")),
            2,
            ("bad.toml", "attempts"),
        )
    )
    versioned = json.loads((study / "artifact.json").read_text(encoding="utf-8"))
    versioned["schema_version"] = 99
    (root / "v99.json").write_text(json.dumps(versioned), encoding="utf-8")
    add(
        Case(
            "messages",
            "schema_version_named",
            ("report", str(root / "v99.json")),
            2,
            ("v99.json", "schema_version 99"),
        )
    )

    # ----------------------------------------------------------------------------------------- lint
    _skill(root / "dates" / "when", "2024-01-01", "A fine skill used by the hostile-input tests.")
    add(Case("lint", "name_resolving_to_a_date", ("lint", str(root / "dates")), 1, ("YAML date", "quote it")))
    _skill(root / "stamps" / "stamp", "stamp", "2001-12-14t21:59:43.10-05:00")
    add(
        Case(
            "lint",
            "description_resolving_to_a_timestamp",
            ("lint", str(root / "stamps")),
            1,
            ("description is a YAML timestamp", "quote it"),
        )
    )
    return cases


CATEGORIES = {"hangs": 6, "digests": 4, "score": 3, "resume": 2, "ranges": 2, "messages": 3, "lint": 2}
NAMES = [
    "cluster_of_5000_templated_skills",
    "keyword_run_of_5000_skills",
    "cluster_out_dev_full",
    "score_of_a_sparse_probe_log",
    "run_resuming_over_a_sparse_probe_log",
    "score_of_a_100_mb_line_without_newline",
    "verify_a_lying_per_query_digest",
    "verify_a_missing_per_query_digest",
    "seal_an_escaped_esc",
    "verify_a_bel_in_a_sealed_set",
    "negative_turns",
    "negative_duration",
    "a_line_nested_5000_deep",
    "run_over_a_planted_query",
    "run_over_a_planted_attempt",
    "baseline_record_over_a_5000_digit_study_json",
    "baseline_record_over_a_huge_int_in_study_json",
    "max_cost_flag_named_beside_a_config_file",
    "config_file_and_field_named",
    "schema_version_named",
    "name_resolving_to_a_date",
    "description_resolving_to_a_timestamp",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Case], dict[str, hang.Outcome]]:
    root = tmp_path_factory.mktemp("bad-input-r2")
    cases = build_world(root)
    assert [c.name for c in cases] == NAMES
    assert Counter(c.category for c in cases) == CATEGORIES
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        ran = pool.map(
            lambda c: hang.run([str(EXE), *c.args], limit_s=LIMIT_S, cwd=root, env=_env(root)), cases
        )
        results = dict(zip(NAMES, ran, strict=True))
    for sparse in root.glob("sparse/probes.jsonl"):
        sparse.unlink()
    return root, {c.name: c for c in cases}, results


@pytest.mark.parametrize("name", NAMES)
def test_case(world: tuple[Path, dict[str, Case], dict[str, hang.Outcome]], name: str) -> None:
    root, cases, results = world
    case, res = cases[name], results[name]
    shown = (
        f"{name}: exit {res.code} in {res.seconds:.1f} s\n--- stdout\n{res.stdout[-2000:]}\n"
        f"--- stderr\n{res.stderr[-2000:]}"
    )
    assert not res.hung, f"{name}: {hang.describe(res, LIMIT_S)}"
    assert "Traceback" not in res.stdout + res.stderr, shown
    assert res.code == case.code, shown
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("skillreach: error:")]
    if case.code == 2:
        assert len(errors) == 1, f"expected one error line\n{shown}"
        for needle in case.needles:
            assert needle in errors[0], f"{needle!r} not in the error line\n{shown}"
    else:
        for needle in case.needles:
            assert needle in res.stdout + res.stderr, f"{needle!r} not in the output\n{shown}"
    if case.check is not None:
        case.check(root)


def test_the_case_counts_by_category() -> None:
    """The closing note's counts: one case per name, by class."""
    assert sum(CATEGORIES.values()) == len(NAMES) == len(set(NAMES))
