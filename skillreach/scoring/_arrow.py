"""pyarrow arrays to and from numpy and Python strings without pandas.

pyarrow imports pandas (≈ 0.5 s) the first time it is handed a Python or numpy object to convert
(``pa.array``, ``pa.scalar``, a Python value given to a compute function, ``to_numpy``), to check
whether it is a pandas one. Arrays built here from buffers, and numpy views of their buffers, never
ask. Import only where pyarrow is already wanted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["ints", "repeat", "strings", "view"]

_TYPES = {np.dtype(np.int64): pa.int64(), np.dtype(np.int32): pa.int32()}


def ints(values: np.ndarray) -> Any:
    """An Arrow int64 (or int32) array over ``values``' memory (no nulls)."""
    values = np.ascontiguousarray(values)
    if values.dtype not in _TYPES:
        values = values.astype(np.int64)
    return pa.Array.from_buffers(_TYPES[values.dtype], len(values), [None, pa.py_buffer(values)])


def view(array: Any, dtype: Any) -> np.ndarray:
    """The values of a primitive Arrow array of ``dtype`` without nulls, as a numpy view of its buffer
    (a chunked one is joined first)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count:
        raise ValueError("view() of an array with nulls")
    buf = array.buffers()[1]
    if buf is None:
        return np.empty(0, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype)[array.offset : array.offset + len(array)]


def strings(values: Sequence[str], *, large: bool = True) -> Any:
    """A ``large_string`` (or ``string``) Arrow array of ``values``."""
    text = "".join(values)
    if text.isascii():  # a character is a byte: the lengths are the strings' own
        raw, lengths = text.encode(), list(map(len, values))
    else:
        encoded = [v.encode() for v in values]
        raw, lengths = b"".join(encoded), list(map(len, encoded))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:])
    kind = pa.large_string() if large else pa.string()
    return pa.Array.from_buffers(kind, len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(raw)])


def repeat(text: str, n: int) -> Any:
    """A ``large_string`` array of ``n`` times ``text`` (a separator for the element-wise joins)."""
    raw = text.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(raw)
    return pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])
