"""Scoring against the definitions of spec/metrics.md: worked examples, scikit-learn, invariants."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import precision_recall_fscore_support

from skillreach.errors import InputError
from skillreach.models import (
    NO_SKILL,
    Catalog,
    Checks,
    ProbeRecord,
    Query,
    QueryKind,
    QuerySet,
    Skill,
    ToolCall,
    ToolPattern,
)
from skillreach.scoring import ProbeTable, score
from skillreach.scoring.artifact import PROPORTION_METRICS, RUN_METRICS, Artifact
from skillreach.scoring.intervals import wilson

OOS = QueryKind.out_of_scope


def q(qid: str, expected: str | None, *acceptable: str, text: str | None = None) -> Query:
    kind = OOS if expected is None else QueryKind.implicit
    return Query(
        id=qid,
        text=text or f"request {qid}",
        expected_skill=expected,
        acceptable_skills=acceptable,
        kind=kind,
    )


def p(qid: str, attempt: int, *invoked: str, error: str | None = None, **kw: object) -> ProbeRecord:
    return ProbeRecord(query_id=qid, attempt=attempt, invoked=invoked, error=error, **kw)  # type: ignore[arg-type]


def catalog(*names: str) -> Catalog:
    return Catalog(id="test", skills=tuple(Skill(name=n, description=f"does {n}") for n in names))


# The worked example used throughout: three queries, two attempts each.
#   q1 → pdf:  [pdf] correct; [xlsx, pdf] Turn-2 recovery (xlsx keeps its fp)
#   q2 → xlsx, docx acceptable: [docx, xlsx] → scored_inv [xlsx] correct; attempt 2 errored
#   q3 out of scope: [] abstains (correct); [pdf] false activation
WORKED_QS = QuerySet(queries=(q("q1", "pdf"), q("q2", "xlsx", "docx"), q("q3", None)))
WORKED_PROBES = [
    p("q1", 1, "pdf"),
    p("q1", 2, "xlsx", "pdf"),
    p("q2", 1, "docx", "xlsx"),
    p("q2", 2, error="rate limited after 6 retries"),
    p("q3", 1),
    p("q3", 2, "pdf"),
]


@pytest.fixture
def worked() -> Artifact:
    return score(WORKED_QS, WORKED_PROBES, catalog("pdf", "xlsx", "docx", "csv"))


def test_worked_example_run_level_metrics(worked: Artifact) -> None:
    m = worked.metrics
    assert worked.counts.probes == 6
    assert worked.counts.scored == 5
    assert worked.counts.errors == 1
    assert m.top1_accuracy == pytest.approx(3 / 5)  # q1a1, q2a1, q3a1
    assert m.entrypoint_accuracy == m.top1_accuracy
    assert m.trajectory_reachability == pytest.approx(3 / 3)  # pdf reached at turn 2 in q1a2
    assert m.step_efficiency == pytest.approx((1 + 1 / 2 + 1) / 3)
    assert m.redundancy == pytest.approx((0 + 1 + 0) / 3)
    assert m.abstention_rate == pytest.approx(1 / 5)
    assert m.false_abstention_rate == pytest.approx(0 / 3)
    assert m.oos_detection == pytest.approx(1 / 2)
    # raw_predicted: q1 {pdf, xlsx}, q2 {docx} (one scored attempt), q3 {NO_SKILL, pdf}
    assert m.consistency == pytest.approx(1 / 3)
    assert worked.denominators == {
        "top1_accuracy": 5,
        "entrypoint_accuracy": 5,
        "trajectory_reachability": 3,
        "step_efficiency": 3,
        "redundancy": 3,
        "abstention_rate": 5,
        "false_abstention_rate": 3,
        "oos_detection": 2,
        "consistency": 3,
    }
    assert set(RUN_METRICS) <= set(type(m).model_fields)


def test_worked_example_classes_and_macro(worked: Artifact) -> None:
    by = {c.label: c for c in worked.classes}
    assert [c.label for c in worked.classes] == ["csv", "docx", "pdf", "xlsx", NO_SKILL]
    pdf, xlsx, none, docx = by["pdf"], by["xlsx"], by[NO_SKILL], by["docx"]
    assert (pdf.support, pdf.predicted, pdf.tp, pdf.fp, pdf.fn) == (2, 2, 1, 1, 1)
    assert (xlsx.support, xlsx.predicted, xlsx.tp, xlsx.fp, xlsx.fn) == (1, 2, 1, 1, 0)
    assert (none.support, none.predicted, none.tp, none.fp, none.fn) == (2, 1, 1, 0, 1)
    assert (docx.support, docx.predicted, docx.fp) == (0, 0, 0)  # acceptable: never blamed
    assert docx.precision == 0.0
    assert docx.recall is None
    assert docx.f1 is None
    assert docx.recall_ci is None
    assert docx.precision_ci is None
    assert xlsx.f1 == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert pdf.trajectory_recall == 1.0  # reached in both q1 probes though recall is 0.5
    assert pdf.recall == 0.5
    assert none.trajectory_recall == 0.5
    assert pdf.recall_ci == pytest.approx(wilson(1, 2))
    assert xlsx.precision_ci == pytest.approx(wilson(1, 2))
    assert worked.metrics.macro_precision == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert worked.metrics.macro_recall == pytest.approx((0.5 + 1.0 + 0.5) / 3)
    assert worked.metrics.macro_f1 == pytest.approx((0.5 + 2 / 3 + 2 / 3) / 3)


def test_worked_example_by_kind(worked: Artifact) -> None:
    kinds = {k.kind: k for k in worked.by_kind}
    assert set(kinds) == {"implicit", "out_of_scope"}
    implicit, oos = kinds["implicit"], kinds["out_of_scope"]
    assert (implicit.queries, implicit.scored) == (2, 3)
    assert implicit.top1_accuracy == pytest.approx(2 / 3)
    assert implicit.top1_ci == pytest.approx(wilson(2, 3))
    assert implicit.trajectory_reachability == 1.0
    assert implicit.abstention_rate == 0.0
    assert (oos.queries, oos.scored, oos.top1_accuracy, oos.abstention_rate) == (1, 2, 0.5, 0.5)
    assert oos.trajectory_reachability is None


def test_worked_example_confusion_collisions_attractors(worked: Artifact) -> None:
    cells = {(c.expected, c.predicted): c.count for c in worked.confusion}
    assert cells == {
        ("pdf", "pdf"): 1,
        ("pdf", "xlsx"): 1,
        ("xlsx", "xlsx"): 1,
        (NO_SKILL, NO_SKILL): 1,
        (NO_SKILL, "pdf"): 1,
    }
    pairs = {(c.expected, c.predicted): c for c in worked.collisions}
    assert set(pairs) == {("pdf", "xlsx"), (NO_SKILL, "pdf")}
    assert [s.query_id for s in pairs[("pdf", "xlsx")].samples] == ["q1"]
    assert pairs[("pdf", "xlsx")].samples[0].text == "request q1"
    assert [(a.skill, a.fp) for a in worked.top_attractors] == [("pdf", 1), ("xlsx", 1)]
    assert worked.top_attractors[1].pulled_from[0].expected == "pdf"


def test_worked_example_intervals(worked: Artifact) -> None:
    assert set(worked.intervals) == set(PROPORTION_METRICS)
    assert worked.intervals["top1_accuracy"] == pytest.approx(wilson(3, 5))
    assert worked.intervals["consistency"] == pytest.approx(wilson(1, 3))
    assert worked.intervals["false_abstention_rate"] == (0.0, pytest.approx(wilson(0, 3)[1]))  # type: ignore[index]


def test_outcomes_one_row_per_probe(worked: Artifact) -> None:
    rows = list(worked.outcomes)
    assert len(rows) == 6
    assert [(o.query_id, o.attempt) for o in rows] == [(f"q{i}", a) for i in (1, 2, 3) for a in (1, 2)]
    q2a1 = rows[2]
    assert q2a1.invoked == ("docx", "xlsx")
    assert q2a1.scored_inv == ("xlsx",)
    assert q2a1.acceptable == ("docx",)
    assert q2a1.predicted == "xlsx"
    errored = rows[3]
    assert errored.error == "rate limited after 6 retries"
    assert errored.predicted is None
    assert not errored.scored
    assert rows[4].predicted == NO_SKILL
    assert rows[4].kind == "out_of_scope"
    assert rows[4].truth == NO_SKILL
    assert worked.outcomes[-1] == rows[-1]
    assert worked.outcomes[1:3] == rows[1:3]


def test_null_denominators() -> None:
    qs = QuerySet(queries=(q("a", "pdf"),))
    art = score(qs, [p("a", 1, "pdf")], catalog("pdf"))
    assert art.metrics.oos_detection is None
    assert art.intervals["oos_detection"] is None
    assert art.denominators["oos_detection"] == 0
    only_errors = score(qs, [p("a", 1, error="boom"), p("a", 2, error="boom")], catalog("pdf"))
    assert only_errors.counts.scored == 0
    assert only_errors.counts.errors == 2
    for name in RUN_METRICS:
        assert only_errors.metric(name) is None, name
    assert only_errors.metrics.macro_precision is None
    assert all(v is None for v in only_errors.intervals.values())


def test_consistency_uses_raw_predicted() -> None:
    # Same predicted (pdf) on both attempts, but attempt 1 read the acceptable skill first.
    qs = QuerySet(queries=(q("a", "pdf", "guide"),))
    art = score(qs, [p("a", 1, "guide", "pdf"), p("a", 2, "pdf")], catalog("pdf", "guide"))
    assert art.metrics.top1_accuracy == 1.0
    assert art.metrics.consistency == 0.0
    same = score(qs, [p("a", 1, "pdf"), p("a", 2, "pdf"), p("a", 3, error="x")], catalog("pdf", "guide"))
    assert same.metrics.consistency == 1.0  # the errored attempt is not compared


def test_without_catalog_labels_are_inferred() -> None:
    art = score(WORKED_QS, WORKED_PROBES)
    assert art.catalog.strategy == "inferred"
    assert art.catalog.skills == ["docx", "pdf", "xlsx"]
    assert art.catalog.digest is None
    assert [c.label for c in art.classes] == ["docx", "pdf", "xlsx", NO_SKILL]
    with_cat = score(WORKED_QS, WORKED_PROBES, catalog("pdf", "xlsx", "docx"))
    assert art.metrics == with_cat.metrics
    assert with_cat.catalog.digest == catalog("pdf", "xlsx", "docx").digest
    assert with_cat.catalog.descriptions["pdf"] == "does pdf"


def test_probe_of_unknown_query_is_refused_naming_it() -> None:
    with pytest.raises(InputError, match=r"probe:2: probe of query 'nope', which is not in the query set"):
        score(WORKED_QS, [p("q1", 1, "pdf"), p("nope", 1, "pdf")])


def test_skills_outside_the_catalog_are_labels_with_a_warning() -> None:
    # a stray invocation (the harness saw a skill it should not) still counts against the query
    art = score(WORKED_QS, [p("q1", 1, "ghost")], catalog("pdf", "xlsx"))
    ghost = art.class_stats("ghost")
    assert ghost is not None
    assert (ghost.fp, ghost.predicted) == (1, 1)
    assert art.catalog.skills == ["pdf", "xlsx"]
    assert any("outside catalog 'test': ghost; is the harness isolated?" in w for w in art.warnings)
    # an expected skill that is not resident (singleton / neighbourhood catalogs) can only be missed
    single = score(WORKED_QS, [p("q1", 1), p("q2", 1, "xlsx")], catalog("xlsx"))
    pdf = single.class_stats("pdf")
    assert pdf is not None
    assert (pdf.support, pdf.recall) == (1, 0.0)
    assert any("not in catalog 'test', so never reachable: pdf" in w for w in single.warnings)
    # an acceptable skill outside the catalog is removed before anything is counted, without a warning
    art = score(WORKED_QS, [p("q2", 1, "docx", "xlsx")], catalog("pdf", "xlsx"))
    assert art.metrics.top1_accuracy == 1.0
    assert not any("outside" in w for w in art.warnings)
    docx = art.class_stats("docx")
    assert docx is not None
    assert not docx.active


def test_mixed_studies_are_refused() -> None:
    with pytest.raises(InputError, match="fingerprints"):
        score(WORKED_QS, [p("q1", 1, fingerprint="a"), p("q1", 2, fingerprint="b")])
    with pytest.raises(InputError, match="different runtimes"):
        score(WORKED_QS, [p("q1", 1, runtime="fake"), p("q1", 2, runtime="anthropic")])


def test_later_record_supersedes_earlier() -> None:
    probes = [p("q1", 1, error="timeout", cost_usd=0.5), p("q1", 1, "pdf", cost_usd=0.25)]
    art = score(WORKED_QS, probes, attempts=1)
    assert art.counts.probes == 1
    assert art.counts.superseded == 1
    assert art.counts.errors == 0
    assert art.metrics.top1_accuracy == 1.0
    assert art.usage.cost_usd == pytest.approx(0.75)  # both were paid for
    assert art.counts.missing == 2  # q2 and q3 never probed
    assert any("superseded" in w for w in art.warnings)


def test_usage_totals_and_runtime() -> None:
    from skillreach.models import Usage

    u = Usage(input_tokens=10, output_tokens=2, cache_creation_input_tokens=3, cache_read_input_tokens=4)
    probes = [
        p(
            "q1",
            1,
            "pdf",
            usage=u,
            cost_usd=0.1,
            runtime="fake",
            model="m",
            resolved_model="m-1",
            duration_ms=5,
        ),
        p("q3", 1, usage=u, runtime="fake", model="m", resolved_model="m-1", duration_ms=7),
    ]
    art = score(WORKED_QS, probes)
    assert art.usage.input_tokens == 20
    assert art.usage.cache_read_input_tokens == 8
    assert art.usage.cost_usd == pytest.approx(0.1)
    assert art.usage.priced_probes == 1
    assert art.usage.duration_ms == 12
    assert (art.runtime.name, art.runtime.model, art.runtime.resolved_model) == ("fake", "m", "m-1")
    given_rt = score(WORKED_QS, probes, runtime_info={"name": "fake", "max_turns": 3, "early_exit": True})
    assert given_rt.runtime.max_turns == 3


def test_compliance_and_quality_from_evaluate_probe() -> None:
    checks = Checks(requires=(ToolPattern(tool="Bash", pattern="make preflight"),))
    qs = QuerySet(queries=(Query(id="c", text="ship it", expected_skill="deploy", checks=checks),))
    probes = [
        p("c", 1, "deploy", tool_calls=(ToolCall(tool="Bash", input={"command": "make preflight"}),)),
        p("c", 2, "deploy", tool_calls=(ToolCall(tool="Bash", input={"command": "rm -rf /"}),)),
        p("c", 3, "other"),
    ]
    art = score(qs, probes)
    assert [o.compliance for o in art.outcomes] == [True, False, None]
    assert [o.quality for o in art.outcomes] == [None, None, None]


# ------------------------------------------------------------------------------- probes.jsonl reading


def _line(rec: ProbeRecord) -> bytes:
    return rec.to_json_line().encode() + b"\n"


def test_from_lines_equals_from_records() -> None:
    lines = [_line(r) for r in WORKED_PROBES]
    a = score(WORKED_QS, ProbeTable.from_lines(lines))
    b = score(WORKED_QS, WORKED_PROBES)
    assert a.model_dump(exclude={"warnings"}) == b.model_dump(exclude={"warnings"})
    minimal = [b'{"query_id": "q1", "invoked": ["pdf"]}\n', b"\n", b'{"query_id": "q3"}\n']
    art = score(WORKED_QS, ProbeTable.from_lines(minimal))
    assert art.counts.probes == 2
    assert art.metrics.top1_accuracy == 1.0


def test_a_rich_key_spelled_with_an_escape_is_still_read(tmp_path: Path) -> None:
    """A block without the rich keys is decoded without them; one that spells a key with a \\u escape
    (``final\\u005ftext`` is ``final_text``) is not mistaken for such a block."""
    plain = b'{"query_id": "q1", "attempt": 1, "invoked": ["pdf"]}\n'
    escaped = b'{"query_id": "q2", "attempt": 1, "invoked": ["pdf"], "final\\u005ftext": "done"}\n'
    path = _file(tmp_path, [plain, escaped])
    with path.open("rb") as fh:
        fast = ProbeTable.from_lines(fh, source="p.jsonl")
    slow = ProbeTable.from_lines([plain, escaped], source="p.jsonl")
    _tables_equal(fast, slow)
    assert sorted(fast.rich) == [1]
    assert fast.record(1).final_text == "done"
    with _file(tmp_path, [plain, plain]).open("rb") as fh:
        assert ProbeTable.from_lines(fh, source="p.jsonl").rich == {}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"attempt": 1}', r"p\.jsonl:2: field 'query_id' must be a non-empty string"),
        (b'{"query_id": "q1", "attempt": 0}', r"p\.jsonl:2: field 'attempt' must be an integer"),
        (b'{"query_id": "q1", "invoked": "pdf"}', r"p\.jsonl:2: field 'invoked' must be a list"),
        (b'{"query_id": "q1", "invoked": [1]}', r"p\.jsonl:2: field 'invoked' must be a list"),
        (b'{"query_id": "q1", "invoked": [["x"]]}', r"p\.jsonl:2: field 'invoked' must be a list"),
        (b'{"query_id": "q1", "invoked": ["(no skill)"]}', r"p\.jsonl:2: field 'invoked' names"),
        (b'{"query_id": "q1", "error": 3}', r"p\.jsonl:2: field 'error'"),
        (b'{"query_id": "q1", "usage": {"input_tokens": -1}}', r"p\.jsonl:2: field 'usage.input_tokens'"),
        (b'{"query_id": "q1", "cost_usd": "1"}', r"p\.jsonl:2: field 'cost_usd'"),
        (b"[1, 2]", r"p\.jsonl:2: a probe line must be a JSON object"),
        (b'{"query_id": ', r"p\.jsonl:2: not valid JSON"),
    ],
)
def test_bad_lines_name_file_line_and_field(line: bytes, message: str) -> None:
    good = _line(p("q1", 1, "pdf"))
    with pytest.raises(InputError, match=message):
        ProbeTable.from_lines([good, line + b"\n", good], source="p.jsonl")


def test_truncated_last_line_is_skipped_with_a_warning() -> None:
    lines = [_line(p("q1", 1, "pdf")), b'{"query_id": "q1", "att']
    table = ProbeTable.from_lines(lines, source="p.jsonl")
    assert len(table) == 1
    assert table.warnings == ["p.jsonl:2: last line cut short (not valid JSON); skipped"]
    assert "cut short" in score(WORKED_QS, table).warnings[0]
    with pytest.raises(InputError, match=r"p\.jsonl:2: not valid JSON"):
        ProbeTable.from_lines([*lines, _line(p("q1", 2))], source="p.jsonl")


def test_rich_lines_keep_what_compliance_needs(tmp_path: Path) -> None:
    rec = p("q1", 1, "pdf", tool_calls=(ToolCall(tool="Bash", input={"c": "x"}),), final_text="done")
    table = ProbeTable.from_lines([_line(rec)])
    assert table.record(0) == rec
    plain = ProbeTable.from_lines([_line(p("q1", 1, "pdf"))])
    assert plain.record(0) == p("q1", 1, "pdf")


def _file(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def _tables_equal(a: ProbeTable, b: ProbeTable) -> None:
    for name in ("query_vocab", "skill_vocab", "errors", "usage", "cost_usd", "priced", "duration_ms",
                 "runtimes", "models", "resolved_models", "fingerprints", "warnings"):  # fmt: skip
        assert getattr(a, name) == getattr(b, name), name
    for name in ("q", "attempt", "inv_flat", "inv_off", "lines"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert sorted(a.rich) == sorted(b.rich)
    assert all(a.record(i) == b.record(i) for i in range(len(a)))


@pytest.mark.parametrize("block", [64, 1 << 23])
def test_a_file_is_read_in_blocks_equal_to_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """The block reader (msgspec) gives the table the line-by-line reader gives: blank lines, usage
    with nulls, rich lines, a torn last line, blocks cut anywhere."""
    import skillreach.scoring._decoders as decoders

    monkeypatch.setattr(decoders, "_BLOCK", block)
    rich = p("q1", 3, "pdf", tool_calls=(ToolCall(tool="Bash", input={"c": "x"}),), final_text="done")
    lines = [
        *(
            _line(r.model_copy(update={"cost_usd": 0.25, "duration_ms": 7, "runtime": "fake"}))
            for r in WORKED_PROBES
        ),
        b"\n",
        b'  {"query_id": "q2", "attempt": 4, "usage": {"input_tokens": null, "output_tokens": 3}}\n',
        _line(rich),
        b'{"query_id": "q3", "attempt": 5, "duration_ms": 2.5, "cost_usd": 1, "model": "m"}\n',
        b'{"query_id": "q1", "att',
    ]
    path = _file(tmp_path, lines)
    with path.open("rb") as fh:
        fast = ProbeTable.from_lines(fh, source="p.jsonl")
    slow = ProbeTable.from_lines(lines, source="p.jsonl")
    _tables_equal(fast, slow)
    assert fast.warnings == ["p.jsonl:11: last line cut short (not valid JSON); skipped"]
    tokens = sum(r.usage.input_tokens for r in WORKED_PROBES) + rich.usage.input_tokens
    assert fast.usage["input_tokens"] == tokens
    assert fast.record(len(fast) - 2) == rich


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"attempt": 1}', r"p\.jsonl:2: field 'query_id' must be a non-empty string"),
        (b'{"query_id": "  "}', r"p\.jsonl:2: field 'query_id' must be a non-empty string"),
        (b'{"query_id": "q1", "attempt": 0}', r"p\.jsonl:2: field 'attempt' must be an integer"),
        (b'{"query_id": "q1", "attempt": true}', r"p\.jsonl:2: field 'attempt' must be an integer"),
        (b'{"query_id": "q1", "invoked": [""]}', r"p\.jsonl:2: field 'invoked' must be a list"),
        (b'{"query_id": "q1", "invoked": ["(no skill)"]}', r"p\.jsonl:2: field 'invoked' names"),
        (b'{"query_id": "q1", "usage": {"input_tokens": -1}}', r"p\.jsonl:2: field 'usage.input_tokens'"),
        (b'{"query_id": "q1", "cost_usd": "1"}', r"p\.jsonl:2: field 'cost_usd'"),
        (b'{"query_id": "q1", "duration_ms": 1e400}', r"p\.jsonl:2: not valid JSON"),
        (b"[1, 2]", r"p\.jsonl:2: a probe line must be a JSON object"),
        (b'{"query_id": ', r"p\.jsonl:2: not valid JSON"),
    ],
)
def test_bad_lines_in_a_file_name_file_line_and_field(tmp_path: Path, line: bytes, message: str) -> None:
    good = _line(p("q1", 1, "pdf"))
    path = _file(tmp_path, [good, line + b"\n", good])
    with path.open("rb") as fh, pytest.raises(InputError, match=message):
        ProbeTable.from_lines(fh, source="p.jsonl")


# --------------------------------------------------------------------------------- against sklearn


def _random_study(seed: int, n_queries: int = 40, attempts: int = 3) -> tuple[QuerySet, list[ProbeRecord]]:
    rng = np.random.default_rng(seed)
    skills = ["alpha", "beta", "gamma", "delta", "eps"]
    queries = []
    for i in range(n_queries):
        expected = None if rng.random() < 0.2 else str(rng.choice(skills))
        others = [s for s in skills if s != expected]
        acceptable = tuple(rng.choice(others, size=int(rng.integers(0, 2)), replace=False).tolist())
        queries.append(q(f"q{i:03d}", expected, *acceptable))
    probes = []
    for qu in queries:
        for a in range(1, attempts + 1):
            if rng.random() < 0.05:
                probes.append(p(qu.id, a, error="boom"))
                continue
            n = int(rng.integers(0, 4))
            probes.append(p(qu.id, a, *rng.choice(skills, size=n).tolist()))
    return QuerySet(queries=tuple(queries)), probes


@pytest.mark.parametrize("seed", range(8))
def test_per_class_against_sklearn(seed: int) -> None:
    qs, probes = _random_study(seed)
    art = score(qs, probes, catalog("alpha", "beta", "gamma", "delta", "eps", "unused"))
    labels = [c.label for c in art.classes]
    scored = [o for o in art.outcomes if o.scored]
    y_true = [o.truth for o in scored]
    y_pred = [o.predicted for o in scored]
    prec, rec, f1, support = precision_recall_fscore_support(
        y_true, y_pred, labels=labels, average=None, zero_division=0
    )
    for i, c in enumerate(art.classes):
        assert c.support == support[i]
        assert c.precision == pytest.approx(prec[i], abs=1e-12)
        if c.support == 0:
            assert c.recall is None
            assert c.f1 is None
        else:
            assert c.recall == pytest.approx(rec[i], abs=1e-12)
            assert c.f1 == pytest.approx(f1[i], abs=1e-12)
    active = [i for i, c in enumerate(art.classes) if c.support or c.predicted]
    supported = [i for i, c in enumerate(art.classes) if c.support]
    assert art.metrics.macro_precision == pytest.approx(float(np.mean(prec[active])))
    assert art.metrics.macro_recall == pytest.approx(float(np.mean(rec[supported])))
    assert art.metrics.macro_f1 == pytest.approx(float(np.mean(f1[supported])))
    # sklearn's own macro over the active/supported labels agrees too
    _, r_macro, _, _ = precision_recall_fscore_support(
        y_true, y_pred, labels=[labels[i] for i in supported], average="macro", zero_division=0
    )
    assert art.metrics.macro_recall == pytest.approx(r_macro)


def test_a_never_seen_catalog_skill_changes_no_macro_figure() -> None:
    qs, probes = _random_study(3)
    small = score(qs, probes, catalog("alpha", "beta", "gamma", "delta", "eps"))
    big = score(qs, probes, catalog("alpha", "beta", "gamma", "delta", "eps", "x1", "x2"))
    for name in ("macro_precision", "macro_recall", "macro_f1"):
        assert small.metric(name) == big.metric(name)


# ---------------------------------------------------------------------------------------- properties

SKILLS = ["a", "b", "c", "d"]


@st.composite
def studies(draw: st.DrawFn) -> tuple[QuerySet, list[ProbeRecord]]:
    n = draw(st.integers(1, 8))
    queries = []
    for i in range(n):
        expected = draw(st.sampled_from([None, *SKILLS]))
        acceptable = tuple(
            draw(st.lists(st.sampled_from([s for s in SKILLS if s != expected]), max_size=2, unique=True))
        )
        queries.append(q(f"q{i}", expected, *acceptable))
    probes = []
    for qu in queries:
        for a in range(1, draw(st.integers(1, 3)) + 1):
            if draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans()):
                probes.append(p(qu.id, a, error="boom"))
            else:
                probes.append(p(qu.id, a, *draw(st.lists(st.sampled_from(SKILLS), max_size=3))))
    return QuerySet(queries=tuple(queries)), probes


def _point_in(ci: tuple[float, float] | None, value: float | None) -> None:
    if ci is None:
        assert value is None
        return
    lo, hi = ci
    assert 0.0 <= lo <= hi <= 1.0
    assert value is not None
    assert lo <= value <= hi


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(studies())
def test_invariants(study: tuple[QuerySet, list[ProbeRecord]]) -> None:
    qs, probes = study
    art = score(qs, probes, catalog(*SKILLS))
    scored = art.counts.scored
    assert sum(c.fp for c in art.classes) == sum(c.fn for c in art.classes)
    assert sum(c.predicted for c in art.classes) == scored
    assert sum(c.support for c in art.classes) == scored
    assert sum(c.count for c in art.confusion) == scored
    assert art.counts.probes == art.counts.scored + art.counts.errors
    for name in PROPORTION_METRICS:
        _point_in(art.intervals[name], art.metric(name))
    for c in art.classes:
        _point_in(c.recall_ci, c.recall)
        if c.precision_ci is not None:
            _point_in(c.precision_ci, c.precision)
        for v in (c.precision, c.recall, c.f1, c.trajectory_recall):
            assert v is None or 0.0 <= v <= 1.0
        if c.recall is not None:
            assert c.trajectory_recall is not None
    # acceptable skills are never blamed: never a prediction of their query, so never its fp
    for o in art.outcomes:
        assert not set(o.scored_inv) & set(o.acceptable)
        assert o.predicted not in o.acceptable
    for c in art.classes:
        blamed = sum(1 for o in art.outcomes if o.scored and o.predicted == c.label != o.truth)
        assert c.fp == blamed
    for name in RUN_METRICS:
        value = art.metric(name)
        assert value is None or math.isfinite(value)


@settings(max_examples=100, deadline=None)
@given(studies(), st.integers(4, 6))
def test_errored_probes_change_no_rate(study: tuple[QuerySet, list[ProbeRecord]], attempt: int) -> None:
    qs, probes = study
    base = score(qs, probes, catalog(*SKILLS))
    extra = [p(qu.id, attempt, "a", error="529 overloaded") for qu in qs.queries]
    more = score(qs, [*probes, *extra], catalog(*SKILLS))
    assert more.counts.errors == base.counts.errors + len(qs.queries)
    assert more.metrics == base.metrics
    assert more.intervals == base.intervals
    assert more.classes == base.classes
    assert more.confusion == base.confusion


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SKILLS), st.sampled_from(SKILLS))
def test_turn2_recovery_raises_trajectory_recall_not_recall(expected: str, distractor: str) -> None:
    if expected == distractor:
        return
    qs = QuerySet(queries=(q("x", expected),))
    missed = score(qs, [p("x", 1, distractor)], catalog(*SKILLS))
    recovered = score(qs, [p("x", 1, distractor, expected)], catalog(*SKILLS))
    before, after = missed.class_stats(expected), recovered.class_stats(expected)
    assert before is not None
    assert after is not None
    assert after.recall == before.recall == 0.0
    assert (before.trajectory_recall, after.trajectory_recall) == (0.0, 1.0)
    assert recovered.class_stats(distractor).fp == 1  # type: ignore[union-attr]
    assert recovered.metrics.trajectory_reachability == 1.0
    assert recovered.metrics.top1_accuracy == 0.0


def test_outcomes_survive_json(worked: Artifact) -> None:
    data = json.loads(worked.model_dump_json())
    again = Artifact.model_validate(data)
    assert again.outcomes == worked.outcomes
    assert again == worked


def test_empty_logs_and_sets_score_to_nulls() -> None:
    from skillreach.reports import render_html, render_markdown

    qs = QuerySet(queries=(q("a", "x"),))
    art = score(qs, [])
    assert (art.counts.probes, art.counts.missing) == (0, 1)
    assert art.metrics.top1_accuracy is None
    assert art.warnings == ["1 of 1 query × attempt pairs have no probe"]
    empty = score(QuerySet(queries=()), [])
    assert [c.label for c in empty.classes] == [NO_SKILL]
    for a in (art, empty):  # reports render without a single scored probe
        assert "n/a" in render_html(a)
        assert "n/a" in render_markdown(a)


def test_duplicate_query_ids_are_refused() -> None:
    qs = QuerySet(queries=(q("a", "x"), q("a", "y")))
    with pytest.raises(InputError, match="query id 'a' appears twice"):
        score(qs, [])
