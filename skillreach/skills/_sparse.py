"""The few compressed-sparse-row operations of the BM25 index, in numpy, for an install without scipy.

:func:`sparse` is :mod:`scipy.sparse` when scipy imports (the ``fast`` extra) and else this module,
whose :class:`csr_matrix` and :func:`diags` do what ``bm25.py`` asks of scipy's, with the same sums
in the same order: a product's cell ``(i, j)`` adds ``A[i, t]·B[t, j]`` over ``t`` ascending (scipy's
``csr_matmat``), a row sum adds a row's entries in column order. So the float64 scores are scipy's to
the bit; the float32 screen of ``rivals`` sums in another order, within the bound its proof allows.
``tests/test_bm25_rivals.py`` runs with scipy hidden as well.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["csr_matrix", "diags", "sparse"]

_CELLS = 1 << 22
"""At most this many output cells computed by one pass of a product (float64: 32 MiB)."""


def sparse() -> ModuleType:
    """:mod:`scipy.sparse`, else this module. Asked each call (a dictionary look-up once imported)."""
    try:
        import scipy.sparse as sp
    except ImportError:
        return sys.modules[__name__]
    return sp


class csr_matrix:
    """A CSR matrix: ``indptr`` (rows + 1), ``indices`` (columns, sorted within a row), ``data``."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    def __init__(self, arg: Any, shape: tuple[int, int] | None = None) -> None:
        if isinstance(arg, csr_matrix):
            self.data, self.indices, self.indptr = arg.data.copy(), arg.indices.copy(), arg.indptr.copy()
            self.shape = arg.shape
            return
        if len(arg) == 2:  # (data, (row, col)): duplicates summed, in their order
            data, (row, col) = arg
            assert shape is not None
            self.shape = (int(shape[0]), int(shape[1]))
            row = np.asarray(row, dtype=np.int64)
            col = np.asarray(col, dtype=np.int64)
            data = np.asarray(data)
            key = row * self.shape[1] + col
            order = np.argsort(key, kind="stable")
            key, data = key[order], data[order]
            first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if key.size else key
            summed = np.add.reduceat(data, first) if key.size else data
            ukey = key[first] if key.size else key
            rows = ukey // max(self.shape[1], 1)
            self.data = summed.astype(data.dtype, copy=False)
            self.indices = ukey - rows * self.shape[1]
            self.indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=self.shape[0]))].astype(np.int64)
            return
        data, indices, indptr = arg
        self.data, self.indices = np.asarray(data), np.asarray(indices, dtype=np.int64)
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.shape = (len(self.indptr) - 1, int(shape[1]) if shape else int(self.indices.max(initial=-1)) + 1)

    # -- what scipy's matrix has that bm25.py uses
    @property
    def dtype(self) -> np.dtype[Any]:
        return self.data.dtype

    def _rows(self) -> np.ndarray:
        return np.repeat(np.arange(self.shape[0], dtype=np.int64), np.diff(self.indptr))

    def sum_duplicates(self) -> None:
        """Built without duplicates."""

    def sort_indices(self) -> None:
        """Built sorted."""

    def eliminate_zeros(self) -> None:
        keep = self.data != 0
        if keep.all():
            return
        rows = self._rows()[keep]
        self.data, self.indices = self.data[keep], self.indices[keep]
        self.indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=self.shape[0]))].astype(np.int64)

    def copy(self) -> csr_matrix:
        return csr_matrix(self)

    def astype(self, dtype: Any) -> csr_matrix:
        return csr_matrix((self.data.astype(dtype), self.indices, self.indptr), shape=self.shape)

    def tocsr(self) -> csr_matrix:
        return self

    def tocsc(self) -> csr_matrix:
        """Column selection works on this one as it is."""
        return self

    @property
    def T(self) -> csr_matrix:
        order = np.argsort(self.indices, kind="stable")  # by column, rows ascending within one
        counts = np.bincount(self.indices, minlength=self.shape[1])
        return csr_matrix(
            (self.data[order], self._rows()[order], np.r_[0, np.cumsum(counts)]),
            shape=(self.shape[1], self.shape[0]),
        )

    def __getitem__(self, key: Any) -> csr_matrix:
        if isinstance(key, tuple):  # [:, columns]
            rows_key, cols = key
            assert rows_key == slice(None), key
            return self._columns(np.asarray(cols, dtype=np.int64))
        if isinstance(key, slice):
            key = np.arange(self.shape[0])[key]
        rows = np.asarray(key, dtype=np.int64)
        starts = self.indptr[rows]
        lengths = self.indptr[rows + 1] - starts
        indptr = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        at = np.repeat(starts - indptr[:-1], lengths) + np.arange(int(indptr[-1]), dtype=np.int64)
        return csr_matrix((self.data[at], self.indices[at], indptr), shape=(rows.size, self.shape[1]))

    def _columns(self, cols: np.ndarray) -> csr_matrix:
        where = np.full(self.shape[1], -1, dtype=np.int64)
        where[cols] = np.arange(cols.size, dtype=np.int64)
        new = where[self.indices]
        keep = new >= 0
        rows = self._rows()[keep]
        data, new = self.data[keep], new[keep]
        order = np.lexsort((new, rows))  # sorted within each row whatever the order of cols
        counts = np.bincount(rows, minlength=self.shape[0])
        return csr_matrix(
            (data[order], new[order], np.r_[0, np.cumsum(counts)]), shape=(self.shape[0], cols.size)
        )

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=self.data.dtype)
        out[self._rows(), self.indices] = self.data
        return out

    def multiply(self, other: csr_matrix) -> csr_matrix:
        """The elementwise product with a matrix of the same shape."""
        width = self.shape[1]
        mine = self._rows() * width + self.indices
        theirs = other._rows() * width + other.indices
        common, at_a, at_b = np.intersect1d(mine, theirs, assume_unique=True, return_indices=True)
        rows = common // max(width, 1)
        counts = np.bincount(rows, minlength=self.shape[0])
        return csr_matrix(
            (self.data[at_a] * other.data[at_b], common - rows * width, np.r_[0, np.cumsum(counts)]),
            shape=self.shape,
        )

    def sum(self, axis: int) -> np.ndarray:
        """Row sums (``axis=1``), each by ``np.add.reduceat`` over the row as scipy's ``_minor_reduce``."""
        assert axis == 1
        out = np.zeros(self.shape[0], dtype=np.result_type(self.data.dtype, np.float64))
        rows = np.flatnonzero(np.diff(self.indptr))
        if rows.size:
            out[rows] = np.add.reduceat(self.data, self.indptr[rows])
        return out.reshape(-1, 1)

    def __matmul__(self, other: csr_matrix) -> _Product:
        assert self.shape[1] == other.shape[0], (self.shape, other.shape)
        return _Product(self, other)


