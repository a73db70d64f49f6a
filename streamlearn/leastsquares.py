"""The least-squares family of Agarwal, Kakade, Karampatziakis, Song & Valiant, *Least
Squares Revisited: Scalable Approaches for Multi-class Prediction*
(``../shared/papers/004_6d6f30a18e3b636b.txt``).

* :class:`GeneralizedLeastSquares` — Alg. 1: the preconditioned step
  ``Wᵀ ← Wᵀ − (1/L) Σ̂⁻¹ Ê[(ŷ − y) xᵀ]`` (Eq. 6) with the link ``g = ∇Φ`` (softmax, L = 1; or
  the identity, for which one step is plain least squares);
* :class:`CalibratedLeastSquares` — Alg. 2: alternate the residual fit (Eq. 10) and the
  calibration fit on ``G(ỹ) = [ỹ, ỹ², ỹ³]`` (Eq. 11) followed by the Euclidean projection
  onto the probability simplex; the model is the chain of stages, replayed to predict.

Both work on dense features (the model's feature space is materialised as a ``d × d``
second-moment matrix), so they refuse more than ``max_features`` features with a message
that points to stagewise fitting of feature blocks (Alg. 3, :class:`StagewiseRegression`).

**Two modes.** ``learn_one``/``learn_many`` are the stream: every group of ``batch_size``
examples is folded into running sufficient statistics (``Σ̂ = E[x xᵀ]``, and for the
identity link ``E[x yᵀ]`` too, so the identity link *is* recursive least squares: the
weights equal the closed-form solution on everything seen so far), and the softmax link
takes one preconditioned step on the group's residual with the running ``Σ̂``. ``fit(X, y)``
is the batch algorithm: Alg. 1 (or Alg. 2) iterated to convergence on the given data — use
it on a buffered window or a whole data set when the stream can be revisited; use the
stream mode when it cannot.

**Ridge.** ``Σ̂`` is singular whenever a feature is constant zero or features are collinear
(raw MNIST pixels are both), so it is factored as ``Σ̂ + r·I`` (Cholesky): ``r`` is ``ridge``
times the mean diagonal of ``Σ̂`` (at least 1e-12), or ``trace_ridge`` times its trace, a ridge
that grows with the dimension. Given neither, :class:`GeneralizedLeastSquares` and
:class:`CalibratedLeastSquares` take one default in the stream and another in
:meth:`~GeneralizedLeastSquares.fit` (near 004's parameter-free :data:`PARAMETER_FREE_RIDGE`):
each mode's default is the defaults protocol's winner for it (``bench/results/defaults.md``,
rows ``NAME`` and ``NAME.fit``).

**Multi-label.** The paper notes that y may live on the hypercube; river's classifier API
gives one hashable label per example, so a label *set* would be a single class here:
multi-label learning (and its projection onto the hypercube) is not offered.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np
from river import base as river_base

from .base import StreamClassifier, check_positive, softmax_rows
from .batches import SparseRows
from .errors import InvalidInputError, InvalidParameterError
from .features import name_keys
from .window import RefitWindow

if TYPE_CHECKING:
    import pandas


def project_simplex(V: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row onto the probability simplex (sort-based,
    O(k log k) per row; Duchi et al. 2008).

    >>> project_simplex(np.array([[0.5, 0.5, 0.5], [2.0, 0.0, -1.0]])).round(4).tolist()
    [[0.3333, 0.3333, 0.3333], [1.0, 0.0, 0.0]]
    """
    V = np.atleast_2d(np.asarray(V, np.float64))
    n, k = V.shape
    U = -np.sort(-V, axis=1)
    cumulative = np.cumsum(U, axis=1) - 1.0
    positive = U - cumulative / np.arange(1, k + 1) > 0
    rho = k - 1 - np.argmax(positive[:, ::-1], axis=1)  # the last index where it holds
    theta = cumulative[np.arange(n), rho] / (rho + 1)
    return np.maximum(V - theta[:, None], 0.0)


def dense_rows(rows: SparseRows, width: int) -> np.ndarray:
    """A CSR batch as a dense ``(n, width)`` array (columns beyond ``width`` dropped)."""
    out = np.zeros((rows.n_rows, width))
    start, end = rows.indptr[0], rows.indptr[-1]  # a batch may be a view on part of longer arrays
    row_of = np.repeat(np.arange(rows.n_rows), np.diff(rows.indptr))
    indices, data = rows.indices[start:end], rows.data[start:end]
    keep = indices < width
    np.add.at(out, (row_of[keep], indices[keep]), data[keep])
    return out


