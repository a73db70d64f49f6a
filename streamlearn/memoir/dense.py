"""How :class:`~streamlearn.memoir.ExtremeSVM` learns in its dense class rows (``store``; the
kernels are :mod:`streamlearn.kernels.memoir_dense`), and when ``store="auto"`` leaves them for
the sparse store. A mixin of the learner's own room: it reads the learner's state."""

from __future__ import annotations

import numpy as np

from ..adaptation import watch_params
from ..batches import SparseRows
from ..kernels import compiled

_dense = compiled("memoir_dense")
#: store="auto" keeps the dense class rows while classes × columns stays at most this: 2 GiB of float64 with the average
DENSE_MAX_WEIGHTS = 1 << 27


class DenseLearning:
    """The dense store's side of :class:`~streamlearn.memoir.ExtremeSVM`'s learning."""

    def _rows_while_dense(self, rows: SparseRows, y: np.ndarray) -> int:
        """How many of ``rows`` (complete groups) ``store="auto"`` learns in the dense store: the
        groups before the first after which the rows learned so far fill less than a quarter of
        the columns they name, or classes × columns exceeds :data:`DENSE_MAX_WEIGHTS`."""
        if rows.n_rows == 0:
            return 0
        if rows.n_rows == self.batch_size:  # one group (learn_one's road): the same test without arrays
            lo, hi = int(rows.indptr[0]), int(rows.indptr[-1])
            seen_rows, seen_entries, seen_columns = (int(v) for v in self._dense_seen)
            n_rows, n_entries = seen_rows + rows.n_rows, seen_entries + hi - lo
            n_columns = max(seen_columns, int(rows.indices[lo:hi].max()) + 1 if hi > lo else 0)
            n_classes = max(self._n_learned, int(y.max()) + 1)
            if 4 * n_entries < n_rows * n_columns or n_classes * n_columns > DENSE_MAX_WEIGHTS:
                return 0
            self._dense_seen[:] = (n_rows, n_entries, n_columns)
            return rows.n_rows
        lo = rows.indptr[0]
        entries = np.diff(rows.indptr)
        seen_rows, seen_entries, seen_columns = (int(v) for v in self._dense_seen)
        n_whole = rows.n_rows // self.batch_size * self.batch_size
        if (seen_columns and 4 * int(entries.min()) >= seen_columns and int(rows.indices[lo : rows.indptr[-1]].max()) < seen_columns
                and max(self._n_learned, int(y.max()) + 1) * seen_columns <= DENSE_MAX_WEIGHTS):
            # no new column and every row fills a quarter of them: no group can break the rule
            self._dense_seen[:] = (seen_rows + n_whole, seen_entries + int(rows.indptr[n_whole] - lo), seen_columns)
            return n_whole
        last_column = np.full(rows.n_rows, -1, np.int64)
        filled = entries > 0
        if filled.any():
            last_column[filled] = np.maximum.reduceat(rows.indices[lo : rows.indptr[-1]], (rows.indptr[:-1] - lo)[filled])
        group = self.batch_size
        ends = np.arange(group, rows.n_rows + 1, group) - 1
        n_rows = seen_rows + ends + 1
        n_entries = seen_entries + np.cumsum(entries)[ends]
        n_columns = np.maximum(seen_columns, np.maximum.accumulate(last_column)[ends] + 1)
        n_classes = np.maximum(self._n_learned, np.maximum.accumulate(y)[ends] + 1)
        broken = (4 * n_entries < n_rows * n_columns) | (n_classes * n_columns > DENSE_MAX_WEIGHTS)
        n_groups = int(np.argmax(broken)) if broken.any() else len(ends)
        if n_groups:
            self._dense_seen[:] = (n_rows[n_groups - 1], n_entries[n_groups - 1], n_columns[n_groups - 1])
        return n_groups * group

    def _learn_dense_head(self, rows: SparseRows, y: np.ndarray, mistakes: np.ndarray, watched: bool = False) -> tuple:
        """Learn the first of ``rows`` the dense store keeps (all, or those before ``store="auto"``
        leaves it: the learner then moves to the sparse store); return the rest ``(rows, y, mistakes)``."""
        n_dense = rows.n_rows if self.store == "dense" else self._rows_while_dense(rows, y)
        self._learn_dense(SparseRows(rows.indptr[: n_dense + 1], rows.indices, rows.data), y[:n_dense],
                          mistakes[:n_dense], watched)
        if n_dense < rows.n_rows:
            self._store = self._store.sparse()
        return SparseRows(rows.indptr[n_dense:], rows.indices, rows.data), y[n_dense:], mistakes[n_dense:]

    def _learn_dense(self, rows: SparseRows, y: np.ndarray, mistakes: np.ndarray, watched: bool = False) -> None:
        """:meth:`_learn_sparse` in the dense store (:mod:`streamlearn.kernels.memoir_dense`); with
        the mean-example index (``oracle="means"``, or ``"auto"`` past its gate), in pieces up to each
        refresh of the index (every ``index_every`` examples, whole groups), each row's candidates
        from the index as it stood; each piece's rows go to their classes' sums at the next
        refresh. ``watched``: the
        kernel feeds the change watch each step's ``mistakes`` and restarts when it says so (no
        Python between steps: the watch's state goes in as an array and comes back)."""
        if rows.n_rows == 0:
            return
        n_classes = max(len(self._labels), int(y.max()) + 1)
        self._room(n_classes)
        indptr, indices, data = rows.own_arrays()
        y = np.ascontiguousarray(y, np.int64)
        store = self._store
        store.reserve(int(indices.max()) + 1 if len(indices) else 0, n_classes)  # the rows' columns only
        weights = self._example_weights(y, n_classes)
        start, means = 0, self._means
        if means is not None:
            means.reserve(n_classes, store.n_columns)
        # pieces end where the index is refreshed, while it exists or the refresh could train it
        split = means is not None and (means.ready or means.could_train(n_classes))
        watch, params = _NO_WATCH, _NO_WATCH_PARAMS
        if watched:
            watch, params = self._watch.as_array(), watch_params(self.batch_size, self._average_power)
        while start < rows.n_rows:
            stop = rows.n_rows
            if split:
                reach = -(-max(self.index_every - self._since_refresh, 1) // self.batch_size) * self.batch_size
                stop = min(stop, start + reach)
            piece = indptr[start : stop + 1]
            piece_rows = (piece - piece[0], indices[piece[0] : piece[-1]], data[piece[0] : piece[-1]])
            candidates = _NO_CANDIDATES
            if means is not None and means.ready:
                candidates = self._candidates_of(*piece_rows)
            if len(candidates) and self._since_refresh == 0 and self._t >= self._recall_counts[2]:
                self._check_recall(piece_rows, y[start:stop], candidates)
            self._t, self._n_learned = _dense.learn_groups(
                *piece_rows, y[start:stop], weights[start:stop], self.batch_size, self._n_learned,
                store.V, store.U, store.scalars, self._t, float(self.lam), bool(self.project), self._eta0(),
                self.step[1] or 0.0, self._averaged, self._average_power, self.fallback == "lowest", self._rng,
                self._scores, self._avg_scores, store.renormalize_below,
                mistakes[start:stop] if len(mistakes) else mistakes, candidates, watch, params)
            if means is not None:
                means.add_rows(*piece_rows, y[start:stop])
                before, self._since_refresh = self._since_refresh, self._since_refresh + stop - start
                if self._since_refresh >= self.index_every:  # unsplit, every refresh passed only added rows
                    last = self._since_refresh // self.index_every * self.index_every - before
                    refreshed_at = -(-last // self.batch_size) * self.batch_size  # the end of the group that passed it
                    means.refresh(self._n_learned, keep=stop - start - refreshed_at)
                    self._since_refresh %= self.index_every
                    if means.ready:  # the index routes the steps from now on (see ``ExtremeSVM``'s ``store``)
                        store.narrow()
            start = stop
        if watched:
            self._watch.load_array(watch)

    def _check_recall(self, piece_rows: tuple, y: np.ndarray, candidates: np.ndarray) -> None:
        """Count whether the candidates of the piece's first row hold its most violating class.
        The scan costs classes × columns, so the next check waits a quarter as many steps as
        there are classes (at least ``index_every``): a tenth or so of learning's cost."""
        indptr, indices, data = piece_rows
        first = (indptr[:2], indices[: indptr[1]], data[: indptr[1]])
        found = []
        for listed in (_NO_CANDIDATES, candidates[:1]):
            out = np.full(1, -1, np.int64)
            _dense.violators(*first, self._store.V, y[:1], self._n_learned, listed, self.fallback == "lowest",
                             self._rng.copy(), self._scores, out)
            found.append(int(out[0]))
        self._recall_counts[:2] += (found[0] == found[1], 1)
        self._recall_counts[2] = self._t + max(self.index_every, self._n_learned // 4)

    @property
    def index_recall(self) -> float | None:
        """``oracle="means"``: the share of rows whose most violating class the index's candidates
        held, checked by an exact scan on the first row after a refresh (:meth:`_check_recall`);
        ``None`` before the index exists (the other oracles: :meth:`violator_recall` measures them)."""
        hits, checks = (int(v) for v in self._recall_counts[:2])
        return hits / checks if checks else None

    def _means_candidates(self, rows: SparseRows) -> np.ndarray:
        """The index's candidates of ``rows`` (``oracle="means"`` once it is trained), else none: every class."""
        if self._means is None or not self._means.ready:
            return _NO_CANDIDATES
        return self._candidates_of(*rows.own_arrays())

    def _candidates_of(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> np.ndarray:
        """The trained index's candidates of CSR rows (``indptr`` from 0), as float32 rows of its columns."""
        return self._means.candidates(_dense_rows(indptr, indices, data, self._means.dim), self.n_candidates)


_NO_CANDIDATES = np.zeros((0, 0), np.int64)
_NO_WATCH = np.zeros(0)
# read-only as watch_params' arrays are, so that a watched and an unwatched call share one compiled kernel
_NO_WATCH_PARAMS = np.zeros(0)
_NO_WATCH_PARAMS.setflags(write=False)


def _dense_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, width: int) -> np.ndarray:
    """CSR rows as a dense float32 ``(rows, width)`` array, the index's queries (columns past ``width`` dropped)."""
    out = np.zeros((len(indptr) - 1, width), np.float32)
    _dense.scatter_rows(indptr, indices, data, out)
    return out
