"""The lazily scaled weight store ``W[:, k] = scale[k] * V[:, k]``.

Feature-major storage (``V[j, :]`` contiguous over classes) with capacity doubling in
both directions, so a stream that keeps bringing new features and new classes pays
amortised O(1) per new column; the class capacity is a multiple of 4, so that scoring
reads whole vectors of four classes (:func:`~streamlearn.kernels.scaled.row_dots`). See :mod:`streamlearn.kernels.scaled` for the kernels
and the averaged-iterate bookkeeping (``U``, ``A``).

>>> store = ScaledWeights(averaged=False)
>>> store.reserve(n_features=3, n_classes=2)
>>> store.dense().shape
(2, 3)
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np


def grown(array: np.ndarray, shape: tuple, fill: float) -> np.ndarray:
    """A copy of ``array`` enlarged to ``shape`` (new cells set to ``fill``). Zeros come
    from ``np.zeros``: the pages of the spare capacity stay untouched until used, where
    ``np.full`` would write all of them at once."""
    out = np.zeros(shape) if fill == 0.0 else np.full(shape, fill)
    out[tuple(slice(0, n) for n in array.shape)] = array
    return out


#: arrays at least this large are followed by :func:`return_freed_pages` when replaced by a grown copy
LARGE_ARRAY_BYTES = 1 << 20


def return_freed_pages() -> bool:
    """Give the pages of freed heap blocks back to the OS (glibc's ``malloc_trim``); ``False``
    where the C library has none. Call it after a large array is replaced by its grown copy:
    glibc raises its mmap threshold as large blocks are freed, so later ones come from the
    heap, and a freed block that is not at its top stays resident until trimmed."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


def class_capacity(n_classes: int) -> int:
    """Room for ``n_classes`` classes in whole vectors of 4 (row_dots's vector road); a single
    class (a binary solver's one column) stays one.

    >>> [class_capacity(n) for n in (1, 2, 5, 8)]
    [1, 4, 8, 8]
    """
    return n_classes if n_classes == 1 else -(-n_classes // 4) * 4


class ScaledWeights:
    """Weights of K linear classes over d features, ``W = V * scale`` per class."""

    ARRAYS = ("V", "scale", "sqnorm", "U", "A")

    def __init__(self, averaged: bool):
        self.averaged = bool(averaged)
        self.n_features = 0
        self.n_classes = 0
        self.V = np.zeros((0, 0))
        self.scale = np.ones(0)
        self.sqnorm = np.zeros(0)  # ||V[:, k]||^2 for the ball projection (kept only by learners that project)
        self.U = np.zeros((0, 0))  # running-sum correction of the averaged iterate
        self.A = np.zeros(0)  # running-sum coefficient of V

    def reserve(self, n_features: int, n_classes: int, likely_features: int = 0) -> None:
        """Make room for ``n_features`` x ``n_classes`` (new weights are zero).

        ``likely_features``: how many features the stream will probably bring (a hint, e.g.
        the width of the matrices it comes in); when the feature capacity must grow anyway,
        it grows at least to that, saving the copies of growing by doubling. Untouched
        capacity costs address space only (``np.zeros`` maps pages on first write)."""
        cap_d, cap_k = self.V.shape
        if n_features > cap_d or n_classes > cap_k:
            shape = (
                max(n_features, 2 * cap_d if n_features > cap_d else cap_d, likely_features if n_features > cap_d else 0),
                class_capacity(max(n_classes, 2 * cap_k if n_classes > cap_k else cap_k)),
            )
            self.V = grown(self.V, shape, 0.0)
            if self.averaged:
                self.U = grown(self.U, shape, 0.0)
            if shape[1] > cap_k:
                self.scale = grown(self.scale, (shape[1],), 1.0)
                self.sqnorm = grown(self.sqnorm, (shape[1],), 0.0)
                self.A = grown(self.A, (shape[1],), 0.0)
        self.n_features = max(self.n_features, n_features)
        self.n_classes = max(self.n_classes, n_classes)

    def dense(self) -> np.ndarray:
        """``W`` as a dense ``(K, d)`` array (class rows, feature columns)."""
        d, k = self.n_features, self.n_classes
        return (self.V[:d, :k] * self.scale[:k]).T.copy()

    def dense_average(self, total_weight: float) -> np.ndarray:
        """The averaged iterate ``sum_s c_s W_s / sum_s c_s`` as a dense ``(K, d)`` array
        (``total_weight`` is ``sum_s c_s``: the number of steps for the plain average)."""
        if not self.averaged:
            raise ValueError("this learner does not keep an averaged iterate (average=False)")
        if total_weight == 0:
            return self.dense()
        d, k = self.n_features, self.n_classes
        return ((self.U[:d, :k] + self.A[:k] * self.V[:d, :k]) / total_weight).T.copy()

    def restart_average(self, total_weight: float) -> None:
        """Make the averaged iterate the current one, as if it had been the iterate for steps
        totalling ``total_weight`` (``U`` ← 0, ``A`` ← ``total_weight · scale``): see
        :mod:`streamlearn.adaptation`."""
        if self.averaged:
            d, k = self.n_features, self.n_classes
            self.U[:d, :k] = 0.0
            self.A[:k] = total_weight * self.scale[:k]

    def export(self) -> dict:
        """Plain arrays trimmed to the used size, for checkpoints."""
        d, k = self.n_features, self.n_classes
        return {
            "V": self.V[:d, :k].copy(),
            "scale": self.scale[:k].copy(),
            "sqnorm": self.sqnorm[:k].copy(),
            "U": self.U[:d, :k].copy() if self.averaged else np.zeros((0, 0)),
            "A": self.A[:k].copy(),
        }

    @classmethod
    def restore(cls, arrays: dict, averaged: bool) -> "ScaledWeights":
        store = cls(averaged)
        d, k = arrays["V"].shape
        store.reserve(d, k)
        for name in cls.ARRAYS:
            value = np.asarray(arrays[name], dtype=np.float64)
            if value.size:
                getattr(store, name)[tuple(slice(0, n) for n in value.shape)] = value
        return store

    def __getstate__(self):  # pickle only the used part
        state = dict(self.__dict__)
        state.update(self.export())
        return state

    def __setstate__(self, state):
        restored = self.restore({name: state[name] for name in self.ARRAYS}, state["averaged"])
        self.__dict__.update(restored.__dict__)
