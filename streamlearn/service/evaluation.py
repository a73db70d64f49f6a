"""Scoring a model on data without learning it, and how much of the data it knows: what the
stream runner's metrics, the hold-out evaluation and ``streamlearn predict`` / ``evaluate`` share."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..base import StreamClassifier
from .metrics import ClassificationMetrics


@dataclasses.dataclass
class Scored:
    """A batch's records as the model scored them before learning them: each one's predicted
    label (``None`` before the model knew a class), the probability it gave the true label (0 for
    a class it had not seen) and, when asked for, its probabilities over the model's first classes."""

    predicted: list | np.ndarray
    p_true: np.ndarray
    proba: np.ndarray | list | None = None


def score_batch(model: StreamClassifier, X, y, learn: bool = False, return_proba: bool = False, w=None) -> Scored:
    """Predicted labels and the probability given to each true label (0 for a class the
    model has not seen) for a batch, by the model before it learns them; with ``learn=True``
    the model then learns the batch (encoded once; :meth:`~streamlearn.base.StreamClassifier.prequential`
    says which model scores each example). No prediction (``None``) for an example scored
    before the model knew any class. ``y=None``: unlabelled records (only predicted).
    ``return_proba``: also the probability matrix (columns: the first classes of ``model.classes``).
    ``w``: the weights the rows are learned with (every one > 0; ``None``: all 1)."""
    indices, p_true, *proba = model.prequential(X, y, learn, return_proba, w)
    classes = model.classes
    predicted = None
    if (indices >= 0).all() and isinstance(y, np.ndarray) and y.dtype.kind in "iub" and all(type(c) is int for c in classes):
        try:
            predicted = np.asarray(classes, np.int64)[indices]
        except OverflowError:  # a class beyond 64 bits (a JSON label 10**20) met earlier in the stream
            pass
    if predicted is None:
        predicted = [None if k < 0 else classes[k] for k in indices.tolist()]
    return Scored(predicted, p_true, proba[0] if proba else None)


