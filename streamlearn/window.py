"""Stream mode of the batch learners that revisit their data: keep a window of the last
``window`` examples and refit on it every ``refit_every`` examples.

Used by the least-squares chains of 004 (:class:`~streamlearn.CalibratedLeastSquares`,
:class:`~streamlearn.StagewiseRegression`) and the ℓp-norm multi-class SVM of 001
(:class:`~streamlearn.LpNormMulticlassSVM`). Examples enter one by one, so ``learn_many``
equals the ``learn_one`` loop; between refits the predictions are those of the last fit.
The examples entered since the last fit are :attr:`n_pending`: ``flush()`` (the end of a finite
stream; the runner calls it) refits on the window so that none is left out. Before its first
fit a learner has no model (:attr:`has_model` is False) and predicts the frequencies of the
classes it has seen (river's API asks for a distribution after the first ``learn_one``). Each
example's weight stays with it in the window and weighs it in every refit it is part of.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .checks import check_positive
from .batches import SparseRows
from .sample_weights import weights_or_none


class RefitWindow:
    """Mixin for a :class:`~streamlearn.base.StreamClassifier` with ``window`` and
    ``refit_every`` parameters: it implements ``_learn_groups`` and calls the learner's
    ``_refit_window()`` every ``refit_every`` examples; the learner reads the window with
    :meth:`_window_batch` and states the window in its checkpoints with
    :meth:`_export_window` / :meth:`_restore_window`."""

    batch_size = 1

    def _check_window(self) -> None:
        check_positive("window", self.window, integer=True)
        check_positive("refit_every", self.refit_every, integer=True)

    #: each window example's weight enters the refit's problem (a learner that takes weights)
    takes_weights = True

    def _init_window(self) -> None:
        self._window_rows: deque = deque(maxlen=self.window)  # (columns, values, class) of the last `window` examples
        self._window_weights: deque = deque(maxlen=self.window)  # their weights
        self._since_refit = 0
        self._window_start = 0  # stream position of the window's first example
        # classes seen up to the last example entered (labels are indexed in order of first
        # appearance; a batch registers its labels before its examples enter one by one)
        self._classes_so_far = 0
        self._columns_so_far = 0  # likewise the vocabulary columns the examples entered so far have met
        self._has_fit = False  # a refit or fit() has made a model

    @property
    def n_window_rows(self) -> int:
        """Examples in the refit window now (at most ``window``)."""
        return len(self._window_rows)

    @property
    def n_pending(self) -> int:
        """Examples entered since the last fit: the model has not learned them until the next
        refit, or ``flush()``."""
        return self._since_refit

    def _prior(self) -> np.ndarray | None:
        if self._has_fit:
            return None
        counts = np.bincount([k for _, _, k in self._window_rows], minlength=len(self.classes))[: len(self.classes)]
        return counts / counts.sum() if counts.sum() else np.full(len(self.classes), 1.0 / max(len(self.classes), 1))

    def flush(self) -> None:
        """Refit on the window now when examples entered it since the last fit (the end of a
        finite stream: without it its last ``n % refit_every`` examples would never be learned).

        >>> from streamlearn import LpNormMulticlassSVM
        >>> model = LpNormMulticlassSVM(refit_every=1000)
        >>> model.learn_many([{"a": 1.0}, {"a": -1.0}, {"a": -2.0}], ["x", "y", "y"])
        >>> model.n_pending, model.has_model, model.predict_proba_one({"a": 1.0})
        (3, False, {'x': 0.3333333333333333, 'y': 0.6666666666666666})
        >>> model.flush()
        >>> model.n_pending, model.has_model, model.predict_one({"a": 1.0})
        (0, True, 'x')
        """
        if self._since_refit:
            self._refit()

    def _refit(self) -> None:
        self._refit_window()
        self._since_refit = 0
        self._has_fit = True

    def _learn_groups(self, rows: SparseRows, y: np.ndarray, scores=None, weights: np.ndarray | None = None) -> None:
        for i in range(rows.n_rows):
            lo, hi = rows.indptr[i], rows.indptr[i + 1]
            if len(self._window_rows) == self.window:  # the append below drops the oldest
                self._window_start += 1
            self._window_rows.append((rows.indices[lo:hi].copy(), rows.data[lo:hi].copy(), int(y[i])))
            self._window_weights.append(1.0 if weights is None else float(weights[i]))
            self._classes_so_far = max(self._classes_so_far, int(y[i]) + 1)
            if hi > lo:
                self._columns_so_far = max(self._columns_so_far, int(rows.indices[lo:hi].max()) + 1)
            self._since_refit += 1
            if self._since_refit >= self.refit_every:
                self._refit()

    def _refit_window(self) -> None:
        raise NotImplementedError

    def _window_weight_array(self) -> np.ndarray | None:
        """The window's examples' weights (``None``: every one is 1)."""
        return weights_or_none(np.fromiter(self._window_weights, np.float64, len(self._window_weights)))

    def _window_batch(self) -> tuple[SparseRows, np.ndarray]:
        """The window's examples as sparse rows (vocabulary columns) and class indices."""
        lengths = [len(cols) for cols, _, _ in self._window_rows]
        indptr = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        if not self._window_rows:
            return SparseRows(indptr, np.zeros(0, np.int64), np.zeros(0)), np.zeros(0, np.int64)
        indices = np.concatenate([cols for cols, _, _ in self._window_rows])
        data = np.concatenate([vals for _, vals, _ in self._window_rows])
        return SparseRows(indptr, indices, data), np.array([k for _, _, k in self._window_rows], np.int64)

    def _export_window(self) -> dict:
        state = {"window": [[c, v, k] for c, v, k in self._window_rows], "since_refit": self._since_refit,
                 "window_start": self._window_start, "classes_so_far": self._classes_so_far,
                 "columns_so_far": self._columns_so_far, "has_fit": self._has_fit}
        if self._window_weight_array() is not None:  # (an unweighted window's state reads as before)
            state["window_w"] = list(self._window_weights)
        return state

    def _restore_window(self, model: dict) -> None:
        self._window_rows = deque(((np.asarray(c, np.int64), np.asarray(v, np.float64), int(k)) for c, v, k in model["window"]),
                                  maxlen=self.window)
        self._window_weights = deque((float(w) for w in model.get("window_w", [1.0] * len(self._window_rows))),
                                     maxlen=self.window)
        self._since_refit = int(model["since_refit"])
        # absent in states written before they existed
        self._window_start = int(model.get("window_start", 0))
        self._classes_so_far = int(model.get("classes_so_far", max([k + 1 for _, _, k in self._window_rows], default=0)))
        self._columns_so_far = int(model.get("columns_so_far", max([int(c.max()) + 1 for c, _, _ in self._window_rows if len(c)],
                                                                   default=0)))
        self._has_fit = bool(model.get("has_fit", True))  # states before it predicted with whatever they held
