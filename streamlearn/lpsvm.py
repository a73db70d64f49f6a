"""The ℓp-norm multi-class SVM of Lei, Dogan, Binder & Kloft,
*Multi-class SVMs: From Tighter Data-Dependent Generalization Bounds to Novel Algorithms*
(``../shared/papers/001_9340a29bc499f11f.txt``).

Problem (P) with the Crammer–Singer hinge, for 1 < p ≤ 2:

    min_W  ½ (Σ_j ||w_j||_2^p)^(2/p) + C Σ_i max(0, 1 − (<w_{y_i}, x_i> − max_{j≠y_i} <w_j, x_i>))

solved by Algorithm 1: with class weights β (``||β||_{p/(2−p)} ≤ 1``, Eq. 8) fixed, the
problem is a Crammer–Singer SVM whose dual (Problem 15, Eq. 11) is solved by dual coordinate
ascent, each example's restricted subproblem (Eq. 13) exactly (:mod:`streamlearn.kernels.lpsvm`);
then β has the closed form of Eq. 14, ``β_j = (||w_j|| / ||(||w_1||, …, ||w_c||)||_p)^(2−p)``.
β starts at ``(1/c)^(1/p)``. Each outer iteration records the primal (P), the dual of the
completely dualized Problem 13

    D(α) = −½ (Σ_j ||Σ_i α_ij x_i||^{p*})^{2/p*} + Σ_i α_{i y_i},   p* = p/(p−1),

and their relative gap ``(P − D)/P`` in ``history_``; the solver stops when that gap is at
most ``tol``. The inner ascent for fixed β stops when the gap of Problem 15 is at most
``tol/2`` (relative), so the primal falls at every outer iteration: the β step lowers the
objective of Eq. 8 to P(w) with w fixed, and the w step lowers it with β fixed.

**p = 2 is Crammer & Singer exactly:** the constraint becomes ``||β||_∞ ≤ 1``, Eq. 14 gives
``β_j = (||w_j||/||W||_{2,2})^0 = 1``, Problem 15 with β ≡ 1 is CS's dual, and Problem 13's
regularizer ``½ (Σ_j ||v_j||²)^{2/2}`` is CS's too (``tests/test_lpsvm.py`` checks it against
LIBLINEAR ``-s 4``).

**In a stream** the solver is a batch method, so the learner keeps a window of the last
``window`` examples (:mod:`streamlearn.window`, shared with the least-squares chains) and
refits on it every ``refit_every`` examples, warm-started from the previous fit's α on the
examples still in the window (0 for the new ones) and its β (``(1/c)^(1/p)`` for a class new
since). :meth:`LpNormMulticlassSVM.fit` solves a whole data set instead. Predictions come from
the last fit: until the first one, and for a class or a feature that arrived since, the scores
are 0.
"""

from __future__ import annotations

import time

import numpy as np

from .base import StreamClassifier
from .checks import check_positive
from .batches import SparseRows
from .errors import InvalidParameterError
from .kernels import compiled
from .sample_weights import NO_WEIGHTS, weighted_batch
from .window import RefitWindow

_lpsvm = compiled("lpsvm")
_rows = compiled("rows")
#: a class weight is kept at least this (Eq. 14 gives 0 to a class whose w is 0, and the
#: restricted step divides by it)
BETA_FLOOR = 1e-12
#: the KKT violation (in margin units) below which a shrunk pass first checks the duality gap;
#: each failed check halves it (LIBLINEAR's schedule for its shrinking tolerance)
KKT_START = 1.0
#: relative gap to which the first inner solve (fixed β) runs; later ones run to a tenth of the
#: last outer gap, and at least to tol/2
INNER_START = 0.1


def lp_norm(values: np.ndarray, p: float) -> float:
    """``(Σ |v|^p)^(1/p)`` without overflow for large ``p`` (p* = p/(p−1) reaches 11 at p = 1.1)."""
    top = float(np.max(np.abs(values), initial=0.0))
    if top == 0.0:
        return 0.0
    return top * float(np.sum((np.abs(values) / top) ** p)) ** (1.0 / p)


def class_weights(norms: np.ndarray, p: float) -> np.ndarray:
    """Eq. 14: ``β_j = ||w_j||^(2−p) (Σ_k ||w_k||^p)^((p−2)/p) = (||w_j|| / N)^(2−p)``, N the
    p-norm of the class norms (floored at :data:`BETA_FLOOR`)."""
    total = lp_norm(norms, p)
    if total == 0.0:
        return np.ones_like(norms)
    return np.maximum((norms / total) ** (2.0 - p), BETA_FLOOR)


