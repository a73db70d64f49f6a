"""The Primal Gradient Solver (PGS) of Zhu, Chen, Zhu, Wang, Wang & Chen, *Inverse Time
Dependency in Convex Regularized Learning* (``../shared/papers/003_5fe9be115ce0064e.txt``):
dual averaging in λ-space with the ℓp regularizer ``r(w) = ||w||_p² / (2(p-1))``,
``p ∈ (1, 2]``.

For each mini-batch ``A_t`` of ``k`` consecutive stream examples (Fig. 1):

    λ_t ∈ ∂ (1/k) Σ_{A_t} l(<w_{t-1}, x>; y)        (line 6)
    λ  ← λ − λ_t                                      (line 7)
    w_t = ∇r*( λ / ((t+1) σ) )                        (line 8, Fig. 2)

with ``(∇r*(θ))_i = (p-1) ||θ||_q^(2-q) |θ_i|^(q-1) sgn θ_i`` (Corollary 3, ``1/p + 1/q = 1``)
and, on the bounded domain ``||w||_p <= B``, the same point scaled back onto the sphere
when it lies outside (Corollary 2, Eq. 28).

**Which norm divides in Fig. 2, line 6.** The figure writes ``w ← B w / ||w||_q``; Eq. 28
gives ``min(B, (p-1)||θ||_q) / ||θ||_q^(q/p) · θ^(q/p)``, which is ``B w / ||w||_p`` because
``||∇r*(θ)||_p = (p-1) ||θ||_q``. The tests check numerically that the ``||w||_p`` version
equals Eq. 28 and lands on the sphere, and that the ``||w||_q`` version does not: ``||w||_p``
is right, the figure's ``q`` is a typo.

**Lazy mirror map.** The paper computes ``∇r*`` in O(n) per step and so recommends
``k ≈ n/d`` for ``p < 2``. Here ``w`` is never materialised: the kernel keeps
``S = Σ|λ_i|^q`` up to date in O(nnz) per step, and a prediction evaluates ``w`` on the
coordinates of ``x`` only (:mod:`streamlearn.kernels.pgs`). A step costs O(k·nnz) for every
``p``; ``p = 2`` keeps the O(1) coefficient of Eq. 10. ``φ(λ) = |λ|^(q-1) sgn λ`` is stored
beside ``λ``, so a prediction needs no power and an updated entry one. The incremental sums are recomputed
exactly once 16 times more entries have changed than are non-zero (amortised O(1) per entry).

Predictions use the last iterate ``w_t`` (``iterate="last"``), the running average
``(1/t) Σ_s w_s`` (``iterate="average"``: kept lazily, O(1) per changed entry and O(K) per
step, two more weight-sized arrays), or, as Fig. 1 line 9 does, a uniformly random one
among ``w_1..w_t`` (``iterate="random"``, reservoir sampling with ``seed``; a snapshot with
probability 1/t per step, O(n log T) in all). Learning is the same for all three.

Two learners, both river classifiers:

* :class:`PrimalGradientSolver` — binary (hinge, logistic or least squares on ±1 targets);
* :class:`MulticlassPGS` — K classes with the Crammer–Singer hinge or the softmax loss of
  ``000_9ee2d88cd77f9d98.txt`` and the entrywise ``||W||_p²`` or the block
  ``||W||_{2,p}²`` regularizer of ``001_9340a29bc499f11f.txt`` (class rows coupled
  through the ℓp norm of their ℓ2 norms). With the block norm,
  ``∇r*(Θ)_j = (p-1) ||Θ||_{2,q}^(2-q) ||θ_j||_2^(q-2) θ_j`` (the gradient of
  ``||Θ||_{2,q}² / (2(q-1))``, the conjugate of ``||W||_{2,p}² / (2(p-1))``; tested
  numerically). With the block norm and the hinge this is an online ℓp-norm
  multi-class SVM.
"""

from __future__ import annotations

import numpy as np

from ..adaptation import ChangeWatch, learn_in_watched_spans, restart_step
from ..base import StreamClassifier
from ..checks import check_positive
from ..errors import InvalidInputError, InvalidParameterError
from ..batches import SparseRows
from ..kernels import codes, compiled
from ..kernels.codes import CRAMMER_SINGER, SOFTMAX
from ..sample_weights import NO_WEIGHTS
from ..weights import class_capacity

_pgs = compiled("pgs")

_ITERATES = ("last", "average", "random")
_NO_SCORES = np.zeros((0, 0))


