"""Feature and label spaces: how named features and arbitrary labels become indices.

``FeatureSpace`` maps a feature *name* to a weight column — a growing vocabulary by
default, or the hashing trick with ``n_bits`` for unbounded vocabularies. A feature is
always found by its name, never by its position in a dict, so shuffling a dict's keys
changes nothing. ``LabelSpace`` maps any hashable label to a class index; a class first
seen mid-stream gets the next index and the learner grows a weight column for it.

Both convert their inputs *after* validating all of them, so a bad example raises an
:class:`~streamlearn.errors.InvalidInputError` and leaves the spaces untouched.

>>> fs = FeatureSpace()
>>> cols, vals = fs.encode_one({"b": 2.0, "a": 1.0}, grow=True)
>>> cols.tolist(), vals.tolist()
([0, 1], [2.0, 1.0])
>>> fs.encode_one({"a": 1.0, "b": 2.0}, grow=False)[0].tolist()
[1, 0]
>>> ls = LabelSpace()
>>> [ls.index(y, grow=True) for y in ["cat", "dog", "cat"]]
[0, 1, 0]
"""

from __future__ import annotations

import hashlib
import math
import numbers
import zlib
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .errors import InvalidInputError

_NUMERIC_TYPES = frozenset({float, int, bool, np.float64, np.float32, np.int64, np.int32, np.bool_})
_HASH_CACHE_LIMIT = 1 << 20


class SparseRows(NamedTuple):
    """A batch of examples in CSR form over the learner's own weight columns."""

    indptr: np.ndarray  # int64, n_rows + 1
    indices: np.ndarray  # int64 weight columns
    data: np.ndarray  # float64 values

    @property
    def n_rows(self) -> int:
        return len(self.indptr) - 1


def _check_values(x: dict, values: np.ndarray, row: int) -> None:
    """Raise for a non-numeric or non-finite value of ``x`` (``values`` is its float copy)."""
    for name, v in x.items():
        if type(v) not in _NUMERIC_TYPES and not isinstance(v, numbers.Real):
            raise InvalidInputError("non-numeric", f"value {v!r} is not a number", row, name)
    if not np.isfinite(values).all():
        name = list(x)[int(np.flatnonzero(~np.isfinite(values))[0])]
        raise InvalidInputError("non-finite", f"value {x[name]!r} is NaN or infinite", row, name)


