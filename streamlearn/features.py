"""The feature space: how named features become weight columns.

``FeatureSpace`` maps a feature *name* to a weight column — a growing vocabulary by
default, or the hashing trick with ``n_bits`` for unbounded vocabularies. A feature is
always found by its name, never by its position in a dict, so shuffling a dict's keys
changes nothing. (Labels become class indices in :mod:`streamlearn.labels`.)

It converts its inputs *after* validating all of them, so a bad example raises an
:class:`~streamlearn.errors.InvalidInputError` and leaves the space untouched.

>>> fs = FeatureSpace()
>>> cols, vals = fs.encode_one({"b": 2.0, "a": 1.0}, grow=True)
>>> fs.names, sorted(zip(cols.tolist(), vals.tolist()))  # a row's new names enter in name order
(['a', 'b'], [(0, 1.0), (1, 2.0)])
>>> again = fs.encode_one({"a": 1.0, "b": 2.0}, grow=False)  # same row, whatever the key order
>>> again[0].tolist() == cols.tolist()
True
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np

from .batches import (NO_ENTRIES, NUMERIC_TYPES, CsrBatch, SparseRows, batch_to_csr, dense_array,  # noqa: F401 (re-exported)
                      dict_values, is_scipy_sparse, row_of_entry, scipy_sparse, stack_rows)
from .dense_arrays import DenseArrayEncoding
from .kernels import compiled
from .kernels.codes import LARGEST_VALUE
from .names import in_growth_order, name_keys

_rows = compiled("rows")
#: names that start with this (a NUL character) are the learners' own features, not a user's (the intercept's)
RESERVED_PREFIX = "\x00"

_HASH_CACHE_LIMIT = 1 << 20
_DENSE_POSITIONS = 1 << 22  # positions the position cache always may cover (32 MB)


def own_arrays(obj) -> None:
    """Replace the NumPy arrays among ``obj``'s attributes that are read-only (a model loaded through
    joblib's memory maps) by writable copies: the compiled kernels write their caches and scratch
    buffers, even when they only predict."""
    for name, value in list(vars(obj).items()):
        if isinstance(value, np.ndarray) and not value.flags.writeable:
            setattr(obj, name, value.copy())


class FeatureSpace(DenseArrayEncoding):
    """Maps feature names to weight columns.

    Parameters
    ----------
    n_bits
        ``None`` (default): a growing vocabulary, one column per distinct name in order
        of first appearance. An int: the hashing trick with ``2**n_bits`` columns; the
        column of a name is its :func:`name_keys` key modulo ``2**n_bits``.

    Attributes
    ----------
    n_columns, names
        Weight columns in use (``2**n_bits`` when hashing); the vocabulary in column order.

    Every row is summed in the order of its names' keys, so neither the order of a
    dict's keys nor the order in which names entered the vocabulary changes a result.

    What it keeps, and what always holds between two calls:

    * ``_column``: name → column. With a vocabulary, every name of ``_names`` except the int
      names of ``_unsynced``; when hashing, a cache of names already hashed (cleared past
      ``_HASH_CACHE_LIMIT`` entries: a hash is recomputed, never wrong).
    * ``_names`` (vocabulary only): column → name, the columns ``0..n_columns-1`` in order of
      first appearance; ``_order_key[c]`` is :func:`name_keys` of ``_names[c]``.
    * ``_int_name_columns`` (the position cache, for arrays, sparse matrices and LIBSVM): entry
      ``i`` is the column of int name ``i``, or -1 when ``i`` is not a name of the vocabulary
      (hashing: its hashed column, or -1 when not computed yet) — exact for every ``i`` below
      its length, whichever road (dict or positional) added the name.
    * ``_unsynced``: (int names, columns) the positional road added, not yet in ``_column``;
      any look-up by name syncs them first (:meth:`_sync_dict`).
    * ``_dict_int_names``: how many int names the dict road added (when the position cache
      grows, only then must it look for them in ``_column``).
    * ``_table_names`` / ``_table_columns``: the last named batch's names list and, for each of
      its names met so far, its column (-1: unknown), kept while batches come over that list.
    * ``_layout``: the last dict's keys whose names all had a column, with their columns in
      canonical order and the permutation that puts its values there: a stream of dicts with the
      same keys (most tabular streams) is encoded without a look-up or a sort (not when hashing).
    * ``_scratch_idx`` / ``_scratch_val``: buffers :meth:`encode_many`'s rows are views on,
      valid until the next call.

    >>> space = FeatureSpace()
    >>> columns, values = space.encode_one({"b": 2.0, "a": 1.0}, grow=True)
    >>> space.names, space.columns(["a", "zzz"], grow=False).tolist()  # an unknown name: -1
    (['a', 'b'], [0, -1])
    >>> again = space.encode_one({"a": 1.0, "b": 2.0}, grow=True)  # key order does not matter
    >>> columns.tolist() == again[0].tolist() and values.tolist() == again[1].tolist()
    True
    """

    def __init__(self, n_bits: int | None = None):
        if n_bits is not None and not (1 <= int(n_bits) <= 30):
            raise ValueError(f"n_bits must be between 1 and 30, got {n_bits!r}")
        self.n_bits = None if n_bits is None else int(n_bits)
        self._column: dict = {}  # name -> column (the vocabulary, or a cache of hashes)
        self._layout = None
        self._names: list = []  # vocabulary only: column -> name
        self._order_key = np.zeros(0, np.int64)  # vocabulary only: column -> name key
        # Positional names (the columns 0..n-1 of arrays and sparse matrices) take a vectorised
        # road: ``_int_name_columns[i]`` is the column of int name ``i`` (-1: not in the
        # vocabulary), exact for every int name below its length; names added that way
        # reach the ``_column`` dict only when a look-up by name needs them (``_unsynced``).
        self._int_name_columns = np.zeros(0, np.int64)
        self._unsynced: list = []  # [(int names, their columns)] not yet in ``_column``
        self._table_names, self._table_columns = None, None  # the last named batch's names and their columns
        self._dict_int_names = 0  # int names added through ``_add`` (the dict road)

    @property
    def n_columns(self) -> int:
        """Number of weight columns in use (``2**n_bits`` when hashing)."""
        return (1 << self.n_bits) if self.n_bits is not None else len(self._names)

    @property
    def position_cache_size(self) -> int:
        """Entries of the position cache (the column of each int name a positional batch brought;
        bounded so that a sparse matrix with far positions does not make it huge)."""
        return len(self._int_name_columns)

    @property
    def likely_columns(self) -> int:
        """A guess at the columns the stream will bring, for sizing weights ahead: the
        positions positional batches (arrays, sparse matrices, LIBSVM) have spanned so far
        (each may become a column), at most 8x the columns in use; the columns in use
        when hashing or when no positional batch came."""
        if self.n_bits is not None:
            return self.n_columns
        return max(self.n_columns, min(len(self._int_name_columns), 8 * self.n_columns))

    @property
    def names(self) -> list:
        """The vocabulary in column order (empty when hashing)."""
        return list(self._names)

    @property
    def all_integer_names(self) -> bool:
        """Whether every name of the vocabulary is an int, the learner's own reserved names
        (:data:`RESERVED_PREFIX`: the intercept's) aside; remembered per vocabulary size: the
        service asks it for every request."""
        n = len(self._names)
        cached = getattr(self, "_all_integer_names", None)  # (an older pickle has none)
        if cached is None or cached[0] != n:
            every = all(type(name) is int or (type(name) is str and name.startswith(RESERVED_PREFIX)) for name in self._names)
            cached = self._all_integer_names = (n, every)
        return cached[1]

    def _sync_dict(self) -> None:
        """Put the names added by the positional road into the ``_column`` dict."""
        for names, cols in self._unsynced:
            self._column.update(zip(names.tolist(), cols.tolist()))
        self._unsynced = []

    def _add(self, names: list) -> None:
        """Give new, distinct names their columns (in bulk)."""
        keys = name_keys(names)
        if self.n_bits is not None:
            if len(self._column) + len(names) > _HASH_CACHE_LIMIT:
                self._column.clear()
            self._column.update(zip(names, (keys & ((1 << self.n_bits) - 1)).tolist()))
            return
        first = len(self._names)
        self._reserve_order_keys(first + len(names))
        self._order_key[first : first + len(names)] = keys
        self._column.update(zip(names, range(first, first + len(names))))
        self._names.extend(names)
        cache = self._int_name_columns
        for column, name in enumerate(names, first):
            if type(name) is int and name >= 0:
                self._dict_int_names += 1
                if name < len(cache):
                    cache[name] = column

    def _reserve_order_keys(self, n: int) -> None:
        """Make ``_order_key`` hold at least ``n`` columns (doubling)."""
        if n > len(self._order_key):
            grown = np.zeros(max(n, 2 * len(self._order_key)), np.int64)
            grown[: len(self._names)] = self._order_key[: len(self._names)]
            self._order_key = grown

    def _record_positions(self, positions: np.ndarray) -> None:
        """Book int names that :func:`map_rows` just gave the next columns (it wrote their
        column map and order keys): the vocabulary's names, and the dict sync to come."""
        first = len(self._names)
        self._names.extend(positions.tolist())
        self._unsynced.append((positions.copy(), np.arange(first, first + len(positions), dtype=np.int64)))

    def _hash_positions(self, indices: np.ndarray) -> None:
        """Hashing: put a batch's int names that are not in the position cache into it."""
        missing = _rows.unknown_positions(indices, self._int_name_columns)
        if len(missing):
            self._int_name_columns[missing] = missing & ((1 << self.n_bits) - 1)

    def _grow_position_cache(self, needed: int) -> None:
        """Make ``_int_name_columns`` cover int names ``0..needed-1``, filling the new part
        from the vocabulary (only int names added through the dict road can be there)."""
        old = len(self._int_name_columns)
        grown = np.full(max(needed, 2 * old), -1, np.int64)
        grown[:old] = self._int_name_columns
        if self._dict_int_names and self.n_bits is None:
            self._sync_dict()
            for name, column in self._column.items():
                if type(name) is int and old <= name < len(grown):
                    grown[name] = column
        self._int_name_columns = grown

    def sort_keys(self, cols: np.ndarray) -> np.ndarray:
        """The key rows are ordered by: the column itself when hashing, the name key otherwise."""
        return cols if self.n_bits is not None else self._order_key[cols]

    def columns(self, names: list, grow: bool, rows: np.ndarray | int | None = None) -> np.ndarray:
        """Columns of several names (``-1`` for unknown names when not growing). New names enter
        the vocabulary in the order given, or with ``rows`` (each name's row; an int: all in one) row
        by row and within a row in name order, so that the order of a row's entries never changes the vocabulary."""
        if self._unsynced:
            self._sync_dict()
        if len(names) > 1:  # the common case, every name known: one C-level look-up of all
            try:
                return np.fromiter(itemgetter(*names)(self._column), np.int64, len(names))
            except KeyError:
                pass
        get = self._column.get
        cols = [get(name) for name in names]
        if None in cols:
            if grow or self.n_bits is not None:
                first_at: dict = {}  # each new name's first position
                for i, (c, name) in enumerate(zip(cols, names)):
                    if c is None and name not in first_at:
                        first_at[name] = i
                new_rows = rows if rows is None or isinstance(rows, int) else rows[list(first_at.values())]
                # hashing adds to a cache, whose order changes nothing: no sort on its road
                self._add(list(first_at) if self.n_bits is not None else in_growth_order(list(first_at), new_rows))
            cols = [get(name, -1) for name in names]
        return np.asarray(cols, dtype=np.int64)

    def name_columns(self) -> tuple[dict, np.ndarray, int] | None:
        """The vocabulary's name → column dict, each column's order key (:meth:`sort_keys`) and
        :attr:`n_columns`, for an encoder in C (:mod:`streamlearn.mcid.small_records`): read them,
        do not change them. ``None`` when hashing."""
        if self.n_bits is not None:
            return None
        if self._unsynced:
            self._sync_dict()
        return self._column, self._order_key, len(self._names)

    def encode_one(self, x: dict, grow: bool, row: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Validate a dict example and return its ``(columns, values)``.

        Unknown features are dropped when ``grow`` is false (prediction); nothing is
        added to the vocabulary if a value is invalid.
        """
        values = dict_values(x, row)
        return self._encode_valid(x, values, grow)

    def _encode_valid(self, x: dict, values: np.ndarray, grow: bool) -> tuple[np.ndarray, np.ndarray]:
        keys = tuple(x)
        layout = getattr(self, "_layout", None)  # (an older pickle has none)
        if layout is not None and layout[0] == keys:
            return layout[1].copy(), values[layout[2]]
        cols = self.columns(list(keys), grow, 0)
        if not grow and len(values) and cols.min() < 0:
            keep = cols >= 0
            return self._canonical(cols[keep], values[keep])
        if self.n_bits is None and len(cols) > 1:
            order = self.canonical_order(cols)
            self._layout = (keys, cols[order], order)
            return cols[order], values[order]
        return self._canonical(cols, values)

    def canonical_order(self, cols: np.ndarray) -> np.ndarray:
        """The permutation that orders a row's entries by :meth:`sort_keys`."""
        return np.argsort(self.sort_keys(cols), kind="stable")

    def _canonical(self, cols: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Order a row by :meth:`sort_keys` and sum hash collisions, so that neither the
        order of a dict's keys nor the order in which names entered the vocabulary changes
        a floating-point sum (and a dict and a batch row agree bit for bit)."""
        if len(cols) < 2:
            return cols, values
        order = self.canonical_order(cols)
        cols, values = cols[order], values[order]
        if self.n_bits is not None and (np.diff(cols) == 0).any():
            cols, first = np.unique(cols, return_index=True)
            values = np.add.reduceat(values, first)
        return cols, values

    def _position_columns(self, needed: int) -> np.ndarray:
        """Column of every int name ``0..needed-1`` (``-1``: unknown) for a batch over
        positional names (arrays, sparse matrices): the cache ``_int_name_columns`` itself,
        grown to cover the batch without adding any name (:func:`map_rows` adds them as
        it meets them, :meth:`_hash_positions` when hashing)."""
        if len(self._int_name_columns) < needed:
            self._grow_position_cache(needed)
        return self._int_name_columns

    def _named_columns(self, names: list, indptr: np.ndarray, indices: np.ndarray, grow: bool) -> np.ndarray:
        """Column of each of a batch's column names (``-1``: unknown or unused); only names
        with an entry in the batch are looked up, in order of first appearance. The answer is
        kept for the next batch over the same ``names`` list (a walker's name table, which only
        grows: :class:`~streamlearn.batches.NamedCsrBatch`), so a name is looked up once it has
        a column, not once per batch; names without one are looked up again."""
        if names is not getattr(self, "_table_names", None):  # (an older pickle has no cache)
            self._table_names, self._table_columns = names, np.full(len(names), -1, np.int64)
        elif len(self._table_columns) < len(names):
            grown = np.full(max(len(names), 2 * len(self._table_columns)), -1, np.int64)
            grown[: len(self._table_columns)] = self._table_columns
            self._table_columns = grown
        cols = self._table_columns
        used = _rows.first_appearance(indices, len(names))
        unknown = used[cols[used] < 0]
        if len(unknown):
            rows = None
            if grow and len(unknown) > 1:  # the row of each one's first appearance: see columns()
                distinct, first = np.unique(indices, return_index=True)
                rows = np.searchsorted(indptr, first[np.searchsorted(distinct, unknown)], side="right") - 1
            cols[unknown] = self.columns([names[i] for i in unknown.tolist()], grow, rows)
        return cols

    def encode_expanded(self, X, grow: bool, expansion) -> SparseRows | None:
        """A dense NumPy batch as :meth:`encode_many` encodes it, each row then expanded as
        ``expansion`` says (:class:`~streamlearn.binning.RowExpansion`: model columns, feature
        bins, the intercept's entry) in the same compiled pass; ``None`` for any other batch, with
        hashing, or at a width too sparse to cache (:meth:`encode_many` then, and the expansion after)."""
        if not isinstance(X, np.ndarray) or self.n_bits is not None:
            return None
        own_arrays(self)
        return self._encode_dense(dense_array(X), grow, expansion=expansion)

    def encode_many(self, X, grow: bool, zero_share: float | None = None) -> SparseRows:
        """Validate a batch (pandas/narwhals DataFrame, 2-D NumPy array, SciPy sparse
        matrix or a list of feature dicts) and return it as CSR rows over weight columns. Column names are the
        DataFrame's column labels, or the integers ``0..n_cols-1`` for arrays. Only
        columns with a non-zero value enter the vocabulary (a zero contributes nothing),
        in order of first appearance (row by row), so the vocabulary does not depend on
        where a stream is cut into batches. The rows may be views on buffers the next call
        reuses (:meth:`_scratch`), or on ``X``'s own values: use them or copy them first, and
        never write to them.

        ``zero_share``: a caller whose kernels give the same result for a row with explicit
        zero entries as without them (0 added to a sum or a weight changes no bit) may take a
        dense float64 array with at most this share of zeros as it is: its values, zeros and
        all, over a cached column layout, without the copy (:meth:`_dense_as_it_is`)."""
        own_arrays(self)  # the encoding kernels write the caches even when they only look names up
        if isinstance(X, list):
            return self._encode_dicts(X, grow)
        if isinstance(X, np.ndarray) and self.n_bits is None:
            X = dense_array(X)
            rows = self._encode_dense(X, grow, zero_share)
            if rows is not None:
                return rows
        names, matrix, needed = batch_to_csr(X)  # positions 0..needed-1 cover the batch
        positional = names is None
        if positional:
            if self._positions_too_sparse(needed, matrix.nnz):
                return self._sparse_positions(matrix, grow)
            column_of = self._position_columns(needed)
            if self.n_bits is not None:  # hashing: every name has its column
                self._hash_positions(matrix.indices)
        else:
            column_of = self._named_columns(names, matrix.indptr, matrix.indices, grow)
        if self.n_bits is None:  # one compiled pass: map, drop unknown, order by name key
            out_idx, out_val = self._scratch(matrix.nnz)
            if positional and grow:  # new int names get their columns as the pass meets them
                room = min(matrix.nnz, len(column_of))
                self._reserve_order_keys(len(self._names) + room)
                added = np.empty(room, np.int64)
                indptr, n, n_added, copied = _rows.map_rows(
                    matrix.indptr, matrix.indices, matrix.data, column_of, self._order_key, out_idx, out_val,
                    True, True, len(self._names), added, False,
                )  # fmt: skip
                if n_added:
                    self._record_positions(added[:n_added])
            else:
                indptr, n, _, copied = _rows.map_rows(
                    matrix.indptr, matrix.indices, matrix.data, column_of, self._order_key, out_idx, out_val,
                    positional, False, 0, NO_ENTRIES, True,
                )  # fmt: skip
            return SparseRows(indptr, out_idx[:n], out_val[:n] if copied else matrix.data)
        return self._mapped_rows(matrix.indptr.astype(np.int64), column_of[matrix.indices], matrix.data.astype(np.float64))

    def _positions_too_sparse(self, needed: int, n_entries: int) -> bool:
        """Whether covering positions ``0..needed-1`` would grow the position cache (one int64
        per position) far past what the stream holds: one LIBSVM index of 10**12 asked for
        8 TB, one of 3·10**8 took 2.4 GB for a four-line file."""
        known = len(self._names) if self.n_bits is None else 0
        return needed > len(self._int_name_columns) and needed > max(_DENSE_POSITIONS, 8 * (known + n_entries))

    def _sparse_positions(self, matrix, grow: bool) -> SparseRows:
        """A positional batch by its distinct positions (the road of dict names), for
        :meth:`_positions_too_sparse` batches: the same vocabulary order (first appearance,
        row by row) and the same rows as the position cache gives."""
        indptr, indices, data = matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64), matrix.data
        if self.n_bits is not None:  # an int name's hashed column is the name modulo the width
            return self._mapped_rows(indptr, indices & ((1 << self.n_bits) - 1), data)
        distinct, first = np.unique(indices, return_index=True)
        order = np.argsort(first, kind="stable")
        columns = np.empty(len(distinct), np.int64)
        first_rows = np.searchsorted(indptr, first[order], side="right") - 1
        columns[order] = self.columns(distinct[order].tolist(), grow, first_rows)
        return self._mapped_rows(indptr, columns[np.searchsorted(distinct, indices)], data)

    def _scratch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Index and value buffers of at least ``n`` entries, reused from batch to batch
        (allocating fresh megabyte-size arrays for every batch cost more page faults than
        the encoding itself). Rows from :meth:`encode_many` are views on them, valid until
        the next call: callers learn or score them at once and copy what they keep."""
        if not hasattr(self, "_scratch_idx") or len(self._scratch_idx) < n:  # (absent until the first call and after unpickling)
            self._scratch_idx, self._scratch_val = np.empty(2 * n, np.int64), np.empty(2 * n, np.float64)
        return self._scratch_idx, self._scratch_val

    def _mapped_rows(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> SparseRows:
        """CSR rows whose entries are mapped to columns (``-1``: unknown, dropped), put in
        canonical order: by name key (vocabulary), or by column with collisions summed
        (hashing), exactly as :meth:`encode_one` orders a single row."""
        n_rows = len(indptr) - 1
        if len(indices) and indices.min() < 0:  # unknown features at prediction time
            keep = indices >= 0
            row_of = np.repeat(np.arange(n_rows), np.diff(indptr))
            indptr = np.concatenate([[0], np.cumsum(np.bincount(row_of[keep], minlength=n_rows))])
            indices, data = indices[keep], data[keep]
        if self.n_bits is not None:  # sort by column and sum collisions, as encode_one does
            width = 1 << self.n_bits
            mapped = scipy_sparse().csr_matrix((data, indices, indptr), shape=(n_rows, width))
            mapped.sum_duplicates()
            indptr, indices, data = mapped.indptr.astype(np.int64), mapped.indices.astype(np.int64), mapped.data
        elif len(indices) > 1:  # vocabulary: order each row by name key, as encode_one does
            _rows.sort_rows_by_key(indptr, indices, data, self._order_key)
        return SparseRows(indptr.astype(np.int64), indices, data)

    def _encode_dicts(self, X: list, grow: bool) -> SparseRows:
        """A list of dict examples as rows, in bulk: all validated first, then their names
        looked up in one pass (new names enter the vocabulary in the order a ``learn_one``
        loop would add them)."""
        for row, x in enumerate(X):
            if type(x) is not dict:
                dict_values(x, row)  # raises with the row number
        indptr = np.zeros(len(X) + 1, np.int64)
        np.cumsum([len(x) for x in X], out=indptr[1:])
        raw = [v for x in X for v in x.values()]
        if not set(map(type, raw)) <= NUMERIC_TYPES:
            for row, x in enumerate(X):
                dict_values(x, row)  # finds the row and feature, or accepts numbers.Real
        try:
            data = np.array(raw, dtype=np.float64) if raw else np.zeros(0)
        except (TypeError, ValueError, OverflowError):
            for row, x in enumerate(X):
                dict_values(x, row)
            raise
        if not np.abs(data).max(initial=0.0) <= LARGEST_VALUE:
            row = row_of_entry(indptr, int(np.flatnonzero(~(np.abs(data) <= LARGEST_VALUE))[0]))
            dict_values(X[row], row)
        names = [name for x in X for name in x]
        cols = self.columns(names, grow, np.repeat(np.arange(len(X)), np.diff(indptr)) if grow else None)
        return self._mapped_rows(indptr, cols, data)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_scratch_idx", None), state.pop("_scratch_val", None)  # buffers, not state
        state.pop("_dense_layout", None)  # a cache
        state["_table_names"], state["_table_columns"] = None, None  # a cache of another object's names
        if self.n_bits is not None:
            state["_column"] = {}  # a cache: recomputed on demand
        return state

    def export(self) -> dict:
        """Plain data for a checkpoint."""
        return {"n_bits": self.n_bits, "names": list(self._names)}

    @classmethod
    def restore(cls, data: dict) -> "FeatureSpace":
        space = cls(data["n_bits"])
        if data["names"]:
            space._add(list(data["names"]))  # re-derives the order keys from the names
        return space
