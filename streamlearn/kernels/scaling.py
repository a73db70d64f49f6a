"""The online standardiser's kernel (see :mod:`streamlearn.scaling`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def standardize_rows(indptr, indices, data, sums, squares, n_seen, learn, out):
    """Write each entry of CSR rows as ``(x - mean_j) / std_j`` into ``out`` (the layout of
    ``data``); with ``learn``, each row first enters the running sums, so a row is scaled by
    the statistics of every row up to and including it. Means and variances count an absent
    feature as 0 (``n_seen`` rows in all); a feature of (near) zero variance is only centred.
    Returns the new ``n_seen``."""
    n = n_seen
    for i in range(len(indptr) - 1):
        lo, hi = indptr[i], indptr[i + 1]
        if learn:
            n += 1
            for p in range(lo, hi):
                j = indices[p]
                sums[j] += data[p]
                squares[j] += data[p] * data[p]
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
    return n
