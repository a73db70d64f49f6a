"""Row-wise operations on class scores that every family shares: the softmax, and the classes
a row of a batch could not know at its turn. (And whether an input is a DataFrame, without
importing pandas.)"""

from __future__ import annotations

import sys

import numpy as np


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax by log-sum-exp (no overflow for large margins)."""
    shifted = scores - scores.max(axis=1, keepdims=True)
    np.exp(shifted, out=shifted)
    shifted /= shifted.sum(axis=1, keepdims=True)
    return shifted


def is_pandas_frame(X) -> bool:
    """Whether X is a pandas DataFrame, without importing pandas (slow) for users who never pass one."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(X, pandas.DataFrame)


def hide_unknown_classes(scores: np.ndarray, n_before: int, targets: np.ndarray) -> None:
    """Set to -inf each row's scores of the classes not registered before it: ``n_before``
    classes were known before the first row, and class indices are given in order of first
    appearance, so row ``i`` knows ``max(n_before, max(targets[:i]) + 1)`` classes."""
    known = np.maximum.accumulate(np.concatenate([[n_before - 1], targets]))[:-1] + 1
    scores[np.arange(scores.shape[1]) >= known[:, None]] = -np.inf
