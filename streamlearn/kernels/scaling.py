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
    for p in range(indptr[i], indptr[i + 1]):
        j = indices[p]
        sums[j] += data[p]
        squares[j] += data[p] * data[p]
    return n + 1


@njit(cache=True, nogil=True)
def bin_rows(indptr, indices, data, sums, squares, n_seen, learn, n_bins, half_range, max_nonzeros, binned_columns,
             values, last_column, out_indptr, out_indices, out_data):
    """Each CSR row over model columns, followed by the bins of its nonzero entries (see
    :mod:`streamlearn.binning`), then, unless ``last_column`` is negative, by ``last_column`` at
    ``values[i]`` (the intercept's entry): feature column ``j`` becomes ``j + min(j, binned_columns)
    n_bins``, and, for ``j < binned_columns``, entry ``p``'s interval of ``n_bins`` over
    ``[-half_range, half_range]``, from its value standardised by the running ``sums`` and
    ``squares`` of the ``n_seen`` rows before it (:func:`standardized`), column ``j (n_bins + 1) +
    1 + interval``, at ``values[i]``; a row of more than ``max_nonzeros`` nonzero values has no bins
    (and its values are not standardised). With ``learn``, each row enters the statistics once
    binned. Returns the entries written."""
    width = 2.0 * half_range / n_bins
    stride = n_bins + 1
    n = n_seen
    n_out = 0
    out_indptr[0] = 0
    for i in range(len(indptr) - 1):
        lo, hi = indptr[i], indptr[i + 1]
        nonzeros = 0
        for p in range(lo, hi):
            out_indices[n_out] = indices[p] + min(indices[p], binned_columns) * n_bins
            out_data[n_out] = data[p]
            n_out += 1
            if data[p] != 0.0:
                nonzeros += 1
        if nonzeros <= max_nonzeros:
            for p in range(lo, hi):
                j = indices[p]
                if data[p] == 0.0 or j >= binned_columns:  # an absent feature has no bin
                    continue
                z = min(max(standardized(data[p], sums[j], squares[j], n), -half_range), half_range)
                out_indices[n_out] = j * stride + 1 + min(int(np.floor((z + half_range) / width)), n_bins - 1)
                out_data[n_out] = values[i]
                n_out += 1
        if last_column >= 0:
            out_indices[n_out] = last_column
            out_data[n_out] = values[i]
            n_out += 1
        out_indptr[i + 1] = n_out
        if learn:
            n = _enter(indptr, indices, data, sums, squares, n, i)
    return n_out
