"""Asymmetric Lucene BM25 between skills, and BM25 of free text against skills.

Scoring (Lucene's BM25, the reference being ``rank_bm25`` with the Lucene idf, :class:`LuceneBM25`)::

    score(q, d) = Σ_{t in q} idf(t) · tf(t, d)·(k1 + 1) / (tf(t, d) + k1·(1 − b + b·|d| / avgdl))
    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))          k1 = 1.5, b = 0.75

The sum runs over the query's tokens *with repetition* (as ``rank_bm25.get_scores`` iterates them), so
a term said twice in the query counts twice. N, df and avgdl come from the documents indexed (for
skill-vs-skill overlap: every skill of the catalog, the skill itself included). A query term absent
from every document contributes 0.

The text of a skill is its name followed by its description. The tokenizer (:func:`tokenize`) is the
same for queries and documents: Unicode NFKC, case-folded, split into runs of Unicode letters and
digits (so hyphens, underscores, slashes and apostrophes split: ``pdf-to-markdown`` → ``pdf``, ``to``,
``markdown``), then a small English stopword list (:data:`STOPWORDS`) is removed (so ``to`` goes). No
stemming.

The vectorised path builds, with :mod:`scipy.sparse`, the document-term frequency matrix, the BM25
weight matrix ``W[d, t]`` (the per-term summand above) and the query-term count matrix ``Q[q, t]``; all
query-vs-document scores are ``Q @ Wᵀ``. The vocabulary is sorted, so every score is computed in the
same order whatever the order of the corpus. Tests hold it equal to :class:`LuceneBM25` within 1e-9.

Lexical overlap is a targeting device — it says which pairs of skills deserve probing — not a verdict
on whether an agent will confuse them.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from rank_bm25 import BM25Okapi

from skillreach.models import Skill

if TYPE_CHECKING:  # scipy.sparse costs ~0.5 s to import: only the functions that build an index load it
    import scipy.sparse as sp

__all__ = [
    "BLOCK_CELLS",
    "CAVEAT",
    "K1",
    "STOPWORDS",
    "TIE_DECIMALS",
    "B",
    "BM25Index",
    "LuceneBM25",
    "Rival",
    "SkillRivals",
    "overlap_matrix",
    "rank",
    "rivals",
    "skill_text",
    "tokenize",
]

K1 = 1.5
B = 0.75
CAVEAT = (
    "Lexical overlap is a targeting device, not a verdict: a high ratio says which pairs to probe, "
    "not that an agent will confuse them (and a low one does not prove it will not)."
)

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "s",
        "she",
        "so",
        "such",
        "t",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "too",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "d",
        "ll",
        "m",
        "re",
        "ve",
    ]
)
"""A small English stopword list: function words that carry no routing signal."""

_TOKEN = re.compile(r"[^\W_]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased Unicode letter/digit runs of ``text``, stopwords removed (see the module docstring)."""
    # ASCII text is already NFKC; skip the normalisation pass for it.
    folded = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).casefold()
    return [t for t in _TOKEN.findall(folded) if t not in STOPWORDS]


def skill_text(skill: Skill) -> str:
    """What a skill's BM25 document (and its query, for overlap) is made of: name, then description."""
    return f"{skill.name}\n{skill.description}"


class LuceneBM25(BM25Okapi):
    """``rank_bm25.BM25Okapi`` with Lucene's idf ``ln(1 + (N − df + 0.5)/(df + 0.5))`` (no epsilon floor).

    The reference implementation the sparse path is tested against; quadratic, so not for big catalogs.
    """

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = K1, b: float = B) -> None:
        super().__init__([list(doc) for doc in corpus], k1=k1, b=b)

    def _calc_idf(self, nd: dict[str, int]) -> None:
        n = self.corpus_size
        for word, freq in nd.items():
            self.idf[word] = math.log(1.0 + (n - freq + 0.5) / (freq + 0.5))


