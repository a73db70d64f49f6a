"""Alg. 1 of 004: :class:`GeneralizedLeastSquares`."""

from __future__ import annotations

import numpy as np

from ..scores import softmax_rows
from ..batches import SparseRows
from ..errors import InvalidParameterError
from ..sample_weights import weighted_batch, weights_or_none
from .dense import DenseLeastSquares
from .solvers import RidgeSolver, dense_rows, log_loss, one_hot, project_simplex


class GeneralizedLeastSquares(DenseLeastSquares):
    """Alg. 1 of 004 (see :mod:`streamlearn.leastsquares`).

    Parameters
    ----------
    link
        ``"softmax"`` (multinomial logit, L = 1: minimises the multinomial log-loss) or
        ``"identity"`` (least squares on one-hot targets).
    batch_size
        Examples per stream step (a step factors a ``d × d`` matrix: O(d³)).
    ridge
        A ridge relative to the mean diagonal of ``Σ̂`` (``Σ̂ + ridge · tr(Σ̂)/d · I``), the same
        at every dimension. Give ``ridge`` or ``trace_ridge``, not both; a ridge given applies to
        the stream and to :meth:`fit`.
    trace_ridge
        ``Σ̂`` factored as ``Σ̂ + trace_ridge · tr(Σ̂) · I``: a ridge of ``trace_ridge · E‖x‖²``,
        which grows with the number of features, so that a stream step (Eq. 6) is never longer
        than a gradient step of ``1 / (trace_ridge · E‖x‖²)`` whatever the dimension.

        **Without either** (the default) each mode takes the defaults protocol's winner for it
        over raw and random-feature inputs (``bench/results/defaults.md``): the stream a ridge of
        1e-3 with batches of 128, one pass; :meth:`fit` a ridge of 1e-4, level with 004's
        parameter-free 1e-6 (the two are within 0.08 points on every set of the protocol).
    max_features
        Most features the dense model takes.
    standardize
        Scale every feature online to zero mean and unit variance, with statistics learned
        and checkpointed with the model (:mod:`streamlearn.scaling`): for dense, unscaled features.
    fit_intercept
        Learn an intercept per class: the feature ``streamlearn.intercept.INTERCEPT_NAME`` at
        ``intercept_scaling``'s value on every row, after ``standardize``, regularised with the other
        weights (as :class:`~streamlearn.MulticlassSVM`'s). On by default: the defaults protocol's
        choice over stationary sets and drifting streams (``bench/results/options-families.md``);
        the paper experiments of ``bench/`` turn it off (the paper's model has none).
    intercept_scaling
        The constant feature's value: 0.1 (default), fixed — this learner solves its problem exactly
        (over its window), so the value only sets the penalty on the bias, and a fixed one keeps a
        batch ``fit`` one problem; ``"auto"`` as :class:`~streamlearn.MulticlassSVM`'s (the data's scale).

    Per-example weights (``learn_one``'s and ``learn_many``'s ``w``, :meth:`fit`'s ``w``) weigh a row's
    terms in ``Σ x xᵀ``, ``Σ x yᵀ`` and the gradient: the weighted problem, an integer weight the row
    repeated (exactly in ``fit`` and the identity link's stream). ``class_weight`` (a parameter of every
    classifier): as :class:`~streamlearn.MulticlassSVM`'s, in the stream (``fit`` takes ``w``).

    ``predict_proba_one``: the softmax link gives its calibrated probabilities; for the
    identity link the scores are projected onto the probability simplex.

    Attributes
    ----------
    history_
        After :meth:`fit`: the multinomial log-loss of each iteration.
    classes, n_pending
        As every learner (:class:`~streamlearn.base.StreamClassifier`).

    Examples
    --------
    >>> from streamlearn import GeneralizedLeastSquares
    >>> model = GeneralizedLeastSquares(link="identity")
    >>> _ = model.fit([{"a": 1.0}, {"b": 1.0}, {"a": 1.0, "b": 0.1}], ["x", "y", "x"])
    >>> model.predict_one({"a": 1.0})
    'x'
    """

    default_stream_ridge = {"ridge": 1e-3}
    _default_fit_ridge = {"ridge": 1e-4}

    def __init__(self, link: str = "softmax", batch_size: int = 128, ridge: float | None = None,
                 trace_ridge: float | None = None, max_features: int = 4096, seed: int | None = None, standardize: bool = False,
                 fit_intercept: bool = True, intercept_scaling: float | str = 0.1, class_weight: dict | str | None = None):
        self.link, self.batch_size, self.ridge, self.max_features, self.seed = link, batch_size, ridge, max_features, seed
        self.trace_ridge, self.standardize, self.fit_intercept = trace_ridge, standardize, fit_intercept
        self.intercept_scaling, self.class_weight = intercept_scaling, class_weight
        if link not in ("softmax", "identity"):
            raise InvalidParameterError(f"link must be 'softmax' or 'identity', got {link!r}")
        self._check_common()
        self._reset()

    #: a row's weight multiplies its terms in ``Σ x xᵀ``, ``Σ x yᵀ`` and the step's gradient: the
    #: weighted least-squares problem (integer weights are the rows repeated)
    takes_weights = True

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"link": "identity", "batch_size": 5, "standardize": True, "ridge": 1e-3, "fit_intercept": True}

    @property
    def XtX(self) -> np.ndarray:
        """``Σ x xᵀ`` over the examples learned (d × d): the stream's sufficient statistic (a view)."""
        d = self.feature_space.n_columns
        return self._XtX[:d, :d]

    @property
    def XtY(self) -> np.ndarray:
        """``Σ x yᵀ`` (one-hot ``y``; d × K) over the examples learned, with ``link="identity"`` (a view)."""
        return self._XtY[: self.feature_space.n_columns, : len(self.classes)]

    def _solver(self, second_moment: np.ndarray) -> RidgeSolver:
        """A :class:`RidgeSolver` with the features in their canonical (name-key) order."""
        d = second_moment.shape[0]
        return self._ridge_solver(second_moment, self._features.canonical_order(np.arange(d)))

    def _init_model(self) -> None:
        super()._init_model()
        self._XtY = np.zeros((0, 0))
        self._seen = [0, 0]  # columns and classes the steps so far have met (see _learn_groups)

    def _probabilities(self, scores: np.ndarray) -> np.ndarray:
        return softmax_rows(scores) if self.link == "softmax" else project_simplex(scores)

    def _grow(self, d: int, k: int) -> None:
        super()._grow(d, k)
        if self.link == "identity" and (d > self._XtY.shape[0] or k > self._XtY.shape[1]):
            XtY = np.zeros(self._W.shape)
            XtY[: self._XtY.shape[0], : self._XtY.shape[1]] = self._XtY
            self._XtY = XtY

    def _learn_groups(self, rows: SparseRows, y: np.ndarray, scores=None, weights: np.ndarray | None = None) -> None:
        # each group's step sees the columns and classes met up to its last row, as the learn_one
        # loop's would (a batch registers all its features and labels before its first step)
        self._reserve_columns()
        X = dense_rows(rows, self._width())
        for start in range(0, len(y), self.batch_size):
            end = min(start + self.batch_size, len(y))
            columns = rows.indices[rows.indptr[start] : rows.indptr[end]]
            self._seen[0] = max(self._seen[0], int(columns.max()) + 1 if len(columns) else 0)
            self._seen[1] = max(self._seen[1], int(y[start:end].max()) + 1)
            d, K = self._seen
            self._step(np.ascontiguousarray(X[start:end, :d]), y[start:end], d, K,
                       None if weights is None else weights[start:end])

    def _step(self, X: np.ndarray, y: np.ndarray, d: int, K: int, w: np.ndarray | None = None) -> None:
        """One stream step: fold the group (rows of weights ``w``; ``None``: 1) into the statistics, then update W."""
        w = None if w is None else weights_or_none(w)  # (a group of weight-1 rows: the unweighted step, whatever its road)
        Y = one_hot(y, K)
        weighted = X if w is None else X * w[:, None]
        mass = len(y) if w is None else float(w.sum())
        self._XtX[:d, :d] += weighted.T @ X
        self._n += mass
        second_moment = self._XtX[:d, :d] / self._n
        if self.link == "identity":  # recursive least squares: the closed form on all data so far
            self._XtY[:d, :K] += weighted.T @ Y
            self._W[:d, :K] = self._solver(second_moment).solve(self._XtY[:d, :K] / self._n)
            return
        # a contiguous W: BLAS sums a strided view (a batch grows W ahead of its steps) in another order
        residual = softmax_rows(X @ np.ascontiguousarray(self._W[:d, :K])) - Y  # ŷ − y, L = 1
        self._W[:d, :K] -= self._solver(second_moment).solve(weighted.T @ residual / mass)

    def fit(self, X, y, max_iter: int = 200, tol: float = 1e-9, callback=None, w=None):
        """Alg. 1 on a whole data set (a DataFrame, array, CSR matrix or list of dicts) to
        convergence: until the multinomial log-loss improves by less than ``tol`` (relative),
        or ``max_iter`` iterations. Replaces the statistics with those of ``X``. The log-loss
        of each iteration is kept in ``self.history_``. ``w``: the rows' weights (the weighted
        problem: an integer weight is the row repeated; a row of weight 0 is left out).

        ``callback(iteration, model)``, if given, is called after every iteration with the
        model holding that iterate (for progress, or to pick the iteration count on held-out
        data: an unregularised softmax fit overfits as it converges)."""
        X, y, weights = weighted_batch(self, X, y, w)
        X, y_idx = self._dataset(X, y)
        weights = self._batch_class_weights(y_idx, weights)
        d, K = X.shape[1], len(self._labels)
        Y = one_hot(y_idx, K)
        weighted = X if weights is None else X * weights[:, None]
        self._n = len(y_idx) if weights is None else float(weights.sum())
        self._seen = [d, K]
        self._XtX[:d, :d] = weighted.T @ X
        with self._batch_fit():
            solve = self._solver(self._XtX[:d, :d] / self._n).solve  # one factorisation for every iteration
        if self.link == "identity":
            self._XtY[:d, :K] = weighted.T @ Y
            self._W[:d, :K] = solve(self._XtY[:d, :K] / self._n)
            self.history_ = []
            return self
        W = np.zeros((d, K))
        scores = X @ W  # one product per iteration: the scores of the log-loss are the next step's
        self.history_ = [log_loss(scores, y_idx, weights)]
        for iteration in range(1, max_iter + 1):
            W -= solve(weighted.T @ (softmax_rows(scores) - Y) / self._n)
            scores = X @ W
            self.history_.append(log_loss(scores, y_idx, weights))
            if callback is not None:
                self._W[:d, :K] = W
                callback(iteration, self)
            if self.history_[-2] - self.history_[-1] <= tol * abs(self.history_[-2]):
                break
        self._W[:d, :K] = W
        return self

    def _export_model(self) -> dict:
        return {**super()._export_model(), "XtY": self._XtY.copy(), "seen": list(self._seen)}

    def _restore_model(self, model: dict) -> None:
        super()._restore_model(model)
        self._XtY = np.asarray(model["XtY"], np.float64).copy()
        self._seen = [int(v) for v in model.get("seen", self._W.shape)]  # (states before it: every column and class)
