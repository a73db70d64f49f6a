"""Class weights (issue 77): ``class_weight=None | "balanced" | {label: weight}``, a parameter of every
classifier (``ExtremeSVM``'s ``balance`` is an older running balance, N/K over the whole stream's counts,
kept as it was). An example's weight is its own (``w``) times its class's.

* ``{label: weight}``: fixed weights (every weight a finite number > 0; a class not named weighs 1,
  as in scikit-learn).
* ``"balanced"``: each class weighs ``1 / (K · f_k)``, ``K`` the classes seen so far and ``f_k`` the
  class's running frequency **since it first appeared** (:class:`RunningBalance`) — scikit-learn's
  ``n / (K · n_k)`` on the stream so far, without its look at the whole data. Warm-up: the first
  example weighs 1; a class that appears late starts near ``1/K`` and grows as the examples of the
  others show it rare, instead of the ``N / K`` a count over the whole stream would give its first
  example (one huge step). Counts are taken at each example's arrival, so ``learn_many`` equals
  the ``learn_one`` loop bit for bit; they are in the learner's state (checkpoints) and in
  ``inspect``; a member of a mixing group weighs by its own stream's frequencies. A batch solve
  (``fit`` of the least-squares and ℓp-SVM learners) weighs by the data's own frequencies,
  scikit-learn's ``n / (K · n_k)``.

>>> from streamlearn import MulticlassSVM
>>> model = MulticlassSVM(class_weight="balanced")
>>> model.learn_many([{"a": 1.0}] * 9 + [{"a": -1.0}], ["common"] * 9 + ["rare"])
>>> {label: round(w, 3) for label, w in model.class_weights().items()}  # "rare" has just appeared
{'common': 0.556, 'rare': 0.5}
>>> model.learn_many([{"a": 1.0}] * 30, ["common"] * 30)
>>> {label: round(w, 3) for label, w in model.class_weights().items()}  # 1 in 31 since it appeared
{'common': 0.513, 'rare': 15.5}
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import InvalidParameterError


def checked_class_weight(class_weight):
    """``class_weight`` as given, or the :class:`~streamlearn.errors.InvalidParameterError` that refuses it."""
    if class_weight is None or class_weight == "balanced":
        return class_weight
    if not isinstance(class_weight, dict):
        raise InvalidParameterError(f'class_weight must be None, "balanced" or a {{label: weight}} dict, got {class_weight!r}')
    for label, weight in class_weight.items():
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not (math.isfinite(weight) and weight > 0):
            raise InvalidParameterError(f"class_weight[{label!r}] = {weight!r}: a class weight is a finite number > 0 "
                                        "(to leave a class out, filter its examples)")
    return dict(class_weight)


def _occurrences(targets: np.ndarray) -> np.ndarray:
    """For each row, how many rows up to and including it have its target (1 for a first)."""
    order = np.argsort(targets, kind="stable")
    ordered = targets[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(targets)]))
    out = np.empty(len(targets), np.int64)
    out[order] = np.arange(len(targets)) - group_start + 1
    return out


class RunningBalance:
    """The running class frequencies of ``"balanced"`` (see the module docstring): per class its
    count and the example number at which it first appeared, and the examples seen."""

    def __init__(self):
        self.counts = np.zeros(0, np.int64)
        self.first = np.zeros(0, np.int64)  # 1-based number of the class's first example (0: not seen)
        self.seen = 0

    def weights(self, targets: np.ndarray) -> np.ndarray:
        """The weights of examples of class indices ``targets`` arriving in this order (each counted)."""
        targets = np.asarray(targets, np.int64)
        n = len(targets)
        if n == 0:
            return np.zeros(0)
        if targets.max() >= len(self.counts):
            grow = int(targets.max()) + 1 - len(self.counts)
            self.counts, self.first = np.r_[self.counts, np.zeros(grow, np.int64)], np.r_[self.first, np.zeros(grow, np.int64)]
        number = self.seen + np.arange(1, n + 1)  # each example's number in the stream
        occurrence = _occurrences(targets)
        count = self.counts[targets] + occurrence
        is_new = (self.first[targets] == 0) & (occurrence == 1)
        known = int(np.count_nonzero(self.first)) + np.cumsum(is_new)  # classes seen up to each example
        new_classes = targets[is_new]
        self.first[new_classes] = number[is_new]
        since = number - self.first[targets] + 1  # examples since the class appeared, this one included
        np.add.at(self.counts, targets, 1)
        self.seen += n
        return since / (known * count)

    def weight_of(self, k: int) -> float:
        """The weight class ``k`` would have now (0 if not seen)."""
        if k >= len(self.counts) or self.counts[k] == 0:
            return 0.0
        return float((self.seen - self.first[k] + 1) / (np.count_nonzero(self.first) * self.counts[k]))

    def export(self) -> dict:
        return {"counts": self.counts.copy(), "first": self.first.copy(), "seen": self.seen}

    @classmethod
    def restore(cls, state: dict) -> "RunningBalance":
        balance = cls()
        balance.counts = np.asarray(state["counts"], np.int64).copy()
        balance.first = np.asarray(state["first"], np.int64).copy()
        balance.seen = int(state["seen"])
        return balance


def class_weights_of(class_weight, labels, balance: RunningBalance | None) -> dict:
    """Each class's weight now, from a ``class_weight``, the learner's
    :class:`~streamlearn.labels.LabelSpace` and its running balance (what ``inspect`` reads from a state)."""
    if class_weight is None:
        return {label: 1.0 for label in labels.labels}
    if class_weight == "balanced":
        balance = balance or RunningBalance()
        return {label: balance.weight_of(k) for k, label in enumerate(labels.labels)}
    return dict(zip(labels.labels, fixed_weights(class_weight, labels).tolist()))


def fixed_weights(class_weight: dict, labels) -> np.ndarray:
    """Each class index's weight under a ``{label: weight}`` class_weight (a class not named: 1)."""
    given = {labels.normalize(label): float(w) for label, w in class_weight.items()}
    return np.array([given.get(label, 1.0) for label in labels.labels])


