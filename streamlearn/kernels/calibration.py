"""The temperature's compiled steps (:mod:`streamlearn.calibration`): the fit of β by Newton's
method on the window's log-loss, the newest rows' scale, and a batch's rows entering the window
with the refits they make due, one row at a time as the one-example road enters them.

``settings`` is :data:`streamlearn.calibration.SETTINGS`: ``(REFIT_EVERY, MIN_EXAMPLES, FLAT_NATS,
SPAN_NATS, PRIOR_EXAMPLES, MAX_ITERATIONS, SCALE_FACTOR, NEWEST_ROWS, SCALE_CHECK_EVERY)``."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def row_extremes(scores, row):
    """Row ``row``'s ``(largest, smallest)`` score over the classes it had (``-inf``: a class not
    yet there); ``(-inf, inf)`` for a row with none."""
    largest, smallest = -np.inf, np.inf
    for k in range(scores.shape[1]):
        s = scores[row, k]
        if s != -np.inf:
            largest = max(largest, s)
            smallest = min(smallest, s)
    return largest, smallest


@njit(cache=True, nogil=True)
def row_spread(scores, row):
    """Row ``row``'s largest score minus its smallest (:func:`row_extremes`); 0 for a row with none."""
    largest, smallest = row_extremes(scores, row)
    return largest - smallest if largest > -np.inf else 0.0


@njit(cache=True, nogil=True)
def within_factor(value, typical, factor):
    """Whether ``value`` is within ``factor`` of ``typical`` either way."""
    return value <= factor * typical and value * factor >= typical


@njit(cache=True, nogil=True)
def newest_spread(scores, entered, n):
    """The median, over the ``n`` rows of the window ``scores`` (a ring) entered last, of
    :func:`row_spread`; 0 for no row."""
    window = scores.shape[0]
    n = min(n, entered, window)
    if n == 0:
        return 0.0
    spreads = np.empty(n)
    for i in range(n):
        spreads[i] = row_spread(scores, (entered - 1 - i) % window)
    return np.median(spreads)


@njit(cache=True, nogil=True)
def newton_terms(scores, rows, maxima, beta):
    """``(Σ_i E_i[s], Σ_i Var_i[s])`` under ``p_i = softmax(β s_i)`` over ``scores[rows]``, each
    row shifted by its maximum (``maxima``, per entry of ``rows``): the log-loss's gradient
    ``Σ_i E_i[s] − Σ_i s_iy_i`` and curvature ``Σ_i Var_i[s]`` in β (Guo et al. 2017's
    temperature NLL; :mod:`streamlearn.calibration`)."""
    total_mean = 0.0
    total_variance = 0.0
    for j in range(len(rows)):
        z = 0.0
        first = 0.0
        second = 0.0
        for k in range(scores.shape[1]):
            s = scores[rows[j], k]
            if s == -np.inf:
                continue  # a class that did not exist: p = 0
            c = s - maxima[j]
            w = np.exp(beta * c)
            z += w
            first += w * c
            second += w * c * c
        mean = first / z
        total_mean += mean
        total_variance += second / z - mean * mean
    return total_mean, total_variance


@njit(cache=True, nogil=True)
def fit_beta(scores, targets, rows, start, settings):
    """The β > 0 minimising the log-loss of ``softmax(β scores[rows])`` on ``targets[rows]`` plus
    ``PRIOR_EXAMPLES`` example's worth of uniform targets spread over the rows, by Newton's method
    on the convex L(β) from ``start``, each step within a factor 4 of the last and β within
    ``[FLAT_NATS, SPAN_NATS]`` / the rows' mean spread; ``start`` when there is no row or every
    row's scores are tied. Each row's sums run over its classes in order."""
    n = len(rows)
    if n == 0:
        return start
    flat_nats, span_nats, prior_examples, max_iterations = settings[2], settings[3], settings[4], int(settings[5])
    maxima = np.empty(n)
    spread = 0.0
    uniform = 0.0
    total_true = 0.0
    for j in range(n):
        row = rows[j]
        largest, smallest = row_extremes(scores, row)
        total, count = 0.0, 0
        for k in range(scores.shape[1]):
            if scores[row, k] != -np.inf:
                total += scores[row, k] - largest
                count += 1
        maxima[j] = largest
        spread += largest - smallest
        uniform += total / count
        total_true += scores[row, targets[row]] - largest
    spread /= n
    if not spread > 0.0:
        return start
    low, high = flat_nats / spread, span_nats / spread
    prior = prior_examples / n
    total_true += prior * uniform
    beta = min(max(start, low), high)
    for _ in range(max_iterations):
        total_mean, curvature = newton_terms(scores, rows, maxima, beta)
        total_mean *= 1.0 + prior
        curvature *= 1.0 + prior
        gradient = total_mean - total_true
        if curvature > 0.0:
            step = beta - gradient / curvature
        else:
            step = 4.0 * beta if gradient < 0.0 else 0.0
        after = min(max(step, beta / 4.0, low), 4.0 * beta, high)
        if abs(after - beta) <= 1e-7 * beta:
            return after
        beta = after
    return beta


