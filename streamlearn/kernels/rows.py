"""Row-ordering kernel for CSR batches."""

from __future__ import annotations

import numpy as np
from numba import njit


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
