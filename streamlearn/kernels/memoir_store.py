"""The class-row store of the extreme-classification learner (002_d116c1700f27e6e6.txt, MEMOIR):
finding, adding and compacting its weights, and the exact scan over it.

**The store** (the named tuple :class:`ClassRowStore`; :class:`streamlearn.memoir.store.SparseClassRows` owns it). Only
touched weights exist. Weight ``(k, j)`` has a stable id (``cls[id] = k``, ``col[id] = j``) found
by a hash table (``table``: id or -1; open addressing, linear probing) and a place in the
*pool*: column ``j``'s weights lie together at ``pool[col_start[j] : col_start[j] + col_len[j]]``
(``pool_cls``, ``pool_val`` — the value of ``V`` — and ``pool_avg``, the averaged iterate's
correction; ``pool_id`` and ``pos[id]`` link the two). An exact scan of a row reads, for each of
its columns, one contiguous run of (class, value) pairs: the inverted index at memory speed. A
column that fills its room moves to the pool's end with twice the room (``POOL_WASTE`` counts
what it left); a compaction rewrites the pool, dropping the weights ℓ1 truncation set to 0. A
chain per class (``class_head[k]``, ``next_class[id]``) lists a row, for truncation and sketches.

The weights are ``W = g · V`` with one global scale ``g`` (``scalars[G]``): the Pegasos shrink
``W ← (1 − 1/t) W`` (002 Alg. 1 line 4) is one multiplication, never a pass over the rows, and a
uniform rescale never changes an argmax. ``scalars`` holds, by index: ``G``; ``SQ`` = ``Σ V²``
(the Frobenius norm for the projection, Alg. 1 line 9); ``A``, the averaged iterate's running
coefficient; ``AW``, the sum of the steps' weights in the average. ``counts`` holds ``N_USED``
ids in use, ``N_ZERO`` stored weights of value 0 (truncation's, until a compaction drops them), ``POOL_END`` the pool's first free place,
``POOL_WASTE`` places left behind by moved columns.

**The averaged iterate** (as :mod:`streamlearn.kernels.scaled`, with one global coefficient):
``Σ_s c_s W_s = U + A · V``; a change ``δ`` of ``V`` costs ``U −= A δ``; after step ``s``,
``A += c_s g``; the average is ``(U + A V) / Σ_s c_s``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit



G, SQ, A, AW = 0, 1, 2, 3
N_USED, N_ZERO, POOL_END, POOL_WASTE = 0, 1, 2, 3
#: the room a column gets when it first appears in the pool
FIRST_ROOM = 4
MIX_CLASS = np.uint64(0x9E3779B97F4A7C15)
MIX_COL = np.uint64(0xC2B2AE3D27D4EB4F)


class ClassRowStore(NamedTuple):
    """The store's arrays, by name (the kernels read them as ``store.pool_val``, never by position)."""

    table: np.ndarray
    cls: np.ndarray
    col: np.ndarray
    pos: np.ndarray
    next_class: np.ndarray
    class_head: np.ndarray
    pool_id: np.ndarray
    pool_cls: np.ndarray
    pool_val: np.ndarray
    pool_avg: np.ndarray
    col_start: np.ndarray
    col_len: np.ndarray
    col_cap: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def _home(k, j, mask):
    h = np.uint64(k) * MIX_CLASS ^ np.uint64(j) * MIX_COL
    return np.int64((h ^ (h >> np.uint64(29))) & np.uint64(mask))


@njit(cache=True, nogil=True)
def find(store, k, j):
    """The id of weight ``(k, j)``, or -1."""
    table, cls, col = store.table, store.cls, store.col
    mask = len(table) - 1
    h = _home(k, j, mask)
    while True:
        e = table[h]
        if e < 0:
            return -1
        if cls[e] == k and col[e] == j:
            return e
        h = (h + 1) & mask


@njit(cache=True, nogil=True)
def _move_column(store, counts, j, room):
    """Move column ``j``'s weights to the pool's end, with room for ``room``."""
    table, cls, col, pos, next_class, class_head, pool_id, pool_cls, pool_val, pool_avg, col_start, col_len, col_cap = store
    start, n = col_start[j], col_len[j]
    new = counts[POOL_END]
    for q in range(n):
        e = pool_id[start + q]
        pool_id[new + q], pool_cls[new + q], pool_val[new + q] = e, pool_cls[start + q], pool_val[start + q]
        if len(pool_avg):
            pool_avg[new + q] = pool_avg[start + q]
        pos[e] = new + q
    counts[POOL_WASTE] += col_cap[j]
    col_start[j], col_cap[j] = new, room
    counts[POOL_END] = new + room


@njit(cache=True, nogil=True)
def find_or_add(store, counts, k, j):
    """The id of weight ``(k, j)``, added (value 0) if absent; the caller guarantees room:
    id arrays longer than ``counts[N_USED]``, the table at most half full, and in the pool
    ``needed_room`` places beyond ``counts[POOL_END]``."""
    table, cls, col, pos, next_class, class_head, pool_id, pool_cls, pool_val, pool_avg, col_start, col_len, col_cap = store
    mask = len(table) - 1
    h = _home(k, j, mask)
    while True:
        e = table[h]
        if e < 0:
            break
        if cls[e] == k and col[e] == j:
            return e
        h = (h + 1) & mask
    e = counts[N_USED]
    counts[N_USED] = e + 1
    table[h] = e
    cls[e], col[e] = k, j
    next_class[e] = class_head[k]
    class_head[k] = e
    if col_len[j] == col_cap[j]:
        _move_column(store, counts, j, max(FIRST_ROOM, 2 * col_cap[j]))
    p = col_start[j] + col_len[j]
    col_len[j] += 1
    pool_id[p], pool_cls[p], pool_val[p] = e, k, 0.0
    if len(pool_avg):
        pool_avg[p] = 0.0
    pos[e] = p
    return e


