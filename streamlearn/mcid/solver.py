"""The solver the five MCID learners share (000 Alg. 1; the family is described in
:mod:`streamlearn.mcid`): the weight store and its averaged iterate, ``lam="auto"``'s candidates,
the change watch and its restarts, the temperature, and the state checkpoints and mixing carry."""

from __future__ import annotations

import math

import numpy as np

from ..adaptation import (CHECK_EVERY, TRACKER_LAM_FACTOR, ChangeWatch, TrackerChoice, average_weight_of, fading_of,
                          learn_in_watched_spans, mistake_count, restart_step, watch_params)
from ..base import StreamClassifier
from ..scores import hide_unknown_classes, tempered_softmax
from ..checks import average_power_of
from ..binning import DEFAULT_BINS
from ..calibration import TemperatureCalibration
from ..errors import InvalidParameterError
from ..batches import SparseRows
from ..kernels import codes, compiled
from ..sample_weights import NO_WEIGHTS
from ..weights import ScaledWeights
from .candidates import lambda_candidates
from .mixing_surface import MixingSurface
from .small_records import SmallRecordRoad

_mcid = compiled("mcid")
#: the power of the averaged iterate by default: chosen, with each learner's λ and no projection,
#: by the smallest mean validation regret over five data sets, one pass (bench/results/defaults.md)
DEFAULT_AVERAGE_POWER = 2.0
_scaled = compiled("scaled")
#: the kernels with the weight store's arrays left unchecked (made by ScaledWeights: see KernelModule.trusting)
_learn_groups = _mcid.trusting("learn_groups", frozenset(range(6, 11)))
_learn_groups_adapting = _mcid.trusting("learn_groups_adapting", frozenset(range(6, 11)) | frozenset(range(22, 27)))
_scores_batch = _scaled.trusting("scores_batch", frozenset(range(3, 7)))
_NO_SCORES = np.zeros((0, 0))  # learn_groups' scores_out when no scores are asked for


#: copying a value out of a dense batch (``rows.dense_rows``) costs about as much as this many of
#: a step's products of an entry with a class (:meth:`MCIDLearner._explicit_zero_share`)
DENSE_COPY_IN_PRODUCTS = 4


