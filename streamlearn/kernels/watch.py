"""The change watch and the tracker's choice of :mod:`streamlearn.adaptation` inside a learning
kernel, so that a learner whose whole batch is one compiled call (the MCID learners,
``ExtremeSVM``'s dense store) needs no Python between the steps where a detected change may be
acted on.

The state is :meth:`streamlearn.adaptation.ChangeWatch.as_array`'s float64 array (slots below),
the parameters :func:`streamlearn.adaptation.watch_params`'. The arithmetic is
:class:`streamlearn.adaptation.PageHinkleyUp`'s (river's ``PageHinkley(mode="up")``), operation
for operation, so a kernel and the Python watch fire at the same example
(``tests/test_adaptation.py`` checks it against the Python watch, the reference).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: slots of the watch's state array
N, MEAN, TOTAL, LOWEST, DETECTED, CHANGE_SEEN, CHANGES, STEPS = range(8)
#: slots of its parameters
THRESHOLD, DELTA, ALPHA, MIN_INSTANCES, CHECK_EVERY, RESTART_AT, RESTART_WEIGHT = range(7)
#: slots of the tracker's choice (:meth:`streamlearn.adaptation.TrackerChoice.as_array`)
PENDING_MODEL, PENDING_TRACKER, RECENT_MODEL, RECENT_TRACKER, TRACKING, SWITCHES = range(6)


@njit(cache=True, nogil=True)
def watch_step(watch, params, mistakes, first, n_rows):
    """Feed the 0/1 ``mistakes[first : first + n_rows]`` of one step to the Page-Hinkley test,
    count the step, and say whether a change must be acted on now: one was seen and the step is
    a multiple of ``CHECK_EVERY`` (the change is then counted, as ``ChangeWatch.take_change``)."""
    n, mean, total, lowest = watch[N], watch[MEAN], watch[TOTAL], watch[LOWEST]
    detected = watch[DETECTED] != 0.0
    for i in range(first, first + n_rows):
        x = 1.0 if mistakes[i] else 0.0
        if detected:
            n, mean, total, lowest = 0.0, 0.0, 0.0, np.inf
        n += 1.0
        mean += (x - mean) / n
        total = params[ALPHA] * total + (x - mean) - params[DELTA]
        if total < lowest:
            lowest = total
        detected = n >= params[MIN_INSTANCES] and total - lowest > params[THRESHOLD]
        if detected:
            watch[CHANGE_SEEN] = 1.0
    watch[N], watch[MEAN], watch[TOTAL], watch[LOWEST] = n, mean, total, lowest
    watch[DETECTED] = 1.0 if detected else 0.0
    watch[STEPS] += 1.0
    if watch[STEPS] % params[CHECK_EVERY] == 0.0 and watch[CHANGE_SEEN] != 0.0:
        watch[CHANGE_SEEN] = 0.0
        watch[CHANGES] += 1.0
        return True
    return False


@njit(cache=True, nogil=True)
def choose_predictor(choice, keep):
    """:meth:`streamlearn.adaptation.TrackerChoice.check` on its array: fold the pending mistake
    counts into the recent ones (the old faded by ``keep``) and let the one that erred less predict."""
    choice[RECENT_MODEL] = choice[RECENT_MODEL] * keep + choice[PENDING_MODEL]
    choice[RECENT_TRACKER] = choice[RECENT_TRACKER] * keep + choice[PENDING_TRACKER]
    choice[PENDING_MODEL] = choice[PENDING_TRACKER] = 0.0
    tracking = choice[RECENT_TRACKER] < choice[RECENT_MODEL]
    if tracking != (choice[TRACKING] != 0.0):
        choice[SWITCHES] += 1.0
    choice[TRACKING] = 1.0 if tracking else 0.0
