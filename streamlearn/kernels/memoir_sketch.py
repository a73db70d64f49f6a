"""Count sketches of rows and class rows, and SimpleLSH codes over class rows: the approximate
max-inner-product oracles of the extreme-classification learner (002_d116c1700f27e6e6.txt, MEMOIR).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .memoir_store import MIX_CLASS, MIX_COL


# ----------------------------------------------------------------------------- sketches
@njit(cache=True, nogil=True, inline="always")
def _bucket(j, i, m):
    """Position and sign of column ``j`` in the ``i``-th of a count sketch's hashes."""
    h = (np.uint64(j) + np.uint64(i + 1) * MIX_CLASS) * MIX_COL
    h ^= h >> np.uint64(31)
    h *= MIX_CLASS
    sign = 1.0 if (h >> np.uint64(63)) == np.uint64(0) else -1.0
    return np.int64((h >> np.uint64(8)) % np.uint64(m)), sign


@njit(cache=True, nogil=True)
def sketch_rows(indptr, indices, data, n_hashes, out):
    """Count sketches of CSR rows: ``out[i] = Σ_j x_j · s_j`` with ``s_j`` the column's
    ``n_hashes`` signed positions scaled by ``1/sqrt(n_hashes)`` (a sparse random projection:
    inner products are preserved in expectation)."""
    m = out.shape[1]
    norm = 1.0 / np.sqrt(n_hashes)
    for i in range(len(indptr) - 1):
        out[i, :] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            for h in range(n_hashes):
                b, sign = _bucket(indices[p], h, m)
                out[i, b] += sign * norm * data[p]


@njit(cache=True, nogil=True)
def sketch_classes(classes, n_listed, store, n_hashes, S):
    """Recompute the sketches ``S[k]`` of the listed classes from their rows."""
    col, pos, next_class, class_head, pool_val = store.col, store.pos, store.next_class, store.class_head, store.pool_val
    m = S.shape[1]
    norm = 1.0 / np.sqrt(n_hashes)
    for q in range(n_listed):
        k = classes[q]
        S[k, :] = 0.0
        e = class_head[k]
        while e >= 0:
            v = pool_val[pos[e]]
            if v != 0.0:
                for h in range(n_hashes):
                    b, sign = _bucket(col[e], h, m)
                    S[k, b] += np.float32(sign * norm * v)
            e = next_class[e]


# ------------------------------------------------------------------------- SimpleLSH
@njit(cache=True, nogil=True)
def lsh_codes(vectors, listed, n_listed, planes, max_norm, codes):
    """SimpleLSH codes (Neyshabur & Srebro 2015, 002's MEMOIR-LSH): for each listed row
    ``v`` of ``vectors``, bit ``b`` of ``codes[k]`` is the sign of
    ``planes[b] · [v / M, sqrt(1 − ‖v‖² / M²)]`` (``M = max_norm`` bounds every ‖v‖)."""
    m = vectors.shape[1]
    for q in range(n_listed):
        k = listed[q]
        sq = 0.0
        for c in range(m):
            sq += np.float64(vectors[k, c]) ** 2
        tail = np.sqrt(max(0.0, 1.0 - sq / (max_norm * max_norm)))
        code = np.uint64(0)
        for b in range(planes.shape[0]):
            dot = planes[b, m] * tail
            for c in range(m):
                dot += planes[b, c] * vectors[k, c] / max_norm
            if dot >= 0.0:
                code |= np.uint64(1) << np.uint64(b)
        codes[k] = code


@njit(cache=True, nogil=True)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True, nogil=True)
def lsh_top(queries, planes, codes, n_classes, out):
    """For each query row (a sketch), the ``out.shape[1]`` classes below ``n_classes`` whose
    codes are nearest in Hamming distance to the query's code (the query is normalised and its
    SimpleLSH tail is 0; ties at the cut-off by class index; in no particular order: the
    learner re-ranks them exactly); -1 pads."""
    m = queries.shape[1]
    n_bits = planes.shape[0]
    want = out.shape[1]
    counts = np.zeros(n_bits + 2, np.int64)
    distance = np.empty(n_classes, np.int64)
    for i in range(queries.shape[0]):
        sq = 0.0
        for c in range(m):
            sq += np.float64(queries[i, c]) ** 2
        norm = np.sqrt(sq) if sq > 0 else 1.0
        code = np.uint64(0)
        for b in range(n_bits):
            dot = 0.0
            for c in range(m):
                dot += planes[b, c] * queries[i, c] / norm
            if dot >= 0.0:
                code |= np.uint64(1) << np.uint64(b)
        counts[:] = 0
        for k in range(n_classes):
            d = _popcount(code ^ codes[k])
            distance[k] = d
            counts[d] += 1
        cutoff, taken = 0, 0  # the smallest distance that, with the nearer ones, fills the list
        while cutoff <= n_bits and taken + counts[cutoff] < want:
            taken += counts[cutoff]
            cutoff += 1
        n = 0
        for k in range(n_classes):  # the nearer ones: fewer than wanted
            if distance[k] < cutoff:
                out[i, n] = k
                n += 1
        for k in range(n_classes):  # then those at the cut-off, by class index
            if n >= want:
                break
            if distance[k] == cutoff:
                out[i, n] = k
                n += 1
        for q in range(n, want):
            out[i, q] = -1
