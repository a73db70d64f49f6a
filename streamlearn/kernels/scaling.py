"""The online standardiser's kernel (see :mod:`streamlearn.scaling`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def standardize_rows(indptr, indices, data, sums, squares, n_seen, learn, enter_after, out):
    """Write each entry of CSR rows as ``(x - mean_j) / std_j`` into ``out`` (the layout of
    ``data``); with ``learn``, each row enters the running sums, first (a row is scaled by the
    statistics of every row up to and including it) or, with ``enter_after``, once scaled (by the
    rows before it). Means and variances count an absent feature as 0 (``n_seen`` rows in all);
    a feature of (near) zero variance is only centred. Returns the new ``n_seen``."""
    n = n_seen
    for i in range(len(indptr) - 1):
        lo, hi = indptr[i], indptr[i + 1]
        if learn and not enter_after:
            n = _enter(indptr, indices, data, sums, squares, n, i)
        for p in range(lo, hi):
            j = indices[p]
            if n == 0 or data[p] == 0.0:  # a zero is an absent feature: both sit at the mean (rows stay sparse)
                out[p] = 0.0 if data[p] == 0.0 else data[p]
                continue
            mean = sums[j] / n
            variance = squares[j] / n - mean * mean
            if variance > 1e-12 * (squares[j] / n):
                out[p] = (data[p] - mean) / np.sqrt(variance)
            else:
                out[p] = data[p] - mean
        if learn and enter_after:
            n = _enter(indptr, indices, data, sums, squares, n, i)
    return n


@njit(cache=True, nogil=True)
def _enter(indptr, indices, data, sums, squares, n, i):
    """Row ``i`` into the running sums; returns the rows counted."""
    for p in range(indptr[i], indptr[i + 1]):
        j = indices[p]
        sums[j] += data[p]
        squares[j] += data[p] * data[p]
    return n + 1


@njit(cache=True, nogil=True)
def bin_rows(indptr, indices, data, scaled, n_bins, half_range, max_nonzeros, binned_columns, values, out_indptr,
             out_indices, out_data):
    """Each CSR row over model columns, followed by the bins of its nonzero entries (see
    :mod:`streamlearn.binning`): feature column ``j`` becomes ``j + min(j, binned_columns) n_bins``,
    and, for ``j < binned_columns``, entry ``p``'s interval of ``n_bins`` over ``[-half_range,
    half_range]``, from its standardised value ``scaled[p]``, column ``j (n_bins + 1) + 1 +
    interval``, at row ``i``'s ``values[i]``; a row of more than ``max_nonzeros`` nonzero values has
    no bins. Returns the entries written."""
    width = 2.0 * half_range / n_bins
    stride = n_bins + 1
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
        if nonzeros > max_nonzeros:
            out_indptr[i + 1] = n_out
            continue
        for p in range(lo, hi):
            if data[p] == 0.0 or indices[p] >= binned_columns:  # an absent feature has no bin
                continue
            z = min(max(scaled[p], -half_range), half_range)
            interval = min(int(np.floor((z + half_range) / width)), n_bins - 1)
            out_indices[n_out] = indices[p] * stride + 1 + interval
            out_data[n_out] = values[i]
            n_out += 1
        out_indptr[i + 1] = n_out
    return n_out
