"""The stream loop: pull a batch, score it, learn it, evaluate, checkpoint, commit.

For every batch a source yields (:mod:`connectors`):

1. its dead letters go to the dead-letter sink (counted by reason; ``max_errors`` turns too many
   into a stop with exit code 3, as ``check_start`` does a fresh stream's mostly bad start);
2. with a hash hold-out (``holdout=0.05``), the records whose stable hash falls in the
   first 5 % of the hash range are only *scored* (hold-out metrics), never learned;
3. the other records are scored by the current model before they are learned
   (prequential accuracy, macro-F1, log-loss: :class:`~streamlearn.service.metrics.ClassificationMetrics`),
   then learned with ``learn_many`` (every learner of the project). A record the learner
   refuses although it is well formed (a third class for a binary learner, a feature past a
   least-squares learner's ``max_features``) is a dead letter too: the learner leaves the
   model unchanged when it refuses a batch, so that batch is then learned record by record
   (each scored, then learned) and only the refused records are left out;
4. every ``checkpoint_every`` learned examples or ``checkpoint_interval`` seconds: the
   hold-out source (if any) is evaluated in full, a metrics line is appended (JSON lines),
   sinks are synced, a snapshot of the checkpoint (learner state + source position + counters
   + metrics + sink sizes) is taken and written on the checkpoint thread while learning goes
   on, and only once that file is durable is the position committed to the source.

A run with a checkpoint directory starts with a checkpoint of its own (the model before
the stream, the sizes of the sinks before this job wrote to them), so that there is always
one to resume from.

SIGTERM / SIGINT: the current batch is finished, a final checkpoint is written, the
position committed, and :meth:`Runner.run` returns 0; a signal that came while the
``streamlearn`` command was starting (:mod:`streamlearn.service.stopping`) stops the runner before
its first batch the same way. A source that blocks while waiting for input (stdin) is
interrupted; the records it had not yet handed over are not part of the checkpoint and are
read again on resume.

Resuming (:meth:`Runner.resume`) restores the newest intact checkpoint, seeks the source to
its position and cuts the dead-letter and metrics files back to the sizes it recorded, so
a crash at any moment (even ``kill -9``, even before the first periodic checkpoint or in the
middle of a checkpoint write) replays exactly what the restored model has not learned, and
nothing is learned or reported twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import time

import numpy as np

from streamlearn.connectors.errors import SourceUnavailable
from streamlearn.connectors.protocols import Endless, Hashing, Replayable, reading_of
from streamlearn.connectors.records import Batch
from streamlearn.connectors.sinks import NullSink, json_key

from . import failpoints, stopping
from ..base import StreamClassifier
from ..errors import InvalidInputError
from .bad_records import BadRecords, TooManyErrors
from .evaluation import ScaleSurvey, Scored, evaluate_held_out, evaluate_source, score_batch
from .metrics import ClassificationMetrics
from .progress import progress_reporter
from .run_options import RunnerOptions

HASH_RANGE = float(2**64)


#: the exit codes :meth:`Runner.run` returns (the ``streamlearn`` command adds 1: an error, 2: a usage error)
EXIT_OK, EXIT_SOURCE_LOST, EXIT_BAD_RECORDS = 0, 1, 3
class _Stop(BaseException):
    """Raised by the signal handler while the runner waits on a blocking source."""


class Runner:
    """Runs a learner on a source (see the module docstring): ``Runner(model, source, options)``
    with a :class:`RunnerOptions`, or its fields as keywords (they override ``options``'s).

    ``model``, ``source``: a streamlearn learner and a source from :func:`streamlearn.connectors.open_source`.
    """

    #: seconds between the progress lines written when no bar is shown
    PROGRESS_EVERY = 10.0

    def __init__(self, model: StreamClassifier, source, options: RunnerOptions | None = None, **keywords):
        self.options = options = dataclasses.replace(options or RunnerOptions(), **keywords)
        self.model, self.source, self.mixer = model, source, options.mixer
        self.predictions = options.predictions_sink
        self.model_lock = options.model_lock if options.model_lock is not None else contextlib.nullcontext()
        self.last_update = time.time()  # when the last batch was learned (what a live service reports as its age)
        if isinstance(source, Hashing) and (options.holdout is None or callable(options.holdout)):
            source.with_hashes = False  # only a hash hold-out needs record hashes
        if options.checkpoint_dir:
            from .checkpoint import BackgroundWriter, CheckpointStore  # here: msgpack and hashlib are not needed without checkpoints

            self.store = CheckpointStore(options.checkpoint_dir, options.keep)
            self._writer = BackgroundWriter(self.store)
        else:
            self.store = self._writer = None
        self._in_flight = None  # (future of the checkpoint being written, the position it holds)
        self.metrics_sink = options.metrics_sink or NullSink()
        self.dead_letters = options.dead_letter_sink or NullSink()
        self.stopped_by_signal = False
        self.stop_signal: int | None = None  # the first SIGTERM / SIGINT that stopped the run
        self.stop_error = None
        self._last_holdout = None  # a hold-out source's last evaluation
        self._final_holdout = None
        self.log = options.log or sys.stderr
        progress = options.progress
        self.bar = self.log.isatty() if progress is None and hasattr(self.log, "isatty") else bool(progress)
        self.counters = {"seen": 0, "learned": 0, "held_out": 0, "unlabelled": 0, "weightless": 0, "dead_letters": 0,
                         "batches": 0, "checkpoints": 0, "changes": 0, "switches": 0}
        self.bad = BadRecords(self.dead_letters, self.counters, options.max_errors, options.check_start)
        weighted = options.weighted_metrics
        self.prequential, self.holdout_metrics = ClassificationMetrics(weighted), ClassificationMetrics(weighted)
        self.scales = ScaleSurvey()
        self.position = None
        self.checkpoint_seconds = 0.0
        self._checkpoint_log: list = []  # (perf_counter at start, seconds) of each checkpoint
        self._data_span = [None, None]  # perf_counter when the first record arrived / the last was learned
        self.last_checkpoint_path = None
        self._stop_requested = False
        self._waiting = False
        # the state of a run, (re)set by run(): here so that summary() answers before one
        self._started: float | None = None
        self._rate_mark = (time.monotonic(), 0)
        self._learned_at_checkpoint = 0
        self._checkpoint_time = time.monotonic()
        self._changed = self._source_ended = False

    @property
    def dead_reasons(self) -> dict:
        """The dead letters of the job, counted by reason."""
        return self.bad.reasons

    @property
    def first_dead_record(self) -> bytes | None:
        """The first bad record of this run (what the command's hint looks at)."""
        return self.bad.first_record

    # ----------------------------------------------------------------- resume
    def resume(self) -> bool:
        """Restore the newest intact checkpoint (``False`` if there is none)."""
        if self.store is None:
            raise ValueError("resuming needs a checkpoint directory")
        payload = self.store.load_latest()
        if payload is None:
            return False
        from .checkpoint import CheckpointError, restore_learner
        state = payload.get("runner")
        if not isinstance(state, dict) or "position" not in payload:
            raise CheckpointError(f"{payload['path']} holds a model but not a run's state: it was not written by train")
        self.model = restore_learner(payload)
        self.position = payload["position"]
        if self.position is not None:
            self.source.seek(self.position)
        self.counters.update(state["counters"])
        self.bad.reasons = dict(state.get("dead_reasons", {}))
        self.prequential = ClassificationMetrics.restore(state["prequential"])
        self.holdout_metrics = ClassificationMetrics.restore(state["holdout"])
        if self.prequential.weighted != self.options.weighted_metrics:
            raise ValueError(f"{payload['path']} holds {'weighted' if self.prequential.weighted else 'unweighted'} metrics: "
                             f"resume it {'with' if self.prequential.weighted else 'without'} --weighted-metrics")
        sinks = [(sink, state["sinks"].get(name)) for sink, name in ((self.dead_letters, "dead_letters"),
                 (self.metrics_sink, "metrics"), (self.predictions, "predictions")) if sink is not None]
        for sink, recorded in sinks:  # all checked before any is cut
            if recorded is not None and (size := sink.size()) is not None and size < recorded:
                raise ValueError(f"{sink.name} holds {size:,} bytes where {payload['path']} recorded {recorded:,}: "
                                 "it was removed or cut since; put it back, or start over with --overwrite")
        for sink, recorded in sinks:
            sink.truncate(recorded)
        if self.mixer is not None:
            if "mixing" not in payload:
                raise ValueError("the checkpoint was taken without mixing: resume it without --mix-topic")
            self.mixer.restore(payload["mixing"])
        self.last_checkpoint_path = payload["path"]
        return True

    # ------------------------------------------------------------ checkpoints
    def _payload(self) -> dict:
        mixing = {} if self.mixer is None else {"mixing": self.mixer.export()}
        return {
            **mixing,
            "learner": self.model.export_state(),
            "position": self.position,
            "runner": {
                "source": self.source.name,
                "reading": reading_of(self.source),
                "counters": dict(self.counters),
                "dead_reasons": dict(self.dead_reasons),
                "prequential": self.prequential.export(),
                "holdout": self.holdout_metrics.export(),
                "sinks": {"dead_letters": self.dead_letters.size(), "metrics": self.metrics_sink.size(),
                          "predictions": None if self.predictions is None else self.predictions.size()},
            },
        }

    def checkpoint(self, log_metrics: bool = True, wait: bool = False) -> None:
        """Evaluate, log metrics, sync sinks and start writing a checkpoint (``log_metrics=False``:
        the starting checkpoint, which has no metrics to log). The file is written on the
        checkpoint thread while learning goes on; its position is committed once it is durable
        (:meth:`_settle`), at the latest when the next checkpoint starts (``wait``: now)."""
        start = time.perf_counter()
        self._settle(wait=True)  # one write in flight at most
        if log_metrics:
            self.metrics_sink.write(self.metrics_line())
            self.metrics_sink.sync()
        self.dead_letters.sync()
        if self.predictions is not None:
            self.predictions.sync()
        failpoints.reached("metrics-line")
        if self.store is not None:
            from .checkpoint import snapshot

            self.counters["checkpoints"] += 1
            self._in_flight = (self._writer.submit(snapshot(self._payload())), self.position)
            if wait:
                self._settle(wait=True)
        self.checkpoint_seconds += time.perf_counter() - start
        self._checkpoint_log.append((start, time.perf_counter() - start))
        self._learned_at_checkpoint = self.counters["learned"]
        self._checkpoint_time = time.monotonic()
        self._changed = False

    def _settle(self, wait: bool) -> None:
        """Once the checkpoint being written is durable (``wait``: wait for it), commit the
        position it holds; a failed write raises its :class:`~streamlearn.service.checkpoint.CheckpointError` here."""
        if self._in_flight is None or not (wait or self._in_flight[0].done()):
            return
        future, position = self._in_flight
        self._in_flight = None
        self.last_checkpoint_path = str(future.result())
        if position is not None:
            self.source.commit(position)

    def metrics_line(self) -> dict:
        """The current metrics as one JSON-able dict (what the metrics log holds)."""
        now = time.monotonic()
        learned = self.counters["learned"]
        rate = (learned - self._rate_mark[1]) / max(now - self._rate_mark[0], 1e-9)
        self._rate_mark = (now, learned)
        holdout = None
        if callable(self.options.holdout):
            holdout = self._last_holdout = evaluate_source(self.model, self.options.holdout(), weighted=self.options.weighted_metrics)
        elif self.options.holdout is not None:
            holdout = self.holdout_metrics.summary()
        return {
            "time": time.time(),
            "elapsed_s": round(time.perf_counter() - self._started, 3),
            **self.counters,
            "examples_per_s": round(rate, 1),
            "prequential": self.prequential.summary(),
            "holdout": holdout,
        }

    # -------------------------------------------------------------------- loop
    def _handle_signal(self, signum, frame):
        self._stop_requested = True
        self.stop_signal = self.stop_signal or signum
        if self._waiting:
            raise _Stop()

    def _process(self, batch: Batch) -> None:
        for dead in batch.dead:
            self.bad.write(dead)
        if len(batch):
            if self._data_span[0] is None:
                self._data_span[0] = time.perf_counter()
            train, rows = batch, np.arange(len(batch))  # rows: each record's index in the batch
            lines: dict | None = {} if self.predictions is not None else None  # index -> prediction line
            with_proba = lines is not None and self.options.proba
            if lines is not None:
                unlabelled = batch.unlabelled()
                if unlabelled.any():
                    train, rows = self._predict_only(lines, batch, rows, unlabelled, "unlabelled", with_proba)
            if self.options.holdout is not None and not callable(self.options.holdout):
                held = train.hashes < self._hash_threshold()
                if held.any():
                    kept = train.take(held)
                    scored = score_batch(self.model, kept.X, kept.y, return_proba=with_proba)
                    self.holdout_metrics.update(kept.y, scored.predicted, scored.p_true, kept.w)
                    self.counters["held_out"] += len(kept)
                    self._note(lines, kept, rows[held], scored)
                    train, rows = train.take(~held), rows[~held]
            if len(train) and self.options.max_classes is not None:
                within = self.bad.within_class_limit(self.model, train, self.options.max_classes)
                train, rows = train.take(within), rows[within]
            if train.w is not None and not train.w.all():  # weight 0: predicted (when asked), not learned
                train, rows = self._predict_only(lines, train, rows, train.w == 0, "weightless", with_proba)
            if len(train):
                try:
                    scored = score_batch(self.model, train.X, train.y, learn=True, return_proba=with_proba, w=train.w)
                except InvalidInputError:  # refused, model unchanged: find the records it refuses
                    accepted, scored = self.bad.learn_one_by_one(self.model, train, with_proba)
                    train, rows = train.take(accepted), rows[accepted]
                if (scales := self.scales.add(self.model, train.X)) is not None:  # once, after the first records
                    print(f"streamlearn: warning: {scales}", file=self.log, flush=True)
                self.prequential.update(train.y, scored.predicted, scored.p_true, train.w)
                self.counters["learned"] += len(train)
                self.counters["changes"] = self.model.n_changes
                self.counters["switches"] = self.model.n_switches
                recall = getattr(self.model, "index_recall", None)  # ExtremeSVM(oracle="means")'s, once it has an index
                if recall is not None:
                    self.counters["index_recall"] = recall
                self._note(lines, train, rows, scored)
            if lines:
                for i in sorted(lines):
                    self.predictions.write(lines[i])
            self.counters["seen"] += len(batch)
            self._data_span[1] = time.perf_counter()
            self.last_update = time.time()
        if len(batch) or batch.dead:  # not the heartbeats of an idle source: how many come depends on timing
            self.counters["batches"] += 1
            self._changed = True
        if batch.position is not None and batch.position != self.position:
            self._changed = True
        if batch.position is not None:
            self.position = batch.position
        self.bad.check()  # the batch is fully handled (valid records learned): a checkpoint after a stop is consistent

    def _predict_only(self, lines: dict | None, batch: Batch, rows: np.ndarray, mask: np.ndarray, counter: str,
                      with_proba: bool) -> tuple[Batch, np.ndarray]:
        """Set the records of ``mask`` aside, unlearned: predicted (when predictions are written) by the
        model before the batch and counted in ``counter``; the others and their batch indices back."""
        aside = batch.take(mask)
        if lines is not None:
            self._note(lines, aside, rows[mask], score_batch(self.model, aside.X, None, return_proba=with_proba))
        self.counters[counter] += len(aside)
        return batch.take(~mask), rows[~mask]

    def _note(self, lines: dict | None, records: Batch, rows: np.ndarray, scored: Scored) -> None:
        """The prediction lines of ``records`` (batch indices ``rows``), when predictions are written."""
        if lines is None:
            return
        classes, proba = self.model.classes, scored.proba
        labels = records.y.tolist() if isinstance(records.y, np.ndarray) else records.y
        predicted = scored.predicted.tolist() if isinstance(scored.predicted, np.ndarray) else scored.predicted
        for j, i in enumerate(rows.tolist()):
            line = {"position": records.locate(j), "prediction": predicted[j], "label": labels[j]}
            if proba is not None:  # no class was known at the record's turn: no probabilities
                line["proba"] = {} if predicted[j] is None else {json_key(c): float(p) for c, p in zip(classes, proba[j])}
            lines[i] = line

    def _due(self) -> bool:
        if not self._changed:  # the last checkpoint holds this very state (an idle source, a finished job resumed)
            return False
        if self.counters["learned"] - self._learned_at_checkpoint >= (self.options.checkpoint_every or float("inf")):
            return True
        if self.options.checkpoint_interval is not None and time.monotonic() - self._checkpoint_time >= self.options.checkpoint_interval:
            return True
        return False

    def run(self) -> int:
        """Run until the source ends or a signal arrives; the exit code (``EXIT_OK``;
        ``EXIT_BAD_RECORDS`` after too many bad records, ``EXIT_SOURCE_LOST`` when the source
        went away for good (:class:`~streamlearn.connectors.errors.SourceUnavailable`), each after a final
        checkpoint, the error kept in ``stop_error``)."""
        self._started = time.perf_counter()
        self._rate_mark = (time.monotonic(), self.counters["learned"])
        self._learned_at_checkpoint = self.counters["learned"]
        self._checkpoint_time = time.monotonic()
        handlers = {s: signal.signal(s, self._handle_signal) for s in stopping.SIGNALS}
        self._stop_requested = self._stop_requested or stopping.requested()  # a signal while the command started
        self.stop_signal = self.stop_signal or stopping.first()
        self.bad.start_run()
        self._changed = False
        self._source_ended = False
        self.stop_error = None
        bar = progress_reporter(self.log, self.bar, self.options.progress is False, self.counters, self.prequential, self.PROGRESS_EVERY)
        code = EXIT_OK
        try:
            if self.mixer is not None:
                self.mixer.start(self.model, self.source)
                self.position = self.mixer.position(self.source)
            if self.store is not None and self.last_checkpoint_path is None:
                # the starting checkpoint: the sizes of the sinks before this job wrote to them, so
                # that a crash before the first periodic checkpoint is resumed without duplicates
                self.checkpoint(log_metrics=False, wait=True)
            batches = iter(self.source)
            while not self._stop_requested:
                self._waiting = getattr(self.source, "blocks_on_input", False)
                try:
                    batch = next(batches)
                except StopIteration:
                    self._source_ended = not (isinstance(self.source, Endless) and self.source.endless)
                    if self.bad.judging_start:  # a stream shorter than the sample is judged whole
                        try:
                            self.bad.judge_start()
                        except TooManyErrors as error:
                            self.stop_error, code = error, EXIT_BAD_RECORDS
                    break
                except _Stop:
                    break
                except SourceUnavailable as error:
                    self.stop_error, code = error, EXIT_SOURCE_LOST
                    break
                finally:
                    self._waiting = False
                learned_before = self.counters["learned"]
                try:
                    with self.model_lock:  # a live service (train --serve) never reads a half-learned batch
                        self._process(batch)
                        mixed = self._mix(self.counters["learned"] - learned_before)
                except TooManyErrors as error:
                    self.stop_error, code = error, EXIT_BAD_RECORDS
                    break
                except SourceUnavailable as error:  # the mixing topic's broker stayed away
                    self.stop_error, code = error, EXIT_SOURCE_LOST
                    break
                bar(batch)
                self._settle(wait=False)
                if mixed and self._due():  # with a mixer, only a mixed model is a consistent checkpoint
                    self.checkpoint()
            self._finish(code)
        finally:
            self._waiting = False
            if self._in_flight is not None:  # an error stopped the loop: the write in flight still finishes
                self._in_flight[0].exception()
            for s, h in handlers.items():
                signal.signal(s, h)
            bar(None)
            self.source.close()
        return code

    def _finish(self, code: int) -> None:
        """The end of a run that stopped in order: the last mini-batch of a finite stream, the last
        mix, the final checkpoint (waited for) and the final hold-out figure."""
        self.stopped_by_signal = self._stop_requested
        if self._source_ended and self.model.n_pending:  # the end of a finite stream: its last, smaller mini-batch
            self.model.flush()
            self._changed = True
        if self.mixer is not None:
            with self.model_lock:
                if code == EXIT_SOURCE_LOST:  # no broker to publish to: what was not mixed is learned again later
                    self.mixer.abandon(self.model)
                    self.position = self.mixer.position(self.source)
                    self._changed = True
                else:
                    self._mix(None)
        if self._changed or self.last_checkpoint_path is None:
            self.checkpoint(wait=True)
        self._settle(wait=True)
        self._final_holdout = self.final_holdout()

    def _mix(self, learned: int | None) -> bool:
        """After a batch that learned ``learned`` examples: let the mixer mix when due (``None``:
        now, the last mix before stopping); ``True`` when there is no mixer or it mixed."""
        if self.mixer is None:
            return True
        if learned is None:
            self.mixer.mix(self.model, self.source)
        elif not self.mixer.after_batch(self.model, self.source, learned):
            return False
        self.position = self.mixer.position(self.source)
        self._changed = True
        return True

    def _hash_threshold(self) -> np.uint64:
        """Records whose hash is below this are held out."""
        return np.uint64(min(float(self.options.holdout) * HASH_RANGE, HASH_RANGE - 1))

    def final_holdout(self) -> dict | None:
        """The final model's figures on the hold-out data: a hold-out source's last evaluation
        (the final checkpoint's), or the hash hold-out records of a file source read again;
        ``None`` for a stream that cannot be read again (stdin, Kafka) or a job that was stopped.
        The running hold-out figure differs: each held-out record is scored once, when it
        passes, by the model of that moment (from the untrained one on)."""
        if self.options.holdout is None or self.stopped_by_signal or self.stop_error is not None:
            return None
        if callable(self.options.holdout):
            if self._last_holdout is not None:
                return self._last_holdout
            return evaluate_source(self.model, self.options.holdout(), weighted=self.options.weighted_metrics)
        if not isinstance(self.source, Replayable):
            return None
        return evaluate_held_out(self.model, self.source.replay(), self._hash_threshold(), self.options.weighted_metrics)

    def summary(self) -> dict:
        """Counters, metrics, the share of time spent checkpointing (and mixing, with a mixer), and ``data_seconds``:
        from the first record to the last one learned (a daemon's idle time excluded), with
        the checkpoint time spent within it (on the learning thread; ``checkpoint_write_seconds``:
        on the checkpoint thread)."""
        elapsed = time.perf_counter() - self._started if self._started is not None else 0.0
        first, last = self._data_span
        data_seconds = (last - first) if first is not None else 0.0
        during_data = sum(d for t, d in self._checkpoint_log if first is not None and first <= t <= last)
        if callable(self.options.holdout):
            running = self._last_holdout
        else:
            running = self.holdout_metrics.summary() if self.options.holdout is not None else None
        return {**self.counters, "dead_reasons": dict(self.dead_reasons), "prequential": self.prequential.summary(),
                "holdout": running, "holdout_final": self._final_holdout,
                "elapsed_s": elapsed, "checkpoint_share": self.checkpoint_seconds / elapsed if elapsed else 0.0,
                "data_seconds": data_seconds, "checkpoint_seconds_during_data": during_data,
                "checkpoint_write_seconds": self._writer.seconds if self._writer is not None else 0.0,
                "checkpoint": self.last_checkpoint_path,
                **({} if self.mixer is None else {"mixing": self.mixer.summary()})}
