"""The multi-class Pegasos family (MCID) of Chen, Chen & Yang,
*Characterizing Inverse Time Dependency in Multi-class Learning*
(``../shared/papers/000_9ee2d88cd77f9d98.txt``).

All five learners run the MCID solver (Alg. 1): for each mini-batch ``A_t`` of ``r``
consecutive stream examples,

    W^(t) = (1 - 1/t) W^(t-1) - 1/(lam t r) * sum_{(x, y) in A_t} dl/dW (W^(t-1))   (Eq. 14)

with the step ``eta_t = 1/(lam t)`` of the objective
``lam/2 ||W||_F^2 + E[l(W; x, y)]`` (Eq. 3). They differ only in the loss ``l``:

=============================  =========================================  ===========
learner                        loss                                       paper
=============================  =========================================  ===========
MulticlassLogisticRegression   softmax cross-entropy                      Alg. 2, Eq. 15
MulticlassSVM                  Crammer–Singer hinge                       Alg. 3, Eq. 16
MulticlassPerceptron           max_k w_k.x - w_y.x                        Alg. 4, Eq. 17
OneVsRestPegasos               K binary hinge losses ("K-Pegasos")        Sec. V-C
OneVsRestLogisticRegression    K binary logistic losses ("K-binaryLR")    Sec. V-C
=============================  =========================================  ===========

In a stream the mini-batch is not sampled at random (Alg. 1 line 3): it is the next
``batch_size`` examples, in order. The learners are therefore deterministic: ties in an
argmax go to the lowest class index, and ``seed`` has no effect on them (it is kept so
that every streamlearn learner takes one and checkpoints record it).

Options, both off by default:

* ``project=True`` — after each step, project ``W`` onto the ball of radius
  ``1/sqrt(lam)``, which contains the optimum (Pegasos' optional projection). It bounds
  the early iterates, which helps with a small ``lam`` and a large first gradient; for
  the one-vs-rest learners each class is projected onto its own ball, as K separate
  Pegasos runs would do.
* ``average=True`` — predict with the averaged iterate ``(1/t) sum_s W^(s)`` instead of
  the last one. It smooths the zig-zag of the 1/(lam t) steps and usually gives better
  held-out accuracy early in the stream; it costs a second weight matrix (memory x2)
  and one more sparse update per touched weight. Learning is unchanged: the iterates
  ``W^(t)`` are the same with or without it.
* ``average_power=q`` (with ``average=True``) — weight step ``s`` by ``s**q`` in that
  average: ``sum_s s^q W^(s) / sum_s s^q``. ``q = 0`` is the plain average; ``q > 0`` is
  the polynomial-decay averaging of Shamir & Zhang (ICML 2013), which forgets the first,
  largest steps faster — in a single pass the plain average still carries them. The
  defaults (``average=True``, ``q = 2``, no projection, and each learner's λ:
  :attr:`~_MCIDLearner.default_lam`) are the configuration with the smallest validation regret
  across five data sets, one pass (``bench/results/defaults.md``).
* ``adapt=True`` (the default) — watch the prequential mistakes with a Page-Hinkley test and,
  when the error rises, restart the step schedule and the average from the current weights, so
  that a model follows a changing stream however long it has run (:mod:`streamlearn.adaptation`).
  On a stream that does not change nothing fires and the steps are the paper's.
* ``calibrate=True`` (the default) — probabilities are ``softmax(scores / temperature)``, with the
  one temperature that minimises the log-loss of the last 1,024 examples' prequential scores
  (:mod:`streamlearn.calibration`); it leaves every prediction unchanged. ``False``: the raw
  softmax of the scores (the sigmoids normalised, for ``OneVsRestLogisticRegression``).
* ``lam="auto"`` — learn one model per λ in :data:`AUTO_LAMBDAS` on the same stream and
  predict with the one whose progressive (test-then-train) accuracy is highest, each example
  weighted by the square of its step so that the early steps, where a large λ always looks
  best, fade. Every example is learned by every candidate: the compute and the memory are
  ``len(AUTO_LAMBDAS)`` times those of one λ. ``selected_lam`` says which λ predicts now.
  It needs no validation split, and on data where the default λ is far from the best it
  recovers most of the gap (``bench/results/defaults.md``, column *lam="auto"*).
"""

