"""Probabilities worth the name: one temperature, fitted on the prequential scores.

A softmax of a streaming linear model's scores is rarely a calibrated distribution: the
averaged Pegasos iterate with a small λ gives margins of hundreds (``1.0`` against ``1e-200``,
test log-loss far worse than a uniform guess), the hinge and perceptron losses do not estimate
probabilities at all. Temperature scaling (Guo, Pleiss, Sun & Weinberger, *On Calibration of
Modern Neural Networks*, ICML 2017; Platt 1999 in the binary case) fixes the scale with one
parameter: ``p = softmax(β s)`` with the ``β > 0`` that minimises the log-loss

    L(β) = Σ_i [ log Σ_k exp(β s_ik) − β s_iy_i ]        (convex in β)

over the most recent half of the examples learned, at most :data:`WINDOW` of them, each scored
by the model **as it stood before learning it** (the prequential scores the step computes anyway):
a held-out sample that costs no extra pass and follows the model as it sharpens and as the stream
changes (the older half of a short stream was scored by a model much worse than the one that
predicts now), and of those the rows whose spread of scores is within :data:`SCALE_FACTOR` of the
newest rows' (when the fast tracker takes over from the averaged model, or back, the scores change
scale ~100x: one β cannot serve both; so β is also refitted when, at a multiple of
:data:`SCALE_CHECK_EVERY` examples entered, the newest rows' scale has moved past that factor
from the last fit's). To L is added :data:`PRIOR_EXAMPLES` example's worth of uniform targets spread over
the rows, so that a window without a mistake gives an error probability of the order of the rule
of succession, 1/(n + 2), not certainty. One β leaves every row's argmax alone, so predictions and
accuracy do not change.

β is 0 (uniform probabilities) until an example has entered the window; it is refitted when
:data:`MIN_EXAMPLES` have and each time their count doubles up to :data:`REFIT_EVERY` (a data set
of a hundred rows gets its temperature too), then each time :data:`REFIT_EVERY` more have. The
window and β depend only on the stream, never on how it was cut into calls, so ``learn_many``
equals the ``learn_one`` loop; both are the learner's state and checkpoints resume them exactly
(the window costs a checkpoint 1,024 scores per class, 8 KB each). An example whose class was new
at its turn has no score for it and does not enter the window. In a ``--mix-topic`` group each
member fits its own temperature on the examples it learns (the temperature is not a weight: :mod:`streamlearn.service.mixing` leaves it).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> scores = 100.0 * rng.normal(size=(600, 3))          # margins of hundreds: overconfident
>>> targets = np.where(rng.random(600) < 0.7, scores.argmax(axis=1), rng.integers(0, 3, 600))
>>> calibration = TemperatureCalibration()
>>> calibration.observe(scores, targets, n_before=3)
>>> 0.0 < calibration.beta < 0.1
True
"""

from __future__ import annotations

import numpy as np

from .scores import hide_unknown_classes, tempered_softmax
from .kernels import compiled

_calibration = compiled("calibration")

#: examples the temperature is fitted on (the most recent ones)
WINDOW = 1024
#: refit after this many more examples entered the window (a fit costs a few passes over the window)
REFIT_EVERY = 512
#: the first fit, after this many examples (β is 0 before: uniform probabilities); then 2, 4, ... 512
MIN_EXAMPLES = 1
#: β is kept below SPAN_NATS / (the window's mean spread of scores in a row): on a window the
#: model never missed, the log-loss falls forever as β grows, and a probability of e^-30 is
#: already certainty
SPAN_NATS = 30.0
#: β is kept above this / (the same spread): the probabilities of a model no better than a
#: guess are then uniform to three decimals, and stay a function of the scores
FLAT_NATS = 1e-3
#: the fit's prior: this many examples' worth of uniform targets (the rule of succession), so that
#: a window the model never missed (a short stream, the end of an easy one) does not make it certain
PRIOR_EXAMPLES = 1.0
MAX_ITERATIONS = 60
#: a fit keeps the rows whose spread of scores is within this factor of the newest rows' median
SCALE_FACTOR = 10.0
NEWEST_ROWS = 16
#: every this many examples entered, β is refitted if the newest rows' scale moved past SCALE_FACTOR
#: from the last fit's (a switch between the averaged model and the fast tracker)
SCALE_CHECK_EVERY = 8


