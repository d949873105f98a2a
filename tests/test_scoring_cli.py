"""``skillreach score`` and ``skillreach report`` through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from skillreach.cli import main
from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS
from skillreach.models import ProbeRecord
from skillreach.queries.sets import load_query_set
from skillreach.scoring.artifact import read_artifact


@pytest.fixture
def probes(tmp_path: Path) -> Path:
    """Probes of the bundled example: mostly right, some Turn-2 recoveries, one error, OOS abstentions."""
    qs = load_query_set(EXAMPLE_QUERIES)
    lines = []
    for i, q in enumerate(sorted(qs.queries, key=lambda q: q.id)):
        for attempt in (1, 2):
            if q.expected_skill is None:
                invoked: tuple[str, ...] = () if i % 4 else ("log-search",)
            elif i % 7 == 0 and attempt == 2:
                invoked = ("ops-router", q.expected_skill) if q.expected_skill != "ops-router" else ()
            else:
                invoked = (*q.acceptable_skills[:1], q.expected_skill)
            error = "HTTP 529 overloaded after 6 retries" if (i, attempt) == (3, 2) else None
            rec = ProbeRecord(
                query_id=q.id,
                attempt=attempt,
                invoked=() if error else invoked,
                error=error,
                runtime="keyword",
            )
            lines.append(rec.to_json_line())
    path = tmp_path / "probes.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_score_writes_a_verified_artifact_and_reports(
    tmp_path: Path, probes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, html, md = tmp_path / "run" / "artifact.json", tmp_path / "report.html", tmp_path / "summary.md"
    code = main(
        [
            "score",
            "--queries", str(EXAMPLE_QUERIES),
            "--probes", str(probes),
            "--skills", str(EXAMPLE_SKILLS),
            "--out", str(out),
            "--html", str(html),
            "--markdown", str(md),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    art = read_artifact(out)
    assert art.catalog.strategy == "full"
    assert art.catalog.digest is not None
    assert len(art.catalog.skills) == len(list(EXAMPLE_SKILLS.glob("*/SKILL.md")))
    assert art.counts.errors == 1
    assert art.counts.probes == 2 * art.counts.queries
    assert art.runtime.name == "keyword"
    assert art.queries_digest == load_query_set(EXAMPLE_QUERIES).compute_digest()
    top1 = art.metrics.top1_accuracy
    assert top1 is not None
    assert 0.5 < top1 < 1.0
    assert "top1_accuracy" in captured.out
    assert f"{top1:.3f} [" in captured.out
    assert f'data-metric="top1_accuracy" data-value="{top1!r}"' in html.read_text()
    assert "| Top-1 accuracy |" in md.read_text()
    # compliance checks of the example were judged (routing-only probes: not applicable → null)
    assert all(o.compliance is None for o in art.outcomes)


def test_out_and_report_accept_a_run_folder(tmp_path: Path, probes: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert (
        main(["score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(probes), "--out", str(run), "-q"])
        == 0
    )
    assert read_artifact(run / "artifact.json").digest
    assert main(["report", str(run), "-q", "--html", str(run / "report.html")]) == 0
    assert (run / "report.html").is_file()


def test_score_without_skills_infers_labels(tmp_path: Path, probes: Path) -> None:
    out = tmp_path / "a.json"
    assert (
        main(["score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(probes), "--out", str(out), "-q"])
        == 0
    )
    art = read_artifact(out)
    assert art.catalog.strategy == "inferred"
    assert art.catalog.digest is None


def test_report_renders_a_verified_artifact(
    tmp_path: Path, probes: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "a.json"
    main(["score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(probes), "--out", str(out), "-q"])
    capsys.readouterr()
    assert main(["report", str(out), "--markdown", "-", "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("### skillreach")
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert (
        main(["report", str(out), "--markdown", str(summary), "--html", str(tmp_path / "r.html"), "-q"]) == 0
    )
    text = summary.read_text()
    assert text.startswith("earlier step\n### skillreach")  # appended, not overwritten
    assert (tmp_path / "r.html").read_text().startswith("<!doctype html>")


def test_tampered_artifact_exit_2_one_line(
    tmp_path: Path, probes: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "a.json"
    main(["score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(probes), "--out", str(out), "-q"])
    data = json.loads(out.read_text())
    data["metrics"]["top1_accuracy"] = 1.0
    out.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"skillreach: error: {out}: digest does not match")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("line", "expect"),
    [
        (
            '{"query_id": "no-such-query", "invoked": []}',
            "probe of query 'no-such-query', which is not in the query set",
        ),
        ('{"query_id": "deploy-01", "invoked": "pdf"}', "field 'invoked' must be a list of skill names"),
        ('{"query_id": "deploy-01", "attempt": "one"}', "field 'attempt' must be an integer"),
    ],
)
def test_bad_probes_exit_2_naming_the_line(
    tmp_path: Path, probes: Path, line: str, expect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(probes.read_text() + line + "\n")
    n = len(bad.read_text().splitlines())
    code = main(
        ["score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(bad), "--skills", str(EXAMPLE_SKILLS),
         "--out", str(tmp_path / "a.json")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert f"{bad}:{n}: " in err
    assert expect in err
    assert "Traceback" not in err
    assert not (tmp_path / "a.json").exists()


def test_missing_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(tmp_path / "none.jsonl"),
                 "--out", str(tmp_path / "a.json")]) == 2  # fmt: skip
    assert "no such probe log" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "none.json")]) == 2
    assert "no such artifact" in capsys.readouterr().err


def test_real_entry_point(tmp_path: Path, probes: Path) -> None:
    out = tmp_path / "a.json"
    exe = Path(sys.executable).with_name("skillreach")
    proc = subprocess.run(
        [str(exe), "score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(probes), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "top1_accuracy" in proc.stdout
    assert read_artifact(out).digest


def test_a_quiet_score_loads_neither_scipy_nor_the_report_templates(tmp_path: Path, probes: Path) -> None:
    """Start-up is part of ``skillreach score``'s time: with --quiet and no report it never imports
    scipy (BM25's sparse matrices) or jinja2 (the reports), each ~0.3–0.5 s; the artifact is still
    written."""
    out = tmp_path / "run" / "artifact.json"
    code = (
        "import sys\n"
        "from skillreach.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "print(rc, sorted(m for m in ('scipy', 'jinja2', 'skillreach.reports') if m in sys.modules))\n"
    )
    argv = ["score", "--queries", str(EXAMPLE_QUERIES), "--probes", str(probes), "--skills",
            str(EXAMPLE_SKILLS), "--out", str(out), "--quiet"]  # fmt: skip
    res = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
    assert res.stdout.split("\n")[0] == "0 []", res.stdout + res.stderr
    assert read_artifact(out).counts.probes > 0
