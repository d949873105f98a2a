"""The offline runtimes (fake, keyword, retriever) and the registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillreach.errors import ConfigError, NotFoundError
from skillreach.models import Catalog, Query, Skill
from skillreach.runtimes import get_runtime, known_runtimes
from skillreach.runtimes.fake import FakeRuntime
from skillreach.runtimes.keyword import KeywordRuntime, mentioned_skill
from skillreach.runtimes.retriever import RetrieverRuntime, retrieval_missed
from skillreach.study.contract import Outcome, ProbeOptions, Runtime, Tracker

CATALOG = Catalog(
    id="t",
    skills=(
        Skill(name="pdf", description="Extract text and tables from PDF files, fill PDF forms."),
        Skill(name="pdf-forms", description="Fill interactive forms inside documents."),
        Skill(name="xlsx", description="Create spreadsheets with formulas, charts and pivot tables."),
        Skill(name="rollback", description="Roll a deployment back to the previous release."),
        Skill(name="changelog", description="Write release notes and changelog entries."),
    ),
)


def q(text: str, expected: str | None = "pdf", qid: str = "q1", **kw: object) -> Query:
    kind = "implicit" if expected else "out_of_scope"
    return Query(id=qid, text=text, expected_skill=expected, kind=kind, **kw)  # type: ignore[arg-type]


async def probe(
    rt: Runtime, query: Query, catalog: Catalog = CATALOG, attempt: int = 1, **opts: object
) -> Outcome:
    return await rt.select(query, catalog, Tracker.for_query(query, ProbeOptions(**opts), attempt))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ registry


def test_registry_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(NotFoundError) as info:
        get_runtime("gpt-router")
    message = str(info.value)
    assert "unknown runtime 'gpt-router'" in message
    for name in ("fake", "keyword", "retriever", "anthropic", "claude-code"):
        assert name in message
        assert name in known_runtimes()


def test_registry_builds_offline_runtimes() -> None:
    assert isinstance(get_runtime("keyword"), KeywordRuntime)
    assert isinstance(get_runtime("fake", script={"*": ["pdf"]}), FakeRuntime)
    rt = get_runtime("retriever", k=2)
    assert isinstance(rt, RetrieverRuntime)
    assert isinstance(rt, Runtime)


# ---------------------------------------------------------------------------------------------- fake


async def test_fake_scripts_per_query_and_attempt_through_the_tracker(tmp_path: Path) -> None:
    script = {
        "q1": ["xlsx", "pdf", "rollback"],
        "q2": {"attempts": {"1": ["rollback"], "2": ["changelog"]}},
        "q3": {"attempts": [["pdf"], []]},
        "q4": {"error": "HTTP 529 overloaded_error: Overloaded"},
        "q5": ["not-resident", "pdf"],
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    rt = FakeRuntime(path)
    a = await probe(rt, q("x"))
    assert a.invoked == ["xlsx", "pdf"]
    assert a.early_exit
    assert (await probe(rt, q("x", "rollback", "q2"), attempt=2)).invoked == ["changelog"]
    assert (await probe(rt, q("x", "rollback", "q2"), attempt=1)).invoked == ["rollback"]
    assert (await probe(rt, q("x", "pdf", "q3"), attempt=4)).invoked == []
    err = await probe(rt, q("x", "pdf", "q4"))
    assert err.error == "HTTP 529 overloaded_error: Overloaded"
    assert (await probe(rt, q("x", "pdf", "q5"))).invoked == ["pdf"]
    assert (await probe(rt, q("x", "pdf", "unknown"))).invoked == []
    assert rt.calls[:2] == [("q1", 1), ("q2", 2)]


async def test_fake_compliance_fields_only_after_the_skill_loaded() -> None:
    entry = {
        "invoked": ["pdf"],
        "tool_calls": [{"tool": "Bash", "input": {"command": "make preflight"}}],
        "final_text": "done",
    }
    rt = FakeRuntime({"q1": entry, "q2": {**entry, "invoked": ["xlsx"]}})
    on = await probe(rt, q("x"), compliance=True)
    assert [c.tool for c in on.tool_calls] == ["Bash"]
    assert on.final_text == "done"
    off = await probe(rt, q("x"))
    assert off.tool_calls == []
    wrong = await probe(rt, q("x", "pdf", "q2"), compliance=True)
    assert wrong.tool_calls == []


def test_fake_bad_script_file_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text("{\n  'q1': [}")
    with pytest.raises(ConfigError, match=r"s\.json:2: the fake runtime's script is not valid JSON"):
        FakeRuntime(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        FakeRuntime(tmp_path / "missing.json")


# ------------------------------------------------------------------------------------------- keyword


def test_mentioned_skill_prefers_the_longest_then_earliest() -> None:
    names = CATALOG.names
    assert mentioned_skill("use pdf-forms on this", names) == "pdf-forms"
    assert mentioned_skill("use the PDF forms skill", names) == "pdf-forms"
    assert mentioned_skill("xlsx then pdf", names) == "xlsx"
    assert mentioned_skill("a pdfx file", names) is None
    assert mentioned_skill("nothing here", names) is None


async def test_keyword_literal_mention_then_bm25_then_nothing() -> None:
    rt = KeywordRuntime()
    assert (await probe(rt, q("please run rollback now", "rollback"))).invoked == ["rollback"]
    bm25 = await probe(rt, q("build a spreadsheet with pivot tables and charts", "xlsx"))
    assert bm25.invoked == ["xlsx"]
    assert (await probe(rt, q("what is the capital of peru", None))).invoked == []


# ----------------------------------------------------------------------------------------- retriever


async def test_retriever_shows_top_k_and_records_misses() -> None:
    inner = FakeRuntime({"*": ["rollback", "pdf"]})
    rt = RetrieverRuntime(inner, k=2)
    hit = await probe(rt, q("fill the pdf forms in this document", "pdf"))
    assert hit.retrieved is not None
    assert len(hit.retrieved) == 2
    assert set(hit.retrieved) == {"pdf", "pdf-forms"}
    assert hit.invoked == ["pdf"]  # rollback was not shown, so it cannot be invoked
    miss = await probe(rt, q("roll the deployment back to the previous release", "pdf", "q2"))
    assert "pdf" not in (miss.retrieved or [])
    assert retrieval_missed(q("x", "pdf"), miss.retrieved)
    assert rt.missed == ["q2"]
    assert miss.invoked == ["rollback"]


async def test_retriever_builds_its_inner_runtime_by_name() -> None:
    rt = RetrieverRuntime("keyword", k=3)
    out = await probe(rt, q("create spreadsheets with formulas", "xlsx"))
    assert out.invoked == ["xlsx"]
    with pytest.raises(ConfigError):
        RetrieverRuntime("retriever")
    with pytest.raises(ConfigError):
        RetrieverRuntime("keyword", k=0)
