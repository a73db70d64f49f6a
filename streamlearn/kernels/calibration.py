"""The temperature fit's inner pass (:func:`streamlearn.calibration.fit_temperature`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def newton_terms(shifted, centred, beta):
    """``(Σ_i E_i[s], Σ_i Var_i[s])`` under ``p_i = softmax(β shifted_i)``, in one pass over the
    rows: the log-loss's gradient ``Σ_i E_i[s] − Σ_i s_iy_i`` and curvature ``Σ_i Var_i[s]`` in
    β (the module docstring of :mod:`streamlearn.calibration`; Guo et al. 2017, Eq. for the
    temperature's NLL). ``shifted``: each row's scores minus its maximum, ``-inf`` for a class
    that did not exist; ``centred``: the same with 0 there."""
    n_rows, n_classes = shifted.shape
    total_mean = 0.0
    total_variance = 0.0
    for i in range(n_rows):
        z = 0.0
        first = 0.0
        second = 0.0
        for k in range(n_classes):
            w = np.exp(beta * shifted[i, k])
            c = centred[i, k]
            z += w
            first += w * c
            second += w * c * c
        mean = first / z
        total_mean += mean
        total_variance += second / z - mean * mean
    return total_mean, total_variance


@njit(cache=True, nogil=True)
def _row_spread(scores, row):
    """Row ``row``'s largest score minus its smallest over the classes it had (0: none)."""
    largest, smallest = -np.inf, np.inf
    for k in range(scores.shape[1]):
        s = scores[row, k]
        if s != -np.inf:
            largest = max(largest, s)
            smallest = min(smallest, s)
    return largest - smallest if largest > -np.inf else 0.0


@njit(cache=True, nogil=True)
def newest_spread(scores, entered, n):
    """The median, over the ``n`` rows of the window ``scores`` (a ring) entered last, of each
    row's largest score minus its smallest over the classes it had (``-inf``: a class not yet
    there); 0 for no row. What :meth:`streamlearn.calibration.TemperatureCalibration.newest_spread`
    checks every few examples, so a compiled call."""
    window = scores.shape[0]
    n = min(n, entered, window)
    if n == 0:
        return 0.0
    spreads = np.empty(n)
    for i in range(n):
        spreads[i] = _row_spread(scores, (entered - 1 - i) % window)
    return np.median(spreads)


@njit(cache=True, nogil=True)
def first_scale_move(scores, entered, n_rows, every, n, typical, factor):
    """The smallest ``c`` in ``1..n_rows`` with ``entered + c`` a multiple of ``every`` at which
    :func:`newest_spread` ``(scores, entered + c, n)`` is not within ``factor`` of ``typical``
    either way (``v <= factor t`` and ``v factor >= t``), or -1: where, among ``n_rows`` rows just
    written to the ring after ``entered`` (at most the window less ``n``), the temperature's scale
    check fires (:meth:`streamlearn.calibration.TemperatureCalibration.observe`), found in one call
    instead of one per check."""
    c = every - entered % every
    while c <= n_rows:
        v = newest_spread(scores, entered + c, n)
        if not (v <= factor * typical and v * factor >= typical):
            return c
        c += every
    return -1