class _PGSLearner(StreamClassifier):
    """Shared state and kernels: the dual matrix ``Lam``, its sums, the step count."""

    #: a row's weight scales its sub-gradient in Fig. 1 line 7 (:func:`streamlearn.kernels.pgs.learn_groups`)
    takes_weights = True

    _binary = False

    def _check_common(self) -> None:
        if isinstance(self.p, bool) or not isinstance(self.p, (int, float)) or not 1.0 < self.p <= 2.0:
            raise InvalidParameterError(f"p must be in (1, 2] (r(w) = ||w||_p^2/(2(p-1)) is strongly convex only there), got {self.p!r}")
        check_positive("sigma", self.sigma)
        if self.bound is not None:
            check_positive("bound", self.bound)
        if self.iterate not in _ITERATES:
            raise InvalidParameterError(f"iterate must be one of {_ITERATES}, got {self.iterate!r}")
        if not isinstance(self.adapt, bool):
            raise InvalidParameterError(f"adapt must be True or False, got {self.adapt!r}")

    @property
    def _separate_phi(self) -> bool:
        """Whether φ(Lam) differs from Lam (entrywise regularizer with p < 2)."""
        return self._regularizer_code == codes.ENTRYWISE and self.p != 2.0

    @property
    def q(self) -> float:
        """The dual exponent, ``1/p + 1/q = 1``."""
        return self.p / (self.p - 1.0)

    def _n_columns(self) -> int:
        return 1 if self._binary else max(len(self._labels), 1)

    def _init_model(self) -> None:
        self._t = 0
        self._n_learned_classes = 0  # classes active at the last step (multi-class)
        self._Lam = np.zeros((0, 0))
        self._Phi = self._Lam  # φ(Lam); the same array when φ is the identity (p = 2 or the block norm)
        self._N = np.zeros(0)
        self._stats = np.zeros(3)  # S, entries changed since the last exact recomputation, non-zero entries
        self._rng = np.array([np.uint64((self.seed or 0) * 2654435761 + 1)], dtype=np.uint64)
        self._snap_Phi = np.zeros((0, 0))
        self._snap_N = np.zeros(0)
        self._snap_meta = np.zeros(2)  # t and S of the kept random iterate
        self._Acc = np.zeros((0, 0))  # averaged iterate (see kernels.pgs.learn_groups)
        self._Mark = np.zeros((0, 0))
        self._Cj = np.zeros(0)
        self._watch = ChangeWatch() if self.adapt and self._loss_code != codes.REGRESSION else None

    def _reserve(self, n_features: int, n_classes: int) -> None:
        d, k = self._Lam.shape
        if n_features <= d and n_classes <= k:
            return
        shape = (max(n_features, 2 * d if n_features > d else d), class_capacity(max(n_classes, 2 * k if n_classes > k else k)))

        def grown(a, fill_shape):
            out = np.zeros(fill_shape)
            out[tuple(slice(0, s) for s in a.shape)] = a
            return out

        self._Phi = grown(self._Phi, shape) if self._separate_phi else None
        self._Lam = grown(self._Lam, shape)
        if not self._separate_phi:
            self._Phi = self._Lam
        self._N = grown(self._N, (shape[1],))
        if self.iterate == "average":
            self._Acc, self._Mark, self._Cj = grown(self._Acc, shape), grown(self._Mark, shape), grown(self._Cj, (shape[1],))
        if self.iterate == "random":
            self._snap_Phi = grown(self._snap_Phi, shape)
            self._snap_N = grown(self._snap_N, (shape[1],))

    def _reserve_columns(self) -> None:
        self._reserve(self._features.n_columns, self._n_columns())

    @property
    def n_steps(self) -> int:
        return self._t

    # ------------------------------------------------------------------ learning
    #: the step scores each row by the predicting iterate as it stood at the row's turn
    _scores_while_learning = True

    @property
    def n_changes(self) -> int:
        """Rises of the prequential error detected so far (0 with ``adapt=False``; see ``adapt``)."""
        return 0 if self._watch is None else self._watch.changes

    def _learn_groups(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray | None = None,
                      weights: np.ndarray | None = None) -> None:
        """Fig. 1 on complete groups; ``weights`` (one per row) scale each row's sub-gradient
        (:func:`streamlearn.kernels.pgs.learn_groups`); the watch counts each row once."""
        weights = NO_WEIGHTS if weights is None else np.ascontiguousarray(weights, np.float64)
        if self._watch is None:
            return self._learn_span(rows, y, _NO_SCORES if scores is None else scores, weights)
        if scores is None:
            scores = np.empty((rows.n_rows, max(len(self._labels), 2)))
            scores.fill(-np.inf)
        learn_in_watched_spans(self._watch, rows, y, scores, self.batch_size, self._learn_span,
                               self._classes_known, self._restart, weights=weights if len(weights) else None)

    def _classes_known(self) -> int:
        return 2 if self._binary else self._n_learned_classes

    def _learn_span(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray, weights: np.ndarray = NO_WEIGHTS) -> None:
        n_classes = self._n_columns()
        self._reserve(self._features.n_columns, n_classes)
        self._t, self._n_learned_classes = _pgs.learn_groups(
            rows.indptr, rows.indices, rows.data, y, weights, self.batch_size, self._Lam, self._Phi, self._separate_phi,
            self._N, self._stats,
            self._n_learned_classes, self._t, float(self.sigma), float(self.p), self.q, float(self.bound or 0.0),
            self._loss_code, self._regularizer_code, self._rng, self._snap_Phi, self._snap_N, self._snap_meta,
            self.iterate == "random", self.iterate == "average", self._Acc, self._Mark, self._Cj, self._feature_keys(),
            scores,
        )  # fmt: skip

    def _restart(self) -> None:
        """After a detected change: the step counter restarts at ``t0`` (at most
        RESTART_EXAMPLES' worth of steps) and ``Lam`` is scaled by ``(t0+1)/(t+1)``. ``∇r*`` is
        positively homogeneous of degree 1 (for both regularizers), so ``w = ∇r*(Lam/((t+1)σ))``
        is unchanged, but the old gradients now weigh as ``t0`` steps' instead of ``t``: new
        gradients move ``w`` as they did at step ``t0``. The average restarts at the current
        iterate (as ``t0`` copies of it), and so does the kept random iterate."""
        t0 = restart_step(self._t, self.batch_size)
        if t0 == self._t:
            return
        self._Lam *= (t0 + 1.0) / (self._t + 1.0)
        if self._separate_phi:
            _pgs.phi_of(self._Lam, self.q - 1.0, self._Phi)
        n_classes = self._classes_known() if not self._binary else 1
        _pgs.exact_sums(self._Lam, self._N, np.argsort(self._feature_keys(), kind="mergesort"), n_classes, self.q,
                        self._stats)
        self._t = t0
        if self.iterate == "average":
            _, g = self._factors(n_classes)
            self._Acc.fill(0.0)
            self._Mark.fill(0.0)
            self._Cj[:n_classes] = t0 * g
        if self.iterate == "random":
            self._snap_Phi[:] = self._Phi
            self._snap_N[:] = self._N
            self._snap_meta[:] = (t0, self._stats[0])

    def _feature_keys(self) -> np.ndarray:
        """The name keys of the vocabulary's columns (the kernel's canonical order)."""
        return self._features.sort_keys(np.arange(self._features.n_columns, dtype=np.int64))

    # ---------------------------------------------------------------- weights
    def _iterate_state(self):
        if self.iterate == "random" and self._snap_meta[0] > 0:
            return int(self._snap_meta[0]), self._snap_Phi, self._snap_N, float(self._snap_meta[1])
        return self._t, self._Phi, self._N, float(self._stats[0])

    def _factors(self, n_classes: int):
        """``Phi`` of the predicting iterate and the factors ``g`` with ``w_j = g_j Phi_j``."""
        t, Phi, N, S = self._iterate_state()
        g = np.zeros(n_classes)
        _pgs.factors(t, float(self.sigma), float(self.p), self.q, float(self.bound or 0.0), self._regularizer_code,
                     S, N, n_classes, g)
        return Phi, g

    @property
    def kept_step(self) -> int:
        """With ``iterate="random"``: the step whose iterate is kept (0 before one is); 003 Thm. 1's random index."""
        return int(self._snap_meta[0])

    @property
    def changes_since_resummation(self) -> int:
        """Entries of the dual sums changed since they were last recomputed exactly (the drift bound's counter)."""
        return int(self._stats[1])

    def column_scores(self, rows: SparseRows, n_classes: int) -> np.ndarray:
        """Each encoded row's score for each of the first ``n_classes`` columns of the weights (the
        iterate the learner predicts with): classes, or the regressor's one output."""
        self._reserve(self._features.n_columns, n_classes)
        out = np.zeros((rows.n_rows, n_classes))
        if self.iterate == "average" and self._t > 0:
            _pgs.average_scores(rows.indptr, rows.indices, rows.data, self._Phi, self._Acc, self._Mark, self._Cj,
                                n_classes, self._t, out)
            return out
        Phi, g = self._factors(n_classes)
        _pgs.scores_batch(rows.indptr, rows.indices, rows.data, Phi, g, n_classes, out)
        return out

    def weight_matrix(self) -> np.ndarray:
        """The predictor ``w`` as a dense ``(columns, d)`` array (one row for the binary
        solver, one per class otherwise), materialised on demand (O(n))."""
        n_classes = self._n_columns()
        self._reserve(self._features.n_columns, n_classes)
        d = self._features.n_columns
        if self.iterate == "average" and self._t > 0:
            k = n_classes
            total = self._Acc[:d, :k] + self._Phi[:d, :k] * (self._Cj[:k] - self._Mark[:d, :k])
            return (total / self._t).T.copy()
        Phi, g = self._factors(n_classes)
        return (Phi[:d, :n_classes] * g).T.copy()

    # ------------------------------------------------------------------ state
    def _export_model(self) -> dict:
        d, k = self._features.n_columns, self._n_columns()
        self._reserve(d, k)
        model = {"t": self._t, "n_learned_classes": self._n_learned_classes, "Lam": self._Lam[:d, :k].copy(), "N": self._N[:k].copy(), "stats": self._stats.copy(),
                 "rng": int(self._rng[0])}
        if self.iterate == "average":
            model.update(Acc=self._Acc[:d, :k].copy(), Mark=self._Mark[:d, :k].copy(), Cj=self._Cj[:k].copy())
        if self.iterate == "random":
            model.update(snap_Phi=self._snap_Phi[:d, :k].copy(), snap_N=self._snap_N[:k].copy(), snap_meta=self._snap_meta.copy())
        if self._watch is not None:
            model["watch"] = self._watch.export()
        return model

    def _restore_model(self, model: dict) -> None:
        Lam = np.asarray(model["Lam"], np.float64)
        self._reserve(*Lam.shape)
        d, k = Lam.shape
        self._Lam[:d, :k] = Lam
        if self._separate_phi:  # φ(Lam) with the step's own arithmetic: bit for bit what learning kept
            _pgs.phi_of(self._Lam, self.q - 1.0, self._Phi)
        self._N[:k] = model["N"]
        self._stats = np.asarray(model["stats"], np.float64).copy()
        self._t = int(model["t"])
        self._n_learned_classes = int(model["n_learned_classes"])
        self._rng = np.array([model["rng"]], dtype=np.uint64)
        if self.iterate == "average":
            self._Acc[:d, :k], self._Mark[:d, :k], self._Cj[:k] = model["Acc"], model["Mark"], model["Cj"]
        if self.iterate == "random":
            self._snap_Phi[:d, :k] = model["snap_Phi"]
            self._snap_N[:k] = model["snap_N"]
            self._snap_meta = np.asarray(model["snap_meta"], np.float64).copy()
        if self._watch is not None and "watch" in model:  # absent: a state saved before adapt existed
            self._watch = ChangeWatch.restore(model["watch"])

    def __getstate__(self):
        state = dict(self.__dict__)
        d, k = self._features.n_columns, self._n_columns()
        state["_Lam"] = self._Lam[:d, :k].copy() if self._Lam.size else self._Lam
        state["_Phi"] = self._Phi[:d, :k].copy() if self._separate_phi and self._Phi.size else None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self._Phi is None:
            self._Phi = self._Lam


