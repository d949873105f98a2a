"""CSR sequences (a flat array and its offsets): the offsets of lengths, the sequences of chosen rows,
and the first element of each. Shared by the readers, the query side, the probe side and the artifact's
rows."""

from __future__ import annotations

import numpy as np


def _offsets(lengths: np.ndarray) -> np.ndarray:
    off = np.empty(len(lengths) + 1, dtype=np.int64)
    off[0] = 0
    off[1:] = lengths  # summed in place: a cumsum casting int32 into int64 is ≈ 5× slower
    np.cumsum(off[1:], out=off[1:])
    return off


def _csr_gather(
    flat: np.ndarray, off: np.ndarray, lengths: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The CSR sequences of ``rows`` (in that order) of the CSR ``flat``, ``off`` (whose sequences are
    ``lengths`` long): (flat, offsets, lengths, the position in ``rows`` of every element of flat)."""
    lengths = lengths[rows]
    new_off = _offsets(lengths)
    rowof = np.repeat(np.arange(len(rows), dtype=np.int32 if len(rows) < 1 << 31 else np.int64), lengths)
    # element k of row i is element (off[rows[i]] + k - new_off[i]) of ``flat``
    index = (off[:-1][rows] - new_off[:-1])[rowof]
    index += np.arange(int(new_off[-1]), dtype=np.int64)
    return flat[index], new_off, lengths, rowof


def _firsts(flat: np.ndarray, off: np.ndarray, lengths: np.ndarray, empty: int) -> np.ndarray:
    """The first element of every CSR sequence, ``empty`` for an empty one."""
    if len(flat) == 0:
        return np.full(len(lengths), empty, dtype=np.int64)
    # only empty sequences at the end start past the last element: clipped, then replaced
    return np.where(lengths > 0, flat.take(off[:-1], mode="clip"), empty)
