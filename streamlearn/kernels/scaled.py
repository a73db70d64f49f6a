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
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


def _class_block_dots(n_vectors: int):
    """An intrinsic writing ``out[c : c + 4·n_vectors]`` (``c`` = its ``first`` argument) =
    ``sum_p data[p] * M[indices[p], c : c + 4·n_vectors]`` over one CSR row's entries, skipping
    columns at or beyond ``M.shape[0]``, with the class sums held in ``n_vectors`` vector
    registers of four doubles for the whole row (LLVM IR: numba cannot keep ``K`` sums in
    registers when ``K`` is a run-time value, and kept them in memory, each entry's pass over
    them waiting on the previous one's stores). Each sum adds its terms in entry order with a
    separate multiply and add (no fused multiply-add), exactly as a plain loop does.

    ``M`` must be C-contiguous with at least ``c + 4·n_vectors`` columns, ``out`` at least as long."""
    vector = ir.VectorType(ir.DoubleType(), 4)
    i64 = ir.IntType(64)

    @intrinsic
    def block_dots(typingctx, indptr, indices, data, row, M, first, out):
        signature = types.void(indptr, indices, data, types.int64, M, types.int64, out)

        def codegen(context, builder, sig, args):
            def array(i):
                return context.make_array(sig.args[i])(context, builder, args[i])

            def as_i64(value, item_type):
                return builder.sext(value, i64) if item_type.bitwidth < 64 else value

            indptr_a, indices_a, data_a, M_a, out_a = array(0), array(1), array(2), array(4), array(6)
            row, first = args[3], args[5]
            item = sig.args[0].dtype
            start = as_i64(builder.load(builder.gep(indptr_a.data, [row])), item)
            end = as_i64(builder.load(builder.gep(indptr_a.data, [builder.add(row, ir.Constant(i64, 1))])), item)
            n_rows = builder.extract_value(M_a.shape, 0)
            row_bytes = builder.extract_value(M_a.strides, 0)
            base = builder.add(builder.ptrtoint(M_a.data, i64), builder.mul(first, ir.Constant(i64, 8)))
            sums = [cgutils.alloca_once_value(builder, ir.Constant(vector, [0.0] * 4)) for _ in range(n_vectors)]
            with cgutils.for_range(builder, end, start=start) as loop:
                j = as_i64(builder.load(builder.gep(indices_a.data, [loop.index])), sig.args[1].dtype)
                with builder.if_then(builder.icmp_signed("<", j, n_rows), likely=True):
                    value = builder.load(builder.gep(data_a.data, [loop.index]))
                    spread = builder.shuffle_vector(
                        builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(ir.IntType(32), 0)),
                        ir.Constant(vector, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), 4), [0, 0, 0, 0]))
                    address = builder.add(base, builder.mul(j, row_bytes))
                    for q in range(n_vectors):
                        pointer = builder.inttoptr(builder.add(address, ir.Constant(i64, 32 * q)), vector.as_pointer())
                        weights = builder.load(pointer, align=8)
                        builder.store(builder.fadd(builder.load(sums[q]), builder.fmul(spread, weights)), sums[q])
            for q in range(n_vectors):
                pointer = builder.bitcast(builder.gep(out_a.data, [builder.add(first, ir.Constant(i64, 4 * q))]), vector.as_pointer())
                builder.store(builder.load(sums[q]), pointer, align=8)
            return context.get_dummy_value()

        return signature, codegen

    return block_dots


_dots_1, _dots_2, _dots_3, _dots_4 = (_class_block_dots(n) for n in (1, 2, 3, 4))


@njit(cache=True, nogil=True)
def row_dots(indptr, indices, data, row, M, n_classes, out):
    """``out[k] = sum_p data[p] * M[indices[p], k]`` over the entries of one CSR row, for
    ``k < n_classes``; columns at or beyond ``M.shape[0]`` are skipped (features the model has
    never learned have zero weight).

    When ``M`` and ``out`` have room for whole vectors of four classes (the weight stores pad
    their class capacity to a multiple of 4), the sums are held in vector registers,
    16 classes per pass over the row (:func:`_class_block_dots`). Otherwise a plain loop computes the very same sums
    (each in entry order, separate multiply and add): the bits never depend on a capacity."""
    n_padded = (n_classes + 3) // 4 * 4
    if M.shape[1] >= n_padded and len(out) >= n_padded:
        first = 0
        while first + 16 <= n_padded:
            _dots_4(indptr, indices, data, row, M, first, out)
            first += 16
        left = (n_padded - first) // 4
        if left == 3:
            _dots_3(indptr, indices, data, row, M, first, out)
        elif left == 2:
            _dots_2(indptr, indices, data, row, M, first, out)
        elif left == 1:
            _dots_1(indptr, indices, data, row, M, first, out)
        return
    for k in range(n_classes):
        out[k] = 0.0
    n_features = M.shape[0]
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        if j < n_features:
            v = data[p]
            for k in range(n_classes):
                out[k] += v * M[j, k]


@njit(cache=True, nogil=True)
def scores_batch(indptr, indices, data, V, scale, U, A, total_weight, n_classes, averaged, out):
    """Class scores ``x . w_k`` of every row of a CSR batch into ``out[n_rows, K]``.

    With ``averaged`` the scores are those of the averaged iterate ``(U + A V) / total_weight``
    (the last iterate while ``total_weight`` is 0: no step yet)."""
    n_rows = len(indptr) - 1
    dots = np.empty(V.shape[1])  # the store's padded width: row_dots's vector road
    averaged_dots = np.empty(V.shape[1])
    for i in range(n_rows):
        row_dots(indptr, indices, data, i, V, n_classes, dots)
        if averaged and total_weight > 0:
            row_dots(indptr, indices, data, i, U, n_classes, averaged_dots)
            for k in range(n_classes):
                out[i, k] = (averaged_dots[k] + A[k] * dots[k]) / total_weight
        else:
            for k in range(n_classes):
                out[i, k] = dots[k] * scale[k]


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
    per class. Otherwise class by class: for the two classes of an argmax loss, one pass with
    an inner loop over the classes is slower than :func:`add_to_column` twice."""
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
