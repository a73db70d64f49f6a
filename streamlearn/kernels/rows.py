"""Kernels that check CSR batches and map them to weight columns (see
:class:`streamlearn.features.FeatureSpace`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .codes import LARGEST_VALUE
from .scaling import expand_row


@njit(cache=True, nogil=True)
def dense_census(X):
    """``(count, bad)`` of a dense batch: its nonzero entries (``np.count_nonzero``) and the
    flat position of its first NaN, infinity or value beyond ``LARGEST_VALUE`` (``-1``: none). The first pass has no branch, so
    that it vectorises (ten times the speed of one that stops at a bad value); only a batch
    with a bad value is read again, to find where."""
    n_rows, width = X.shape
    count = 0
    within = True
    for i in range(n_rows):
        for j in range(width):
            v = X[i, j]
            count += v != 0.0
            within &= abs(v) <= LARGEST_VALUE  # False for NaN too
    if within:
        return count, -1
    for i in range(n_rows):
        for j in range(width):
            if not abs(X[i, j]) <= LARGEST_VALUE:
                return count, i * width + j
    return count, -1


@njit(cache=True, nogil=True)
def dense_rows(X, column_of, keys, out_idx, out_val, grow, next_column, added):
    """A dense batch of finite values over positions as rows over weight columns in one pass:
    what SciPy's CSR then :func:`map_rows` (``keys_are_positions``, values copied) give,
    without the CSR in between. A row of a dense batch is in position order, so no row needs
    sorting. ``out_idx`` / ``out_val`` need room for the batch's nonzero entries
    (:func:`dense_census`); ``column_of`` must cover every position (``X.shape[1]``), and with
    ``grow`` ``keys`` from ``next_column`` and ``added`` must have room for every new one.
    Returns ``(indptr, n, n_added)``: the rows are ``out_idx[:n]`` / ``out_val[:n]``."""
    out_ptr = np.empty(X.shape[0] + 1, np.int64)
    out_ptr[0] = 0
    n = 0
    n_added = 0
    for i in range(X.shape[0]):
        n, n_added = dense_row(X, i, column_of, keys, out_idx, out_val, n, grow, next_column, added, n_added)
        out_ptr[i + 1] = n
    return out_ptr, n, n_added


@njit(cache=True, nogil=True)
def dense_row(X, i, column_of, keys, out_idx, out_val, n, grow, next_column, added, n_added):
    """Row ``i`` of :func:`dense_rows` written from ``out_idx[n]``; returns the new ``(n, n_added)``."""
    for j in range(X.shape[1]):
        v = X[i, j]
        if v != 0.0:
            c = column_of[j]
            if c < 0 and grow:
                c = next_column + n_added
                column_of[j] = c
                keys[c] = j
                added[n_added] = j
                n_added += 1
            if c >= 0:
                out_idx[n] = c
                out_val[n] = v
                n += 1
    return n, n_added


@njit(cache=True, nogil=True)
def dense_model_rows(X, column_of, keys, grow, next_column, added, sums, squares, n_seen, learn, n_bins, half_range,
                     max_nonzeros, binned_columns, value, last_column, out_idx, out_val):
    """:func:`dense_rows`, each row then expanded as the model sees it in the same pass:
    :func:`~streamlearn.kernels.scaling.expand_row` in place (model columns, the feature bins' entries, the
    intercept's) and, with ``learn``, the bins' statistics (``sums``/``squares`` over ``n_seen``
    rows, room for every column a row can reach) after it; what ``dense_rows`` then
    ``bin_rows`` give, without the rows in between. ``out_idx`` / ``out_val`` need room for twice
    the nonzero entries and one per row. Returns ``(indptr, n, n_added)``."""
    out_ptr = np.empty(X.shape[0] + 1, np.int64)
    out_ptr[0] = 0
    n = 0
    n_added = 0
    for i in range(X.shape[0]):
        start = n
        n, n_added = dense_row(X, i, column_of, keys, out_idx, out_val, n, grow, next_column, added, n_added)
        n = expand_row(out_idx, out_val, start, n, sums, squares, n_seen, learn, n_bins, half_range, max_nonzeros,
                       binned_columns, value, last_column)
        n_seen += 1 if learn else 0
        out_ptr[i + 1] = n
    return out_ptr, n, n_added


@njit(cache=True, nogil=True)
def append_column(indptr, indices, data, column, value):
    """CSR rows (``indptr`` may start past 0) with one more entry at the end of every row,
    ``column`` at ``value``: new arrays ``(indptr, indices, data)`` starting at 0."""
    n_rows = len(indptr) - 1
    lo = indptr[0]
    out_ptr = np.empty(n_rows + 1, np.int64)
    out_idx = np.empty(indptr[n_rows] - lo + n_rows, np.int64)
    out_val = np.empty(len(out_idx), np.float64)
    out_ptr[0] = 0
    q = 0
    for i in range(n_rows):
        for p in range(indptr[i], indptr[i + 1]):
            out_idx[q] = indices[p]
            out_val[q] = data[p]
            q += 1
        out_idx[q] = column
        out_val[q] = value
        q += 1
        out_ptr[i + 1] = q
    return out_ptr, out_idx, out_val


@njit(cache=True, nogil=True)
def mean_squares(indptr, data, out):
    """Each CSR row's mean square of its nonzero values into ``out`` (``-1``: a row without one), the sum
    in the order of the row's entries: the intercept's statistics (:mod:`streamlearn.intercept`), the same
    bits for a row alone as within a batch. A square past float64 is inf."""
    for i in range(len(indptr) - 1):
        total = 0.0
        count = 0
        for p in range(indptr[i], indptr[i + 1]):
            v = data[p]
            if v != 0.0:
                total += v * v
                count += 1
        out[i] = total / count if count else -1.0


@njit(cache=True, nogil=True)
def sort_rows_by_key(indptr, indices, data, keys):
    """Sort the entries of each CSR row by ``keys[indices]`` in place (stable)."""
    n_rows = len(indptr) - 1
    for i in range(n_rows):
        lo, hi = indptr[i], indptr[i + 1]
        if hi - lo < 2:
            continue
        in_order = True
        for p in range(lo + 1, hi):
            if keys[indices[p]] < keys[indices[p - 1]]:
                in_order = False
                break
        if in_order:
            continue
        row_keys = np.empty(hi - lo, np.int64)
        for p in range(lo, hi):
            row_keys[p - lo] = keys[indices[p]]
        order = np.argsort(row_keys, kind="mergesort")
        row_indices = indices[lo:hi].copy()
        row_data = data[lo:hi].copy()
        for p in range(hi - lo):
            indices[lo + p] = row_indices[order[p]]
            data[lo + p] = row_data[order[p]]


@njit(cache=True, nogil=True)
def first_appearance(indices, width):
    """The distinct values of ``indices`` (all in ``[0, width)``) in order of first
    appearance: a batch's new columns then enter the vocabulary in stream order, so
    cutting a stream into batches differently never changes the vocabulary's order."""
    seen = np.zeros(width, np.bool_)
    out = np.empty(min(width, len(indices)), np.int64)
    n = 0
    for c in indices:
        if not seen[c]:
            seen[c] = True
            out[n] = c
            n += 1
    return out[:n]


@njit(cache=True, nogil=True)
def unknown_positions(indices, column_of):
    """The distinct values ``c`` of ``indices`` with ``column_of[c] < 0`` (features not in
    the vocabulary yet), in order of first appearance. Two passes over ``indices`` and no
    width-size scratch: the first marks each new position in ``column_of`` (``-2``) and
    counts, the second collects and restores the marks, so ``column_of`` comes back as it
    went in. Once the vocabulary holds a stream's features, that is one read per entry."""
    n = 0
    for c in indices:
        if column_of[c] == -1:
            column_of[c] = -2
            n += 1
    out = np.empty(n, np.int64)
    n = 0
    for c in indices:
        if column_of[c] == -2:
            column_of[c] = -1
            out[n] = c
            n += 1
    return out


@njit(cache=True, nogil=True)
def _renumber_in_key_order(added, column_of, keys, first_column):
    """Give the positions ``added`` (just given the columns ``first_column, ...`` in the order a
    row listed them) those columns in increasing order, as a row sorted by position would."""
    added.sort()
    for r in range(len(added)):
        column_of[added[r]] = first_column + r
        keys[first_column + r] = added[r]


@njit(cache=True, nogil=True)
def map_rows(indptr, indices, data, column_of, keys, out_idx, out_val, keys_are_positions, grow, next_column, added,
             copy_values):  # fmt: skip
    """A CSR batch over positions as rows over weight columns, in one pass: entry ``p``
    goes to column ``column_of[indices[p]]`` (``-1``: an unknown feature, dropped), and each
    row is then ordered by ``keys`` of its columns (:func:`sort_rows_by_key`; a row already
    in order, as a canonical CSR row over int names is, costs one comparison per entry).
    Writes the entries into ``out_idx`` / ``out_val`` (int64 / float64, at least
    ``len(indices)`` long: the caller reuses them from batch to batch, since fresh
    megabyte-size arrays cost a page fault per 4 KiB) and returns
    ``(indptr, n, n_added, values_copied)``: the rows are ``out_idx[:n]`` and ``out_val[:n]``,
    or ``data`` itself when ``values_copied`` is false.

    ``copy_values=False`` (with ``grow``: nothing is dropped, so entry ``p`` stays at ``p``):
    the values are copied only if a row must be reordered; a canonical batch then costs
    one write per entry, not two.

    ``keys_are_positions``: the key of a known column is its position (int names are their
    own keys), so the order check reads the positions, in sequence, instead of gathering
    ``keys[column]``; ``keys`` is then only read to sort a row found out of order.

    ``grow`` (with ``keys_are_positions``): grow instead of dropping. An unknown position
    ``c`` gets the column ``next_column + n_added`` in ``column_of``, its own value as key,
    and is listed in ``added`` (so new names come in order of first appearance row by row, and
    within a row in increasing position, as the vocabulary's other roads add them:
    :meth:`~streamlearn.features.FeatureSpace.columns`); ``added`` and ``keys`` must have room for
    every distinct new position. Learning a fresh stream then costs one pass, not a pass,
    a look for new names and a second pass."""
    n_rows = len(indptr) - 1
    out_ptr = np.empty(n_rows + 1, np.int64)
    unordered = np.zeros(n_rows, np.bool_)
    n = 0
    n_added = 0
    out_ptr[0] = 0
    for i in range(n_rows):
        previous = np.iinfo(np.int64).min
        row_added = n_added
        for p in range(indptr[i], indptr[i + 1]):
            c = column_of[indices[p]]
            if c < 0 and grow:
                c = next_column + n_added
                column_of[indices[p]] = c
                keys[c] = indices[p]
                added[n_added] = indices[p]
                n_added += 1
            if c >= 0:
                out_idx[n] = c
                if copy_values:
                    out_val[n] = data[p]
                n += 1
                key = indices[p] if keys_are_positions else keys[c]
                if key < previous:  # the order check rides along: no second pass
                    unordered[i] = True
                previous = key
        if unordered[i] and n_added - row_added > 1:  # new names of a row enter in key order, whatever the row's
            _renumber_in_key_order(added[row_added:n_added], column_of, keys, next_column + row_added)
            for p in range(indptr[i], indptr[i + 1]):  # with grow every entry is kept, in place
                out_idx[out_ptr[i] + p - indptr[i]] = column_of[indices[p]]
        out_ptr[i + 1] = n
    values_copied = copy_values
    for i in range(n_rows):
        if unordered[i]:
            if not values_copied:
                out_val[:n] = data[:n]
                values_copied = True
            sort_rows_by_key(out_ptr[i : i + 2], out_idx, out_val, keys)
    return out_ptr, n, n_added, values_copied


@njit(cache=True, nogil=True)
def check_csr(indptr, indices, data, width):
    """Check a CSR batch's arrays in one pass: ``(status, entry, needed)``.

    ``status`` 0: valid, and ``needed`` is one more than the largest column index (0 for
    no entries); 1: the row pointers do not run from 0 to the number of entries without
    decreasing (``entry`` -1); 2: ``indices[entry]`` is outside ``0..width-1``; 3:
    ``data[entry]`` is NaN, infinite or beyond ``LARGEST_VALUE``. The first fault in entry order is reported."""
    n_rows = len(indptr) - 1
    nnz = len(indices)
    if n_rows < 0 or indptr[0] != 0 or indptr[n_rows] != nnz or len(data) != nnz:
        return 1, -1, 0
    for i in range(n_rows):
        if indptr[i + 1] < indptr[i]:
            return 1, -1, 0
    needed = 0
    for p in range(nnz):
        j = indices[p]
        if j < 0 or j >= width:
            return 2, p, 0
        if not abs(data[p]) <= LARGEST_VALUE:  # NaN, infinite or too large
            return 3, p, 0
        if j >= needed:
            needed = j + 1
    return 0, -1, needed
