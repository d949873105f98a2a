"""Compliance, task quality, the judge and the gate report in every report (issue 12, "Reports").

A small world with compliance checks and rubrics is run through ``skillreach run --compliance`` twice:
the first run records the baselines, the second — whose agent skips alpha's preflight — is gated
against them. The HTML page, the markdown summary and the scorecard of ``skillreach report`` must
show each skill's compliance and task quality with its clustered interval (the numbers a baseline
record holds), the old-cases / new-cases split, the judge, and the gate table with its verdicts.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from skillreach.baselines.records import metric_value, per_case_outcomes
from skillreach.cli import main
from skillreach.reports import print_scorecard, render_html, render_markdown
from skillreach.reports.gate_file import GATE_FILE, read_gate
from skillreach.scoring.artifact import Artifact, read_artifact
from skillreach.study.judge import FAKE_JUDGE_MODEL

RUBRIC = "Names the rollback plan."
PREFLIGHT = {"tool": "Bash", "input": {"command": "make preflight"}}
FORBIDDEN = {"tool": "Bash", "input": {"command": "rm -rf build"}}


def _with_checks(world: dict[str, Path]) -> None:
    """alpha: a required and a forbidden action, an output assertion; beta: a rubric and an assertion."""
    data = json.loads(world["queries"].read_text())
    for q in data["queries"]:
        if q["id"].startswith("alpha-"):
            q["checks"] = {
                "requires": [{"tool": "Bash", "pattern": "make preflight"}],
                "forbids": [{"tool": "Bash", "pattern": "rm -rf"}],
                "output": [{"contains": "chart"}],
            }
        elif q["id"].startswith("beta-"):
            q["checks"] = {"rubric": RUBRIC, "output": [{"contains": "docker"}]}
    world["queries"].write_text(json.dumps(data))


def _script(world: dict[str, Path], name: str, *, skip_preflight: bool) -> Path:
    entries: dict[str, Any] = json.loads(world["good"].read_text())
    for i in range(4):
        # the bad agent skips the preflight, and on alpha-3 also runs a forbidden command
        calls = ([FORBIDDEN] if i == 3 else []) if skip_preflight else [PREFLIGHT]
        entries[f"alpha-{i}"] = {"invoked": ["alpha"], "tool_calls": calls, "final_text": "chart done"}
        answer = "docker fixed; rollback plan ready" if i < 2 else "docker fixed"
        entries[f"beta-{i}"] = {"invoked": ["beta"], "final_text": answer}
    path = world["root"] / name
    path.write_text(json.dumps(entries))
    return path


def _config(world: dict[str, Path], name: str, script: Path, *, record: bool) -> str:
    path = world["root"] / name
    path.write_text(
        f'runtime = "fake"\nattempts = 2\nrecord_baselines = {"true" if record else "false"}\n'
        f'[runtime_options]\nscript = "{script}"\n',
        encoding="utf-8",
    )
    return name


class Rows(HTMLParser):
    """The attributes and text of every <tr> and <code data-judge> of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[dict[str, Any]] = []
        self.cells: list[dict[str, Any]] = []
        self.judge: str | None = None
        self._in_judge = False
        self.svgs = 0
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr":
            self.rows.append({**a, "_cells": []})
        elif tag == "td" and self.rows:
            self.rows[-1]["_cells"].append(a)
        elif tag == "code" and "data-judge" in a:
            self._in_judge = True
            self.judge = ""
        elif tag == "svg":
            self.svgs += 1
        elif tag == "script":
            self.scripts += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "code":
            self._in_judge = False

    def handle_data(self, data: str) -> None:
        if self._in_judge:
            self.judge = (self.judge or "") + data

    def row(self, **attrs: str) -> dict[str, Any]:
        found = [r for r in self.rows if all(r.get(k) == v for k, v in attrs.items())]
        assert len(found) == 1, (attrs, found)
        return found[0]


def _cell(row: dict[str, Any], field: str) -> dict[str, Any]:
    return next(c for c in row["_cells"] if c.get("data-field") == field)


def _expected(artifact: Artifact, skill: str, metric: str) -> Any:
    return metric_value(per_case_outcomes(artifact, skill), metric)


