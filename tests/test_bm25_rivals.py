"""BM25 rivals: the float32 screen + float64 rescoring against the dense path it replaced.

``_rivals_before`` is the implementation of :func:`skillreach.skills.bm25.rivals` before the screen (float64
blocks of the full matrix from ``BM25Index.score_matrix``, a per-row partition, ties by name), kept
here verbatim as the reference: the new path must name the same rivals in the same order, with the
same scores, self-scores and ratios (to 1e-12: summation order moves the last bits).
"""

from __future__ import annotations

import gc
import itertools
import json
import random
import re
import string
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from skillreach.models import Skill
from skillreach.skills._bm25kernel import add_sparse_product
from skillreach.skills.bm25 import (
    COMPILED_PAIRS,
    STOPWORDS,
    TIE_DECIMALS,
    BM25Index,
    SkillRivals,
    _accumulate,
    _compiled_screen,
    _documents,
    _Screen,
    overlap_matrix,
    rivals,
    tokenize,
)
from skillreach.skills.discovery import discover
from tests.helpers import hang

SKILLREACH = Path(sys.executable).parent / "skillreach"

# ------------------------------------------------------------------------ the reference: before


def _top_block_before(block: np.ndarray, top: int, name_rank: np.ndarray) -> list[list[int]]:
    n_rows, n_cols = block.shape
    if top <= 0 or n_cols == 0:
        return [[] for _ in range(n_rows)]
    if top < n_cols:
        kth = np.partition(block, n_cols - top, axis=1)[:, n_cols - top]
    else:
        kth = np.full(n_rows, -np.inf)
    threshold = np.maximum(kth - 10.0**-TIE_DECIMALS, 0.0)
    rows, cols = np.nonzero((block >= threshold[:, None]) & (block > 0))
    order = np.lexsort((name_rank[cols], -np.round(block[rows, cols], TIE_DECIMALS), rows))
    rows, cols = rows[order], cols[order]
    out: list[list[int]] = [[] for _ in range(n_rows)]
    starts = np.searchsorted(rows, np.arange(n_rows + 1))
    for r in range(n_rows):
        out[r] = cols[starts[r] : min(starts[r + 1], starts[r] + top)].tolist()
    return out


