"""Flow run names an operator can read (issue 29, problem 10): ``nightly-2026-12-03``,
``rebaseline-skill-added-ship-it``; the deployments' flows carry them as ``flow_run_name``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from skillreach.flows import _names


@pytest.fixture
def run_of(monkeypatch: pytest.MonkeyPatch) -> Any:
    def set_(params: dict[str, Any], start: datetime = datetime(2026, 12, 3, 2, 0, tzinfo=UTC)) -> None:
        monkeypatch.setattr(_names, "_params", lambda: params)
        monkeypatch.setattr(_names, "_start", lambda: start)

    return set_


def test_names(run_of: Any) -> None:
    run_of({})
    assert _names.nightly_name() == "nightly-2026-12-03"
    assert _names.rebaseline_name() == "rebaseline-manual-2026-12-03"
    assert _names.watch_name() == "watch-2026-12-03T0200"
    assert _names.study_name() == "study-configured-2026-12-03"
    run_of({"reason": "skillreach.skill.added", "skill": "ship-it"})
    assert _names.rebaseline_name() == "rebaseline-skill-added-ship-it"
    run_of({"reason": "skillreach.model.snapshot.changed", "model_snapshot": "m-2"})
    assert _names.rebaseline_name() == "rebaseline-model-snapshot-changed"
    run_of({"reason": "skillreach.baseline.expired", "skill": "*"})
    assert _names.rebaseline_name() == "rebaseline-baseline-expired-every-skill"
    run_of({"config": {"runtime": "fake"}, "kind": "compliance", "slot": "2026-12-02"})
    assert _names.study_name() == "compliance-fake-2026-12-02"


def test_the_deployments_flows_are_named() -> None:
    from skillreach.flows.service import nightly_compliance, rebaseline_all, watch
    from skillreach.flows.study import study

    assert nightly_compliance.flow_run_name is _names.nightly_name
    assert rebaseline_all.flow_run_name is _names.rebaseline_name
    assert watch.flow_run_name is _names.watch_name
    assert study.flow_run_name is _names.study_name
