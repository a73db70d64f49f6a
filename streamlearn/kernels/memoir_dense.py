"""Kernels of the extreme-classification learner (002_d116c1700f27e6e6.txt, MEMOIR-ℓ2, Alg. 1)
over **dense class rows**: ``V`` is a ``(classes, columns)`` matrix, for inputs whose rows fill
most columns (embeddings), where the sparse store of :mod:`.memoir_store` pays a hash and a
pointer per weight for nothing.

The model is the one of :mod:`.memoir_store`'s docstring: ``W = g · V`` with the global scale
``g = scalars[G]``, ``SQ = Σ V²``, the averaged iterate ``(U + A V) / AW``. Every sum runs in
the order the sparse kernels use (per class, over the row's entries in order), so on the same
rows the two stores give the same scores and the same iterates, bit for bit; a weight the sparse
store never touched is a 0 here, which adds nothing to a sum. ``V`` and ``U`` may be float32
(the learner narrows them once its index routes the steps): the same code, each stored weight
rounded to float32, every sum still in float64.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .mean_lists import insert_top
from .memoir import finish_step, random_other, shrink_and_step
from .memory import prefetch_row
from .memoir_store import AW, SQ, A, G
from .watch import RESTART_AT, RESTART_WEIGHT, watch_step


@njit(cache=True, nogil=True)
def _scores(M, indptr, indices, data, row, n_classes, out):
    """``out[k] = (M x_row)_k`` for ``k < n_classes``; columns past ``M``'s weigh 0 (no row
    learned named them)."""
    lo, hi = indptr[row], indptr[row + 1]
    width = M.shape[1]
    for k in range(n_classes):
        s = 0.0
        for p in range(lo, hi):
            j = indices[p]
            if j < width:
                s += M[k, j] * data[p]
        out[k] = s


@njit(cache=True, nogil=True)
def _predicted_scores(V, U, scalars, indptr, indices, data, row, n_classes, averaged, scores, avg_scores):
    """The predicting iterate's scores of a row in ``scores``: ``g V x``, or with ``averaged``
    (once a step was averaged) ``(U x + A V x) / AW``."""
    if averaged and scalars[AW] > 0:
        for k in range(n_classes):
            scores[k], avg_scores[k] = _dots(V, U, indptr, indices, data, row, k)
            scores[k] = (avg_scores[k] + scalars[A] * scores[k]) / scalars[AW]
        return
    _scores(V, indptr, indices, data, row, n_classes, scores)
    for k in range(n_classes):
        scores[k] = scalars[G] * scores[k]


@njit(cache=True, nogil=True)
def class_scores(indptr, indices, data, V, U, scalars, n_classes, averaged, scores):
    """``scores[row, k]`` for every row and class: the predicting iterate's scores of
    :func:`_predicted_scores`, bit for bit those :func:`predict_rows`' exact scan ranks."""
    avg_scores = np.empty(n_classes)
    for row in range(len(indptr) - 1):
        _predicted_scores(V, U, scalars, indptr, indices, data, row, n_classes, averaged, scores[row], avg_scores)


@njit(cache=True, nogil=True)
def _argmax(scores, n_classes, skip):
    """The first index of the largest of ``scores[:n_classes]`` other than ``skip`` (-1: none)."""
    best, best_score = -1, 0.0
    for k in range(n_classes):
        if k != skip and (best < 0 or scores[k] > best_score):
            best, best_score = k, scores[k]
    return best


@njit(cache=True, nogil=True)
def _dot(M, indptr, indices, data, row, k):
    """``(M x_row)_k`` (as :func:`_scores` sums it)."""
    s = 0.0
    width = M.shape[1]
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        if j < width:
            s += M[k, j] * data[p]
    return s


