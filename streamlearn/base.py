"""The learner base class shared by every streamlearn family.

:class:`StreamClassifier` is a ``river.base.MiniBatchClassifier``. It owns the plumbing
that is the same for every algorithm:

* the :class:`~streamlearn.features.FeatureSpace` and
  :class:`~streamlearn.labels.LabelSpace` (dicts, DataFrames, NumPy arrays and SciPy
  CSR matrices all become CSR rows over weight columns);
* mini-batch semantics for a stream (:class:`~streamlearn.pending.PendingRows`): ``learn_one`` gathers ``batch_size`` examples and
  then takes one step; ``learn_many`` continues from what ``learn_one`` gathered and
  cuts its rows into consecutive groups of ``batch_size``. Rows that do not fill a
  group wait (are *pending*) for the next call, so ``learn_many`` equals the
  ``learn_one`` loop exactly. Predictions use the weights of the last completed step;
* the prediction API (``predict_one``, ``predict_proba_one``, ``predict_many``,
  ``predict_proba_many``, ``decision_function_one``, ``decision_function_many``);
* state export / import as plain arrays and metadata (:meth:`export_state`,
  :meth:`from_state`) for checkpoints; pickling works too.

A family implements ``_init_model``, ``_learn_groups`` (complete groups only),
``_raw_scores`` and, when not a softmax of the scores, ``_probabilities``, plus
``_export_model`` / ``_restore_model``.
"""

from __future__ import annotations

import copy
import inspect

import numpy as np
from river import base

from .errors import InvalidInputError, InvalidParameterError
from .batches import SparseRows
from .checks import check_positive
from .features import FeatureSpace
from .intercept import INTERCEPT_NAME, LEGACY_VALUE, InterceptScale
from .labels import LabelSpace
from .binning import FeatureBins, check_bins
from .scaling import OnlineStandardizer
from .model_rows import ModelRows
from .class_weights import ClassWeights, RunningBalance, checked_class_weight
from .pending import PendingRows
from .sample_weights import checked_weight, positive_weights, refuse_weights, weighted_batch
from .scores import hide_unknown_classes, labels_like, proba_frame, softmax_rows

STATE_FORMAT = 1