class _Product:
    """``A @ B`` of two CSR matrices, computed when it is read: dense, or added into a dense array."""

    def __init__(self, a: csr_matrix, b: csr_matrix) -> None:
        self.a, self.b = a, b
        self.shape = (a.shape[0], b.shape[1])

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=np.result_type(self.a.dtype, self.b.dtype))
        self.add_into(out)
        return out

    def tocsr(self) -> _Product:
        return self

    def add_into(self, out: np.ndarray) -> None:
        """``out += A @ B``, rows of A a slab at a time; each cell's products summed in ``t`` order."""
        a, b = self.a, self.b
        width = self.shape[1]
        slab = max(1, _CELLS // max(width, 1))
        for lo in range(0, self.shape[0], slab):
            hi = min(lo + slab, self.shape[0])
            first, last = int(a.indptr[lo]), int(a.indptr[hi])
            terms = a.indices[first:last]
            rows = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(a.indptr[lo : hi + 1])) - lo
            starts = b.indptr[terms]
            lengths = b.indptr[terms + 1] - starts
            total = int(lengths.sum())
            if total == 0:
                continue
            offsets = np.cumsum(lengths) - lengths
            at = np.repeat(starts - offsets, lengths) + np.arange(total, dtype=np.int64)
            values = np.repeat(a.data[first:last].astype(np.float64), lengths) * b.data[at]
            cells = np.repeat(rows, lengths) * width + b.indices[at]
            sums = np.bincount(cells, weights=values, minlength=(hi - lo) * width)
            out[lo:hi] += sums.reshape(hi - lo, width).astype(out.dtype, copy=False)


class _Diagonal:
    def __init__(self, values: np.ndarray) -> None:
        self.values = np.asarray(values)

    def __matmul__(self, other: csr_matrix) -> csr_matrix:
        scaled = other.data * self.values[other._rows()]
        return csr_matrix((scaled.astype(other.dtype), other.indices, other.indptr), shape=other.shape)


def diags(values: np.ndarray) -> _Diagonal:
    """The diagonal matrix of ``values`` (only to scale a CSR matrix's rows: ``diags(v) @ M``)."""
    return _Diagonal(values)
