"""Predictions of :class:`~streamlearn.memoir.ExtremeSVM` (002): by the exact scan or the
oracle's candidates re-ranked, river's every-class scores, and the oracle's recall of the most
violating class. A mixin of the learner's own room: it reads the learner's state."""

from __future__ import annotations

import numpy as np

from ..batches import SparseRows
from ..features import own_arrays
from ..kernels import compiled
from ..mips import make_oracle
from ..sample_weights import positive_weights

_memoir = compiled("memoir")
_dense = compiled("memoir_dense")
_blocks = compiled("memoir_blocks")
_EMPTY_CANDIDATES = np.zeros((0, 0), np.int64)


class ExtremePredictions:
    """What :class:`~streamlearn.memoir.ExtremeSVM` predicts, and how well its oracle finds violators."""

    def _predict_rows(self, rows: SparseRows, y: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Predicted class index per row (-1: no class yet) and, given ``y`` (class indices,
        -1 unknown), the probability of ``y`` (see :func:`~streamlearn.kernels.memoir.predict_rows`)."""
        n_classes = len(self._labels)
        own_arrays(self)  # its scratch buffers, written by the kernel
        own_arrays(self._store)
        self._room(n_classes)
        indptr, indices, data = rows.own_arrays()
        predicted = np.empty(rows.n_rows, np.int64)
        labels = np.zeros(0, np.int64) if y is None else np.ascontiguousarray(y, np.int64)
        p_true = np.zeros(len(labels))
        if self.dense:  # the columns no learned row named weigh 0: the kernel skips them
            self._store.reserve(0, n_classes)
            if self._predicts_exactly:
                _blocks.predict_rows(indptr, indices, data, self._store.V, self._store.U, self._store.scalars, n_classes,
                                     self._averaged, labels, predicted, p_true)
                return predicted, p_true
            candidates = self._means_candidates(rows)
            _dense.predict_rows(indptr, indices, data, self._store.V, self._store.U, self._store.scalars, n_classes,
                                self._averaged, labels, predicted, p_true, self._scores, self._avg_scores, candidates)
            return predicted, p_true
        self._store.reserve(self._features.n_columns, n_classes, 0)
        exact = self._oracle.exact or self._predicts_exactly
        candidates = _EMPTY_CANDIDATES
        if not exact and n_classes:
            candidates = self._oracle.top(self._sketches, self._row_sketches(indptr, indices, data), self._n_indexed,
                                          self.n_candidates)
        self._stamp = _memoir.predict_rows(indptr, indices, data, self._store.arrays(), self._store.scalars, n_classes,
                                           self._averaged, candidates, exact, self._scores, self._avg_scores,
                                           self._mark, self._stamp, self._touched, labels, predicted, p_true)
        return predicted, p_true

    def predict_one(self, x: dict):
        if not self._labels.labels:
            return None
        cols, vals = self._features.encode_one(x, grow=False)
        rows = self._model_rows(SparseRows(np.array([0, len(cols)], np.int64), cols, vals), learn=False)
        return self._labels.labels[int(self._predict_rows(rows, None)[0][0])]

    def predict_many(self, X):
        rows = self._model_rows(self._features.encode_many(X, grow=False), learn=False)
        if self._labels.labels:
            labels = self._labels.take(self._predict_rows(rows, None)[0])
        else:
            labels = np.full(rows.n_rows, None, dtype=object)
        from ..scores import labels_like

        return labels_like(labels, X)

    def prequential(self, X, y, learn: bool = False, return_proba: bool = False, w=None):
        """As :meth:`StreamClassifier.prequential`, without a ``(rows, K)`` score matrix: the
        batch is scored by the model before it (the exact oracle's softmax over every class; an
        approximate oracle's over its candidates and the true class), then learned. Every
        class's probability (``return_proba``) or unlabelled rows (``y=None``) need the
        ``(rows, K)`` scores: those go the generic way, an exact softmax over every class."""
        if return_proba or y is None:
            return super().prequential(X, y, learn, return_proba, w)
        weights = positive_weights(self, X, w)
        rows = self._encode_labelled(X, y)
        predicted, p_true = self._predict_rows(self._model_rows(rows, learn=False), self.class_indices(y))
        if learn:
            self._learn_rows(self._model_rows(rows, learn=True), self._labels.indices(y, grow=True), None, weights)
        return predicted, p_true

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        """Every class's score (``(rows, K)``: river's API; O(K) per row to write — the learner's own
        predictions re-rank candidates instead), by the weights and the sums the exact scan of
        :meth:`_predict_rows` uses."""
        n_classes = len(self._labels)
        own_arrays(self._store)
        scores = np.zeros((rows.n_rows, n_classes))
        if self.dense:
            self._store.reserve(0, n_classes)
            _blocks.class_scores(*rows.own_arrays(), self._store.V, self._store.U, self._store.scalars, n_classes,
                                self._averaged, scores)
        else:
            _memoir.class_scores(*rows.own_arrays(), self._store.arrays(), self._store.scalars, n_classes, self._averaged,
                                 scores)
        return scores

    @property
    def _predicts_exactly(self) -> bool:
        """``predict_exact``, or by default (``None``) an exact scan but with the means index."""
        return self._means is None if self.predict_exact is None else bool(self.predict_exact)

    def violator_recall(self, X, y) -> float:
        """The share of rows whose most violating class the oracle's candidates (re-ranked)
        find as an exact scan does, at the current model (1.0 for the exact oracle, and for
        ``oracle="means"`` until its index is trained)."""
        rows = self._encode_labelled(X, y)
        targets = np.ascontiguousarray(self._labels.indices(y, grow=False), np.int64)
        keep = targets >= 0
        if self.dense and self._means is not None:
            rows = self._model_rows(rows, learn=False)
            found = [self._dense_violators(rows, targets, candidates)
                     for candidates in (_EMPTY_CANDIDATES, self._means_candidates(rows))]
            return float(np.mean((found[0] == found[1])[keep])) if keep.any() else 1.0
        if self._oracle.exact:
            return 1.0
        found = []
        for use_exact in (True, False):
            saved = self._oracle
            self._oracle = make_oracle("exact") if use_exact else saved
            try:
                found.append(self._violators(rows, targets))
            finally:
                self._oracle = saved
        return float(np.mean((found[0] == found[1])[keep])) if keep.any() else 1.0

    def _dense_violators(self, rows: SparseRows, targets: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """``r`` per row at the current model in the dense store, among ``candidates`` (or every class)."""
        n_classes = len(self._labels)
        self._room(n_classes)
        out = np.full(rows.n_rows, -1, np.int64)
        _dense.violators(*rows.own_arrays(), self._store.V, targets, n_classes, candidates, self.fallback == "lowest",
                         self._rng.copy(), self._scores, out)
        return out

    def _violators(self, rows: SparseRows, targets: np.ndarray) -> np.ndarray:
        """``r`` per row at the current model, by the current oracle (nothing is learned)."""
        n_classes = len(self._labels)
        self._room(n_classes)
        out = np.full(rows.n_rows, -1, np.int64)
        indptr, indices, data = rows.own_arrays()
        self._store.reserve(self._features.n_columns, n_classes, 0)
        candidates = _EMPTY_CANDIDATES if self._oracle.exact else self._oracle.top(
            self._sketches, self._row_sketches(indptr, indices, data), self._n_indexed, self.n_candidates)
        rng = self._rng.copy()  # the model's generator is not advanced by a measurement
        for i in range(rows.n_rows):
            if targets[i] < 0:
                continue
            self._stamp += 1
            out[i] = _memoir.violator(self._store.arrays(), indptr, indices, data, i, targets[i], n_classes, candidates,
                                      self._oracle.exact, self.fallback == "lowest", rng, self._scores, self._mark,
                                      self._stamp, self._touched)
        return out
