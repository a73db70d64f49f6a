"""The Primal Gradient Solver's step with a lazy ℓp mirror map
(003_5fe9be115ce0064e.txt, Fig. 1 and Fig. 2; block norm of 001_9340a29bc499f11f.txt).

State: the dual vector ``Lam`` (feature-major, ``Lam[i, j]`` = coordinate i of class j)
and sums that make ``w = ∇r*(Lam / ((t+1) σ))`` computable on any coordinate in O(1):

* entrywise ``r(W) = ||W||_p² / (2(p-1))``: ``S = Σ |Lam|^q`` and
  ``w_ij = coef · |Lam_ij|^(q-1) sgn Lam_ij`` with ``coef = (p-1) c ||Lam||_q^(2-q)``;
* block ``r(W) = ||W||_{2,p}² / (2(p-1))``: ``N_j = ||Lam_j||_2²`` per class,
  ``T = Σ_j N_j^(q/2)`` and ``w_ij = coef · N_j^((q-2)/2) · Lam_ij`` with
  ``coef = (p-1) c ||Lam||_{2,q}^(2-q)``;

where ``c = 1/((t+1) σ)`` and ``1/p + 1/q = 1``. Both maps give ``||w|| = (p-1) c ||Lam||``
in the primal norm, so the projection onto ``{||w|| <= B}`` multiplies ``coef`` by
``min(1, B / ||w||)`` (Corollary 2, Eq. 28). A step changes ``Lam`` on the ``nnz`` of its
rows only and updates the sums there: O(k·nnz·K_touched), never O(n).

``Phi = φ(Lam)`` (``|Lam|^(q-1) sgn Lam`` entrywise) is stored beside ``Lam`` and updated
with it, so scoring needs no power at all and an update needs one: ``|x|^q = |x|·|φ(x)|``.
For ``p = 2`` and the block norm ``φ`` is the identity and ``Phi`` *is* ``Lam`` (the
caller passes the same array twice and ``separate_phi=False``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .codes import BLOCK, ENTRYWISE, HINGE, LOGISTIC, REGRESSION, SQUARED
from .mcid import sigmoid, loss_coefficients
from .scaled import row_dots


@njit(cache=True, nogil=True)
def signed_power(x, e):
    """``|x|^e sgn x`` (``e >= 1``; 0 for 0, never 0 to a negative power)."""
    if x == 0.0:
        return 0.0
    if e == 1.0:
        return x
    return np.abs(x) ** e * (1.0 if x > 0 else -1.0)


@njit(cache=True, nogil=True)
def factors(t, sigma, p, q, bound, regularizer, S, N, n_classes, out):
    """``out[j]``: the factor ``g_j`` with ``w_ij = g_j · φ(Lam_ij)`` (φ = signed power q-1
    entrywise, identity for the block norm), for the iterate after ``t`` steps."""
    c = 1.0 / ((t + 1) * sigma)
    total = S if regularizer == ENTRYWISE else 0.0
    if regularizer == BLOCK:
        for j in range(n_classes):
            total += N[j] ** (q / 2.0)
    if total <= 0.0:
        for j in range(n_classes):
            out[j] = 0.0
        return
    norm_q = total ** (1.0 / q)  # ||Lam||_q or ||Lam||_{2,q}
    coef = (p - 1.0) * c * norm_q ** (2.0 - q)
    if bound > 0.0:
        primal = (p - 1.0) * c * norm_q  # ||w||_p or ||w||_{2,p}
        if primal > bound:
            coef *= bound / primal
    for j in range(n_classes):
        if regularizer == BLOCK:
            out[j] = coef * N[j] ** ((q - 2.0) / 2.0) if N[j] > 0.0 else 0.0
        else:
            out[j] = coef


@njit(cache=True, nogil=True)
def phi_of(Lam, e, out):
    """``out = φ(Lam)`` entry by entry (the same arithmetic as the step's update)."""
    for i in range(Lam.shape[0]):
        for j in range(Lam.shape[1]):
            out[i, j] = signed_power(Lam[i, j], e)


@njit(cache=True, nogil=True)
def row_scores(indptr, indices, data, row, Phi, g, n_classes, out):
    """``out[j] = w_j . x = g_j Σ_i x_i Phi[i, j]`` for one CSR row (columns beyond
    ``Phi`` have zero weight)."""
    row_dots(indptr, indices, data, row, Phi, n_classes, out)
    for j in range(n_classes):
        out[j] *= g[j]


@njit(cache=True, nogil=True)
def scores_batch(indptr, indices, data, Phi, g, n_classes, out):
    dots = np.empty(Phi.shape[1])  # Phi's padded width: row_dots's vector road
    for r in range(len(indptr) - 1):
        row_scores(indptr, indices, data, r, Phi, g, n_classes, dots)
        for j in range(n_classes):
            out[r, j] = dots[j]


@njit(cache=True, nogil=True)
def average_row_scores(indptr, indices, data, r, Phi, Acc, Mark, Cj, n_classes, t, out):
    """One CSR row's scores by the averaged iterate ``(1/t) Σ_s w_s`` (see :func:`learn_groups`)."""
    n_features = Phi.shape[0]
    for j in range(n_classes):
        out[j] = 0.0
    for p_ in range(indptr[r], indptr[r + 1]):
        i = indices[p_]
        if i >= n_features:
            continue
        v = data[p_]
        for j in range(n_classes):
            out[j] += v * (Acc[i, j] + Phi[i, j] * (Cj[j] - Mark[i, j]))
    for j in range(n_classes):
        out[j] /= t


@njit(cache=True, nogil=True)
def average_scores(indptr, indices, data, Phi, Acc, Mark, Cj, n_classes, t, out):
    """Scores of the averaged iterate ``(1/t) Σ_s w_s`` (see :func:`learn_groups`)."""
    for r in range(len(indptr) - 1):
        average_row_scores(indptr, indices, data, r, Phi, Acc, Mark, Cj, n_classes, t, out[r])


@njit(cache=True, nogil=True)
def predicting_row_scores(indptr, indices, data, row, binary, n_classes, t, sigma, p, q, bound, regularizer,
                          snap_Phi, snap_N, snap_meta, keep_random, averaged, Phi, Acc, Mark, Cj, current, out):
    """One row's scores by the iterate predictions use after ``t`` steps — the average, the kept
    random iterate, or the last one (whose scores the caller has in ``current``) — written as
    :func:`learn_groups`' ``scores`` takes them (binary: ``[0, margin]``)."""
    scores = current
    if averaged and t > 0:
        scores = np.empty(n_classes)
        average_row_scores(indptr, indices, data, row, Phi, Acc, Mark, Cj, n_classes, t, scores)
    elif keep_random and snap_meta[0] > 0:
        g = np.empty(n_classes)
        factors(int(snap_meta[0]), sigma, p, q, bound, regularizer, snap_meta[1], snap_N, n_classes, g)
        scores = np.empty(snap_Phi.shape[1])
        row_scores(indptr, indices, data, row, snap_Phi, g, n_classes, scores)
    if binary:
        out[0] = 0.0
        out[1] = scores[0]
    else:
        for j in range(n_classes):
            out[j] = scores[j]


@njit(cache=True, nogil=True)
def _binary_coefficient(loss, margin, y):
    """``dl/dm`` for the binary losses (``y`` in {-1, +1})."""
    if loss == HINGE:
        return -y if y * margin < 1.0 else 0.0
    if loss == LOGISTIC:
        return -y * sigmoid(-y * margin)
    return margin - y  # SQUARED and REGRESSION: d/dm (m - y)² / 2


# over 80 lines: the whole mini-batch loop is one compiled call, so the dual state stays in locals across groups
@njit(cache=True, nogil=True)
def learn_groups(indptr, indices, data, y, weights, group_size, Lam, Phi, separate_phi, N, stats, n_active, t,
                 sigma, p, q, bound, loss, regularizer,
                 rng_state, snap_Phi, snap_N, snap_meta, keep_random, averaged, Acc, Mark, Cj, keys, scores):  # fmt: skip
    """Fig. 1 lines 4–8 for each group of ``group_size`` consecutive rows; returns
    ``(t, n_active)``. A multi-class group works on the classes seen up to its last row
    (class indices number classes in order of first appearance), as a ``learn_one`` loop
    would, whatever the batch the group came in. ``weights`` (one per row, or empty: all 1) scale
    each row's sub-gradient in line 7's sum, ``Lam <- Lam - (1/k) Σ w_i dl_i/dW``: the step of
    the weighted loss ``Σ w_i l_i`` (a weight of 1 is the unweighted step, bit for bit).

    ``stats[0]`` is ``S`` (entrywise), ``stats[1]`` the number of ``Lam`` entries changed
    since the sums were last recomputed exactly and ``stats[2]`` the number of non-zero
    entries: once 16 times more entries changed than are non-zero (and at least 65,536),
    ``N`` and ``S`` are recomputed exactly (an O(d log d) sort, amortised), rows in the order of ``keys`` (the features' name keys) —
    at the same step whatever the batches, and whatever the vocabulary's order. Binary losses use one column and
    ``y`` in {-1, +1}; multi-class losses use class indices. With ``keep_random`` the
    iterate of a uniformly random step (reservoir sampling, Fig. 1 line 9) is copied into
    ``snap_*`` (its ``Phi``, ``N`` and ``snap_meta = [t, S]``).

    ``averaged`` keeps the running sum of the iterates ``w_1 + ... + w_t`` lazily:
    ``Cj[j]`` is the sum of the class factors ``g_j`` of every iterate so far, and entry
    ``(i, j)`` holds ``Acc`` (its sum up to its last change) and ``Mark`` (``Cj`` then), so
    the sum is ``Acc + Phi (Cj - Mark)``; a change costs O(1), a step O(K).

    ``scores`` (or an empty array): each row's scores by the iterate predictions used when the
    row's step began (:func:`predicting_row_scores`) — multi-class: its first ``n_classes``
    columns; binary: ``[0, margin]`` (the classes' order: negative, positive)."""
    n_rows = len(indptr) - 1
    e = q - 1.0
    capacity = Lam.shape[1]
    g = np.empty(capacity)
    G = np.empty((group_size, capacity))
    binary = loss == HINGE or loss == LOGISTIC or loss == SQUARED or loss == REGRESSION
    keep_scores = scores.shape[0] > 0
    weighted = weights.shape[0] > 0
    if binary:
        n_active = 1
    for start in range(0, n_rows, group_size):
        t += 1
        if not binary:
            for r in range(group_size):
                n_active = max(n_active, int(y[start + r]) + 1)
        n_classes = n_active
        factors(t - 1, sigma, p, q, bound, regularizer, stats[0], N, n_classes, g)  # w_{t-1}
        for r in range(group_size):  # every sub-gradient at w_{t-1} (line 6)
            row = start + r
            row_scores(indptr, indices, data, row, Phi, g, n_classes, G[r])  # the whole row: room for whole vectors
            if keep_scores:
                predicting_row_scores(indptr, indices, data, row, binary, n_classes, t - 1, sigma, p, q, bound,
                                      regularizer, snap_Phi, snap_N, snap_meta, keep_random, averaged, Phi, Acc,
                                      Mark, Cj, G[r], scores[row])
            if binary:
                target = float(y[row]) if loss == REGRESSION else (1.0 if y[row] == 1 else -1.0)
                G[r, 0] = _binary_coefficient(loss, G[r, 0], target)
            else:
                loss_coefficients(loss, G[r, :n_classes], int(y[row]), n_classes)
        for r in range(group_size):  # Lam <- Lam - (1/k) Σ w dl/dW (line 7)
            row = start + r
            w = weights[row] if weighted else 1.0
            for j in range(n_classes):
                coefficient = (G[r, j] / group_size) * w
                if coefficient == 0.0:
                    continue
                for p_ in range(indptr[row], indptr[row + 1]):
                    i = indices[p_]
                    old = Lam[i, j]
                    new = old - coefficient * data[p_]
                    if averaged:  # close the stretch of iterates that had the old value
                        Acc[i, j] += Phi[i, j] * (Cj[j] - Mark[i, j])
                        Mark[i, j] = Cj[j]
                    N[j] += new * new - old * old
                    if separate_phi:
                        phi_new = signed_power(new, e)
                        stats[0] += np.abs(new) * np.abs(phi_new) - np.abs(old) * np.abs(Phi[i, j])
                        Phi[i, j] = phi_new
                    elif regularizer == ENTRYWISE:  # p = 2
                        stats[0] += new * new - old * old
                    Lam[i, j] = new
                    stats[1] += 1.0
                    if old == 0.0 and new != 0.0:
                        stats[2] += 1.0
                    elif old != 0.0 and new == 0.0:
                        stats[2] -= 1.0
        if stats[1] > 16.0 * max(stats[2], 4096.0):  # drift control of the incremental sums
            exact_sums(Lam, N, np.argsort(keys, kind="mergesort"), n_classes, q, stats)
        if averaged:  # w_t joins the sum
            factors(t, sigma, p, q, bound, regularizer, stats[0], N, n_classes, g)
            for j in range(n_classes):
                Cj[j] += g[j]
        if keep_random:  # reservoir: after step t, keep w_t with probability 1/t
            rng_state[0] = rng_state[0] * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)  # LCG mod 2^64
            u = float(rng_state[0] >> np.uint64(11)) * (1.0 / 9007199254740992.0)
            if u * t < 1.0:
                snap_Phi[:, :n_classes] = Phi[:, :n_classes]
                snap_N[:n_classes] = N[:n_classes]
                snap_meta[0] = t
                snap_meta[1] = stats[0]
    return t, n_active


@njit(cache=True, nogil=True)
def exact_sums(Lam, N, order, n_classes, q, stats):
    """Recompute ``N`` and ``S`` from ``Lam`` (removes the drift of incremental sums), rows
    visited in ``order`` (the features' canonical order: the vocabulary's order, which
    depends on dict key order, must not change a sum)."""
    S = 0.0
    nonzero = 0.0
    for j in range(n_classes):
        N[j] = 0.0
    for i in order:
        for j in range(n_classes):
            v = Lam[i, j]
            if v != 0.0:
                N[j] += v * v
                S += np.abs(v) * np.abs(signed_power(v, q - 1.0))
                nonzero += 1.0
    stats[0] = S
    stats[1] = 0.0
    stats[2] = nonzero
