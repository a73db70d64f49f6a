"""Batches as the learners take them: the CSR types, and the conversion and validation of
every input route (dicts, NumPy arrays, DataFrames, SciPy sparse matrices, the LIBSVM reader's
:class:`CsrBatch`) before :class:`~streamlearn.features.FeatureSpace` maps names to columns.

Every check raises :class:`~streamlearn.errors.InvalidInputError` naming the row, the feature
and the reason, before anything is learned.

>>> stack_rows([np.array([0, 2]), np.array([1])], [np.array([1.0, 2.0]), np.array([3.0])]).indptr.tolist()
[0, 2, 3]
"""

from __future__ import annotations

import numbers
import sys
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .errors import InvalidInputError
from .kernels import compiled
from .kernels.codes import LARGEST_VALUE

if TYPE_CHECKING:
    import scipy.sparse

_rows = compiled("rows")
NO_ENTRIES = np.zeros(0, np.int64)
#: what a refused value is (the ``non-finite`` reason's words)
OUT_OF_RANGE = f"NaN, infinite or beyond ±{LARGEST_VALUE:g} (its square leaves the float range)"
NUMERIC_TYPES = frozenset({float, int, bool, np.float64, np.float32, np.int64, np.int32, np.bool_})


def scipy_sparse():
    """``scipy.sparse``, imported on first use: its import is slow, and a stream of dicts never
    needs it."""
    import scipy.sparse

    return scipy.sparse


def is_scipy_sparse(X) -> bool:
    """Whether ``X`` is a SciPy sparse matrix or array, without importing SciPy: one can
    only exist once ``scipy.sparse`` is loaded."""
    module = sys.modules.get("scipy.sparse")
    return module is not None and module.issparse(X)


class SparseRows(NamedTuple):
    """A batch of examples in CSR form over the learner's own weight columns."""

    indptr: np.ndarray  # int64, n_rows + 1
    indices: np.ndarray  # int64 weight columns
    data: np.ndarray  # float64 values

    @property
    def n_rows(self) -> int:
        return len(self.indptr) - 1

    def own_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(indptr, indices, data)`` of these rows alone, contiguous, ``indptr`` from 0 (a
        slice of a larger batch shares its parent's ``indices``/``data``): what a kernel takes."""
        lo, hi = self.indptr[0], self.indptr[-1]
        return (np.ascontiguousarray(self.indptr - lo, np.int64), np.ascontiguousarray(self.indices[lo:hi], np.int64),
                np.ascontiguousarray(self.data[lo:hi], np.float64))


class CsrBatch:
    """A batch of examples as a CSR matrix over integer feature names (column ``j`` holds
    feature ``j``), without SciPy: what the LIBSVM reader yields (the ``streamlearn`` command
    does not import ``scipy.sparse``). The learners take it as they
    take a SciPy CSR matrix; :meth:`tocsr` gives one.

    ``needed`` is for producers that have validated the batch themselves (the LIBSVM
    parser: finite values, indices from 0 up): one more than its largest column index. The
    learners then skip their own check pass.
    ``None`` (the default, and for every row selection) has them check.

    >>> batch = CsrBatch(np.array([0, 2, 3]), np.array([0, 2, 1]), np.array([1.0, 2.0, 3.0]), 3)
    >>> batch.shape, batch[np.array([1, 0])].toarray().tolist()
    ((2, 3), [[0.0, 3.0, 0.0], [1.0, 0.0, 2.0]])
    """

    __slots__ = ("indptr", "indices", "data", "width", "needed")
    ndim = 2

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, width: int,
                 needed: int | None = None):  # fmt: skip
        self.indptr, self.indices, self.data, self.width = indptr, indices, data, int(width)
        self.needed = needed

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.indptr) - 1, self.width

    @property
    def nnz(self) -> int:
        return len(self.indices)

    def __getitem__(self, rows) -> "CsrBatch":
        """The rows ``rows`` (an integer array or a slice), in that order."""
        rows = np.arange(self.shape[0])[rows] if isinstance(rows, slice) else np.asarray(rows, np.int64)
        starts, lengths = self.indptr[rows], np.diff(self.indptr)[rows]
        indptr = np.zeros(len(rows) + 1, self.indptr.dtype)
        np.cumsum(lengths, out=indptr[1:])
        entries = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])
        return CsrBatch(indptr, self.indices[entries], self.data[entries], self.width)

    def tocsr(self):
        """The same matrix as a ``scipy.sparse.csr_matrix``."""
        return scipy_sparse().csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape)
        out[np.repeat(np.arange(self.shape[0]), np.diff(self.indptr)), self.indices] = self.data
        return out

    def row_dicts(self) -> list:
        """The rows as ``{feature name: value}`` dicts."""
        indptr, indices, data = self.indptr.tolist(), self.indices.tolist(), self.data.tolist()
        names = getattr(self, "names", None)
        if names is not None:
            indices = [names[i] for i in indices]
        return [dict(zip(indices[indptr[r] : indptr[r + 1]], data[indptr[r] : indptr[r + 1]])) for r in range(len(indptr) - 1)]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.shape[0]} rows, {self.width} columns, {self.nnz} entries>"