class BM25Index:
    """A sparse BM25 index over ``documents`` (texts, or token lists already made by :func:`tokenize`)."""

    def __init__(self, documents: Sequence[str | Sequence[str]], *, k1: float = K1, b: float = B) -> None:
        import scipy.sparse as sp

        self.k1 = k1
        self.b = b
        docs = [tokenize(d) if isinstance(d, str) else list(d) for d in documents]
        self.n_docs = len(docs)
        first_seen: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        # One C-level pass over every token: its term code; the sparse constructor sums repeats into
        # term frequencies (integers, so exactly the counts).
        cols = np.fromiter(
            map(first_seen.__getitem__, itertools.chain.from_iterable(docs)), dtype=np.int64
        )
        lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
        # Sorted vocabulary: the column order (and so every floating-point sum) is corpus-order free.
        terms = sorted(first_seen)
        remap = np.empty(len(first_seen), dtype=np.int64)
        remap[[first_seen[t] for t in terms]] = np.arange(len(terms), dtype=np.int64)
        self.vocabulary: dict[str, int] = {t: j for j, t in enumerate(terms)}
        n_terms = len(terms)

        row_arr = np.repeat(np.arange(self.n_docs, dtype=np.int64), lengths)
        col_arr = remap[cols] if len(cols) else cols
        tf_arr = np.ones(len(cols), dtype=np.float64)
        self.tf = sp.csr_matrix((tf_arr, (row_arr, col_arr)), shape=(self.n_docs, n_terms))
        self.tf.sum_duplicates()
        self.tf.sort_indices()
        self.doc_len = np.asarray([len(d) for d in docs], dtype=np.float64)
        self.avgdl = float(sum(len(d) for d in docs)) / self.n_docs if self.n_docs else 0.0
        df = np.bincount(self.tf.indices, minlength=n_terms).astype(np.float64)
        self.df = df
        self.idf = np.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

        weights = self.tf.copy()
        if self.avgdl > 0:
            tf = weights.data
            lengths = np.repeat(self.doc_len, np.diff(weights.indptr))
            norm = k1 * (1 - b + b * lengths / self.avgdl)
            weights.data = self.idf[weights.indices] * (tf * (k1 + 1) / (tf + norm))
        else:  # every document is empty: nothing can match
            weights.data = np.zeros_like(weights.data)
        self.weights = weights
        """``W[d, t]``: BM25 contribution of one occurrence of term t in a query, for document d."""
        self._weights_t = weights.T.tocsr()
        self._splits: dict[int, tuple[np.ndarray, np.ndarray, sp.csr_matrix]] = {}

    def query_matrix(self, queries: Sequence[str | Sequence[str]]) -> sp.csr_matrix:
        """``Q[q, t]``: how many times query q says term t (terms outside the vocabulary dropped)."""
        import scipy.sparse as sp

        rows: list[int] = []
        cols: list[int] = []
        vals: list[int] = []
        vocab = self.vocabulary
        for i, query in enumerate(queries):
            tokens = tokenize(query) if isinstance(query, str) else query
            counts = Counter(t for t in tokens if t in vocab)
            rows.extend([i] * len(counts))
            cols.extend(vocab[t] for t in counts)
            vals.extend(counts.values())
        matrix = sp.csr_matrix(
            (
                np.asarray(vals, dtype=np.float64),
                (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)),
            ),
            shape=(len(queries), len(vocab)),
        )
        matrix.sort_indices()
        return matrix

    def scores(self, query: str | Sequence[str]) -> np.ndarray:
        """BM25 of one query (text or tokens) against every document, in document order."""
        return self.score_matrix([query])[0]

    def score_matrix(
        self,
        queries: Sequence[str | Sequence[str]] | sp.csr_matrix,
        *,
        dense_df: int | None = None,
    ) -> np.ndarray:
        """``S[q, d]`` for every query and document (dense ``len(queries) × n_docs``).

        The product ``Q @ Wᵀ`` of a big catalog is nearly dense, most of it from the few terms that
        many documents share. Those terms (document frequency ≥ ``dense_df``) go through a dense BLAS
        product, the long tail through the sparse one; the two are summed. ``dense_df=None`` picks a
        threshold for big inputs (≥ 1,000 × 1,000) and uses the sparse product alone otherwise; ``0``
        forces the sparse product alone.
        """
        import scipy.sparse as sp

        q: sp.csr_matrix = queries if isinstance(queries, sp.csr_matrix) else self.query_matrix(queries)
        n_queries = int(q.shape[0])
        if self.n_docs == 0:
            return np.zeros((n_queries, 0))
        if dense_df is None:
            big = n_queries >= 1000 and self.n_docs >= 1000
            dense_df = max(32, self.n_docs // 50) if big else 0
        if dense_df <= 0:
            return np.asarray((q @ self._weights_t).toarray())
        high, dense_w, sparse_wt = self._split(dense_df)
        tail = np.asarray((q @ sparse_wt).toarray())  # dense at once: cheaper than a scatter-add
        if high.size:
            tail += q[:, high].toarray() @ dense_w.T
        return tail

    def _split(self, dense_df: int) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix]:
        """(high-df columns, their dense weights ``n_docs × H``, ``Wᵀ`` with those rows emptied)."""
        import scipy.sparse as sp

        cached = self._splits.get(dense_df)
        if cached is None:
            high = np.flatnonzero(self.df >= dense_df)
            dense_w = np.asarray(self.weights.tocsc()[:, high].toarray())
            keep = np.ones(len(self.vocabulary))
            keep[high] = 0.0
            sparse_wt = (sp.diags(keep) @ self._weights_t).tocsr()
            sparse_wt.eliminate_zeros()
            cached = (high, dense_w, sparse_wt)
            self._splits[dense_df] = cached
        return cached


# ------------------------------------------------------------------------------------------ skills


