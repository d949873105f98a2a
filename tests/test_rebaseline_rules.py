"""What re-baselining records (skillreach/baselines/rebaseline.py), pure: a baseline only goes down when a
person says so; only the gating study gates."""

from __future__ import annotations

import pytest

from skillreach.baselines.gates import Verdict, compare
from skillreach.baselines.rebaseline import (
    SkillGate,
    gate_report_markdown,
    gate_skills,
    not_compared,
    records_to_write,
    undecided,
)
from skillreach.baselines.records import BaselineRecord, RuntimePin
from skillreach.settings import GateConfig
from tests.helpers.staged import make_record

CASES = ("q0", "q1", "q2", "q3")


def record(skill: str = "deploy", *, drop: int = 0, runtime: str = "keyword", model: str = "m-1",
           judge: str | None = None, bid: str = "") -> BaselineRecord:
    """Four cases at two runs each, every one activated except the first ``drop`` cases."""
    rec = make_record({c: [0, 0] if i < drop else [1, 1] for i, c in enumerate(CASES)},
                      bid=bid or f"{skill}@{drop}")
    return rec.model_copy(update={"skill": skill, "runtime": RuntimePin(name=runtime), "model": model,
                                  "judge_model": judge})


def gate(skill: str, status: str, new: BaselineRecord | None = None) -> SkillGate:
    return SkillGate(skill, status, new if new is not None else record(skill))


# ------------------------------------------------------------------------------- what is recorded


def test_only_an_ok_gate_records_a_breach_or_an_inconclusive_drop_waits() -> None:
    results = [gate("a", "ok"), gate("b", "breach"), gate("c", "inconclusive"), gate("d", "no baseline"),
               SkillGate("e", "no queries")]
    records, candidates = records_to_write(results)
    assert [r.skill for r in records] == ["a", "d"]
    assert [r.skill for r in candidates] == ["b", "c"]


@pytest.mark.parametrize("status", ["ok", "drift"])
def test_a_model_snapshot_change_keeps_a_waiting_candidate_waiting(status: str) -> None:
    results = [gate("a", "ok"), gate("b", status), gate("c", "drift")]
    records, candidates = records_to_write(results, waiting={"b"}, drift=True)
    assert [r.skill for r in records] == ["a", "c"]  # re-recorded under the new pin
    assert [r.skill for r in candidates] == ["b"]  # a candidate under the new pin, never the baseline


def test_a_runtime_version_change_keeps_a_waiting_candidate_waiting() -> None:
    records, candidates = records_to_write([gate("a", "expired"), gate("b", "expired")], waiting={"b"})
    assert [r.skill for r in records] == ["a"]
    assert [r.skill for r in candidates] == ["b"]


def test_a_waiting_skill_whose_gate_says_ok_again_is_recorded() -> None:
    records, candidates = records_to_write([gate("b", "ok")], waiting={"b"})
    assert [r.skill for r in records] == ["b"]
    assert candidates == []


def test_an_inconclusive_drop_is_held_and_says_how_many_cases_would_decide_it() -> None:
    base, new = record(bid="deploy@base"), record(drop=1, bid="deploy@new")
    [result] = gate_skills(["deploy"], {"deploy": base}, {"deploy": new}, GateConfig())
    assert result.status == "inconclusive"  # d̂ −0.25 past −0.05, the interval reaches above 0
    records, candidates = records_to_write([result])
    assert (records, [c.baseline_id for c in candidates]) == ([], ["deploy@new"])
    assert result.comparison is not None
    [g] = [g for g in result.comparison.results if g.verdict is Verdict.inconclusive]
    assert g.advice is not None
    assert g.advice.cases_needed is not None
    text = undecided(result.comparison)
    assert text.startswith("activation changed -0.250 (95% CI -0.699 to +0.133; gate -0.050): ")
    assert f"add about {g.advice.cases_needed - 4} positive cases for deploy (now 4)" in text


def test_undecided_is_empty_for_a_decided_comparison() -> None:
    assert undecided(compare(record(), record(drop=4), GateConfig())) == ""


# ------------------------------------------------------------------------------ the gating study


def test_the_gating_study_has_the_stored_baselines_pins() -> None:
    stored = [record("a"), record("b"), None]
    assert not_compared(stored, [record("a"), record("b")]) is None
    assert not_compared(stored, [record("a", runtime="fake")]) == (
        "different runtime: baselines keyword, this study fake")
    assert not_compared(stored, [record("a", model="m-2")]) == (
        "different model: baselines m-1, this study m-2")
    assert not_compared(stored, [record("a", model="m-2")], drift=True) is None  # a snapshot change
    assert not_compared([record(judge="j-1")], [record(judge="j-2")]) == (
        "different rubric: baselines j-1, this study j-2")
    assert not_compared([record(judge="j-1")], [record()]) is None  # no rubric measured: nothing to tell
    # nothing stored, or nothing measured: nothing to tell apart
    assert not_compared([None, None], [record(runtime="fake")]) is None
    assert not_compared(stored, []) is None


def test_after_a_drift_re_baselining_the_kept_baselines_old_pin_still_gates() -> None:
    stored = [record("a", model="m-2"), record("b", model="m-1")]  # b's candidate waited across the change
    assert not_compared(stored, [record("a", model="m-2"), record("b", model="m-2")]) is None


def test_the_report_of_a_study_not_compared_says_so_once() -> None:
    text = gate_report_markdown([], [], "st-1", not_compared="different runtime: baselines keyword, this "
                                                               "study fake")
    assert text.count("Not compared: different runtime") == 1
    assert "no alert was sent" in text
    assert "|" not in text  # no table of skills


def test_the_report_names_the_candidates_kept_waiting_and_the_first_re_baselining() -> None:
    drift = gate_report_markdown([], [], "st-2", {"a": "ok", "b": "drift"}, drift=True, kept_waiting=["b"])
    assert "Candidates kept waiting under the new pin" in drift
    assert "`skillreach baseline accept NAME` decides): b." in drift
    first = gate_report_markdown([], [], "st-3", {"a": "no baseline"}, first=True)
    assert "No baselines yet: re-baselining every skill" in first
