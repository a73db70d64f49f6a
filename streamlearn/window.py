"""Stream mode of the batch learners that revisit their data: keep a window of the last
``window`` examples and refit on it every ``refit_every`` examples.

Used by the least-squares chains of 004 (:class:`~streamlearn.CalibratedLeastSquares`,
:class:`~streamlearn.StagewiseRegression`) and the ℓp-norm multi-class SVM of 001
(:class:`~streamlearn.LpNormMulticlassSVM`). Examples enter one by one, so ``learn_many``
equals the ``learn_one`` loop; between refits the predictions are those of the last fit.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .base import check_positive
from .batches import SparseRows


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

    def _init_window(self) -> None:
        self._window_rows: deque = deque(maxlen=self.window)  # (columns, values, class) of the last `window` examples
        self._since_refit = 0
        self._window_start = 0  # stream position of the window's first example
        # classes seen up to the last example entered (labels are indexed in order of first
        # appearance; a batch registers its labels before its examples enter one by one)
        self._classes_so_far = 0

    @property
    def n_window_rows(self) -> int:
        """Examples in the refit window now (at most ``window``)."""
        return len(self._window_rows)

    def _learn_groups(self, rows: SparseRows, y: np.ndarray) -> None:
        for i in range(rows.n_rows):
            lo, hi = rows.indptr[i], rows.indptr[i + 1]
            if len(self._window_rows) == self.window:  # the append below drops the oldest
                self._window_start += 1
            self._window_rows.append((rows.indices[lo:hi].copy(), rows.data[lo:hi].copy(), int(y[i])))
            self._classes_so_far = max(self._classes_so_far, int(y[i]) + 1)
            self._since_refit += 1
            if self._since_refit >= self.refit_every:
                self._refit_window()
                self._since_refit = 0

    def _refit_window(self) -> None:
        raise NotImplementedError

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
        return {"window": [[c, v, k] for c, v, k in self._window_rows], "since_refit": self._since_refit,
                "window_start": self._window_start, "classes_so_far": self._classes_so_far}

    def _restore_window(self, model: dict) -> None:
        self._window_rows = deque(((np.asarray(c, np.int64), np.asarray(v, np.float64), int(k)) for c, v, k in model["window"]),
                                  maxlen=self.window)
        self._since_refit = int(model["since_refit"])
        # absent in states written before they existed
        self._window_start = int(model.get("window_start", 0))
        self._classes_so_far = int(model.get("classes_so_far", max([k + 1 for _, _, k in self._window_rows], default=0)))
