"""The MCID solver's mini-batch step (000_9ee2d88cd77f9d98.txt, Alg. 1 with Alg. 2–4).

For each group of ``r`` consecutive rows: compute every row's loss sub-gradient at
``W^(t-1)``, then ``W^(t) = (1 - 1/t) W^(t-1) - 1/(lam t r) * sum of sub-gradients``
(Eq. 14), optionally project onto the ball of radius ``1/sqrt(lam)``, then fold the
new iterate into the running (optionally weighted) average. The sub-gradient of every loss here is
``dl/dw_k = g_k x`` for a per-class coefficient ``g_k`` (:func:`loss_coefficients`), so
an update touches ``nnz(x)`` weights of each class with ``g_k != 0``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .codes import CRAMMER_SINGER, OVR_HINGE, PERCEPTRON, SOFTMAX
from .scaled import add_to_column, add_to_columns, project_to_ball, renormalize_columns, row_dots


@njit(cache=True, nogil=True)
def sigmoid(z):
    if z >= 0:
        return 1.0 / (1.0 + np.exp(-z))
    e = np.exp(z)
    return e / (1.0 + e)


@njit(cache=True, nogil=True)
def loss_coefficients(loss, scores, y, n_classes):
    """Overwrite ``scores`` (the ``w_k . x``) with ``g_k`` such that ``dl/dw_k = g_k x``.

    Ties in an argmax go to the lowest class index (the paper allows any, Alg. 3 note 1).
    """
    if loss == SOFTMAX:  # Eq. 15: g_k = p_k - [k == y], softmax by log-sum-exp
        m = scores[0]
        for k in range(1, n_classes):
            m = max(m, scores[k])
        z = 0.0
        for k in range(n_classes):
            scores[k] = np.exp(scores[k] - m)
            z += scores[k]
        for k in range(n_classes):
            scores[k] /= z
        scores[y] -= 1.0
    elif loss == CRAMMER_SINGER or loss == PERCEPTRON:
        best = -1
        for k in range(n_classes):
            if loss == CRAMMER_SINGER and k == y:
                continue
            if best < 0 or scores[k] > scores[best]:
                best = k
        violated = best >= 0 and best != y
        if loss == CRAMMER_SINGER:  # Eq. 16: only if 1 + w_k* x - w_y x > 0
            violated = violated and 1.0 + scores[best] - scores[y] > 0.0
        for k in range(n_classes):
            scores[k] = 0.0
        if violated:  # Eq. 16 / 17: g_k* = +1, g_y = -1
            scores[best] = 1.0
            scores[y] = -1.0
    elif loss == OVR_HINGE:  # Pegasos per class: label s = +1 for y, -1 otherwise
        for k in range(n_classes):
            s = 1.0 if k == y else -1.0
            scores[k] = -s if s * scores[k] < 1.0 else 0.0
    else:  # OVR_LOGISTIC: d/dz log(1 + exp(-s z)) = -s * sigmoid(-s z)
        for k in range(n_classes):
            s = 1.0 if k == y else -1.0
            scores[k] = -s * sigmoid(-s * scores[k])


# over 80 lines: the whole mini-batch loop is one compiled call, so the store's scalars stay in locals across groups
@njit(cache=True, nogil=True)
def learn_groups(
    indptr, indices, data, y, group_size,
    V, scale, sqnorm, U, A, n_features, n_classes, t,
    lam, loss, project, per_class_ball, averaged, renormalize_below,
    average_power, average_weight, scores_out,
):  # fmt: skip
    """Run Alg. 1 over consecutive groups of ``group_size`` rows; return the new
    ``(t, n_classes, average_weight)``.

    The average is weighted: step ``t`` enters the running sum with weight ``t**average_power``
    (1 for every step at power 0: the plain average) and ``average_weight`` totals them.

    ``scores_out`` (``(n_rows, K)``, or ``(0, 0)`` for none): row ``i``'s class scores by
    the model as it stands when the row's group is learned, for the classes of the model
    and of the group (those first seen in the group score 0): the scores
    :func:`~streamlearn.kernels.scaled.scores_batch` would give that row at that moment,
    bit for bit (the averaged iterate's with ``averaged``). They cost nothing more without
    the average, since the step computes them anyway: a test-then-train metric for free.

    A class exists for a step once one of the examples learned so far (this group
    included) carries it: ``n_classes`` grows to ``max(y of the group) + 1``, which is what
    a ``learn_one`` loop sees, since class indices are given in order of first appearance.
    Rows beyond the last complete group are ignored (the caller keeps them pending).
    ``V`` must have at least ``n_features`` rows and ``max(y) + 1`` columns."""
    n_groups = (len(indptr) - 1) // group_size
    coef = np.empty((group_size, V.shape[1]))
    touched = np.empty(V.shape[1], np.int64)
    amounts = np.empty(V.shape[1])
    averaged_dots = np.empty(V.shape[1])
    record = scores_out.shape[0] > 0
    radius = 1.0 / np.sqrt(lam)
    for g in range(n_groups):
        first = g * group_size
        for i in range(group_size):
            n_classes = max(n_classes, y[first + i] + 1)
        # sub-gradients at W^(t-1) for every row of the group (Alg. 1 line 8 uses W^(t-1))
        for i in range(group_size):
            row_dots(indptr, indices, data, first + i, V, n_classes, coef[i])
            if record:  # as scores_batch: the averaged iterate (U + A V) / total, or scale * V
                if averaged and average_weight > 0:
                    row_dots(indptr, indices, data, first + i, U, n_classes, averaged_dots)
                    for k in range(n_classes):
                        scores_out[first + i, k] = (averaged_dots[k] + A[k] * coef[i, k]) / average_weight
                else:
                    for k in range(n_classes):
                        scores_out[first + i, k] = coef[i, k] * scale[k]
            for k in range(n_classes):
                coef[i, k] *= scale[k]
            loss_coefficients(loss, coef[i], y[first + i], n_classes)
        t += 1
        if t > 1:  # W^(0) = 0, so the first shrink (by 0) is a no-op
            shrink = 1.0 - 1.0 / t
            for k in range(n_classes):
                scale[k] *= shrink
        step = 1.0 / (lam * t * group_size)
        for i in range(group_size):
            if loss == CRAMMER_SINGER or loss == PERCEPTRON:  # at most two classes: class by class
                # (add_to_columns' per-class road is slower for two classes: it keeps a touched list)
                for k in range(n_classes):
                    if coef[i, k] != 0.0:
                        add_to_column(V, sqnorm, U, A, averaged, project, indptr, indices, data,
                                      first + i, k, -step * coef[i, k] / scale[k])
                continue
            n_touched = 0  # softmax, one-vs-rest: (nearly) every class, in one pass
            for k in range(n_classes):
                if coef[i, k] != 0.0:
                    touched[n_touched] = k
                    amounts[n_touched] = -step * coef[i, k] / scale[k]
                    n_touched += 1
            add_to_columns(V, sqnorm, U, A, averaged, project, indptr, indices, data,
                           first + i, touched, amounts, n_touched)
        if project:
            project_to_ball(scale, sqnorm, n_classes, radius, per_class_ball)
        weight = float(t) ** average_power
        average_weight += weight
        smallest = np.inf
        for k in range(n_classes):
            if averaged:
                A[k] += weight * scale[k]
            smallest = min(smallest, scale[k])
        if smallest < renormalize_below:  # classes on their way there ride along
            renormalize_columns(V, scale, sqnorm, U, A, averaged, n_features, n_classes, np.sqrt(renormalize_below))
    return t, n_classes, average_weight


@njit(cache=True, nogil=True)
def mistakes_in(scores, y, n_before):
    """How many rows are predicted wrongly by their scores among the classes known before them
    (``n_before`` before the first row, then each class as it first appears: indices come in
    order of first appearance); a class not known yet is always missed, ties go to the lowest
    index: :func:`streamlearn.adaptation.mistakes_of`'s count, compiled."""
    count = 0
    known = n_before
    for r in range(len(y)):
        target = y[r]
        if target >= known:
            count += 1
            known = target + 1
            continue
        best = 0
        for k in range(1, known):
            if scores[r, k] > scores[r, best]:
                best = k
        if best != target:
            count += 1
    return count


@njit(cache=True, nogil=True)
def learn_groups_tracked(
    indptr, indices, data, y, group_size,
    V, scale, sqnorm, U, A, n_features, n_classes, t,
    lam, loss, project, per_class_ball, averaged, renormalize_below,
    average_power, average_weight, scores_out,
    tracker_V, tracker_scale, tracker_sqnorm, tracker_U, tracker_A, tracker_lam, tracker_renormalize_below,
    tracker_scores_out,
):  # fmt: skip
    """:func:`learn_groups` for the fast tracker (no average, λ = ``tracker_lam``), then for the
    model, both from the same step counters (``streamlearn.adaptation``); one call instead of
    two, since a ``learn_one`` step's cost is mostly the call. Return the model's ``(t,
    n_classes, average_weight)`` and the rows each one predicted wrongly at its step
    (:func:`mistakes_in` against the classes known before the rows). Both score arrays are
    required, ``(n_rows, K)`` filled with ``-inf``."""
    n_before = n_classes
    learn_groups(indptr, indices, data, y, group_size, tracker_V, tracker_scale, tracker_sqnorm, tracker_U, tracker_A,
                 n_features, n_classes, t, tracker_lam, loss, project, per_class_ball, False, tracker_renormalize_below,
                 average_power, average_weight, tracker_scores_out)
    t, n_classes, average_weight = learn_groups(indptr, indices, data, y, group_size, V, scale, sqnorm, U, A,
                                                n_features, n_classes, t, lam, loss, project, per_class_ball, averaged,
                                                renormalize_below, average_power, average_weight, scores_out)
    return (t, n_classes, average_weight, mistakes_in(scores_out, y, n_before),
            mistakes_in(tracker_scores_out, y, n_before))