@njit(cache=True, nogil=True)
def needed_room(store, indptr, indices, first_row, n_rows):
    """Pool places that adding every column of these rows to two classes could take at most
    (each column may move twice, to twice its room, and then hold two more)."""
    col_cap = store.col_cap
    total = 0
    for p in range(indptr[first_row], indptr[first_row + n_rows]):
        j = indices[p]
        total += 2 * (4 * max(col_cap[j], FIRST_ROOM) + 2)
    return total


@njit(cache=True, nogil=True)
def rebuild_table(store, n_used):
    """The hash table and the class chains from the id arrays (after a resize or a compaction);
    ids are inserted in increasing order, so the same ids give the same table."""
    table, cls, col, next_class, class_head = store.table, store.cls, store.col, store.next_class, store.class_head
    table[:] = -1
    class_head[:] = -1
    mask = len(table) - 1
    for e in range(n_used):
        h = _home(cls[e], col[e], mask)
        while table[h] >= 0:
            h = (h + 1) & mask
        table[h] = e
        next_class[e] = class_head[cls[e]]
        class_head[cls[e]] = e


@njit(cache=True, nogil=True)
def compact(store, counts, new_pool_id, new_pool_cls, new_pool_val, new_pool_avg, n_columns):
    """Rewrite the pool into the ``new_pool_*`` arrays, column by column, without the weights
    that are 0 in value and in average correction, each column with room ``max(FIRST_ROOM,
    len + len // 2)``; ids are given anew in pool order. Returns the new number of ids; the
    caller swaps the arrays in and rebuilds the table (:func:`rebuild_table`)."""
    table, cls, col, pos, next_class, class_head, pool_id, pool_cls, pool_val, pool_avg, col_start, col_len, col_cap = store
    averaged = len(pool_avg) > 0
    end = 0
    n_ids = 0
    n_zero = 0  # kept with value 0: an averaged correction keeps them
    for j in range(n_columns):
        start, n = col_start[j], col_len[j]
        col_start[j] = end
        kept = 0
        for q in range(n):
            v = pool_val[start + q]
            u = pool_avg[start + q] if averaged else 0.0
            if v == 0.0 and u == 0.0:
                continue
            p = end + kept
            new_pool_id[p], new_pool_cls[p], new_pool_val[p] = n_ids, pool_cls[start + q], v
            if averaged:
                new_pool_avg[p] = u
            n_zero += v == 0.0
            cls[n_ids], col[n_ids], pos[n_ids] = pool_cls[start + q], j, p
            n_ids += 1
            kept += 1
        col_len[j] = kept
        col_cap[j] = max(FIRST_ROOM, kept + kept // 2) if kept else 0
        end += col_cap[j]
    counts[N_USED], counts[N_ZERO], counts[POOL_END], counts[POOL_WASTE] = n_ids, n_zero, end, 0
    return n_ids


@njit(cache=True, nogil=True)
def exact_scores(indptr, indices, data, row, store, n_classes, scores, mark, stamp, touched):
    """``scores[k] = (V x)_k`` by the inverted index: one contiguous run of the pool per
    column of row ``row``. Two ways, by the run lengths: when they sum to more than
    ``n_classes``, every score ``scores[0 : n_classes]`` is written (dense; returns -1): a
    scattered add per entry without book-keeping, then scans of ``K`` contiguous scores are
    cheaper; otherwise only the classes the runs reach are written, listed in ``touched`` and
    marked ``mark[k] = stamp`` (returns how many), every other class scoring 0. Either way each
    class's terms are summed in the same order."""
    pool_cls, pool_val, col_start, col_len = store.pool_cls, store.pool_val, store.col_start, store.col_len
    scan = 0
    for p in range(indptr[row], indptr[row + 1]):
        if indices[p] < len(col_len):
            scan += col_len[indices[p]]
    if scan > n_classes:  # (the two roads repeat their loop head on purpose: this one's inner loop has no branch)
        scores[:n_classes] = 0.0
        for p in range(indptr[row], indptr[row + 1]):
            j = indices[p]
            if j >= len(col_len):
                continue
            x = data[p]
            start = col_start[j]
            for q in range(start, start + col_len[j]):  # every class in the pool exists: no bound to check
                scores[pool_cls[q]] += x * pool_val[q]
        return -1
    n_touched = 0
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        if j >= len(col_len):
            continue
        x = data[p]
        start = col_start[j]
        for q in range(start, start + col_len[j]):
            k = pool_cls[q]
            if k < n_classes:
                if mark[k] != stamp:
                    mark[k] = stamp
                    touched[n_touched] = k
                    n_touched += 1
                    scores[k] = x * pool_val[q]
                else:
                    scores[k] += x * pool_val[q]
    return n_touched


@njit(cache=True, nogil=True)
def sparse_dot(indptr, indices, data, row, store, k, of_average):
    """``(V x)_k`` (``of_average``: ``(U x)_k``) for one class by hash look-ups."""
    pos = store.pos
    values = store.pool_avg if of_average else store.pool_val
    s = 0.0
    for p in range(indptr[row], indptr[row + 1]):
        if indices[p] >= len(store.col_len):
            continue
        e = find(store, k, indices[p])
        if e >= 0:
            s += data[p] * values[pos[e]]
    return s