from __future__ import annotations

import numpy as np

from .adaptation import CHECK_EVERY, RESTART_EXAMPLES, ChangeWatch, mistake_of_one, mistakes_of
from .base import StreamClassifier, average_power_of, check_positive, hide_unknown_classes
from .calibration import TemperatureCalibration
from .errors import InvalidParameterError
from .batches import SparseRows
from .kernels import codes, compiled
from .weights import ScaledWeights

_mcid = compiled("mcid")
#: the power of the averaged iterate by default: chosen, with each learner's λ and no projection,
#: by the smallest mean validation regret over five data sets, one pass (bench/results/defaults.md)
DEFAULT_AVERAGE_POWER = 2.0
_scaled = compiled("scaled")
#: the candidates of ``lam="auto"``: the decades of the defaults protocol's λ grid, 1e-4 first so that
#: ties (before any evidence) keep it
AUTO_LAMBDAS = (1e-4, 1e-3, 1e-5, 1e-6)
#: the kernels with the weight store's arrays left unchecked (made by ScaledWeights: see KernelModule.trusting)
_learn_groups = _mcid.trusting("learn_groups", frozenset(range(5, 10)))
_scores_batch = _scaled.trusting("scores_batch", frozenset(range(3, 7)))
_NO_SCORES = np.zeros((0, 0))  # learn_groups' scores_out when no scores are asked for


