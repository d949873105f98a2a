"""One count of gated metrics everywhere (issue 29, problem 10): the gate report (the Prefect
artifact's markdown) and ``report.html`` say the same number; a metric with nothing to compare is
listed, not gated."""

from __future__ import annotations

import re
from pathlib import Path

from skillreach.baselines.rebaseline import gate_report_markdown
from tests.helpers.world import cfg, run


def test_the_gate_artifact_and_the_report_count_the_same_gated_metrics(world: dict[str, Path]) -> None:
    from skillreach.flows.service import rebaseline_all
    from skillreach.flows.study import study

    run(rebaseline_all, cfg(world, "base"))
    result = run(study, cfg(world, "new", runtime_script="bad"))
    artifact = re.search(r"\*\*(\d+) breach(?:es)?\*\* over (\d+) gated metric", result.gate_report)
    assert artifact is not None, result.gate_report
    page = result.report_path.read_text(encoding="utf-8")
    report = re.search(r'data-gate-breaches="(\d+)">.*?</span> over (\d+) gated metric', page)
    assert report is not None
    assert artifact.groups() == report.groups()
    listed = len(re.findall(r"^\| [a-z]+ \| [a-z_]+ \|", result.gate_report, flags=re.M))
    assert int(artifact.group(2)) <= listed


def test_a_metric_with_nothing_to_compare_is_listed_not_gated() -> None:
    rows = [{"skill": "a", "metric": m, "verdict": v}
            for m, v in (("activation", "breach"), ("false_activation", "ok"), ("compliance", "n/a"),
                         ("task_quality", "n/a"))]
    text = gate_report_markdown(rows, [], "st-1")
    assert "**1 breach** over 2 gated metrics (2 with nothing to compare)." in text
