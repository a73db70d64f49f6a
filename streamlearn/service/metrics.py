"""Vectorised, checkpointable classification metrics for the runner.

river's metrics (``Accuracy``, ``MacroF1``, ``CrossEntropy``) update one example at a
time and keep their state in Python objects; the runner scores whole batches and must
put its metrics in a msgpack checkpoint. :class:`ClassificationMetrics` keeps exactly the
counts those three metrics need — per class: true positives, predictions and true labels;
the summed log-loss — as arrays, updates them a batch at a time, and gives the same
numbers as river (the tests check it against ``river.metrics`` example by example):

* accuracy = Σ tp / n;
* macro-F1 = mean over every class seen as a label or a prediction of
  2·tp / (predicted + true) (river's ``MacroF1``);
* log-loss = mean of −log p(true class), p clamped to [1e-15, 1 − 1e-15] (river's
  ``CrossEntropy``). One deliberate difference: river adds 0 when the true class is
  missing from the predicted distribution; here a class the model has never seen has
  probability 0 and costs −log 1e-15 ≈ 34.5 (an unseen class must not look like a hit).

An example with no prediction (``None``: the model knew no class, or had not fitted yet) is
left out of all three, as river's ``progressive_val_score`` leaves it out, and counted as
``unscored``.

``weighted=True`` (``--weighted-metrics``) counts each example by its weight: every count above
is a sum of weights (accuracy = Σ w·hit / Σ w, the log-loss a weighted mean), ``weight`` their
sum. Off by default: weights are how a stream is *learned* (a cost, a confidence, a class
balance), while the metrics judge the model on the records it will meet, each once; importance
weights that undo a resampling are the case for turning it on.

>>> m = ClassificationMetrics()
>>> m.update(["a", "b", "a"], ["a", "a", "a"], proba=[0.9, 0.2, 0.6])
>>> {k: round(v, 4) for k, v in m.summary().items()}
{'n': 3, 'accuracy': 0.6667, 'macro_f1': 0.4, 'log_loss': 0.7419, 'unscored': 0}
>>> w = ClassificationMetrics(weighted=True)
>>> w.update(["a", "b", "a"], ["a", "a", "a"], w=[1.0, 2.0, 1.0])
>>> w.summary()["accuracy"], w.summary()["weight"]
(0.5, 4.0)
"""

from __future__ import annotations

import numpy as np

EPS = 1e-15


class ClassificationMetrics:
    """Accuracy, macro-F1 and log-loss over a stream of (label, prediction, p(label))."""

    def __init__(self, weighted: bool = False):
        self.weighted = bool(weighted)
        counts = np.float64 if self.weighted else np.int64  # sums of weights, or of examples
        self._index: dict = {}
        self.labels: list = []
        self.tp = np.zeros(0, counts)
        self.predicted = np.zeros(0, counts)
        self.actual = np.zeros(0, counts)
        self.n = 0
        self.log_loss_sum = 0.0
        self.n_proba = 0.0 if self.weighted else 0  # (the weight of the examples with a probability)
        self.n_unscored = 0

    def _index_of(self, label) -> int:
        k = self._index.get(label)
        if k is None:
            k = self._index[label] = len(self.labels)
            self.labels.append(label)
        return k

    def _indices(self, labels) -> np.ndarray:
        if isinstance(labels, np.ndarray) and labels.dtype.kind in "iub":  # vectorised: one look-up per distinct label
            uniques, inverse = np.unique(labels, return_inverse=True)
            out = np.fromiter((self._index_of(u) for u in uniques.tolist()), np.int64, len(uniques))[inverse]
        else:
            out = np.fromiter((self._index_of(label) for label in labels), np.int64, len(labels))
        if len(self.labels) > len(self.tp):
            grow = len(self.labels) - len(self.tp)
            self.tp, self.predicted, self.actual = (np.concatenate([a, np.zeros(grow, a.dtype)]) for a in (self.tp, self.predicted, self.actual))
        return out

    def update(self, y_true, y_pred, proba=None, w=None) -> None:
        """Add a batch: true labels, predicted labels (``None`` = no prediction: counted as
        unscored, nothing else), optionally the probability each prediction gave to the true label,
        and the examples' weights (``None``: all 1; read only when :attr:`weighted`)."""
        if len(y_true) != len(y_pred):
            raise ValueError("y_true and y_pred differ in length")
        counted = np.asarray(w, np.float64) if self.weighted and w is not None else None
        if isinstance(y_pred, np.ndarray) and y_pred.dtype.kind in "iub":
            true, pred = self._indices(y_true), self._indices(y_pred)
            has_pred = None
        else:
            has_pred = np.array([p is not None for p in y_pred], bool)
            self.n_unscored += int(len(has_pred) - has_pred.sum())
            true = self._indices([t for t, h in zip(y_true, has_pred) if h])
            pred = self._indices([p for p in y_pred if p is not None])
            counted = None if counted is None else counted[has_pred]
        one = 1 if counted is None else counted
        np.add.at(self.actual, true, one)
        np.add.at(self.predicted, pred, one)
        hits = pred == true
        np.add.at(self.tp, true[hits], 1 if counted is None else counted[hits])
        self.n += len(true)
        if proba is not None:
            p = np.asarray(proba, np.float64)
            p = np.clip(p if has_pred is None else p[has_pred], EPS, 1 - EPS)
            if counted is None:
                self.log_loss_sum += float(-np.log(p).sum())
                self.n_proba += len(p)
            else:
                self.log_loss_sum += float(-(counted * np.log(p)).sum())
                self.n_proba += float(counted.sum())

    def summary(self) -> dict:
        """``n``, ``accuracy``, ``macro_f1`` and ``log_loss`` (``None`` where undefined)."""
        seen = (self.predicted + self.actual) > 0
        f1 = 2 * self.tp[seen] / (self.predicted[seen] + self.actual[seen])
        total = self.actual.sum()  # n, or the examples' weight
        summary = {
            "n": self.n,
            "accuracy": float(self.tp.sum() / total) if total else None,
            "macro_f1": float(f1.mean()) if seen.any() else None,
            "log_loss": self.log_loss_sum / self.n_proba if self.n_proba else None,
            "unscored": self.n_unscored,
        }
        return {**summary, "weight": float(total)} if self.weighted else summary

    def export(self) -> dict:
        state = {"labels": list(self.labels), "tp": self.tp, "predicted": self.predicted, "actual": self.actual,
                 "n": self.n, "log_loss_sum": self.log_loss_sum, "n_proba": self.n_proba,
                 "n_unscored": self.n_unscored}
        return {**state, "weighted": True} if self.weighted else state

    @classmethod
    def restore(cls, state: dict) -> "ClassificationMetrics":
        metrics = cls(weighted=bool(state.get("weighted", False)))
        counts = metrics.tp.dtype
        metrics._indices([tuple(label) if isinstance(label, list) else label for label in state["labels"]])
        metrics.tp = np.asarray(state["tp"], counts).copy()
        metrics.predicted = np.asarray(state["predicted"], counts).copy()
        metrics.actual = np.asarray(state["actual"], counts).copy()
        metrics.n, metrics.log_loss_sum = int(state["n"]), float(state["log_loss_sum"])
        metrics.n_proba = float(state["n_proba"]) if metrics.weighted else int(state["n_proba"])
        metrics.n_unscored = int(state.get("n_unscored", 0))  # absent in checkpoints before it
        return metrics

