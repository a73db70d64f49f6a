"""Kernels on a lazily scaled, feature-major weight matrix.

The weights of class ``k`` are ``W[:, k] = scale[k] * V[:, k]`` with ``V`` stored
feature-major (``V[j, :]`` holds feature ``j``'s weight for every class, contiguous), so
scoring a sparse row against all classes streams through ``nnz`` contiguous rows, and
the Pegasos shrink ``W <- (1 - 1/t) W`` (000_9ee2d88cd77f9d98.txt, Alg. 1 line 5) is a
multiplication of ``scale`` only: O(K), never O(d K).

Averaged iterate (Xu 2011's lazy trick, applied per class): the running sum
``S = sum_s c_s W_s`` is kept as ``S[:, k] = U[:, k] + A[k] * V[:, k]``. A sparse change
``delta`` of ``V`` costs ``U -= A * delta`` (O(nnz)); at the end of step ``s``,
``A += c_s scale``; renormalising ``V <- scale * V`` first folds ``A V`` into ``U`` and
zeroes ``A``. The average is ``S / sum_s c_s`` (``c_s = 1``: the plain average ``S / t``).

Only plain arrays and scalars here: no Python objects, no I/O.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def row_dots(indptr, indices, data, row, M, n_classes, out):
    """``out[k] = sum_p data[p] * M[indices[p], k]`` over the entries of one CSR row.

    Columns at or beyond ``M.shape[0]`` are skipped (features the model has never
    learned have zero weight). Entries are taken eight at a time: ``K`` is not known when
    this compiles, so the sums ``out[k]`` live in memory, and each pass over them waits
    for the previous pass's stores; eight entries per pass (in a balanced tree of sums)
    shorten that chain eightfold (four at a time measured ~15-25 % faster than one on
    MNIST and sector, eight ~9 % faster than four on MNIST and ~16 % on news20). The
    grouping is fixed: the same rows give the same bits on every path."""
    for k in range(n_classes):
        out[k] = 0.0
    n_features = M.shape[0]
    p, end = indptr[row], indptr[row + 1]
    while p < end:
        if p + 7 < end:
            j0, j1, j2, j3 = indices[p], indices[p + 1], indices[p + 2], indices[p + 3]
            j4, j5, j6, j7 = indices[p + 4], indices[p + 5], indices[p + 6], indices[p + 7]
            if max(max(max(j0, j1), max(j2, j3)), max(max(j4, j5), max(j6, j7))) < n_features:
                v0, v1, v2, v3 = data[p], data[p + 1], data[p + 2], data[p + 3]
                v4, v5, v6, v7 = data[p + 4], data[p + 5], data[p + 6], data[p + 7]
                for k in range(n_classes):
                    out[k] += (((v0 * M[j0, k] + v1 * M[j1, k]) + (v2 * M[j2, k] + v3 * M[j3, k]))
                               + ((v4 * M[j4, k] + v5 * M[j5, k]) + (v6 * M[j6, k] + v7 * M[j7, k])))
                p += 8
                continue
        j = indices[p]
        if j < n_features:
            v = data[p]
            for k in range(n_classes):
                out[k] += v * M[j, k]
        p += 1


@njit(cache=True, nogil=True)
def scores_batch(indptr, indices, data, V, scale, U, A, total_weight, n_classes, averaged, out):
    """Class scores ``x . w_k`` of every row of a CSR batch into ``out[n_rows, K]``.

    With ``averaged`` the scores are those of the averaged iterate ``(U + A V) / total_weight``
    (the last iterate while ``total_weight`` is 0: no step yet)."""
    n_rows = len(indptr) - 1
    tmp = np.empty(n_classes)
    for i in range(n_rows):
        row_dots(indptr, indices, data, i, V, n_classes, out[i])
        if averaged and total_weight > 0:
            row_dots(indptr, indices, data, i, U, n_classes, tmp)
            for k in range(n_classes):
                out[i, k] = (tmp[k] + A[k] * out[i, k]) / total_weight
        else:
            for k in range(n_classes):
                out[i, k] *= scale[k]


@njit(cache=True, nogil=True)
def add_to_column(V, sqnorm, U, A, averaged, track_norm, indptr, indices, data, row, k, coef):
    """``V[:, k] += coef * x_row``, keeping the average's ``U`` and, with ``track_norm``,
    ``sqnorm[k] = ||V[:, k]||^2`` (only the ball projection reads it; the running sum
    costs a dependent addition per entry)."""
    acc = sqnorm[k]
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        step = coef * data[p]
        old = V[j, k]
        new = old + step
        V[j, k] = new
        if track_norm:
            acc += new * new - old * old
        if averaged:
            U[j, k] -= A[k] * step
    if track_norm:
        sqnorm[k] = acc


@njit(cache=True, nogil=True)
def add_to_columns(V, sqnorm, U, A, averaged, track_norms, indptr, indices, data, row, classes, amounts, n_touched):
    """``V[:, classes[c]] += amounts[c] * x_row`` for ``c < n_touched`` (``classes``
    ascending), as :func:`add_to_column` class by class; every cell and norm gets the
    same operations in the same order whichever road is taken.

    Every class touched (softmax, one-vs-rest): one pass over the row's entries, each a
    contiguous update of ``V[j, :]`` (and ``U[j, :]``): one read of each cache line, not one
    per class (softmax learning 1.5-2.8x on news20 and MNIST). Otherwise class by class:
    for the two classes of an argmax loss, one pass with an inner loop over the classes
    measured 10-30 % slower than :func:`add_to_column` twice."""
    if not (n_touched > 2 and classes[n_touched - 1] == n_touched - 1):
        for c in range(n_touched):
            add_to_column(V, sqnorm, U, A, averaged, track_norms, indptr, indices, data, row, classes[c], amounts[c])
        return
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        v = data[p]
        if not (track_norms or averaged):
            for k in range(n_touched):
                V[j, k] += amounts[k] * v
            continue
        for k in range(n_touched):
            step = amounts[k] * v
            old = V[j, k]
            new = old + step
            V[j, k] = new
            if track_norms:
                sqnorm[k] += new * new - old * old
            if averaged:
                U[j, k] -= A[k] * step


@njit(cache=True, nogil=True)
def renormalize_columns(V, scale, sqnorm, U, A, averaged, n_features, n_classes, below):
    """Fold ``scale[k]`` into ``V[:, k]`` for every class with ``scale[k] < below``, in one
    feature-major pass over ``V`` (O(d K)); also recomputes their ``sqnorm`` exactly.

    One pass for all of them, not one per class: a column of the feature-major ``V`` is
    strided, so folding classes one by one reads every cache line of ``V`` once per class,
    and classes that share their shrink and projection (the Crammer-Singer learner's) reach
    the threshold at the same step. With an average, the running sum is folded into ``U``
    first (``U += A V``, ``A = 0``), so that ``A`` only ever sums the scales since the last
    renormalisation: ``U + A V`` then never cancels large terms."""
    folded = np.empty(n_classes, np.int64)
    m = 0
    for k in range(n_classes):
        if scale[k] < below:
            folded[m] = k
            sqnorm[k] = 0.0
            m += 1
    if m == 0:
        return
    for j in range(n_features):
        for i in range(m):
            k = folded[i]
            v = V[j, k]
            if averaged:
                U[j, k] += A[k] * v
            v *= scale[k]
            V[j, k] = v
            sqnorm[k] += v * v
    for i in range(m):
        k = folded[i]
        if averaged:
            A[k] = 0.0
        scale[k] = 1.0


@njit(cache=True, nogil=True)
def project_to_ball(scale, sqnorm, n_classes, radius, per_class):
    """Scale ``W`` onto the ball ``||W|| <= radius``: Frobenius ball of the whole matrix,
    or, with ``per_class``, each column onto its own ball (one-vs-rest Pegasos). O(K)."""
    r2 = radius * radius
    if per_class:
        for k in range(n_classes):
            norm2 = scale[k] * scale[k] * sqnorm[k]
            if norm2 > r2:
                scale[k] *= np.sqrt(r2 / norm2)
    else:
        norm2 = 0.0
        for k in range(n_classes):
            norm2 += scale[k] * scale[k] * sqnorm[k]
        if norm2 > r2:
            f = np.sqrt(r2 / norm2)
            for k in range(n_classes):
                scale[k] *= f