def take_columns(X: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``X[:, columns]``, without a copy when ``columns`` is ``0..d-1`` of all of X."""
    if len(columns) == X.shape[1] and np.array_equal(columns, np.arange(len(columns))):
        return X
    return X[:, columns]


def one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    out = np.zeros((len(y), n_classes))
    out[np.arange(len(y)), y] = 1.0
    return out


def _ridged(second_moment: np.ndarray, ridge: float) -> np.ndarray:
    d = second_moment.shape[0]
    scale = float(np.trace(second_moment)) / max(d, 1) * ridge  # relative to the features' own scale
    return second_moment + max(scale, 1e-12) * np.eye(d)


class RidgeSolver:
    """Solves ``(Σ̂ + ridge · mean(diag Σ̂) · I) Z = B`` by one Cholesky factorisation (see the
    module docstring). ``order`` permutes the features into a canonical order (their name
    keys) before factoring, so that the order in which features entered the vocabulary —
    which depends on the key order of the first dicts — does not change the rounding of an
    ill-conditioned solve."""

    def __init__(self, second_moment: np.ndarray, ridge: float, order: np.ndarray | None = None):
        import scipy.linalg  # here, not at import: the streamlearn command does not pay for it

        A = _ridged(second_moment, ridge)
        self.order = None if order is None or np.array_equal(order, np.arange(len(order))) else order
        if self.order is not None:
            A = A[np.ix_(self.order, self.order)]
        self._chol = scipy.linalg.cho_factor(A, check_finite=False)

    def solve(self, B: np.ndarray) -> np.ndarray:
        import scipy.linalg

        if self.order is None:
            return scipy.linalg.cho_solve(self._chol, B, check_finite=False)
        out = np.empty_like(B)
        out[self.order] = scipy.linalg.cho_solve(self._chol, B[self.order], check_finite=False)
        return out


#: the ridge of 004's parameter-free batch fit: the least that keeps Σ̂ invertible, relative to its mean diagonal
PARAMETER_FREE_RIDGE = 1e-6


class _DenseLeastSquares(StreamClassifier):
    """Dense feature space, running second moment, class growth.

    Without ``ridge`` or ``trace_ridge`` the stream and the batch fit each take their own
    default, the defaults protocol's winner for that mode: the stream ``_default_stream_ridge``,
    :meth:`fit` :attr:`fit_ridge`. A ridge given applies to both."""

    #: the stream's ridge when none is given (``{"ridge": r}`` or ``{"trace_ridge": t}``; None: one must be given)
    _default_stream_ridge: dict | None = None
    #: :meth:`fit`'s ridge when none is given
    _default_fit_ridge: dict = {"ridge": PARAMETER_FREE_RIDGE}
    _fitting = False  # True inside fit(): the batch algorithm's ridge applies

    def _check_common(self) -> None:
        if self.ridge is None and self.trace_ridge is None and self._default_stream_ridge is None:
            raise InvalidParameterError("give ridge (relative to the mean diagonal of Σ̂) or trace_ridge (relative to its trace)")
        if self.ridge is not None and self.trace_ridge is not None:
            raise InvalidParameterError(f"give ridge or trace_ridge, not both (got ridge={self.ridge!r}, trace_ridge="
                                        f"{self.trace_ridge!r})")
        if self.ridge is not None:
            check_positive("ridge", self.ridge)
        if self.trace_ridge is not None:
            check_positive("trace_ridge", self.trace_ridge)
        check_positive("max_features", self.max_features, integer=True)

    @property
    def stream_ridge(self) -> dict:
        """The ridge of the stream steps: ``{"ridge": r}`` (relative to the mean diagonal of Σ̂)
        or ``{"trace_ridge": t}`` (relative to its trace)."""
        if self.ridge is not None:
            return {"ridge": self.ridge}
        return {"trace_ridge": self.trace_ridge} if self.trace_ridge is not None else dict(self._default_stream_ridge)

    @property
    def fit_ridge(self) -> dict:
        """The ridge of :meth:`fit`, in the form of :attr:`stream_ridge`."""
        if self.ridge is None and self.trace_ridge is None:
            return dict(self._default_fit_ridge)
        return self.stream_ridge

    def _relative_ridge(self, d: int) -> float:
        """The ridge relative to the mean diagonal of Σ̂ that applies now (the stream's, or in
        :meth:`fit` without a given ridge 004's parameter-free one); trace_ridge · tr(Σ̂) = (trace_ridge · d) · tr(Σ̂)/d."""
        ridge = self.fit_ridge if self._fitting else self.stream_ridge
        return ridge["ridge"] if "ridge" in ridge else ridge["trace_ridge"] * d

    def _ridge_solver(self, second_moment: np.ndarray, order: np.ndarray | None = None) -> RidgeSolver:
        """A :class:`RidgeSolver` of ``second_moment`` with the ridge that applies now (:meth:`_relative_ridge`)."""
        return RidgeSolver(second_moment, self._relative_ridge(second_moment.shape[0]), order)

    @contextlib.contextmanager
    def _batch_fit(self):
        """While :meth:`fit` runs: its ridge applies (see the class docstring)."""
        self._fitting = True
        try:
            yield
        finally:
            self._fitting = False

    def _init_model(self) -> None:
        self._n = 0
        self._XtX = np.zeros((0, 0))
        self._W = np.zeros((0, 0))  # (d, K)

    def _width(self) -> int:
        """Columns of the dense model: the vocabulary's, which never passes ``max_features``
        (:meth:`StreamClassifier._within_column_room` refuses an input that would take it there)."""
        return self._features.n_columns

    @property
    def max_columns(self) -> int:
        """The vocabulary's limit (see :meth:`StreamClassifier._within_column_room`)."""
        return self.max_features

    def _grow(self, d: int, k: int) -> None:
        d0, k0 = self._W.shape
        if d > self._XtX.shape[0]:
            XtX = np.zeros((d, d))
            XtX[: self._XtX.shape[0], : self._XtX.shape[0]] = self._XtX
            self._XtX = XtX
        if d > d0 or k > k0:
            W = np.zeros((max(d, d0), max(k, k0)))
            W[:d0, :k0] = self._W
            self._W = W

    def _reserve_columns(self) -> None:
        self._grow(self._width(), len(self._labels))

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        self._reserve_columns()
        d, k = self._W.shape
        return dense_rows(rows, d) @ self._W[:, : len(self._labels)]

    def _export_model(self) -> dict:
        # grown to the vocabulary and classes first, as any prediction grows them: otherwise a
        # model that has scored a batch (the runner scores before it learns) and one that has
        # not would export the same model in arrays of different sizes
        self._reserve_columns()
        return {"n": self._n, "XtX": self._XtX.copy(), "W": self._W.copy()}

    def _restore_model(self, model: dict) -> None:
        self._n = int(model["n"])
        self._XtX = np.asarray(model["XtX"], np.float64).copy()
        self._W = np.asarray(model["W"], np.float64).copy()

    def _dataset(self, X, y) -> tuple[np.ndarray, np.ndarray]:
        """A whole labelled data set as a dense matrix over the vocabulary's columns (the
        vocabulary and classes grow). A float NumPy array whose columns are, or become, the
        vocabulary's first columns in order is used as it is (no sparse round trip: a
        60,000 x 8,000 array is not copied)."""
        if self._scaler is None and isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64 and np.isfinite(X).all():
            n_labels = self._labels.validate_batch(y)
            if n_labels != X.shape[0]:
                raise InvalidInputError("length-mismatch", f"X has {X.shape[0]} rows but y has {n_labels} labels")
            columns = self._within_column_room(lambda: self._features.columns(list(range(X.shape[1])), grow=True))
            if np.array_equal(columns, np.arange(X.shape[1])):
                y_idx = self._labels.indices(y, grow=True)
                self._grow(self._width(), len(self._labels))
                return X, y_idx
        rows = self._model_rows(self._encode_labelled(X, y), learn=True)
        y_idx = self._labels.indices(y, grow=True)
        d = self._width()
        self._grow(d, len(self._labels))
        return dense_rows(rows, d), y_idx


class GeneralizedLeastSquares(_DenseLeastSquares):
    """Alg. 1 of 004 (see the module docstring).

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
        Learn an intercept per class: the feature ``streamlearn.base.INTERCEPT_NAME`` at
        ``INTERCEPT_VALUE`` (0.1) on every row, after ``standardize``, regularised with the other
        weights (as :class:`~streamlearn.MulticlassSVM`'s). Off by default here: this family's
        defaults and paper experiments have not been re-measured with it.

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

    _default_stream_ridge = {"ridge": 1e-3}
    _default_fit_ridge = {"ridge": 1e-4}

    def __init__(self, link: str = "softmax", batch_size: int = 128, ridge: float | None = None,
                 trace_ridge: float | None = None, max_features: int = 4096, seed: int | None = None, standardize: bool = False,
                 fit_intercept: bool = False):
        self.link, self.batch_size, self.ridge, self.max_features, self.seed = link, batch_size, ridge, max_features, seed
        self.trace_ridge, self.standardize, self.fit_intercept = trace_ridge, standardize, fit_intercept
        if link not in ("softmax", "identity"):
            raise InvalidParameterError(f"link must be 'softmax' or 'identity', got {link!r}")
        self._check_common()
        self._reset()

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"link": "identity", "batch_size": 5, "standardize": True, "ridge": 1e-3, "fit_intercept": True}

    def _solver(self, second_moment: np.ndarray) -> RidgeSolver:
        """A :class:`RidgeSolver` with the features in their canonical (name-key) order."""
        d = second_moment.shape[0]
        return self._ridge_solver(second_moment, self._features.canonical_order(np.arange(d)))

    def _init_model(self) -> None:
        super()._init_model()
        self._XtY = np.zeros((0, 0))

    def _probabilities(self, scores: np.ndarray) -> np.ndarray:
        return softmax_rows(scores) if self.link == "softmax" else project_simplex(scores)

    def _grow(self, d: int, k: int) -> None:
        super()._grow(d, k)
        if self.link == "identity" and (d > self._XtY.shape[0] or k > self._XtY.shape[1]):
            XtY = np.zeros(self._W.shape)
            XtY[: self._XtY.shape[0], : self._XtY.shape[1]] = self._XtY
            self._XtY = XtY

    def _learn_groups(self, rows: SparseRows, y: np.ndarray) -> None:
        self._reserve_columns()
        d, K = self._width(), len(self._labels)
        X = dense_rows(rows, d)
        for start in range(0, len(y), self.batch_size):
            self._step(X[start : start + self.batch_size], y[start : start + self.batch_size], d, K)

    def _step(self, X: np.ndarray, y: np.ndarray, d: int, K: int) -> None:
        """One stream step: fold the group into the statistics, then update W."""
        Y = one_hot(y, K)
        self._XtX[:d, :d] += X.T @ X
        self._n += len(y)
        second_moment = self._XtX[:d, :d] / self._n
        if self.link == "identity":  # recursive least squares: the closed form on all data so far
            self._XtY[:d, :K] += X.T @ Y
            self._W[:d, :K] = self._solver(second_moment).solve(self._XtY[:d, :K] / self._n)
            return
        residual = softmax_rows(X @ self._W[:d, :K]) - Y  # ŷ − y, L = 1
        self._W[:d, :K] -= self._solver(second_moment).solve(X.T @ residual / len(y))

    def fit(self, X, y, max_iter: int = 200, tol: float = 1e-9, callback=None):
        """Alg. 1 on a whole data set (a DataFrame, array, CSR matrix or list of dicts) to
        convergence: until the multinomial log-loss improves by less than ``tol`` (relative),
        or ``max_iter`` iterations. Replaces the statistics with those of ``X``. The log-loss
        of each iteration is kept in ``self.history_``.

        ``callback(iteration, model)``, if given, is called after every iteration with the
        model holding that iterate (for progress, or to pick the iteration count on held-out
        data: an unregularised softmax fit overfits as it converges)."""
        X, y_idx = self._dataset(X, y)
        d, K = X.shape[1], len(self._labels)
        Y = one_hot(y_idx, K)
        self._n = len(y_idx)
        self._XtX[:d, :d] = X.T @ X
        with self._batch_fit():
            solve = self._solver(self._XtX[:d, :d] / self._n).solve  # one factorisation for every iteration
        if self.link == "identity":
            self._XtY[:d, :K] = X.T @ Y
            self._W[:d, :K] = solve(self._XtY[:d, :K] / self._n)
            self.history_ = []
            return self
        W = np.zeros((d, K))
        scores = X @ W  # one product per iteration: the scores of the log-loss are the next step's
        self.history_ = [log_loss(scores, y_idx)]
        for iteration in range(1, max_iter + 1):
            W -= solve(X.T @ (softmax_rows(scores) - Y) / self._n)
            scores = X @ W
            self.history_.append(log_loss(scores, y_idx))
            if callback is not None:
                self._W[:d, :K] = W
                callback(iteration, self)
            if self.history_[-2] - self.history_[-1] <= tol * abs(self.history_[-2]):
                break
        self._W[:d, :K] = W
        return self

    def _export_model(self) -> dict:
        return {**super()._export_model(), "XtY": self._XtY.copy()}

    def _restore_model(self, model: dict) -> None:
        super()._restore_model(model)
        self._XtY = np.asarray(model["XtY"], np.float64).copy()


def log_loss(scores: np.ndarray, y: np.ndarray) -> float:
    """Mean multinomial log-loss of scores (log-sum-exp)."""
    m = scores.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(scores - m).sum(axis=1))
    return float(np.mean(lse - scores[np.arange(len(y)), y]))


def calibration_basis(Y: np.ndarray, powers=(1, 2, 3)) -> np.ndarray:
    """``G(ỹ)``: the elementwise powers of the predictions, side by side (n, m·k)."""
    return np.hstack([Y**p for p in powers])


class _WindowRefit(RefitWindow, _DenseLeastSquares):
    """Stream mode of the algorithms that revisit their data (Alg. 2, Alg. 3): the window of
    :mod:`streamlearn.window`, refit densely."""

    def _init_model(self) -> None:
        super()._init_model()
        self._init_window()

    def _refit_window(self) -> None:
        rows, y = self._window_batch()
        self._fit_dense(dense_rows(rows, self._width()), y, len(self._labels))

    def _fit_dense(self, X: np.ndarray, y: np.ndarray, K: int, callback=None) -> None:
        raise NotImplementedError

    def fit(self, X, y, callback=None):
        """Run the batch algorithm on a whole data set; replaces the fitted model.

        ``callback(stage, model)``, if given, is called after every stage (1, 2, …) with the
        model as it stands after that stage (to report progress, or to pick the number of
        stages on held-out data)."""
        X, y_idx = self._dataset(X, y)
        with self._batch_fit():
            self._fit_dense(X, y_idx, len(self._labels), callback)
        return self

    def _canonical_columns(self, d: int) -> np.ndarray:
        """Vocabulary columns ``0..d-1`` in name-key order: fitted stages work in this order,
        so that neither the key order of dicts nor the vocabulary's order changes a result."""
        return self._features.canonical_order(np.arange(d))


class CalibratedLeastSquares(_WindowRefit):
    """Alg. 2 of 004: alternate the residual fit (Eq. 10) and the calibration fit on
    ``G(ỹ) = [ỹ, ỹ², ỹ³]`` (Eq. 11, elementwise powers), then project onto the simplex.

    The model is the chain of stages ``(W_t, W̃_t)``; predicting replays it:
    ``ŷ ← clip(W̃_t G(ŷ + W_t x))``. Alg. 2 revisits its data, so the stream mode keeps a
    window of the last ``window`` examples and refits the chain on it (``stages``
    iterations) every ``refit_every`` examples; :meth:`fit` runs it on a whole data set.
    ``predict_proba_one`` is the projected prediction itself.

    Parameters
    ----------
    stages
        Iterations of Alg. 2 per fit.
    window, refit_every
        The stream keeps the last ``window`` examples and refits on them every
        ``refit_every`` examples.
    ridge, trace_ridge, max_features, seed, standardize, fit_intercept
        As :class:`GeneralizedLeastSquares`. Without either, the stream's window refits take a
        ridge of 1e-3 and :meth:`fit` 004's parameter-free 1e-6 (in both fits of a stage): with 10
        stages, the defaults protocol's winners for each mode over raw and random-feature
        inputs (``bench/results/defaults.md``).
    powers
        The calibration basis ``G``'s elementwise powers.

    Attributes
    ----------
    history_
        The mean squared error after each stage of the last fit.
    classes, n_pending
        As every learner (:class:`~streamlearn.base.StreamClassifier`).

    Examples
    --------
    >>> from streamlearn import CalibratedLeastSquares
    >>> model = CalibratedLeastSquares(stages=3)
    >>> _ = model.fit([{"a": 1.0}, {"b": 1.0}, {"a": 1.0, "b": 0.2}], ["x", "y", "x"])
    >>> model.predict_one({"a": 1.0})
    'x'
    """

    _default_stream_ridge = {"ridge": 1e-3}

    def __init__(self, stages: int = 10, window: int = 10_000, refit_every: int = 1000, ridge: float | None = None,
                 trace_ridge: float | None = None, max_features: int = 4096, powers: tuple = (1, 2, 3),
                 seed: int | None = None, standardize: bool = False, fit_intercept: bool = False):
        self.stages, self.window, self.refit_every, self.standardize = stages, window, refit_every, standardize
        self.fit_intercept = fit_intercept
        self.ridge, self.trace_ridge, self.max_features, self.powers, self.seed = ridge, trace_ridge, max_features, tuple(powers), seed
        check_positive("stages", stages, integer=True)
        self._check_window()
        if not self.powers or any(not isinstance(p, int) or p < 1 for p in self.powers):
            raise InvalidParameterError(f"powers must be positive integers, got {powers!r}")
        self._check_common()
        self._reset()

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"stages": 2, "window": 50, "refit_every": 7, "powers": (1, 2), "fit_intercept": True}

    def _init_model(self) -> None:
        super()._init_model()
        self._chain: list = []  # [(columns in canonical order, W (d, K), W̃ (m·K, K))]

    def _probabilities(self, scores: np.ndarray) -> np.ndarray:
        return project_simplex(scores) if scores.shape[1] else scores

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        K = len(self._labels)
        d = self._features.n_columns
        return self._replay(dense_rows(rows, d), K)

    def _replay(self, X: np.ndarray, K: int) -> np.ndarray:
        Y_hat = np.zeros((X.shape[0], K))
        for columns, W, W_cal in self._chain:
            kk = W.shape[1]
            tilde = Y_hat[:, :kk] + take_columns(X, columns) @ W
            calibrated = project_simplex(calibration_basis(tilde, self.powers) @ W_cal)
            Y_hat = np.zeros((X.shape[0], K))
            Y_hat[:, :kk] = calibrated
        return Y_hat

    def _fit_dense(self, X: np.ndarray, y: np.ndarray, K: int, callback=None) -> None:
        """Alg. 2 for ``stages`` iterations; ``history_`` holds the mean squared error
        ``(1/n) Σ ||ŷ − y||²`` after each stage."""
        Y = one_hot(y, K)
        n = len(y)
        columns = self._canonical_columns(X.shape[1])
        X = take_columns(X, columns)
        solver = self._ridge_solver(X.T @ X / n)
        Y_hat = np.zeros((n, K))
        self._chain, self.history_ = [], []
        for _ in range(self.stages):
            W = solver.solve(X.T @ (Y - Y_hat) / n)  # Eq. 10
            U = calibration_basis(Y_hat + X @ W, self.powers)
            W_cal = self._ridge_solver(U.T @ U / n).solve(U.T @ Y / n)  # Eq. 11
            Y_hat = project_simplex(U @ W_cal)
            # C order, as a restored checkpoint has it: BLAS rounds F- and C-ordered operands differently
            self._chain.append((columns, np.ascontiguousarray(W), np.ascontiguousarray(W_cal)))
            self.history_.append(float(((Y_hat - Y) ** 2).sum(axis=1).mean()))
            if callback is not None:
                callback(len(self._chain), self)

    def _export_model(self) -> dict:
        return {"chain": [[c, W, W_cal] for c, W, W_cal in self._chain], **self._export_window()}

    def _restore_model(self, model: dict) -> None:
        self._chain = [(np.asarray(c, np.int64), np.asarray(W, np.float64), np.asarray(Wc, np.float64))
                       for c, W, Wc in model["chain"]]
        self._restore_window(model)


class _GeneratorState:
    """A GEN's checkpoint: its parameters and what it learned from the data it first saw
    (``_FITTED``: :class:`FeatureSampler`'s feature ranking). Without the latter a restored
    sampler ranked the columns of whatever batch it was asked to predict, and the stages read
    other features. Caches that are rebuilt on demand are not state."""

    _FITTED: tuple = ()

    def export_state(self) -> dict:
        return {"class": type(self).__name__, **{k: v for k, v in vars(self).items()
                                                 if v is not None and (not k.startswith("_") or k in self._FITTED)}}

    @classmethod
    def from_state(cls, state: dict):
        fields = {k: v for k, v in state.items() if k != "class"}
        generator = cls(**{k: v for k, v in fields.items() if not k.startswith("_")})
        for name, value in fields.items():
            if name.startswith("_"):
                setattr(generator, name, np.asarray(value))
        return generator


class RandomFourierFeatures(_GeneratorState, river_base.MiniBatchTransformer):
    """Random Fourier features of the Gaussian kernel ``exp(-||x - x'||² / (2 s²))`` (Rahimi &
    Recht 2007): ``z(x) = sqrt(2/m) cos(x Ω + b)`` with ``Ω ~ N(0, 1/s²)`` and ``b ~ U[0, 2π]``.

    Two uses:

    * GEN for Alg. 3 of 004 (:class:`StagewiseRegression`): called as ``gen(X, m, stage)`` on a
      dense block, ``Ω`` and ``b`` drawn per stage from ``seed`` and the stage number (a stage's
      block is reproduced exactly to predict);
    * a river transformer (``transform_one`` / ``transform_many``), so that
      ``RandomFourierFeatures(...) | GeneralizedLeastSquares()`` is a river pipeline: each input
      feature *name* gets its row of ``Ω`` from ``seed`` and the name's stable key
      (:func:`~streamlearn.features.name_keys`), drawn on first sight, so a stream may bring new
      features at any time; the outputs are features ``0 .. n_components - 1``.

    Parameters
    ----------
    bandwidth
        ``s`` of the kernel (the scale of the inputs' distances that matter).
    seed
        Seeds ``Ω`` and ``b``.
    n_components
        ``m`` of the transformer (the GEN takes ``m`` per call).

    Attributes
    ----------
    None public: ``Ω``'s rows drawn so far are a cache (a function of ``seed`` and the names).

    Examples
    --------
    >>> gen = RandomFourierFeatures(bandwidth=2.0, seed=0)
    >>> gen(np.ones((3, 5)), m=4, stage=0).shape
    (3, 4)
    >>> from river import compose
    >>> from streamlearn import GeneralizedLeastSquares
    >>> model = RandomFourierFeatures(bandwidth=1.0, n_components=50) | GeneralizedLeastSquares()
    >>> isinstance(model, compose.Pipeline), len(RandomFourierFeatures(n_components=50).transform_one({"a": 1.0}))
    (True, 50)
    """

    def __init__(self, bandwidth: float = 1.0, seed: int = 0, n_components: int = 1000):
        check_positive("bandwidth", bandwidth)
        check_positive("n_components", n_components, integer=True)
        self.bandwidth, self.seed, self.n_components = bandwidth, seed, n_components

    def __call__(self, X: np.ndarray, m: int, stage: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, stage])
        omega = rng.normal(scale=1.0 / self.bandwidth, size=(X.shape[1], m))
        shift = rng.uniform(0, 2 * np.pi, m)
        Z = X @ omega
        Z += shift
        np.cos(Z, out=Z)
        Z *= np.sqrt(2.0 / m)
        return Z

    def _projection(self, names: list) -> tuple[np.ndarray, np.ndarray]:
        """``Ω``'s rows for these feature names (``(len(names), m)``, drawn once per name) and ``b``."""
        cache = self.__dict__.setdefault("_omega", {})
        if "_shift" not in self.__dict__:
            self._shift = np.random.default_rng([self.seed, 0]).uniform(0, 2 * np.pi, self.n_components)
        missing = [name for name in dict.fromkeys(names) if name not in cache]
        for name, key in zip(missing, name_keys(missing).tolist()):
            rng = np.random.default_rng([self.seed, 1, key & ((1 << 63) - 1)])
            cache[name] = rng.normal(scale=1.0 / self.bandwidth, size=self.n_components)
        rows = np.array([cache[name] for name in names]) if names else np.zeros((0, self.n_components))
        return rows, self._shift

    def _features(self, values: np.ndarray, names: list) -> np.ndarray:
        omega, shift = self._projection(names)
        Z = values @ omega + shift
        np.cos(Z, out=Z)
        Z *= np.sqrt(2.0 / self.n_components)
        return Z

    def learn_one(self, x: dict) -> None:
        """Nothing to learn: the features are fixed by ``seed``."""

    def learn_many(self, X) -> None:
        """Nothing to learn: the features are fixed by ``seed``."""

    def transform_one(self, x: dict) -> dict:
        values = np.fromiter(x.values(), np.float64, len(x))
        return dict(enumerate(self._features(values[None, :], list(x))[0].tolist()))

    def transform_many(self, X) -> "pandas.DataFrame":
        import pandas as pd

        return pd.DataFrame(self._features(X.to_numpy(np.float64), list(X.columns)), index=X.index)

    def __repr__(self):
        return (f"RandomFourierFeatures(bandwidth={self.bandwidth!r}, seed={self.seed!r}, "
                f"n_components={self.n_components!r})")