class FeatureSpace:
    """Maps feature names to weight columns.

    Parameters
    ----------
    n_bits
        ``None`` (default): a growing vocabulary, one column per distinct name in order
        of first appearance. An int: the hashing trick with ``2**n_bits`` columns; the
        column of a name is the CRC-32 of its ``repr`` (stable across processes, unlike
        Python's salted ``hash``), so ``0`` and ``"0"`` are different features.
    """

    def __init__(self, n_bits: int | None = None):
        if n_bits is not None and not (1 <= int(n_bits) <= 30):
            raise ValueError(f"n_bits must be between 1 and 30, got {n_bits!r}")
        self.n_bits = None if n_bits is None else int(n_bits)
        self._column: dict = {}  # name -> column (the vocabulary, or a cache of hashes)
        self._names: list = []  # vocabulary only: column -> name
        self._order_key = np.zeros(0, np.int64)  # vocabulary only: column -> name hash

    @property
    def n_columns(self) -> int:
        """Number of weight columns in use (``2**n_bits`` when hashing)."""
        return (1 << self.n_bits) if self.n_bits is not None else len(self._names)

    @property
    def names(self) -> list:
        """The vocabulary in column order (empty when hashing)."""
        return list(self._names)

    def _hash(self, name) -> int:
        col = zlib.crc32(repr(name).encode("utf-8")) & ((1 << self.n_bits) - 1)
        if len(self._column) >= _HASH_CACHE_LIMIT:
            self._column.clear()
        self._column[name] = col
        return col

    def column(self, name, grow: bool) -> int:
        """The column of ``name``; ``-1`` for an unknown name when ``grow`` is false."""
        col = self._column.get(name)
        if col is not None:
            return col
        if self.n_bits is not None:
            return self._hash(name)
        if not grow:
            return -1
        col = len(self._names)
        if col == len(self._order_key):
            self._order_key = np.concatenate([self._order_key, np.zeros(max(16, col), np.int64)])
        digest = hashlib.blake2b(repr(name).encode("utf-8"), digest_size=8).digest()
        self._order_key[col] = int.from_bytes(digest, "little") >> 1
        self._column[name] = col
        self._names.append(name)
        return col

    def _sort_keys(self, cols: np.ndarray) -> np.ndarray:
        """A per-column key that depends only on the feature's name (its column when
        hashing, a 63-bit hash of its name in a vocabulary): rows are summed in this order."""
        return cols if self.n_bits is not None else self._order_key[cols]

    def columns(self, names, grow: bool) -> np.ndarray:
        """Columns of several names at once (``-1`` for unknown names when not growing)."""
        get = self._column.get
        cols = [get(name) for name in names]
        if None in cols:
            cols = [c if c is not None else self.column(n, grow) for c, n in zip(cols, names)]
        return np.asarray(cols, dtype=np.int64)

    def encode_one(self, x: dict, grow: bool, row: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Validate a dict example and return its ``(columns, values)``.

        Unknown features are dropped when ``grow`` is false (prediction); nothing is
        added to the vocabulary if a value is invalid.
        """
        if not isinstance(x, dict):
            raise InvalidInputError("bad-type", f"expected a dict of features, got {type(x).__name__}", row)
        n = len(x)
        try:
            values = np.fromiter(x.values(), np.float64, n)
        except (TypeError, ValueError):
            _check_values(x, np.zeros(n), row)  # names the offending feature
            raise InvalidInputError("non-numeric", "values are not all numbers", row) from None
        _check_values(x, values, row)
        cols = self.columns(list(x), grow)
        if not grow and n and cols.min() < 0:
            keep = cols >= 0
            cols, values = cols[keep], values[keep]
        return self._canonical(cols, values)

    def _canonical(self, cols: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Order a row by :meth:`_sort_keys` and sum hash collisions, so that neither the
        order of a dict's keys nor the order in which names entered the vocabulary changes
        a floating-point sum (and a dict and a batch row agree bit for bit)."""
        if len(cols) < 2:
            return cols, values
        order = np.argsort(self._sort_keys(cols), kind="stable")
        cols, values = cols[order], values[order]
        if self.n_bits is not None and (np.diff(cols) == 0).any():
            cols, first = np.unique(cols, return_index=True)
            values = np.add.reduceat(values, first)
        return cols, values

    def encode_many(self, X, grow: bool) -> SparseRows:
        """Validate a batch (pandas/narwhals DataFrame, 2-D NumPy array or SciPy sparse
        matrix) and return it as CSR rows over weight columns. Column names are the
        DataFrame's column labels, or the integers ``0..n_cols-1`` for arrays."""
        names, matrix = _batch_to_csr(X)
        cols = self.columns(names, grow)
        if matrix.nnz and cols.min() < 0:  # unknown features at prediction time
            matrix = matrix[:, np.flatnonzero(cols >= 0)]
            cols = cols[cols >= 0]
        indptr = matrix.indptr.astype(np.int64)
        indices, data = cols[matrix.indices], matrix.data.astype(np.float64)
        if self.n_bits is not None:  # sort by column and sum collisions, as encode_one does
            width = 1 << self.n_bits
            mapped = sp.csr_matrix((data, indices, indptr), shape=(matrix.shape[0], width))
            mapped.sum_duplicates()
            indptr, indices, data = mapped.indptr.astype(np.int64), mapped.indices.astype(np.int64), mapped.data
        elif len(indices) > 1:  # vocabulary: names are distinct, order rows by name key
            row_of = np.repeat(np.arange(matrix.shape[0]), np.diff(indptr))
            order = np.lexsort((self._sort_keys(indices), row_of))
            indices, data = indices[order], data[order]
        return SparseRows(indptr, indices, data)

    def __getstate__(self):
        state = dict(self.__dict__)
        if self.n_bits is not None:
            state["_column"] = {}  # a cache: recomputed on demand
        return state

    def export(self) -> dict:
        """Plain data for a checkpoint."""
        return {"n_bits": self.n_bits, "names": list(self._names)}

    @classmethod
    def restore(cls, data: dict) -> "FeatureSpace":
        space = cls(data["n_bits"])
        for name in data["names"]:  # re-derives the order keys from the names
            space.column(name, grow=True)
        return space


def _batch_to_csr(X) -> tuple[list, sp.csr_matrix]:
    """Column names and a validated CSR copy of a batch."""
    if sp.issparse(X):
        matrix = sp.csr_matrix(X, dtype=np.float64)
        if matrix.ndim != 2:
            raise InvalidInputError("bad-shape", f"expected a 2-D matrix, got shape {matrix.shape}")
        _check_finite(matrix.data, lambda p: (int(np.searchsorted(matrix.indptr, p, side="right") - 1), int(matrix.indices[p])))
        return list(range(matrix.shape[1])), matrix
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise InvalidInputError("bad-shape", f"expected a 2-D array, got shape {X.shape}")
        names = list(range(X.shape[1]))
        dense = _dense_float(X, names)
    else:
        import narwhals as nw

        try:
            frame = nw.from_native(X, eager_only=True)
        except TypeError:
            raise InvalidInputError(
                "bad-type", f"expected a DataFrame, a 2-D NumPy array or a SciPy sparse matrix, got {type(X).__name__}"
            ) from None
        names = list(frame.columns)
        dense = _dense_float(frame.to_numpy(), names)
    flat_cols = dense.shape[1]
    _check_finite(dense.ravel(), lambda p: (p // flat_cols, names[p % flat_cols]))
    return names, sp.csr_matrix(dense)


def _dense_float(values: np.ndarray, names: list) -> np.ndarray:
    """A float64 copy of a dense batch, with a row/feature message for a non-number."""
    if values.dtype.kind in "fiub":
        return values.astype(np.float64)
    for (i, j), v in np.ndenumerate(values):
        if type(v) not in _NUMERIC_TYPES and not isinstance(v, numbers.Real):
            raise InvalidInputError("non-numeric", f"value {v!r} is not a number", i, names[j])
    return values.astype(np.float64)


def _check_finite(values: np.ndarray, locate) -> None:
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        row, feature = locate(int(bad[0]))
        raise InvalidInputError("non-finite", f"value {values[bad[0]]!r} is NaN or infinite", row, feature)


def _is_empty_label(y) -> bool:
    if y is None or (isinstance(y, str) and not y.strip()):
        return True
    return isinstance(y, float) and math.isnan(y)


class LabelSpace:
    """Maps hashable labels to class indices ``0..K-1`` in order of first appearance.

    NumPy scalars are stored as the equal Python scalar (``np.bool_(True)`` → ``True``)
    so that labels survive msgpack checkpoints. ``None``, NaN and blank strings are
    rejected as empty labels.
    """

    def __init__(self):
        self._index: dict = {}
        self.labels: list = []

    def __len__(self) -> int:
        return len(self.labels)

    @staticmethod
    def normalize(y, row: int = 0):
        """The stored form of label ``y``; raises for an empty or unhashable label."""
        if isinstance(y, np.generic):
            y = y.item()
        if _is_empty_label(y):
            raise InvalidInputError("empty-label", f"empty label {y!r}", row)
        try:
            hash(y)
        except TypeError:
            raise InvalidInputError("bad-label", f"label {y!r} is not hashable", row) from None
        return y

    def index(self, y, grow: bool) -> int:
        """Class index of an already normalized label (``-1`` if unknown and not growing)."""
        k = self._index.get(y)
        if k is None:
            if not grow:
                return -1
            k = len(self.labels)
            self._index[y] = k
            self.labels.append(y)
        return k

    def indices(self, ys, grow: bool) -> np.ndarray:
        """Validate every label first, then map them (growing the space only if all are valid)."""
        normalized = [self.normalize(y, row) for row, y in enumerate(ys)]
        return np.fromiter((self.index(y, grow) for y in normalized), np.int64, len(normalized))

    def export(self) -> dict:
        return {"labels": list(self.labels)}

    @classmethod
    def restore(cls, data: dict) -> "LabelSpace":
        space = cls()
        for y in data["labels"]:
            space.index(y, grow=True)
        return space
