"""The layout ``ExtremeSVM``'s class rows share between the kernels and the Python that owns them
(:mod:`streamlearn.kernels.memoir_store` describes it): slots of ``scalars`` and ``counts``, and
the named tuple of the sparse store's arrays. Kept apart from the kernels because importing a
kernel module imports numba, which ``import streamlearn`` must not (its compiled kernels run
without it: :mod:`streamlearn.kernels`).

>>> G, AW
(0, 3)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: slots of ``scalars``: the global scale, Σ V², the average's coefficient, the sum of its weights
G, SQ, A, AW = 0, 1, 2, 3
#: slots of ``counts``: ids in use, stored zeros, the pool's first free place, places left behind
N_USED, N_ZERO, POOL_END, POOL_WASTE = 0, 1, 2, 3


class ClassRowStore(NamedTuple):
    """The store's arrays, by name (the kernels read them as ``store.pool_val``, never by position)."""

    table: np.ndarray
    cls: np.ndarray
    col: np.ndarray
    pos: np.ndarray
    next_class: np.ndarray
    class_head: np.ndarray
    pool_id: np.ndarray
    pool_cls: np.ndarray
    pool_val: np.ndarray
    pool_avg: np.ndarray
    col_start: np.ndarray
    col_len: np.ndarray
    col_cap: np.ndarray