@njit(cache=True, nogil=True)
def next_refit(entered, settings):
    """The count of examples entered at which β is next refitted, after ``entered``: ``MIN_EXAMPLES``,
    then each doubling up to ``REFIT_EVERY``, then every ``REFIT_EVERY``."""
    refit_every, min_examples = int(settings[0]), int(settings[1])
    if entered >= refit_every // 2:
        return (entered // refit_every + 1) * refit_every
    power = 1
    while power <= entered:
        power *= 2
    return max(min_examples, power)


@njit(cache=True, nogil=True)
def refit(scores, targets, entered, beta, typical, settings):
    """β fitted from ``beta`` on the newest half of the window (at most all of it, at least one
    row), of the rows whose spread is within ``SCALE_FACTOR`` of ``typical``, the newest rows'
    median spread (the fast tracker's and the averaged model's scores differ ~100x)."""
    window = scores.shape[0]
    n_recent = max(1, min(min(entered, window), entered // 2))
    rows = np.empty(n_recent, np.int64)
    n = 0
    for i in range(n_recent):
        slot = (entered - 1 - i) % window
        if typical > 0.0 and not within_factor(row_spread(scores, slot), typical, settings[6]):
            continue
        rows[n] = slot
        n += 1
    return fit_beta(scores, targets, rows[:n], beta, settings)


@njit(cache=True, nogil=True)
def count_entered(scores, targets, entered, fit_spread, beta, settings):
    """One more example entered the window (its row written at slot ``entered``): ``(β, spread,
    refitted)`` -- refitted when the count reaches :func:`next_refit`, or a multiple of
    ``SCALE_CHECK_EVERY`` where the newest rows' median spread moved past ``SCALE_FACTOR`` from
    ``fit_spread`` (the last fit's)."""
    due = next_refit(entered, settings)
    entered += 1
    checked = entered == due or entered % int(settings[8]) == 0
    if not checked:
        return beta, fit_spread, False
    spread = newest_spread(scores, entered, int(settings[7]))
    if entered != due and within_factor(spread, fit_spread, settings[6]):
        return beta, fit_spread, False
    return refit(scores, targets, entered, beta, spread, settings), spread, True


@njit(cache=True, nogil=True)
def enter_rows(scores, targets, entered, fit_spread, beta, rows, row_targets, positions, settings, log_positions,
               log_betas):
    """Enter ``rows`` (prequential scores, ``-inf`` for classes new at their turn) with
    ``row_targets`` one at a time into the window ``scores``/``targets`` (a ring, as wide as
    ``rows`` or wider), each followed by :func:`count_entered`; a refit after row ``i`` logs
    ``positions[i]`` and the new β. Returns ``(entered, fit_spread, beta, n_logged)``."""
    window, width = scores.shape
    n_logged = 0
    for i in range(rows.shape[0]):
        slot = entered % window
        for k in range(rows.shape[1]):
            scores[slot, k] = rows[i, k]
        for k in range(rows.shape[1], width):
            scores[slot, k] = -np.inf
        targets[slot] = row_targets[i]
        beta, fit_spread, refitted = count_entered(scores, targets, entered, fit_spread, beta, settings)
        entered += 1
        if refitted:
            log_positions[n_logged] = positions[i]
            log_betas[n_logged] = beta
            n_logged += 1
    return entered, fit_spread, beta, n_logged
