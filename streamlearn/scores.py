"""Row-wise operations on class scores that every family shares: the softmax, and the classes
a row of a batch could not know at its turn. And the shape of a ``*_many`` answer: the caller's
frame type for a DataFrame of any backend narwhals knows (pandas, polars, pyarrow; river 0.26's
rule), a pandas DataFrame of probabilities for an array (the ``pandas`` extra)."""

from __future__ import annotations

import numpy as np


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax by log-sum-exp (no overflow for large margins)."""
    shifted = scores - scores.max(axis=1, keepdims=True)
    np.exp(shifted, out=shifted)
    shifted /= shifted.sum(axis=1, keepdims=True)
    return shifted


def tempered_softmax(scores: np.ndarray, beta) -> np.ndarray:
    """:func:`softmax_rows` of ``beta * scores`` (``beta`` a number or one per row), where a class
    that did not exist (-inf) keeps probability 0 at ``beta = 0`` too (0 * -inf is NaN).

    >>> tempered_softmax(np.array([[1.0, -np.inf, 3.0]]), 0.0).tolist()
    [[0.5, 0.0, 0.5]]
    """
    if np.all(np.asarray(beta) > 0.0):
        return softmax_rows(beta * scores)
    with np.errstate(invalid="ignore"):
        tempered = beta * scores
    np.copyto(tempered, -np.inf, where=np.isneginf(scores))
    return softmax_rows(tempered)


def frame_of(X):
    """X as a narwhals DataFrame when it is an eager DataFrame narwhals knows, else ``None``
    (arrays, SciPy matrices and lists without importing narwhals)."""
    if isinstance(X, (np.ndarray, list, tuple)) or hasattr(X, "tocsr"):
        return None
    import narwhals as nw

    try:
        return nw.from_native(X, eager_only=True)
    except TypeError:
        return None


def labels_like(labels: np.ndarray, X):
    """``labels`` as a series of X's frame type (with a pandas frame's index) when X is a
    DataFrame, else the array itself.

    >>> labels_like(np.array([1, 2]), np.zeros((2, 3)))
    array([1, 2])
    """
    frame = frame_of(X)
    if frame is None:
        return labels
    from river.utils.dataframe import to_native_series

    return to_native_series(labels, name=None, like=frame)


def proba_frame(proba: np.ndarray, classes: list, X):
    """Probabilities ``(rows, classes)`` as a frame: of X's type for a DataFrame X, else a pandas
    DataFrame (the ``pandas`` extra; without it, :class:`~streamlearn.extras.MissingExtraError`)."""
    frame = frame_of(X)
    if frame is not None:
        from river.utils.dataframe import to_native_frame

        # the mapping form: a pandas frame keeps its labels as they are (ints, bools), others get their text
        return to_native_frame({c: proba[:, i] for i, c in enumerate(classes)}, like=frame)
    from .extras import require

    pandas = require("pandas", "pandas", "predict_proba_many of an array or a SciPy matrix (a DataFrame in needs no pandas)")
    return pandas.DataFrame(proba, columns=classes)


def hide_unknown_classes(scores: np.ndarray, n_before: int, targets: np.ndarray) -> None:
    """Set to -inf each row's scores of the classes not registered before it: ``n_before``
    classes were known before the first row, and class indices are given in order of first
    appearance, so row ``i`` knows ``max(n_before, max(targets[:i]) + 1)`` classes."""
    known = np.maximum.accumulate(np.concatenate([[n_before - 1], targets]))[:-1] + 1
    scores[np.arange(scores.shape[1]) >= known[:, None]] = -np.inf
