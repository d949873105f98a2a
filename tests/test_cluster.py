"""``skillreach cluster``: communities of the BM25 similarity graph, each at most the target size, on
the bundled example and on the real corpora (../shared/corpora)."""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path

import networkx as nx
import pytest

from skillreach.author.cluster import cluster_skills, similarity_graph
from skillreach.cli import main
from skillreach.errors import InputError
from skillreach.example import EXAMPLE_SKILLS
from skillreach.skills.bm25 import overlap_matrix
from skillreach.skills.discovery import load_skills


def _partition_ok(result_skills: list[list[str]], names: set[str], target: int) -> None:
    flat = [s for c in result_skills for s in c]
    assert sorted(flat) == sorted(names)  # every skill once
    assert max(len(c) for c in result_skills) <= target


def test_graph_weights_are_the_mean_bm25_ratio_of_both_directions() -> None:
    skills = load_skills([EXAMPLE_SKILLS])
    names = [s.name for s in skills]
    m = overlap_matrix(skills)
    g = similarity_graph(skills, top=len(skills), min_ratio=0.0)
    for u, v, d in g.edges(data=True):
        i, j = names.index(u), names.index(v)
        expected = (m[i, j] / m[i, i] + m[j, i] / m[j, j]) / 2
        assert d["weight"] == pytest.approx(expected, abs=1e-8)
    positive = {
        tuple(sorted((names[i], names[j])))
        for i in range(len(names))
        for j in range(len(names))
        if i != j and (m[i, j] > 0 or m[j, i] > 0)
    }
    assert {tuple(sorted(e)) for e in g.edges()} == positive


def test_example_release_skills_share_a_scope_and_order_does_not_matter() -> None:
    skills = load_skills([EXAMPLE_SKILLS])
    result = cluster_skills(skills, target_size=5, seed=0)
    parts = [c.skills for c in result.communities]
    _partition_ok(parts, {s.name for s in skills}, 5)
    by = result.community_of()
    assert by["release-deploy"] == by["release-rollback"] == by["release-notes"]
    assert by["pdf-documents"] == by["word-documents"]
    shuffled = list(skills)
    random.Random(7).shuffle(shuffled)
    assert cluster_skills(shuffled, target_size=5, seed=0) == result
    g = similarity_graph(skills)
    assert result.modularity == pytest.approx(nx.community.modularity(g, [set(p) for p in parts]), abs=1e-6)


def test_bad_options() -> None:
    skills = load_skills([EXAMPLE_SKILLS])
    with pytest.raises(InputError, match="--target-size 1"):
        cluster_skills(skills, target_size=1)
    with pytest.raises(InputError, match="--resolution"):
        cluster_skills(skills, resolution=0)


def test_corpora_split_into_scopes_below_the_target(corpora: Path) -> None:
    skills = load_skills([corpora], on_problem=lambda _: None)
    assert len(skills) >= 241
    names = {s.name for s in skills}
    result = cluster_skills(skills, target_size=20, seed=0)
    parts = [c.skills for c in result.communities]
    _partition_ok(parts, names, 20)
    assert len(parts) >= len(skills) // 20
    # seeded: the same split again
    assert cluster_skills(skills, target_size=20, seed=0) == result
    # better than chance: random partitions of the same sizes have far lower modularity
    g = similarity_graph(skills)
    rng = random.Random(0)
    pool = sorted(names)
    sizes = [len(p) for p in parts]
    for _ in range(5):
        rng.shuffle(pool)
        chunks, at = [], 0
        for n in sizes:
            chunks.append(set(pool[at : at + n]))
            at += n
        assert nx.community.modularity(g, chunks) < result.modularity - 0.3
    # skills of one family land together: the Azure Kusto skills share one community
    by = result.community_of()
    kusto = [n for n in names if n.startswith("azure-kusto")]
    assert len(kusto) >= 2
    assert len({by[n] for n in kusto}) == 1


def test_cli_text_json_csv(corpora: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", str(corpora), "--target-size", "20", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["skills"] >= 241
    assert all(len(c["skills"]) <= 20 for c in data["communities"])
    assert main(["cluster", str(corpora), "--target-size", "20"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{len(data['communities'])} communities of {data['skills']} skills")
    for c in data["communities"]:
        assert f"#{c['id']} {c['kind']} · {len(c['skills'])} skills" in text
    out = tmp_path / "scopes.csv"
    assert main(["cluster", str(corpora), "--format", "csv", "--out", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert len(rows) == data["skills"]
    assert {r["skill"]: int(r["community"]) for r in rows} == {
        s: c["id"] for c in data["communities"] for s in c["skills"]
    }
    assert main(["cluster", str(corpora), "--format", "xml"]) == 2
    assert "--format xml" in capsys.readouterr().err


def _sweep_json(path: Path, f1: list[float]) -> Path:
    from skillreach.author.sweep import SizePoint, SweepResult, analyse

    sizes = [5, 10, 20, 40, 80, 160, 320][: len(f1)]
    points = [
        SizePoint(
            size=n,
            study="",
            queries=20,
            probes=20,
            scored=20,
            errors=0,
            pass_rate=v,
            pass_rate_ci=(v - 0.02, v + 0.02),
            recall=v,
            recall_ci=None,
            precision=v,
            precision_ci=None,
            f1=v,
            f1_ci=(v - 0.02, v + 0.02),
            abstention=0.0,
            abstention_ci=None,
            prompt_tokens=10.0,
            prompt_tokens_measured=False,
        )
        for n, v in zip(sizes, f1, strict=True)
    ]
    result = SweepResult(
        out=str(path.parent), design="corpus", runtime="keyword", model=None, seed=0, anchors=["a"], core=1,
        corpus=320, queries=20, queries_digest="sha256:0", sizes=sizes, clipped=[], points=points,
        analysis=analyse(points),
    )  # fmt: skip
    path.write_text(result.model_dump_json(), encoding="utf-8")
    return path


def test_cli_target_size_from_a_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import math

    import numpy as np

    f1 = [0.97, 0.95, 0.93, 0.88, 0.70, 0.50]
    sweep = _sweep_json(tmp_path / "sweep.json", f1)
    expected = math.floor(
        math.exp(np.interp(0.90, f1[::-1], [math.log(s) for s in (5, 10, 20, 40, 80, 160)][::-1]))
    )
    assert main(["cluster", str(EXAMPLE_SKILLS), "--sweep", str(sweep), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["target_size"] == expected
    assert f"target size {expected}" in captured.err
    never = _sweep_json(tmp_path / "low.json", [0.5, 0.5, 0.5])
    assert main(["cluster", str(EXAMPLE_SKILLS), "--sweep", str(never)]) == 2
    assert "--target-size" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    assert main(["cluster", str(EXAMPLE_SKILLS), "--sweep", str(tmp_path / "bad.json")]) == 2


def test_the_cluster_flow_is_the_command_s_computation(tmp_path: Path) -> None:
    """`skillreach cluster` runs the `cluster` flow; its result is the pure function's."""
    import asyncio

    from skillreach.author.cluster import cluster_skills
    from skillreach.example import EXAMPLE_SKILLS
    from skillreach.flows.cluster import cluster
    from skillreach.skills.discovery import load_skills

    via_flow = asyncio.run(cluster.fn([Path(EXAMPLE_SKILLS)], target_size=5, seed=3))
    direct = cluster_skills(load_skills([Path(EXAMPLE_SKILLS)]), target_size=5, seed=3)
    assert via_flow == direct
    assert max(c.size for c in via_flow.communities) <= 5
