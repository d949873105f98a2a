"""Rubric grading inside the study flow (``flow.fn``, no Prefect server): grades on disk as they
arrive, scored into task quality, kept by the store, never re-graded on resume; and the in-process
study of ``skillreach check`` running the same tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skillreach.errors import ConfigError, ProbeFailed
from skillreach.flows.service import nightly_compliance
from skillreach.flows.study import study
from skillreach.models import Checks, ProbeRecord, Query
from skillreach.study.grading import apply_grades, grade_key, needs_grading, valid_grades
from skillreach.study.judge import FAKE_JUDGE_MODEL, FakeJudge, JudgeRequest, JudgeResult, rubric_version
from skillreach.study.probe_log import read_probes
from tests.helpers.rubrics import ANSWERS, RUBRIC, with_rubrics
from tests.helpers.world import cfg, run, store_of


class Counting:
    """Counts FakeJudge.grade calls; optionally fails (not a ProbeFailed: a crash) after ``crash_after``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, crash_after: int | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        original = FakeJudge.grade
        counter = self

        async def grade(judge: FakeJudge, request: JudgeRequest) -> JudgeResult:
            if crash_after is not None and len(counter.calls) >= crash_after:
                raise RuntimeError("the judge's host went away")
            counter.calls.append((request.query_id, request.final_answer))
            return await original(judge, request)

        monkeypatch.setattr(FakeJudge, "grade", grade)