def primal_objective(rows: SparseRows, y: np.ndarray, V: np.ndarray, beta: np.ndarray, p: float, C: float,
                     hinge: float | None = None, weights: np.ndarray = NO_WEIGHTS) -> float:
    """Problem (P) at ``w_j = β_j V[:, j]`` (``hinge``: the hinge total there, if already known;
    ``weights``: the examples', empty for all 1)."""
    norms = beta * np.sqrt((V * V).sum(axis=0))
    if hinge is None:
        hinge = _lpsvm.hinge_total(rows.indptr, rows.indices, rows.data, y, V, beta, weights)
    return 0.5 * lp_norm(norms, p) ** 2 + C * hinge


def dual_objective(alpha: np.ndarray, y: np.ndarray, V: np.ndarray, p: float) -> float:
    """Problem 13 at α (``V = Σ_i α_i x_i``)."""
    q = p / (p - 1.0)
    return -0.5 * lp_norm(np.sqrt((V * V).sum(axis=0)), q) ** 2 + float(alpha[np.arange(len(y)), y].sum())


def solve(rows: SparseRows, y: np.ndarray, n_features: int, n_classes: int, p: float, C: float, tol: float,
          max_iter: int, max_epochs: int, rng: np.random.Generator, alpha: np.ndarray | None = None,
          beta: np.ndarray | None = None, epoch_budget: int | None = None,
          weights: np.ndarray = NO_WEIGHTS) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """Algorithm 1 on the rows (class indices ``y``): returns ``(V, alpha, beta, history)`` with
    ``w_j = beta_j V[:, j]``. ``alpha`` and ``beta`` warm-start it (feasible: ``alpha_i ≤ C e_{y_i}``,
    ``alpha_i · 1 = 0``); by default ``alpha = 0`` and ``beta = (1/c)^(1/p)``. ``epoch_budget``
    bounds the passes of coordinate ascent over all outer iterations (``None``: ``max_epochs`` each);
    a solve that spends it ends after the outer iteration it is in, its last history entry
    marked ``"budget_spent"``. ``weights``: each example's weight on its hinge (empty: all 1)."""
    n = len(y)
    alpha = np.zeros((n, n_classes)) if alpha is None else np.ascontiguousarray(alpha, np.float64)
    beta = np.full(n_classes, (1.0 / n_classes) ** (1.0 / p)) if beta is None else np.asarray(beta, np.float64).copy()
    V = np.zeros((n_features, n_classes))
    _lpsvm.accumulate(rows.indptr, rows.indices, rows.data, alpha, V)
    sqnorm = np.zeros(n)
    np.add.at(sqnorm, np.repeat(np.arange(n), np.diff(rows.indptr)), rows.data**2)
    classes = np.tile(np.arange(n_classes, dtype=np.int64), (n, 1))  # each example's class order, for shrinking
    history = []
    inner_tol = INNER_START
    left = max_iter * max_epochs if epoch_budget is None else epoch_budget
    for iteration in range(1, max_iter + 1):
        start = time.perf_counter()
        epochs = 0
        kkt_tol = KKT_START
        active = np.ones(n, bool)
        n_active_classes = np.full(n, n_classes, np.int64)
        limit = min(max_epochs, left)
        while epochs < limit:  # Problem 15 for fixed beta, to a relative gap of inner_tol
            # shrinking (see dca_epoch): a full pass, then passes over what is left active until
            # its KKT violation is below kkt_tol; then the gap, on every example, decides, and a
            # check that fails tightens kkt_tol and reactivates everything
            violation = _lpsvm.dca_epoch(rows.indptr, rows.indices, rows.data, y, rng.permutation(np.flatnonzero(active)),
                                         sqnorm, beta, C, V, alpha, classes, n_active_classes, active, weights)
            epochs += 1
            if violation > kkt_tol and epochs < limit:
                continue
            regularizer = float(beta @ (V * V).sum(axis=0))  # Σ β_j ||v_j||² = Σ ||w_j||² / β_j
            hinge = _lpsvm.hinge_total(rows.indptr, rows.indices, rows.data, y, V, beta, weights)
            if regularizer + C * hinge - alpha[np.arange(n), y].sum() <= inner_tol * (0.5 * regularizer + C * hinge):
                break
            active[:] = True
            n_active_classes[:] = n_classes
            kkt_tol *= 0.5
        primal = primal_objective(rows, y, V, beta, p, C, hinge, weights)  # the loop ends on a check at this V
        dual = dual_objective(alpha, y, V, p)
        gap = (primal - dual) / primal if primal > 0 else 0.0
        history.append({"iteration": iteration, "primal": primal, "dual": dual, "gap": gap, "epochs": epochs,
                        "seconds": time.perf_counter() - start})
        left -= epochs
        if gap <= tol:
            break
        if left <= 0:
            history[-1]["budget_spent"] = True
            break
        # the β steps far from the optimum need no exact inner solve: a tenth of the gap will do
        inner_tol = max(0.5 * tol, min(inner_tol, 0.1 * gap))
        w_norms = beta * np.sqrt((V * V).sum(axis=0))
        beta = class_weights(w_norms, p)
    return V, alpha, beta, history