@njit(cache=True, nogil=True)
def _dots(V, U, indptr, indices, data, row, k):
    """``((V x_row)_k, (U x_row)_k)``, each summed as :func:`_dot` sums it, in one pass: two
    independent chains of additions run side by side where one after the other each waited on
    its own additions' latency."""
    sv, su = 0.0, 0.0
    wv, wu = V.shape[1], U.shape[1]
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        x = data[p]
        if j < wv:
            sv += V[k, j] * x
        if j < wu:
            su += U[k, j] * x
    return sv, su


@njit(cache=True, nogil=True)
def _four_dots(V, U, indptr, indices, data, row, ks, first, both, sv, su):
    """``sv[q] = (V x_row)_{ks[q]}`` (and ``su[q]`` of ``U`` with ``both``) for ``q`` in
    ``first .. first + 3``, each summed as :func:`_dot` sums it: four classes' chains of
    additions side by side, where one class at a time waited on each addition's latency."""
    k0, k1, k2, k3 = ks[first], ks[first + 1], ks[first + 2], ks[first + 3]
    a0, a1, a2, a3 = 0.0, 0.0, 0.0, 0.0
    b0, b1, b2, b3 = 0.0, 0.0, 0.0, 0.0
    wv, wu = V.shape[1], U.shape[1]
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        x = data[p]
        if j < wv:
            a0 += V[k0, j] * x
            a1 += V[k1, j] * x
            a2 += V[k2, j] * x
            a3 += V[k3, j] * x
        if both and j < wu:
            b0 += U[k0, j] * x
            b1 += U[k1, j] * x
            b2 += U[k2, j] * x
            b3 += U[k3, j] * x
    sv[first], sv[first + 1], sv[first + 2], sv[first + 3] = a0, a1, a2, a3
    su[first], su[first + 1], su[first + 2], su[first + 3] = b0, b1, b2, b3


@njit(cache=True, nogil=True)
def _listed_dots(V, U, indptr, indices, data, row, candidates, n_classes, extra, last, both):
    """The classes of ``candidates[row]`` below ``n_classes`` in order, then ``extra`` and ``last``
    when they are classes (-1: none), and their ``V x`` (and ``U x`` with ``both``), each summed
    as :func:`_dot` sums it. Returns ``(ks, sv, su, n, n_listed)``: ``n`` classes, the first
    ``n_listed`` of them from the list."""
    width = candidates.shape[1]
    ks = np.empty(width + 2, np.int64)
    n = 0
    for q in range(width):
        k = candidates[row, q]
        if 0 <= k < n_classes:
            ks[n] = k
            n += 1
    n_listed = n
    for k in (extra, last):
        if 0 <= k < n_classes:
            ks[n] = k
            n += 1
    sv, su = np.empty(n), np.empty(n)
    whole = n - n % 4
    for first in range(0, whole, 4):
        _four_dots(V, U, indptr, indices, data, row, ks, first, both, sv, su)
    for q in range(whole, n):
        if both:
            sv[q], su[q] = _dots(V, U, indptr, indices, data, row, ks[q])
        else:
            sv[q] = _dot(V, indptr, indices, data, row, ks[q])
    return ks, sv, su, n, n_listed


@njit(cache=True, nogil=True)
def _best_candidate(V, indptr, indices, data, row, n_classes, candidates, skip, extra):
    """The best of ``candidates[row]`` and ``extra`` (-1: none) other than ``skip``, among the
    classes below ``n_classes``, by ``V x``, ties to the lowest index. Returns ``(class, score)``,
    ``(-1, 0)`` when there is none."""
    ks, sv, _, n, _ = _listed_dots(V, V, indptr, indices, data, row, candidates, n_classes, extra, -1, False)
    best, best_score = -1, 0.0
    for q in range(n):
        k = ks[q]
        if k != skip and (best < 0 or sv[q] > best_score or (sv[q] == best_score and k < best)):
            best, best_score = k, sv[q]
    return best, best_score