def _rivals_before(
    skills: list[Skill], top: int = 10, *, only: set[str] | None = None, block: int = 2048
) -> list[tuple[str, float, list[tuple[str, float, float | None]]]]:
    docs = _documents(skills)
    index = BM25Index(docs)
    names = [s.name for s in skills]
    rows = [i for i, n in enumerate(names) if only is None or n in only]
    q_all = index.tf[rows] if len(rows) < len(docs) else index.tf
    dense_df = max(32, len(docs) // 50) if len(rows) >= 1000 and len(docs) >= 1000 else None
    name_rank = np.empty(len(names), dtype=np.int64)
    name_rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    out = []
    block = max(1, min(block, (1 << 26) // max(len(docs), 1)))
    for start in range(0, len(rows), block):
        chunk = index.score_matrix(q_all[start : start + block], dense_df=dense_df or 0)
        own = np.asarray(rows[start : start + block])
        positions = np.arange(own.size)
        self_scores = chunk[positions, own].copy()
        chunk[positions, own] = -np.inf
        best = _top_block_before(chunk, top, name_rank)
        for offset, (i, self_score, picked) in enumerate(
            zip(own.tolist(), self_scores.tolist(), best, strict=True)
        ):
            values = chunk[offset, picked].tolist()
            out.append(
                (
                    names[i],
                    self_score,
                    [
                        (names[j], v, v / self_score if self_score > 0 else None)
                        for j, v in zip(picked, values, strict=True)
                    ],
                )
            )
    return out


def _close(a: list[float], b: list[float]) -> bool:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return x.shape == y.shape and bool(np.all(np.abs(x - y) <= 1e-12 * np.maximum(1.0, np.abs(y))))


def _assert_same(
    new: list[SkillRivals], before: list[tuple[str, float, list[tuple[str, float, float | None]]]]
) -> None:
    assert [r.name for r in new] == [name for name, _, _ in before]
    assert _close([r.self_score for r in new], [s for _, s, _ in before])
    for got, (name, _, expected) in zip(new, before, strict=True):
        assert [v.name for v in got.rivals] == [n for n, _, _ in expected], name
        assert _close([v.score for v in got.rivals], [s for _, s, _ in expected]), name
        assert [v.ratio is None for v in got.rivals] == [r is None for _, _, r in expected], name
        assert _close([v.ratio or 0.0 for v in got.rivals], [r or 0.0 for _, _, r in expected]), name


def zipf_catalog(n: int, seed: int, vocabulary: int = 3000, words: tuple[int, int] = (5, 60)) -> list[Skill]:
    """Made-up words with Zipf-like frequencies (a few in every skill, a long tail), names shuffled."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(vocabulary)]
    cum = list(itertools.accumulate(1.0 / (r + 1) ** 1.05 for r in range(vocabulary)))
    skills = [
        Skill(
            name=f"s-{rng.randrange(10**9):09d}-{i}",
            description=" ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(*words))),
        )
        for i in range(n)
    ]
    rng.shuffle(skills)
    return skills


# --------------------------------------------------------------------------- differential tests


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("dense_df", [None, 0, 1, 40])
def test_rivals_equal_before_on_a_seeded_zipf_catalog(dense_df: int | None, compiled: bool) -> None:
    skills = zipf_catalog(1200, seed=5)
    before = _rivals_before(skills, top=10, block=500)  # ≥ 1000 × 1000: the old hybrid product
    _assert_same(rivals(skills, top=10, dense_df=dense_df, block=97, compiled=compiled), before)


def _same_rivals(a: list[SkillRivals], b: list[SkillRivals]) -> None:
    assert [r.name for r in a] == [r.name for r in b]
    assert _close([r.self_score for r in a], [r.self_score for r in b])
    for x, y in zip(a, b, strict=True):
        assert [v.name for v in x.rivals] == [v.name for v in y.rivals], x.name
        assert _close([v.score for v in x.rivals], [v.score for v in y.rivals]), x.name
        assert [v.ratio for v in x.rivals] == [v.ratio for v in y.rivals] or _close(
            [v.ratio or 0.0 for v in x.rivals], [v.ratio or 0.0 for v in y.rivals]
        ), x.name


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    n=st.integers(1, 400),
    vocabulary=st.sampled_from([5, 40, 400]),
    top=st.sampled_from([1, 3, 10, 50]),
    dense_df=st.sampled_from([None, 0, 1, 3, 30]),
    block=st.sampled_from([1, 7, 64, 2048]),
)
def test_compiled_screen_equals_the_scipy_screen_on_random_catalogs(
    seed: int, n: int, vocabulary: int, top: int, dense_df: int | None, block: int
) -> None:
    """The compiled screen (numba, dense/sparse split moved) picks what the scipy screen picks."""
    skills = zipf_catalog(n, seed=seed, vocabulary=vocabulary, words=(0, 40))
    simple = rivals(skills, top=top, dense_df=0, compiled=False)  # the sparse product alone
    _same_rivals(rivals(skills, top=top, dense_df=dense_df, block=block, compiled=True), simple)
    _same_rivals(rivals(skills, top=top, dense_df=dense_df, block=block, compiled=False), simple)


def test_compiled_screen_is_chosen_from_twenty_thousand_squared_pairs() -> None:
    """The automatic choice: the compiled screen for big products only (loading it costs ~1–2 s), so
    the rivals of one skill in a big catalog (``only=``) keep the scipy screen."""
    assert COMPILED_PAIRS == 20_000**2
    assert _compiled_screen(20_000, 20_000, None)
    assert not _compiled_screen(19_999, 20_000, None)
    assert not _compiled_screen(1, 100_000, None)
    assert _compiled_screen(3, 3, True)
    assert not _compiled_screen(50_000, 50_000, False)


@pytest.mark.parametrize("top", [0, 1, 3, 25, 400])
def test_rivals_equal_before_with_many_ties_and_every_top(top: int) -> None:
    """A 12-word vocabulary: many skills say exactly the same words, so whole runs of rivals tie and
    are ordered by name; ``top`` above the number of positive scores returns them all."""
    rng = random.Random(9)
    words = [
        "pdf",
        "word",
        "deploy",
        "rollback",
        "schema",
        "query",
        "index",
        "config",
        "push",
        "release",
        "a",
        "b",
    ]
    skills = [
        Skill(
            name=f"k-{rng.randrange(1000):03d}-{i}",
            description=" ".join(rng.choices(words, k=rng.randint(0, 4))),
        )
        for i in range(300)
    ]
    _assert_same(rivals(skills, top=top, block=64), _rivals_before(skills, top=top))


@pytest.mark.parametrize("compiled", [False, True])
def test_rivals_of_some_skills_equal_before(compiled: bool) -> None:
    skills = zipf_catalog(600, seed=3)
    only = {s.name for s in random.Random(1).sample(skills, 40)}
    before = _rivals_before(skills, top=7, only=only)
    _assert_same(rivals(skills, top=7, only=only, compiled=compiled), before)
    assert rivals(skills, top=7, only=set()) == []


def test_rivals_equal_before_on_the_real_corpora(corpora: Path) -> None:
    skills = discover([corpora]).skills
    for top in (1, 10, 60):
        _assert_same(rivals(skills, top=top), _rivals_before(skills, top=top))


def test_overlap_command_prints_the_rivals_of_before(corpora: Path) -> None:
    """``skillreach overlap DIR --json``, the command a user runs, on a real corpus."""
    folder = corpora / "anthropics__skills"
    run = hang.finish([str(SKILLREACH), "overlap", str(folder), "--top", "5", "--json"], limit_s=120)
    assert run.returncode == 0, run.stderr
    printed = {s["name"]: s for s in json.loads(run.stdout)["skills"]}
    before = _rivals_before(discover([folder]).skills, top=5)
    assert len(printed) == len(before) > 5
    for name, self_score, expected in before:
        assert printed[name]["self_score"] == pytest.approx(self_score, rel=1e-12)
        assert [(v["name"], v["score"]) for v in printed[name]["rivals"]] == [
            (n, pytest.approx(s, rel=1e-12)) for n, s, _ in expected
        ]


# ------------------------------------------------------------------------ the screen's guarantee


@pytest.mark.parametrize(
    ("seed", "dense_df", "top", "levels"),
    [(0, 0, 1, 1), (1, 30, 5, 1), (2, 5, 10, 1), (3, 1, 40, 1), (4, 5, 10, 2), (5, 0, 3, 2), (6, 30, 40, 2)],
)
def test_screen_candidates_hold_every_column_the_exact_rule_can_take(
    seed: int, dense_df: int, top: int, levels: int
) -> None:
    """Whatever the float32 rounding, the candidates of a row hold every column whose exact score is
    within 10**-TIE_DECIMALS of the row's k-th best or above (and positive): what ranking may keep."""
    skills = zipf_catalog(500, seed=seed, vocabulary=400, words=(1, 30))
    exact = overlap_matrix(skills)
    index = BM25Index(_documents(skills))
    screen = _Screen(index, index.tf, dense_df, block=128, levels=levels)
    assert screen.height % 16**levels == 0
    n = len(skills)
    for start in range(0, n, screen.block):
        stop = min(start + screen.block, n)
        local, cols = screen.candidates(start, stop, np.arange(start, stop), top)
        assert not np.any(local + start == cols)  # never its own rival
        got = set(zip((local + start).tolist(), cols.tolist(), strict=True))
        for i in range(start, stop):
            row = exact[i].copy()
            row[i] = -np.inf
            kth = np.sort(row)[::-1][top - 1] if top <= n - 1 else -np.inf
            needed = np.flatnonzero((row >= kth - 10.0**-TIE_DECIMALS) & (row > 0))
            assert {(i, j) for j in needed.tolist()} <= got


@pytest.mark.parametrize("compiled", [False, True])
def test_screen_float32_error_within_its_bound(compiled: bool) -> None:
    skills = zipf_catalog(400, seed=4, vocabulary=300)
    exact = overlap_matrix(skills)
    index = BM25Index(_documents(skills))
    screen = _Screen(index, index.tf, dense_df=20, block=400, compiled=compiled)
    approx = screen.scores(0, 400)[:400].T.astype(np.float64)
    assert screen.delta < 1e-4
    assert np.all(np.abs(approx - exact) <= screen.delta * exact + 1e-30)
    assert np.abs(approx - exact).max() > 0  # float32 indeed: the bound is what makes it exact


@pytest.mark.parametrize(
    ("seed", "dense_df", "top", "levels"),
    [(0, 0, 1, 1), (1, 30, 5, 1), (2, 5, 10, 1), (3, 1, 40, 1), (4, 5, 10, 2), (5, 0, 3, 2), (6, 30, 40, 2)],
)
def test_compiled_screen_candidates_hold_every_column_the_exact_rule_can_take(
    seed: int, dense_df: int, top: int, levels: int
) -> None:
    """The compiled screen pools its first level while it scores (the own documents' groups redone)."""
    skills = zipf_catalog(700, seed=seed, vocabulary=400, words=(1, 30))
    exact = overlap_matrix(skills)
    index = BM25Index(_documents(skills))
    screen = _Screen(index, index.tf, dense_df, block=200, levels=levels, compiled=True)
    for start in range(0, len(skills), screen.block):
        stop = min(start + screen.block, len(skills))
        local, cols = screen.candidates(start, stop, np.arange(start, stop), top)
        got = set(zip((local + start).tolist(), cols.tolist(), strict=True))
        for i in range(start, stop):
            row = exact[i].copy()
            row[i] = -np.inf
            kth = np.sort(row)[::-1][top - 1]
            needed = np.flatnonzero((row >= kth - 10.0**-TIE_DECIMALS) & (row > 0))
            assert {(i, j) for j in needed.tolist()} <= got


def test_compiled_kernel_adds_the_sparse_product_in_place() -> None:
    """``out += A[rows] @ B`` for a slice of A's rows (small integers: every sum exact in float32)."""
    rng = np.random.default_rng(3)
    a = sp.random(40, 25, density=0.2, random_state=4, format="csr", dtype=np.float32)
    b = sp.random(25, 13, density=0.3, random_state=5, format="csr", dtype=np.float32)
    a.data = rng.integers(1, 9, a.nnz).astype(np.float32)
    b.data = rng.integers(1, 9, b.nnz).astype(np.float32)
    out = rng.integers(0, 5, (15, 13)).astype(np.float32)
    expected = out + (a @ b).toarray()[10:25]
    arrays = (
        [x.astype(np.int64) for x in (a.indptr, a.indices)],
        [x.astype(np.int64) for x in (b.indptr, b.indices)],
    )
    add_sparse_product(out, 10, *arrays[0], a.data, *arrays[1], b.data)
    assert np.array_equal(out, expected)
    assert np.count_nonzero((a @ b).toarray()[10:25]) > 20


def test_accumulate_adds_in_place() -> None:
    rng = np.random.default_rng(0)
    dense = rng.random((30, 17)).astype(np.float32)
    sparse = sp.random(30, 17, density=0.3, random_state=1, format="csr", dtype=np.float32)
    expected = dense + sparse.toarray()
    _accumulate(dense, sparse)
    assert np.array_equal(dense, expected)
    # the kernel it adds with is scipy's private one: a scipy that moves it fails here (the public path
    # that _accumulate falls back to zero-fills and adds again: ~2.5 s more at 50,000 skills)
    from scipy.sparse._sparsetools import csr_todense

    assert callable(csr_todense)


def test_rivals_leave_the_garbage_collector_as_they_found_it() -> None:
    skills = zipf_catalog(50, seed=1)
    assert gc.isenabled()
    rivals(skills, top=3)
    assert gc.isenabled()
    gc.disable()
    try:
        rivals(skills, top=3)
        assert not gc.isenabled()
    finally:
        gc.enable()


# ------------------------------------------------------------------------------------ tokenizer


def _tokenize_by_regex(text: str) -> list[str]:
    folded = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).casefold()
    return [t for t in re.findall(r"[^\W_]+", folded) if t not in STOPWORDS]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80) | st.text(max_size=40))
