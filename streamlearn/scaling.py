"""Online standardisation of features, learned with the model and checkpointed with it.

Linear learners trained by (sub)gradient steps need features on comparable scales around
zero: raw measurements (the wine data's proline in the thousands beside hue near 1, pixel
intensities 0-255) leave them near chance for many passes. ``standardize=True`` on any
streamlearn classifier (``--standardize`` on the command line) puts every feature value
through

    x_j  ->  (x_j - mean_j) / std_j

with the running mean and standard deviation of feature j over every example learned so far
(an example without the feature counts as a 0 there). Learning an example first adds it to the
statistics, then scales it; predicting scales with the statistics as they are. So ``learn_many``
still equals the ``learn_one`` loop bit for bit, and a checkpoint restores the statistics with
the weights.

A zero value is an absent feature (the batch paths drop zeros, the dict path may keep them: both
must give the same model), and an absent feature is taken to sit at its mean: it stays 0, so
sparse rows stay sparse. For data whose zeros are real measurements far from the mean (pixel
intensities) this is an approximation of full standardisation, which would make every row dense.

Use it for dense, unscaled features. Leave it off for data already scaled (LIBSVM ``.scale``
files, tf-idf, unit-length rows) and for sparse counts, where it changes little and costs an
extra pass over each row.

>>> import numpy as np
>>> from streamlearn.batches import SparseRows
>>> scaler = OnlineStandardizer()
>>> rows = SparseRows(np.array([0, 1, 2, 3]), np.array([0, 0, 0]), np.array([1.0, 3.0, 5.0]))
>>> scaler.learn_transform(rows).data.round(4).tolist()  # the means after 1, 2, 3 rows: 1, 2, 3
[0.0, 1.0, 1.2247]
"""

from __future__ import annotations

import numpy as np

from .batches import SparseRows
from .features import own_arrays
from .kernels import compiled

_scaling = compiled("scaling")


class OnlineStandardizer:
    """Running per-feature sums and sums of squares over the examples learned (see the
    module docstring)."""

    def __init__(self):
        self.n_seen = 0
        self.sums = np.zeros(0)
        self.squares = np.zeros(0)

    def reserve(self, rows: SparseRows) -> None:
        """Room in the statistics for every column of ``rows``."""
        lo, hi = rows.indptr[0], rows.indptr[-1]
        self.reserve_columns(int(rows.indices[lo:hi].max()) + 1 if hi > lo else 0)

    def reserve_columns(self, needed: int) -> None:
        """Room in the statistics for columns ``0 .. needed - 1``."""
        if needed > len(self.sums):
            size = max(needed, 2 * len(self.sums))
            self.sums = np.concatenate([self.sums, np.zeros(size - len(self.sums))])
            self.squares = np.concatenate([self.squares, np.zeros(size - len(self.squares))])

    def _apply(self, rows: SparseRows, learn: bool) -> SparseRows:
        self.reserve(rows)
        out = np.empty(len(rows.data))
        indptr = np.ascontiguousarray(rows.indptr, np.int64)
        self.n_seen = int(_scaling.standardize_rows(indptr, np.ascontiguousarray(rows.indices, np.int64),
                                                    np.ascontiguousarray(rows.data, np.float64), self.sums, self.squares,
                                                    self.n_seen, learn, out))
        return SparseRows(indptr, rows.indices, out)

    def learn_transform(self, rows: SparseRows) -> SparseRows:
        """Add each row to the statistics, then scale it (row by row, in order)."""
        return self._apply(rows, True)

    def transform(self, rows: SparseRows) -> SparseRows:
        """Scale rows with the statistics as they are."""
        return self._apply(rows, False)

    def __setstate__(self, state):
        self.__dict__.update(state)
        own_arrays(self)  # loaded through joblib's memory maps: the kernels write the statistics

    def export(self) -> dict:
        """The statistics up to the last feature seen with a nonzero value: the arrays' spare room
        depends on how the stream was cut into batches, and a feature never seen sums to 0 anyway."""
        seen = np.flatnonzero((self.sums != 0) | (self.squares != 0))
        used = int(seen[-1]) + 1 if len(seen) else 0
        return {"n_seen": self.n_seen, "sums": self.sums[:used].copy(), "squares": self.squares[:used].copy()}

    @classmethod
    def restore(cls, state: dict) -> "OnlineStandardizer":
        scaler = cls()
        scaler.n_seen = int(state["n_seen"])
        scaler.sums = np.asarray(state["sums"], np.float64).copy()
        scaler.squares = np.asarray(state["squares"], np.float64).copy()
        return scaler