class FeatureCoverage:
    """How much of a stream a model knows: the share of its feature mass (the sum of absolute
    feature values) on features the model has weights for, and the share of its labels that are
    classes of the model. A model asked about data that shares few features with what it learned
    (a CSV against a model of LIBSVM columns, 1-based indices against 0-based ones), or whose
    labels are spelled otherwise, answers without an error: these shares make it visible.

    >>> from streamlearn import MulticlassSVM
    >>> model = MulticlassSVM()
    >>> model.learn_one({"a": 1.0}, "x")
    >>> coverage = FeatureCoverage()
    >>> coverage.add(model, [{"a": 3.0, "b": 1.0}], ["x"])
    >>> round(coverage.unknown_share, 2), coverage.unknown_label_share
    (0.25, 0.0)
    >>> coverage.warnings()
    ['25% of the feature mass is on features the model has never seen and counts for nothing in its predictions: is this the kind of data it learned, with the same feature names (and the same first index)?']
    """

    #: above this share of unknown feature mass, :meth:`warnings` says so
    WARN_ABOVE = 0.1
    #: above this share of labels that are no class of the model, :meth:`warnings` says so
    WARN_LABELS_ABOVE = 0.5

    def __init__(self):
        self.known = self.total = 0.0
        self.labels = self.known_labels = 0
        self.unknown_examples: list = []  # a few labels the model does not know, for the message
        self.index_range: list | None = None  # smallest and largest integer feature name of the data
        self._model_range = None  # (model, its smallest and largest integer feature name)

    def add(self, model, X, y=None) -> None:
        """Count a batch's features (and its labels, when given: ``None`` entries are skipped)."""
        known, total = model.feature_mass(X)
        self.known += known
        self.total += total
        self._note_indices(model, X)
        if y is not None:
            labels = [label for label in (y.tolist() if hasattr(y, "tolist") else y) if label is not None]
            if labels:
                found = model.class_indices(labels) >= 0
                self.labels += len(labels)
                self.known_labels += int(found.sum())
                for i in np.flatnonzero(~found).tolist():
                    if len(self.unknown_examples) == 3:
                        break
                    if labels[i] not in self.unknown_examples:
                        self.unknown_examples.append(labels[i])

    def _note_indices(self, model, X) -> None:
        """The range of the batch's integer feature names (LIBSVM indices), and the model's."""
        if model.feature_space.n_bits is not None:  # hashed columns: no names to compare
            return
        if self._model_range is None or self._model_range[0] is not model:
            names = [k for k in model.feature_keys if type(k) is int]
            self._model_range = (model, (min(names), max(names)) if names else None)
        if isinstance(X, list):
            names = [k for x in X for k in x if type(k) is int]
        elif hasattr(X, "indices") and hasattr(X, "indptr") and not hasattr(X, "columns"):
            names = X.indices[X.indptr[0] : X.indptr[-1]] if len(X.indices) else []
        else:
            return
        if len(names):
            low, high = int(min(names)), int(max(names))
            self.index_range = [low, high] if self.index_range is None else [min(low, self.index_range[0]),
                                                                            max(high, self.index_range[1])]

    @property
    def index_shift(self) -> int:
        """``+1`` when the data's feature indices run one above the model's at both ends (1-based
        data, a 0-based model), ``-1`` one below (0-based data, a 1-based model), else 0."""
        model = self._model_range[1] if self._model_range else None
        if model is None or self.index_range is None:
            return 0
        low, high = self.index_range[0] - model[0], self.index_range[1] - model[1]
        return low if low == high and abs(low) == 1 else 0

    @property
    def unknown_share(self) -> float:
        return max(0.0, 1.0 - self.known / self.total) if self.total else 0.0

    @property
    def unknown_label_share(self) -> float:
        return 1.0 - self.known_labels / self.labels if self.labels else 0.0

    def no_label_known(self, model) -> str | None:
        """The error when labels were counted and none is a class of the model."""
        if not self.labels or self.known_labels:
            return None
        return (f"none of the {self.labels:,} labels is a class of the model (labels such as "
                f"{', '.join(map(repr, self.unknown_examples))}; its classes: {', '.join(map(repr, model.classes[:10]))}"
                f"{', ...' if len(model.classes) > 10 else ''}): is the label column the one it learned?")

    def warnings(self) -> list[str]:
        out = []
        if self.unknown_share > self.WARN_ABOVE:
            out.append(f"{self.unknown_share:.0%} of the feature mass is on features the model has never seen and counts "
                       "for nothing in its predictions: is this the kind of data it learned, with the same feature names "
                       "(and the same first index)?")
        if self.index_shift:
            model_low, model_high = self._model_range[1]
            out.append(f"the feature indices run {self.index_range[0]}..{self.index_range[1]} where the model learned "
                       f"{model_low}..{model_high}: the data look {'1' if self.index_shift > 0 else '0'}-based and the "
                       f"model's {'0' if self.index_shift > 0 else '1'}-based, so every feature meets another's weight")
        if self.unknown_label_share > self.WARN_LABELS_ABOVE and self.known_labels:
            out.append(f"{self.unknown_label_share:.0%} of the labels are no class of the model (such as "
                       f"{', '.join(map(repr, self.unknown_examples))})")
        return out


