"""The ℓp-norm primal gradient solver on real targets (003 Sec. 5.3): :class:`PrimalGradientRegressor`,
a river ``MiniBatchRegressor`` around :class:`~streamlearn.pgs.solver.PrimalGradientSolver`."""

from __future__ import annotations

import numpy as np
from river import base as river_base

from ..base import STATE_FORMAT
from ..scores import labels_like
from ..batches import SparseRows
from ..errors import InvalidInputError, InvalidParameterError
from ..pending import PendingRows
from .solver import PrimalGradientSolver


class PrimalGradientRegressor(PendingRows, river_base.MiniBatchRegressor):
    """Least-squares regression by the Primal Gradient Solver (003, Fig. 1 + Fig. 2, Sec. IV):
    real-valued targets, loss ``(w.x − y)² / 2``, on the bounded domain ``||w||_p <= B``.

    ``bound`` has no default: the least-squares loss is not Lipschitz on all of ℝⁿ, so the
    solver's guarantee holds only on a bounded domain — ``None`` is refused with that
    reason. The other parameters are those of :class:`PrimalGradientSolver`; mini-batch
    semantics are the same (``learn_many`` equals the ``learn_one`` loop). It shares the
    solver's state and kernel (a binary solver whose targets are real numbers).

    Parameters
    ----------
    bound
        ``B`` of the domain ``||w||_p <= B`` (required).
    p, sigma, batch_size, iterate, seed
        As :class:`PrimalGradientSolver`. No intercept: 003's regression is through the origin
        (the classifiers' default intercept was chosen on classification data; give a constant
        feature for one).

    Attributes
    ----------
    n_pending
        Examples waiting for a full mini-batch (:meth:`flush` learns them).

    Examples
    --------
    >>> from streamlearn import PrimalGradientRegressor
    >>> model = PrimalGradientRegressor(bound=10.0, sigma=0.01)
    >>> for _ in range(200):
    ...     model.learn_one({"a": 1.0}, 2.0)
    ...     model.learn_one({"b": 1.0}, -1.0)
    >>> round(model.predict_one({"a": 1.0}), 2), round(model.predict_one({"b": 1.0}), 2)  # σ shrinks 2 and -1 a little
    (1.96, -0.98)
    """

    _target_dtype = np.dtype(np.float64)  # real targets (PendingRows)

    def __init__(self, bound: float | None, p: float = 2.0, sigma: float = 1e-4, batch_size: int = 1,
                 iterate: str = "last", seed: int | None = None):
        if bound is None:
            raise InvalidParameterError(
                "PrimalGradientRegressor needs a bound B: the least-squares loss is not Lipschitz on all of R^n, "
                "so the solver's guarantee (003, Sec. III) holds only on the domain ||w||_p <= B")
        self.bound, self.p, self.sigma, self.batch_size, self.iterate, self.seed = bound, p, sigma, batch_size, iterate, seed
        self._solver = PrimalGradientSolver(loss="squared", p=p, sigma=sigma, batch_size=batch_size, bound=bound,
                                            iterate=iterate, seed=seed, fit_intercept=False, adapt=False).as_regression()
        self._clear_pending()

    @property
    def solver(self) -> PrimalGradientSolver:
        """The solver inside (its ``weight_matrix()`` has the one output's weights as its row)."""
        return self._solver

    @classmethod
    def _unit_test_params(cls):
        yield {"bound": 100.0, "sigma": 1e-3}
        yield {"bound": 5.0, "p": 1.5, "sigma": 1e-2, "batch_size": 3, "iterate": "average"}

    @staticmethod
    def _target(y, row: int = 0) -> float:
        if isinstance(y, bool) or not isinstance(y, (int, float, np.integer, np.floating)) or not np.isfinite(y):
            raise InvalidInputError("bad-label", f"target {y!r} is not a finite number", row)
        return float(y)

    def learn_one(self, x: dict, y) -> None:
        target = self._target(y)
        self._gather(*self._solver.feature_space.encode_one(x, grow=True), target)

    def learn_many(self, X, y) -> None:
        targets = np.asarray([self._target(v, i) for i, v in enumerate(y.tolist() if hasattr(y, "tolist") else y)])
        n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
        if len(targets) != n_rows:
            raise InvalidInputError("length-mismatch", f"X has {n_rows} rows but y has {len(targets)} targets")
        self._learn_rows(self._solver.feature_space.encode_many(X, grow=True), targets)

    def _learn_groups(self, rows: SparseRows, targets: np.ndarray) -> None:
        self._solver._learn_groups(rows, np.ascontiguousarray(targets, dtype=np.float64))

    def predict_one(self, x: dict) -> float:
        cols, vals = self._solver.feature_space.encode_one(x, grow=False)
        return float(self._solver.column_scores(SparseRows(np.array([0, len(cols)], np.int64), cols, vals), 1)[0, 0])

    def predict_many(self, X):
        rows = self._solver.feature_space.encode_many(X, grow=False)
        predictions = self._solver.column_scores(rows, 1)[:, 0]
        return labels_like(predictions, X)

    def weight_matrix(self) -> np.ndarray:
        """``w`` as a ``(1, d)`` array over the feature space's columns."""
        return self._solver.weight_matrix()

    def export_state(self) -> dict:
        """Everything needed to resume (see :meth:`StreamClassifier.export_state`): the
        solver's state and the examples waiting for a full mini-batch."""
        return {"format": STATE_FORMAT, "class": type(self).__name__, "params": self._get_params(),
                "solver": self._solver.export_state(), "pending": self._export_pending()}

    @classmethod
    def from_state(cls, state: dict) -> "PrimalGradientRegressor":
        if state.get("format") != STATE_FORMAT or state.get("class") != cls.__name__:
            raise ValueError(f"state holds a {state.get('class')} of format {state.get('format')!r}, not a "
                             f"{cls.__name__} of format {STATE_FORMAT}")
        regressor = cls(**state["params"])
        regressor._solver = PrimalGradientSolver.from_state(state["solver"]).as_regression()
        regressor._restore_pending(state["pending"])
        return regressor