def fit_temperature(scores: np.ndarray, targets: np.ndarray, start: float = 1.0) -> float:
    """The β minimising the log-loss of ``softmax(β scores)`` on ``targets`` plus
    :data:`PRIOR_EXAMPLES` example's worth of uniform targets spread over the rows (see the
    module docstring), by Newton's method on the convex L(β), each step kept within a factor 4 of
    the last, from ``start``. ``scores`` may hold ``-inf`` for classes that did not exist.

    >>> s = np.array([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])
    >>> beta = fit_temperature(s, np.array([0, 1, 1, 1]))   # 3 of 4 right, and one uniform: p = 3.5 / 5
    >>> round(float(1 / (1 + np.exp(-2 * beta))), 4)
    0.7
    """
    if len(targets) == 0:
        return start  # no row of the scale in force
    exists = np.isfinite(scores)
    shifted = scores - scores.max(axis=1, keepdims=True)  # <= 0; -inf where a class did not exist (exp: p = 0)
    centred = np.where(exists, shifted, 0.0)  # the same, 0 there: finite in the products below
    spread = float(np.mean(-centred.min(axis=1)))
    if not spread > 0.0:
        return start  # every row's scores are tied: β changes nothing
    low, high = FLAT_NATS / spread, SPAN_NATS / spread
    prior = PRIOR_EXAMPLES / len(targets)
    # Σ_i of row i's mean score; each row summed in order (a pairwise sum would change with the
    # columns of classes not yet there, which differ between a batch and a learn_one loop)
    uniform = float(np.sum(np.cumsum(centred, axis=1)[:, -1] / exists.sum(axis=1)))
    total_true = float(np.sum(centred[np.arange(len(targets)), targets])) + prior * uniform
    beta = min(max(start, low), high)
    shifted, centred = np.ascontiguousarray(shifted), np.ascontiguousarray(centred)
    for _ in range(MAX_ITERATIONS):
        total_mean, curvature = (float(term) * (1.0 + prior) for term in _calibration.newton_terms(shifted, centred, float(beta)))
        gradient = total_mean - total_true
        step = beta - gradient / curvature if curvature > 0.0 else (4.0 * beta if gradient < 0.0 else 0.0)
        after = min(max(step, beta / 4.0, low), 4.0 * beta, high)
        if abs(after - beta) <= 1e-7 * beta:
            return after
        beta = after
    return beta