class MCIDLearner(MixingSurface, SmallRecordRoad, StreamClassifier):
    """Shared implementation: lazily scaled weights + the compiled Alg. 1 step."""

    #: a row's weight scales its sub-gradient in Eq. 14's sum (:func:`streamlearn.kernels.mcid.learn_groups`)
    takes_weights = True
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
    renormalize_below: float | None = None

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
        intercept_scaling: float | str = "auto",
        calibrate: bool = True,
        bins: int | None = DEFAULT_BINS,
        class_weight: dict | str | None = None,
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
        self.bins = bins
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.calibrate = calibrate
        self.class_weight = class_weight
        self._reset()

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"lam": "auto", "batch_size": 4, "project": True}
        yield {"lam": 1e-2, "average": True, "average_power": 2.0, "standardize": True, "bins": 8}
        yield {"adapt": False, "fit_intercept": False, "calibrate": False}
        yield {"class_weight": "balanced", "batch_size": 2}

    def _init_model(self) -> None:
        self._small_record_setting = None
        self._candidates = [ScaledWeights(self.average) for _ in self._lambdas]
        self._merit = np.zeros(len(self._lambdas))  # t²-weighted prequential hits of each λ
        self._leader = 0
        self._t = 0
        self._average_weight = 0.0  # sum over the steps so far of t**average_power
        self._n_learned_classes = 0  # classes that existed at the last step
        self._watch = ChangeWatch() if self.adapt else None
        # the fast tracker beside the averaged model (adapt=True): no average, a larger λ, the same steps
        self._tracker = ScaledWeights(False) if self.adapt else None
        self._tracker_choice = TrackerChoice() if self.adapt else None
        self._tracker_lam = TRACKER_LAM_FACTOR * (self.default_lam if len(self._lambdas) > 1 else self._lambdas[0])
        self._calibration = TemperatureCalibration() if self.calibrate else None

    @property
    def _weights(self) -> ScaledWeights:
        """The model's weights (with ``lam="auto"``: the leading candidate's); not the tracker's."""
        return self._candidates[self._leader]

    @property
    def _predicting(self) -> ScaledWeights:
        """The weights predictions use: the tracker's while it leads, otherwise the model's."""
        return self._tracker if self.tracking else self._weights

    @property
    def weight_store(self) -> ScaledWeights:
        """The store of the model's weights (``W = V · scale`` and the averaged iterate's ``U``,
        ``A``; :class:`~streamlearn.weights.ScaledWeights`), not the tracker's: read it, do not change it."""
        return self._weights

    @property
    def tracker_store(self) -> ScaledWeights | None:
        """The fast tracker's weight store (``None`` with ``adapt=False``): read it, do not change it."""
        return self._tracker

    @property
    def tracking(self) -> bool:
        """Whether the fast tracker predicts now (see :mod:`streamlearn.adaptation`)."""
        return self._tracker_choice is not None and self._tracker_choice.tracking

    @property
    def n_switches(self) -> int:
        """Times the predictor changed between the averaged model and the fast tracker (0 with ``adapt=False``)."""
        return 0 if self._tracker_choice is None else self._tracker_choice.switches

    @property
    def candidate_stores(self) -> tuple:
        """Each λ candidate's weight store (``lam="auto"``: in the order of :data:`AUTO_LAMBDAS`; else one)."""
        return tuple(self._candidates)

    @property
    def candidate_merits(self) -> np.ndarray:
        """Each λ candidate's t²-weighted prequential hits, which pick :attr:`selected_lam` (a copy)."""
        return self._merit.copy()

    @property
    def average_weight(self) -> float:
        """``Σ_s s^q`` over the steps so far: what the averaged iterate's sum is divided by."""
        return self._average_weight

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

        ``averaged`` defaults to the weights predictions use: the averaged iterate with
        ``self.average``, the tracker's while it leads."""
        if averaged is None and self.tracking:
            return self._tracker.dense()
        if self.average if averaged is None else averaged:
            return self._weights.dense_average(self._average_weight)
        return self._weights.dense()

    _scores_while_learning = True

    def _explicit_zero_share(self) -> float | None:
        """An entry x_j = 0 adds ±0 to every score and weight of a step (``kernels/scaled.py``),
        and no weight is -0, so the model is the same bit for bit with a row's zeros as without:
        a dense array with few zeros is read as it is. A zero costs a product per class, the
        copy without zeros about :data:`DENSE_COPY_IN_PRODUCTS` of them a value. ``standardize``
        keeps the copy (its kernels are not checked with explicit zeros)."""
        if self._scaler is not None or self._bins is not None:
            return None
        return min(0.5, DENSE_COPY_IN_PRODUCTS / max(len(self._labels), 1))

    @property
    def n_changes(self) -> int:
        """Rises of the prequential error detected so far (0 with ``adapt=False``): each restarts
        the step schedule and the average once ``t`` is past ``RESTART_EXAMPLES`` (see
        :mod:`streamlearn.adaptation`)."""
        return 0 if self._watch is None else self._watch.changes

    @property
    def temperature(self) -> float:
        """The temperature ``1/β`` of the probabilities, ``softmax(scores / temperature)``
        (1 with ``calibrate=False``; infinite, uniform probabilities, until an example has been
        scored; see :mod:`streamlearn.calibration`)."""
        if self._calibration is None:
            return 1.0
        return 1.0 / self._calibration.beta if self._calibration.beta > 0.0 else math.inf

    def _probabilities(self, scores: np.ndarray) -> np.ndarray:
        if self._calibration is None:
            return self._uncalibrated_probabilities(scores)
        return self._calibration.probabilities(scores)

    def _uncalibrated_probabilities(self, scores: np.ndarray) -> np.ndarray:
        return super()._probabilities(scores)

    def score_and_learn(self, X, y, w=None) -> np.ndarray:
        """As :meth:`StreamClassifier.score_and_learn`; with ``calibrate``, also the temperature in
        force at each row's turn (a refit inside the batch changes it for the rows after), so that
        the probabilities :meth:`prequential` gives do not depend on where batches are cut."""
        calibration = self._calibration
        if calibration is None:
            return super().score_and_learn(X, y, w)
        n_old, group = self.n_pending, self.batch_size
        calibration.start_log()
        try:
            scores = super().score_and_learn(X, y, w)
            # at row j's arrival the complete groups before it are observed (pending rows count in the first)
            self._turn_betas = calibration.betas_at(group * ((n_old + np.arange(len(scores))) // group))
        finally:
            calibration.stop_log()
        return scores

    def _turn_probabilities(self, scores: np.ndarray, prior: np.ndarray | None) -> np.ndarray:
        betas = self.__dict__.pop("_turn_betas", None)
        if betas is None or len(betas) != len(scores):
            return super()._turn_probabilities(scores, prior)
        return tempered_softmax(scores, betas[:, None])

    def _learn_groups(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray | None = None,
                      weights: np.ndarray | None = None) -> None:
        """Alg. 1 on complete groups; ``weights`` (one per row) scale each row's sub-gradient in its
        step (:func:`streamlearn.kernels.mcid.learn_groups`). The watch, the tracker's choice, the
        calibration and ``lam="auto"``'s merits count each row once, whatever its weight (why:
        :mod:`streamlearn.sample_weights`)."""
        watch, calibration = self._watch, self._calibration
        weights = NO_WEIGHTS if weights is None else weights
        if watch is None and calibration is None:
            return self._learn_span(rows, y, scores, weights)
        if scores is None:
            scores = np.empty((rows.n_rows, len(self._labels)))
            scores.fill(-np.inf)  # (np.full costs a Python-level call: this runs once per learn_one)
        n_before_rows = self._n_learned_classes
        if watch is None:
            self._learn_span(rows, y, scores, weights)
        elif len(self._candidates) == 1:
            self._learn_adapting(rows, y, scores, weights)
        else:  # lam="auto": the candidates' merits are kept in Python between spans
            learn_in_watched_spans(watch, rows, y, scores, self.batch_size, self._learn_span,
                                   lambda: self._n_learned_classes, self._restart, self._check_tracker, weights)
        if calibration is not None:  # its window does not depend on the watch's spans: one pass over the rows
            calibration.observe(scores, y, n_before_rows)

    def _restart(self) -> None:
        """After a detected change: the step counter restarts at most at RESTART_EXAMPLES'
        worth of steps, and every average at the current iterate, with the weight those steps
        would have given it (:mod:`streamlearn.adaptation`). With ``lam="auto"`` the candidates'
        merits shrink as their steps do (they weigh rows by the step squared)."""
        t = restart_step(self._t, self.batch_size)
        if t == self._t:
            return
        weight = average_weight_of(t, self._average_power)
        for store in self._candidates:
            store.restart_average(weight)
        self._merit *= (t / self._t) ** 2
        self._t, self._average_weight = t, weight

    def _check_tracker(self) -> None:
        self._tracker_choice.check(CHECK_EVERY * self.batch_size)

    def _learn_span(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray | None, weights: np.ndarray) -> None:
        """One span of steps: the tracker's (from the same step counters), then the model's;
        ``scores`` gets the predicting one's (one λ with a tracker learns in
        :meth:`_learn_adapting` instead)."""
        if self._tracker is None:
            return self._learn_model_span(rows, y, scores, weights)
        n_before = self._n_learned_classes
        tracker_scores = np.empty((rows.n_rows, len(self._labels)))
        tracker_scores.fill(-np.inf)
        self._step(self._tracker, self._tracker_lam, rows, y, tracker_scores, weights)
        tracking = self._tracker_choice.tracking
        model_scores = scores
        if tracking or scores is None:
            model_scores = np.empty_like(tracker_scores)
            model_scores.fill(-np.inf)
        self._learn_model_span(rows, y, model_scores, weights)
        self._tracker_choice.count(mistake_count(model_scores, y, n_before), mistake_count(tracker_scores, y, n_before))
        if tracking and scores is not None:
            scores[:] = tracker_scores

    def _learn_adapting(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> None:
        """Learn complete groups of one λ with ``adapt``'s watch, tracker and choice, all in one
        compiled call (:func:`streamlearn.kernels.mcid.learn_groups_adapting`); ``scores`` gets the
        predicting one's (the attribute reads are hoisted: this runs once per ``learn_one``)."""
        n_classes = len(self._labels)
        spare = np.empty((rows.n_rows, n_classes))
        spare.fill(-np.inf)
        store, tracker, watch, choice = self._weights, self._tracker, self._watch, self._tracker_choice
        n_columns = self._n_model_columns
        for kept in (tracker, store):
            if kept.n_features < n_columns or kept.n_classes < n_classes:  # else reserve changes nothing
                kept.reserve(n_columns, n_classes, self._likely_model_columns)
        watch_state, choice_state = watch.as_array(), choice.as_array()
        self._t, self._n_learned_classes, self._average_weight = _learn_groups_adapting(
            rows.indptr, rows.indices, rows.data, y, weights, self.batch_size,
            store.V, store.scale, store.sqnorm, store.U, store.A,
            store.n_features, self._n_learned_classes, self._t,
            self._lambdas[0], self._loss, bool(self.project), self._per_class_ball,
            store.averaged, self._renormalization_threshold(store), self._average_power, self._average_weight,
            tracker.V, tracker.scale, tracker.sqnorm, tracker.U, tracker.A,
            self._tracker_lam, self._renormalization_threshold(tracker),
            store.n_classes, watch_state, watch_params(self.batch_size, self._average_power),
            choice_state, fading_of(CHECK_EVERY * self.batch_size), scores, spare,
        )  # fmt: skip
        watch.load_array(watch_state)
        choice.load_array(choice_state)

    @property
    def tracker_lam(self) -> float:
        """The fast tracker's λ: :data:`~streamlearn.adaptation.TRACKER_LAM_FACTOR` times the
        learner's (``lam="auto"``: times :attr:`default_lam`)."""
        return self._tracker_lam

    def _learn_model_span(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray | None, weights: np.ndarray) -> None:
        if len(self._candidates) == 1:
            self._t, self._n_learned_classes, self._average_weight = self._step(
                self._weights, self._lambdas[0], rows, y, _NO_SCORES if scores is None else scores, weights)
            return
        # lam="auto": the leader changes only at steps that are multiples of CHECK_EVERY, so that the
        # scores a row gets (predictions, the temperature's window) do not depend on how calls cut the stream
        group, n_groups, first = self.batch_size, rows.n_rows // self.batch_size, 0
        while first < n_groups:
            last = min(n_groups, first + CHECK_EVERY - self._t % CHECK_EVERY)
            lo, hi = first * group, last * group
            piece = rows if (first, last) == (0, n_groups) else SparseRows(rows.indptr[lo : hi + 1], rows.indices, rows.data)
            self._learn_candidates(piece, y[lo:hi], None if scores is None else scores[lo:hi], weights[lo:hi])
            if self._t % CHECK_EVERY == 0:
                self._leader = int(np.argmax(self._merit))
            first = last

    def _learn_candidates(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray | None, weights: np.ndarray) -> None:
        """lam="auto": every candidate learns the rows from the same state; each is scored on them
        as it stood at their step (its merit: the hits weighted by the step squared, added one row
        at a time), and the leader gives the caller its scores."""
        step_of_row = self._t + 1 + np.arange(rows.n_rows) // self.batch_size
        row_weight = step_of_row.astype(np.float64) ** 2
        for i, (store, lam) in enumerate(zip(self._candidates, self._lambdas)):
            seen = np.full((rows.n_rows, len(self._labels)), -np.inf)
            after = self._step(store, lam, rows, y, seen, weights)
            hide_unknown_classes(seen, self._n_learned_classes, y)  # a first sighting is no hit
            self._merit[i] = np.cumsum(np.concatenate(([self._merit[i]], row_weight * (seen.argmax(axis=1) == y))))[-1]
            if i == self._leader and scores is not None:
                scores[:] = seen
        self._t, self._n_learned_classes, self._average_weight = after

    def _step(self, store: ScaledWeights, lam: float, rows: SparseRows, y: np.ndarray, scores: np.ndarray,
              weights: np.ndarray) -> tuple:
        """Alg. 1 on complete groups of rows for one λ, from the learner's step counters."""
        store.reserve(self._n_model_columns, len(self._labels), self._likely_model_columns)
        return _learn_groups(
            rows.indptr, rows.indices, rows.data, y, weights, self.batch_size,
            store.V, store.scale, store.sqnorm, store.U, store.A,
            store.n_features, self._n_learned_classes, self._t,
            float(lam), self._loss, bool(self.project), self._per_class_ball,
            store.averaged, self._renormalization_threshold(store),
            self._average_power, self._average_weight, scores,
        )  # fmt: skip

    def _renormalization_threshold(self, store: ScaledWeights | None) -> float:
        if self.renormalize_below is not None:
            return self.renormalize_below
        return default_renormalization_threshold(store)

    @property
    def _likely_model_columns(self) -> int:
        """The feature space's guess at the columns to come, in model columns (weights are sized ahead by it)."""
        return self._model_columns(self._features.likely_columns)

    def _reserve_columns(self) -> None:
        self._predicting.reserve(self._n_model_columns, len(self._labels))

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        store = self._predicting
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
        if self._tracker is not None:
            model["tracker"] = {"arrays": self._tracker.export(), "choice": self._tracker_choice.export()}
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
        if self._tracker is not None and "tracker" in model:  # absent: saved before the tracker existed (it starts afresh)
            self._tracker = ScaledWeights.restore(model["tracker"]["arrays"], False)
            self._tracker_choice = TrackerChoice.restore(model["tracker"]["choice"])
        if self._calibration is not None and "calibration" in model:
            self._calibration = TemperatureCalibration.restore(model["calibration"])
        elif self._calibration is not None:  # saved before calibration existed: its raw softmax until a fit
            self._calibration.beta = 1.0


def default_renormalization_threshold(store: ScaledWeights | None) -> float:
    """:attr:`MCIDLearner.renormalize_below` when it is ``None``, for ``store`` (a missing store: any)."""
    return 1e-4 if store is not None and store.averaged else 1e-30