class FeatureSampler(_GeneratorState):
    """GEN for Alg. 3: blocks of the original features. ``order="frequency"`` takes the
    features by decreasing number of non-zero values in the data it first sees (the paper:
    fitting frequent words first gives better text models), ``"random"`` a seeded
    permutation; ``replace=True`` draws each block at random with replacement instead.
    Stage t takes block t of the order (cycling when the features run out).

    Parameters
    ----------
    order
        ``"frequency"`` or ``"random"`` (see above).
    replace
        Draw each block with replacement instead of walking the order.
    seed
        Seeds the random order and the draws.

    Attributes
    ----------
    None public: the ranking learned from the first data (checkpointed with the model).

    Examples
    --------
    >>> FeatureSampler()(np.array([[0., 1., 2.], [0., 3., 0.]]), m=2, stage=0).tolist()
    [[1.0, 2.0], [3.0, 0.0]]
    """

    _FITTED = ("_ranking",)

    def __init__(self, order: str = "frequency", replace: bool = False, seed: int = 0):
        if order not in ("frequency", "random"):
            raise InvalidParameterError(f"order must be 'frequency' or 'random', got {order!r}")
        self.order, self.replace, self.seed = order, bool(replace), seed
        self._ranking = None

    def columns(self, X: np.ndarray, m: int, stage: int) -> np.ndarray:
        """The original columns of stage ``stage``'s block."""
        d = X.shape[1]
        if self.replace:
            return np.random.default_rng([self.seed, stage]).integers(0, d, min(m, d))
        if self._ranking is None or len(self._ranking) != d:
            if self.order == "frequency":
                self._ranking = np.argsort(-np.count_nonzero(X, axis=0), kind="stable")
            else:
                self._ranking = np.random.default_rng(self.seed).permutation(d)
        start = (stage * m) % d
        return np.take(self._ranking, np.arange(start, start + min(m, d)), mode="wrap")

    def __call__(self, X: np.ndarray, m: int, stage: int) -> np.ndarray:
        return X[:, self.columns(X, m, stage)]

    def __repr__(self):
        return f"FeatureSampler(order={self.order!r}, replace={self.replace!r}, seed={self.seed!r})"


