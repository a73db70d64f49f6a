"""The one-example road for small records: ``predict_one``, ``learn_one``, ``decision_function_one``
and (calibrated) ``predict_proba_one`` of an MCID learner in one call each of a C extension
(``streamlearn/kernels/small_records.c``), built at install beside the ahead-of-time kernels.

A dict of ten features costs river's pure-Python ``LogisticRegression`` a few microseconds per
``predict_one`` + ``learn_one``; the general road (validation in NumPy, one call of a numba kernel
per step, the change watch, the tracker's choice and the calibration window in Python) costs
several times that, most of it in the calls themselves. The C road encodes the dict (with ``bins``,
adds its bins: :mod:`streamlearn.binning`), takes the fast tracker's and the averaged model's steps,
counts both mistakes for the tracker's choice, updates the Page-Hinkley test and writes the
calibration window's row, with every operation of the numba kernels in the same order: the model
is the same bit for bit whichever road an example takes (``tests/test_small_records.py``). What is rare stays in Python: a restart, the tracker's choice
every :data:`~streamlearn.adaptation.CHECK_EVERY` steps, the temperature's refit. Scores are the
general road's bit for bit, and probabilities too where NumPy's exponential is the C library's
(NumPy's own vectorised one, on some CPUs, may differ in the last bit).

It serves an example of weight 1 when the learner runs one λ (``batch_size=1``, no ``standardize``, no ``n_bits``;
with or without ``adapt``'s watch and tracker and ``calibrate``'s window), every name of the dict and
its label are known, the values are finite ``float`` (NumPy's ``float64`` too) or ``int`` up to 2⁵³,
there are fewer than 64 of them, for up to 64 classes; any other example takes the general road,
which also raises the errors. Without the extension (no C compiler at install) every example takes
the general road: same results, slower.

>>> from streamlearn import MulticlassLogisticRegression
>>> model = MulticlassLogisticRegression()
>>> for i in range(200):
...     model.learn_one({"a": float(i % 2), "b": 1.0}, "odd" if i % 2 else "even")
>>> model.predict_one({"a": 1.0, "b": 1.0})
'odd'
"""

from __future__ import annotations

from ..adaptation import CHECK_EVERY
from ..kernels import small_records_road

#: the C extension (``None`` when it was not built: the general road serves every example)
compiled_road = small_records_road()

#: whether the C road serves the examples it can (tests turn it off to compare with the general road)
ENABLED = compiled_road is not None


class SmallRecordRoad:
    """``predict_one`` / ``learn_one`` through the C road when it can serve the example, else the
    general road of :class:`~streamlearn.base.StreamClassifier` (see the module docstring)."""

    #: the constants the C road takes, ``(lam, tracker_lam, loss, per_class_ball, average_power, CHECK_EVERY,
    #: the model's and the tracker's default renormalisation thresholds)``; ``False``: a setting the road does
    #: not serve; ``None``: not looked at yet (``_init_model`` clears it)
    _small_record_setting = None

    def _small_record_constants(self):
        """:attr:`_small_record_setting`, worked out on first use (these never change after ``_init_model``)."""
        from .solver import default_renormalization_threshold as threshold  # (solver imports this module)

        served = self._scaler is None and len(self._candidates) == 1
        setting = (self._lambdas[0], self._tracker_lam, self._loss, self._per_class_ball, self._average_power,
                   CHECK_EVERY, threshold(self._candidates[0]), threshold(self._tracker)) if served else False
        self._small_record_setting = setting
        return setting

    def _road_tables(self):
        """The vocabulary's tables (:meth:`~streamlearn.features.FeatureSpace.name_columns`) for the C
        road when it may serve this learner's one-example calls, else ``None`` (a learner it does not
        serve predicts on the general road, which keeps the row for ``learn_one``)."""
        if not ENABLED or self.batch_size != 1 or self._pending_y:
            return None
        setting = self._small_record_setting
        if setting is None:
            setting = self._small_record_constants()
        return self._features.name_columns() if setting else None

    def _road_scoring(self, x: dict, labels: list, answer):
        """The C road's ``score`` of ``x`` by the predicting store, as ``answer`` asks (``None``: the class
        index; ``"scores"``; a temperature's ``beta``: probabilities), or ``None``: the general road."""
        tables = self._road_tables() if labels else None
        if tables is None:
            return None
        choice = self._tracker_choice
        store = self._tracker if choice is not None and choice.tracking else self._candidates[0]
        out = compiled_road.score(x, tables, self._intercept_column, self._intercept_scale.value, store, labels,
                                  self._average_weight, answer, self._bins)
        if out is not None:
            self._encoded_last = None  # nothing kept for learn_one: the C road encodes again
        return out

    def predict_one(self, x: dict):
        labels = self._labels.labels
        k = self._road_scoring(x, labels, None)
        return super().predict_one(x) if k is None else labels[k]

    def decision_function_one(self, x: dict) -> dict:
        scores = self._road_scoring(x, self._labels.labels, "scores")
        return super().decision_function_one(x) if scores is None else scores

    def predict_proba_one(self, x: dict) -> dict:
        calibration = self._calibration  # (without it, the family's own probabilities: the general road)
        proba = None if calibration is None else self._road_scoring(x, self._labels.labels, calibration.beta)
        return super().predict_proba_one(x) if proba is None else proba

    def learn_one(self, x: dict, y, w: float = 1.0) -> None:
        tables = self._road_tables() if w == 1.0 and self.class_weight is None else None  # (weighted: the general road)
        target = -1 if tables is None else self._labels.known_class(y)
        if target < 0:
            return super().learn_one(x, y, w)
        scale, watch = self._intercept_scale, self._watch
        out = compiled_road.learn(x, tables, self._intercept_column, scale.value, target, len(self._labels.labels),
                                  self._candidates[0], self._tracker, self._n_learned_classes, self._t,
                                  self._average_weight, self._tracker_choice, self._small_record_setting, self.project,
                                  self.renormalize_below, watch, self._calibration, self._bins)
        if out is None:
            return super().learn_one(x, y, w)
        self._t, self._n_learned_classes, self._average_weight, due, entered, mean_square = out
        self._encoded_last = None
        if not scale.settled and (self._intercept_column >= 0 or self._bins is not None):
            scale.count_row(mean_square)
        if due:  # the step is a multiple of CHECK_EVERY: act on a change seen, then choose the predictor
            if watch.take_change():
                self._restart()
            self._check_tracker()
        if entered:
            self._calibration.count_entered()
