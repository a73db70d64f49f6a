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
from .watch import (CHECK_EVERY, PENDING_MODEL, PENDING_TRACKER, RESTART_AT, RESTART_WEIGHT, STEPS,
                    TRACKING, choose_predictor, watch_step)
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


@njit(cache=True, nogil=True)
def learn_groups(
    indptr, indices, data, y, weights, group_size,
    V, scale, sqnorm, U, A, n_features, n_classes, t,
    lam, loss, project, per_class_ball, averaged, renormalize_below,
    average_power, average_weight, scores_out,
):  # fmt: skip
    """Run Alg. 1 over consecutive groups of ``group_size`` rows; return the new
    ``(t, n_classes, average_weight)``.

    ``weights`` (one per row, or empty for all 1): a row's sub-gradient enters Eq. 14's sum
    times its weight, the divisor staying ``r``: the step of ``λ/2 ‖W‖² + (1/r) Σ w_i ℓ_i``
    (river's ``w``, scikit-learn's ``sample_weight`` in ``SGDClassifier``). A weight of 1 is
    the unweighted step bit for bit (``-step * 1.0`` is ``-step``).

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
    work = workspace(group_size, V.shape[1])
    return learn_group_span(indptr, indices, data, y, weights, group_size, 0, (len(indptr) - 1) // group_size,
                            V, scale, sqnorm, U, A, n_features, n_classes, t, lam, loss, project, per_class_ball,
                            averaged, renormalize_below, average_power, average_weight, scores_out, work)


@njit(cache=True, nogil=True)
def workspace(group_size, capacity):
    """The scratch arrays of :func:`learn_group_span`: a group's coefficients, the touched
    classes and their amounts, a row's averaged dots."""
    return (np.empty((group_size, capacity)), np.empty(capacity, np.int64), np.empty(capacity), np.empty(capacity))


# over 80 lines: the whole mini-batch loop is one compiled call, so the store's scalars stay in locals across groups
@njit(cache=True, nogil=True)
def learn_group_span(
    indptr, indices, data, y, weights, group_size, first_group, last_group,
    V, scale, sqnorm, U, A, n_features, n_classes, t,
    lam, loss, project, per_class_ball, averaged, renormalize_below,
    average_power, average_weight, scores_out, work,
):  # fmt: skip
    """:func:`learn_groups` of groups ``first_group .. last_group - 1`` (row indices stay the
    batch's), with the scratch arrays of :func:`workspace`."""
    coef, touched, amounts, averaged_dots = work
    record = scores_out.shape[0] > 0
    weighted = weights.shape[0] > 0
    radius = 1.0 / np.sqrt(lam)
    for g in range(first_group, last_group):
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
            row_step = step * weights[first + i] if weighted else step
            if loss == CRAMMER_SINGER or loss == PERCEPTRON:  # at most two classes: class by class
                # (add_to_columns' per-class road is slower for two classes: it keeps a touched list)
                for k in range(n_classes):
                    if coef[i, k] != 0.0:
                        add_to_column(V, sqnorm, U, A, averaged, project, indptr, indices, data,
                                      first + i, k, -row_step * coef[i, k] / scale[k])
                continue
            n_touched = 0  # softmax, one-vs-rest: (nearly) every class, in one pass
            for k in range(n_classes):
                if coef[i, k] != 0.0:
                    touched[n_touched] = k
                    amounts[n_touched] = -row_step * coef[i, k] / scale[k]
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
def row_mistakes(scores, y, first, last, known, out):
    """Whether each row ``first .. last - 1`` is predicted wrongly by its scores among the classes
    known before it (``known`` before the first row, then each class as it first appears: indices
    come in order of first appearance) into ``out``; a class not known yet is always missed, ties
    go to the lowest index (:func:`streamlearn.adaptation.mistakes_of`, compiled). Returns the count."""
    count = 0
    for r in range(first, last):
        target = y[r]
        wrong = True
        if target < known:
            best = 0
            for k in range(1, known):
                if scores[r, k] > scores[r, best]:
                    best = k
            wrong = best != target
        else:
            known = target + 1
        out[r] = wrong
        count += wrong
    return count