class StagewiseRegression(_WindowRefit):
    """Alg. 3 of 004: each stage draws a block of ``block_size`` features from GEN and fits
    it to the residual of the stages before, with least squares (``inner="linear"``, Eq. 10
    on the block) or ``inner_iterations`` preconditioned softmax steps (``inner="logistic"``,
    Alg. 1 with the earlier stages' scores as an offset). Predictions replay the stages:
    ``scores = Σ_t GEN_t(x) W_t``.

    Parameters
    ----------
    generator
        A callable ``GEN(X_dense, m, stage) -> (n, m)`` features: :class:`RandomFourierFeatures`,
        :class:`FeatureSampler` or your own function (it must be deterministic in ``stage``:
        prediction calls it again).
    block_size, stages
        Features per stage (the paper: about 1000) and the number of stages. The defaults, 5
        stages of 200 features on a ridge of 0.1, are the defaults protocol's winner over one
        pass with the default generator (``bench/results/defaults.md``).
    inner, inner_iterations
        The fit of a block (see above).
    window, refit_every, ridge, trace_ridge, max_features, standardize
        As :class:`CalibratedLeastSquares` (the stream refits on a window).

    Attributes
    ----------
    history_
        The training error after each stage of the last fit.
    classes, n_pending
        As every learner (:class:`~streamlearn.base.StreamClassifier`).

    ``predict_proba_one``: the softmax of the scores for ``inner="logistic"``, the simplex
    projection of the scores for ``"linear"``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamlearn import RandomFourierFeatures, StagewiseRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2))
    >>> y = (X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4).astype(int)  # a ring: not linearly separable
    >>> model = StagewiseRegression(RandomFourierFeatures(bandwidth=1.0, seed=0), block_size=50, stages=4)
    >>> _ = model.fit(X, y)
    >>> len(model.history_), bool(np.mean(model.predict_many(X) == y) > 0.9)
    (4, True)
    """

    def __init__(self, generator=None, block_size: int = 200, stages: int = 5, inner: str = "linear",
                 inner_iterations: int = 50, window: int = 10_000, refit_every: int = 1000, ridge: float | None = 0.1,
                 trace_ridge: float | None = None, max_features: int = 4096, seed: int | None = None, standardize: bool = False):
        self.generator = generator if generator is not None else FeatureSampler()
        self.standardize, self.trace_ridge = standardize, trace_ridge
        self.block_size, self.stages, self.inner, self.inner_iterations = block_size, stages, inner, inner_iterations
        self.window, self.refit_every, self.ridge, self.max_features, self.seed = window, refit_every, ridge, max_features, seed
        if not callable(self.generator):
            raise InvalidParameterError(f"generator must be callable GEN(X, m, stage), got {generator!r}")
        if inner not in ("linear", "logistic"):
            raise InvalidParameterError(f"inner must be 'linear' or 'logistic', got {inner!r}")
        for name in ("block_size", "stages", "inner_iterations"):
            check_positive(name, getattr(self, name), integer=True)
        self._check_window()
        self._check_common()
        self._reset()

    @classmethod
    def _unit_test_params(cls):
        yield {"block_size": 3, "stages": 2, "window": 60, "refit_every": 20}
        yield {"generator": RandomFourierFeatures(bandwidth=3.0, seed=1), "block_size": 8, "stages": 2, "inner": "logistic",
               "inner_iterations": 3, "window": 40, "refit_every": 13}

    def _init_model(self) -> None:
        super()._init_model()
        self._stages: list = []  # [(columns in canonical order, W (m, K))]

    def _probabilities(self, scores: np.ndarray) -> np.ndarray:
        if not scores.shape[1]:
            return scores
        return softmax_rows(scores) if self.inner == "logistic" else project_simplex(scores)

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        X = dense_rows(rows, self._features.n_columns)
        scores = np.zeros((X.shape[0], len(self._labels)))
        for stage, (columns, W) in enumerate(self._stages):
            scores[:, : W.shape[1]] += self.generator(take_columns(X, columns), self.block_size, stage) @ W
        return scores

    def _fit_dense(self, X: np.ndarray, y: np.ndarray, K: int, callback=None) -> None:
        Y = one_hot(y, K)
        n = len(y)
        columns = self._canonical_columns(X.shape[1])
        X = take_columns(X, columns)
        scores = np.zeros((n, K))
        self._stages, self.history_ = [], []
        for stage in range(self.stages):
            Z = self.generator(X, self.block_size, stage)
            solver = self._ridge_solver(Z.T @ Z / n)
            if self.inner == "linear":
                W = solver.solve(Z.T @ (Y - scores) / n)  # least squares on the residual
            else:
                W = np.zeros((Z.shape[1], K))
                for _ in range(self.inner_iterations):  # Alg. 1 with the earlier stages as an offset
                    W -= solver.solve(Z.T @ (softmax_rows(scores + Z @ W) - Y) / n)
            W = np.ascontiguousarray(W)  # as a restored checkpoint has it (BLAS rounds F and C order differently)
            scores += Z @ W
            self._stages.append((columns, W))
            self.history_.append(float(np.mean(scores.argmax(axis=1) != y)))
            if callback is not None:
                callback(stage + 1, self)

    def export_state(self) -> dict:
        """As the base class, with the generator as plain data (a user function cannot be
        checkpointed: a ``ValueError`` says so)."""
        state = super().export_state()
        generator = self.generator  # (river gives an estimator parameter as a (class, params) pair)
        if not isinstance(generator, (RandomFourierFeatures, FeatureSampler)):
            raise ValueError(f"cannot checkpoint StagewiseRegression with a user generator {generator!r}: "
                             "only RandomFourierFeatures and FeatureSampler are plain data")
        state["params"] = {**state["params"], "generator": generator.export_state()}
        return state

    @classmethod
    def from_state(cls, state: dict) -> "StagewiseRegression":
        spec = state["params"]["generator"]
        generator = {"RandomFourierFeatures": RandomFourierFeatures, "FeatureSampler": FeatureSampler}[spec["class"]].from_state(spec)
        return super().from_state({**state, "params": {**state["params"], "generator": generator}})

    def _export_model(self) -> dict:
        return {"stages": [[c, W] for c, W in self._stages], **self._export_window()}

    def _restore_model(self, model: dict) -> None:
        self._stages = [(np.asarray(c, np.int64), np.asarray(W, np.float64)) for c, W in model["stages"]]
        self._restore_window(model)