@njit(cache=True, nogil=True)
def _violator(V, indptr, indices, data, row, y, n_classes, candidates, lowest, rng, scores):
    """The most violating class ``r ≠ y`` of a row and ``(V x)_r``, ``(V x)_y``: over every class
    (no candidates), or over the row's candidates re-scored exactly, with the lowest class
    ``≠ y`` beside them when ``lowest`` (as the sparse store's oracles); ``r = -1`` when ``y``
    is the only class. Without ``lowest``, drawn uniformly when no class scores above 0."""
    if n_classes < 2:
        return -1, 0.0, 0.0
    if candidates.shape[0] == 0:
        _scores(V, indptr, indices, data, row, n_classes, scores)
        r = _argmax(scores, n_classes, y)
        if not lowest and scores[r] <= 0.0:
            r = random_other(rng, n_classes, y)
        return r, scores[r], scores[y]
    r, s_r = _best_candidate(V, indptr, indices, data, row, n_classes, candidates, y, (1 if y == 0 else 0) if lowest else -1)
    if not lowest and (r < 0 or s_r <= 0.0):
        r = random_other(rng, n_classes, y)
        s_r = _dot(V, indptr, indices, data, row, r)
    return r, s_r, _dot(V, indptr, indices, data, row, y)


@njit(cache=True, nogil=True)
def _candidate_scores(V, U, scalars, indptr, indices, data, row, y, n_before, n_classes, candidates, lowest, predict):
    """One pass over a row's candidates for a step: each row of ``V`` read once serves both the
    averaged iterate's prediction among the candidates below ``n_before`` (with ``predict``;
    :func:`predict_rows`' answer) and :func:`_violator`'s ``r`` (the lowest
    class beside them with ``lowest``; no random draw here). Returns ``(predicted, r, s_r, s_y)``,
    ``predicted = -1`` and ``r = -1`` when there is none."""
    extra = (1 if y == 0 else 0) if lowest else -1
    both = predict and scalars[AW] > 0
    ks, sv, su, n, n_listed = _listed_dots(V, U, indptr, indices, data, row, candidates, n_classes, extra,
                                           y if n_classes >= 2 else -1, both)
    predicted, best = -1, 0.0
    r, s_r = -1, 0.0
    for q in range(n - (n_classes >= 2)):  # the last is y's own score
        k, s = ks[q], sv[q]
        if predict and q < n_listed and k < n_before:
            p = (su[q] + scalars[A] * s) / scalars[AW] if both else scalars[G] * s
            if predicted < 0 or p > best or (p == best and k < predicted):
                predicted, best = k, p
        if n_classes >= 2 and k != y and (r < 0 or s > s_r or (s == s_r and k < r)):
            r, s_r = k, s
    s_y = sv[n - 1] if n_classes >= 2 else 0.0
    return predicted, r, s_r, s_y


@njit(cache=True, nogil=True)
def _add(V, U, scalars, indptr, indices, data, row, k, amount, averaged):
    """``V[k] += amount · x_row``, keeping ``Σ V²`` and, when averaging, ``U −= A δ``."""
    a = scalars[A]
    sq = 0.0
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        old = float(V[k, j])
        delta = amount * data[p]
        V[k, j] = old + delta
        new = float(V[k, j])  # as stored: float32 rows round it, and Σ V² follows what they hold
        sq += new * new - old * old
        if averaged:
            U[k, j] -= a * delta
    scalars[SQ] += sq


