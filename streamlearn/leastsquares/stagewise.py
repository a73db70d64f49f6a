"""Alg. 3 of 004: :class:`StagewiseRegression`."""

from __future__ import annotations

import numpy as np

from ..scores import softmax_rows
from ..checks import check_positive
from ..batches import SparseRows
from ..errors import InvalidParameterError
from .dense import WindowRefit
from .generators import FeatureSampler, RandomFourierFeatures, generator_from_text
from .solvers import dense_rows, moment, one_hot, project_simplex, take_columns


class StagewiseRegression(WindowRefit):
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
        prediction calls it again); on the command line, their constructor call as text
        (``--param 'generator=RandomFourierFeatures(bandwidth=3.0)'``).
    block_size, stages
        Features per stage (the paper: about 1000) and the number of stages. The defaults, 5
        stages of 200 features on a ridge of 0.1, are the defaults protocol's winner over one
        pass with the default generator (``bench/results/defaults.md``).
    inner, inner_iterations
        The fit of a block (see above).
    window, refit_every, ridge, trace_ridge, max_features, standardize
        As :class:`CalibratedLeastSquares` (the stream refits on a window).
    fit_intercept
        Add the constant feature ``streamlearn.intercept.INTERCEPT_NAME`` (at ``intercept_scaling``'s
        value, as :class:`~streamlearn.MulticlassSVM`'s) to every row before the
        generator: the default :class:`FeatureSampler` ranks it first (it is non-zero on every row),
        which gives the first stage its intercept; random Fourier features only shift their
        phases by it. On by default (``bench/results/options-families.md``).
    intercept_scaling
        The constant feature's value: 0.1 (default), fixed — this learner solves its problem exactly
        (over its window), so the value only sets the penalty on the bias, and a fixed one keeps a
        batch ``fit`` one problem; ``"auto"`` as :class:`~streamlearn.MulticlassSVM`'s (the data's scale).

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
                 trace_ridge: float | None = None, max_features: int = 4096, seed: int | None = None, standardize: bool = False,
                 fit_intercept: bool = True, intercept_scaling: float | str = 0.1, class_weight: dict | str | None = None):
        if isinstance(generator, str):  # the command line's --param generator=...
            generator = generator_from_text(generator)
        self.generator = generator if generator is not None else FeatureSampler()
        self.standardize, self.trace_ridge, self.fit_intercept = standardize, trace_ridge, fit_intercept
        self.intercept_scaling, self.class_weight = intercept_scaling, class_weight
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
        yield {"block_size": 3, "stages": 2, "window": 60, "refit_every": 20, "fit_intercept": True}
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

    def _fit_dense(self, X: np.ndarray, y: np.ndarray, K: int, callback=None, weights: np.ndarray | None = None) -> None:
        Y = one_hot(y, K)
        n = len(y)
        columns = self._canonical_columns(X.shape[1])
        X = take_columns(X, columns)
        scores = np.zeros((n, K))
        self._stages, self.history_ = [], []
        for stage in range(self.stages):
            Z = self.generator(X, self.block_size, stage)
            solver = self._ridge_solver(moment(Z, Z, weights))
            if self.inner == "linear":
                W = solver.solve(moment(Z, Y - scores, weights))  # least squares on the residual
            else:
                W = np.zeros((Z.shape[1], K))
                for _ in range(self.inner_iterations):  # Alg. 1 with the earlier stages as an offset
                    W -= solver.solve(moment(Z, softmax_rows(scores + Z @ W) - Y, weights))
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
