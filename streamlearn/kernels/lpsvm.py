"""Dual coordinate ascent for the ℓp-norm multi-class SVM with fixed class weights β
(001_9340a29bc499f11f.txt, Problem 15 / Eq. 11, its gradient Eq. 12 and restricted
subproblem Eq. 13; the primal variable of Eq. 10).

State: ``alpha`` (``n × c``, the dual variables) and ``V`` (``d × c``, feature-major,
``V[:, j] = Σ_i alpha_ij x_i``), so that ``w_j = β_j V[:, j]`` (Eq. 10) and the gradient
``∂f/∂alpha_ij = 1[y_i = j] − <w_j, x_i>`` (Eq. 12) costs O(nnz(x_i) · c). A step on
example ``i`` solves Eq. 13 exactly:

    max_δ  −½ Σ_j a_j δ_j² + Σ_j g_j δ_j   s.t.  δ_j ≤ u_j,  Σ_j δ_j = 0,

with ``a_j = β_j ||x_i||²``, ``g_j`` the gradient and ``u_j = C 1[j = y_i] − alpha_ij``. Its
solution is ``δ_j = min((g_j − θ)/a_j, u_j)`` for the θ at which the δ sum to zero: the sum
is continuous and decreasing in θ, piecewise linear with a knot at ``b_j = g_j − a_j u_j``,
so sorting the knots finds θ in O(c log c) (for β ≡ 1 this is Crammer & Singer's fixed-point
step, as in Keerthi et al.'s sequential dual method).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def restricted_step(g, a, u, delta, knots, order, free_ga, free_ia):
    """Write into ``delta`` the solution of Eq. 13 (``a > 0``, ``sum(u) > 0``); ``knots`` and
    ``order`` (c), ``free_ga`` and ``free_ia`` (c + 1) are work space."""
    c = g.shape[0]
    for j in range(c):
        knots[j] = g[j] - a[j] * u[j]
        # insertion sort, knots decreasing (the first m are clamped at u): c is a few dozen
        # classes at most once shrunk, where np.argsort's allocation costs more than the sort
        m = j
        while m > 0 and knots[order[m - 1]] < knots[j]:
            order[m] = order[m - 1]
            m -= 1
        order[m] = j
    # sums over the free classes order[m:], built from the end (no cancellation when the a_j
    # differ by orders of magnitude, as a class weight near 0 makes them)
    free_ga[c] = 0.0
    free_ia[c] = 0.0
    for m in range(c - 1, -1, -1):
        k = order[m]
        free_ga[m] = free_ga[m + 1] + g[k] / a[k]
        free_ia[m] = free_ia[m + 1] + 1.0 / a[k]
    clamped_u = 0.0
    theta = np.inf
    for m in range(c):
        theta = (free_ga[m] + clamped_u) / free_ia[m]
        if theta >= knots[order[m]]:  # every remaining knot is at most this one: all free
            break
        clamped_u += u[order[m]]
    if not theta >= knots[order[c - 1]]:  # all clamped (only when sum(u) = 0): no move
        for j in range(c):
            delta[j] = 0.0
        return
    flattest = -1  # the free class with the smallest a_j: moving its δ_j changes its marginal least
    total = 0.0
    for j in range(c):
        free = (g[j] - theta) / a[j]
        delta[j] = free if free < u[j] else u[j]
        total += delta[j]
        if free < u[j] and (flattest < 0 or a[j] < a[flattest]):
            flattest = j
    if flattest >= 0:  # Σ δ = 0 exactly, or α_i · 1 = 0 drifts where some a_j are tiny
        delta[flattest] = min(delta[flattest] - total, u[flattest])


@njit(cache=True, nogil=True)
def class_dots(indptr, indices, data, i, V, out):
    """``out[j] = <V[:, j], x_i>``; columns past ``V``'s rows (features the model has not
    fitted) count as zero."""
    out[:] = 0.0
    d = V.shape[0]
    for k in range(indptr[i], indptr[i + 1]):
        f = indices[k]
        if f < d:
            x = data[k]
            for j in range(V.shape[1]):
                out[j] += V[f, j] * x


@njit(cache=True, nogil=True)
def dca_epoch(indptr, indices, data, y, order, sqnorm, beta, C, V, alpha, classes, n_classes, active, weights):
    """One pass of dual coordinate ascent over the examples in ``order`` for fixed ``beta``;
    updates ``alpha`` and ``V`` in place. Returns the largest violation of Eq. 13's KKT
    conditions met before a step, ``max_{j off its bound} g_j − min_j g_j`` over the active
    classes (0 at the optimum; LIBLINEAR's stopping measure).

    Shrinking, as LIBLINEAR's Crammer–Singer solver does: example ``i`` works on the classes
    ``classes[i, :n_classes[i]]``. A class at its bound (``alpha_ij = 0``, or ``C`` for ``y_i``)
    whose gradient ``g_j`` exceeds every gradient of the classes off their bound is left out: the
    KKT conditions of Eq. 13 keep its δ at 0 (θ never exceeds the largest free gradient), so the
    step is the same, and its score is no longer computed for this example. An example left with
    one class is marked inactive. The caller resets ``n_classes`` and ``active`` before a
    pass that must see everything. Examples with ``x = 0`` are skipped (their subproblem is
    linear and leaves the model unchanged). ``weights`` (one per example, or empty: all 1) scale
    each example's box, ``alpha_{i,y_i} <= C w_i``: the dual of the weighted hinge ``C Σ w_i ξ_i``
    (LIBLINEAR's instance weights; a weight of 1 is the unweighted step, bit for bit)."""
    c = V.shape[1]
    dots = np.empty(c)
    g = np.empty(c)
    a = np.empty(c)
    u = np.empty(c)
    delta = np.empty(c)
    knots = np.empty(c)
    order_work = np.empty(c, np.int64)
    free_ga = np.empty(c + 1)
    free_ia = np.empty(c + 1)
    violation = 0.0
    for i in order:
        if sqnorm[i] <= 0.0:
            active[i] = False
            continue
        yi = y[i]
        box = C * weights[i] if weights.shape[0] > 0 else C
        m = n_classes[i]
        row = classes[i]
        dots[:m] = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            f = indices[k]
            x = data[k]
            for r in range(m):
                dots[r] += V[f, row[r]] * x
        top_free = -np.inf
        lowest = np.inf
        for r in range(m):
            j = row[r]
            g[r] = -beta[j] * dots[r]  # Eq. 12
            a[r] = beta[j] * sqnorm[i]
            u[r] = -alpha[i, j]
            if j == yi:
                g[r] += 1.0
                u[r] += box
            if u[r] > 0.0 and g[r] > top_free:
                top_free = g[r]
            if g[r] < lowest:
                lowest = g[r]
        if top_free - lowest > violation:
            violation = top_free - lowest
        r = 0
        while r < m:  # shrink: swap a stable class to the end of the active part
            if u[r] == 0.0 and g[r] > top_free:
                m -= 1
                row[r], row[m] = row[m], row[r]
                g[r], g[m] = g[m], g[r]
                a[r], a[m] = a[m], a[r]
                u[r], u[m] = u[m], u[r]
            else:
                r += 1
        n_classes[i] = m
        if m <= 1:
            active[i] = False
            continue
        restricted_step(g[:m], a[:m], u[:m], delta[:m], knots[:m], order_work[:m], free_ga[: m + 1], free_ia[: m + 1])
        for r in range(m):
            dj = delta[r]
            if dj != 0.0:
                j = row[r]
                alpha[i, j] += dj
                for k in range(indptr[i], indptr[i + 1]):
                    V[indices[k], j] += dj * data[k]
    return violation


@njit(cache=True, nogil=True)
def scores(indptr, indices, data, V, beta, out):
    """``out[i, j] = <w_j, x_i>`` with ``w_j = β_j V[:, j]`` (Eq. 10)."""
    for i in range(indptr.shape[0] - 1):
        class_dots(indptr, indices, data, i, V, out[i])
        for j in range(V.shape[1]):
            out[i, j] *= beta[j]


@njit(cache=True, nogil=True)
def hinge_total(indptr, indices, data, y, V, beta, weights):
    """``Σ_i w_i max(0, 1 − (<w_y, x_i> − max_{j≠y} <w_j, x_i>))`` with ``w_j = β_j V[:, j]``: the
    Crammer–Singer hinge of problem (P), each example's weighed by ``weights`` (empty: all 1)."""
    c = V.shape[1]
    weighted = weights.shape[0] > 0
    dots = np.empty(c)
    total = 0.0
    for i in range(y.shape[0]):
        class_dots(indptr, indices, data, i, V, dots)
        yi = y[i]
        best_other = -np.inf
        for j in range(c):
            if j != yi and beta[j] * dots[j] > best_other:
                best_other = beta[j] * dots[j]
        loss = 1.0 - beta[yi] * dots[yi] + best_other
        if loss > 0.0:
            total += loss * weights[i] if weighted else loss
    return total


@njit(cache=True, nogil=True)
def accumulate(indptr, indices, data, alpha, V):
    """``V[:, j] += Σ_i alpha_ij x_i`` (Eq. 10 without β), for a warm start."""
    for i in range(indptr.shape[0] - 1):
        for j in range(V.shape[1]):
            a = alpha[i, j]
            if a != 0.0:
                for k in range(indptr[i], indptr[i + 1]):
                    V[indices[k], j] += a * data[k]