# over 80 lines: the mini-batch loop is one compiled call, as the sparse store's learn_groups
@njit(cache=True, nogil=True)
def learn_groups(indptr, indices, data, y, weights, group_size, n_classes, V, U, scalars, t, lam, project, eta0,
                 eta_decay, averaged, average_power, lowest, rng, scores, avg_scores, renormalize_below, mistakes,
                 candidates, watch, watch_params):
    """:func:`streamlearn.kernels.memoir.learn_groups` with the exact oracle and ``penalty = L2``
    on dense rows (its docstring has the rules): for each group, every row's most violating
    class ``r = argmax_{k≠y} (V x)_k`` at the group's starting weights (ties to the lowest
    index; without ``lowest``, drawn uniformly when no class scores above 0), then the shrink
    (Pegasos ``1 − 1/t``, or ``1 − λη`` with 002's ``η = eta0 / (1 + eta_decay t)``), the
    steps ``w_r −= η ω x``, ``w_y += η ω x`` of the violated hinges, the projection, the
    weighted average. ``mistakes`` (or an empty array): each row's prequential mistake, by the
    averaged iterate's prediction with ``averaged``, else ``r`` scoring above ``y``.
    ``candidates`` (``(rows, n)``, -1 pads; or ``(0, 0)``: every class): an index's classes for
    each row, among which ``r`` and the prediction behind a mistake are chosen (:func:`_violator`).
    ``watch`` (or an empty array): the
    change watch's state, fed each step's ``mistakes`` (:func:`.watch.watch_step`, with
    ``watch_params``); when it says so, the restart of ``ExtremeSVM._restart``. Returns
    ``(t, n_classes)``."""
    n_groups = (len(indptr) - 1) // group_size
    r_of = np.empty(group_size, np.int64)
    amount_of = np.empty(group_size)
    radius = 1.0 / np.sqrt(lam)
    for g in range(n_groups):
        first = g * group_size
        n_before = n_classes
        for i in range(group_size):
            n_classes = max(n_classes, y[first + i] + 1)
        for i in range(group_size):  # every row at W^(t-1)
            row = first + i
            predict = len(mistakes) > 0 and averaged
            if candidates.shape[0]:
                if row + 1 < len(indptr) - 1:
                    _prefetch_candidates(V, U, candidates, row + 1, averaged)
                predicted, r, s_r, s_y = _candidate_scores(V, U, scalars, indptr, indices, data, row, y[row], n_before,
                                                           n_classes, candidates, lowest, predict)
                if n_classes >= 2 and not lowest and (r < 0 or s_r <= 0.0):
                    r = random_other(rng, n_classes, y[row])
                    s_r = _dot(V, indptr, indices, data, row, r)
            else:
                predicted = -1
                if predict and n_before:
                    _predicted_scores(V, U, scalars, indptr, indices, data, row, n_before, True, scores, avg_scores)
                    predicted = _argmax(scores, n_before, -1)
                r, s_r, s_y = _violator(V, indptr, indices, data, row, y[row], n_classes, candidates, lowest, rng, scores)
            if predict:
                mistakes[row] = y[row] >= n_before or predicted != y[row]
            if len(mistakes) and not averaged:
                mistakes[row] = y[row] >= n_before or (r >= 0 and (s_r > s_y or (s_r == s_y and r < y[row])))
            r_of[i] = r
            amount_of[i] = 0.0
            if r >= 0 and 1.0 + scalars[G] * (s_r - s_y) > 0.0:
                amount_of[i] = weights[row]
        t += 1
        step = shrink_and_step(scalars, t, lam, eta0, eta_decay, group_size, True)
        for i in range(group_size):
            if amount_of[i] != 0.0:
                amount = step * amount_of[i] / scalars[G]
                _add(V, U, scalars, indptr, indices, data, first + i, r_of[i], -amount, averaged)
                _add(V, U, scalars, indptr, indices, data, first + i, y[first + i], amount, averaged)
        if finish_step(scalars, t, project, radius, averaged, average_power, renormalize_below):
            renormalize(V, U, scalars, n_classes)
        if len(watch) and watch_step(watch, watch_params, mistakes, first, group_size) and t > watch_params[RESTART_AT]:
            t = restart(U, scalars, averaged, watch_params, n_classes)
    return t, n_classes


@njit(cache=True, nogil=True)
def restart(U, scalars, averaged, watch_params, n_classes):
    """``ExtremeSVM._restart`` (:mod:`streamlearn.adaptation`): the step goes back to
    ``RESTART_AT`` and the average to the current iterate with that step's weight; returns the step.
    Only the ``n_classes`` rows in use are cleared: the rows beyond are 0 and never touched, so
    they take no resident memory."""
    weight = watch_params[RESTART_WEIGHT]
    if averaged:
        U[:n_classes, :] = 0.0
        scalars[A] = weight * scalars[G]
    scalars[AW] = weight
    return int(watch_params[RESTART_AT])