def test_the_flow_grades_rubrics_durably_and_scores_them(world: dict[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLREACH_JUDGE_MODEL", raising=False)
    with_rubrics(world)
    judge = Counting(monkeypatch)
    out = run(nightly_compliance, cfg(world, "nightly"))
    folder = Path(out["out"])
    assert len(judge.calls) == 6  # three rubric queries × two attempts
    # the probe log holds what the runtime did; graded.jsonl what the judge said
    assert all(p.rubric_grade is None for p in read_probes(folder / "probes.jsonl"))
    graded = {(p.query_id, p.attempt): p.rubric_grade for p in read_probes(folder / "graded.jsonl")}
    assert graded == {(q, a): pytest.approx(g) for q, (_, g) in ANSWERS.items() for a in (1, 2)}
    version = rubric_version(RUBRIC, FAKE_JUDGE_MODEL)
    assert {p.rubric_version for p in read_probes(folder / "graded.jsonl")} == {version}
    from skillreach.scoring.artifact import read_artifact

    artifact = read_artifact(folder / "artifact.json")
    quality = {(o.query_id, o.attempt): o.quality for o in artifact.outcomes if o.quality is not None}
    assert quality == {(q, a): pytest.approx(g) for q, (_, g) in ANSWERS.items() for a in (1, 2)}
    with store_of(world) as s:
        stored = {(p.query_id, p.attempt): p.rubric_grade for p in s.probes(out["study_id"])}
    assert {k: v for k, v in stored.items() if v is not None} == graded


def test_resume_never_regrades_and_a_crash_keeps_the_grades_paid_for(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SKILLREACH_JUDGE_MODEL", raising=False)
    with_rubrics(world)
    config = cfg(world, "run", compliance=True, concurrency=1)
    crashing = Counting(monkeypatch, crash_after=2)
    with pytest.raises(ProbeFailed, match=r"the rubric judge fake-judge-1 failed \(RuntimeError: the judge's "
                       r"host went away\); 2 grades kept in .*graded.jsonl; re-run the study"):
        run(study, config)
    assert len(crashing.calls) == 2
    kept = read_probes(config.out / "graded.jsonl")  # type: ignore[operator]
    assert len(kept) == 2
    with store_of(world) as s:
        [row] = s.studies()
        assert row.status == "failed"
        assert sum(p.rubric_grade is not None for p in s.probes(row.id)) == 2

    monkeypatch.undo()
    monkeypatch.delenv("SKILLREACH_JUDGE_MODEL", raising=False)
    judge = Counting(monkeypatch)
    result = run(study, config)
    assert result.probes_run == 0  # the probes were all done
    assert len(judge.calls) == 4  # only the grades the crash did not get to
    graded_keys = [(p.query_id, p.attempt) for p in read_probes(config.out / "graded.jsonl")]  # type: ignore[operator]
    assert len(graded_keys) == len(set(graded_keys)) == 6  # each probe graded once
    quality = [o.quality for o in result.artifact.outcomes if o.query_id in ANSWERS]
    assert None not in quality

    judge.calls.clear()
    again = run(study, config)
    assert judge.calls == []  # everything graded: the judge is not asked again
    assert again.artifact.digest == result.artifact.digest
    with store_of(world) as s:  # the store's rows carry the grades again after the resume
        assert sum(p.rubric_grade is not None for p in s.probes(again.study_id)) == 6


def test_a_routing_study_without_answers_asks_no_judge(world: dict[str, Path],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    with_rubrics(world)
    judge = Counting(monkeypatch)
    result = run(study, cfg(world, "routing"))  # not compliance: the fake reports no final text
    assert judge.calls == []
    assert not (result.out / "graded.jsonl").exists()


def test_the_study_judge_model_pins_the_rubric_version(world: dict[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A grade under another judge model is stale: graded again, never mixed in."""
    q = Query(id="a", text="t", expected_skill="s", checks=Checks(rubric=RUBRIC))
    r = ProbeRecord(query_id="a", attempt=1, fingerprint="fp", finished_at="t1", final_text="x")
    old = r.model_copy(update={"rubric_grade": 0.5, "rubric_version": rubric_version(RUBRIC, "judge-a")})
    assert valid_grades([old], [q], "judge-a") == {grade_key(r): old}
    assert valid_grades([old], [q], "judge-b") == {}
    rerun = r.model_copy(update={"finished_at": "t2"})  # the same pair probed again: another probe
    assert apply_grades([rerun], valid_grades([old], [q], "judge-a")) == [rerun]
    assert apply_grades([r], valid_grades([old], [q], "judge-a"))[0].rubric_grade == 0.5
    assert needs_grading([q], [r], compliance=False) is True
    assert needs_grading([q], [r.model_copy(update={"final_text": None})], compliance=False) is False
    assert needs_grading([q.model_copy(update={"checks": None})], [r], compliance=True) is False


def test_check_in_process_runs_the_flow_tasks(world: dict[str, Path],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``check --in-process`` is the flow's own tasks: same fingerprint, grades in graded.jsonl, the
    study in the store; and a re-check probes afresh."""

    from skillreach.cli.check_cmds import _run_study

    monkeypatch.delenv("SKILLREACH_JUDGE_MODEL", raising=False)
    with_rubrics(world)
    judge = Counting(monkeypatch)
    config = cfg(world, "check", compliance=True, gate=False)
    art = _run_study(config, None, in_process=True)
    assert len(judge.calls) == 6
    flow_result = run(study, config.model_copy(update={"out": world["root"] / "flow"}))
    probes = read_probes(world["root"] / "check/probes.jsonl")
    flow_probes = read_probes(world["root"] / "flow/probes.jsonl")
    assert {p.fingerprint for p in probes} == {p.fingerprint for p in flow_probes}
    assert [o.quality for o in art.outcomes] == [o.quality for o in flow_result.artifact.outcomes]
    with store_of(world) as s:
        kinds = sorted(row.kind for row in s.studies())
    assert kinds == ["check", "study"]
    judge.calls.clear()
    _run_study(config, None, in_process=True)
    assert len(judge.calls) == 6  # a check re-probes and re-grades: it measures the skills as they are now
    assert len(read_probes(world["root"] / "check/probes.jsonl")) == 26


def test_the_messages_api_judge_grades_inside_the_flow(world: dict[str, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``judge_model`` other than the fake: the anthropic judge, here on the Messages API stand-in."""
    from skillreach.runtimes.judge_anthropic import SYSTEM
    from tests.fakes.messages_api import MessagesAPI, query_text, text_reply

    with_rubrics(world)
    prompts: list[str] = []

    def judge_replies(body: dict[str, Any]) -> Any:
        assert body.get("system") == SYSTEM
        prompt = query_text(body)
        prompts.append(prompt)
        answered = "rollback plan ready" in prompt or "names the rollback plan" in prompt  # not the rubric
        return text_reply('{"grade": 0.75, "reason": "names the plan"}' if answered
                          else '{"grade": 0.25, "reason": "no plan"}')

    with MessagesAPI(judge_replies) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-secret")
        config = cfg(world, "judged", compliance=True, judge_model="claude-haiku-4-5")
        result = run(study, config)
    assert len(prompts) == 6
    assert all(RUBRIC in p for p in prompts)
    grades = {(p.query_id, p.attempt): p.rubric_grade for p in read_probes(result.out / "graded.jsonl")}
    assert grades == {(q, a): (0.25 if q == "alpha-1" else 0.75) for q in ANSWERS for a in (1, 2)}
    version = rubric_version(RUBRIC, "claude-haiku-4-5")
    assert {p.rubric_version for p in read_probes(result.out / "graded.jsonl")} == {version}
    quality = {o.query_id: o.quality for o in result.artifact.outcomes if o.quality is not None}
    assert quality == {"alpha-0": 0.75, "alpha-1": 0.25, "alpha-2": 0.75}


def test_a_judge_without_a_key_stops_the_study_before_any_probe(world: dict[str, Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from skillreach.runtimes.fake import FakeRuntime

    with_rubrics(world)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("SKILLREACH_JUDGE_MODEL", "claude-haiku-4-5")
    probed: list[str] = []
    original = FakeRuntime.select

    async def select(self: FakeRuntime, query: Any, catalog: Any, tracker: Any) -> Any:
        probed.append(query.id)
        return await original(self, query, catalog, tracker)

    monkeypatch.setattr(FakeRuntime, "select", select)
    with pytest.raises(ConfigError, match="the rubric judge claude-haiku-4-5 needs ANTHROPIC_API_KEY"):
        run(study, cfg(world, "nokey", compliance=True))
    assert probed == []
    assert not (world["root"] / "nokey").exists()


def test_a_rebaseline_measures_every_metric_when_the_queries_have_checks(world: dict[str, Path]) -> None:
    """Re-baselining turns compliance on (and grades rubrics) whenever the query set has checks, so the
    service's own records carry task quality — not n/a."""
    from skillreach.flows.service import rebaseline_all

    with_rubrics(world)
    config = cfg(world, "rebase", judge_model=FAKE_JUDGE_MODEL)
    assert config.compliance is False
    result = run(rebaseline_all, config=config)
    assert result["statuses"]["alpha"] == "no baseline"
    with store_of(world) as s:
        alpha = next(b.record for b in s.baselines() if b.skill == "alpha")
    assert alpha["metrics"]["task_quality"] is not None
    assert alpha["rubric_version"] is not None
