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


#: the constants as the compiled steps take them (:mod:`streamlearn.kernels.calibration`)
SETTINGS = np.array([REFIT_EVERY, MIN_EXAMPLES, FLAT_NATS, SPAN_NATS, PRIOR_EXAMPLES, MAX_ITERATIONS, SCALE_FACTOR,
                     NEWEST_ROWS, SCALE_CHECK_EVERY], np.float64)


def fit_temperature(scores: np.ndarray, targets: np.ndarray, start: float = 1.0) -> float:
    """The β minimising the log-loss of ``softmax(β scores)`` on ``targets`` plus
    :data:`PRIOR_EXAMPLES` example's worth of uniform targets spread over the rows (see the
    module docstring), by Newton's method on the convex L(β), each step kept within a factor 4 of
    the last, from ``start`` (the compiled :func:`~streamlearn.kernels.calibration.fit_beta` the
    window's refits run). ``scores`` may hold ``-inf`` for classes that did not exist.

    >>> s = np.array([[2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0]])
    >>> beta = fit_temperature(s, np.array([0, 1, 1, 1]))   # 3 of 4 right, and one uniform: p = 3.5 / 5
    >>> round(float(1 / (1 + np.exp(-2 * beta))), 4)
    0.7
    """
    scores, targets = np.ascontiguousarray(scores, np.float64), np.ascontiguousarray(targets, np.int64)
    return float(_calibration.fit_beta(scores, targets, np.arange(len(targets)), float(start), SETTINGS))


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
        classes existed before the first, see :func:`~streamlearn.base.hide_unknown_classes`),
        one row at a time in one compiled call, each refit where one row at a time makes it."""
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
                self.count_entered(observed + 1)
            if self._log is not None:
                self._observed = observed + 1
            return
        seen = scores.copy()
        hide_unknown_classes(seen, n_before, targets)
        kept = np.flatnonzero(np.isfinite(seen[np.arange(len(targets)), targets]))
        log_positions, log_betas = np.empty(len(kept), np.int64), np.empty(len(kept))
        self.entered, self.fit_spread, self.beta, n_logged = _calibration.enter_rows(
            self.scores, self.targets, self.entered, self.fit_spread, self.beta, np.ascontiguousarray(seen[kept]),
            np.ascontiguousarray(targets[kept], np.int64), observed + kept + 1, SETTINGS, log_positions, log_betas)
        if self._log is not None:
            self._log.extend(zip(log_positions[:n_logged].tolist(), log_betas[:n_logged].tolist()))
            self._observed = observed + len(targets)

    def count_entered(self, observed: int = 0) -> None:
        """Count in the example just written at slot ``entered``; refit β where it makes one due
        (:func:`~streamlearn.kernels.calibration.count_entered`; ``observed``: the rows observed
        since :meth:`start_log` once it is, where a new β takes over). Only a count below or at a
        multiple of :data:`SCALE_CHECK_EVERY` can make one due (every refit point is one:
        ``tests/test_calibration.py``), so only those call the kernel (one call costs ~2 µs)."""
        if (self.entered + 1) % SCALE_CHECK_EVERY and self.entered + 1 > SCALE_CHECK_EVERY:
            self.entered += 1
            return
        self.beta, self.fit_spread, refitted = _calibration.count_entered(self.scores, self.targets, self.entered,
                                                                          self.fit_spread, self.beta, SETTINGS)
        self.entered += 1
        if refitted and self._log is not None:
            self._log.append((observed, self.beta))

    def newest_spread(self) -> float:
        """The median spread of the :data:`NEWEST_ROWS` rows entered last (0: none)."""
        return float(_calibration.newest_spread(self.scores, self.entered, NEWEST_ROWS))

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