class ClassWeights:
    """A mixin of a learner that takes weights (before :class:`~streamlearn.pending.PendingRows` in its
    bases): every example that arrives is weighed by its class (``class_weight``) as well."""

    class_weight = None
    _balance: RunningBalance | None = None

    _fixed = np.zeros(0)  # fixed_weights of the classes so far: a class only ever joins, so their count says when it is stale

    def _class_weight_table(self) -> np.ndarray:
        """Each class index's fixed weight (a ``{label: weight}`` class_weight), kept between calls."""
        if len(self._fixed) != len(self._labels):
            self._fixed = fixed_weights(self.class_weight, self._labels)
        return self._fixed

    def _by_class(self, targets: np.ndarray, weights: np.ndarray | None) -> np.ndarray | None:
        if self.class_weight is None:
            return weights
        if self.class_weight == "balanced":
            if self._balance is None:
                self._balance = RunningBalance()
            by_class = self._balance.weights(targets)
        else:
            by_class = self._class_weight_table()[np.asarray(targets, np.int64)]
        return by_class if weights is None else by_class * weights

    def _batch_class_weights(self, targets: np.ndarray, weights: np.ndarray | None) -> np.ndarray | None:
        """A batch solve's weights times the class weights (``"balanced"``: the batch's own frequencies)."""
        if self.class_weight is None:
            return weights
        targets = np.asarray(targets, np.int64)
        if self.class_weight == "balanced":
            counts = np.bincount(targets)
            by_class = (len(targets) / (np.count_nonzero(counts) * np.maximum(counts, 1)))[targets]
        else:
            by_class = self._class_weight_table()[targets]
        return by_class if weights is None else by_class * weights

    def _gather(self, cols, vals, target, weight: float = 1.0) -> None:
        if self.class_weight is not None:
            weight = float(self._by_class(np.array([target]), np.array([weight]))[0])
        super()._gather(cols, vals, target, weight)

    def _learn_rows(self, rows, targets, scores=None, weights=None) -> None:
        super()._learn_rows(rows, targets, scores, self._by_class(targets, weights))

    def class_weights(self) -> dict:
        """Each class's weight now (``class_weight``: ``"balanced"``'s from the running frequencies)."""
        return class_weights_of(self.class_weight, self._labels, self._balance)
