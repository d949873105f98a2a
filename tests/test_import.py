"""Importers: every real labelled set under ../shared/corpora/labelled, and the shapes in miniature."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.errors import InputError
from skillreach.models import QueryKind
from skillreach.queries.importers import detect_format, import_queries, read_trigger_set
from skillreach.queries.sets import verify_query_set, write_query_set
from skillreach.skills.discovery import load_skills

# From labelled/raandree__CopilotAtelier/README.md: items, positives, negatives per file.
COPILOT_ATELIER = {
    "brand-logo-system": (24, 14, 10),
    "pester-patterns": (12, 7, 5),
    "sampler-build-debug": (11, 6, 5),
    "sampler-framework": (11, 6, 5),
    "sampler-migration": (11, 6, 5),
    "skill-creator": (23, 12, 11),
    "test-driven-development": (11, 6, 5),
    "sample": (10, 5, 5),
}


def names_under(*folders: Path) -> list[str]:
    return [s.name for s in load_skills(list(folders), on_problem=lambda _: None)]


def kinds(queries) -> Counter[str]:
    return Counter(q.kind.value for q in queries)


# ------------------------------------------------------------------------- real sets: should-trigger


@pytest.mark.parametrize("skill", sorted(COPILOT_ATELIER))
def test_copilot_atelier_should_trigger_sets(corpora: Path, skill: str, tmp_path: Path) -> None:
    path = corpora / "labelled" / "raandree__CopilotAtelier" / f"trigger-queries.{skill}.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    assert detect_format(path) == "should-trigger"
    result = import_queries(path, fmt="should-trigger")
    qs = result.query_set
    items, pos, neg = COPILOT_ATELIER[skill]
    assert len(qs.queries) == items
    positives = [q for q in qs.queries if q.expected_skill == skill]
    assert len(positives) == pos
    assert all(q.kind is QueryKind.implicit for q in positives)
    negatives = [q for q in qs.queries if q.expected_skill != skill]
    assert len(negatives) == neg
    assert all(q.kind in (QueryKind.neighbor_negative, QueryKind.out_of_scope) for q in negatives)
    # the text is the row's query, in the file's order; a row id is kept inside the query id
    assert [q.text for q in qs.queries] == [r["query"] for r in rows]
    for q, r in zip(qs.queries, rows, strict=True):
        if "id" in r:
            assert q.id == f"{skill}-{r['id']}"
    # sealed, imported, source = the file; it survives a write and a verify
    assert qs.provenance.origin == "imported"
    assert qs.provenance.source == str(path)
    assert qs.provenance.digest == qs.compute_digest()
    out = write_query_set(qs, tmp_path / "imported.json")
    assert verify_query_set(out).compute_digest() == qs.provenance.digest


def test_notes_that_name_the_neighbour_make_neighbour_negatives(corpora: Path) -> None:
    path = corpora / "labelled" / "raandree__CopilotAtelier" / "trigger-queries.pester-patterns.json"
    qs = import_queries(path, fmt="should-trigger").query_set
    by_id = qs.by_id()
    # neg-01..05 carry the neighbour's name as their note
    assert by_id["pester-patterns-neg-01"].expected_skill == "sampler-build-debug"
    assert by_id["pester-patterns-neg-02"].expected_skill == "test-driven-development"
    assert by_id["pester-patterns-neg-05"].expected_skill == "dsc-troubleshooting"
    assert kinds(qs.queries) == {"implicit": 7, "neighbor_negative": 5}
    assert "not pester-patterns" in by_id["pester-patterns-neg-01"].notes


def test_with_the_real_catalog_neighbours_are_resident_or_out_of_scope(corpora: Path) -> None:
    names = names_under(corpora / "raandree__CopilotAtelier")
    labelled = corpora / "labelled" / "raandree__CopilotAtelier"
    brand = import_queries(labelled / "trigger-queries.brand-logo-system.json", catalog=names)
    by_id = brand.query_set.by_id()
    # "technical-writer" is named but is not a CopilotAtelier skill: out of scope, with a warning
    assert by_id["brand-logo-system-neg-08"].kind is QueryKind.out_of_scope
    assert any("technical-writer" in w for w in brand.warnings)
    assert by_id["brand-logo-system-neg-01"].expected_skill == "windows-gui-screenshot-capture"
    # a resident skill named mid-note ("belongs to agent-evals") is found with a catalog
    creator = import_queries(labelled / "trigger-queries.skill-creator.json", catalog=names).query_set
    assert creator.by_id()["skill-creator-neg-02"].expected_skill == "agent-evals"
    assert creator.by_id()["skill-creator-neg-02"].kind is QueryKind.neighbor_negative
    for q in brand.query_set.queries + creator.queries:
        assert q.expected_skill is None or q.expected_skill in names
    # the README's "sample" set targets a skill the repo does not ship
    with pytest.raises(InputError, match=r"skill 'sample' is not in the catalog; pass --skill"):
        import_queries(labelled / "trigger-queries.sample.json", catalog=names)


# ---------------------------------------------------------------------------------- real sets: waza


def test_waza_trigger_tests(corpora: Path) -> None:
    path = corpora / "labelled" / "microsoft__waza" / "code-explainer" / "trigger_tests.yaml"
    assert detect_format(path) == "waza"
    qs = import_queries(path, fmt="waza").query_set
    assert kinds(qs.queries) == {"implicit": 8, "out_of_scope": 8}
    assert {q.expected_skill for q in qs.queries if q.in_scope} == {"code-explainer"}
    first = qs.queries[0]
    assert first.text == "Explain this code to me"
    assert first.notes == "Direct explanation request; confidence high"
    assert qs.by_id()["code-explainer-neg-02"].text == "Deploy my app to Azure"
    # --skill renames the target (e.g. the skill's folder in this repo differs)
    renamed = import_queries(path, fmt="waza", skill="explain-code").query_set
    assert {q.expected_skill for q in renamed.queries if q.in_scope} == {"explain-code"}
    # against the skill folder that ships with the set
    assert import_queries(path, catalog=names_under(path.parent)).query_set.queries


# --------------------------------------------------------------------------------- real sets: cases


def test_dtsong_multi_skill_cases(corpora: Path) -> None:
    root = corpora / "labelled" / "dtsong__data-engineering-skills"
    path = root / "cases.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert detect_format(path) == "cases"
    names = names_under(root / "skills")
    result = import_queries(path, fmt="cases", catalog=names)
    qs = result.query_set
    assert result.warnings == []
    assert len(qs.queries) == len(rows) == 91
    # README: 27 cases route to a skill other than the suite's own, 2 to none in the suite
    assert kinds(qs.queries) == {"implicit": 62, "neighbor_negative": 27, "out_of_scope": 2}
    for q, row in zip(qs.queries, rows, strict=True):
        assert q.text == row["input"]
        if row["expected_skill_primary"] == "__none__":
            assert q.expected_skill is None
        else:
            assert q.expected_skill == row["expected_skill_primary"]
        if q.kind is QueryKind.neighbor_negative:
            assert row["expected_activation"].startswith("No")
            assert row["suite_skill"] not in q.acceptable_skills
        assert set(q.acceptable_skills) <= set(names)
    by_id = qs.by_id()
    # "ai-data-integration (primary), python-data-engineering (possible secondary)"
    assert by_id["ai-data-integration-case-03"].acceptable_skills == ("python-data-engineering",)
    # "... ai-data-integration (not involved)" is not acceptable
    assert "ai-data-integration" not in by_id["data-pipelines-case-06"].acceptable_skills
    assert by_id["data-pipelines-case-06"].acceptable_skills == ("data-integration", "dbt-transforms")
    # the case whose title says Negative but whose activation is Yes stays a positive
    assert by_id["data-governance-case-07"].kind is QueryKind.implicit
    # --skill keeps one suite
    duck = import_queries(path, fmt="cases", skill="duckdb").query_set
    assert {q.id.rsplit("-case-", 1)[0] for q in duck.queries} == {"duckdb"}


# -------------------------------------------------------------------------------- real sets: labels


def test_obra_superpowers_labels(corpora: Path) -> None:
    path = corpora / "labelled" / "obra__superpowers" / "labels.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert detect_format(path) == "labels"
    qs = import_queries(path, catalog=names_under(corpora / "obra__superpowers")).query_set
    assert len(qs.queries) == 15
    assert all(q.kind is QueryKind.implicit for q in qs.queries)
    assert [q.expected_skill for q in qs.queries] == [r["expected_skill"] for r in rows]
    assert qs.by_id()["skill-triggering/executing-plans"].expected_skill == "executing-plans"
    explicit = [q for q in qs.queries if q.id.startswith("explicit-skill-requests/")]
    assert len(explicit) == 9
    assert all(q.notes.startswith("explicit request") for q in explicit)
    # the mapping of the 'explicit' label is said once, with its count
    warnings = import_queries(path, catalog=names_under(corpora / "obra__superpowers")).warnings
    said = "kind 'explicit' (9 rows) is not a skillreach kind for a positive row; imported as implicit"
    assert said in warnings


def test_notion_labels_and_evaluations(corpora: Path) -> None:
    labelled = corpora / "labelled" / "openai__skills-notion"
    names = names_under(corpora / "openai__skills")
    labels = import_queries(labelled / "labels.jsonl", catalog=names).query_set
    assert len(labels.queries) == 8
    assert {q.expected_skill for q in labels.queries} == {
        "notion-knowledge-capture",
        "notion-meeting-intelligence",
        "notion-research-documentation",
        "notion-spec-to-implementation",
    }
    # the evaluation files: same 8 queries, the success criteria become the rubric
    assert detect_format(labelled) == "openai-evals"
    result = import_queries(labelled, fmt="openai-evals", catalog=names)
    evals = result.query_set
    assert sorted(q.text for q in evals.queries) == sorted(q.text for q in labels.queries)
    decision = evals.by_id()["notion-knowledge-capture/decision-record"]
    assert decision.expected_skill == "notion-knowledge-capture"  # "knowledge-capture" in the file
    assert decision.kind is QueryKind.contextual
    assert decision.checks is not None
    assert decision.checks.rubric is not None
    assert decision.checks.rubric.startswith("Success criteria:\n- ")
    assert all(q.checks is not None and q.checks.rubric for q in evals.queries)
    # "task-manager" is listed by two files but is not in the repo: dropped, with a warning
    assert sum("task-manager" in w for w in result.warnings) == 2
    # without a catalog the folder name settles the prefix
    plain = import_queries(labelled / "notion-knowledge-capture" / "decision-record.json", fmt="openai-evals")
    assert plain.query_set.queries[0].expected_skill == "notion-knowledge-capture"


# ---------------------------------------------------------------------------------------- shapes


def test_csv_should_trigger_with_neighbour_column(tmp_path: Path) -> None:
    path = tmp_path / "evals.csv"
    path.write_text(
        "query,should_trigger,neighbour,note\n"
        'ship v2 to prod,yes,,""\n'
        "turn the flag off,no,config-push,a setting\n"
        "write a poem,false,,\n",
        encoding="utf-8",
    )
    assert detect_format(path) == "csv"
    qs = import_queries(path, skill="release-deploy").query_set
    q1, q2, q3 = qs.queries
    assert (q1.kind, q1.expected_skill, q1.id) == (
        QueryKind.implicit,
        "release-deploy",
        "release-deploy-pos-01",
    )
    assert (q2.kind, q2.expected_skill) == (QueryKind.neighbor_negative, "config-push")
    assert (q3.kind, q3.expected_skill) == (QueryKind.out_of_scope, None)
    with pytest.raises(InputError, match=r"cannot tell which skill this set is about; pass --skill NAME"):
        import_queries(path)
    path.write_text("query,should_trigger\nfine,yes\nbad,maybe\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"evals\.csv:3: should_trigger must be true or false \(got 'maybe'\)"
    ):
        import_queries(path, skill="x")
    path.write_text("prompt,label\nx,1\n", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"evals\.csv:1: the header needs a query column and a should_trigger"
    ):
        import_queries(path, skill="x")


def test_waza_camel_case_plain_strings_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "trigger_tests.yaml"
    path.write_text(
        "name: deploy-triggers\nskill: azure-deploy\n"
        "shouldTriggerPrompts:\n  - deploy my app\n  - push this to azure\n"
        "shouldNotTriggerPrompts:\n  - prompt: explain this code\n    neighbour: code-explainer\n",
        encoding="utf-8",
    )
    qs = import_queries(path).query_set
    assert [q.expected_skill for q in qs.queries] == ["azure-deploy", "azure-deploy", "code-explainer"]
    assert qs.queries[2].kind is QueryKind.neighbor_negative
    path.write_text("skill: x\ntests: []\n", encoding="utf-8")
    with pytest.raises(InputError, match="no should_trigger_prompts or should_not_trigger_prompts"):
        import_queries(path, fmt="waza")
    path.write_text("skill: x\nshould_trigger_prompts: [unclosed\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"trigger_tests\.yaml:\d+: invalid YAML"):
        import_queries(path, fmt="waza")


def test_should_trigger_errors_and_ids(tmp_path: Path) -> None:
    path = tmp_path / "trigger-queries.pdf.json"
    path.write_text(
        json.dumps([{"query": "read it", "should_trigger": True}, {"query": "x"}]), encoding="utf-8"
    )
    with pytest.raises(InputError, match=r"trigger-queries\.pdf\.json: row #2: missing should_trigger"):
        import_queries(path)
    path.write_text(json.dumps([{"id": "a", "query": "x", "should_trigger": True}] * 2), encoding="utf-8")
    with pytest.raises(InputError, match=r"duplicate ids \(pdf-a\)"):
        import_queries(path)
    # skill-creator's second shape: {"evals": [{"prompt", "should_trigger"}]}, maybe naming its skill
    evals = [{"prompt": "read it", "should_trigger": True}, {"prompt": "hi", "should_trigger": "no"}]
    path.write_text(json.dumps({"evals": evals}), "utf-8")
    assert detect_format(path) == "should-trigger"
    queries, _ = read_trigger_set(path, "should-trigger")
    assert [q.id for q in queries] == ["pdf-pos-01", "pdf-neg-01"]
    assert [q.kind for q in queries] == [QueryKind.implicit, QueryKind.out_of_scope]
    path.write_text(json.dumps({"skill": "pdf-forms", "evals": evals}), "utf-8")
    queries, _ = read_trigger_set(path, "should-trigger")
    assert queries[0].expected_skill == "pdf-forms"
    with pytest.raises(InputError, match=r"unknown --format 'promptfoo'"):
        read_trigger_set(path, "promptfoo")
    (tmp_path / "weird.json").write_text(json.dumps([{"foo": 1}]), encoding="utf-8")
    with pytest.raises(InputError, match=r"cannot tell the format; pass --format"):
        detect_format(tmp_path / "weird.json")


def test_cli_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "trigger-queries.release-deploy.json"
    src.write_text(
        json.dumps(
            [
                {"id": "p1", "query": "ship 2.1 to prod", "should_trigger": True},
                {"id": "n1", "query": "flip the flag", "should_trigger": False, "note": "config-push"},
            ]
        ),
        encoding="utf-8",
    )
    out = tmp_path / "imported.json"
    code = main(["queries", "import", str(src), "--format", "should-trigger", "--out", str(out)])
    assert code == 0
    assert "imported 2 queries (implicit 1, neighbor_negative 1)" in capsys.readouterr().out
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["provenance"]["origin"] == "imported"
    assert doc["provenance"]["source"] == str(src)
    assert doc["provenance"]["import_format"] == "should-trigger"
    assert main(["queries", "verify", str(out)]) == 0
    capsys.readouterr()
    assert main(["queries", "import", str(src), "--format", "nope", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("skillreach: error: unknown --format 'nope'")
    assert len(err.strip().splitlines()) == 1


def test_missing_file_and_a_one_shot_catalog(tmp_path: Path) -> None:
    from skillreach.errors import NotFoundError

    with pytest.raises(NotFoundError, match=r"nope\.json: no such file"):
        import_queries(tmp_path / "nope.json")
    path = tmp_path / "trigger-queries.deploy.json"
    path.write_text(json.dumps([{"query": "ship", "should_trigger": True}]), encoding="utf-8")
    result = import_queries(path, catalog=iter(["deploy", "rollback"]))  # a generator is read twice
    assert result.query_set.queries[0].expected_skill == "deploy"
    with pytest.raises(InputError, match=r"skill 'deploy' is not in the catalog"):
        import_queries(path, catalog=["rollback"])