@njit(cache=True, nogil=True)
def renormalize(V, U, scalars, n_classes):
    """Fold the global scale into ``V``: ``U ← U + A V``, ``V ← g V``, ``A ← 0``, ``g ← 1``
    (as the sparse store's)."""
    g = scalars[G]
    for k in range(n_classes):
        for j in range(V.shape[1]):
            if U.shape[0]:
                U[k, j] += scalars[A] * V[k, j]
            V[k, j] *= g
    scalars[SQ] *= g * g
    scalars[A] = 0.0
    scalars[G] = 1.0


@njit(cache=True, nogil=True)
def _prefetch_candidates(V, U, candidates, row, averaged):
    """Start reading the rows of ``V`` (and ``U`` with ``averaged``) of a row's candidates."""
    for q in range(candidates.shape[1]):
        k = candidates[row, q]
        if 0 <= k < V.shape[0]:
            prefetch_row(V, k)
        if averaged and 0 <= k < U.shape[0]:
            prefetch_row(U, k)


@njit(cache=True, nogil=True)
def predict_rows(indptr, indices, data, V, U, scalars, n_classes, averaged, y, predicted, p_true, scores, avg_scores,
                 candidates):
    """:func:`streamlearn.kernels.memoir.predict_rows` on dense rows: the predicted class of each
    row (-1 with no class; ties to the lowest index) and, when ``y`` is given (non-empty; -1 for a
    class the model does not know), the softmax probability of ``y`` — over every class, or over
    the row's ``candidates`` and ``y`` (when ``candidates`` has rows; no candidate: class 0)."""
    n_rows = len(indptr) - 1
    if candidates.shape[0] and n_rows:
        _prefetch_candidates(V, U, candidates, 0, averaged)
    for row in range(n_rows):
        if n_classes == 0:
            predicted[row] = -1
            if len(y):
                p_true[row] = 0.0
            continue
        if candidates.shape[0]:
            if row + 1 < n_rows:
                _prefetch_candidates(V, U, candidates, row + 1, averaged)
            k = y[row] if len(y) else -1
            both = averaged and scalars[AW] > 0
            ks, p, su, n, n_listed = _listed_dots(V, U, indptr, indices, data, row, candidates, n_classes, -1, k, both)
            for q in range(n):  # the predicting iterate's scores, as _predicted_scores gives them
                p[q] = (su[q] + scalars[A] * p[q]) / scalars[AW] if both else scalars[G] * p[q]
            best, best_score = -1, 0.0
            for q in range(n_listed):
                if best < 0 or p[q] > best_score or (p[q] == best_score and ks[q] < best):
                    best, best_score = ks[q], p[q]
            predicted[row] = max(best, 0)
            if len(y):
                total, listed = 0.0, False
                for q in range(n_listed):
                    total += np.exp(p[q] - best_score)
                    listed = listed or ks[q] == k
                s_y = p[n - 1] if 0 <= k < n_classes else -np.inf  # y's score is the last
                if 0 <= k < n_classes and not listed:
                    total += np.exp(s_y - best_score)
                p_true[row] = 0.0 if total == 0.0 else np.exp(s_y - best_score) / total
            continue
        _predicted_scores(V, U, scalars, indptr, indices, data, row, n_classes, averaged, scores, avg_scores)
        predict_from_scores(scores, n_classes, y, row, predicted, p_true)


