"""How a :class:`~streamlearn.service.runner.Runner` runs: one dataclass, checked when made."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class RunnerOptions:
    """How a :class:`Runner` runs (checked when made: a bad value is a ``ValueError``).

    Attributes
    ----------
    checkpoint_dir
        Where checkpoints go (``None``: no checkpoints, no resume).
    checkpoint_every, checkpoint_interval
        Checkpoint after this many learned examples and/or this many seconds.
    keep
        Checkpoints kept.
    holdout
        ``None``, a fraction in (0, 1) (hash split of the stream) or a callable returning a
        fresh labelled source evaluated in full at every checkpoint.
    metrics_sink, dead_letter_sink
        Sinks (:mod:`streamlearn.connectors.sinks`) for metrics lines and dead letters.
    max_errors
        Stop (exit code 3) once more than this many records were bad; ``None``: never.
    check_start
        Stop (exit code 3) a fresh stream when more than half of its first ``START_SAMPLE``
        records (or of all of them, if it has fewer) are bad: the wrong format, label column or
        learner, most likely (the exception names the reasons; the ``streamlearn`` command turns
        them into a hint). The command sets it unless ``--max-errors`` is given.
    max_classes
        Bound on the model's classes, against a stream that brings ever new labels (memory grows
        with the classes): once the model has this many, a record with a label it has not seen
        is a dead letter ("refused-class-limit"), scored by nobody and learned by nobody; new
        labels within the bound are taken in order of first appearance. ``None``: unbounded.
    predictions_sink, proba
        A sink for one prediction line per valid record, in stream order: its position, the
        class predicted for it before it was learned (the prequential prediction; a held-out or
        unlabelled record is predicted by the model as it stood before its batch) and its label
        (``null``: unlabelled), and with ``proba`` the probability of every class. With a
        predictions sink the source's records may lack a label (open it ``labelled=False``): an
        unlabelled record is predicted and not learned. The sink's size is in every
        checkpoint, so a resumed file sink holds each line once.
    weighted_metrics
        Count each record by its weight in the prequential and hold-out metrics
        (:class:`~streamlearn.service.metrics.ClassificationMetrics`; off: each record once).
    mixer
        A :class:`~streamlearn.service.mixing.GroupMixer`: this daemon is one member of a group that
        mixes one model (the source subscribed to the group). Checkpoints are then taken right
        after a mix, hold the mixer's state, and their position is the shared coverage.
    model_lock
        A lock held while a batch is processed (``streamlearn train --serve`` shares it with the
        service, which predicts under it).
    log, progress
        Where progress goes (``None``: stderr): ``progress=True`` a tqdm bar, ``None`` a bar on a
        terminal and else a JSON line every 10 s, ``False`` nothing (``streamlearn train --quiet``).
    """

    checkpoint_dir: object = None
    checkpoint_every: int | None = 10_000
    checkpoint_interval: float | None = 60.0
    keep: int = 3
    holdout: object = None
    metrics_sink: object = None
    dead_letter_sink: object = None
    max_errors: int | None = None
    check_start: bool = False
    max_classes: int | None = None
    predictions_sink: object = None
    proba: bool = False
    weighted_metrics: bool = False
    mixer: object = None
    model_lock: object = None
    log: object = None
    progress: bool | None = None

    def __post_init__(self):
        holdout = self.holdout
        if holdout is not None and not callable(holdout) and not 0.0 < float(holdout) < 1.0:
            raise ValueError(f"a hold-out fraction must be in (0, 1), got {holdout!r}")
        if self.checkpoint_every is not None and int(self.checkpoint_every) < 1:
            raise ValueError(f"checkpoint_every must be positive, got {self.checkpoint_every!r}")
        if self.checkpoint_interval is not None and not float(self.checkpoint_interval) > 0:
            raise ValueError(f"checkpoint_interval must be a positive number of seconds, got {self.checkpoint_interval!r}")
        if self.max_errors is not None and int(self.max_errors) < 0:  # -1 stopped the stream after its first batch
            raise ValueError(f"max_errors must be 0 or more, got {self.max_errors!r}")
        max_classes = self.max_classes
        if max_classes is not None and (isinstance(max_classes, bool) or int(max_classes) != max_classes or max_classes < 1):
            raise ValueError(f"max_classes must be a positive integer, got {max_classes!r}")