@pytest.fixture
def two_runs(
    world: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Path]:
    monkeypatch.setenv("COLUMNS", "220")  # the scorecard's tables unabridged
    _with_checks(world)
    good = _script(world, "good-checks.json", skip_preflight=False)
    bad = _script(world, "bad-checks.json", skip_preflight=True)
    base = ["run", "--compliance", "--skills", "skills", "--queries", "queries.json"]
    code = main([*base, "--config", _config(world, "base.toml", good, record=True), "--out", "day0"])
    assert code == 0, capsys.readouterr().err
    nxt = _config(world, "next.toml", bad, record=False)
    code = main([*base, "--config", nxt, "--out", "day1", "--gate"])
    captured = capsys.readouterr()
    assert code == 1, captured.err  # gated on request (--gate): a breach is the exit code
    assert "run: gate breached: alpha compliance" in captured.err  # the run itself says so, and which:
    assert re.search(r"alpha\s+│ compliance\s+│ paired\s+│ -1\.000 \[-1\.000, -0\.541\]", captured.out)
    return {**world, "day0": world["root"] / "day0", "day1": world["root"] / "day1"}


def test_run_and_report_show_compliance_quality_judge_and_gate(
    two_runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    day0, day1 = two_runs["day0"], two_runs["day1"]
    art0, art1 = read_artifact(day0 / "artifact.json"), read_artifact(day1 / "artifact.json")
    assert art1.runtime.judge_model == FAKE_JUDGE_MODEL  # the study's judge travels with the artifact

    # the figures a baseline holds, from the artifact: alpha compliant on day 0, never on day 1
    c0 = _expected(art0, "alpha", "compliance")
    c1 = _expected(art1, "alpha", "compliance")
    q1 = _expected(art1, "beta", "task_quality")
    assert (c0.value, c0.n, c0.cases) == (1.0, 8, 4)
    assert (c1.value, c1.n, c1.cases) == (0.0, 8, 4)
    assert q1 is not None
    assert 0 < q1.value < 1
    assert q1.ci95[0] < q1.value < q1.ci95[1]

    # report.html of the run, re-rendered after the gate
    page = Rows()
    page.feed((day1 / "report.html").read_text(encoding="utf-8"))
    assert page.scripts == 0
    assert page.judge == FAKE_JUDGE_MODEL
    alpha = page.row(**{"data-quality": "alpha", "data-cohort": "all"})
    comp = _cell(alpha, "compliance")
    assert float(comp["data-value"]) == 0.0
    assert (float(comp["data-lo"]), float(comp["data-hi"])) == pytest.approx(c1.ci95)
    assert _cell(alpha, "compliance_n")["data-value"] == "8"
    beta = page.row(**{"data-quality": "beta", "data-cohort": "all"})
    tq = _cell(beta, "task_quality")
    assert float(tq["data-value"]) == pytest.approx(q1.value)
    assert (float(tq["data-lo"]), float(tq["data-hi"])) == pytest.approx(q1.ci95)
    # the old-cases / new-cases split: every case of day 1 was a case of the baseline
    old = page.row(**{"data-quality": "alpha", "data-cohort": "baseline_cases"})
    assert float(_cell(old, "compliance")["data-value"]) == 0.0
    new = page.row(**{"data-quality": "alpha", "data-cohort": "new_cases"})
    assert _cell(new, "compliance")["data-value"] == "null"
    # the gate table: alpha's compliance fell from 1 to 0 on every case → breach
    g = page.row(
        **{"data-gate-skill": "alpha", "data-gate-metric": "compliance", "data-gate-cohort": "paired"}
    )
    assert g["data-verdict"] == "breach"
    assert float(g["data-value"]) == -1.0
    assert float(g["data-lo"]) == -1.0
    assert float(g["data-hi"]) == pytest.approx(-0.5412, abs=1e-4)  # Newcombe: never of zero width
    ok = page.row(
        **{"data-gate-skill": "beta", "data-gate-metric": "activation", "data-gate-cohort": "paired"}
    )
    assert ok["data-verdict"] == "ok"
    assert page.svgs > 10  # intervals are drawn as SVG bars

    # the gate is kept beside the artifact for `skillreach report DIR`
    gate = read_gate(day1, art1.digest)
    assert gate is not None
    assert {c["skill"] for c in gate[0]} == {"alpha", "beta", "gamma"}
    assert read_gate(day1, "sha256:other") is None  # another artifact's gate is not shown

    code = main(["report", str(day1), "--html", "again.html", "--markdown", "summary.md"])
    card = capsys.readouterr().out
    assert code == 0
    again = Rows()
    again.feed(Path("again.html").read_text(encoding="utf-8"))
    assert (
        again.row(**{"data-gate-skill": "alpha", "data-gate-metric": "compliance"})["data-verdict"]
        == "breach"
    )
    assert again.judge == FAKE_JUDGE_MODEL

    md = Path("summary.md").read_text(encoding="utf-8")
    assert f"judge `{FAKE_JUDGE_MODEL}`" in md
    alpha_line = next(line for line in md.splitlines() if line.startswith("| alpha | 0.000 ["))
    assert f"[{c1.ci95[0]:.3f}, {c1.ci95[1]:.3f}] | 8 / 4 |" in alpha_line
    assert f"{q1.value:.3f} [{q1.ci95[0]:.3f}, {q1.ci95[1]:.3f}] | 8 / 4 |" in md
    assert "| ↳ baseline corpus |" in md
    assert re.search(
        r"\| alpha \| compliance \| paired \| 1\.000 \| 0\.000 \| -1\.000 \[-1\.000, -0\.541\] "
        r"\| -0\.05 \| \*\*breach\*\* \|",
        md,
    ), md
    assert "**Gate report**: 1 breach over 9 gated metrics" in md

    assert f"judge {FAKE_JUDGE_MODEL}" in card
    assert re.search(rf"alpha\s+│ 0\.000 \[{c1.ci95[0]:.3f}, {c1.ci95[1]:.3f}\]\s+│\s+8/4", card), card
    assert re.search(
        r"alpha\s+│ compliance\s+│ paired\s+│ -1\.000 \[-1\.000, -0\.541\]\s+│ -0\.05\s+│ breach", card
    ), card
    assert "gate report: 1 breach over 9 gated metrics (8 ok, 3 with nothing to compare)" in card
    assert not re.search(r"beta\s+│ activation", card)  # an ok gate is counted, not listed


def test_a_study_of_routing_only_says_so_and_names_the_judge(
    world: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --compliance nothing is judged: each report says so (never a table of n/a) and names the
    judge; without a gate there is no gate section at all; an artifact that predates judge_model says
    the judge was not recorded; a broken gate.json is one error line naming it."""
    code = main(
        [
            "run",
            "--config",
            _config(world, "r.toml", world["good"], record=False),
            "--skills",
            "skills",
            "--queries",
            "queries.json",
            "--out",
            "routing",
        ]
    )
    assert code == 0
    artifact = read_artifact(world["root"] / "routing/artifact.json")
    assert not (world["root"] / "routing" / GATE_FILE).exists() or read_gate(
        world["root"] / "routing", artifact.digest
    ) == ([], [])
    html = render_html(artifact)
    assert "No probe was judged on compliance or task quality" in html
    assert 'id="gates"' not in html
    assert "Gate report" not in html
    assert f">{FAKE_JUDGE_MODEL}</code>" in html
    assert "no probe was judged on compliance or task quality" in render_markdown(artifact)

    older = artifact.model_copy(update={"runtime": artifact.runtime.model_copy(update={"judge_model": None})})
    assert ">not recorded in the artifact</code>" in render_html(older)
    assert "judge `not recorded in the artifact`" not in render_markdown(older)
    assert "Judge: `not recorded in the artifact`" in render_markdown(older)

    capsys.readouterr()
    (world["root"] / "routing" / GATE_FILE).write_text("{not json", encoding="utf-8")
    assert main(["report", "routing", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("skillreach: error: routing/gate.json:1: invalid JSON")  # the line it breaks on
    assert "(not a gate report: delete it or re-run the study)" in err


def test_gate_rows_render_with_advice_and_not_compared(world: dict[str, Path]) -> None:
    """Flat gate rows and comparisons alike; an inconclusive row carries its advice; skills not
    compared are listed; an interval is drawn on [−1, 1] with the gate marked."""
    from io import StringIO

    from rich.console import Console

    from skillreach.baselines.gates import compare
    from skillreach.baselines.records import BaselineRecord, CaseCounts, CaseOutcomes

    def rec(acts: dict[str, list[int]], bid: str) -> BaselineRecord:
        pc = {
            k: CaseOutcomes(role="positive", kind="implicit", probes=len(v), activated=tuple(v))
            for k, v in acts.items()
        }
        return BaselineRecord(
            baseline_id=bid,
            skill="alpha",
            created_at="2026-11-30T00:00:00Z",
            skill_version=bid,
            skill_version_origin="content",
            corpus_version="sha256:" + "a" * 64,
            model="m",
            runtime="fake",
            runs_per_case=3,
            cases=CaseCounts(positive=len(acts), negative=0),
            metrics={
                m: metric_value(pc, m)
                for m in ("activation", "false_activation", "compliance", "task_quality")
            },
            per_case=pc,
        )

    base = rec({"a": [1, 1, 1], "b": [1, 1, 1], "c": [1, 1, 1]}, "alpha@0")
    new = rec({"a": [1, 1, 1], "b": [0, 0, 0], "c": [1, 1, 1]}, "alpha@1")
    cmp = compare(base, new)
    act = next(r for r in cmp.results if r.metric == "activation")
    assert act.verdict.value == "inconclusive"
    assert act.note
    code = main(
        [
            "run",
            "--config",
            _config(world, "r.toml", world["good"], record=False),
            "--skills",
            "skills",
            "--queries",
            "queries.json",
            "--out",
            "x",
        ]
    )
    assert code == 0
    artifact = read_artifact(world["root"] / "x/artifact.json")
    html = render_html(artifact, gate=[cmp], not_compared=["gamma: model differs"])
    page = Rows()
    page.feed(html)
    row = page.row(**{"data-gate-skill": "alpha", "data-gate-metric": "activation"})
    assert row["data-verdict"] == "inconclusive"
    assert act.note in html  # "add about 2 positive cases for alpha (now 3)"
    assert "gamma: model differs" in html
    flat = [
        {
            "skill": "beta",
            "metric": "activation",
            "base": 1.0,
            "new": 0.5,
            "delta": -0.5,
            "ci95": [-1.0, -0.1],
            "gate": -0.05,
            "verdict": "breach",
        }
    ]
    page = Rows()
    page.feed(render_html(artifact, gate=flat))
    assert page.row(**{"data-gate-skill": "beta"})["data-lo"] == "-1.0"
    out = StringIO()
    print_scorecard(artifact, Console(file=out, width=220), gate=[cmp])
    assert "inconclusive" in out.getvalue()
    assert "add about 2 positive cases for alpha (now 3)" in out.getvalue()


def test_publish_report_calls_a_drift_drift_and_lists_every_skill_not_compared(
    world: dict[str, Path],
) -> None:
    """After a model change the service's comparison is a drift report: the page says drift, not breach,
    and every skill without a comparison is listed with its status."""
    import asyncio

    from skillreach.baselines.gates import compare
    from skillreach.baselines.rebaseline import SkillGate
    from skillreach.baselines.records import BaselineRecord, CaseCounts, CaseOutcomes
    from skillreach.tasks.baselines import GateOutcome
    from skillreach.tasks.score import Scored, publish_report

    def rec(acts: dict[str, list[int]], bid: str, model: str) -> BaselineRecord:
        pc = {
            k: CaseOutcomes(role="positive", kind="implicit", probes=len(v), activated=tuple(v))
            for k, v in acts.items()
        }
        return BaselineRecord(
            baseline_id=bid,
            skill="alpha",
            created_at="2026-11-30T00:00:00Z",
            skill_version="git:1",
            skill_version_origin="git",
            corpus_version="sha256:" + "a" * 64,
            model=model,
            runtime="fake",
            runs_per_case=2,
            cases=CaseCounts(positive=len(acts), negative=0),
            metrics={
                m: metric_value(pc, m)
                for m in ("activation", "false_activation", "compliance", "task_quality")
            },
            per_case=pc,
        )

    base = rec({f"q{i}": [1, 1] for i in range(6)}, "alpha@0", "m-20250101")
    new = rec({f"q{i}": [0, 0] for i in range(6)}, "alpha@1", "m-20260101")
    cmp = compare(base, new, drift=True)
    assert any(r.verdict.value == "breach" for r in cmp.results)
    code = main(
        [
            "run",
            "--config",
            _config(world, "r.toml", world["good"], record=False),
            "--skills",
            "skills",
            "--queries",
            "queries.json",
            "--out",
            "drift",
        ]
    )
    assert code == 0
    out = world["root"] / "drift"
    scored = Scored(read_artifact(out / "artifact.json"), out / "artifact.json", out / "report.html")
    gates = GateOutcome(
        results=(
            SkillGate("alpha", "drift", new, base, cmp),
            SkillGate("beta", "expired", reason="model differs"),
            SkillGate("gamma", "no queries", reason="no positive query names it; add queries"),
        )
    )
    asyncio.run(publish_report.fn(scored, gates))
    page = Rows()
    html = (out / "report.html").read_text(encoding="utf-8")
    page.feed(html)
    row = page.row(**{"data-gate-skill": "alpha", "data-gate-metric": "activation"})
    assert row["data-verdict"] == "drift"
    assert float(row["data-value"]) == -1.0
    assert 'data-gate-breaches="0"' in html
    assert "beta: expired — model differs" in html
    assert "gamma: no queries — no positive query names it; add queries" in html
    assert read_gate(out, scored.artifact.digest) is not None
