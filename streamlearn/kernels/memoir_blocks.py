"""The dense store's exact scan of :mod:`.memoir_dense` (002_d116c1700f27e6e6.txt, MEMOIR-ℓ2:
the predicted class ``argmax_k (W x)_k``, Eq. (1)), :data:`BLOCK` rows at a time.

:func:`.memoir_dense.predict_rows` scores one row against every class, streaming all of ``V``
(classes × columns, megabytes) through the cache once per row. Here a block of rows is scattered
into a dense ``(columns, BLOCK)`` array and each class row of ``V`` is read once per block: the
inner loop runs across the block's rows, which the compiler vectorises without reordering any
sum. Each row's score is still summed per class in column order, ``0.0 * v`` adding nothing, so
for rows whose entries are in increasing column order (what the learner's encoding gives), or are
but for a last entry in one column before the others (the intercept's, appended to every row),
added last, the scores are those of :func:`.memoir_dense.class_scores`, bit for bit; a block with
another row is scored by that kernel, row by row. No BLAS: its sums follow the arrays' alignment, which a
restored model does not keep.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .memoir_dense import class_scores as dense_class_scores, predict_from_scores
from .memoir_store import AW, A, G

#: rows scored together (:func:`_class_sums` has one accumulator per row)
BLOCK = 16


@njit(cache=True, nogil=True)
def tail_column(indptr, indices, first, last):
    """How rows ``first .. last - 1`` are ordered: ``-1``, each row's entries in increasing column
    order; ``c >= 0``, the same but for each row's last entry, column ``c`` below the others (the
    intercept's entry, appended after a row's features: its column is the model's first); ``-2``,
    neither (the row kernel scores the block)."""
    increasing, tail, tail_ok = True, -1, True
    for row in range(first, last):
        lo, hi = indptr[row], indptr[row + 1]
        for p in range(lo + 1, hi - 1):  # all but the last entry: in order either way
            if indices[p] <= indices[p - 1]:
                return -2
        if hi - lo > 1 and indices[hi - 1] <= indices[hi - 2]:
            increasing = False
        if hi > lo:
            tail = indices[hi - 1] if tail < 0 else tail
            tail_ok = tail_ok and indices[hi - 1] == tail and (hi - lo == 1 or indices[lo] > tail)
        if not increasing and not tail_ok:
            return -2
    return -1 if increasing else tail


@njit(cache=True, nogil=True)
def _block_scores(V, U, scalars, indptr, indices, data, first, last, n_classes, both, tail, rows, sv, su, out):
    """``out[r, k]``: the predicting iterate's score of row ``first + r`` (``r < last - first``);
    ``tail >= 0``: each row's last entry is column ``tail``, added after the others, in entry order."""
    wv, wu = V.shape[1], U.shape[1]
    width = max(wv, wu) if both else wv
    used = 0  # rows[:used] is this block's, zeroed as it grows
    tail_x = np.zeros(BLOCK)
    for row in range(first, last):
        stop = indptr[row + 1]
        if tail >= 0 and stop > indptr[row]:
            stop -= 1
            tail_x[row - first] = data[stop]
        for p in range(indptr[row], stop):
            j = indices[p]
            if j < width:
                if j >= used:
                    rows[used : j + 1, :] = 0.0
                    used = j + 1
                rows[j, row - first] = data[p]
    for k in range(n_classes):
        _class_sums(V, k, rows, min(used, wv), sv)
        if both:
            _class_sums(U, k, rows, min(used, wu), su)
        if tail >= 0:
            for r in range(last - first):
                if indptr[first + r + 1] > indptr[first + r]:
                    if tail < wv:
                        sv[r] += V[k, tail] * tail_x[r]
                    if both and tail < wu:
                        su[r] += U[k, tail] * tail_x[r]
        for r in range(last - first):
            out[r, k] = (su[r] + scalars[A] * sv[r]) / scalars[AW] if both else scalars[G] * sv[r]


@njit(cache=True, nogil=True)
def _class_sums(M, k, rows, n, sums):
    """``sums[r] = Σ_{j<n} M[k, j] rows[j, r]`` for the block's rows, each in column order (one
    accumulator per row, held in registers, not an array the loop would store to)."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = s8 = s9 = s10 = s11 = s12 = s13 = s14 = s15 = 0.0
    for j in range(n):
        v = np.float64(M[k, j])
        x = rows[j]
        s0 += v * x[0]
        s1 += v * x[1]
        s2 += v * x[2]
        s3 += v * x[3]
        s4 += v * x[4]
        s5 += v * x[5]
        s6 += v * x[6]
        s7 += v * x[7]
        s8 += v * x[8]
        s9 += v * x[9]
        s10 += v * x[10]
        s11 += v * x[11]
        s12 += v * x[12]
        s13 += v * x[13]
        s14 += v * x[14]
        s15 += v * x[15]
    sums[0], sums[1], sums[2], sums[3], sums[4], sums[5], sums[6], sums[7] = s0, s1, s2, s3, s4, s5, s6, s7
    sums[8], sums[9], sums[10], sums[11], sums[12], sums[13], sums[14], sums[15] = s8, s9, s10, s11, s12, s13, s14, s15
    return 0


@njit(cache=True, nogil=True)
def _scored_block(indptr, indices, data, V, U, scalars, n_classes, averaged, first, last, rows, sv, su, out):
    """``out[:last - first]``: rows ``first`` to ``last``'s scores (by the row kernel when a row's
    entries are not in increasing column order)."""
    tail = tail_column(indptr, indices, first, last)
    if tail >= -1:
        both = averaged and scalars[AW] > 0
        _block_scores(V, U, scalars, indptr, indices, data, first, last, n_classes, both, tail, rows, sv, su, out)
    else:
        dense_class_scores(indptr[first : last + 1] - indptr[first], indices[indptr[first] : indptr[last]],
                           data[indptr[first] : indptr[last]], V, U, scalars, n_classes, averaged, out)


@njit(cache=True, nogil=True)
def class_scores(indptr, indices, data, V, U, scalars, n_classes, averaged, scores):
    """:func:`.memoir_dense.class_scores` (every row's score of every class), bit for bit, in blocks of rows."""
    rows = np.empty((max(V.shape[1], U.shape[1]), BLOCK))
    sv, su = np.empty(BLOCK), np.empty(BLOCK)
    for first in range(0, len(indptr) - 1, BLOCK):
        last = min(first + BLOCK, len(indptr) - 1)
        _scored_block(indptr, indices, data, V, U, scalars, n_classes, averaged, first, last, rows, sv, su,
                      scores[first:last])


@njit(cache=True, nogil=True)
def predict_rows(indptr, indices, data, V, U, scalars, n_classes, averaged, y, predicted, p_true):
    """:func:`.memoir_dense.predict_rows`' exact scan (no candidates), the same predicted classes
    (ties to the lowest index) and probabilities of ``y``, bit for bit, in blocks of rows."""
    n_rows = len(indptr) - 1
    rows = np.empty((max(V.shape[1], U.shape[1]), BLOCK))
    sv, su = np.empty(BLOCK), np.empty(BLOCK)
    out = np.empty((BLOCK, max(n_classes, 1)))
    for first in range(0, n_rows, BLOCK):
        last = min(first + BLOCK, n_rows)
        if n_classes == 0:
            for row in range(first, last):
                predicted[row] = -1
                if len(y):
                    p_true[row] = 0.0
            continue
        _scored_block(indptr, indices, data, V, U, scalars, n_classes, averaged, first, last, rows, sv, su, out)
        for row in range(first, last):
            predict_from_scores(out[row - first], n_classes, y, row, predicted, p_true)
