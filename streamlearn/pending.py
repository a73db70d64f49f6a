"""Mini-batch semantics for a stream, shared by the classifiers and the regressors: examples wait
(are *pending*) until ``batch_size`` of them make a group, so ``learn_many`` equals the
``learn_one`` loop exactly, and a finite stream's last, smaller group is learned by ``flush``."""

from __future__ import annotations

import numpy as np

from .batches import SparseRows, stack_rows
from .sample_weights import weights_or_none


def _split_rows(rows: SparseRows, n: int) -> tuple[SparseRows, list, list]:
    """The first ``n`` rows as CSR, and the others as lists of (columns, values)."""
    head = SparseRows(rows.indptr[: n + 1], rows.indices, rows.data)
    cols, vals = [], []
    for i in range(n, rows.n_rows):
        lo, hi = rows.indptr[i], rows.indptr[i + 1]
        cols.append(rows.indices[lo:hi].copy())
        vals.append(rows.data[lo:hi].copy())
    return head, cols, vals


class PendingRows:
    """Mini-batch semantics for a stream, shared by the classifiers and the regressors:
    ``learn_one`` gathers ``batch_size`` examples and then calls ``_learn_groups``;
    ``learn_many`` continues the group the previous calls started and leaves an incomplete
    tail pending, so it equals the ``learn_one`` loop exactly. Targets are class indices
    (``_target_dtype`` int64) or real numbers (float64). Each example has a weight (1 unless
    given); the family's ``_learn_groups`` gets ``weights=`` only when one of a group's is not 1."""

    _target_dtype = np.dtype(np.int64)

    @property
    def resumes_exactly(self) -> bool:
        """Whether a learner restored from ``export_state()`` goes on learning bit for bit as
        this one would (every learner but one with an index that is rebuilt on restore)."""
        return True

    def _clear_pending(self) -> None:
        self._pending_cols, self._pending_vals, self._pending_y, self._pending_w = [], [], [], []

    def _take_pending(self) -> tuple:
        """The pending examples as rows, targets and weights (``None``: all 1); none pend after."""
        rows = stack_rows(self._pending_cols, self._pending_vals)
        targets = np.asarray(self._pending_y, self._target_dtype)
        weights = weights_or_none(self._pending_w)
        self._clear_pending()
        return rows, targets, weights

    def _learn_weighted(self, rows: SparseRows, targets: np.ndarray, scores=None, weights=None) -> None:
        if weights is None:
            self._learn_groups(rows, targets) if scores is None else self._learn_groups(rows, targets, scores)
        else:
            self._learn_groups(rows, targets, scores, weights=weights)

    def _gather(self, cols: np.ndarray, vals: np.ndarray, target, weight: float = 1.0) -> None:
        """Add one encoded example (of weight ``weight``); learn the group once it is complete."""
        if self.batch_size == 1 and not self._pending_y:  # learn_one's usual road: no lists
            rows = SparseRows(np.array([0, len(cols)], np.int64), cols, vals)
            targets = np.array([target], self._target_dtype)
            self._learn_weighted(rows, targets, None, None if weight == 1.0 else np.array([weight]))
            return
        self._pending_cols.append(cols)
        self._pending_vals.append(vals)
        self._pending_y.append(target)
        self._pending_w.append(float(weight))
        if len(self._pending_y) == self.batch_size:
            rows, targets, weights = self._take_pending()
            self._learn_weighted(rows, targets, None, weights)

    @property
    def n_pending(self) -> int:
        """Examples gathered by ``learn_one``/``learn_many`` that wait for a full mini-batch."""
        return len(self._pending_y)

    def flush(self) -> None:
        """Learn the examples still waiting for a full mini-batch as one last, smaller
        mini-batch: say "end of data" after the last ``learn_one`` / ``learn_many`` of a finite
        stream, or its last ``len(X) % batch_size`` rows are never learned. (Until then
        ``learn_many`` equals the ``learn_one`` loop exactly; the stream runner flushes at the
        end of a file or of stdin.) Nothing happens when nothing waits.

        >>> from streamlearn import MulticlassSVM
        >>> model = MulticlassSVM(batch_size=4)
        >>> model.learn_many([{"a": 1.0}, {"b": 1.0}, {"a": 2.0}], ["x", "y", "x"])
        >>> model.n_pending, model.n_steps
        (3, 0)
        >>> model.flush()
        >>> model.n_pending, model.n_steps
        (0, 1)
        """
        if not self._pending_y:
            return
        rows, targets, weights = self._take_pending()
        full = self.batch_size
        self.batch_size = len(targets)  # the families read their group size from here
        try:
            self._learn_weighted(rows, targets, None, weights)
        finally:
            self.batch_size = full

    def _export_pending(self) -> dict:
        pending = {"cols": [c.copy() for c in self._pending_cols], "vals": [v.copy() for v in self._pending_vals],
                   "y": list(self._pending_y)}
        if weights_or_none(self._pending_w) is not None:  # (a state without weights reads as before)
            pending["w"] = list(self._pending_w)
        return pending

    def _restore_pending(self, pending: dict) -> None:
        self._pending_cols = [np.asarray(c, np.int64) for c in pending["cols"]]
        self._pending_vals = [np.asarray(v, np.float64) for v in pending["vals"]]
        self._pending_y = [self._target_dtype.type(v).item() for v in pending["y"]]
        self._pending_w = [float(w) for w in pending.get("w", [1.0] * len(self._pending_y))]

    def _learn_rows(self, rows: SparseRows, targets: np.ndarray, scores: np.ndarray | None = None,
                    weights: np.ndarray | None = None) -> None:
        """Learn encoded rows (of ``weights``, ``None``: all 1) after the pending ones; keep the
        incomplete tail pending.

        ``scores`` (``(n_rows, K)``): also write each row's class scores by the model as it
        stands when the row arrives, for the families that compute them while learning (see
        :meth:`StreamClassifier.score_and_learn`): a row of a complete group gets them from
        the step that learns it, a row left pending from the model as it is (it does not
        change until the row's group is complete)."""
        n_old = len(self._pending_y)
        if n_old:  # continue the mini-batch that learn_one / learn_many started
            head = stack_rows(self._pending_cols, self._pending_vals)
            rows = SparseRows(
                np.concatenate([head.indptr[:-1], rows.indptr + head.indptr[-1]]),
                np.concatenate([head.indices, rows.indices]),
                np.concatenate([head.data, rows.data]),
            )
            targets = np.concatenate([np.asarray(self._pending_y, self._target_dtype), targets])
        if weights is not None or weights_or_none(self._pending_w) is not None:
            weights = np.concatenate([np.asarray(self._pending_w, np.float64),
                                      np.ones(len(targets) - n_old) if weights is None else weights])
        n_complete = (rows.n_rows // self.batch_size) * self.batch_size
        complete, self._pending_cols, self._pending_vals = _split_rows(rows, n_complete)
        self._pending_y = targets[n_complete:].tolist()
        self._pending_w = [1.0] * len(self._pending_y) if weights is None else weights[n_complete:].tolist()
        group_weights = None if weights is None else weights_or_none(weights[:n_complete])
        if n_complete:
            if scores is None:
                self._learn_weighted(complete, targets[:n_complete], None, group_weights)
            else:
                learned = np.full((n_complete, scores.shape[1]), -np.inf)
                self._learn_weighted(complete, targets[:n_complete], learned, group_weights)
                scores[: max(n_complete - n_old, 0)] = learned[n_old:]
        first_pending = max(n_complete, n_old)
        if scores is not None and rows.n_rows > first_pending:
            self._score_pending(SparseRows(rows.indptr[first_pending:], rows.indices, rows.data), scores[first_pending - n_old :])
