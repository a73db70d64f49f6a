"""Alg. 2 of 004: :class:`CalibratedLeastSquares`."""

from __future__ import annotations

import numpy as np

from ..checks import check_positive
from ..batches import SparseRows
from ..errors import InvalidParameterError
from .dense import WindowRefit
from .solvers import calibration_basis, dense_rows, moment, one_hot, project_simplex, take_columns


class CalibratedLeastSquares(WindowRefit):
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
    ridge, trace_ridge, max_features, seed, standardize, fit_intercept, intercept_scaling
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

    default_stream_ridge = {"ridge": 1e-3}

    def __init__(self, stages: int = 10, window: int = 10_000, refit_every: int = 1000, ridge: float | None = None,
                 trace_ridge: float | None = None, max_features: int = 4096, powers: tuple = (1, 2, 3),
                 seed: int | None = None, standardize: bool = False, fit_intercept: bool = True,
                 intercept_scaling: float | str = 0.1, class_weight: dict | str | None = None):
        self.stages, self.window, self.refit_every, self.standardize = stages, window, refit_every, standardize
        self.fit_intercept, self.intercept_scaling, self.class_weight = fit_intercept, intercept_scaling, class_weight
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

    @property
    def n_stages_fitted(self) -> int:
        """Stages of the calibrated chain fitted at the last refit (at most ``stages``)."""
        return len(self._chain)

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

    def _fit_dense(self, X: np.ndarray, y: np.ndarray, K: int, callback=None, weights: np.ndarray | None = None) -> None:
        """Alg. 2 for ``stages`` iterations (``weights``: each row's in Eq. 10's and Eq. 11's
        problems); ``history_`` holds the mean squared error ``(1/n) Σ ||ŷ − y||²`` after each stage."""
        Y = one_hot(y, K)
        n = len(y)
        columns = self._canonical_columns(X.shape[1])
        X = take_columns(X, columns)
        solver = self._ridge_solver(moment(X, X, weights))
        Y_hat = np.zeros((n, K))
        self._chain, self.history_ = [], []
        for _ in range(self.stages):
            W = solver.solve(moment(X, Y - Y_hat, weights))  # Eq. 10
            U = calibration_basis(Y_hat + X @ W, self.powers)
            W_cal = self._ridge_solver(moment(U, U, weights)).solve(moment(U, Y, weights))  # Eq. 11
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
