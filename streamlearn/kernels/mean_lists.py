"""Kernels of the inverted lists of :class:`~streamlearn.memoir.means.MeanExampleIndex`: which
classes each coarse list holds, kept in place as classes move between lists, and the scan of
a row's probed lists for its best classes by the cosine of their mean examples.

A list's members sit in one segment of a shared pool (``start``, ``length``, ``capacity`` per
list; ``slot[k]``: class ``k``'s place, ``list_of[k]``: its list, -1 when not indexed). A class
leaves a list by taking the place of the list's last member, and joins one at its end; a full
list moves to the end of the pool with twice its room (the caller compacts the pool when moved
lists leave half of it behind). The order within a list is a function of the moves alone, so
a saved index restores the same scans.

The scan reads each member's **sum** of examples and its inverse norm: the cosine without a copy
of the directions (the index's memory is the sums, float32, and the pool's ids).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .memory import prefetch_row

#: members ahead of the one scanned whose sums are asked for (they sit anywhere in the sums)
_PREFETCH_AHEAD = 4


@njit(cache=True, nogil=True)
def inverse_norms(sums, classes, width, out):
    """``out[k] = 1 / ‖sums[k, :width]‖`` for ``k`` in ``classes`` (0 for a zero sum), summed in
    float64 over the columns in order."""
    for k in classes:
        s = 0.0
        for j in range(width):
            s += float(sums[k, j]) ** 2
        out[k] = 1.0 / np.sqrt(s) if s > 0.0 else 0.0


@njit(cache=True, nogil=True)
def place(classes, lists, list_of, slot, members, start, length, capacity, pool_end):
    """Put each class of ``classes`` in its list of ``lists`` (moving it out of its old one).
    Returns ``(done, pool_end)``: the classes placed, fewer than ``len(classes)`` when the pool
    had no room left for a list that had to move (the caller grows the pool and goes on)."""
    for i in range(len(classes)):
        k, target = classes[i], lists[i]
        old = list_of[k]
        if old == target:
            continue
        if length[target] == capacity[target]:
            room = max(4, 2 * capacity[target])
            if pool_end + room > len(members):
                return i, pool_end
            members[pool_end : pool_end + length[target]] = members[start[target] : start[target] + length[target]]
            for p in range(pool_end, pool_end + length[target]):
                slot[members[p]] = p
            start[target], capacity[target] = pool_end, room
            pool_end += room
        if old >= 0:
            last = start[old] + length[old] - 1
            moved = members[last]
            members[slot[k]] = moved
            slot[moved] = slot[k]
            length[old] -= 1
        p = start[target] + length[target]
        members[p] = k
        slot[k] = p
        length[target] += 1
        list_of[k] = target
    return len(classes), pool_end


@njit(cache=True, nogil=True)
def insert_top(ids, scores, row, n, k, s):
    """Put ``k`` of score ``s`` in the row's top ``n`` (largest first; a tie stays behind)."""
    if s <= scores[row, n - 1]:
        return
    q = n - 1
    while q > 0 and s > scores[row, q - 1]:
        ids[row, q], scores[row, q] = ids[row, q - 1], scores[row, q - 1]
        q -= 1
    ids[row, q], scores[row, q] = k, s


# fastmath: LLVM vectorizes the float32 sums (in the compiled loop's order: the same for a row in any batch)
@njit(cache=True, nogil=True, fastmath=True)
def scan(queries, probed, sums, inv_norms, members, start, length, n, out, best):
    """The ``n`` members of each row's ``probed`` lists (-1: none) of largest cosine
    ``(sums[k] · q) / ‖sums[k]‖`` (float32) into
    ``out`` (largest first, a tie behind the class found first; -1 pads), their cosines in
    ``best``."""
    d = queries.shape[1]
    for row in range(queries.shape[0]):
        for q in range(n):
            out[row, q], best[row, q] = -1, -np.inf
        for l in probed[row]:
            if l < 0:
                continue
            lo, hi = start[l], start[l] + length[l]
            for p in range(lo, min(hi, lo + _PREFETCH_AHEAD)):
                prefetch_row(sums, members[p])
            for p in range(lo, hi):
                if p + _PREFETCH_AHEAD < hi:
                    prefetch_row(sums, members[p + _PREFETCH_AHEAD])
                k = members[p]
                s = np.float32(0.0)
                for j in range(d):
                    s += sums[k, j] * queries[row, j]
                s *= inv_norms[k]
                if s > best[row, n - 1]:  # the call only when it inserts: in the loop it keeps the sum from vectorizing
                    insert_top(out, best, row, n, k, s)


@njit(cache=True, nogil=True)
def add_rows(indptr, indices, data, y, sums, changed):
    """``sums[y[i]] += row i`` for CSR rows (``indptr`` from 0), in row order; ``changed[y[i]]`` set."""
    for i in range(len(indptr) - 1):
        for p in range(indptr[i], indptr[i + 1]):
            sums[y[i], indices[p]] += data[p]
        changed[y[i]] = True