class _MCIDLearner(StreamClassifier):
    """Shared implementation: lazily scaled weights + the compiled Alg. 1 step."""

    _loss: int = codes.CRAMMER_SINGER
    _per_class_ball: bool = False
    #: λ when ``lam`` is not given: each learner's choice of the defaults protocol
    #: (``bench/defaults_bench.py``: smallest mean validation regret over five data sets, one pass)
    default_lam: float = 3e-4
    #: fold ``scale`` into ``V`` (O(d K), one pass) once a class's scale falls below this;
    #: ``None``: 1e-4 with an averaged iterate, 1e-30 without. The scale falls like 1/t, and
    #: with the projection by up to 100x per step early on. Without an average only overflow
    #: matters (``V ~ W / scale``);
    #: with one, ``U + A V`` cancels about log10(1/threshold) digits, so 4 of 16 there.
    _renormalize_below: float | None = None

    def __init__(
        self,
        lam: float | str | None = None,
        batch_size: int = 1,
        project: bool = False,
        average: bool = True,
        average_power: float | None = None,
        n_bits: int | None = None,
        seed: int | None = None,
        standardize: bool = False,
        adapt: bool = True,
        fit_intercept: bool = True,
        calibrate: bool = True,
    ):
        for name, value in (("adapt", adapt), ("calibrate", calibrate)):
            if not isinstance(value, bool):
                raise InvalidParameterError(f"{name} must be True or False, got {value!r}")
        self._lambdas = lambda_candidates(self.default_lam if lam is None else lam)
        self._average_power = average_power_of(average, average_power, DEFAULT_AVERAGE_POWER)
        self.lam = lam
        self.batch_size = batch_size
        self.project = project
        self.average = average
        self.average_power = average_power
        self.n_bits = n_bits
        self.seed = seed
        self.standardize = standardize
        self.adapt = adapt
        self.fit_intercept = fit_intercept
        self.calibrate = calibrate
        self._reset()

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"lam": 1e-2, "batch_size": 4, "project": True, "average": True}
        yield {"lam": 1e-2, "average": True, "average_power": 2.0, "standardize": True}
        yield {"lam": "auto", "batch_size": 2}
        yield {"adapt": False, "fit_intercept": False, "calibrate": False}

    def _init_model(self) -> None:
        self._candidates = [ScaledWeights(self.average) for _ in self._lambdas]
        self._merit = np.zeros(len(self._lambdas))  # t²-weighted prequential hits of each λ
        self._leader = 0
        self._t = 0
        self._average_weight = 0.0  # sum over the steps so far of t**average_power
        self._n_learned_classes = 0  # classes that existed at the last step
        self._watch = ChangeWatch() if self.adapt else None
        self._calibration = TemperatureCalibration() if self.calibrate else None

    @property
    def _weights(self) -> ScaledWeights:
        """The weights predictions use (with ``lam="auto"``: the leading candidate's)."""
        return self._candidates[self._leader]

    @property
    def selected_lam(self) -> float:
        """The λ whose model predicts: ``lam`` itself, or with ``lam="auto"`` the candidate with
        the best t²-weighted progressive accuracy so far."""
        return self._lambdas[self._leader]

    @property
    def n_steps(self) -> int:
        """Number of steps ``t`` taken so far (one per mini-batch)."""
        return self._t

    def weight_matrix(self, averaged: bool | None = None) -> np.ndarray:
        """Dense ``(K, d)`` weights: rows follow :attr:`classes`, columns the feature space.

        ``averaged`` defaults to ``self.average`` (the weights predictions use)."""
        if self.average if averaged is None else averaged:
            return self._weights.dense_average(self._average_weight)
        return self._weights.dense()

    _scores_while_learning = True

    # ------------------------------------------------------- parameter mixing's surface
    def mixing_state(self) -> dict:
        """The model as dense arrays, for parameter mixing (:mod:`streamlearn.mixing`): ``classes``,
        ``features`` (:attr:`feature_keys`), ``W`` (K × d, the current iterate), ``S`` (K × d, the
        averaged iterate's running sum ``Σ_s c_s W_s`` undivided; ``None`` without averaging),
        ``average_weight`` (``Σ_s c_s``) and ``t``. Every column the feature space holds has weights
        (an intercept's is registered before anything is learned)."""
        store = self._weights
        store.reserve(self._features.n_columns, len(self._labels))
        return {"classes": self.classes, "features": self.feature_keys, "W": store.dense(),
                "S": store.dense_average(1.0) if store.averaged else None,
                "average_weight": self._average_weight, "t": self._t}

    def load_mixing_state(self, classes: list, features: list, W: np.ndarray, S: np.ndarray | None,
                          average_weight: float, t: int) -> None:
        """Make this model the one :meth:`mixing_state` describes: its classes and features join this
        model's (this model's first, in their order: columns it holds stay put), its weights,
        averaged iterate and step counter replace this model's."""
        for label in classes:
            self._labels.index(label, grow=True)
        if self._features.n_bits is None:
            self._features.columns(list(features), grow=True)
        K, d = len(self._labels), self._features.n_columns
        row_of = {label: k for k, label in enumerate(self.classes)}
        column_of = {name: j for j, name in enumerate(self.feature_keys)}
        block = np.ix_([row_of[label] for label in classes], [column_of[name] for name in features])

        def in_model_order(matrix: np.ndarray) -> np.ndarray:
            placed = np.zeros((K, d))
            placed[block] = matrix
            return placed

        W = in_model_order(W)
        store = self._weights
        store.reserve(d, K)
        store.V[:d, :K] = W.T
        store.scale[:K] = 1.0
        store.sqnorm[:K] = (W * W).sum(axis=1)
        if store.averaged:
            store.U[:d, :K] = in_model_order(S).T  # S = U + A·V with A = 0
            store.A[:K] = 0.0
        self._average_weight = float(average_weight)
        self._t = int(t)
        self._n_learned_classes = K

    @property
    def n_changes(self) -> int:
        """Rises of the prequential error detected so far (0 with ``adapt=False``): each restarts
        the step schedule and the average once ``t`` is past ``RESTART_EXAMPLES`` (see
        :mod:`streamlearn.adaptation`)."""
        return 0 if self._watch is None else self._watch.changes

    @property
    def temperature(self) -> float:
        """The temperature ``1/β`` of the probabilities, ``softmax(scores / temperature)``
        (1 with ``calibrate=False``; see :mod:`streamlearn.calibration`)."""
        return 1.0 if self._calibration is None else 1.0 / self._calibration.beta

    def _probabilities(self, scores: np.ndarray) -> np.ndarray:
        if self._calibration is None:
            return self._uncalibrated_probabilities(scores)
        return self._calibration.probabilities(scores)

    def _uncalibrated_probabilities(self, scores: np.ndarray) -> np.ndarray:
        return super()._probabilities(scores)

    def _learn_groups(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray | None = None) -> None:
        watch, calibration = self._watch, self._calibration
        if watch is None and calibration is None:
            return self._learn_span(rows, y, scores)
        if scores is None:
            scores = np.empty((rows.n_rows, len(self._labels)))
            scores.fill(-np.inf)  # (np.full costs a Python-level call: this runs once per learn_one)
        n_before_rows = self._n_learned_classes
        if watch is None:
            self._learn_span(rows, y, scores)
        else:
            self._learn_watched(rows, y, scores)
        if calibration is not None:  # its window does not depend on the watch's spans: one pass over the rows
            calibration.observe(scores, y, n_before_rows)

    def _learn_watched(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray) -> None:
        """Learn complete groups in spans cut at the steps where a detected change may be acted on
        (so learn_many equals the learn_one loop), feeding the watch each span's mistakes."""
        watch = self._watch
        group = self.batch_size
        n_groups = rows.n_rows // group
        first = 0
        while first < n_groups:
            last = min(n_groups, first + CHECK_EVERY - watch.steps % CHECK_EVERY)
            if first == 0 and last == n_groups:  # one span (learn_one's road): no slices
                span_rows, span_y, span_scores = rows, y, scores
            else:
                lo, hi = first * group, last * group
                span_rows = SparseRows(rows.indptr[lo : hi + 1], rows.indices, rows.data)
                span_y, span_scores = y[lo:hi], scores[lo:hi]
            n_before = self._n_learned_classes
            self._learn_span(span_rows, span_y, span_scores)
            if len(span_y) == 1:
                watch.observe_one(mistake_of_one(span_scores[0], int(span_y[0]), n_before))
            else:
                watch.observe(mistakes_of(span_scores, span_y, n_before))
            watch.steps += last - first
            if watch.steps % CHECK_EVERY == 0 and watch.take_change():
                self._restart()
            first = last

    def _restart(self) -> None:
        """After a detected change: the step counter restarts at most at RESTART_EXAMPLES'
        worth of steps, and every average at the current iterate, with the weight those steps
        would have given it (:mod:`streamlearn.adaptation`). With ``lam="auto"`` the candidates'
        merits shrink as their steps do (they weigh rows by the step squared)."""
        t = min(self._t, -(-RESTART_EXAMPLES // self.batch_size))
        if t == self._t:
            return
        weight = float(np.sum(np.arange(1, t + 1, dtype=np.float64) ** self._average_power))
        for store in self._candidates:
            store.restart_average(weight)
        self._merit *= (t / self._t) ** 2
        self._t, self._average_weight = t, weight

    def _learn_span(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray | None) -> None:
        if len(self._candidates) == 1:
            self._t, self._n_learned_classes, self._average_weight = self._step(
                self._weights, self._lambdas[0], rows, y, _NO_SCORES if scores is None else scores)
            return
        # lam="auto": every candidate learns the rows from the same state; each is scored on them
        # as it stood at their step, and the leader before the rows gives the caller its scores
        step_of_row = self._t + 1 + np.arange(rows.n_rows) // self.batch_size
        row_weight = step_of_row.astype(np.float64) ** 2
        leader = self._leader
        for i, (store, lam) in enumerate(zip(self._candidates, self._lambdas)):
            seen = np.full((rows.n_rows, len(self._labels)), -np.inf)
            after = self._step(store, lam, rows, y, seen)
            hide_unknown_classes(seen, self._n_learned_classes, y)  # a first sighting is no hit
            self._merit[i] += row_weight @ (seen.argmax(axis=1) == y)
            if i == leader and scores is not None:
                scores[:] = seen
        self._t, self._n_learned_classes, self._average_weight = after
        self._leader = int(np.argmax(self._merit))

    def _step(self, store: ScaledWeights, lam: float, rows: SparseRows, y: np.ndarray, scores: np.ndarray) -> tuple:
        """Alg. 1 on complete groups of rows for one λ, from the learner's step counters."""
        store.reserve(self._features.n_columns, len(self._labels), self._features.likely_columns)
        return _learn_groups(
            rows.indptr, rows.indices, rows.data, y, self.batch_size,
            store.V, store.scale, store.sqnorm, store.U, store.A,
            store.n_features, self._n_learned_classes, self._t,
            float(lam), self._loss, bool(self.project), self._per_class_ball,
            store.averaged, self._renormalization_threshold(),
            self._average_power, self._average_weight, scores,
        )  # fmt: skip

    def _score_pending(self, rows: SparseRows, scores: np.ndarray) -> None:
        self._reserve_columns()
        scores[:] = self._raw_scores(rows)

    def _renormalization_threshold(self) -> float:
        if self._renormalize_below is not None:
            return self._renormalize_below
        return 1e-4 if self._weights.averaged else 1e-30

    def _reserve_columns(self) -> None:
        self._weights.reserve(self._features.n_columns, len(self._labels))

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        store = self._weights
        n_classes = len(self._labels)
        store.reserve(0, n_classes)
        out = np.empty((rows.n_rows, n_classes))
        _scores_batch(
            rows.indptr, rows.indices, rows.data, store.V[: store.n_features], store.scale,
            store.U[: store.n_features] if store.averaged else store.U, store.A,
            self._average_weight, n_classes, store.averaged, out,
        )  # fmt: skip
        return out

    def _export_model(self) -> dict:
        model = {
            "t": self._t,
            "average_weight": self._average_weight,
            "n_learned_classes": self._n_learned_classes,
            "arrays": self._candidates[0].export(),
        }
        if len(self._candidates) > 1:
            model["other_candidates"] = [store.export() for store in self._candidates[1:]]
            model["merit"] = self._merit.copy()
            model["leader"] = self._leader
        if self._watch is not None:
            model["watch"] = self._watch.export()
        if self._calibration is not None:
            model["calibration"] = self._calibration.export()
        return model

    def _restore_model(self, model: dict) -> None:
        self._t = int(model["t"])
        self._average_weight = float(model.get("average_weight", self._t))  # absent: a plain average
        self._n_learned_classes = int(model["n_learned_classes"])
        arrays = [model["arrays"], *model.get("other_candidates", [])]
        if len(arrays) != len(self._lambdas):
            raise ValueError(f"the state holds {len(arrays)} weight sets for {len(self._lambdas)} values of lam")
        self._candidates = [ScaledWeights.restore(a, self.average) for a in arrays]
        if len(arrays) > 1:
            self._merit = np.asarray(model["merit"], np.float64).copy()
            self._leader = int(model["leader"])
        if self._watch is not None and "watch" in model:  # absent: a state saved before adapt existed
            self._watch = ChangeWatch.restore(model["watch"])
        if self._calibration is not None and "calibration" in model:  # absent: saved before calibration existed
            self._calibration = TemperatureCalibration.restore(model["calibration"])


def lambda_candidates(lam) -> tuple:
    """The λ values a learner runs: ``(lam,)``, or :data:`AUTO_LAMBDAS` for ``"auto"``."""
    if isinstance(lam, str) and lam == "auto":
        return AUTO_LAMBDAS
    if isinstance(lam, str):
        raise InvalidParameterError(f"lam must be a positive finite number or 'auto', got {lam!r}")
    check_positive("lam", lam)
    return (float(lam),)


class MulticlassSVM(_MCIDLearner):
    """Multi-class SVM (Crammer–Singer hinge) by the MCID solver — 000, Alg. 3 / Eq. 16.

    On each example, ``k* = argmax_{k != y} w_k.x``; if ``1 + w_k*.x - w_y.x > 0`` the step
    moves ``w_y`` towards ``x`` and ``w_k*`` away from it. ``predict_proba_one`` is the
    softmax of the scores at the temperature fitted on the stream (``calibrate``): the hinge
    loss estimates no probabilities, the temperature makes them honest about its mistakes.

    Parameters
    ----------
    lam
        Regularisation strength λ > 0; the step is 1/(λ t). ``None``: the learner's
        :attr:`default_lam` (here 3e-4), chosen across data sets. ``"auto"``: learn with every λ
        of :data:`AUTO_LAMBDAS` at once and predict with the best so far by progressive accuracy
        (see the module docstring; costs 4x the compute and memory).
    batch_size
        Mini-batch size r: one step per r examples.
    project
        Project onto the ball of radius 1/√λ after each step (see the module docstring).
    average
        Predict with the averaged iterate (see the module docstring).
    average_power
        Weight step s by s**average_power in that average (0: the plain average; 2: the
        polynomial-decay averaging recommended for a single pass; see the module docstring).
    n_bits
        ``None`` for a growing feature vocabulary, or hash feature names into 2**n_bits columns.
    seed
        Recorded only; the learner is deterministic.
    standardize
        Scale every feature online to zero mean and unit variance, with statistics learned
        and checkpointed with the model (:mod:`streamlearn.scaling`): for dense, unscaled features.
    fit_intercept
        Learn an intercept per class (default): a feature of value
        ``streamlearn.base.INTERCEPT_VALUE`` (0.1) on every row, after ``standardize``,
        regularised with the other weights — it keeps the objective strongly convex, which the
        1/(λt) step assumes; the small value keeps it from swamping sparse rows (its weight
        column is that of the reserved name ``streamlearn.base.INTERCEPT_NAME``).
        ``False``: the papers' model, through the origin.
    adapt
        Follow a stream that changes (default): a Page-Hinkley test on the prequential mistakes
        restarts the step schedule and the average when the error rises
        (:mod:`streamlearn.adaptation`); ``False``: the papers' solver exactly, for a stationary stream.
    calibrate
        Fit the probabilities' temperature on the last 1,024 examples' prequential scores
        (default; :mod:`streamlearn.calibration`); ``False``: the raw softmax of the scores.

    Attributes
    ----------
    classes
        The labels seen so far, in class-index order (columns of ``decision_function_many``).
    n_steps, n_pending
        Steps taken; examples waiting for a full mini-batch (:meth:`flush` learns them).
    weight_matrix()
        The dense ``(K, d)`` weights predictions use.
    n_changes
        Changes of the stream detected so far (see ``adapt``).
    temperature
        The probabilities' temperature (1 with ``calibrate=False``).
    selected_lam
        The λ of the model that predicts (``lam``, its default, or the leader with ``lam="auto"``).
    default_lam
        The λ a learner takes when ``lam`` is not given (a class attribute).

    Examples
    --------
    >>> from streamlearn import MulticlassSVM
    >>> model = MulticlassSVM(lam=0.01)
    >>> for _ in range(20):
    ...     model.learn_one({"x": 1.0, "bias": 1.0}, "right")
    ...     model.learn_one({"x": -1.0, "bias": 1.0}, "left")
    ...     model.learn_one({"y": 1.0, "bias": 1.0}, "up")
    >>> model.predict_one({"x": 0.8, "bias": 1.0}), model.predict_one({"y": 2.0, "bias": 1.0})
    ('right', 'up')
    """

    _loss = codes.CRAMMER_SINGER


class MulticlassLogisticRegression(_MCIDLearner):
    """Multi-class (softmax) logistic regression by the MCID solver — 000, Alg. 2 / Eq. 15.

    Every class moves on every example by ``-(p_k - [k = y]) x / (λ t r)``, so a step costs
    O(K nnz(x)). ``predict_proba_one`` is the model's softmax (Eq. 4) at the fitted
    temperature: the regularised, averaged iterate of a long stream is overconfident (margins of
    hundreds), the temperature brings its log-loss back to the data's.

    Parameters and attributes are those of :class:`MulticlassSVM`; its default λ is 3e-5.

    Examples
    --------
    >>> from streamlearn import MulticlassLogisticRegression
    >>> model = MulticlassLogisticRegression(lam=0.01)
    >>> for _ in range(50):
    ...     model.learn_one({"a": 1.0}, 0)
    ...     model.learn_one({"b": 1.0}, 1)
    >>> proba = model.predict_proba_one({"a": 1.0})
    >>> proba[0] > 0.9, round(sum(proba.values()), 6)
    (True, 1.0)
    """

    _loss = codes.SOFTMAX
    default_lam = 3e-5


class MulticlassPerceptron(_MCIDLearner):
    """Regularised multi-class perceptron by the MCID solver — 000, Alg. 4 / Eq. 17.

    ``k* = argmax_k w_k.x`` over *all* classes; when ``k* != y``, ``w_y`` moves towards ``x``
    and ``w_k*`` away from it (when ``k* = y`` the two moves cancel). ``predict_proba_one``
    is the softmax of the scores at the fitted temperature.

    Parameters and attributes are those of :class:`MulticlassSVM`; its default λ is 1e-6.

    Examples
    --------
    >>> from streamlearn import MulticlassPerceptron
    >>> model = MulticlassPerceptron(lam=0.01)
    >>> for _ in range(10):
    ...     model.learn_one({"a": 1.0}, "A")
    ...     model.learn_one({"b": 1.0}, "B")
    >>> model.predict_one({"b": 3.0})
    'B'
    """

    _loss = codes.PERCEPTRON
    default_lam = 1e-6


class OneVsRestPegasos(_MCIDLearner):
    """K binary Pegasos SVMs, one per class against the rest ("K-Pegasos", 000 Sec. V-C).

    The paper's baseline for :class:`MulticlassSVM`: the same step size, mini-batches and
    iteration count, but each class ``k`` learns the binary hinge loss
    ``max(0, 1 - s_k w_k.x)`` with ``s_k = +1`` if ``y = k`` else ``-1``. A class first seen
    mid-stream starts from zero (it did not see the earlier examples as negatives).
    ``predict_proba_one`` is the softmax of the K scores at the fitted temperature; ``project=True``
    projects each class onto its own 1/√λ ball.

    Parameters and attributes are those of :class:`MulticlassSVM`; its default λ is 3e-5.

    Examples
    --------
    >>> from streamlearn import OneVsRestPegasos
    >>> model = OneVsRestPegasos(lam=0.01)
    >>> for _ in range(20):
    ...     model.learn_one({"a": 1.0}, "A")
    ...     model.learn_one({"b": 1.0}, "B")
    >>> model.predict_one({"a": 1.0})
    'A'
    """

    _loss = codes.OVR_HINGE
    default_lam = 3e-5
    _per_class_ball = True


class OneVsRestLogisticRegression(_MCIDLearner):
    """K binary logistic regressions, one per class ("K-binaryLR", 000 Sec. V-C).

    Each class ``k`` minimises ``log(1 + exp(-s_k w_k.x))`` with the MCID step (the
    ℓ2 case of the Primal Gradient Solver of 003, which the paper uses as this baseline).
    ``predict_proba_one`` is the softmax of the K scores at the fitted temperature: the K
    sigmoids ``σ(w_k.x)`` are binary probabilities, normalised they are not a calibrated
    multi-class distribution (they are what ``calibrate=False`` gives).

    Parameters and attributes are those of :class:`MulticlassSVM`; its default λ is 3e-5.

    Examples
    --------
    >>> from streamlearn import OneVsRestLogisticRegression
    >>> model = OneVsRestLogisticRegression(lam=0.01)
    >>> for _ in range(30):
    ...     model.learn_one({"a": 1.0}, "A")
    ...     model.learn_one({"b": 1.0}, "B")
    >>> model.predict_one({"b": 1.0})
    'B'
    """

    _loss = codes.OVR_LOGISTIC
    default_lam = 3e-5
    _per_class_ball = True

    def _uncalibrated_probabilities(self, scores: np.ndarray) -> np.ndarray:
        sig = 0.5 * (1.0 + np.tanh(0.5 * scores))  # σ(z), stable for large |z|
        total = sig.sum(axis=1, keepdims=True)
        flat = total[:, 0] <= 0.0  # every sigmoid underflowed: fall back to the scores' softmax
        sig[~flat] /= total[~flat]
        if flat.any():
            sig[flat] = super()._uncalibrated_probabilities(scores[flat])
        return sig