def test_tokenize_equals_the_regex_on_any_text(text: str) -> None:
    """The ASCII fast path (translate + split) gives the letter/digit runs of ``[^\\W_]+``."""
    assert tokenize(text) == _tokenize_by_regex(text)


def test_overlap_command_on_twenty_thousand_skills_equals_the_scipy_screen(tmp_path: Path) -> None:
    """``skillreach overlap`` past :data:`COMPILED_PAIRS` (the compiled screen, in a fresh process that
    loads numba) prints the rivals the scipy screen finds. About 30–60 s on the loaded 2-core machine."""
    skills = zipf_catalog(20_000, seed=8, words=(3, 20))
    for s in skills:
        folder = tmp_path / s.name
        folder.mkdir()
        (folder / "SKILL.md").write_text(f"---\nname: {s.name}\ndescription: {s.description}\n---\nSteps.\n")
    run = hang.finish([str(SKILLREACH), "overlap", str(tmp_path), "--top", "3", "--json"], limit_s=300)
    assert run.returncode == 0, run.stderr
    printed = {s["name"]: s for s in json.loads(run.stdout)["skills"]}
    expected = rivals(skills, top=3, compiled=False)  # what the command reads: name, description
    assert len(printed) == len(expected) == 20_000
    for r in expected:
        got = printed[r.name]
        assert got["self_score"] == pytest.approx(r.self_score, rel=1e-12)
        assert [(v["name"], v["score"]) for v in got["rivals"]] == [
            (v.name, pytest.approx(v.score, rel=1e-12)) for v in r.rivals
        ]


@pytest.mark.parametrize("compiled", [False, True])
def test_rivals_equal_before_when_thousands_of_skills_tie(compiled: bool) -> None:
    """A templated catalog: 3,000 skills over a 6-word vocabulary, so each skill's ``top``-th best ties
    with well over ``_TIED_GROUPS`` groups of columns (the rows ranked by ``_tied_candidates`` rather than
    paired column by column) — the same rivals, ordered by name within a tie, as the plain rule."""
    rng = random.Random(5)
    words = ["pdf", "deploy", "schema", "query", "index", "config"]
    skills = [
        Skill(
            name=f"t-{rng.randrange(10_000):04d}-{i}",
            description=" ".join(rng.sample(words, k=rng.randint(1, 3))),
        )
        for i in range(3000)
    ]
    only = {s.name for s in rng.sample(skills, 60)}
    before = _rivals_before(skills, top=10, only=only)
    tied = [name for name, _, picked in before if len({round(v, 6) for _, v, _ in picked}) == 1 and picked]
    assert len(tied) >= 20  # many rows are whole runs of ties, broken by name
    _assert_same(rivals(skills, top=10, only=only, compiled=compiled), before)