def _documents(skills: Sequence[Skill]) -> list[list[str]]:
    return [tokenize(skill_text(s)) for s in skills]


def overlap_matrix(skills: Sequence[Skill]) -> np.ndarray:
    """``M[i, j]`` = BM25 of skill i's name + description (query) against skill j's (document).

    Asymmetric; the diagonal is each skill's self-score. Dense ``n × n`` (use :func:`rivals` for big
    catalogs: it works in row blocks).
    """
    docs = _documents(skills)
    index = BM25Index(docs)
    return index.score_matrix(index.tf)


@dataclass(frozen=True)
class Rival:
    name: str
    score: float
    ratio: float | None
    """``score / self_score`` (``None`` when the skill's own self-score is 0)."""


@dataclass(frozen=True)
class SkillRivals:
    name: str
    self_score: float
    rivals: list[Rival] = field(default_factory=list)
    path: str = ""

    @property
    def top_ratio(self) -> float:
        return max((r.ratio for r in self.rivals if r.ratio is not None), default=0.0)


TIE_DECIMALS = 9
"""Scores equal to this many decimals are ties, broken by name (summation order can move the last bit)."""


def _key(score: float) -> float:
    return -round(score, TIE_DECIMALS)


def _top_block(block: np.ndarray, top: int, name_rank: np.ndarray) -> list[list[int]]:
    """Per row of ``block``, the columns of the ``top`` best positive scores, ties broken by name.

    Vectorised: a partition finds each row's ``top``-th best score, every column within
    ``10**-TIE_DECIMALS`` of it or above is a candidate, and one lexsort orders all candidates.
    """
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


BLOCK_CELLS = 1 << 26
"""At most this many scores (8 bytes each) in one block of :func:`rivals`."""


def rivals(
    skills: Sequence[Skill],
    top: int = 10,
    *,
    only: Collection[str] | None = None,
    block: int = 2048,
    dense_df: int | None = None,
) -> list[SkillRivals]:
    """For each skill (in the given order) its ``top`` nearest rivals: positive BM25 of its name +
    description against theirs, best first (ties by name), with the ratio to its self-score.

    ``only``: compute the rivals of these skills alone (the index still holds every skill). Rows are
    scored in blocks of at most ``block`` queries and at most :data:`BLOCK_CELLS` scores, so memory
    stays bounded whatever the catalog (50,000 skills: blocks of 1,342 rows, about 0.5 GB each,
    never the n² matrix). ``dense_df``: see :meth:`BM25Index.score_matrix`.
    """
    if top < 0:
        raise ValueError("top must be ≥ 0")
    docs = _documents(skills)
    index = BM25Index(docs)
    names = [s.name for s in skills]
    rows = [i for i, n in enumerate(names) if only is None or n in only]
    # A skill's query is its own document, so its term counts are the rows of the tf matrix.
    q_all = index.tf[rows] if len(rows) < len(docs) else index.tf
    if dense_df is None and len(rows) >= 1000 and len(docs) >= 1000:
        dense_df = max(32, len(docs) // 50)
    name_rank = np.empty(len(names), dtype=np.int64)
    name_rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    out: list[SkillRivals] = []
    block = max(1, min(block, BLOCK_CELLS // max(len(docs), 1)))
    for start in range(0, len(rows), block):
        chunk = index.score_matrix(q_all[start : start + block], dense_df=dense_df or 0)
        own = np.asarray(rows[start : start + block])
        positions = np.arange(own.size)
        self_scores = chunk[positions, own].copy()
        chunk[positions, own] = -np.inf
        best = _top_block(chunk, top, name_rank)
        for offset, (i, self_score, picked) in enumerate(
            zip(own.tolist(), self_scores.tolist(), best, strict=True)
        ):
            values = chunk[offset, picked].tolist()
            out.append(
                SkillRivals(
                    name=names[i],
                    self_score=self_score,
                    rivals=[
                        Rival(name=names[j], score=v, ratio=v / self_score if self_score > 0 else None)
                        for j, v in zip(picked, values, strict=True)
                    ],
                    path=skills[i].path,
                )
            )
    return out


@lru_cache(maxsize=16)
def _cached_index(documents: tuple[str, ...]) -> BM25Index:
    return BM25Index(list(documents))


def rank(query_text: str, skills: Iterable[Skill]) -> list[tuple[str, float]]:
    """BM25 of free text against each skill's name + description: every skill, best first.

    Ties (zero scores included) are broken by name, so the ranking does not depend on the order of
    ``skills``. The index of a catalog is cached, so calling this per query is cheap.
    """
    skill_list = list(skills)
    if not skill_list:
        return []
    index = _cached_index(tuple(skill_text(s) for s in skill_list))
    scores = index.scores(query_text)
    ranked = sorted(
        zip((s.name for s in skill_list), scores.tolist(), strict=True), key=lambda p: (_key(p[1]), p[0])
    )
    return [(name, float(score)) for name, score in ranked]