class NamedCsrBatch(CsrBatch):
    """A :class:`CsrBatch` whose column ``j`` is the feature called ``names[j]`` (not the int
    ``j``): dict records decoded without a Python object per feature (:mod:`streamlearn.connectors.walker`).
    The learners take it as they take a DataFrame: by column name.

    >>> batch = NamedCsrBatch(np.array([0, 2, 3]), np.array([0, 1, 0]), np.array([1.0, 2.0, 3.0]), ["a", "b"])
    >>> batch[np.array([1])].row_dicts(), batch.row_dicts()
    ([{'a': 3.0}], [{'a': 1.0, 'b': 2.0}, {'a': 3.0}])
    """

    __slots__ = ("names",)

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, names: list):
        super().__init__(indptr, indices, data, len(names), len(names))
        self.names = names

    def __getitem__(self, rows) -> "NamedCsrBatch":
        part = super().__getitem__(rows)
        return NamedCsrBatch(part.indptr, part.indices, part.data, self.names)


def stack_rows(parts_cols: list, parts_vals: list) -> SparseRows:
    """Rows given as lists of (columns, values) arrays, as one CSR batch."""
    lengths = np.fromiter((len(c) for c in parts_cols), np.int64, len(parts_cols))
    indptr = np.zeros(len(parts_cols) + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    if not parts_cols:
        return SparseRows(indptr, np.zeros(0, np.int64), np.zeros(0))
    return SparseRows(indptr, np.concatenate(parts_cols), np.concatenate(parts_vals))


def _as_float(v, row: int, feature) -> float:
    """One value as a float, or the reason it is none: not a number, or an integer beyond
    the float range (``10**400``: Python converts it only by raising ``OverflowError``)."""
    if type(v) not in NUMERIC_TYPES and not isinstance(v, numbers.Real):
        raise InvalidInputError("non-numeric", f"value {v!r} is not a number", row, feature)
    try:
        return float(v)
    except OverflowError:
        raise InvalidInputError("non-finite", f"an integer value of {len(str(abs(int(v))))} digits is too large for a float",
                                row, feature) from None


def _check_values(x: dict, values: np.ndarray, row: int, every: bool = False) -> None:
    """Raise for a non-numeric or non-finite value of ``x`` (``values`` is its float copy);
    ``every``: look at each value even when all are of numeric types (an int may still be
    too large for a float: the caller's conversion failed)."""
    if every or not set(map(type, x.values())) <= NUMERIC_TYPES:
        for name, v in x.items():
            _as_float(v, row, name)
        largest = float(np.abs(values).max(initial=0.0))  # NaN when one is
    else:  # numbers of known types: Python's sum and max of a small dict are cheaper than ufunc calls
        total = sum(x.values())
        largest = max(map(abs, x.values()), default=0.0) if total - total == 0.0 else float("nan")  # a finite sum: no NaN, no inf
    if not largest <= LARGEST_VALUE:
        name = list(x)[int(np.flatnonzero(~(np.abs(values) <= LARGEST_VALUE))[0])]
        raise InvalidInputError("non-finite", f"value {float(x[name])!r} is {OUT_OF_RANGE}", row, name)


def dict_values(x: dict, row: int) -> np.ndarray:
    """The values of a dict example as float64, validated (numbers, finite)."""
    if not isinstance(x, dict):
        raise InvalidInputError("bad-type", f"expected a dict of features, got {type(x).__name__}", row)
    n = len(x)
    try:
        values = np.fromiter(x.values(), np.float64, n)
    except (TypeError, ValueError, OverflowError):
        _check_values(x, np.zeros(n), row, every=True)  # names the offending feature
        raise InvalidInputError("non-numeric", "values are not all numbers", row) from None
    _check_values(x, values, row)
    return values



def batch_to_csr(X) -> tuple[list | None, "CsrBatch | scipy.sparse.csr_matrix", int]:
    """Column names (``None`` for positional integer names), the batch as a validated
    float64 CSR matrix (``X`` itself when it is a :class:`CsrBatch` or a float64 SciPy CSR
    matrix already: callers only read it), and one more than its largest column index."""
    if isinstance(X, CsrBatch) or is_scipy_sparse(X):
        # a float64 CSR batch is used as it is (read only): no constructor copy, no format check
        if isinstance(X, CsrBatch) or (X.format == "csr" and X.dtype == np.float64 and X.ndim == 2):
            matrix = X
        else:
            matrix = scipy_sparse().csr_matrix(X, dtype=np.float64)
        if matrix.ndim != 2:
            raise InvalidInputError("bad-shape", f"expected a 2-D matrix, got shape {matrix.shape}")
        validated = matrix.needed if isinstance(matrix, CsrBatch) else None
        names = matrix.names if isinstance(matrix, NamedCsrBatch) else None  # the DataFrame road: by name
        return names, matrix, _checked_csr(matrix) if validated is None else validated
    if isinstance(X, np.ndarray):
        dense = dense_array(X)
        names = None
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
    dense = np.ascontiguousarray(dense)
    count, bad = _rows.dense_census(dense)
    if bad >= 0:
        raise InvalidInputError("non-finite", f"value {float(dense.ravel()[bad])!r} is {OUT_OF_RANGE}", bad // flat_cols,
                                bad % flat_cols if names is None else names[bad % flat_cols])
    indices, data = np.empty(count, np.int64), np.empty(count, np.float64)
    # the CSR is the dense road's rows over the identity column map
    indptr, _, _ = _rows.dense_rows(dense, np.arange(flat_cols, dtype=np.int64), NO_ENTRIES, indices, data, False, 0,
                                    NO_ENTRIES)
    needed = int(indices.max()) + 1 if count else 0
    return names, CsrBatch(indptr, indices, data, flat_cols, needed), needed


def row_of_entry(indptr: np.ndarray, p: int) -> int:
    """The row of a CSR batch that holds entry ``p``."""
    return int(np.searchsorted(indptr, p, side="right") - 1)


def _checked_csr(matrix) -> int:
    """Raise unless ``matrix``'s arrays describe a valid CSR matrix of finite values (row
    pointers from 0 up to the number of entries, never decreasing; column indices inside
    ``0..width-1``; no NaN or infinity); return one more than its largest column index.
    One compiled pass (:func:`streamlearn.kernels.rows.check_csr`). SciPy's constructor
    checks only the row pointers, and not always (a matrix built with ``(data, indices,
    indptr)`` then edited in place is not re-checked): a negative index was read as a
    position counted from the end of the column map, learned silently, and a decreasing
    row pointer could make the compiled loops read past the arrays."""
    n_rows, width = matrix.shape
    indptr, indices, data = matrix.indptr, matrix.indices, matrix.data
    status, entry, needed = _rows.check_csr(indptr, indices, data, width) if len(indptr) == n_rows + 1 else (1, -1, 0)
    if status == 1:
        raise InvalidInputError("bad-shape", "the sparse matrix's row pointers do not match its entries "
                                "(scipy.sparse's check_format(full_check=True) says more)")
    if status == 2:
        raise InvalidInputError("bad-shape", f"column index {int(indices[entry])} outside the matrix's {width} columns",
                                row_of_entry(indptr, entry))
    if status == 3:
        raise InvalidInputError("non-finite", f"value {float(data[entry])!r} is {OUT_OF_RANGE}", row_of_entry(indptr, entry),
                                int(indices[entry]))
    return int(needed)


def dense_array(X: np.ndarray) -> np.ndarray:
    """A 2-D NumPy batch as a C-contiguous float64 array (``X`` itself when it is one: callers
    only read it), with a row/feature message for a non-number; finiteness is the caller's."""
    if X.ndim != 2:
        raise InvalidInputError("bad-shape", f"expected a 2-D array, got shape {X.shape}")
    return np.ascontiguousarray(_dense_float(X, list(range(X.shape[1]))))


def _dense_float(values: np.ndarray, names: list) -> np.ndarray:
    """A dense batch as float64 (the batch itself when it is: callers only read it), with a
    row/feature message for a non-number."""
    if values.dtype.kind in "fiub":
        return np.asarray(values, np.float64)
    for (i, j), v in np.ndenumerate(values):
        _as_float(v, i, names[j])
    return values.astype(np.float64)
