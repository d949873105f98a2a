"""The bundled example's service study runs the ``fake`` runtime's scripted agent, so an offline
service (``make up``) shows every gate at work — routing, compliance and task quality, none ``n/a``
(issue 29, problem 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.world import run


def test_the_example_nightly_gates_compliance_and_task_quality_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillreach.flows.service import nightly_compliance, rebaseline_all

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("SKILLREACH_HOME", str(tmp_path / "home"))
    first = run(rebaseline_all)  # no config: the bundled example, as `make up` deploys it
    assert first["statuses"]
    night = run(nightly_compliance)
    report = night["gate_report"]
    rows = [line.split(" | ") for line in report.splitlines() if line.startswith("| ") and " | " in line]
    by_metric: dict[str, set[str]] = {}
    for row in rows[2:] if rows and rows[0][0] == "| skill" else rows:
        if len(row) >= 8:
            by_metric.setdefault(row[1], set()).add(row[-1].strip(" |*"))
    assert {"compliance", "task_quality", "activation"} <= set(by_metric), report
    for metric in ("compliance", "task_quality"):
        assert by_metric[metric] - {"n/a"}, f"{metric}: only n/a\n{report}"
    assert night["breaches"] == 0, report