class StreamClassifier(ModelRows, ClassWeights, PendingRows, base.MiniBatchClassifier):
    """Base class of streamlearn's multi-class learners (see the module docstring).

    Parameters: none of its own; each learner's ``__init__`` takes them (``batch_size``, ``n_bits``,
    ``standardize``, ``class_weight`` are read here).

    Attributes
    ----------
    classes
        The labels seen so far, in class-index order.
    n_pending
        Examples waiting for a full mini-batch (:meth:`flush` learns them).
    has_model
        Whether the learner predicts by a model: it knows a class, and the refit learners have
        fitted once (before that they predict the class frequencies they have seen).

    Examples
    --------
    >>> from streamlearn import MulticlassPerceptron, StreamClassifier
    >>> model = MulticlassPerceptron()
    >>> isinstance(model, StreamClassifier), model.classes, model.n_pending
    (True, [], 0)
    """

    #: mini-batch size; subclasses set it from their ``batch_size`` parameter
    batch_size: int = 1
    #: most classes the learner can take (2 for a binary learner), ``None``: unbounded
    max_classes: int | None = None
    #: most feature columns the learner can take (least squares' ``max_features``), ``None``: unbounded
    max_columns: int | None = None
    n_bits: int | None = None

    @property
    def has_model(self) -> bool:
        """Whether the learner predicts by a model (it knows a class; see :meth:`_prior`)."""
        return bool(self._labels.labels) and self._prior() is None

    def _prior(self) -> np.ndarray | None:
        """What a learner predicts before it has a model: the frequencies of the classes it has
        seen (one per class); ``None`` once it has one (always, but for the refit learners)."""
        return None

    def _proba_of(self, scores: np.ndarray, prior: np.ndarray | None) -> np.ndarray:
        """Probabilities of scored rows: the model's, or ``prior``'s when it is given."""
        return self._probabilities(scores) if prior is None else np.tile(prior, (scores.shape[0], 1))

    def _turn_probabilities(self, scores: np.ndarray, prior: np.ndarray | None) -> np.ndarray:
        """Probabilities of the rows :meth:`score_and_learn` just scored, each as the model gave them at its turn."""
        return self._proba_of(scores, prior)

    @staticmethod
    def _argmax_of(scores: np.ndarray, prior: np.ndarray | None) -> np.ndarray:
        """Predicted class indices of scored rows: the model's, or ``prior``'s most frequent class."""
        return scores.argmax(axis=1) if prior is None else np.full(scores.shape[0], int(prior.argmax()))

    # ------------------------------------------------------------------ set-up
    #: scale every feature online (:mod:`streamlearn.scaling`); subclasses take it as a parameter
    standardize: bool = False
    #: each value's interval indicator (:mod:`streamlearn.binning`): the number of intervals, ``None``: off
    bins: int | None = None
    #: learn an intercept per class (the weight of :data:`INTERCEPT_NAME`) and its feature's value
    #: (:mod:`streamlearn.intercept`); families that offer them take them as parameters
    fit_intercept: bool = False
    intercept_scaling = "auto"
    _intercept_column = -1
    _bins = None  # (a model pickled before bins has none)

    def _reset(self) -> None:
        check_positive("batch_size", self.batch_size, integer=True)
        if not isinstance(self.standardize, bool):
            raise InvalidParameterError(f"standardize must be True or False, got {self.standardize!r}")
        if not isinstance(self.fit_intercept, bool):
            raise InvalidParameterError(f"fit_intercept must be True or False, got {self.fit_intercept!r}")
        self.class_weight, self._balance, self._fixed = checked_class_weight(self.class_weight), None, np.zeros(0)
        self._intercept_scale = InterceptScale(self.intercept_scaling)
        self._features = FeatureSpace(self.n_bits)
        check_bins(self.bins)
        self._bins = FeatureBins(self.bins) if self.bins is not None else None
        self._intercept_column = self._intercept()
        self._labels = LabelSpace()
        self._scaler = OnlineStandardizer() if self.standardize else None
        self._clear_pending()
        self._encoded_last = None  # see _scores_one
        self._init_model()

    def _intercept(self) -> int:
        """The intercept's model column, its name registered in the feature space if new (-1: no intercept)."""
        if not self.fit_intercept:
            return -1
        return self._model_columns(int(self._features.columns([INTERCEPT_NAME], grow=True)[0]))

    @property
    def _multiclass(self) -> bool:
        return True

    @property
    def classes(self) -> list:
        """Labels seen so far, in class-index order."""
        return list(self._labels.labels)

    @property
    def average_power_in_use(self) -> float:
        """The averaged iterate's power ``q`` in effect: ``average_power``, or the learner's default for
        it; 0 without an averaged iterate (and for the learners that have none)."""
        return getattr(self, "_average_power", 0.0)

    @property
    def feature_space(self) -> FeatureSpace:
        """The learner's feature vocabulary (:class:`~streamlearn.features.FeatureSpace`), for
        reading: a name's column, whether names are integers. Learning grows it."""
        return self._features

    @property
    def feature_keys(self) -> list:
        """The feature of each weight column, in column order: its name, or with hashing
        (``n_bits``) the column itself; with ``bins``, each followed by its bins' names."""
        keys = self._space_keys()
        return keys if self._bins is None else self._bins.keys(keys)

    def _space_keys(self) -> list:
        """The feature space's key of each of its columns: the name, or with hashing the column."""
        features = self._features
        return features.names if features.n_bits is None else list(range(features.n_columns))

    @property
    def intercept_value(self) -> float | None:
        """The value of the intercept's feature in the rows scored now (``None`` without an
        intercept): ``intercept_scaling``, or ``"auto"``'s value so far (:mod:`streamlearn.intercept`)."""
        return self._intercept_scale.value if self._intercept_column >= 0 else None

    @property
    def n_changes(self) -> int:
        """Changes of the stream detected so far (always 0 for a learner that does not watch
        for them; the MCID learners do with ``adapt=True``: :mod:`streamlearn.adaptation`)."""
        return 0

    @property
    def n_switches(self) -> int:
        """Times the predictions changed hands between the averaged model and a fast tracker beside
        it (always 0 for a learner without one; the MCID learners have one with ``adapt=True``)."""
        return 0

    # ------------------------------------------------------------- family hooks
    def _init_model(self) -> None:
        raise NotImplementedError

    def _learn_groups(self, rows: SparseRows, y: np.ndarray, scores: np.ndarray | None = None) -> None:
        """Learn complete groups of ``batch_size`` rows (``rows.n_rows`` is a multiple); with
        ``scores``, write each row's class scores at its step into it (only asked of families
        with :attr:`_scores_while_learning`)."""
        raise NotImplementedError

    def _score_pending(self, rows: SparseRows, scores: np.ndarray) -> None:
        """Write the scores of rows left pending (see :meth:`PendingRows._learn_rows`): the model's now."""
        self._reserve_columns()
        scores[:] = self._raw_scores(rows)

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        """Class scores, shape ``(n_rows, K)``."""
        raise NotImplementedError

    def _probabilities(self, scores: np.ndarray) -> np.ndarray:
        return softmax_rows(scores)

    def _export_model(self) -> dict:
        raise NotImplementedError

    def _restore_model(self, model: dict) -> None:
        raise NotImplementedError

    # ----------------------------------------------------------------- learning
    def learn_one(self, x: dict, y, w: float = 1.0) -> None:
        """Gather one example of weight ``w`` (:mod:`streamlearn.sample_weights`; 0: nothing is
        learned); take a step when ``batch_size`` examples are gathered."""
        if w != 1.0:
            w = checked_weight(w)
            if not self.takes_weights:
                refuse_weights(self)
            if w == 0.0:
                return
        label = self._labels.normalize(y)
        self._check_class_room(1 if self._labels.index(label, grow=False) < 0 else 0)
        encoded, self._encoded_last = self._encoded_last, None
        if encoded is not None and encoded[0] is self._features and encoded[1] == x:
            cols, vals = encoded[2], encoded[3]
            if self._intercept_column >= 0:
                self._intercept_scale.learn_row(vals[:-1])
        else:
            most_new = len(x) if isinstance(x, dict) else 0  # anything else is refused by encode_one
            cols, vals = self._within_column_room(lambda: self._features.encode_one(x, grow=True), most_new)
            cols, vals = self._model_row(cols, vals, learn=True)
        self._gather(cols, vals, self._labels.index(label, grow=True), w)

    def learn_many(self, X, y, w=None) -> None:
        """Learn a batch: a DataFrame, a 2-D NumPy array, a SciPy sparse matrix or a list
        of feature dicts, and its labels (a Series, a list or an array of the same length), and
        the examples' weights (``None``: all 1; :mod:`streamlearn.sample_weights`)."""
        X, y, weights = weighted_batch(self, X, y, w)
        self._learn_rows(self._learned_model_rows(X, y), self._labels.indices(y, grow=True), None, weights)

    #: whether the learner honours per-example weights (:mod:`streamlearn.sample_weights`); one that
    #: does not refuses any weight but 1
    takes_weights = False

    #: (features, x, cols, vals) of the last one-example prediction whose row learn_one may take (see _scores_one)
    _encoded_last = None

    #: whether ``_learn_groups`` can write the scores each row has when it is learned
    _scores_while_learning = False

    def score_and_learn(self, X, y, w=None) -> np.ndarray:
        """Score a batch, then learn it, each row with its weight in ``w`` (``None``: all 1; every
        one > 0 — a row of weight 0 is only scored: the caller leaves it out): the runner's
        test-then-train step (the batch is validated and encoded once). Columns follow :attr:`classes`.

        Families that compute the scores while they learn (:attr:`_scores_while_learning`:
        the MCID learners, whose step computes them anyway) score **each example by the model
        as it stands when the example arrives**, bit for bit what ``decision_function_one``
        before each ``learn_one`` gives; the columns follow the classes after the batch, and a
        class first seen at or after an example scores -inf for it (with ``standardize``, a row
        is scaled by statistics that include it when it is learned, not when it is predicted:
        the scores differ by that). The other families score the **whole batch by the model
        before it** (columns: the classes before the batch)."""
        weights = positive_weights(self, X, w)
        if self._scores_while_learning:
            rows = self._learned_model_rows(X, y)
            n_before = len(self._labels)
            targets = self._labels.indices(y, grow=True)
            scores = np.full((rows.n_rows, len(self._labels)), -np.inf)
            self._learn_rows(rows, targets, scores, weights)
            hide_unknown_classes(scores, n_before, targets)
            return scores
        rows = self._encode_labelled(X, y)
        if self._labels.labels:
            self._reserve_columns()
            scores = self._raw_scores(self._model_rows(rows, learn=False))
        else:
            scores = np.zeros((rows.n_rows, 0))
        self._learn_rows(self._model_rows(rows, learn=True), self._labels.indices(y, grow=True), None, weights)
        return scores

    def prequential(self, X, y, learn: bool = False, return_proba: bool = False, w=None) -> tuple:
        """For each row of a labelled batch, as the model sees it before learning the row (see
        :meth:`score_and_learn`): the index in :attr:`classes` of the predicted class (-1 when
        no class was known yet) and the probability given to the true label (0 for a label the
        model had not seen); with ``learn=True`` the batch is then learned. What the stream
        runner's test-then-train metrics take. ``y=None`` (without ``learn``): unlabelled rows,
        every true-label probability 0. ``return_proba``: also each row's probabilities over
        the first ``proba.shape[1]`` classes (0 for a class unknown at the row's turn). ``w``: the
        rows' weights when they are learned (see :meth:`score_and_learn`)."""
        prior = self._prior()  # the model before the batch scores it
        scores = self.score_and_learn(X, y, w) if learn else self.decision_function_many(X)
        n, n_classes = scores.shape
        if not n_classes:
            empty = (np.full(n, -1, np.int64), np.zeros(n))
            return (*empty, np.zeros((n, 0))) if return_proba else empty
        unscored = ~(scores > -np.inf).any(axis=1)  # every class unknown at the example's turn
        if unscored.any():
            scores = np.where(unscored[:, None], 0.0, scores)
        proba = self._turn_probabilities(scores, prior) if learn else self._proba_of(scores, prior)
        predicted = self._argmax_of(scores, prior)  # as predict_one: a flat calibration must not turn ties into class 0
        predicted[unscored] = -1
        if y is None:
            p_true = np.zeros(n)
        else:
            columns = self.class_indices(y)
            known = (columns >= 0) & (columns < n_classes) & ~unscored
            p_true = np.where(known, proba[np.arange(n), np.where(known, columns, 0)], 0.0)
        return (predicted, p_true, proba) if return_proba else (predicted, p_true)

    def _learned_model_rows(self, X, y) -> SparseRows:
        """A labelled batch validated, encoded (growing the vocabulary) and as the model learns it:
        a dense one in one compiled pass when it can (:meth:`_expanded_dense_rows`)."""
        self._check_labelled(X, y)
        rows = self._expanded_dense_rows(X, grow=True, learn=True)
        return rows if rows is not None else self._model_rows(self._encode_checked(X), learn=True)

    def _encode_labelled(self, X, y) -> SparseRows:
        """Validate a labelled batch and encode it (growing the vocabulary)."""
        self._check_labelled(X, y)
        return self._encode_checked(X)

    def _check_labelled(self, X, y) -> None:
        n_labels = self._labels.validate_batch(y)
        n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
        if n_labels != n_rows:
            raise InvalidInputError("length-mismatch", f"X has {n_rows} rows but y has {n_labels} labels")
        if self.max_classes is not None:
            self._check_class_room(self._labels.n_new(y))

    def _encode_checked(self, X) -> SparseRows:
        share = self._explicit_zero_share()
        return self._within_column_room(lambda: self._features.encode_many(X, grow=True, zero_share=share))

    def _explicit_zero_share(self) -> float | None:
        """Up to which share of zeros a dense array reaches the kernels as it is (``encode_many``)."""
        return None

    def _within_column_room(self, grow, most_new: int | None = None):
        """``grow()``, which may add names to the vocabulary, undone if that takes it past
        :attr:`max_columns`: the vocabulary is put back as it was and the input refused, so
        the model is unchanged (``most_new`` bounds how many names ``grow`` can add: when
        they cannot reach the limit there is nothing to undo, and no copy is taken)."""
        own = int(self._intercept_column >= 0)  # the intercept's column is not one of the user's features
        limit = None if self.max_columns is None else self.max_columns + own
        if limit is None or (most_new is not None and self._features.n_columns + most_new <= limit):
            return grow()
        before = copy.deepcopy(self._features)
        result = grow()
        if self._features.n_columns > limit:
            n = self._features.n_columns - own
            self._features = before
            raise InvalidInputError(
                "bad-shape", f"{type(self).__name__} takes at most {self.max_columns} features and this input brings the "
                f"vocabulary to {n} (the model is unchanged); raise the limit, or fit blocks of features stagewise")
        return result

    def _check_class_room(self, n_new: int) -> None:
        if self.max_classes is not None and len(self._labels) + n_new > self.max_classes:
            raise InvalidInputError(
                "bad-label", f"{type(self).__name__} takes at most {self.max_classes} classes; "
                f"{len(self._labels) + n_new} were given (the model is unchanged)")

    def _reserve_columns(self) -> None:
        """Make the model able to score every column of the feature space (a family whose
        ``_raw_scores`` cannot take columns it has not learned yet overrides this)."""

    def feature_mass(self, X) -> tuple[float, float]:
        """``(known, total)``: the sum of the absolute feature values of batch ``X`` on features
        the model has weights for, and over all of them (how much of ``X`` the model can see).

        >>> from streamlearn import MulticlassSVM
        >>> model = MulticlassSVM()
        >>> model.learn_one({"a": 1.0}, "x")
        >>> model.feature_mass([{"a": -2.0, "new": 1.0}])
        (2.0, 3.0)
        """
        rows = self._features.encode_many(X, grow=False)
        known = float(np.abs(rows.data[rows.indptr[0] : rows.indptr[-1]]).sum())
        if isinstance(X, list):
            total = float(sum(abs(v) for x in X for v in x.values()))
        else:
            values = X.data if hasattr(X, "data") and not isinstance(X, np.ndarray) else np.asarray(X)
            total = float(np.abs(np.asarray(values, np.float64)).sum())
        return known, total

    def class_indices(self, y) -> np.ndarray:
        """Column of each label in :meth:`decision_function_many` (``-1`` for a label the
        model has not seen)."""
        self._labels.validate_batch(y)
        return self._labels.indices(y, grow=False)

    # --------------------------------------------------------------- prediction
    def _scores_one(self, x: dict) -> np.ndarray:
        features = self._features
        cols, vals = features.encode_one(x, grow=False)
        known = len(cols) == len(x) and features.n_bits is None and self._scaler is None and self._bins is None
        cols, vals = self._model_row(cols, vals, learn=False)
        # learn_one(x) right after (river's test-then-train) takes this row as it is when x is still equal:
        # every name was known and no scaler or bins learn, so its row is the one encoding would give it (the intercept's
        # value is the one learning reads: the statistics before the row, which learn_one then adds the row to)
        self._encoded_last = (features, dict(x), cols, vals) if known else None
        return self._raw_scores(SparseRows(np.array([0, len(cols)], np.int64), cols, vals))[0]

    def decision_function_one(self, x: dict) -> dict:
        """Raw class scores ``w_k . x`` as ``{label: score}``."""
        if not self._labels.labels:
            return {}
        return dict(zip(self._labels.labels, self._scores_one(x).tolist()))

    def predict_proba_one(self, x: dict) -> dict:
        if not self._labels.labels:
            return {}
        proba = self._proba_of(self._scores_one(x)[None, :], self._prior())[0]
        return dict(zip(self._labels.labels, proba.tolist()))

    def predict_one(self, x: dict):
        if not self._labels.labels:
            return None
        return self._labels.labels[int(self._argmax_of(self._scores_one(x)[None, :], self._prior())[0])]

    def decision_function_many(self, X) -> np.ndarray:
        """Raw class scores, shape ``(n_rows, K)``; columns follow :attr:`classes`."""
        rows = self._expanded_dense_rows(X, grow=False, learn=False) if self._labels.labels else None
        if rows is not None:
            return self._raw_scores(rows)
        rows = self._features.encode_many(X, grow=False, zero_share=self._explicit_zero_share())
        if not self._labels.labels:
            return np.zeros((rows.n_rows, 0))
        return self._raw_scores(self._model_rows(rows, learn=False))

    def predict_proba_many(self, X):
        scores = self.decision_function_many(X)
        proba = self._proba_of(scores, self._prior()) if scores.shape[1] else scores
        return proba_frame(proba, self.classes, X)

    def predict_many(self, X):
        """Predicted labels: a series of the frame's type for a DataFrame, otherwise an array of the
        labels' type (int64, float64 or bool when every class is one, else objects; ``None`` before any class)."""
        scores = self.decision_function_many(X)
        if scores.shape[1]:
            labels = self._labels.take(self._argmax_of(scores, self._prior()))
        else:
            labels = np.full(scores.shape[0], None, dtype=object)
        return labels_like(labels, X)

    # -------------------------------------------------------------------- state
    def export_state(self) -> dict:
        """Everything needed to resume, as plain data and NumPy arrays."""
        return {
            "format": STATE_FORMAT,
            "class": type(self).__name__,
            "params": self._get_params(),
            "features": self._features.export(),
            "labels": self._labels.export(),
            "pending": self._export_pending(),
            "scaler": self._scaler.export() if self._scaler is not None else None,
            "intercept": self._intercept_scale.export(),
            "model": self._export_model(),
            **({"bins": self._bins.export()} if self._bins is not None else {}),
            **({"class_balance": self._balance.export()} if self._balance is not None else {}),
        }

    @classmethod
    def from_state(cls, state: dict) -> "StreamClassifier":
        """Rebuild a learner from :meth:`export_state` (use the class named in the state:
        see :func:`streamlearn.learner_from_state`)."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"learner state format {state.get('format')!r} is not {STATE_FORMAT}")
        if state.get("class") != cls.__name__:
            raise ValueError(f"state holds a {state.get('class')}, not a {cls.__name__}")
        params = dict(state["params"])
        if "fit_intercept" in inspect.signature(cls).parameters:
            params.setdefault("fit_intercept", False)  # a state saved before the intercept existed has none
        if "intercept_scaling" in inspect.signature(cls).parameters:
            params.setdefault("intercept_scaling", LEGACY_VALUE)  # nor, before "auto", its value
        if "bins" in inspect.signature(cls).parameters:
            params.setdefault("bins", None)  # nor, before they were on by default, bins
        learner = cls(**params)
        learner._features = FeatureSpace.restore(state["features"])
        learner._intercept_column = learner._intercept()
        learner._labels = LabelSpace.restore(state["labels"])
        learner._restore_pending(state["pending"])
        if "intercept" in state:
            learner._intercept_scale.load(state["intercept"])
        if state.get("scaler") is not None:
            learner._scaler = OnlineStandardizer.restore(state["scaler"])
        if state.get("bins") is not None:
            learner._bins = FeatureBins.restore(state["bins"])
        learner._balance = RunningBalance.restore(state["class_balance"]) if "class_balance" in state else None
        learner._restore_model(state["model"])
        return learner
