"""``skillreach sweep``: the plan (nested seeded catalogs, anchors, target neighbourhoods), the figures
per size (equal to the study's own artifact and to scikit-learn), the knee and SLA analysis (against an
independent interpolation), early stop, resume, and the command end to end on the bundled example."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import f1_score

from skillreach.author.sweep import (
    SizePoint,
    SweepConfig,
    analyse,
    catalog_at,
    log_sizes,
    plan_sweep,
    restrict_queries,
    should_stop,
    size_point,
)
from skillreach.cli import main
from skillreach.errors import InputError
from skillreach.example import EXAMPLE_QUERIES, EXAMPLE_SKILLS
from skillreach.flows.sweep import sweep
from skillreach.queries.sets import load_query_set
from skillreach.scoring.artifact import read_artifact
from skillreach.skills.bm25 import rivals
from skillreach.skills.discovery import load_skills
from skillreach.study import StudyConfig


def _point(size: int, f1: float, half: float = 0.03) -> SizePoint:
    ci = (max(0.0, f1 - half), min(1.0, f1 + half))
    return SizePoint(
        size=size, study="", queries=10, probes=10, scored=10, errors=0, pass_rate=f1, pass_rate_ci=ci,
        recall=f1, recall_ci=ci, precision=f1, precision_ci=ci, f1=f1, f1_ci=ci, abstention=0.0,
        abstention_ci=(0.0, 0.1), prompt_tokens=100.0, prompt_tokens_measured=False,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------- plan


def test_log_sizes() -> None:
    assert log_sizes(240, 7) == [5, 9, 18, 35, 66, 126, 240] or log_sizes(240, 7) == sorted(
        {round(float(x)) for x in np.geomspace(5, 240, 7)}
    )
    assert log_sizes(240, 7)[0] == 5
    assert log_sizes(240, 7)[-1] == 240
    with pytest.raises(InputError, match="--points 1"):
        log_sizes(100, 1)
    with pytest.raises(InputError, match="--max 5"):
        log_sizes(5, 3)


def test_corpus_design_is_nested_seeded_and_order_free() -> None:
    skills = load_skills([EXAMPLE_SKILLS])
    qs = load_query_set(EXAMPLE_QUERIES)
    plan = plan_sweep(skills, qs, [3, 5, 8, 13, 40], n_anchors=3, seed=1)
    assert len(plan.anchors) == 3
    acceptable = {a for q in qs.queries if q.expected_skill in plan.anchors for a in q.acceptable_skills}
    assert set(plan.core) == set(plan.anchors) | acceptable
    assert plan.sizes == [n for n in (3, 5, 8, 13) if n >= len(plan.core)]
    assert 40 in plan.clipped
    assert set(plan.anchors) <= {q.expected_skill for q in qs.queries}
    small, big = catalog_at(plan, 5), catalog_at(plan, 13)
    assert big[:5] == small  # each catalog holds the smaller ones
    assert sorted(big) == sorted(s.name for s in skills)
    shuffled = list(skills)
    random.Random(3).shuffle(shuffled)
    assert plan_sweep(shuffled, qs, [3, 5, 8, 13, 40], n_anchors=3, seed=1) == plan
    assert plan_sweep(skills, qs, [5], n_anchors=3, seed=2).filler != plan.filler
    kept = restrict_queries(qs, plan)
    assert {q.expected_skill for q in kept.queries} <= {*plan.anchors, None}
    assert any(q.expected_skill is None for q in kept.queries)


def test_target_design_keeps_the_nearest_rivals_and_bad_options_say_what_to_do() -> None:
    skills = load_skills([EXAMPLE_SKILLS])
    qs = load_query_set(EXAMPLE_QUERIES)
    plan = plan_sweep(skills, qs, [5, 13], design="target", target="log-search", k=4)
    near = next(r for r in rivals(skills, top=4) if r.name == "log-search")
    assert plan.anchors == ["log-search", *(r.name for r in near.rivals)]
    assert catalog_at(plan, 5)[:5] == plan.anchors
    with pytest.raises(InputError, match="--target"):
        plan_sweep(skills, qs, [5], design="target")
    with pytest.raises(InputError, match="--anchor nope"):
        plan_sweep(skills, qs, [5], anchors=["nope"])
    with pytest.raises(InputError, match="--sizes"):
        plan_sweep(skills, qs, [500], n_anchors=3)


def test_sweep_plan_on_the_corpora(corpora: Path, tmp_path: Path) -> None:
    skills = load_skills([corpora], on_problem=lambda _: None)
    assert len(skills) >= 241
    # a query set over a few corpora skills (written here; no corpus text copied)
    names = sorted(s.name for s in skills)[:8]
    rows = [{"id": f"q{i}", "text": f"help with {n}", "expected_skill": n} for i, n in enumerate(names)]
    rows.append({"id": "oos", "text": "weather tomorrow", "expected_skill": None, "kind": "out_of_scope"})
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"catalog_id": "all", "queries": rows}), encoding="utf-8")
    plan = plan_sweep(skills, load_query_set(path), log_sizes(240, 7), n_anchors=5)
    assert plan.sizes[0] == 5
    assert plan.sizes[-1] == 240
    previous: list[str] = []
    for n in plan.sizes:
        cat = catalog_at(plan, n)
        assert len(cat) == len(set(cat)) == n
        assert cat[: len(previous)] == previous
        previous = cat


# --------------------------------------------------------------------------------------- analysis


def test_sla_sizes_are_interpolated_on_log_size() -> None:
    sizes = [5, 10, 20, 40, 80, 160]
    f1 = [0.97, 0.95, 0.93, 0.88, 0.70, 0.50]
    a = analyse([_point(s, f) for s, f in zip(sizes, f1, strict=True)])
    for sla in a.sla:
        # independent: numpy's interp on the reversed (increasing) F1 axis, in ln(size)
        expected = math.exp(np.interp(sla.level, f1[::-1], [math.log(s) for s in sizes][::-1]))
        assert sla.size == pytest.approx(expected, abs=0.06)
        assert not sla.beyond
    flat = analyse([_point(s, 0.95) for s in sizes])
    assert all(s.beyond and s.size == 160 for s in flat.sla)
    low = analyse([_point(s, 0.5) for s in sizes])
    assert all(s.size is None for s in low.sla)


def test_knee_is_found_and_only_accepted_above_the_noise_floor() -> None:
    sizes = [5, 10, 20, 40, 80, 160, 320]
    f1 = [0.96, 0.955, 0.95, 0.94, 0.80, 0.60, 0.40]
    a = analyse([_point(s, f) for s, f in zip(sizes, f1, strict=True)])
    assert a.knee.accepted
    assert a.knee.size in (40, 80)
    assert a.noise_floor == pytest.approx(0.03)
    # the same bend, but smaller than the intervals are wide: not a knee
    tiny = [0.96, 0.959, 0.958, 0.957, 0.95, 0.94, 0.93]
    b = analyse([_point(s, f, half=0.1) for s, f in zip(sizes, tiny, strict=True)])
    assert not b.knee.accepted
    assert "noise floor" in b.knee.reason or "no knee" in b.knee.reason
    # a curve that flattens and wobbles at the end: Kneedle's pick is the last size, which is no knee
    wobbly = [0.702, 0.679, 0.652, 0.546, 0.565, 0.557, 0.575]
    c = analyse([_point(s, f, half=0.01) for s, f in zip(sizes, wobbly, strict=True)])
    assert not c.knee.accepted
    assert c.knee.size == 320
    assert "end point" in c.knee.reason
    assert should_stop(_point(50, 0.70, half=0.05))
    assert not should_stop(
        _point(50, 0.70, half=0.05).model_copy(update={"pass_rate_ci": (0.7, 0.9)}), metric="pass_rate"
    )
    assert not should_stop(_point(50, 0.78, half=0.05))


def test_the_metric_can_be_the_pass_rate() -> None:
    sizes = [5, 10, 20, 40, 80, 160]
    rates = [0.97, 0.95, 0.92, 0.86, 0.70, 0.50]
    points = [
        _point(s, 0.95).model_copy(update={"pass_rate": r, "pass_rate_ci": (r - 0.03, r + 0.03)})
        for s, r in zip(sizes, rates, strict=True)
    ]
    by_f1 = analyse(points)
    by_rate = analyse(points, metric="pass_rate")
    assert by_f1.metric == "f1"
    assert all(s.beyond for s in by_f1.sla)
    assert by_rate.metric == "pass_rate"
    expected = math.exp(np.interp(0.90, rates[::-1], [math.log(s) for s in sizes][::-1]))
    assert by_rate.sla[0].size == pytest.approx(expected, abs=0.06)
    assert by_rate.spread == pytest.approx(0.47)


# ------------------------------------------------------------------------------------ end to end


def _cfg(tmp: Path, out: str, **kw: object) -> SweepConfig:
    base = StudyConfig(skills=(EXAMPLE_SKILLS,), queries=EXAMPLE_QUERIES, home=tmp / "home", gate=False)
    return SweepConfig(study=base, out=tmp / out, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    tmp = tmp_path_factory.mktemp("sweep")
    argv = ["sweep", "--skills", str(EXAMPLE_SKILLS), "--queries", str(EXAMPLE_QUERIES)]
    argv += ["--sizes", "5,8,13", "--anchors", "3", "--seed", "1", "--out", str(tmp / "sw")]
    argv += ["--no-early-stop", "--json"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return tmp, json.loads(buf.getvalue())


def test_cli_sweep_writes_the_curve_and_per_size_studies(swept: tuple[Path, dict[str, object]]) -> None:
    tmp, data = swept
    out = tmp / "sw"
    assert [p["size"] for p in data["points"]] == [5, 8, 13]  # type: ignore[index]
    assert json.loads((out / "sweep.json").read_text()) == data
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert 'data-band="f1"' in page
    assert page.count('class="dot" data-size=') == 3
    for p in data["points"]:  # type: ignore[attr-defined]
        folder = out / f"n-{p['size']:04d}"
        links = sorted(x.name for x in (folder / "skills").iterdir() if x.is_symlink())
        assert len(links) == p["size"]
        art = read_artifact(folder / "artifact.json")
        assert sorted(art.catalog.skills) == links
        # the sweep's figures are the study's own, and scikit-learn's macro F1
        assert p["f1"] == pytest.approx(art.metrics.macro_f1)
        assert p["recall"] == pytest.approx(art.metrics.macro_recall)
        assert p["precision"] == pytest.approx(art.metrics.macro_precision)
        truth = [o.truth for o in art.outcomes]
        pred = [str(o.predicted) for o in art.outcomes]
        assert p["f1"] == pytest.approx(f1_score(truth, pred, labels=sorted(set(truth)), average="macro"))
        assert p["f1_ci"][0] <= p["f1"] <= p["f1_ci"][1]
        assert p["prompt_tokens"] > 0
    # every size ran the same sealed query set
    assert len({read_artifact(out / f"n-{s:04d}" / "artifact.json").queries_digest for s in (5, 8, 13)}) == 1


def test_a_rerun_resumes_every_size(swept: tuple[Path, dict[str, object]]) -> None:
    tmp, data = swept
    out = tmp / "sw"
    lines = {s: (out / f"n-{s:04d}" / "probes.jsonl").read_text().count("\n") for s in (5, 8, 13)}
    again = asyncio.run(sweep.fn(_cfg(tmp, "sw", sizes=(5, 8, 13), n_anchors=3, seed=1, stop_below=None)))
    assert [p.f1 for p in again.points] == [p["f1"] for p in data["points"]]  # type: ignore[attr-defined]
    assert lines == {s: (out / f"n-{s:04d}" / "probes.jsonl").read_text().count("\n") for s in (5, 8, 13)}


def test_early_stop_and_size_point(tmp_path: Path) -> None:
    result = asyncio.run(sweep.fn(_cfg(tmp_path, "stop", sizes=(5, 8, 13), n_anchors=3, stop_below=0.99)))
    assert result.analysis.stopped_at == 5
    assert [p.size for p in result.points] == [5]
    assert not (tmp_path / "stop" / "n-0008").exists()
    art = read_artifact(tmp_path / "stop" / "n-0005" / "artifact.json")
    again = size_point(5, "x", art, resamples=1000, seed=0)
    assert again.f1 == result.points[0].f1
    assert again.f1_ci == result.points[0].f1_ci  # seeded bootstrap


def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = [
        "sweep",
        "--skills",
        str(EXAMPLE_SKILLS),
        "--queries",
        str(EXAMPLE_QUERIES),
        "--out",
        str(tmp_path),
    ]
    assert main([*base, "--sizes", "5,x"]) == 2
    assert "--sizes 5,x" in capsys.readouterr().err
    assert main([*base, "--design", "cone"]) == 2
    assert main([*base, "--design", "target"]) == 2
    assert "--target" in capsys.readouterr().err
    assert main(["sweep", "--skills", str(EXAMPLE_SKILLS)]) == 2


def test_a_size_holds_exactly_its_skills_when_one_skill_nests_another(tmp_path: Path) -> None:
    from skillreach.skills.discovery import discover
    from skillreach.tasks.sweep import link_farm

    def skill(folder: Path, name: str) -> None:
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {name} things.\n---\nBody.\n")

    skill(tmp_path / "src" / "parent", "parent")
    skill(tmp_path / "src" / "parent" / "sub" / "child", "child")
    (tmp_path / "src" / "parent" / "notes.md").write_text("kept")
    skill(tmp_path / "src" / "other", "other")
    found = discover([tmp_path / "src"])
    folders = {s.name: str(Path(s.folder).resolve()) for s in found.skills}
    assert set(folders) == {"parent", "child", "other"}
    link_farm(tmp_path / "a", ["parent", "other"], folders)
    farm = discover([tmp_path / "a"], follow_outside=True)  # the farm's links lead outside it
    assert sorted(s.name for s in farm.skills) == ["other", "parent"]
    assert (tmp_path / "a" / "parent" / "notes.md").read_text() == "kept"
    link_farm(tmp_path / "b", ["child", "parent"], folders)
    farm = discover([tmp_path / "b"], follow_outside=True)  # the farm's links lead outside it
    assert sorted(s.name for s in farm.skills) == ["child", "parent"]


def test_kneedle_port_equals_kneed() -> None:
    kneed = pytest.importorskip("kneed")
    from skillreach.author.sweep import kneedle_decreasing_concave

    rng = random.Random(1)
    found = 0
    for trial in range(1500):
        n = rng.randint(3, 12)
        sizes = sorted(rng.sample(range(2, 5000), n))
        x = [math.log(s) for s in sizes]
        if trial % 3 == 0:
            y = sorted((rng.random() for _ in range(n)), reverse=True)
        elif trial % 3 == 1:
            y = [1 - (s / 5000) ** rng.uniform(0.3, 4) + rng.gauss(0, 0.02) for s in sizes]
        else:
            y = [round(rng.random(), 2) for _ in range(n)]
        if max(y) == min(y):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = kneed.KneeLocator(x, y, curve="concave", direction="decreasing", S=1.0).knee
        got = kneedle_decreasing_concave(x, y)
        assert got == want, (x, y)
        found += got is not None
    assert found > 1000  # most curves have a knee: the comparison is not of Nones
