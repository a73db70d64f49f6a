"""Feature bins: each value also says which interval of its feature's range it falls in.

A linear model scores a feature by one weight times its value, so it cannot learn that a value
matters only between two thresholds ("age under 40 or over 60", a class occupying a ball of
feature space). ``bins=B`` on a learner gives each nonzero value ``x_j`` a companion feature:
an indicator of the interval of ``x_j``'s standardised value

    z_j = (x_j - mean_j) / std_j,   clipped to [-RANGE, RANGE] (RANGE = 3 standard deviations),

among ``B`` equal-width intervals of ``[-RANGE, RANGE]`` (a value beyond it counts in the
outermost), at the value ``c`` the intercept's feature takes (``intercept_scaling``: by default the
size of a typical feature value, :mod:`streamlearn.intercept`), so that the indicators weigh in a
row as its own values do (at 1.0 on unit-length text rows they swamped them). The class scores
become ``Σ_j w_kj x_j + c Σ_j v_k,j,bin(z_j)``: a generalised additive model with a step function
per feature (Hastie & Tibshirani, *Generalized Additive Models*, 1990), still a linear model over
the expanded row, learned by the same solver. The statistics are running ones over the rows
learned, as :mod:`streamlearn.scaling` keeps them (an absent feature counts as 0; a row is binned
by the rows before it, then enters them: as predicting it before learning it bins it, so the
runner's test-then-train scores are the model's). A zero value (an absent feature) has no bin:
sparse rows stay sparse, and a dict's explicit zeros change nothing.

The model's weight columns are the feature space's, each of the first :data:`BINNED_COLUMNS`
followed by its bins': feature column ``j < J`` is model column ``j (B + 1)``, its interval ``b``
column ``j (B + 1) + 1 + b``; a later one, ``j + J B``, has none (a vocabulary of words keeps its
size: bins for every word would multiply the weights by ``B + 1``). Nothing is registered, so the
columns do not depend on how the stream was cut into batches: ``learn_many`` equals the
``learn_one`` loop bit for bit, and a checkpoint holds the statistics beside the weights. :attr:`~streamlearn.StreamClassifier.feature_keys` names each bin's column
(:func:`bin_name`).

Which rows: a row of at most :data:`MAX_BINNED_NONZEROS` nonzero values (a record of a few numeric
fields) has bins; a longer one (a document, an image) enters the statistics but has none. They pay
where classes are not linearly separable in few dense features (river's Agrawal, RandomRBF, Sine and
Bananas streams, the letter set's 16 features: ``bench/results/drift.md``, ``drift-stationary.md``);
in every row, or in rows of up to 32 values, the bins of words cost text (sector, news20), which
the limit avoids (``drift-stationary.md``, its "bins in every row" and "≤ 32" columns). A binned row's entries double and
each feature takes ``B + 1`` weight columns per class. The MCID learners' one-example C road
(:mod:`streamlearn.mcid.small_records`) serves it, and parameter mixing pools the statistics
(:func:`added_stats`).

>>> import numpy as np
>>> from streamlearn.batches import SparseRows
>>> bins = FeatureBins(6)   # intervals of width 1 over [-3, 3]; feature j's columns: 7 j, then its bins
>>> rows = SparseRows(np.array([0, 1, 2, 2, 3]), np.array([1, 1, 1]), np.array([1.0, 3.0, -10.0]))
>>> out = bins.expand(rows, learn=True)   # z: 1 (no statistics yet: the value), 2, -9.1 (the empty row counts as a 0)
>>> out.indptr.tolist(), out.indices.tolist(), out.data.tolist()
([0, 2, 4, 4, 6], [7, 12, 7, 13, 7, 8], [1.0, 1.0, 3.0, 1.0, -10.0, 1.0])
>>> bins.expand(SparseRows(np.array([0, 1]), np.array([1]), np.array([3.0])), learn=False, value=0.5).data.tolist()
[3.0, 0.5]
>>> bins.keys(["a", "b"])[7:9]
['b', "\\x00bin 0 of 'b'"]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .batches import SparseRows
from .errors import InvalidParameterError
from .features import RESERVED_PREFIX
from .kernels import compiled
from .scaling import OnlineStandardizer

_scaling = compiled("scaling")

#: the standardised range the intervals divide (values beyond it count in the outermost interval)
RANGE = 3.0
#: a row of more nonzero values has no bins: a record of a few numeric fields gains from them, a document
#: or an image (each word or pixel its own weight) loses, more so the longer the rows binned (``bench/results/drift-stationary*.md``)
MAX_BINNED_NONZEROS = 16
#: the feature columns that have bins: the first ones, in order of first appearance (with ``n_bits``, the
#: hashed columns below it); a record's fields come first and are few, a vocabulary's words go on growing
BINNED_COLUMNS = 1024
#: the MCID learners' default number of intervals
DEFAULT_BINS = 12
#: the fewest and most intervals ``bins`` may ask for
MIN_BINS, MAX_BINS = 2, 1000


def check_bins(bins) -> None:
    """Raise a clear ``ValueError`` unless ``bins`` is ``None`` or an int in ``[MIN_BINS, MAX_BINS]``."""
    if bins is None:
        return
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or not MIN_BINS <= bins <= MAX_BINS:
        raise InvalidParameterError(f"bins must be None or an integer between {MIN_BINS} and {MAX_BINS}, got {bins!r}")


#: how the names of the bins' columns start
BIN_PREFIX = RESERVED_PREFIX + "bin "


def bin_name(feature, interval: int) -> str:
    """The reserved feature name of interval ``interval`` of a feature (its name; with hashing, its column)."""
    return f"{BIN_PREFIX}{interval} of {feature!r}"


def added_stats(shared: dict | None, base: dict | None, now: dict) -> dict:
    """Parameter mixing's fold of a member's statistics: ``shared`` plus what the member added
    since ``base`` (each record enters the pooled statistics once), by feature key."""
    shared = shared or {"n_seen": 0, "features": [], "sums": np.zeros(0), "squares": np.zeros(0)}
    base = base or {"n_seen": 0, "features": [], "sums": np.zeros(0), "squares": np.zeros(0)}
    features = list(shared["features"])
    place = {key: j for j, key in enumerate(features)}
    for key in [*now["features"], *base["features"]]:
        if key not in place:
            place[key] = len(features)
            features.append(key)
    out = {"n_seen": int(shared["n_seen"]) + int(now["n_seen"]) - int(base["n_seen"]), "features": features}
    for part in ("sums", "squares"):
        total = np.zeros(len(features))
        total[: len(shared[part])] = shared[part]
        columns = [place[key] for key in now["features"]]
        total[columns] += np.asarray(now[part], np.float64)
        base_columns = [place[key] for key in base["features"]]
        total[base_columns] -= np.asarray(base[part], np.float64)
        out[part] = total
    return out


class RowExpansion(NamedTuple):
    """What :func:`~streamlearn.kernels.scaling.expand_row` adds to a row, in its argument order:
    the bins' statistics (``sums``, ``squares`` over ``n_seen`` rows; ``learn``: each row enters
    them), the bins (``n_bins``, ``half_range``, ``max_nonzeros``, ``binned_columns``: no bins at
    ``max_nonzeros = -1``), the value of the bins' and the intercept's entries, the intercept's
    model column (``-1``: none)."""

    sums: np.ndarray
    squares: np.ndarray
    n_seen: int
    learn: bool
    n_bins: int
    half_range: float
    max_nonzeros: int
    binned_columns: int
    value: float
    last_column: int

    @classmethod
    def intercept_only(cls, value: float, last_column: int) -> "RowExpansion":
        """No bins: only the intercept's entry, ``last_column`` at ``value``."""
        return cls(_NO_STATISTICS, _NO_STATISTICS, 0, False, 0, RANGE, -1, 0, value, last_column)


