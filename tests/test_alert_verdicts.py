"""One message per open verdict (issue 39): a verdict (family, skill, metric) is said when it opens,
when it gets worse or its cause changes, when it closes, and at most once per ``alert_repeat_after``
while it stays open — whichever flow finds it. The rules alone (:func:`skillreach.service.verdicts.
decide`), then through the study flow against a real receiver."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from skillreach.service.alerts import (
    GATE_BREACHED,
    GATE_INCONCLUSIVE,
    NO_QUERIES,
    breach_payload,
    notice_payload,
    slack_message,
)
from skillreach.service.verdicts import Seen, decide, finding_of, verdict_key
from skillreach.store.alert_log import AlertVerdictRow
from tests.helpers.webhooks import WebhookSink
from tests.helpers.world import cfg, run, store_of

T0 = datetime(2026, 5, 4, 2, 0, tzinfo=UTC)
DAY = timedelta(hours=22)


def _gate(event: str = GATE_BREACHED, *, cause: str | None = None, delta: float = -0.5) -> dict[str, Any]:
    p = breach_payload(skill="gamma", metric="activation", delta=delta, interval=(delta - 0.2, delta + 0.2),
                       baseline_id="gamma@1", run_link="L", gate=-0.05, event=event,
                       verdict="breach" if event == GATE_BREACHED else "inconclusive")
    return {**p, "cause": cause} if cause else p


def _seen(payload: dict[str, Any], at: datetime = T0) -> Seen:
    f = finding_of(payload)
    return Seen(open=True, severity=f.severity, cause=f.cause, delta=f.delta, opened_at=at, said_at=at)


def test_the_rules() -> None:
    breach = _gate(cause="delta")
    assert decide(None, finding_of(breach), T0, DAY) == ("opened", "")
    seen = _seen(breach)
    assert decide(seen, finding_of(breach), T0 + timedelta(hours=1), DAY) == (None, "")  # a repeat
    change, note = decide(seen, finding_of(_gate(cause="epsilon")), T0 + timedelta(hours=1), DAY)
    assert change == "changed"
    assert note.startswith("the cause changed (said at 2026-05-04 02:00 UTC: delta)")
    change, note = decide(seen, finding_of(_gate(cause="delta", delta=-0.6)), T0, DAY)
    assert change == "changed"
    assert "(delta -0.500 then)" in note
    assert decide(seen, finding_of(_gate(cause="delta", delta=-0.52)), T0, DAY) == (None, "")  # noise
    assert decide(seen, finding_of(_gate(cause="delta", delta=-0.2)), T0, DAY) == (None, "")  # better
    change, note = decide(seen, finding_of(breach), T0 + DAY, DAY)
    assert (change, note) == ("reminder", "reminder: open since 2026-05-04 02:00 UTC")
    closed = Seen(open=False, severity=2, cause="delta", delta=-0.5, opened_at=T0, said_at=T0)
    assert decide(closed, finding_of(breach), T0 + timedelta(hours=1), DAY)[0] == "opened"  # again
    muted = Seen(open=True, severity=2, cause="delta", delta=-0.5, opened_at=T0, said_at=None)
    assert decide(muted, finding_of(breach), T0, DAY)[0] == "opened"  # found while muted: never said


def test_an_undecided_drop_that_becomes_a_breach_is_one_verdict_said_worse() -> None:
    undecided = _gate(GATE_INCONCLUSIVE, cause="delta")
    breach = _gate(cause="delta")
    assert verdict_key(undecided) == verdict_key(breach) == "gate:gamma:activation"
    change, note = decide(_seen(undecided), finding_of(breach), T0, DAY)
    assert change == "changed"
    assert "(it was an undecided drop)" in note
    # and back: a breach that looks undecided the next night is the same open verdict, not news
    assert decide(_seen(breach), finding_of(undecided), T0 + timedelta(hours=1), DAY) == (None, "")


def test_notices_and_runs_are_verdicts_too() -> None:
    no_queries = notice_payload(NO_QUERIES, skill="delta", message="no query expects it", run_link="L")
    assert verdict_key(no_queries) == "skill.no_queries:delta:baseline"
    assert decide(_seen(no_queries), finding_of(no_queries), T0 + timedelta(minutes=10), DAY) == (None, "")
    run_a = {"event": "skillreach.run.crashed", "skill": "study/study", "metric": "n", "instance": "1"}
    run_b = {**run_a, "instance": "2"}
    assert verdict_key(run_a) != verdict_key(run_b)  # each run that ended badly is its own


def test_a_message_says_what_changed() -> None:
    text = slack_message({**_gate(cause="delta"), "notes": ["worse than said at x (it was an undecided drop)",
                                                            "the nightly run ends Breached"]})["text"]
    assert text.startswith("skillreach gate breach: gamma activation changed -0.500")
    assert "; worse than said at x (it was an undecided drop); the nightly run ends Breached — L" in text


def test_a_breach_is_said_once_a_repeat_stored_and_its_end_said_once(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the study flow: the same breach found by five studies in a row is said when it opens and
    when it closes; a study that finds it again after the close says it again."""
    from skillreach.cli import main
    from skillreach.flows.service import rebaseline_all
    from skillreach.flows.study import study

    run(rebaseline_all, cfg(world, "base"))
    monkeypatch.setenv("SKILLREACH_HOME", str(world["home"]))
    with WebhookSink() as sink:
        monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", json.dumps([f"{sink.base_url}/hook"]))
        for name, script in (("n1", "bad"), ("n2", "bad"), ("n3", "good"), ("n4", "good"), ("n5", "bad")):
            run(study, cfg(world, name, runtime_script=script))
        said = [r["body"]["text"] for r in sink.requests]
    assert len(said) == 3, said
    assert said[0].startswith("skillreach gate breach: alpha activation changed -1.000")
    assert said[1].startswith("skillreach skillreach.verdict.closed: alpha: activation is back within its "
                              "gate; the verdict open since ")
    assert said[2].startswith("skillreach gate breach: alpha activation changed -1.000")
    capsys.readouterr()
    assert main(["alerts", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [ln.split("  ", 1)[1] for ln in listed[:4]] == [
        "gate.breached:alpha:activation  delivered", "gate.breached:alpha:activation  repeat",
        "verdict.closed:alpha:activation  delivered", "gate.breached:alpha:activation  delivered"]
    assert listed[4].startswith("open: gate:alpha:activation (since ")


def test_an_open_verdict_is_reminded_once_per_window(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillreach.flows.service import rebaseline_all
    from skillreach.flows.study import study

    run(rebaseline_all, cfg(world, "base"))
    with WebhookSink() as sink:
        monkeypatch.setenv("SKILLREACH_ALERT_WEBHOOKS", json.dumps([f"{sink.base_url}/hook"]))
        monkeypatch.setenv("SKILLREACH_ALERT_REPEAT_AFTER", "1h")
        run(study, cfg(world, "n1", runtime_script="bad"))
        run(study, cfg(world, "n2", runtime_script="bad"))  # within the hour: a repeat, stored
        # the hour passes: the verdicts were said an hour ago (a window of seconds on the wall clock
        # failed under load: two studies took longer than the window)
        with store_of(world) as store, store.writing() as s:
            for row in s.scalars(select(AlertVerdictRow).where(AlertVerdictRow.said_at.is_not(None))):
                row.said_at = row.said_at - timedelta(hours=1, seconds=1)  # type: ignore[operator]
        run(study, cfg(world, "n3", runtime_script="bad"))
        said = [r["body"]["text"] for r in sink.requests]
    assert len(said) == 2, said
    assert "; reminder: open since " in said[1]