@njit(cache=True, nogil=True)
def predict_from_scores(scores, n_classes, y, row, predicted, p_true):
    """Row ``row``'s prediction from every class's ``scores`` (``n_classes > 0``): the first
    largest, and given ``y`` the softmax probability of ``y[row]`` (0 for a class not known)."""
    best = _argmax(scores, n_classes, -1)
    predicted[row] = best
    if len(y):
        total = 0.0
        for k in range(n_classes):
            total += np.exp(scores[k] - scores[best])
        k = y[row]
        p_true[row] = 0.0 if k < 0 or k >= n_classes else np.exp(scores[k] - scores[best]) / total


@njit(cache=True, nogil=True)
def violators(indptr, indices, data, V, y, n_classes, candidates, lowest, rng, scores, out):
    """The most violating class of each row whose ``y`` is known (``≥ 0``) at the current
    weights, by :func:`_violator` (nothing is learned)."""
    for row in range(len(indptr) - 1):
        if y[row] >= 0:
            out[row] = _violator(V, indptr, indices, data, row, y[row], n_classes, candidates, lowest, rng, scores)[0]


@njit(cache=True, nogil=True)
def scatter_rows(indptr, indices, data, out):
    """``out[i, indices[p]] = data[p]`` for row ``i``'s entries of CSR rows (``indptr`` from 0;
    columns past ``out``'s dropped; cast to ``out``'s type): a dense copy of the rows in ``out``
    (zeros)."""
    width = out.shape[1]
    for i in range(len(indptr) - 1):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if j < width:
                out[i, j] = data[p]


#: u = 2^-24, float32's unit roundoff: a float32 dot product of d terms, summed in any order (with or
#: without fused multiply-adds), is within d·u/(1 − d·u) · Σ|q_j c_j| of the exact one (Higham,
#: *Accuracy and Stability of Numerical Algorithms*, 2002, Eq. 3.5)
FLOAT32_ROUNDOFF = 2.0 ** -24


@njit(cache=True, nogil=True)
def probe_lists(queries, centroids, largest_norm, fast_scores, n, lists, closeness):
    """The ``n`` coarse lists of largest inner product with each query (largest first, ties to the
    lowest list) into ``lists`` / ``closeness``: the IVF search's first step.

    ``fast_scores`` are the products from one BLAS call, whose rounding depends on the batch; the
    lists within twice their error bound (:data:`FLOAT32_ROUNDOFF`) of the ``n``-th score hold
    the true top ``n`` (``largest_norm``: the centroids' largest norm, a bound of the error), and
    are re-scored here summing over the columns in order. So a row gets
    the same lists in a batch of any size (``learn_many`` ≡ the ``learn_one`` loop) at the cost of a
    BLAS product and a handful of dot products."""
    d = centroids.shape[1]
    gamma = d * FLOAT32_ROUNDOFF / (1.0 - d * FLOAT32_ROUNDOFF)
    top = np.empty(n, np.float32)  # the row's n largest fast scores so far
    near = np.empty(centroids.shape[0], np.int64)  # the lists within the margin of them when seen
    for row in range(queries.shape[0]):
        query_norm = 0.0
        for j in range(d):
            query_norm += float(queries[row, j]) ** 2
        margin = 4.0 * gamma * np.sqrt(query_norm) * largest_norm  # both scores' errors, with room
        top[:] = -np.inf
        fast = fast_scores[row]
        n_near, threshold = 0, -np.inf
        for k in range(len(fast)):
            s = fast[k]
            if s < threshold:  # the floor only rises: this list stays below it
                continue
            near[n_near] = k
            n_near += 1
            if s > top[n - 1]:  # insert_top without the ids: this runs for every list of every row
                q = n - 1
                while q > 0 and s > top[q - 1]:
                    top[q] = top[q - 1]
                    q -= 1
                top[q] = s
                threshold = top[n - 1] - margin
        for q in range(n):
            lists[row, q], closeness[row, q] = -1, -np.inf
        for i in range(n_near):
            k = near[i]
            if fast[k] >= threshold:
                s = np.float32(0.0)
                for j in range(d):
                    s += queries[row, j] * centroids[k, j]
                insert_top(lists, closeness, row, n, k, s)