_NO_STATISTICS = np.zeros(0)


class FeatureBins:
    """Each nonzero value's interval indicator (see the module docstring): the running
    statistics, and the model's columns."""

    #: ``(RANGE, MAX_BINNED_NONZEROS, BINNED_COLUMNS)``, as the MCID learners' C road reads them
    limits = (RANGE, MAX_BINNED_NONZEROS, BINNED_COLUMNS)

    def __init__(self, bins: int):
        check_bins(bins)
        self.bins = int(bins)
        self.stats = OnlineStandardizer()

    def model_column(self, column: int) -> int:
        """The model column of a feature column (its bins follow it when it is below :data:`BINNED_COLUMNS`),
        which is also the number of model columns the feature columns before it take."""
        return column + min(column, BINNED_COLUMNS) * self.bins

    def keys(self, feature_keys: list) -> list:
        """The name of each model column, from the feature space's (:func:`bin_name` for the bins)."""
        return [key for j, feature in enumerate(feature_keys)
                for key in (feature, *(bin_name(feature, b) for b in range(self.bins if j < BINNED_COLUMNS else 0)))]

    def expand(self, rows: SparseRows, learn: bool, value=1.0, last_column: int = -1) -> SparseRows:
        """``rows`` over model columns, each nonzero entry's bin after the row's own entries, at
        ``value`` (one for every row, or each row's), then, unless ``last_column`` is negative,
        that model column at ``value`` (the intercept's entry); ``learn``: each row enters the
        statistics once binned, row by row."""
        indptr, indices, data = rows.own_arrays()
        stats = self.stats
        stats.reserve(rows)
        n_rows = len(indptr) - 1
        values = np.full(n_rows, value) if np.ndim(value) == 0 else np.ascontiguousarray(value, np.float64)
        room = 2 * len(data) + (n_rows if last_column >= 0 else 0)
        out_indptr, out_indices, out_data = np.empty(len(indptr), np.int64), np.empty(room, np.int64), np.empty(room)
        n_out = _scaling.bin_rows(indptr, indices, data, stats.sums, stats.squares, stats.n_seen, learn, self.bins, RANGE,
                                  MAX_BINNED_NONZEROS, BINNED_COLUMNS, values, int(last_column), out_indptr, out_indices,
                                  out_data)
        if learn:
            stats.n_seen += n_rows
        return SparseRows(out_indptr, out_indices[:n_out], out_data[:n_out])

    def encode_dense(self, features, X: np.ndarray, grow: bool, learn: bool, value: float,
                     last_column: int):  # fmt: skip
        """:meth:`expand` of a dense 2-D batch at one ``value``, inside its encoding by the feature
        space ``features`` (:meth:`~streamlearn.features.FeatureSpace.encode_expanded`, one compiled
        pass); ``None`` when that road does not take the batch (nothing has changed then)."""
        stats = self.stats
        stats.reserve_columns(features.n_columns + X.shape[1])  # every column a row can reach
        expansion = RowExpansion(stats.sums, stats.squares, stats.n_seen, learn, self.bins, RANGE, MAX_BINNED_NONZEROS,
                                 BINNED_COLUMNS, value, last_column)
        rows = features.encode_expanded(X, grow, expansion)
        if rows is not None and learn:
            stats.n_seen += rows.n_rows
        return rows

    def mixing_stats(self, feature_keys: list) -> dict:
        """The statistics for parameter mixing (:mod:`streamlearn.service.mixing`), keyed by the
        feature space's keys: ``n_seen``, ``features`` and each one's ``sums`` and ``squares``."""
        n, stats = len(feature_keys), self.stats
        sums, squares = np.zeros(n), np.zeros(n)
        held = min(n, len(stats.sums))
        sums[:held], squares[:held] = stats.sums[:held], stats.squares[:held]
        return {"n_seen": stats.n_seen, "features": list(feature_keys), "sums": sums, "squares": squares}

    def load_mixing_stats(self, mixed: dict, feature_keys: list) -> None:
        """Take the statistics of :meth:`mixing_stats` (a mixed model's) for the feature space's keys
        (a key they lack counts as never seen)."""
        place = {key: j for j, key in enumerate(mixed["features"])}
        columns = [place.get(key, -1) for key in feature_keys]
        sums, squares = np.asarray(mixed["sums"], np.float64), np.asarray(mixed["squares"], np.float64)
        self.stats.sums = np.array([sums[j] if j >= 0 else 0.0 for j in columns])
        self.stats.squares = np.array([squares[j] if j >= 0 else 0.0 for j in columns])
        self.stats.n_seen = int(mixed["n_seen"])

    @staticmethod
    def is_bin_key(key) -> bool:
        """Whether a key of ``feature_keys`` names a bin (not a feature of the feature space)."""
        return type(key) is str and key.startswith(BIN_PREFIX)

    def export(self) -> dict:
        return {"bins": self.bins, "stats": self.stats.export()}

    @classmethod
    def restore(cls, state: dict) -> "FeatureBins":
        bins = cls(int(state["bins"]))
        bins.stats = OnlineStandardizer.restore(state["stats"])
        return bins
