"""Feature bins: each value also says which interval of its feature's range it falls in.

A linear model scores a feature by one weight times its value, so it cannot learn that a value
matters only between two thresholds ("age under 40 or over 60", a class occupying a ball of
feature space). ``bins=B`` on a learner gives each nonzero value ``x_j`` a companion feature:
an indicator, at 1.0, of the interval of ``x_j``'s standardised value

    z_j = (x_j - mean_j) / std_j,   clipped to [-RANGE, RANGE] (RANGE = 3 standard deviations),

among ``B`` equal-width intervals of ``[-RANGE, RANGE]`` (a value beyond it counts in the
outermost). The class scores become ``Σ_j w_kj x_j + Σ_j v_k,j,bin(z_j)``: a generalised additive
model with a step function per feature (Hastie & Tibshirani, *Generalized Additive Models*,
1990), still a linear model over the expanded row, learned by the same solver. The statistics
are running ones over the rows learned, as :mod:`streamlearn.scaling` keeps them (an absent
feature counts as 0; a row enters them before it is binned), so ``learn_many`` gives the model
the ``learn_one`` loop gives. A bin's weight column is registered in the feature space when
the bin is first learned, under a reserved name made of the feature's (:data:`~streamlearn.features.RESERVED_PREFIX`,
like the intercept's), so checkpoints, ``serve`` and ``inspect`` carry it as any feature;
scoring drops a bin never learned (its weights are 0). A zero value (an absent feature) has no
bin: sparse rows stay sparse, and a dict's explicit zeros change nothing.

The columns follow the order in which bins are first learned, so a batch (whose new user
features all take their columns before its bins) and the ``learn_one`` loop may number them
differently: the two models have the same weight for every feature and bin, bit for bit, and
score every row alike, in columns that may be permuted.

When it pays: few dense numeric features whose classes are not linearly separable (river's
Agrawal, RandomRBF, Sine and Bananas streams, the letter set's 16 features;
``bench/results/drift-bins.md``, ``drift-bins-stationary.md``). A row's entries double and each
feature takes ``B + 1`` weight columns per class; on text (sector, news20) the bins of rare words
cost accuracy, and on pixels (MNIST, USPS) they add nothing: leave it off for sparse, wide data.
The MCID learners' one-example C road (:mod:`streamlearn.mcid.small_records`) serves it. Parameter
mixing refuses it (the statistics do not mix), as it refuses ``standardize``.

>>> import numpy as np
>>> from streamlearn.batches import SparseRows
>>> bins, space = FeatureBins(6), FeatureSpace()   # intervals of width 1 over [-3, 3]
>>> cols, vals = space.encode_one({"a": 1.0}, grow=True)
>>> rows = SparseRows(np.array([0, 1, 2, 2, 3]), np.array([0, 0, 0]), np.array([1.0, 3.0, -10.0]))
>>> out = bins.expand(rows, space, learn=True)   # z: 0, 1, -1.69 (the empty row counts as a 0)
>>> out.indptr.tolist(), out.data.tolist()
([0, 2, 4, 4, 6], [1.0, 1.0, 3.0, 1.0, -10.0, 1.0])
>>> [space.names[c][1:] for c in out.indices[1::2]]
["bin 3 of 'a'", "bin 4 of 'a'", "bin 1 of 'a'"]
"""

from __future__ import annotations

import numpy as np

from .batches import SparseRows
from .errors import InvalidParameterError
from .features import RESERVED_PREFIX, FeatureSpace  # noqa: F401 (FeatureSpace: the doctest's)
from .kernels import compiled
from .scaling import OnlineStandardizer

_scaling = compiled("scaling")

#: the standardised range the intervals divide (values beyond it count in the outermost interval)
RANGE = 3.0
#: the fewest and most intervals ``bins`` may ask for
MIN_BINS, MAX_BINS = 2, 1000


def check_bins(bins) -> None:
    """Raise a clear ``ValueError`` unless ``bins`` is ``None`` or an int in ``[MIN_BINS, MAX_BINS]``."""
    if bins is None:
        return
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or not MIN_BINS <= bins <= MAX_BINS:
        raise InvalidParameterError(f"bins must be None or an integer between {MIN_BINS} and {MAX_BINS}, got {bins!r}")


def bin_name(feature, interval: int) -> str:
    """The reserved feature name of interval ``interval`` of a feature (its name; with hashing, its column)."""
    return f"{RESERVED_PREFIX}bin {interval} of {feature!r}"


class FeatureBins:
    """Each nonzero value's interval indicator (see the module docstring): the running
    statistics, and the weight column of every (feature column, interval) learned so far."""

    def __init__(self, bins: int):
        check_bins(bins)
        self.bins = int(bins)
        self.stats = OnlineStandardizer()
        self.columns = np.zeros(0, np.int64)  # [feature column * bins + interval] -> weight column, -1: none yet

    def _register(self, slots: np.ndarray, features: FeatureSpace) -> None:
        """Give the bins of ``slots`` (in order of first appearance) their weight columns."""
        new, first = np.unique(slots, return_index=True)
        new = new[np.argsort(first)]
        if int(new.max()) >= len(self.columns):
            grown = np.full(max(int(new.max()) + 1, 2 * len(self.columns)), -1, np.int64)
            grown[: len(self.columns)] = self.columns
            self.columns = grown
        owners = features.names_of((new // self.bins).tolist())
        self.columns[new] = features.columns([bin_name(f, int(s) % self.bins) for f, s in zip(owners, new)], grow=True)

    def expand(self, rows: SparseRows, features: FeatureSpace, learn: bool) -> SparseRows:
        """``rows`` with each nonzero entry's bin after the row's own entries (``learn``: the rows
        enter the statistics first, row by row, and new bins get their columns; otherwise a bin
        never learned is left out)."""
        indptr, indices, data = rows.own_arrays()
        own = SparseRows(indptr, indices, data)
        scaled = (self.stats.learn_transform(own) if learn else self.stats.transform(own)).data
        out_indptr, out_indices, out_data = np.empty(len(indptr), np.int64), np.empty(2 * len(data), np.int64), np.empty(2 * len(data))
        missing = np.empty(len(data), np.int64)
        args = (indptr, indices, data, scaled, self.bins, RANGE, self.columns, out_indptr, out_indices, out_data, missing)
        n_out, n_missing = _scaling.bin_rows(*args)
        if learn and n_missing:
            self._register(missing[:n_missing], features)
            n_out, n_missing = _scaling.bin_rows(*args[:6], self.columns, *args[7:])
        return SparseRows(out_indptr, out_indices[:n_out], out_data[:n_out])

    def export(self) -> dict:
        return {"bins": self.bins, "stats": self.stats.export(), "columns": self.columns.copy()}

    @classmethod
    def restore(cls, state: dict) -> "FeatureBins":
        bins = cls(int(state["bins"]))
        bins.stats = OnlineStandardizer.restore(state["stats"])
        bins.columns = np.asarray(state["columns"], np.int64).copy()
        return bins
