"""The compiled kernel of the BM25 screen (:class:`skillreach.skills.bm25._Screen`), with numba.

Imported lazily (numba's import costs ~0.3 s) and only for big catalogs: see
:func:`skillreach.skills.bm25.rivals`.
scipy has no product of two sparse matrices that adds into a dense array: ``A @ B`` counts the result
(``csr_matmat_maxnnz``), builds it as CSR (``csr_matmat``), and ``toarray`` scatters it again, ~20 ns a
product at 50,000 skills. This loop adds each product where it belongs, rows of the output in cache,
~5 ns a product; that moves the dense/sparse split of the screen to far fewer dense terms.

Compiled on first use and cached beside this file (numba's ``cache=True``; elsewhere when the folder
is read-only).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["add_sparse_product"]


@numba.njit(cache=True, nogil=True)
def add_sparse_product(  # noqa: PLR0917 - CSR arrays, positional for numba's dispatch
    out: np.ndarray,
    first_row: int,
    a_indptr: np.ndarray,
    a_indices: np.ndarray,
    a_data: np.ndarray,
    b_indptr: np.ndarray,
    b_indices: np.ndarray,
    b_data: np.ndarray,
) -> None:
    """``out[r, j] += Σ_t A[first_row + r, t] · B[t, j]`` for every row r of ``out`` (A, B: CSR arrays).

    Each score is summed in the order of A's row (its terms' order), one product at a time.
    """
    for r in range(out.shape[0]):
        row = first_row + r
        for e in range(a_indptr[row], a_indptr[row + 1]):
            term = a_indices[e]
            weight = a_data[e]
            for f in range(b_indptr[term], b_indptr[term + 1]):
                out[r, b_indices[f]] += weight * b_data[f]
