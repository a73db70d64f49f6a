"""The online standardiser's kernel (see :mod:`streamlearn.scaling`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def standardize_rows(indptr, indices, data, sums, squares, n_seen, learn, out):
    """Write each entry of CSR rows as ``(x - mean_j) / std_j`` into ``out`` (the layout of
    ``data``); with ``learn``, each row first enters the running sums (a row is scaled by the
    statistics of every row up to and including it). Means and variances count an absent feature
    as 0 (``n_seen`` rows in all); a feature of (near) zero variance is only centred
    (:func:`standardized`). Returns the new ``n_seen``."""
    n = n_seen
    for i in range(len(indptr) - 1):
        if learn:
            n = _enter(indptr, indices, data, sums, squares, n, i)
        for p in range(indptr[i], indptr[i + 1]):
            out[p] = standardized(data[p], sums[indices[p]], squares[indices[p]], n)
    return n


@njit(cache=True, nogil=True)
def standardized(x, total, square, n):
    """``x`` standardised by a feature's running ``total`` and ``square`` over ``n`` rows: ``(x - mean) / std``,
    only centred at (near) zero variance; a zero (an absent feature: it sits at the mean, rows stay sparse)
    and any value before the first row stay as they are."""
    if x == 0.0:
        return 0.0
    if n == 0:
        return x
    mean = total / n
    variance = square / n - mean * mean
    if variance > 1e-12 * (square / n):
        return (x - mean) / np.sqrt(variance)
    return x - mean


@njit(cache=True, nogil=True)
def _enter(indptr, indices, data, sums, squares, n, i):
    """Row ``i`` into the running sums; returns the rows counted."""
    enter_entries(indices, data, indptr[i], indptr[i + 1], sums, squares)
    return n + 1


@njit(cache=True, nogil=True)
def enter_entries(indices, data, lo, hi, sums, squares):
    """Entries ``lo .. hi - 1`` (one row) into the running sums and sums of squares."""
    for p in range(lo, hi):
        j = indices[p]
        sums[j] += data[p]
        squares[j] += data[p] * data[p]


@njit(cache=True, nogil=True)
def bin_rows(indptr, indices, data, sums, squares, n_seen, learn, n_bins, half_range, max_nonzeros, binned_columns,
             values, last_column, out_indptr, out_indices, out_data):
    """Each CSR row over model columns, followed by the bins of its nonzero entries (see
    :mod:`streamlearn.binning`), then, unless ``last_column`` is negative, by ``last_column`` at
    ``values[i]`` (the intercept's entry): each row copied out, then :func:`expand_row` in place,
    which with ``learn`` also enters it in the statistics. Returns the entries written."""
    n = n_seen
    n_out = 0
    out_indptr[0] = 0
    for i in range(len(indptr) - 1):
        start = n_out
        for p in range(indptr[i], indptr[i + 1]):
            out_indices[n_out] = indices[p]
            out_data[n_out] = data[p]
            n_out += 1
        n_out = expand_row(out_indices, out_data, start, n_out, sums, squares, n, learn, n_bins, half_range, max_nonzeros,
                           binned_columns, values[i], last_column)
        n += 1 if learn else 0
        out_indptr[i + 1] = n_out
    return n_out


@njit(cache=True, nogil=True)
def expand_row(out_indices, out_data, lo, hi, sums, squares, n_seen, learn, n_bins, half_range, max_nonzeros,
               binned_columns, value, last_column):
    """Entries ``lo .. hi - 1`` (one row over feature columns, each column once) turned in place
    into the row over model columns, its bins and the intercept's entry written from ``hi`` on:
    feature column ``j`` becomes ``j + min(j, binned_columns) n_bins``; for ``j < binned_columns``,
    entry ``p``'s interval of ``n_bins`` over ``[-half_range, half_range]``, from its value
    standardised by the running ``sums`` and ``squares`` of the ``n_seen`` rows before it
    (:func:`standardized`), column ``j (n_bins + 1) + 1 + interval``, at ``value``, unless the row
    has more than ``max_nonzeros`` nonzero values; then, unless ``last_column`` is negative,
    ``last_column`` at ``value``. With ``learn`` the row then enters the statistics. Returns the
    entries' end."""
    width = 2.0 * half_range / max(n_bins, 1)
    stride = n_bins + 1
    nonzeros = 0
    for p in range(lo, hi):
        if out_data[p] != 0.0:
            nonzeros += 1
    n_out = hi
    if nonzeros <= max_nonzeros:
        for p in range(lo, hi):
            j = out_indices[p]
            if out_data[p] == 0.0 or j >= binned_columns:  # an absent feature has no bin
                continue
            z = min(max(standardized(out_data[p], sums[j], squares[j], n_seen), -half_range), half_range)
            out_indices[n_out] = j * stride + 1 + min(int(np.floor((z + half_range) / width)), n_bins - 1)
            out_data[n_out] = value
            n_out += 1
    if learn:
        enter_entries(out_indices, out_data, lo, hi, sums, squares)
    for p in range(lo, hi):
        out_indices[p] += min(out_indices[p], binned_columns) * n_bins
    if last_column >= 0:
        out_indices[n_out] = last_column
        out_data[n_out] = value
        n_out += 1
    return n_out