def next_refit(entered: int) -> int:
    """The count of examples entered at which β is next refitted, after ``entered``.

    >>> [next_refit(n) for n in (0, 1, 3, 32, 100, 511, 512, 1000)]
    [1, 2, 4, 64, 128, 512, 1024, 1024]
    """
    if entered >= REFIT_EVERY // 2:
        return (entered // REFIT_EVERY + 1) * REFIT_EVERY
    return max(MIN_EXAMPLES, 1 << entered.bit_length())


def next_check(entered: int) -> int:
    """The count of examples entered at which β is next refitted or its scale checked: the first
    of :func:`next_refit` and the next multiple of :data:`SCALE_CHECK_EVERY`."""
    return min(next_refit(entered), (entered // SCALE_CHECK_EVERY + 1) * SCALE_CHECK_EVERY)


def within_factor(value, typical: float):
    """Whether ``value`` is within :data:`SCALE_FACTOR` of ``typical`` either way."""
    return (value <= SCALE_FACTOR * typical) & (value * SCALE_FACTOR >= typical)


def row_spreads(scores: np.ndarray) -> np.ndarray:
    """Each row's largest score minus its smallest over the classes it had (``-inf``: a class not
    yet there); every row has at least one."""
    largest = scores.max(axis=1)
    return largest - np.where(scores == -np.inf, largest[:, None], scores).min(axis=1)


def newest_medians(spreads: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each of ``ends``, the median of the :data:`NEWEST_ROWS` ``spreads`` before it (all of
    them when fewer): the newest rows' scale once that many rows have entered. The batch twin of
    the one-row roads' compiled :func:`~streamlearn.kernels.calibration.newest_spread` (one call per
    check there, one array here), equal to it bit for bit (``tests/test_calibration.py``)."""
    medians = np.empty(len(ends))
    full = ends >= NEWEST_ROWS
    if full.any():
        windows = np.lib.stride_tricks.sliding_window_view(spreads, NEWEST_ROWS)
        middle = np.sort(windows[ends[full] - NEWEST_ROWS], axis=1)[:, NEWEST_ROWS // 2 - 1 : NEWEST_ROWS // 2 + 1]
        medians[full] = (middle[:, 0] + middle[:, 1]) / 2  # np.median's mean of the two middle values, without its overhead
    for i in np.flatnonzero(~full):
        medians[i] = np.median(spreads[: ends[i]])
    return medians


class TemperatureCalibration:
    """The window of prequential scores and the β fitted on it (see the module docstring).

    While a batch is learned (:meth:`start_log` to :meth:`stop_log`) it also notes where β
    changed among the rows it observed, so that each row's prediction takes the β of its turn.

    Attributes
    ----------
    beta
        The current temperature's inverse: probabilities are ``softmax(beta * scores)``; 0 (uniform)
        until an example has entered the window.
    entered
        Examples that have entered the window so far.
    """

    _log: list | None = None  # while logging: (rows observed, β from there on), see betas_at
    _observed = 0  # rows observed since start_log

    def __init__(self):
        self.beta = 0.0  # no example scored yet: nothing says how far the scores can be trusted
        self.fit_spread = 0.0  # the newest rows' median spread of scores when β was last fitted
        self.entered = 0
        self.scores = np.zeros((WINDOW, 0))
        self.targets = np.zeros(WINDOW, np.int64)

    def start_log(self) -> None:
        """Count the rows observed from now on, and where β changes among them (:meth:`betas_at`)."""
        self._log, self._observed = [(0, self.beta)], 0

    def stop_log(self) -> None:
        self.__dict__.pop("_log", None), self.__dict__.pop("_observed", None)  # a state without them, as before

    def betas_at(self, observed: np.ndarray) -> np.ndarray:
        """The β in force once ``observed`` rows had been observed since :meth:`start_log` (one per
        entry): the temperature of a prediction made at that point of the stream."""
        log = self._log or [(0, self.beta)]
        starts = np.array([at for at, _ in log])
        return np.array([beta for _, beta in log])[np.searchsorted(starts, observed, side="right") - 1]

    def probabilities(self, scores: np.ndarray) -> np.ndarray:
        return tempered_softmax(scores, self.beta)

    def observe(self, scores: np.ndarray, targets: np.ndarray, n_before: int) -> None:
        """Enter consecutive examples' prequential scores (rows in stream order; ``n_before``
        classes existed before the first, see :func:`~streamlearn.base.hide_unknown_classes`)."""
        if scores.shape[1] > self.scores.shape[1]:  # classes new since: -inf in the older rows
            wider = np.full((WINDOW, scores.shape[1]), -np.inf)
            wider[:, : self.scores.shape[1]] = self.scores
            self.scores = wider
        observed = self._observed  # rows observed before these, since start_log
        if len(targets) == 1:  # learn_one's road: what the general one does, without its arrays
            target = int(targets[0])
            if target < n_before:
                slot = self.entered % WINDOW
                row = self.scores[slot]
                row[:n_before] = scores[0, :n_before]
                if n_before < len(row):
                    row[n_before:] = -np.inf
                self.targets[slot] = target
                self.count_entered(1, observed + 1)
            if self._log is not None:
                self._observed = observed + 1
            return
        seen = scores.copy()
        hide_unknown_classes(seen, n_before, targets)
        kept = np.flatnonzero(np.isfinite(seen[np.arange(len(targets)), targets]))
        seen, n_rows, targets = seen[kept], len(targets), targets[kept]
        spreads = row_spreads(seen)
        first = 0
        while first < len(targets):
            last, refit = self.next_fit(spreads[first:])
            last += first
            slots = (self.entered + np.arange(last - first)) % WINDOW
            self.scores[slots, : seen.shape[1]] = seen[first:last]
            self.scores[slots, seen.shape[1] :] = -np.inf
            self.targets[slots] = targets[first:last]
            self.entered += last - first
            if refit:
                self.refit(observed + int(kept[last - 1]) + 1)
            first = last
        if self._log is not None:
            self._observed = observed + n_rows

    def next_fit(self, spreads: np.ndarray) -> tuple[int, bool]:
        """How many of the rows to come (their ``spreads``, :func:`row_spreads`) enter before the
        next refit, and whether one is due there: at :func:`next_refit`, or at the first multiple
        of :data:`SCALE_CHECK_EVERY` whose newest rows' median spread moved past
        :data:`SCALE_FACTOR` from the last fit's (what :meth:`count_entered` checks row by row).
        Nothing is written, so a fit sees the window as one row at a time would have left it."""
        due = next_refit(self.entered) - self.entered
        limit = min(len(spreads), due)
        steps = np.arange(SCALE_CHECK_EVERY - self.entered % SCALE_CHECK_EVERY, limit + 1, SCALE_CHECK_EVERY)
        if len(steps):
            held = min(NEWEST_ROWS - 1, self.entered)
            history = self.spreads((self.entered - held + np.arange(held)) % WINDOW)
            medians = newest_medians(np.concatenate([history, spreads[:limit]]), steps + held)
            moved = np.flatnonzero(~within_factor(medians, self.fit_spread))
            if len(moved):
                return int(steps[moved[0]]), True
        return limit, limit == due

    def count_entered(self, n: int, observed: int = 0) -> None:
        """Count ``n`` examples in (never past :func:`next_check`); refit β if they reach
        :func:`next_refit`, or a multiple of :data:`SCALE_CHECK_EVERY` where the newest rows' scale
        moved past :data:`SCALE_FACTOR` from the last fit's (``observed``: the rows observed since
        :meth:`start_log` once these are, where a new β takes over)."""
        due, check = next_refit(self.entered), next_check(self.entered)
        self.entered += n
        if self.entered == due or (self.entered == check and not within_factor(self.newest_spread(), self.fit_spread)):
            self.refit(observed)

    def refit(self, observed: int) -> None:
        """Fit β on the newest half of the window, at most :data:`WINDOW` rows, of the newest rows' scale."""
        filled = min(self.entered, WINDOW)
        recent = (self.entered - 1 - np.arange(max(1, min(filled, self.entered // 2)))) % WINDOW
        self.fit_spread = self.newest_spread()
        self.beta = fit_temperature(*self.same_scale(recent, self.fit_spread), self.beta)
        if self._log is not None:
            self._log.append((observed, self.beta))

    def spreads(self, slots: np.ndarray) -> np.ndarray:
        """The :func:`row_spreads` of the window's ``slots``."""
        return row_spreads(self.scores[slots])

    def newest_spread(self) -> float:
        """The median spread of the :data:`NEWEST_ROWS` rows entered last (0: none)."""
        return float(_calibration.newest_spread(self.scores, self.entered, NEWEST_ROWS))

    def same_scale(self, slots: np.ndarray, typical: float) -> tuple[np.ndarray, np.ndarray]:
        """The scores and targets of ``slots`` whose rows' spread is within :data:`SCALE_FACTOR` of
        ``typical``: the scores of another predictor (the fast tracker and the averaged model differ
        ~100x) would fit a temperature for the wrong scale."""
        if not typical > 0.0:
            return self.scores[slots], self.targets[slots]
        kept = slots[within_factor(self.spreads(slots), typical)]
        return self.scores[kept], self.targets[kept]

    def export(self) -> dict:
        filled = min(self.entered, WINDOW)
        return {"beta": self.beta, "entered": self.entered, "fit_spread": self.fit_spread,
                "scores": self.scores[:filled].copy(), "targets": self.targets[:filled].copy()}

    @classmethod
    def restore(cls, state: dict) -> "TemperatureCalibration":
        calibration = cls()
        calibration.beta, calibration.entered = float(state["beta"]), int(state["entered"])
        scores = np.asarray(state["scores"], np.float64)
        calibration.scores = np.full((WINDOW, scores.shape[1]), -np.inf)
        calibration.scores[: len(scores)] = scores
        calibration.targets[: len(scores)] = np.asarray(state["targets"], np.int64)
        # (saved before the scale was kept: the newest rows' is what a fit then would have taken)
        calibration.fit_spread = float(state.get("fit_spread", calibration.newest_spread()))
        return calibration
