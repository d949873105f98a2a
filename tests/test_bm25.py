"""BM25: the sparse path against rank-bm25 (Lucene idf), properties, rivals and rank."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from skillreach.models import Skill
from skillreach.skills.bm25 import (
    BM25Index,
    LuceneBM25,
    _ascii_codes,
    overlap_matrix,
    rank,
    rivals,
    skill_text,
    tokenize,
)
from skillreach.skills.discovery import discover

WORDS = ["pdf", "word", "deploy", "rollback", "schema", "query", "index", "config", "push", "release"]


def make_skills(descriptions: list[str]) -> list[Skill]:
    return [Skill(name=f"skill-{i}", description=d) for i, d in enumerate(descriptions)]


# ---------------------------------------------------------------------------------------- tokenizer


def test_tokenizer() -> None:
    assert tokenize("pdf-to-markdown") == ["pdf", "markdown"]
    assert tokenize("Convert the PDF to Markdown, and XLSX/CSV files!") == [
        "convert",
        "pdf",
        "markdown",
        "xlsx",
        "csv",
        "files",
    ]
    assert tokenize("snake_case won't v2") == ["snake", "case", "won", "v2"]
    assert tokenize("Größe über ÉCOLE") == ["grösse", "über", "école"]
    assert tokenize("ｆｕｌｌｗｉｄｔｈ") == ["fullwidth"]  # NFKC
    assert tokenize("") == []
    assert tokenize("the and of to") == []


def test_skill_text_is_name_then_description() -> None:
    skill = Skill(name="pdf-to-markdown", description="Turn PDFs into text.")
    assert tokenize(skill_text(skill)) == ["pdf", "markdown", "turn", "pdfs", "text"]


# ------------------------------------------------------------------------------ reference formula


def test_lucene_idf_in_the_reference() -> None:
    corpus = [["a", "b"], ["a"], ["a", "c"], ["d"]]
    ref = LuceneBM25(corpus)
    n = 4
    for term, df in {"a": 3, "b": 1, "c": 1, "d": 1}.items():
        assert ref.idf[term] == pytest.approx(math.log(1 + (n - df + 0.5) / (df + 0.5)), abs=1e-15)
    okapi = BM25Okapi(corpus)
    assert okapi.idf["a"] != pytest.approx(ref.idf["a"])  # the reason for the subclass
    assert ref.idf["a"] > 0  # Lucene's idf never goes negative


def test_hand_computed_score() -> None:
    docs = [["deploy", "release", "release"], ["rollback", "release"], ["schema"]]
    index = BM25Index(docs)
    n, avgdl, k1, b = 3, 2.0, 1.5, 0.75

    def idf(df: int) -> float:
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def part(tf: int, dl: int, df: int) -> float:
        return idf(df) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

    expected = [part(2, 3, 2) + part(1, 3, 1), part(1, 2, 2), 0.0]
    got = index.scores(["release", "deploy"])
    assert got == pytest.approx(expected, abs=1e-12)
    # a repeated query term counts per occurrence (as rank-bm25 iterates the query tokens)
    twice = index.scores(["release", "release", "deploy"])
    assert twice[1] == pytest.approx(2 * expected[1])
    assert twice[0] == pytest.approx(2 * part(2, 3, 2) + part(1, 3, 1))
    assert index.scores(["unknown"]).tolist() == [0.0, 0.0, 0.0]
    assert index.scores("Release the deploy!") == pytest.approx(expected)


def test_empty_corpora() -> None:
    assert BM25Index([]).scores("anything").shape == (0,)
    assert BM25Index([[], []]).scores(["a"]).tolist() == [0.0, 0.0]
    assert rank("anything", []) == []


# --------------------------------------------------------------------------- sparse == reference


def _reference_matrix(docs: list[list[str]], queries: list[list[str]]) -> np.ndarray:
    ref = LuceneBM25(docs)
    return np.array([ref.get_scores(q) for q in queries])


def test_sparse_equals_reference_on_real_corpora(corpora: Path) -> None:
    skills = discover([corpora]).skills
    docs = [tokenize(skill_text(s)) for s in skills]
    reference = _reference_matrix(docs, docs)
    index = BM25Index(docs)
    for dense_df in (0, 1, 5, 40):
        fast = index.score_matrix(docs, dense_df=dense_df)
        assert fast.shape == (len(skills), len(skills))
        assert np.abs(fast - reference).max() <= 1e-9
    assert np.abs(overlap_matrix(skills) - reference).max() <= 1e-9
    by_rivals = {r.name: r.self_score for r in rivals(skills, top=1)}
    assert [by_rivals[s.name] for s in skills] == pytest.approx(np.diag(reference).tolist(), abs=1e-9)


def test_sparse_equals_reference_on_random_data() -> None:
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(300)]
    weights = [1 / (i + 1) for i in range(300)]
    docs = [rng.choices(vocab, weights, k=rng.randint(0, 60)) for _ in range(400)]
    docs[0] = []  # an empty document
    queries = [rng.choices([*vocab, "oov"], k=rng.randint(0, 30)) for _ in range(150)]
    reference = _reference_matrix(docs, queries)
    index = BM25Index(docs)
    for dense_df in (0, 3, 50):
        assert np.abs(index.score_matrix(queries, dense_df=dense_df) - reference).max() <= 1e-9


token_lists = st.lists(st.lists(st.sampled_from(WORDS), max_size=12), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(docs=token_lists, queries=token_lists, dense_df=st.sampled_from([0, 1, 2]))
def test_property_sparse_equals_reference(
    docs: list[list[str]], queries: list[list[str]], dense_df: int
) -> None:
    if sum(map(len, docs)) == 0:
        docs[0].append("pdf")  # rank-bm25 divides by avgdl
    reference = _reference_matrix(docs, queries)
    fast = BM25Index(docs).score_matrix(queries, dense_df=dense_df)
    assert np.allclose(fast, reference, rtol=0, atol=1e-9)


descriptions = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=10).map(" ".join), min_size=1, max_size=15
)


@settings(max_examples=60, deadline=None)
@given(
    texts=descriptions,
    query=st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join),
    seed=st.integers(0, 10**6),
)
def test_property_rank_independent_of_corpus_order(texts: list[str], query: str, seed: int) -> None:
    skills = make_skills(texts)
    shuffled = list(skills)
    random.Random(seed).shuffle(shuffled)
    a, b = rank(query, skills), rank(query, shuffled)
    assert [n for n, _ in a] == [n for n, _ in b]
    assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(texts=descriptions, seed=st.integers(0, 10**6), dense_df=st.sampled_from([0, 1]))
def test_property_rivals_independent_of_corpus_order(texts: list[str], seed: int, dense_df: int) -> None:
    skills = make_skills(texts)
    shuffled = list(skills)
    random.Random(seed).shuffle(shuffled)
    a = {r.name: r for r in rivals(skills, top=3, dense_df=dense_df)}
    b = {r.name: r for r in rivals(shuffled, top=3)}
    assert a.keys() == b.keys()
    for name, r in a.items():
        assert [v.name for v in r.rivals] == [v.name for v in b[name].rivals]
        assert r.self_score == pytest.approx(b[name].self_score, abs=1e-12)


# ------------------------------------------------------------------------------------ skill helpers


def test_overlap_is_asymmetric_with_self_score_on_the_diagonal() -> None:
    skills = make_skills(["deploy release", "deploy release rollback config push schema query index"])
    m = overlap_matrix(skills)
    assert m[0, 1] != m[1, 0]
    ref = LuceneBM25([tokenize(skill_text(s)) for s in skills])
    assert m[1, 1] == pytest.approx(ref.get_scores(tokenize(skill_text(skills[1])))[1])


def test_rivals() -> None:
    skills = [
        Skill(name="release-deploy", description="Deploy a release to production, then verify the deploy."),
        Skill(name="release-rollback", description="Roll back a bad release deploy to the previous version."),
        Skill(name="config-push", description="Push configuration changes to running services."),
        Skill(name="pdf", description="Extract tables from PDF documents."),
    ]
    result = {r.name: r for r in rivals(skills, top=2)}
    deploy = result["release-deploy"]
    assert deploy.self_score > 0
    assert deploy.rivals[0].name == "release-rollback"
    assert all(v.name != "release-deploy" for v in deploy.rivals)
    for v in deploy.rivals:
        assert v.score > 0
        assert v.ratio == pytest.approx(v.score / deploy.self_score)
    assert result["pdf"].rivals == []  # nothing shared: no rival at all
    assert result["pdf"].top_ratio == 0.0
    assert len(rivals(skills, top=1)[0].rivals) == 1
    only = rivals(skills, top=2, only={"pdf", "config-push"})
    assert [r.name for r in only] == ["config-push", "pdf"]
    assert only[0].rivals == result["config-push"].rivals
    with pytest.raises(ValueError, match="top"):
        rivals(skills, top=-1)


def test_rivals_ties_broken_by_name() -> None:
    skills = make_skills(["deploy release", "deploy", "deploy", "deploy"])
    top = rivals(skills, top=2)[0]
    assert [v.name for v in top.rivals] == ["skill-1", "skill-2"]


def test_rivals_large_catalog_uses_dense_split_and_matches() -> None:
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(400)]
    skills = make_skills([" ".join(rng.choices(vocab, k=rng.randint(5, 40))) for _ in range(1100)])
    big = rivals(skills, top=5, block=300)  # ≥ 1000 × 1000: hybrid dense/sparse product
    small = rivals(skills, top=5, dense_df=0)
    for a, b in zip(big, small, strict=True):
        assert [v.name for v in a.rivals] == [v.name for v in b.rivals]
        assert [v.score for v in a.rivals] == pytest.approx([v.score for v in b.rivals], abs=1e-9)


def test_rank_best_first() -> None:
    skills = [
        Skill(name="pdf", description="Read and extract text from PDF files."),
        Skill(name="docx", description="Edit Word documents."),
        Skill(name="zeta", description="Unrelated thing."),
        Skill(name="alpha", description="Another unrelated thing."),
    ]
    ranked = rank("extract the text of this PDF", skills)
    assert ranked[0][0] == "pdf"
    assert ranked[0][1] > 0
    assert len(ranked) == 4
    zero = [n for n, s in ranked if s == 0]
    assert zero == sorted(zero)  # ties by name
    expected = BM25Index([skill_text(s) for s in skills]).scores("extract the text of this PDF")
    assert dict(ranked)["pdf"] == pytest.approx(expected[0])


@pytest.mark.parametrize("block", [1, 7, 64])
def test_rivals_in_blocks_equal_the_exact_top_k_of_the_dense_matrix(block: int) -> None:
    """The block-by-block path (a few rows scored at a time, a per-row partition for the top k) names
    the rivals a sort of the whole exact n × n matrix names: score descending, ties by name, only
    positive scores, never the skill itself; with the same scores and self-scores."""
    rng = random.Random(11)
    skills = make_skills([" ".join(rng.choices(WORDS, k=rng.randint(1, 6))) for _ in range(60)])
    rng.shuffle(skills)  # names out of order: ties must still go by name
    matrix = overlap_matrix(skills)
    names = [s.name for s in skills]
    for got, i in zip(rivals(skills, top=4, block=block), range(len(skills)), strict=True):
        order = sorted(
            (j for j in range(len(skills)) if j != i and matrix[i, j] > 0),
            key=lambda j: (-round(matrix[i, j], 9), names[j]),
        )[:4]
        assert got.name == names[i]
        assert got.self_score == pytest.approx(matrix[i, i], abs=1e-12)
        assert [r.name for r in got.rivals] == [names[j] for j in order]
        assert [r.score for r in got.rivals] == pytest.approx([matrix[i, j] for j in order], abs=1e-12)


# ------------------------------------------------------------- texts tokenised at once == one by one


def _assert_same_index(a: BM25Index, b: BM25Index) -> None:
    assert a.vocabulary == b.vocabulary
    assert a.n_docs == b.n_docs
    assert np.array_equal(a.doc_len, b.doc_len)
    assert a.tf.shape == b.tf.shape  # canonical CSR (sorted, no duplicates): equal arrays, equal matrices
    assert np.array_equal(a.tf.indptr, b.tf.indptr)
    assert np.array_equal(a.tf.indices, b.tf.indices)
    assert np.array_equal(a.tf.data, b.tf.data)
    assert np.array_equal(a.weights.data, b.weights.data)
    assert np.array_equal(a.idf, b.idf)


ascii_texts = st.text(alphabet=st.characters(max_codepoint=127), max_size=60)


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(ascii_texts | st.sampled_from(["The PDF", "to and of", "", "pdf-to-md x_y"]), max_size=30)
)
def test_index_of_texts_tokenised_at_once_equals_text_by_text(texts: list[str]) -> None:
    """ASCII texts go through one lower/translate/split (NUL between them); the index is the one
    their token lists give, stopwords, empty texts and texts holding NUL included."""
    _assert_same_index(BM25Index(texts), BM25Index([tokenize(t) for t in texts]))


def test_index_of_texts_falls_back_text_by_text_for_non_ascii() -> None:
    texts = ["Ｆｕｌｌ-width PDF", "Straße und Café", "plain pdf words", "nul\x00inside pdf"]
    _assert_same_index(BM25Index(texts), BM25Index([tokenize(t) for t in texts]))
    _assert_same_index(BM25Index(texts[2:]), BM25Index([tokenize(t) for t in texts[2:]]))
    assert _ascii_codes(texts[2:3]) is not None  # the path taken at once
    assert _ascii_codes(texts) is None
    assert _ascii_codes(texts[2:]) is None
