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
def newest_spread(scores, entered, n):
    """The median, over the ``n`` rows of the window ``scores`` (a ring) entered last, of each
    row's largest score minus its smallest over the classes it had (``-inf``: a class not yet
    there); 0 for no row. What :meth:`streamlearn.calibration.TemperatureCalibration.newest_spread`
    checks every few examples, so a compiled call."""
    window, n_classes = scores.shape
    n = min(n, entered, window)
    if n == 0:
        return 0.0
    spreads = np.empty(n)
    for i in range(n):
        row = (entered - 1 - i) % window
        largest, smallest = -np.inf, np.inf
        for k in range(n_classes):
            s = scores[row, k]
            if s != -np.inf:
                largest = max(largest, s)
                smallest = min(smallest, s)
        spreads[i] = largest - smallest if largest > -np.inf else 0.0
    return np.median(spreads)
