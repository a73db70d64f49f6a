"""The intercept: a constant feature on every row the model sees, and the value it takes.

With ``fit_intercept=True`` each row the model learns or scores carries the reserved feature
:data:`INTERCEPT_NAME` at a value ``c`` (after ``standardize``), and each class's weight ``u`` on it
gives that class the bias ``b = c·u``. The weight is regularised with the others (it keeps the
objective strongly convex, which the ``1/(λt)`` step assumes), so ``c`` decides how the bias
learns: a step moves ``b`` by ``c²`` times what it moves a weight, and the penalty on ``b`` is
``λ b² / (2c²)``. Far below the features' own scale, the bias learns slowly and is held near 0
(after a change of SEA's threshold, at ``c = 0.1`` behind a standard scaler, about 5,000 examples
to recover against about 1,200 at ``c = 1``); far above it, the constant swamps rows whose own
values are small (``c = 1`` on unit-length tf-idf rows cost 2–4.5 points on news20 and sector).
Hence ``c`` follows the data's scale (``bench/README.md``, "Changing streams"):

``intercept_scaling="auto"`` (the default): ``c`` is the root mean square of the nonzero feature
values of the rows learned so far — the size of one typical feature value, as the model sees it —
clipped to ``[AUTO_LOW, AUTO_HIGH]``, and **settled** once :data:`SETTLE_ROWS` rows with a nonzero
value were learned: from then on it never changes, so a long-lived model's bias keeps its meaning.
Before the first such row it is ``AUTO_LOW``. Standardised features give about 1, pixels in
``[0, 1]`` 0.76, letter's features in ``[-1, 1]`` 0.44; unit-length tf-idf rows and random
Fourier features fall under the floor, 0.1 — the fixed value before ``"auto"``. A number: that
value, fixed (``intercept_scaling`` in scikit-learn's liblinear solvers is the same idea).
``"auto"`` is the default of the learners that take gradient steps (MCID, ``ExtremeSVM``, the Primal
Gradient Solver), chosen by the defaults protocol (``bench/results/options.md``,
``options-families.md``). The learners that solve their problem exactly over their data or window
(the least-squares family, ``LpNormMulticlassSVM``) keep 0.1, fixed: there the value only sets the
penalty on the bias, and a fixed one keeps a batch ``fit`` one problem rather than rows with
different constants.

Each row's value is that of the statistics *before* it — learning reads ``c``, then adds the
row — so a row is learned with the value it was scored with just before (the runner's
test-then-train scores, ``decision_function_one`` before ``learn_one``); every sum runs row after
row in stream order (each row's by one compiled loop over its entries, for a row alone as within a
batch), so ``learn_many`` equals the ``learn_one`` loop bit for bit.

>>> import numpy as np
>>> scale = InterceptScale("auto")
>>> scale.learn_row(np.array([0.0, 0.0])), scale.learn_row(np.array([0.3, -0.4, 0.0]))  # no nonzero value before
(0.1, 0.1)
>>> scale.value, scale.learn_row(np.array([3.0]))         # RMS of 0.3 and -0.4; then 3.0 is added
(0.3535533905932738, 0.3535533905932738)
>>> scale.value                                            # RMS over both rows (2.14): clipped to 1
1.0
>>> InterceptScale(0.1).learn_row(np.array([3.0]))        # a number stays what it is
0.1
"""

from __future__ import annotations

import math

import numpy as np

from .batches import SparseRows
from .errors import InvalidParameterError
from .features import RESERVED_PREFIX
from .kernels import compiled

_rows = compiled("rows")

#: the reserved feature name of the intercept (see the module docstring)
INTERCEPT_NAME = RESERVED_PREFIX + "intercept"
#: ``"auto"``'s clip: the floor keeps sparse unit-length rows at the value they had before
#: ``"auto"``; the ceiling keeps unscaled features (pixels in 0–255) from giving the bias a huge step
AUTO_LOW, AUTO_HIGH = 0.1, 1.0
#: rows with a nonzero value after which ``"auto"``'s value is settled for good
SETTLE_ROWS = 1000
#: the most a row's mean square adds to the statistics, so that they stay finite (and mixable) whatever the values
HUGE = 1e300
#: what a learner saved before ``intercept_scaling`` existed used (its state has no statistics)
LEGACY_VALUE = 0.1