class LpNormMulticlassSVM(RefitWindow, StreamClassifier):
    """ℓp-norm multi-class SVM (001, Algorithm 1): Crammer–Singer's hinge with the class rows
    coupled by ``½ (Σ_j ||w_j||^p)^(2/p)``; ``p = 2`` is Crammer & Singer exactly. A batch
    solver: the stream refits it on a window of recent examples (see the module docstring).

    Parameters
    ----------
    p
        The norm's exponent, 1 < p ≤ 2.
    C
        Weight of the hinge losses (LIBLINEAR's C). The defaults ``p = 1.9, C = 1`` have the
        smallest mean validation regret over the 130 (p, C) pairs of the Table 2 benchmark on
        sector and news20, five validation splits each (``bench/results/lpsvm.json``): 0.18 points
        (p = 2, C = 1: 0.31). Two data sets only; the paper picks p and C by cross-validation.
    tol
        Stop when the relative duality gap ``(P − D)/P`` of Problem 13 is at most ``tol``.
    max_iter
        Most outer iterations (β updates) per fit.
    max_epochs
        Most passes of dual coordinate ascent per outer iteration.
    window, refit_every
        The stream keeps the last ``window`` examples and refits on them every
        ``refit_every`` examples.
    refit_steps
        The most coordinate steps (one example's subproblem, Eq. 13, each: about ``nnz per row ×
        classes`` operations) a stream refit takes over all its outer iterations, in whole passes
        over the window (at least one): a small window refits to ``tol``, a large one stops early,
        so the stream's cost per example is bounded (about a microsecond a step: 2 s a refit at the
        default) and a stop request waits for one bounded refit at most. The next refit goes on from
        where it stopped (warm start), so a stationary stream still reaches the window's optimum. A
        refit that spent it marks its last ``history_`` entry ``"budget_spent"``. :meth:`fit` is
        bounded by ``max_iter × max_epochs`` only.
    seed
        Seeds the order of the coordinate passes (a fit is deterministic given it).
    n_bits, standardize
        As :class:`~streamlearn.MulticlassSVM`.
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

    Attributes
    ----------
    classes
        The labels seen so far, in class-index order.
    class_weights_
        β of the last fit, one per class it saw.
    history_
        One dict per outer iteration of the last fit: ``primal``, ``dual``, relative ``gap``,
        ``epochs`` and ``seconds`` (not checkpointed).
    n_fits
        Fits so far (stream refits and :meth:`fit` calls).

    Examples
    --------
    >>> from streamlearn import LpNormMulticlassSVM
    >>> X = [{"a": 1.0}, {"b": 1.0}, {"a": 1.0, "c": 0.5}, {"b": 1.0, "c": 0.5}] * 5
    >>> y = ["A", "B", "A", "B"] * 5
    >>> model = LpNormMulticlassSVM(p=1.5, tol=1e-4).fit(X, y)
    >>> model.predict_one({"a": 2.0}), model.history_[-1]["gap"] <= 1e-4
    ('A', True)
    """

    def __init__(self, p: float = 1.9, C: float = 1.0, tol: float = 1e-3, max_iter: int = 50, max_epochs: int = 1000,
                 window: int = 10_000, refit_every: int = 1000, refit_steps: int = 2_000_000, seed: int | None = None,
                 n_bits: int | None = None,
                 standardize: bool = False, fit_intercept: bool = True,
                 intercept_scaling: float | str = 0.1, class_weight: dict | str | None = None):
        self.class_weight = class_weight
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 1.0 < p <= 2.0:
            raise InvalidParameterError(f"p must be a number with 1 < p <= 2, got {p!r}")
        check_positive("C", C)
        check_positive("tol", tol)
        check_positive("max_iter", max_iter, integer=True)
        check_positive("max_epochs", max_epochs, integer=True)
        check_positive("refit_steps", refit_steps, integer=True)
        self.refit_steps = refit_steps
        self.p, self.C, self.tol, self.max_iter, self.max_epochs = p, C, tol, max_iter, max_epochs
        self.window, self.refit_every, self.seed, self.n_bits, self.standardize = window, refit_every, seed, n_bits, standardize
        self.fit_intercept, self.intercept_scaling = fit_intercept, intercept_scaling
        self._check_window()
        self._reset()

    @classmethod
    def _unit_test_params(cls):
        yield {"window": 50, "refit_every": 7, "tol": 1e-2, "max_epochs": 20, "max_iter": 5}  # raw features: capped
        yield {"p": 2.0, "C": 0.5, "window": 30, "refit_every": 11, "standardize": True, "tol": 1e-2, "max_epochs": 100,
               "fit_intercept": True}

    def _init_model(self) -> None:
        self._V = np.zeros((0, 0))
        self._beta = np.zeros(0)
        self._alpha = np.zeros((0, 0))
        self._alpha_start = -1  # stream position of alpha's first row (-1: alpha is not the window's)
        self.history_: list = []
        self.n_fits = 0
        self._init_window()

    @property
    def class_weights_(self) -> np.ndarray:
        return self._beta.copy()

    def _solve(self, rows: SparseRows, y: np.ndarray, n_classes: int, alpha: np.ndarray | None,
               beta: np.ndarray | None, epoch_budget: int | None = None, weights: np.ndarray | None = None) -> None:
        # solved with the columns in name-key order and each row's entries sorted by it: every
        # dot product sums in one order, so neither the vocabulary's order nor a dict's key
        # order changes a bit of the fit
        d = self._features.n_columns
        rank = np.empty(d, np.int64)
        rank[self._features.canonical_order(np.arange(d))] = np.arange(d)
        indices, data = rank[rows.indices], rows.data.copy()
        _rows.sort_rows_by_key(rows.indptr, indices, data, np.arange(d))
        rng = np.random.default_rng([0 if self.seed is None else self.seed, self.n_fits])
        V, self._alpha, self._beta, self.history_ = solve(
            SparseRows(rows.indptr, indices, data), y, d, n_classes, float(self.p), float(self.C),
            float(self.tol), self.max_iter, self.max_epochs, rng, alpha, beta, epoch_budget,
            NO_WEIGHTS if weights is None else weights)
        self._V = np.ascontiguousarray(V[rank])  # back to vocabulary order
        self.n_fits += 1

    def _refit_window(self) -> None:
        rows, y = self._window_batch()
        n_classes = self._classes_so_far  # not the labels a batch registered ahead of its examples
        alpha = np.zeros((len(y), n_classes))
        if self._alpha_start >= 0:  # the previous fit's dual variables for the examples still here
            skip = self._window_start - self._alpha_start
            kept = self._alpha[skip:]
            alpha[: len(kept), : kept.shape[1]] = kept
        beta = np.full(n_classes, (1.0 / n_classes) ** (1.0 / self.p))
        beta[: len(self._beta)] = self._beta
        self._solve(rows, y, n_classes, alpha, beta, max(1, self.refit_steps // max(len(y), 1)), self._window_weight_array())
        self._alpha_start = self._window_start

    def fit(self, X, y, w=None):
        """Solve a whole data set (cold start; ``w``: the examples' weights on their hinge, 0 leaves
        one out); the stream's window is left as it is. Returns self."""
        X, y, weights = weighted_batch(self, X, y, w)
        rows = self._model_rows(self._encode_labelled(X, y), learn=True)
        targets = self._labels.indices(y, grow=True)
        self._solve(rows, targets, len(self._labels), None, None, None, self._batch_class_weights(targets, weights))
        self._alpha_start = -1
        self._has_fit = True
        return self

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        fitted = np.zeros((rows.n_rows, self._V.shape[1]))
        _lpsvm.scores(rows.indptr, rows.indices, rows.data, self._V, self._beta, fitted)
        out = np.zeros((rows.n_rows, len(self._labels)))  # classes new since the last fit score 0
        out[:, : fitted.shape[1]] = fitted
        return out

    def _export_model(self) -> dict:
        return {"V": self._V.copy(), "beta": self._beta.copy(), "alpha": self._alpha.copy(),
                "alpha_start": self._alpha_start,
                # the timings stay out: a state is the same whatever the machine's speed
                "history": [{k: v for k, v in h.items() if k != "seconds"} for h in self.history_], "n_fits": self.n_fits,
                **self._export_window()}

    def _restore_model(self, model: dict) -> None:
        self._V = np.ascontiguousarray(model["V"], np.float64).copy()
        self._beta = np.asarray(model["beta"], np.float64).copy()
        self._alpha = np.ascontiguousarray(model["alpha"], np.float64).copy()
        self._alpha_start = int(model["alpha_start"])
        self.history_ = [dict(h) for h in model["history"]]
        self.n_fits = int(model["n_fits"])
        self._restore_window(model)
