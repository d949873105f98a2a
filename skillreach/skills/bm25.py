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

:func:`rivals` (each skill's top k of all n² pairs) never holds the float64 matrix: a float32 screen
(:class:`_Screen`: a dense BLAS product for the common terms, a sparse one for the tail) scores a
block of skills against all, a proven bound on its rounding keeps every pair that can reach a skill's
top k, ties included, and only those (about k per skill) are scored again in float64 and ranked, so
the result is the one the exact matrix gives. From 20,000² pairs the sparse part is added by a
compiled loop (:mod:`skillreach.skills._bm25kernel`, numba) instead of scipy's sparse product, ~4× cheaper a
product, so far fewer terms go through the dense one (df ≥ n/10 instead of n/40). What bounds it at
50,000 skills: the two products still (the compiled loop ~5 ns a product, the dense ~74 terms), then
the pooling of maxima, tokenising and the index, and loading numba (~1–2 s once per process).

Lexical overlap is a targeting device — it says which pairs of skills deserve probing — not a verdict
on whether an agent will confuse them.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from rank_bm25 import BM25Okapi

from skillreach._gc import cyclic_gc_paused
from skillreach.models import Skill

if TYPE_CHECKING:  # scipy.sparse costs ~0.5 s to import: only the functions that build an index load it
    import scipy.sparse as sp

__all__ = [
    "BLOCK_CELLS",
    "CAVEAT",
    "COMPILED_PAIRS",
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
_ASCII_SEPARATORS = str.maketrans(dict.fromkeys([c for c in map(chr, range(128)) if not c.isalnum()], " "))
"""Every ASCII character but a letter or a digit, to a space: ``[^\\W_]+`` runs of ASCII text by ``split``."""


def tokenize(text: str) -> list[str]:
    """Lower-cased Unicode letter/digit runs of ``text``, stopwords removed (see the module docstring)."""
    if text.isascii():  # already NFKC; its letter/digit runs are [a-z0-9]+ once lower-cased (2× faster)
        return [t for t in text.lower().translate(_ASCII_SEPARATORS).split() if t not in STOPWORDS]
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [t for t in _TOKEN.findall(folded) if t not in STOPWORDS]


_BULK_SEPARATORS = str.maketrans(dict.fromkeys([c for c in map(chr, range(1, 128)) if not c.isalnum()], " "))
"""Like :data:`_ASCII_SEPARATORS`, but NUL (between two texts) is kept: one character each, so
``translate`` keeps its fast ASCII path."""


def _ascii_codes(texts: Sequence[str]) -> tuple[dict[str, int], np.ndarray, np.ndarray] | None:
    """The tokens of every text at once, as :func:`tokenize` makes them text by text: (term → code in
    order of first use, the code of every token in order, tokens per text); ``None`` unless every text
    is ASCII without NUL (then the texts joined by a NUL go through one ``lower``/``translate``/``split``
    and one pass to codes, stopwords and text boundaries dropped by code)."""
    if not texts:
        return None
    joined = " \x00 ".join(texts)
    if not joined.isascii() or joined.count("\x00") != len(texts) - 1:
        return None
    tokens = joined.lower().translate(_BULK_SEPARATORS).split()
    seen: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    for reserved in ("\x00", *sorted(STOPWORDS)):  # code 0: a boundary; then the stopwords
        seen[reserved]  # the lookup assigns the next code
    codes = np.fromiter(map(seen.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    first = len(STOPWORDS) + 1
    kept = codes >= first
    lengths = np.bincount(np.cumsum(codes == 0)[kept], minlength=len(texts)).astype(np.int64)
    terms = itertools.islice(seen, first, None)
    return dict(zip(terms, range(len(seen) - first), strict=True)), codes[kept] - first, lengths


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
        import scipy.sparse as sparse_mod  # ~0.5 s to import: loaded where an index is built

        self.k1 = k1
        self.b = b
        texts = [d for d in documents if isinstance(d, str)]
        coded = _ascii_codes(texts) if len(texts) == len(documents) else None
        if coded is not None:
            first_seen, cols, lengths = coded
        else:
            docs = [
                tokenize(d) if isinstance(d, str) else d if isinstance(d, list) else list(d)
                for d in documents
            ]
            first_seen = defaultdict(itertools.count().__next__)
            # One C-level pass over every token: its term code; the sparse constructor sums repeats into
            # term frequencies (integers, so exactly the counts).
            cols = np.fromiter(
                map(first_seen.__getitem__, itertools.chain.from_iterable(docs)), dtype=np.int64
            )
            lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
        self.n_docs = len(lengths)
        # Sorted vocabulary: the column order (and so every floating-point sum) is corpus-order free.
        terms = sorted(first_seen)
        remap = np.empty(len(first_seen), dtype=np.int64)
        remap[np.fromiter(map(first_seen.__getitem__, terms), dtype=np.int64, count=len(terms))] = np.arange(
            len(terms), dtype=np.int64
        )
        self.vocabulary: dict[str, int] = dict(zip(terms, range(len(terms)), strict=True))
        n_terms = len(terms)

        row_arr = np.repeat(np.arange(self.n_docs, dtype=np.int64), lengths)
        col_arr = remap[cols] if len(cols) else cols
        tf_arr = np.ones(len(cols), dtype=np.float64)
        self.tf = sparse_mod.csr_matrix((tf_arr, (row_arr, col_arr)), shape=(self.n_docs, n_terms))
        self.tf.sum_duplicates()
        self.tf.sort_indices()
        self.doc_len = lengths.astype(np.float64)
        self.avgdl = float(lengths.sum()) / self.n_docs if self.n_docs else 0.0
        df = np.bincount(self.tf.indices, minlength=n_terms).astype(np.float64)
        self.df = df
        self.idf = np.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

        weights = self.tf.copy()
        if self.avgdl > 0:
            tf = weights.data
            norm = k1 * (1 - b + b * np.repeat(self.doc_len, np.diff(weights.indptr)) / self.avgdl)
            weights.data = self.idf[weights.indices] * (tf * (k1 + 1) / (tf + norm))
        else:  # every document is empty: nothing can match
            weights.data = np.zeros_like(weights.data)
        self.weights = weights
        """``W[d, t]``: BM25 contribution of one occurrence of term t in a query, for document d."""
        self._weights_t_cache: sp.csr_matrix | None = None
        self._splits: dict[int, tuple[np.ndarray, np.ndarray, sp.csr_matrix]] = {}

    @property
    def _weights_t(self) -> sp.csr_matrix:
        """``Wᵀ`` (terms × documents), built on first use: :func:`rivals` does not need it."""
        if self._weights_t_cache is None:
            self._weights_t_cache = self.weights.T.tocsr()
        return self._weights_t_cache

    def query_matrix(self, queries: Sequence[str | Sequence[str]]) -> sp.csr_matrix:
        """``Q[q, t]``: how many times query q says term t (terms outside the vocabulary dropped)."""
        import scipy.sparse as sparse_mod  # ~0.5 s to import: loaded where an index is built

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
        matrix = sparse_mod.csr_matrix(
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
        import scipy.sparse as sparse_mod  # ~0.5 s to import: loaded where an index is built

        given = isinstance(queries, sparse_mod.csr_matrix)
        q: sp.csr_matrix = queries if given else self.query_matrix(queries)
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
        import scipy.sparse as sparse_mod  # ~0.5 s to import: loaded where an index is built

        cached = self._splits.get(dense_df)
        if cached is None:
            high = np.flatnonzero(self.df >= dense_df)
            dense_w = np.asarray(self.weights.tocsc()[:, high].toarray())
            keep = np.ones(len(self.vocabulary))
            keep[high] = 0.0
            sparse_wt = (sparse_mod.diags(keep) @ self._weights_t).tocsr()
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


BLOCK_CELLS = 1 << 25
"""At most this many screening scores (float32, 4 bytes each) in one block of :func:`rivals`."""

_GROUP = 16
"""Columns pooled into one maximum when :func:`rivals` looks for a row's best scores."""

_TIED_GROUPS = 64
"""A row whose threshold more than this many groups of :data:`_GROUP` columns reach (so at least as many
near-ties of its ``top``-th best) is ranked by :func:`_tied_candidates`, not paired column by column:
5,000 skills of one template were 25 million candidate pairs, 70 s and gigabytes."""

_UNIT = 2.0**-24
"""float32's unit roundoff."""

_ROWS = 512
"""Documents a call of the compiled screen scores at once (512 × a block of queries: in cache)."""

COMPILED_PAIRS = 20_000**2
"""From this many pairs (queries × skills) :func:`rivals` screens with the compiled loop (numba, when
it imports): loading it costs ~1–2 s of CPU once per process, more than the scipy screen of a smaller
catalog; at 50,000 skills it takes the screen's CPU from ~30 s to ~12 s."""


@lru_cache(maxsize=1)
def _compiled_kernel() -> Callable[..., None] | None:
    """:func:`skillreach.skills._bm25kernel.add_sparse_product`, or ``None`` where numba does not import."""
    try:
        from skillreach.skills._bm25kernel import add_sparse_product
    except (ImportError, RuntimeError):  # pragma: no cover - no numba, or nowhere to cache its code
        return None  # (numba raises RuntimeError then): the scipy screen, as exact
    return add_sparse_product


def _compiled_screen(n_queries: int, n_docs: int, compiled: bool | None) -> bool:
    """Whether :func:`rivals` screens with the compiled loop: as asked, else for big products only."""
    if compiled is None:
        compiled = n_queries * n_docs >= COMPILED_PAIRS
    return compiled and _compiled_kernel() is not None


def _exact_scores(
    queries: sp.csr_matrix, weights: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray
) -> np.ndarray:
    """Float64 BM25 of query ``rows[i]`` against document ``cols[i]``, each summed in vocabulary order."""
    return np.asarray(queries[rows].multiply(weights[cols]).sum(axis=1)).ravel()


def _pick(
    rows: np.ndarray, cols: np.ndarray, scores: np.ndarray, top: int, name_rank: np.ndarray
) -> np.ndarray:
    """Positions of each row's ``top`` best positive candidates, ordered by row, then best first.

    The rule of the exact n × n matrix: with s_k a row's ``top``-th best score, the columns scoring
    ``s_k − 10**-TIE_DECIMALS`` or more (and above 0) are ordered by score rounded to
    :data:`TIE_DECIMALS` decimals, descending, then by name (``name_rank``), and the first ``top`` kept.
    The same as on the whole row when the candidates hold every column scoring that much.
    """
    if rows.size == 0:
        return rows
    n_rows = int(rows.max()) + 1
    by_score = np.lexsort((-scores, rows))
    sorted_rows = rows[by_score]
    rank = np.arange(rows.size) - np.searchsorted(sorted_rows, sorted_rows)
    kth = np.full(n_rows, -np.inf)
    at_kth = by_score[rank == top - 1]
    kth[rows[at_kth]] = scores[at_kth]
    threshold = np.maximum(kth - 10.0**-TIE_DECIMALS, 0.0)
    eligible = np.flatnonzero((scores >= threshold[rows]) & (scores > 0))
    order = eligible[
        np.lexsort((name_rank[cols[eligible]], -np.round(scores[eligible], TIE_DECIMALS), rows[eligible]))
    ]
    ordered_rows = rows[order]
    rank = np.arange(order.size) - np.searchsorted(ordered_rows, ordered_rows)
    return order[rank < top]


def _accumulate(dense: np.ndarray, sparse: sp.csr_matrix) -> None:
    """``dense += sparse`` in place (C-ordered ``dense`` of the same shape and dtype).

    scipy's own kernel behind ``toarray``, which adds into its output; ``toarray(out=…)`` zeroes the
    output first, and the zero-fill and the extra ``+=`` pass cost ~1 ns a cell (~2.5 s at 50,000
    skills). The public path is kept for a scipy that moves the kernel (``tests/test_bm25_rivals.py``
    fails then, so the slower path is noticed).
    """
    try:
        from scipy.sparse._sparsetools import csr_todense
    except ImportError:  # pragma: no cover - the kernel has been there since scipy 0.7
        dense += sparse.toarray()
        return
    rows, cols = dense.shape
    csr = sparse.tocsr()
    csr_todense(rows, cols, csr.indptr, csr.indices, csr.data.astype(dense.dtype, copy=False), dense)


class _Screen:
    """All-pairs scores in float32 for finding candidates, a block of queries at a time.

    A block is laid out documents × queries (``W @ Qᵀ``: the sparse product then accumulates into
    short rows, the faster way round). Terms of document frequency ≥ ``dense_df`` go through a dense
    BLAS product, the long tail through a sparse one; the two are summed. Every score is a sum of at
    most ``m`` non-negative products (m: the most terms a query holds), so each float32 score is
    within a relative ``delta = 2·(m + 3)·2⁻²⁴`` of the exact one (twice the bound for recursive
    summation in any order, the rounding of the weights to float32 included).
    """

    def __init__(
        self,
        index: BM25Index,
        queries: sp.csr_matrix,
        dense_df: int,
        block: int,
        levels: int | None = None,
        *,
        compiled: bool = False,
    ) -> None:
        import scipy.sparse as sparse_mod  # ~0.5 s to import: loaded where an index is built

        n = index.n_docs
        # groups of groups for big catalogs: the partition of the pooled maxima is 16× smaller
        self.levels = (2 if n >= _GROUP**3 else 1) if levels is None else levels
        unit = _GROUP**self.levels
        self.height = -(-n // unit) * unit  # padded with empty documents to whole groups
        self.block = max(1, min(block, queries.shape[0], BLOCK_CELLS // self.height))
        high = np.flatnonzero(index.df >= dense_df) if dense_df > 0 else np.empty(0, dtype=np.int64)
        low = np.setdiff1d(np.arange(len(index.df)), high, assume_unique=True)
        weights = index.weights.astype(np.float32).tocsc()
        self.dense_w = np.zeros((self.height, high.size), dtype=np.float32)
        self.dense_w[:n] = weights[:, high].toarray()
        tail = weights[:, low].tocsr()
        indptr = np.concatenate([tail.indptr, np.full(self.height - n, tail.indptr[-1])])
        shape = (self.height, low.size)
        self.sparse_w = sparse_mod.csr_matrix((tail.data, tail.indices, indptr), shape=shape)
        q32 = queries.astype(np.float32)
        self.dense_q = q32[:, high].tocsr()
        self.sparse_q = q32[:, low].tocsr()
        terms_per_query = np.diff(queries.indptr)
        m = int(terms_per_query.max()) if terms_per_query.size else 0
        self.delta = 2.0 * (m + 3) * _UNIT
        self._out = np.empty(self.height * self.block, dtype=np.float32)
        self._kernel = _compiled_kernel() if compiled else None
        if self._kernel is not None:  # one signature for the compiled loop: int64 indices
            self._pooled = np.empty(self.height // _GROUP * self.block, dtype=np.float32)
            self._tail_arrays = (
                self.sparse_w.indptr.astype(np.int64),
                self.sparse_w.indices.astype(np.int64),
                self.sparse_w.data,
            )

    def scores(self, start: int, stop: int) -> np.ndarray:
        """Float32 scores, documents × queries ``start:stop`` (padded documents score 0)."""
        shape = (self.height, stop - start)
        out = self._out[: shape[0] * shape[1]].reshape(shape)
        if self._kernel is not None:
            self._compiled_scores(start, stop, out)
            return out
        np.matmul(self.dense_w, self.dense_q[start:stop].toarray().T, out=out)
        if self.sparse_w.shape[1]:
            _accumulate(out, self.sparse_w @ self.sparse_q[start:stop].T)
        return out

    def _compiled_scores(self, start: int, stop: int, out: np.ndarray) -> None:
        """:meth:`scores` with the tail added by the compiled loop, :data:`_ROWS` documents at a time
        (the dense product of those rows, then their sparse part, while the rows are in cache)."""
        kernel = self._kernel
        assert kernel is not None
        dense_q = np.ascontiguousarray(self.dense_q[start:stop].toarray().T)
        q_t = self.sparse_q[start:stop].T.tocsr()  # terms × queries: the queries that say each term
        q_arrays = (q_t.indptr.astype(np.int64), q_t.indices.astype(np.int64), q_t.data)
        slab = self.height // _GROUP  # the first pooling's groups: rows g, g + slab, g + 2·slab, …
        pooled = self._pooled[: slab * (stop - start)].reshape(slab, stop - start)
        pooled.fill(0.0)  # every score is ≥ 0
        first = 0
        while first < self.height:
            last = min(first + _ROWS, (first // slab + 1) * slab)
            np.matmul(self.dense_w[first:last], dense_q, out=out[first:last])
            kernel(out[first:last], first, *self._tail_arrays, *q_arrays)
            at = first % slab  # pooled while the rows are in cache, not read again from memory
            np.maximum(pooled[at : at + last - first], out[first:last], out=pooled[at : at + last - first])
            first = last

    def candidates(self, start: int, stop: int, own: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
        """(queries counted from ``start``, documents) that can be among a query's ``top`` best
        (see :meth:`split_candidates`; every query's candidates, however many)."""
        queries, docs, _ = self.split_candidates(start, stop, own, top, tied=None)
        return queries, docs

    def split_candidates(
        self, start: int, stop: int, own: np.ndarray, top: int, *, tied: int | None = _TIED_GROUPS
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(queries counted from ``start``, documents, tied queries): the pairs that can be among a
        query's ``top`` best, and the queries left out of them because more than ``tied`` groups of
        :data:`_GROUP` documents reach their threshold (thousands of near-ties: their pairs would fill
        memory; :func:`_tied_candidates` ranks them instead). ``tied=None``: none left out.

        ``own``: each query's own document, never its rival. Documents are pooled in groups of
        :data:`_GROUP` (and those groups again, for big catalogs); the ``top``-th best maximum of the
        last level is at most the query's ``top``-th best float32 score t, so its exact k-th best is
        ≥ t / (1 + delta), and a document whose exact score is within 10**-TIE_DECIMALS of that has a
        float32 score ≥ the threshold below: a superset of what :func:`_pick` can take, whatever the
        rounding. Only groups whose maximum reaches the threshold are opened, level by level.
        """
        scores = self.scores(start, stop)
        n_queries = stop - start
        queries = np.arange(n_queries)
        scores[own, queries] = 0.0
        levels = [scores]
        if self._kernel is not None:  # the first pooling is done: redo the groups of the own documents
            slab = self.height // _GROUP
            pooled = self._pooled[: slab * n_queries].reshape(slab, n_queries)
            group = own % slab
            members = group[None, :] + slab * np.arange(_GROUP)[:, None]
            pooled[group, queries] = scores[members, queries[None, :]].max(axis=0)
            levels.append(pooled)
        for _ in range(self.levels + 1 - len(levels)):
            below = levels[-1]
            levels.append(below.reshape(_GROUP, below.shape[0] // _GROUP, n_queries).max(axis=0))
        last = levels[-1]
        if top <= last.shape[0]:
            kth = np.partition(last, last.shape[0] - top, axis=0)[last.shape[0] - top].astype(np.float64)
        else:
            kth = np.full(n_queries, -np.inf)
        tie = 2 * 10.0**-TIE_DECIMALS
        threshold = (1 - self.delta) * (kth / (1 + self.delta) - tie)
        groups, queries = np.nonzero((last >= threshold) & (last > 0))
        heavy = np.empty(0, dtype=np.int64)
        for above, below in itertools.pairwise(reversed(levels)):
            if below is scores and tied is not None and len(queries):  # groups of _GROUP documents
                per_query = np.bincount(queries, minlength=n_queries)
                heavy = np.flatnonzero(per_query > tied)
                if len(heavy):
                    keep = per_query[queries] <= tied
                    groups, queries = groups[keep], queries[keep]
            groups = (groups[:, None] + np.arange(_GROUP) * above.shape[0]).ravel()
            queries = np.repeat(queries, _GROUP)
            values = below[groups, queries]
            keep = (values >= threshold[queries]) & (values > 0)
            groups, queries = groups[keep], queries[keep]
        return queries, groups, heavy


def _tied_candidates(
    index: BM25Index,
    queries: sp.csr_matrix,
    local: np.ndarray,
    own: np.ndarray,
    *,
    top: int,
    by_name: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(positions in ``local``, documents): for queries with too many candidates to pair up (a catalog of
    templated descriptions: every skill ties with thousands of others), what :func:`_pick` can take,
    found from every document's float64 score at once.

    Each score is summed term by term in ascending vocabulary order from 0.0, exactly as
    :func:`_exact_scores` sums it (the same products, the same order: the same bits). Kept per query:
    the documents whose score, rounded to :data:`TIE_DECIMALS` decimals, is above the ``top``-th best
    rounded score, and the first ``top`` by name (``by_name``: documents in name order) of those rounding
    to it — :func:`_pick` on these alone takes what it takes on all (the ``top`` best by rounded score,
    then name, are among them). ``own``: each query's own document, never its rival.
    """
    weights_t = index._weights_t  # terms × documents
    n = index.n_docs
    chunk = max(1, BLOCK_CELLS // (8 * max(n, 1)))  # float64 scores and a few masks of that size
    found_q: list[np.ndarray] = []
    found_d: list[np.ndarray] = []
    for lo in range(0, len(local), chunk):
        part = local[lo : lo + chunk]
        q_t = queries[part].T.tocsr()  # terms × these queries
        exact = np.zeros((n, len(part)))
        for term in np.flatnonzero(np.diff(q_t.indptr)).tolist():
            d0, d1 = weights_t.indptr[term], weights_t.indptr[term + 1]
            q0, q1 = q_t.indptr[term], q_t.indptr[term + 1]
            exact[np.ix_(weights_t.indices[d0:d1], q_t.indices[q0:q1])] += np.outer(
                weights_t.data[d0:d1], q_t.data[q0:q1]
            )
        exact[own[part], np.arange(len(part))] = 0.0
        ranked = np.where(exact > 0, np.round(exact, TIE_DECIMALS), -np.inf)
        del exact
        kth = np.partition(ranked, n - top, axis=0)[n - top] if top < n else np.full(len(part), -np.inf)
        named = ranked[by_name]  # documents in name order
        tied = (named == kth) & np.isfinite(kth)
        keep = (named > kth) | (tied & (np.cumsum(tied, axis=0) <= top))
        at_name, which = np.nonzero(keep)
        found_q.append(which + lo)
        found_d.append(by_name[at_name])
    if not found_q:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(found_q), np.concatenate(found_d)


def rivals(
    skills: Sequence[Skill],
    top: int = 10,
    *,
    only: Collection[str] | None = None,
    block: int = 2048,
    dense_df: int | None = None,
    compiled: bool | None = None,
) -> list[SkillRivals]:
    """For each skill (in the given order) its ``top`` nearest rivals: positive BM25 of its name +
    description against theirs, best first (ties by name), with the ratio to its self-score.

    ``only``: compute the rivals of these skills alone (the index still holds every skill).

    Exact, without the n² matrix in float64: rows are scored in blocks of at most ``block`` queries
    and :data:`BLOCK_CELLS` scores in float32 (:class:`_Screen`; 50,000 skills: blocks of 671 rows,
    128 MiB each), which finds per row the few columns whose exact score can reach its top ``top``
    (ties included) with a proven bound on the float32 error; only those are scored again in float64
    (each score summed in vocabulary order) and ranked. ``dense_df``: terms in at least this many
    skills go through the dense product of the screen (``0``: none; ``None``: ``max(32, n // 40)``
    with the scipy screen, ``max(32, n // 10)`` with the compiled one: the cheapest splits measured at
    50,000 skills). ``compiled``: screen with the compiled loop (:mod:`skillreach.skills._bm25kernel`);
    ``None``: from :data:`COMPILED_PAIRS` pairs on, when numba imports. Both name the same rivals.
    """
    if top < 0:
        raise ValueError("top must be ≥ 0")
    with cyclic_gc_paused():  # millions of objects and no cycle: 4× the time with the collector on
        return _rivals(skills, top, only, block=block, dense_df=dense_df, compiled=compiled)


def _rivals(
    skills: Sequence[Skill],
    top: int,
    only: Collection[str] | None,
    *,
    block: int,
    dense_df: int | None,
    compiled: bool | None,
) -> list[SkillRivals]:
    index = BM25Index([skill_text(s) for s in skills])  # ASCII texts: tokenised at once
    n = index.n_docs
    names = [s.name for s in skills]
    rows = np.asarray([i for i, name in enumerate(names) if only is None or name in only], dtype=np.int64)
    # A skill's query is its own document, so its term counts are the rows of the tf matrix.
    queries: sp.csr_matrix = index.tf[rows] if rows.size < n else index.tf
    self_scores = _exact_scores(queries, index.weights, np.arange(rows.size), rows)
    name_rank = np.empty(n, dtype=np.int64)
    name_rank[sorted(range(n), key=names.__getitem__)] = np.arange(n)

    found_rows: list[np.ndarray] = []
    found_cols: list[np.ndarray] = []
    found_scores: list[np.ndarray] = []
    if top > 0 and rows.size and n:
        compiled = _compiled_screen(rows.size, n, compiled)
        if dense_df is None:
            dense_df = max(32, n // (10 if compiled else 40))
        screen = _Screen(index, queries, dense_df, block, compiled=compiled)
        by_name = np.argsort(name_rank)
        for start in range(0, rows.size, screen.block):
            stop = min(start + screen.block, rows.size)
            local, cols, tied = screen.split_candidates(start, stop, rows[start:stop], top)
            if len(tied):
                at, docs = _tied_candidates(index, queries, tied + start, rows, top=top, by_name=by_name)
                local = np.concatenate([local, tied[at]])
                cols = np.concatenate([cols, docs])
            exact = _exact_scores(queries, index.weights, local + start, cols)
            kept = _pick(local, cols, exact, top, name_rank)
            found_rows.append(local[kept] + start)
            found_cols.append(cols[kept])
            found_scores.append(exact[kept])

    all_rows = np.concatenate(found_rows) if found_rows else np.empty(0, dtype=np.int64)
    bounds = np.searchsorted(all_rows, np.arange(rows.size + 1)).tolist()
    picked = np.concatenate(found_cols) if found_cols else np.empty(0, dtype=np.int64)
    scores = np.concatenate(found_scores) if found_scores else np.empty(0)
    own = self_scores[all_rows]
    with np.errstate(divide="ignore", invalid="ignore"):  # the ratio is None where own is 0
        ratios = (scores / own).tolist()
    rival_names = [names[j] for j in picked.tolist()]
    values = scores.tolist()
    out_list: list[SkillRivals] = []
    for k, (i, self_score) in enumerate(zip(rows.tolist(), self_scores.tolist(), strict=True)):
        lo, hi = bounds[k], bounds[k + 1]
        if self_score <= 0:
            ratios[lo:hi] = [None] * (hi - lo)
        out_list.append(
            SkillRivals(
                name=names[i],
                self_score=self_score,
                rivals=list(map(Rival, rival_names[lo:hi], values[lo:hi], ratios[lo:hi])),
                path=skills[i].path,
            )
        )
    return out_list


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
