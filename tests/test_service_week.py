"""A week in the life of the service, end to end: the service flows (their own bodies, in-process), the
anthropic runtime against the local Messages API stand-in, a temporary git repository of skills, alerts to
a local webhook sink, and the CLI a team runs in CI. The same week as tracked runs on a real Prefect
server: tests/test_flows_integration.py.

day 0  baselines recorded and committed in one commit on the service branch;
day 1  a skill is added whose description steals a neighbour's traffic → watch sees it → the gate-first
       re-baselining alerts exactly once for the neighbour, keeps its record as a candidate, records the
       rest, one commit; a person accepts the candidate;
day 2  a nightly run with unchanged behaviour → every skill with queries ok, 0 alerts;
day 3  the model alias resolves to a new snapshot → watch → drift report, one alert for the skill that
       moved, all re-recorded in one commit; the team merges the branch and `skillreach check --changed`
       in CI reads the same records and passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.week import make_week, play_week
from tests.helpers.world import run


def test_a_week_in_the_life(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    play_week(make_week(tmp_path, monkeypatch), run, capsys)
