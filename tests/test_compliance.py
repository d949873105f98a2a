"""Per-probe compliance and quality: skillreach.queries.compliance.evaluate_probe."""

from __future__ import annotations

import pytest

from skillreach.errors import InputError
from skillreach.models import Checks, OutputCheck, ProbeRecord, Query, ToolCall, ToolPattern
from skillreach.queries.compliance import blend_quality, evaluate_probe, matches, validate_checks


def _query(**checks: object) -> Query:
    return Query(id="q1", text="deploy it", expected_skill="deploy", checks=Checks(**checks))  # type: ignore[arg-type]


def _probe(calls: list[tuple[str, dict[str, object]]] | None = None, **kw: object) -> ProbeRecord:
    base: dict[str, object] = {"query_id": "q1", "invoked": ("deploy",), "final_text": "done"}
    base.update(kw)
    return ProbeRecord(
        tool_calls=tuple(ToolCall(tool=t, input=i) for t, i in (calls or [])),
        **base,  # type: ignore[arg-type]
    )


REQ = {"requires": (ToolPattern(tool="Bash", pattern="make preflight"),)}
FORB = {"forbids": (ToolPattern(tool="*", pattern=r"--force\b"),)}


def test_compliant_when_required_seen_and_nothing_forbidden() -> None:
    calls = [("Bash", {"command": "make preflight && make deploy"})]
    j = evaluate_probe(_query(**REQ, **FORB), _probe(calls))
    assert j.compliance is True
    assert j.failed == ()
    assert j.quality is None  # no output/rubric checks


def test_missing_required_action_fails_and_is_named() -> None:
    j = evaluate_probe(_query(**REQ), _probe([("Bash", {"command": "make deploy"})]))
    assert j.compliance is False
    assert j.failed == ("required Bash /make preflight/ not observed",)


def test_forbidden_action_fails_with_call_index() -> None:
    calls = [("Bash", {"command": "make preflight"}), ("Write", {"path": "x", "content": "git push --force"})]
    j = evaluate_probe(_query(**REQ, **FORB), _probe(calls))
    assert j.compliance is False
    assert j.failed == (r"forbidden * /--force\b/ observed (call #2)",)


def test_tool_name_must_match_unless_star_and_is_case_insensitive() -> None:
    p = ToolPattern(tool="Bash", pattern="make")
    assert matches(p, ToolCall(tool="bash", input={"command": "make"}))
    assert not matches(p, ToolCall(tool="Write", input={"content": "make"}))
    assert matches(ToolPattern(tool="*", pattern="make"), ToolCall(tool="Write", input={"content": "make"}))
    assert matches(ToolPattern(tool="Read", pattern=""), ToolCall(tool="Read", input={"path": "a"}))


def test_pattern_searches_json_and_unescaped_strings() -> None:
    call = ToolCall(tool="Bash", input={"command": 'grep "TODO" src', "timeout": 5})
    # unescaped string value
    assert matches(ToolPattern(tool="Bash", pattern='grep "TODO"'), call)
    # the JSON form: keys and non-string values are searchable
    assert matches(ToolPattern(tool="Bash", pattern=r'"timeout": 5'), call)
    assert matches(ToolPattern(tool="Bash", pattern=r'^\{"command"'), call)
    assert not matches(ToolPattern(tool="Bash", pattern="todo"), call)  # case-sensitive
    assert matches(ToolPattern(tool="Bash", pattern="(?i)todo"), call)


@pytest.mark.parametrize(
    ("probe_kw", "why"),
    [
        ({"invoked": ("other",)}, "expected skill 'deploy' not activated"),
        ({"invoked": ()}, "expected skill 'deploy' not activated"),
        ({"error": "boom"}, "probe errored"),
        ({"final_text": None}, "probe did not go past routing"),
    ],
)
def test_compliance_not_applicable(probe_kw: dict[str, object], why: str) -> None:
    j = evaluate_probe(_query(**REQ), _probe([], **probe_kw))
    assert j.compliance is None
    assert j.skipped == why


def test_no_compliance_checks_or_no_checks_at_all() -> None:
    assert evaluate_probe(_query(), _probe()).compliance is None
    q = Query(id="q1", text="x", expected_skill="deploy")
    j = evaluate_probe(q, _probe())
    assert (j.compliance, j.quality, j.failed) == (None, None, ())


def test_activated_after_a_distractor_still_counts() -> None:
    calls = [("Bash", {"command": "make preflight"})]
    j = evaluate_probe(_query(**REQ), _probe(calls, invoked=("x", "deploy")))
    assert j.compliance is True


def test_tool_calls_without_final_text_still_judged() -> None:
    # the step budget ran out: calls recorded, no final answer
    j = evaluate_probe(_query(**REQ), _probe([("Bash", {"command": "make preflight"})], final_text=None))
    assert j.compliance is True
    assert j.quality is None


def test_quality_assertions_only() -> None:
    q = _query(
        output=(
            OutputCheck(contains="Deployed"),
            OutputCheck(not_contains="error"),
            OutputCheck(regex=r"^version \d+$"),
        )
    )
    j = evaluate_probe(q, _probe(final_text="Deployed\nversion 12\nno error"))
    assert j.quality == pytest.approx(2 / 3)
    assert j.failed == ("output should not contain 'error'",)
    assert (j.assertions_passed, j.assertions_total) == (2, 3)


def test_quality_rubric_only_and_blend() -> None:
    rubric_only = _query(rubric="Explains the rollback plan")
    assert evaluate_probe(rubric_only, _probe(rubric_grade=0.4)).quality == pytest.approx(0.4)
    both = _query(output=(OutputCheck(contains="done"), OutputCheck(contains="nope")), rubric="r")
    j = evaluate_probe(both, _probe(rubric_grade=1.0))
    assert j.quality == pytest.approx((0.5 + 1.0) / 2)
    assert j.rubric_grade == 1.0


def test_rubric_without_grade() -> None:
    only = evaluate_probe(_query(rubric="r"), _probe())
    assert only.quality is None
    assert "rubric not graded" in only.failed[0]
    with_assertions = evaluate_probe(_query(output=(OutputCheck(contains="done"),), rubric="r"), _probe())
    assert with_assertions.quality == 1.0


def test_quality_does_not_need_activation_but_needs_an_answer() -> None:
    q = _query(output=(OutputCheck(contains="done"),))
    assert evaluate_probe(q, _probe(invoked=())).quality == 1.0
    assert evaluate_probe(q, _probe(final_text=None)).quality is None
    assert evaluate_probe(q, _probe(error="x")).quality is None


def test_blend_clamps_and_handles_absence() -> None:
    assert blend_quality(0, 0, None) is None
    assert blend_quality(1, 2, None) == 0.5
    assert blend_quality(0, 0, 1.7) == 1.0


def test_bad_regex_is_a_clear_input_error() -> None:
    q = _query(requires=(ToolPattern(tool="Bash", pattern="make ("),))
    msg = r"query 'q1': checks.requires\[0\].pattern 'make \(' is not a valid"
    with pytest.raises(InputError, match=msg):
        validate_checks(q)
    with pytest.raises(InputError):
        evaluate_probe(q, _probe())


def test_probe_of_another_query_is_refused() -> None:
    with pytest.raises(ValueError, match="judged against"):
        evaluate_probe(_query(), _probe(query_id="q2"))


def test_judgement_is_frozen() -> None:
    j = evaluate_probe(_query(**REQ), _probe())
    with pytest.raises(AttributeError):
        j.compliance = True  # type: ignore[misc]
