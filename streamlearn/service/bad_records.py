"""The records a run does not learn: each is written to the dead-letter sink with its position and
reason and counted by reason; too many of them stop the run (``max_errors``, and for a fresh stream
the start check: mostly bad first records mean the wrong format, label column or learner)."""

from __future__ import annotations

import numpy as np

from streamlearn.connectors.records import Batch, DeadLetter
from streamlearn.connectors.sinks import to_json_line

from . import failpoints
from .evaluation import Scored, score_batch
from ..errors import InvalidInputError
from ..labels import LabelSpace

#: a fresh stream is judged on its first this many records (see ``check_start``)
START_SAMPLE = 100


class TooManyErrors(RuntimeError):
    """More bad records than ``max_errors``, or a stream that starts with mostly bad records."""

    def __init__(self, message: str, reasons: dict | None = None):
        super().__init__(message)
        self.reasons = reasons or {}


class BadRecords:
    """The dead letters of a run: ``counters`` is the run's (its ``dead_letters`` and ``seen`` are
    read and ``dead_letters`` counted here), ``sink`` where the letters go."""

    def __init__(self, sink, counters: dict, max_errors: int | None, check_start: bool):
        self.sink, self.counters = sink, counters
        self.max_errors, self.check_start = max_errors, check_start
        self.reasons: dict[str, int] = {}
        self.first_record: bytes | None = None  # of this run: what the command's hint looks at
        self.judging_start = False

    def start_run(self) -> None:
        """A run begins: a fresh stream (nothing seen yet) is judged on its first records."""
        self.judging_start = self.check_start and self.counters["seen"] + self.counters["dead_letters"] == 0

    def write(self, dead: DeadLetter) -> None:
        self.sink.write(dead.to_json())
        if self.first_record is None:
            self.first_record = dead.record
        self.counters["dead_letters"] += 1
        self.reasons[dead.reason] = self.reasons.get(dead.reason, 0) + 1
        failpoints.reached("dead-letter", prepare=self.sink.sync)

    def refuse(self, batch: Batch, i: int, reason: str, message: str) -> None:
        """Record ``i`` of a decoded batch, well formed but not learned, as a dead letter."""
        one = batch.take(np.arange(len(batch)) == i)
        record = to_json_line({"x": features_of(one.X), "y": one.y[0]}).rstrip("\n").encode()
        self.write(DeadLetter(batch.locate(i), f"refused-{reason}", message, record))

    def within_class_limit(self, model, train: Batch, max_classes: int) -> np.ndarray:
        """Mask of the records of ``train`` the model may learn under ``max_classes`` (new labels
        taken in order of first appearance); the others become dead letters."""
        known = model.class_indices(train.y) >= 0
        if known.all():
            return known
        room = max_classes - len(model.classes)
        taken: set = set()
        for i in np.flatnonzero(~known).tolist():
            label = LabelSpace.normalize(train.y[i])
            if label in taken or len(taken) < room:
                taken.add(label)
                known[i] = True
            else:
                self.refuse(train, i, "class-limit", f"the model has its {max_classes:,} classes (--max-classes) "
                            f"and this record's label {label!r} is not one of them")
        return known

    def check(self) -> None:
        """After a batch is fully handled: raise :class:`TooManyErrors` past ``max_errors``, or once
        the start sample is in, when it is mostly bad."""
        if self.max_errors is not None and self.counters["dead_letters"] > self.max_errors:
            raise TooManyErrors(f"{self.counters['dead_letters']} bad records, more than --max-errors {self.max_errors}",
                                self.reasons)
        if self.judging_start and self.counters["seen"] + self.counters["dead_letters"] >= START_SAMPLE:
            self.judge_start()

    def judge_start(self) -> None:
        """Stop a fresh stream whose first records are mostly bad (see ``check_start``)."""
        self.judging_start = False
        # a record over --max-classes is the bound the user set doing its work, not a sign of a wrong format or learner
        bad = self.counters["dead_letters"] - self.reasons.get("refused-class-limit", 0)
        refused = sum(n for reason, n in self.reasons.items() if reason.startswith("refused"))
        total = self.counters["seen"] + self.counters["dead_letters"] - refused
        if bad and 2 * bad > total:
            raise TooManyErrors(f"{bad:,} of the first {total:,} records are bad", self.reasons)

    def learn_one_by_one(self, model, batch: Batch, return_proba: bool = False) -> tuple[np.ndarray, Scored]:
        """Score and learn a batch the learner refused record by record (in order, so the
        model is the one the accepted records alone give); the refused ones become dead
        letters. Returns the mask of the accepted records and how they were scored (with
        ``return_proba`` their probability rows as a list)."""
        accepted = np.zeros(len(batch), bool)
        predicted, p_true, probas = [], [], []
        for i in range(len(batch)):
            one = batch.take(np.arange(len(batch)) == i)
            try:
                scored = score_batch(model, one.X, one.y, learn=True, return_proba=return_proba, w=one.w)
            except InvalidInputError as error:
                self.refuse(batch, i, error.reason, str(error))
                continue
            accepted[i] = True
            predicted.append(scored.predicted[0])
            p_true.append(scored.p_true[0])
            if return_proba:
                probas.extend(scored.proba)
        return accepted, Scored(predicted, np.asarray(p_true), probas if return_proba else None)


def features_of(X) -> dict:
    """The features of a one-record batch (a list of one dict, or a one-row CSR matrix)."""
    if isinstance(X, list):
        return X[0]
    return X.row_dicts()[0] if hasattr(X, "row_dicts") else dict(zip(X.indices.tolist(), X.data.tolist()))
