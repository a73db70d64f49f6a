"""Per-example weights (issue 77): river's ``learn_one(x, y, w=1.0)``, ``learn_many(X, y, w=None)``
and scikit-learn's ``sample_weight``, checked here once for every learner.

What a weight means, per family: the MCID (000 Eq. 14) and PGS (003 Fig. 1 line 7) steps and
MEMOIR's (002) scale the row's sub-gradient by it; the least-squares family (004) weighs the row in
its moments ``Σ w x xᵀ``, ``Σ w x yᵀ`` (the weighted problem: an integer weight is the row repeated
in a batch solve); the ℓp-SVM (001) weighs its hinge, ``C Σ w_i ξ_i`` (each dual box ``C w_i``). A
window learner keeps each example's weight in its window until it leaves.

A weight is a finite number ``>= 0``. A row of weight 0 is dropped before it is encoded, so it
leaves the model as it was, bit for bit: no feature, class, step or statistic of it. A learner
that cannot honour weights (:attr:`~streamlearn.base.StreamClassifier.takes_weights` false)
refuses any weight but 1 with an :class:`~streamlearn.errors.InvalidInputError`.

A weight moves the model, not the judges of the model: the change watch (Page-Hinkley on the
prequential mistakes), the tracker's choice, ``lam="auto"``'s merits and the temperature fit count
each row once. The watch's thresholds are set for 0/1 mistakes one row at a time; under
``class_weight="balanced"`` a rare class's row may weigh thousands, and one of its mistakes would
read as a change of the stream. The temperature is fitted so that the probabilities are honest about
the records the model meets, each once — the metrics' default too (``--weighted-metrics`` is the
choice for importance weights that undo a resampling).

>>> from streamlearn import MulticlassSVM
>>> model = MulticlassSVM()
>>> model.learn_one({"a": 1.0}, "x", w=0.0)
>>> model.classes
[]
>>> model.learn_one({"a": 1.0}, "x", w=-1.0)
Traceback (most recent call last):
...
streamlearn.errors.InvalidInputError: weight -1.0 is not a finite number >= 0
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import InvalidInputError


#: the weights of a road that has none (a kernel's empty array: every row weighs 1)
NO_WEIGHTS = np.zeros(0)


def weights_or_none(weights) -> np.ndarray | None:
    """``weights`` as a float64 array, or ``None`` when every one is 1 (the unweighted road, bit for bit)."""
    weights = np.asarray(weights, np.float64)
    return None if (weights == 1.0).all() else weights


def _is_weight(w) -> bool:
    return not isinstance(w, bool) and isinstance(w, numbers.Real) and bool(np.isfinite(w)) and w >= 0


def checked_weight(w) -> float:
    """One example's weight as a float, or the error that refuses it."""
    if not _is_weight(w):
        raise InvalidInputError("bad-weight", f"weight {w!r} is not a finite number >= 0")
    return float(w)


def checked_weights(w, n_rows: int) -> np.ndarray | None:
    """A batch's weights as a float64 array of ``n_rows``, or ``None`` for no weights (all 1)."""
    if w is None:
        return None
    values = np.asarray(w.to_numpy() if hasattr(w, "to_numpy") else w)
    if values.dtype.kind not in "iuf":  # (text, booleans, objects: each must be a number of its own)
        for row, value in enumerate(values.ravel().tolist()):
            if not _is_weight(value):
                raise InvalidInputError("bad-weight", f"weight {value!r} is not a finite number >= 0", row)
    weights = values.astype(np.float64)  # (a copy: the caller's array is never written)
    if weights.ndim == 0:
        weights = np.full(n_rows, float(weights))
    if weights.shape != (n_rows,):
        count = f"{weights.size} weights" if weights.ndim == 1 else f"weights of shape {weights.shape}"
        raise InvalidInputError("length-mismatch", f"X has {n_rows} rows but there are {count}")
    bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
    if len(bad):
        row = int(bad[0])
        raise InvalidInputError("bad-weight", f"weight {weights[row]!r} is not a finite number >= 0", row)
    return weights


def refuse_weights(learner) -> None:
    raise InvalidInputError("bad-weight", f"{type(learner).__name__} does not take per-example weights "
                            "(every streamlearn learner does)")


def _learned_weights(learner, X, w) -> np.ndarray | None:
    """A batch's checked weights for ``learner`` (``None``: all 1); a learner without weights refuses others."""
    if w is None:
        return None
    weights = weights_or_none(checked_weights(w, X.shape[0] if hasattr(X, "shape") else len(X)))
    if weights is not None and not learner.takes_weights:
        refuse_weights(learner)
    return weights


def weighted_batch(learner, X, y, w) -> tuple:
    """``(X, y, weights)`` of a batch to learn: its rows of weight 0 dropped, ``weights`` ``None``
    when every one left is 1 (the unweighted road, bit for bit)."""
    weights = _learned_weights(learner, X, w)
    if weights is None:
        return X, y, None
    keep = np.flatnonzero(weights > 0.0)
    if len(keep) < len(weights):
        if len(y) != len(weights):
            raise InvalidInputError("length-mismatch", f"X has {len(weights)} rows but y has {len(y)} labels")
        X, y = rows_taken(X, y, keep)
        weights = weights[keep]
    return X, y, weights_or_none(weights)


def positive_weights(learner, X, w) -> np.ndarray | None:
    """A batch's weights, every one > 0, for a step that learns every row of ``X`` (``None``: all 1);
    a learner that does not take weights refuses any but 1, and a weight of 0 is a ``ValueError``
    (such a row is left out, by :func:`weighted_batch` or by the caller)."""
    weights = _learned_weights(learner, X, w)
    if weights is not None and not weights.all():
        raise ValueError(f"row {int(np.flatnonzero(weights == 0)[0])} has weight 0: a row to score but not learn is left "
                         "out of the batch to learn")
    return weights


def rows_taken(X, y, keep: np.ndarray):
    """``X`` and ``y`` cut to the rows ``keep`` (indices), in the caller's types."""
    def take(values):
        if hasattr(values, "iloc"):
            return values.iloc[keep]
        if isinstance(values, (list, tuple)):
            return [values[i] for i in keep.tolist()]
        return values[keep]
    return take(X), take(y)


def running_balance(counts: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Each row's ``(N/K) / count(y)`` from the running class ``counts`` (updated in place, this row
    counted; ``K`` the classes seen): ``ExtremeSVM``'s ``balance``."""
    weights = np.empty(len(y))
    seen = int(counts.sum())
    known = int(np.count_nonzero(counts[:n_classes]))
    for i, k in enumerate(y.tolist()):
        if counts[k] == 0:
            known += 1
        counts[k] += 1
        seen += 1
        weights[i] = (seen / known) / counts[k]
    return weights
