"""``skillreach diff A B``: walls (exit 3), corroboration, paired statistics cross-checked against
statsmodels' McNemar, an independent Newcombe paired interval and scikit-learn's macro F1, and the
reports. The arms are real studies of the bundled example (keyword runtime, offline), one with an
edited description of ``log-search``."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import f1_score
from statsmodels.stats.contingency_tables import mcnemar

from skillreach.author.diff import diff_arms, load_arm, mcnemar_exact, moved_axes
from skillreach.cli import main
from skillreach.errors import InputError, RefusedError
from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS
from skillreach.flows.study import study
from skillreach.queries.sets import read_query_file, seal, write_query_set
from skillreach.study import StudyConfig
from tests.helpers.newcombe import newcombe_reference

EDITED = (
    "description: Search application logs and traces with logq to find errors, stack traces, request ids, "
    "trace ids and the first occurrence of a failure across services. Use when someone wants to know what a "
    "service logged or printed, what happened to a request or a charge, why a job failed, or how many times "
    "an error or timeout happened and when it started. Not for coordinating an outage (incident-triage)."
)


def _edit_description(skills: Path, name: str, line: str) -> None:
    path = skills / name / "SKILL.md"
    lines = path.read_text(encoding="utf-8").split("\n")
    at = next(i for i, s in enumerate(lines) if s.startswith("description:"))
    lines[at] = line
    path.write_text("\n".join(lines), encoding="utf-8")


def _study(root: Path, name: str, skills: Path, queries: Path, **kw: object) -> Path:
    cfg = StudyConfig(
        skills=(skills,), queries=queries, out=root / name, home=root / "home", gate=False, **kw
    )
    asyncio.run(study.fn(cfg))
    return root / name


def _reseal(src: Path, dst: Path, *, drop: str | None = None, retext: str | None = None) -> Path:
    qs = read_query_file(src)
    queries = tuple(
        q.model_copy(update={"text": q.text + " (reworded)"}) if q.id == retext else q
        for q in qs.queries
        if q.id != drop
    )
    write_query_set(seal(qs.model_copy(update={"queries": queries}), source="test"), dst)
    return dst


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("diff")
    skills_a = root / "skills-a"
    shutil.copytree(EXAMPLE_SKILLS, skills_a)
    skills_b = root / "skills-b"
    shutil.copytree(EXAMPLE_SKILLS, skills_b)
    _edit_description(skills_b, "log-search", EDITED)
    q = EXAMPLE_QUERIES
    return {
        "queries": q,
        "A": _study(root, "A", skills_a, q),
        "B": _study(root, "B", skills_b, q),
        # the same edit, but the runtime changed too (retriever over keyword): not a description test
        "B-runtime": _study(root, "B-runtime", skills_b, q, runtime="retriever"),
        "A-2": _study(root, "A-2", skills_a, q, attempts=2),
        "B-2": _study(root, "B-2", skills_b, q, attempts=2),
        "fewer": _study(root, "fewer", skills_b, _reseal(q, root / "fewer.json", drop="logs-02")),
        "reworded": _study(root, "reworded", skills_b, _reseal(q, root / "reworded.json", retext="logs-02")),
    }


def _rows(folder: Path) -> dict[str, list[dict[str, object]]]:
    """Per query, its scored outcome rows, read straight from artifact.json (no skillreach code)."""
    data = json.loads((folder / "artifact.json").read_text(encoding="utf-8"))
    out: dict[str, list[dict[str, object]]] = {}
    for row in data["outcomes"]:
        if row["error"] is None:
            out.setdefault(row["query_id"], []).append(row)
    return out


# ------------------------------------------------------------------------------- the example edit


def test_description_edit_reports_flipped_queries_and_an_independent_paired_verdict(
    arms: dict[str, Path],
) -> None:
    a, b = load_arm(arms["A"], "A"), load_arm(arms["B"], "B")
    r = diff_arms(a, b, vary="description")
    assert r.moved == {"description": "description of log-search changed"}
    assert not r.warnings
    rows_a, rows_b = _rows(arms["A"]), _rows(arms["B"])
    ids = sorted(rows_a)
    correct_a = np.array([rows_a[q][0]["predicted"] == rows_a[q][0]["truth"] for q in ids], dtype=float)
    correct_b = np.array([rows_b[q][0]["predicted"] == rows_b[q][0]["truth"] for q in ids], dtype=float)
    # flipped queries: exactly those whose correctness moved, independently computed
    assert [f.query_id for f in r.won] == [
        q for q, x, y in zip(ids, correct_a, correct_b, strict=True) if y > x
    ]
    assert [f.query_id for f in r.lost] == [
        q for q, x, y in zip(ids, correct_a, correct_b, strict=True) if y < x
    ]
    assert r.won, "the edit should win some log-search queries on the example"
    assert all(f.truth == "log-search" and f.b_predicted == "log-search" for f in r.won)
    # the gate's paired interval (Newcombe, method 10): an independent reference from the 2×2 table
    top1 = r.delta("top1_accuracy")
    d = correct_b - correct_a
    want = newcombe_reference([(int(y), int(x)) for x, y in zip(correct_a, correct_b, strict=True)])
    assert top1.delta == pytest.approx(d.mean())
    assert top1.ci95 == pytest.approx(want[1:])
    assert top1.method == "Newcombe paired"
    assert top1.pairs == len(ids)
    # McNemar exact: statsmodels on the 2×2 table
    table = [
        [int(np.sum((correct_a == 1) & (correct_b == 1))), int(np.sum((correct_a == 1) & (correct_b == 0)))],
        [int(np.sum((correct_a == 0) & (correct_b == 1))), int(np.sum((correct_a == 0) & (correct_b == 0)))],
    ]
    assert r.mcnemar is not None
    assert (r.mcnemar.lost, r.mcnemar.won) == (table[0][1], table[1][0])
    assert r.mcnemar.pvalue == pytest.approx(mcnemar(table, exact=True).pvalue)
    verdict = "better" if top1.ci95[0] > 0 else "worse" if top1.ci95[1] < 0 else "no detectable change"
    assert r.verdict == verdict
    # macro F1 (one attempt a query): scikit-learn over the labels with support, and the artifacts' own
    truth = [rows_a[q][0]["truth"] for q in ids]
    for arm, rows, delta_side in (("A", rows_a, r.delta("macro_f1").a), ("B", rows_b, r.delta("macro_f1").b)):
        pred = [rows[q][0]["predicted"] for q in ids]
        sk = f1_score(truth, pred, labels=sorted(set(truth)), average="macro", zero_division=0)
        assert delta_side == pytest.approx(sk), arm
        stored = json.loads((arms[arm] / "artifact.json").read_text())["metrics"]["macro_f1"]
        assert delta_side == pytest.approx(stored), arm
    f1 = r.delta("macro_f1")
    assert f1.ci95 is not None
    assert f1.delta is not None
    assert f1.ci95[0] <= f1.delta <= f1.ci95[1]


def test_per_skill_recall_precision_and_stolen_traffic(arms: dict[str, Path]) -> None:
    r = diff_arms(load_arm(arms["A"], "A"), load_arm(arms["B"], "B"), vary="description")
    rows_a, rows_b = _rows(arms["A"]), _rows(arms["B"])
    by = {s.skill: s for s in r.skills}
    for s in r.skills:
        own = sorted(q for q in rows_a if rows_a[q][0]["truth"] == s.skill)
        ra = np.array([rows_a[q][0]["predicted"] == s.skill for q in own], dtype=float)
        rb = np.array([rows_b[q][0]["predicted"] == s.skill for q in own], dtype=float)
        if own:
            assert s.recall.delta == pytest.approx((rb - ra).mean())
            want = newcombe_reference([(int(y), int(x)) for x, y in zip(ra, rb, strict=True)])
            assert s.recall.ci95 == pytest.approx(want[1:])
        for arm_rows, value in ((rows_a, s.precision.a), (rows_b, s.precision.b)):
            predicted = [q for q in arm_rows if arm_rows[q][0]["predicted"] == s.skill]
            hits = [q for q in predicted if arm_rows[q][0]["truth"] == s.skill]
            assert value == pytest.approx(len(hits) / len(predicted) if predicted else 0.0)
        stolen = sorted(
            q
            for q in rows_a
            if rows_a[q][0]["truth"] != s.skill
            and rows_b[q][0]["predicted"] == s.skill != rows_a[q][0]["predicted"]
        )
        assert s.stolen == stolen
    # the queries log-search won were released by the skill that used to take them
    won = by["log-search"].won
    assert won
    took = {rows_a[q][0]["predicted"] for q in won}
    for other in took:
        assert set(won) <= set(by[str(other)].released)


def test_attempts_are_averaged_within_a_query_and_mcnemar_needs_one_attempt(arms: dict[str, Path]) -> None:
    r = diff_arms(load_arm(arms["A-2"], "A"), load_arm(arms["B-2"], "B"), vary="description")
    assert r.mcnemar is None
    assert "one scored attempt" in r.mcnemar_note
    one = diff_arms(load_arm(arms["A"], "A"), load_arm(arms["B"], "B"), vary="description")
    # the keyword runtime is deterministic: two attempts average to the one-attempt figures
    assert r.delta("top1_accuracy").delta == pytest.approx(one.delta("top1_accuracy").delta)
    assert r.pairs == one.pairs


# ------------------------------------------------------------------------------------------- walls


def test_walls_refuse(arms: dict[str, Path]) -> None:
    a = load_arm(arms["A"], "A")
    with pytest.raises(RefusedError, match="compared with itself"):
        diff_arms(a, load_arm(arms["A"], "B"))
    with pytest.raises(RefusedError, match=r"different query ids.*logs-02"):
        diff_arms(a, load_arm(arms["fewer"], "B"), vary="description")
    with pytest.raises(RefusedError, match="query-set digest"):
        diff_arms(a, load_arm(arms["reworded"], "B"), vary="description")


def test_a_copied_study_is_the_same_arm(arms: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(arms["A"], copy)
    with pytest.raises(RefusedError, match="the same study"):
        diff_arms(load_arm(arms["A"], "A"), load_arm(copy, "B"))


def test_corroboration_refuses_a_confounded_edit_unless_forced(arms: dict[str, Path]) -> None:
    a, b = load_arm(arms["A"], "A"), load_arm(arms["B-runtime"], "B")
    assert set(moved_axes(a.artifact, b.artifact)) == {"description", "runtime"}
    with pytest.raises(RefusedError, match=r"runtime: runtime keyword → retriever.*--force"):
        diff_arms(a, b, vary="description")
    r = diff_arms(a, b, vary="description", force=True)
    assert r.forced
    assert any("--force" in w and "runtime" in w for w in r.warnings)
    # with --skill, another skill's edit is a rival, not the description under test
    plain = load_arm(arms["B"], "B")
    assert moved_axes(a.artifact, plain.artifact, "config-push") == {
        "rival": "description of log-search changed"
    }
    with pytest.raises(RefusedError, match="rival"):
        diff_arms(a, plain, vary="description", skill="config-push")
    # without --vary, one axis that moved is what the diff measures; several must be named
    inferred = diff_arms(a, plain)
    assert inferred.vary == "description"
    assert any("no --vary" in w for w in inferred.warnings)
    with pytest.raises(RefusedError, match=r"several ways.*--vary"):
        diff_arms(a, b)
    with pytest.raises(InputError, match="--vary colour"):
        diff_arms(a, plain, vary="colour")


def test_mcnemar_exact_matches_statsmodels_on_small_tables() -> None:
    for lost, won in ((0, 0), (0, 3), (1, 7), (5, 5), (2, 11), (13, 4)):
        expected = mcnemar([[3, lost], [won, 2]], exact=True).pvalue
        assert mcnemar_exact(lost, won) == pytest.approx(expected)


# --------------------------------------------------------------------------------- the command line


def test_cli_json_html_markdown(
    arms: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html, md = tmp_path / "diff.html", tmp_path / "diff.md"
    argv = [
        "diff",
        str(arms["A"]),
        str(arms["B"]),
        "--vary",
        "description",
        "--json",
        "--queries",
        str(arms["queries"]),
        "--html",
        str(html),
        "--markdown",
        str(md),
    ]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    won = [f["query_id"] for f in data["won"]]
    assert won
    assert data["verdict"] in ("better", "worse", "no detectable change")
    assert all(f["text"] for f in data["won"])
    page = html.read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert f'data-verdict="{data["verdict"]}"' in page
    for q in won:
        assert f'data-query="{q}"' in page
    assert 'data-skill="log-search"' in page
    assert "<svg" in page
    summary = md.read_text(encoding="utf-8")
    assert "| metric | A | B |" in summary
    assert won[0] in summary
    # without --queries the texts come from the copy of the sealed set in A's study folder
    assert main(["diff", str(arms["A"]), str(arms["B"]), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [f["text"] for f in again["won"]] == [f["text"] for f in data["won"]]
    assert again["vary"] == "description"
    assert main(["diff", str(arms["A"]), str(arms["B"]), "--vary", "description"]) == 0
    out = capsys.readouterr().out
    assert "Top-1 accuracy" in out
    assert "won" in out


def test_cli_walls_exit_3(arms: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    for b, extra, says in (
        (arms["A"], [], "compared with itself"),
        (arms["fewer"], [], "different query ids"),
        (arms["reworded"], [], "query-set digest"),
        (arms["B-runtime"], ["--vary", "description"], "--force"),
    ):
        assert main(["diff", str(arms["A"]), str(b), *extra]) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1
        assert says in err[0]


def test_executable_refuses_with_exit_3_and_no_traceback(arms: dict[str, Path]) -> None:
    exe = Path(sys.executable).with_name("skillreach")
    proc = subprocess.run(
        [str(exe), "diff", str(arms["A"]), str(arms["fewer"])], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "different query ids" in lines[0]
    assert "Traceback" not in proc.stderr


def test_cli_bad_input_exit_2(arms: dict[str, Path], tmp_path: Path) -> None:
    assert main(["diff", str(arms["A"]), str(tmp_path / "nope")]) == 2
    assert main(["diff", str(arms["A"]), str(arms["B"]), "--vary", "colour"]) == 2
    other = _reseal(EXAMPLE_QUERIES, tmp_path / "other.json", retext="logs-01")
    assert main(["diff", str(arms["A"]), str(arms["B"]), "--queries", str(other)]) == 2


def test_moved_axes_reads_scope_rival_model_from_the_pins(arms: dict[str, Path]) -> None:
    art = load_arm(arms["A"], "A").artifact
    rt = art.runtime
    other_model = art.model_copy(update={"runtime": rt.model_copy(update={"resolved_model": "m-2025"})})
    assert moved_axes(art, other_model) == {"model": "model None → m-2025"}
    turns = art.model_copy(update={"runtime": rt.model_copy(update={"max_turns": 1})})
    assert moved_axes(art, turns) == {"runtime": "max_turns 3 → 1"}
    cat = art.catalog
    fewer = cat.model_copy(update={"skills": cat.skills[1:], "id": "neighborhood:x:k1:n12:s0"})
    moved = moved_axes(art, art.model_copy(update={"catalog": fewer}))
    assert set(moved) == {"rival", "scope"}
    assert moved["rival"] == f"removed {cat.skills[0]}"
    assert moved_axes(art, art) == {}