class ScaleSurvey:
    """The scales of a stream's feature columns over its first ``rows`` learned records, and
    one warning when they differ by orders of magnitude while the learner does not standardise
    (judged after each batch from :data:`MIN_ROWS` records on):
    the linear learners' steps treat every column alike, so a column of values near 1,000 (wine's
    proline) drowns the others and one pass stays near chance.

    >>> from streamlearn import MulticlassSVM
    >>> survey, model = ScaleSurvey(), MulticlassSVM()
    >>> rows = [{"proline": 1000.0 + i, "hue": 0.9} for i in range(100)]
    >>> model.learn_many(rows, [i % 2 for i in range(100)])
    >>> survey.add(model, rows)[:42]
    'feature scales differ by a factor of 1,167'
    """

    #: a warning above this ratio of the largest to the smallest column scale
    WARN_ABOVE = 1000.0
    #: the survey speaks from this many records on (after each batch, until ``rows``)
    MIN_ROWS = 100
    #: only columns with a value in at least this share of the records count: a table's columns
    #: (text's words are rare, and a rare word's small weight is no scale problem)
    MIN_SHARE = 0.5

    def __init__(self, rows: int = 1000):
        self.survey_rows, self.rows, self.done = rows, 0, False  # how many records to survey; surveyed so far
        self.squares, self.counts = np.zeros(0), np.zeros(0)

    def add(self, model, X) -> str | None:
        """Survey a learned batch; the warning, once, when the survey ends on scales that far apart."""
        if self.done or getattr(model, "standardize", True):
            return None
        rows = model.feature_space.encode_many(X, grow=False)
        n = model.feature_space.n_columns
        self.squares = np.concatenate([self.squares, np.zeros(max(0, n - len(self.squares)))])
        self.counts = np.concatenate([self.counts, np.zeros(max(0, n - len(self.counts)))])
        np.add.at(self.squares, rows.indices, rows.data**2)
        np.add.at(self.counts, rows.indices, 1.0)
        self.rows += rows.n_rows
        self.done = self.rows >= self.survey_rows
        common = self.counts >= max(1.0, self.MIN_SHARE * self.rows)
        if self.rows < self.MIN_ROWS or common.sum() < 2:
            return None
        scale = np.sqrt(self.squares[common] / self.counts[common])
        space = model.feature_space
        names = np.asarray(space.names if space.n_bits is None else range(len(common)), dtype=object)[: len(common)][common]
        if not scale.min() > 0 or scale.max() / scale.min() <= self.WARN_ABOVE:
            return None
        self.done = True
        big, small = int(scale.argmax()), int(scale.argmin())
        return (f"feature scales differ by a factor of {scale.max() / scale.min():,.0f} ({names[big]!r} ~ {scale[big]:.3g}, "
                f"{names[small]!r} ~ {scale[small]:.3g}): the learners' steps treat every column alike, so the large ones "
                "drown the others; --standardize (standardize=True) scales them online")


def evaluate_source(model: StreamClassifier, source, coverage: FeatureCoverage | None = None, weighted: bool = False) -> dict:
    """Score every labelled record of a source (nothing is learned), then close the source
    (a hold-out topic opens a consumer at every checkpoint: left open, they piled up). The
    metrics' summary, with ``bad_records``: the records of the source that are not valid,
    ``unknown_features``: the share of the feature mass the model has no weight for, and
    ``unknown_labels``: the share of labels that are no class of the model. ``weighted``: each
    record counts by its weight (:class:`~streamlearn.service.metrics.ClassificationMetrics`)."""
    metrics, bad = ClassificationMetrics(weighted), 0
    coverage = coverage if coverage is not None else FeatureCoverage()
    try:
        for batch in source:
            bad += len(batch.dead)
            if len(batch):
                scored = score_batch(model, batch.X, batch.y)
                metrics.update(batch.y, scored.predicted, scored.p_true, batch.w)
                coverage.add(model, batch.X, batch.y)
    finally:
        source.close()
    return {**metrics.summary(), "bad_records": bad, "unknown_features": round(coverage.unknown_share, 6),
            "unknown_labels": round(coverage.unknown_label_share, 6)}


def evaluate_held_out(model: StreamClassifier, source, threshold: np.uint64, weighted: bool = False) -> dict:
    """The metrics' summary of the records of ``source`` whose hash is below ``threshold`` (a
    hash hold-out read again), nothing learned; the source is closed after."""
    metrics = ClassificationMetrics(weighted)
    try:
        for batch in source:
            held = batch.hashes < threshold if len(batch) else None
            if held is not None and held.any():
                kept = batch.take(held)
                scored = score_batch(model, kept.X, kept.y)
                metrics.update(kept.y, scored.predicted, scored.p_true, kept.w)
    finally:
        source.close()
    return metrics.summary()