def check_intercept_scaling(scaling) -> None:
    """Raise a clear ``ValueError`` unless ``scaling`` is ``"auto"`` or a positive finite number."""
    if isinstance(scaling, str) and scaling == "auto":
        return
    if isinstance(scaling, bool) or not isinstance(scaling, (int, float)) or not (0 < float(scaling) < math.inf):
        raise InvalidParameterError(f"intercept_scaling must be 'auto' or a positive number, got {scaling!r}")


class InterceptScale:
    """The intercept feature's value for one learner (see the module docstring); checkpointable."""

    def __init__(self, scaling="auto"):
        check_intercept_scaling(scaling)
        self.fixed = None if scaling == "auto" else float(scaling)
        self.rows = 0  # rows with a nonzero value learned, counted up to SETTLE_ROWS
        self.total = 0.0  # the sum over those rows of their mean square nonzero value
        self._follow()

    def _follow(self) -> None:
        """Set :attr:`value` and :attr:`settled` from the statistics (read at every row: kept, not derived)."""
        self.settled = self.fixed is not None or self.rows >= SETTLE_ROWS
        if self.fixed is not None:
            self.value = self.fixed
        else:
            self.value = min(AUTO_HIGH, max(AUTO_LOW, math.sqrt(self.total / self.rows))) if self.rows else AUTO_LOW

    def learn_row(self, values: np.ndarray) -> float:
        """The value for one row (the statistics' before it), then its feature values (the intercept's
        excluded) added to the statistics."""
        value = self.value
        if not self.settled:
            mean_square = np.empty(1)
            _rows.mean_squares(np.array([0, len(values)], np.int64), values, mean_square)
            self.count_row(float(mean_square[0]))
        return value

    def learn_rows(self, rows: SparseRows):
        """:meth:`learn_row` of each row in turn: one value (settled before the batch) or each row's."""
        if self.settled:
            return self.value
        mean_squares = np.empty(rows.n_rows)
        _rows.mean_squares(rows.indptr, rows.data, mean_squares)
        out = np.empty(rows.n_rows)
        for i, mean_square in enumerate(mean_squares.tolist()):
            if self.settled:
                out[i:] = self.value
                break
            out[i] = self.value
            self.count_row(mean_square)
        return out

    def count_row(self, mean_square: float) -> None:
        """Count a row of this mean square of its nonzero values (``-1``: it has none, and is not counted)."""
        if mean_square >= 0.0:
            self.total += min(mean_square, HUGE)
            self.rows += 1
            self._follow()

    def export(self) -> dict:
        return {"rows": self.rows, "total": self.total}

    def load(self, state: dict) -> None:
        """Take the statistics of :meth:`export` (a learner's own, or a mixed model's)."""
        self.rows, self.total = int(state["rows"]), float(state["total"])
        self._follow()

    @staticmethod
    def blended(shared: dict, change: dict, weight: float) -> dict:
        """Parameter mixing's fold of a member's statistics into the shared ones
        (:mod:`streamlearn.service.mixing`): interpolated at the change's weight while the shared
        value is not settled, then kept."""
        if shared["rows"] >= SETTLE_ROWS:
            return dict(shared)
        rows = round((1.0 - weight) * shared["rows"] + weight * change["rows"])
        return {"rows": int(rows), "total": (1.0 - weight) * shared["total"] + weight * change["total"]}


def with_intercept_column(rows: SparseRows, column: int, values) -> SparseRows:
    """``rows`` with one more entry at the end of every row: ``column`` at ``values`` (one value
    for every row, or each row's).

    >>> rows = SparseRows(np.array([0, 2, 2]), np.array([3, 5]), np.array([0.5, 2.0]))
    >>> out = with_intercept_column(rows, 0, np.array([1.0, 0.25]))
    >>> out.indptr.tolist(), out.indices.tolist(), out.data.tolist()
    ([0, 3, 4], [3, 5, 0, 0], [0.5, 2.0, 1.0, 0.25])
    """
    one = np.ndim(values) == 0
    out = SparseRows(*_rows.append_column(rows.indptr, rows.indices, rows.data, int(column), float(values) if one else 0.0))
    if not one:
        out.data[out.indptr[1:] - 1] = values
    return out