@njit(cache=True, nogil=True)
def restart_schedule(t, average_weight, watch_params, V_scale, U, A, averaged, n_features, store_classes):
    """After a detected change: ``t`` goes back to at most the watch's restart step and the average
    to the current iterate with that many steps' weight (:meth:`MCIDLearner._restart`,
    :meth:`streamlearn.weights.ScaledWeights.restart_average`); returns ``(t, average_weight)``."""
    restarted = min(t, int(watch_params[RESTART_AT]))
    if restarted == t:
        return t, average_weight
    average_weight = watch_params[RESTART_WEIGHT]
    if averaged:
        U[:n_features, :store_classes] = 0.0
        for k in range(store_classes):
            A[k] = average_weight * V_scale[k]
    return restarted, average_weight


# over 80 lines: the model's and the tracker's steps, both mistake counts, the watch and the choice between the two in one call
@njit(cache=True, nogil=True)
def learn_groups_adapting(
    indptr, indices, data, y, weights, group_size,
    V, scale, sqnorm, U, A, n_features, n_classes, t,
    lam, loss, project, per_class_ball, averaged, renormalize_below, average_power, average_weight,
    tracker_V, tracker_scale, tracker_sqnorm, tracker_U, tracker_A, tracker_lam, tracker_renormalize_below,
    store_classes, watch, watch_params, choice, choice_keep, scores_out, spare_scores,
):  # fmt: skip
    """:func:`learn_groups` of the model and of its fast tracker (no average, λ = ``tracker_lam``,
    the same step counters) with ``adapt``'s decisions inside the call (``streamlearn.adaptation``):
    each row's 0/1 mistake by the predicting one feeds the Page-Hinkley test
    (:func:`~streamlearn.kernels.watch.watch_step`, state ``watch``), both mistake counts the
    tracker's choice (:func:`~streamlearn.kernels.watch.choose_predictor`, state ``choice``), and
    at each step that is a multiple of ``CHECK_EVERY`` a change seen restarts the schedule
    (:func:`restart_schedule`) and the choice is made again, fading the old counts by
    ``choice_keep``. The predicting one's scores go to ``scores_out``, the other's to
    ``spare_scores`` (both ``(n_rows, K)`` filled with ``-inf``); ``store_classes`` is the
    classes the model's store holds. Returns the model's ``(t, n_classes, average_weight)``:
    the same state as learning the rows one span at a time with those decisions in Python
    between spans (``tests/test_tracker.py``)."""
    n_groups = (len(indptr) - 1) // group_size
    work = workspace(group_size, max(V.shape[1], tracker_V.shape[1]))
    mistakes = np.empty(n_groups * group_size, np.bool_)
    check_every = int(watch_params[CHECK_EVERY])
    g = 0
    while g < n_groups:
        last = min(n_groups, g + check_every - int(watch[STEPS]) % check_every)
        tracking = choice[TRACKING] != 0.0
        model_out = spare_scores if tracking else scores_out
        tracker_out = scores_out if tracking else spare_scores
        n_before = n_classes
        learn_group_span(indptr, indices, data, y, weights, group_size, g, last, tracker_V, tracker_scale, tracker_sqnorm,
                         tracker_U, tracker_A, n_features, n_classes, t, tracker_lam, loss, project, per_class_ball,
                         False, tracker_renormalize_below, average_power, average_weight, tracker_out, work)
        t, n_classes, average_weight = learn_group_span(
            indptr, indices, data, y, weights, group_size, g, last, V, scale, sqnorm, U, A, n_features, n_classes, t, lam, loss,
            project, per_class_ball, averaged, renormalize_below, average_power, average_weight, model_out, work)
        first_row, last_row = g * group_size, last * group_size
        other = row_mistakes(spare_scores, y, first_row, last_row, n_before, mistakes)
        predicting = row_mistakes(scores_out, y, first_row, last_row, n_before, mistakes)  # last: the watch reads these
        choice[PENDING_MODEL] += other if tracking else predicting
        choice[PENDING_TRACKER] += predicting if tracking else other
        for step in range(g, last):
            if watch_step(watch, watch_params, mistakes, step * group_size, group_size):
                t, average_weight = restart_schedule(t, average_weight, watch_params, scale, U, A, averaged,
                                                     n_features, store_classes)
        if watch[STEPS] % check_every == 0.0:
            choose_predictor(choice, choice_keep)
        g = last
    return t, n_classes, average_weight