class PrimalGradientSolver(_PGSLearner):
    """Binary classification by the Primal Gradient Solver (003, Fig. 1 + Fig. 2).

    Parameters
    ----------
    loss
        ``"hinge"``, ``"logistic"`` or ``"squared"`` (least squares on ±1 targets, Table II's
        ℓ2-least squares; it is not Lipschitz on all of ℝⁿ, so it needs ``bound``).
    p
        The norm, in (1, 2].
    sigma
        Regularization weight σ of ``σ/(2(p-1)) ||w||_p²`` (Eq. 7).
    batch_size
        k, examples per step (consecutive stream examples).
    bound
        B of the domain ``||w||_p <= B``, or ``None`` for ℝⁿ.
    iterate
        ``"last"``, ``"average"`` or ``"random"`` (Fig. 1 line 9).
    seed
        Seeds the random iterate. ``class_weight``: as :class:`~streamlearn.MulticlassSVM`'s.
    standardize, fit_intercept, intercept_scaling
        As :class:`~streamlearn.GeneralizedLeastSquares`' (online scaling; an intercept, on by
        default: the defaults protocol chose it for :class:`MulticlassPGS`, and this binary solver,
        the same one, follows it — ``bench/README.md`` gives its figures on the binary streams; its
        value ``"auto"``, as the protocol chose: ``bench/results/options-families.md``).
    adapt
        Follow a stream that changes: the Page-Hinkley watch of :mod:`streamlearn.adaptation` on the
        prequential mistakes of the predicting iterate; on a rise, the step counter restarts and ``Lam``
        is rescaled so that ``w`` is kept but the old gradients weigh as ``RESTART_EXAMPLES`` examples'
        (see ``_restart``). On by default: the defaults protocol (``bench/results/options-families.md``)
        chose it for ``MulticlassPGS`` under its age constraint, and this family keeps one default.
        Without it the last iterate ``∇r*(Lam/((t+1)σ))`` follows an abrupt change on a young stream
        within about 1,000 examples by itself, but its recovery grows with the stream's age (never
        within 40,000 examples of a change at 10⁶: ``bench/results/drift-pgs.md``). The watch costs
        learning time where nothing changes (``bench/results/adaptation.md``): ``adapt=False`` for a
        stream known not to change.
    classes
        The (negative, positive) labels, ``(False, True)`` by default (river's binary
        convention; ``0``/``1`` work too, as they equal ``False``/``True``). Any other label
        is refused with a ``ValueError``. ``predict_proba_one`` gives both classes, the
        positive one with the sigmoid of the margin — a calibrated probability for the
        logistic loss only.

    Attributes
    ----------
    classes_
        The (negative, positive) labels; ``n_steps``, ``n_pending`` and ``weight_matrix()`` as
        :class:`MulticlassPGS`.

    Examples
    --------
    >>> from streamlearn import PrimalGradientSolver
    >>> model = PrimalGradientSolver(loss="logistic", p=1.5, sigma=0.01)
    >>> for _ in range(20):
    ...     model.learn_one({"a": 1.0}, True)
    ...     model.learn_one({"b": 1.0}, False)
    >>> model.predict_one({"a": 1.0}), model.predict_one({"b": 1.0})
    (True, False)
    """

    _binary = True
    _LOSSES = {"hinge": codes.HINGE, "logistic": codes.LOGISTIC, "squared": codes.SQUARED}
    max_classes = 2

    def __init__(self, loss: str = "hinge", p: float = 2.0, sigma: float = 1e-4, batch_size: int = 1,
                 bound: float | None = None, iterate: str = "last", seed: int | None = None,
                 classes: tuple = (False, True), standardize: bool = False, fit_intercept: bool = True,
                 adapt: bool = True, intercept_scaling: float | str = "auto", class_weight: dict | str | None = None):
        self.loss, self.p, self.sigma, self.batch_size, self.standardize = loss, p, sigma, batch_size, standardize
        self.fit_intercept, self.adapt, self.intercept_scaling, self.class_weight = fit_intercept, adapt, intercept_scaling, class_weight
        self.bound, self.iterate, self.seed, self.classes_ = bound, iterate, seed, tuple(classes)
        if len(self.classes_) != 2 or self.classes_[0] == self.classes_[1]:
            raise InvalidParameterError(f"classes must be two distinct labels (negative, positive), got {classes!r}")
        if loss not in self._LOSSES:
            raise InvalidParameterError(f"loss must be one of {sorted(self._LOSSES)}, got {loss!r}")
        if loss == "squared" and bound is None:
            raise InvalidParameterError(
                "loss='squared' needs a bound B: the least-squares loss is not Lipschitz on all of R^n, "
                "so the solver's guarantee (003, Sec. III) holds only on the domain ||w||_p <= B")
        self._check_common()
        self._loss_code = self._LOSSES[loss]
        self._regularizer_code = codes.ENTRYWISE
        self._reset()

    @property
    def _multiclass(self) -> bool:
        return False

    def _check_class_room(self, n_new: int) -> None:
        if n_new:
            raise InvalidInputError(
                "bad-label", f"{type(self).__name__} learns two classes, here {self.classes_!r} (negative, positive); "
                f"a label outside them was given (the model is unchanged): pass classes=(negative, positive), "
                f"e.g. classes=(-1, 1) for a LIBSVM file with labels -1/+1")

    def _init_model(self) -> None:
        super()._init_model()
        for label in self.classes_:  # index 0 = negative (-1), 1 = positive (+1)
            self._labels.index(self._labels.normalize(label), grow=True)

    def _get_params(self) -> dict:
        params = super()._get_params()
        params["classes"] = list(params.pop("classes", self.classes_))
        return params

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"loss": "logistic", "p": 1.5, "sigma": 1e-2, "batch_size": 3, "bound": 10.0, "iterate": "random", "seed": 1}
        yield {"loss": "squared", "p": 1.8, "sigma": 1e-2, "bound": 5.0, "iterate": "average", "fit_intercept": True}
        yield {"adapt": True, "iterate": "average"}

    def as_regression(self) -> "PrimalGradientSolver":
        """This solver with real targets and the squared loss: the learner inside
        :class:`~streamlearn.pgs.PrimalGradientRegressor` (003 Sec. 5.3)."""
        self._loss_code = codes.REGRESSION
        self._watch = None  # a real target has no mistake to watch
        return self

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        margin = self.column_scores(rows, 1)[:, 0]
        return np.column_stack([np.zeros(rows.n_rows), margin])  # softmax([0, m]) = sigmoid(m)


class MulticlassPGS(_PGSLearner):
    """Multi-class dual averaging with the ℓp (entrywise) or ℓ2,p (block) regularizer.

    ``loss="hinge"`` (Crammer–Singer, 000 Eq. 16) or ``"softmax"`` (000 Eq. 15);
    ``regularizer="entrywise"`` (``||W||_p²``) or ``"block"`` (``||W||_{2,p}²``, 001);
    other parameters as :class:`PrimalGradientSolver`. A class first seen mid-stream gets
    a zero dual row. ``predict_proba_one`` is a softmax of the scores (calibrated for the
    softmax loss only).

    Parameters
    ----------
    loss, regularizer
        As above.
    sigma
        As :class:`PrimalGradientSolver`; the default 1e-3 (with the last iterate) is the defaults
        protocol's choice across five data sets, one pass (``bench/results/defaults.md``).
    p, batch_size, bound, iterate, seed, standardize, fit_intercept, adapt, intercept_scaling, class_weight
        As :class:`PrimalGradientSolver`.

    Attributes
    ----------
    classes, n_pending
        As every learner; ``n_steps`` the steps taken, ``weight_matrix()`` the dense ``(K, d)`` weights.

    Examples
    --------
    >>> from streamlearn import MulticlassPGS
    >>> model = MulticlassPGS(p=1.5, regularizer="block", sigma=0.01)
    >>> for _ in range(20):
    ...     for label in "abc":
    ...         model.learn_one({label: 1.0}, label)
    >>> [model.predict_one({label: 1.0}) for label in "abc"]
    ['a', 'b', 'c']
    """

    _LOSSES = {"hinge": CRAMMER_SINGER, "softmax": SOFTMAX}
    _REGULARIZERS = {"entrywise": codes.ENTRYWISE, "block": codes.BLOCK}

    def __init__(self, loss: str = "hinge", p: float = 2.0, sigma: float = 1e-3, batch_size: int = 1,
                 bound: float | None = None, regularizer: str = "entrywise", iterate: str = "last",
                 seed: int | None = None, standardize: bool = False, fit_intercept: bool = True,
                 adapt: bool = True, intercept_scaling: float | str = "auto", class_weight: dict | str | None = None):
        self.loss, self.p, self.sigma, self.batch_size, self.standardize = loss, p, sigma, batch_size, standardize
        self.fit_intercept, self.adapt, self.intercept_scaling, self.class_weight = fit_intercept, adapt, intercept_scaling, class_weight
        self.bound, self.regularizer, self.iterate, self.seed = bound, regularizer, iterate, seed
        if loss not in self._LOSSES:
            raise InvalidParameterError(f"loss must be one of {sorted(self._LOSSES)}, got {loss!r}")
        if regularizer not in self._REGULARIZERS:
            raise InvalidParameterError(f"regularizer must be one of {sorted(self._REGULARIZERS)}, got {regularizer!r}")
        self._check_common()
        self._loss_code = self._LOSSES[loss]
        self._regularizer_code = self._REGULARIZERS[regularizer]
        self._reset()

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"loss": "softmax", "p": 1.5, "sigma": 1e-2, "batch_size": 3, "bound": 10.0, "regularizer": "block",
               "iterate": "random", "seed": 1}
        yield {"p": 1.8, "sigma": 1e-2, "iterate": "average", "standardize": True, "fit_intercept": True}
        yield {"adapt": True, "regularizer": "block", "p": 1.5, "iterate": "random", "seed": 3}

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        return self.column_scores(rows, len(self._labels))
