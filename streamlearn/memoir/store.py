"""The class rows of :class:`~streamlearn.memoir.ExtremeSVM`: the sparse store of
:mod:`streamlearn.kernels.memoir_store` (its docstring describes it) and the dense one of
:mod:`streamlearn.kernels.memoir_dense`, grown, compacted, exported and restored here."""

from __future__ import annotations

import numpy as np

from ..kernels import compiled
from ..kernels.memoir_store import ClassRowStore
from ..weights import LARGE_ARRAY_BYTES, return_freed_pages

_store_kernels = compiled("memoir_store")
_dense_kernels = compiled("memoir_dense")
#: the global scale is folded into the rows below this: with an averaged iterate ``U + A V``
#: cancels about log10(1/g) digits (4 of 16 here), without one only the sketches' float32 range matters
RENORMALIZE_BELOW = {True: 1e-4, False: 1e-30}
#: the same for float32 dense rows (:meth:`DenseClassRows.narrow`): 2 of their 7 digits, either way
RENORMALIZE_BELOW_FLOAT32 = 1e-2


class SparseClassRows:
    """The store of :mod:`streamlearn.kernels.memoir_store` (ids, hash table, class chains, the
    column-major pool), grown by doubling; exported column by column in pool order (what an
    exact scan sums in), so a restored store scores bit for bit as the saved one."""

    _IDS = ("cls", "col", "pos", "next_class")
    _POOL = ("pool_id", "pool_cls", "pool_val", "pool_avg")

    def __init__(self, averaged: bool):
        self.averaged = averaged
        self.cls, self.col, self.pos, self.next_class = (np.zeros(0, np.int64) for _ in range(4))
        self.pool_id, self.pool_cls = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self.pool_val, self.pool_avg = np.zeros(0), np.zeros(0)
        self.table = np.full(16, -1, np.int64)
        self.class_head = np.zeros(0, np.int64)
        self.col_start, self.col_len, self.col_cap = (np.zeros(0, np.int64) for _ in range(3))
        self.counts = np.zeros(4, np.int64)  # N_USED, N_ZERO, POOL_END, POOL_WASTE
        self.scalars = np.array([1.0, 0.0, 0.0, 0.0])  # G, SQ, A, AW

    @property
    def n_used(self) -> int:
        return int(self.counts[0])

    @property
    def n_weights(self) -> int:
        """Weights stored (truncation's zeros not counted)."""
        return self.n_used - int(self.counts[1])

    def clear_average(self) -> None:
        """``U ← 0`` (a restarted average: the caller sets ``A``)."""
        self.pool_avg.fill(0.0)

    def arrays(self) -> tuple:
        """The tuple the kernels take."""
        return ClassRowStore(self.table, self.cls, self.col, self.pos, self.next_class, self.class_head, self.pool_id,
                             self.pool_cls, self.pool_val, self.pool_avg if self.averaged else self.pool_avg[:0],
                             self.col_start, self.col_len, self.col_cap)

    def reserve(self, n_columns: int, n_classes: int, new_entries: int, pool_room: int = 0) -> None:
        """Room for ``new_entries`` more ids, ``n_columns`` columns, ``n_classes`` rows and
        ``pool_room`` free places in the pool."""
        if n_columns > len(self.col_len):
            size = max(n_columns, 2 * len(self.col_len))
            self.col_start, self.col_len, self.col_cap = (_grown(a, size) for a in (self.col_start, self.col_len, self.col_cap))
        if n_classes > len(self.class_head):
            self.class_head = np.concatenate([self.class_head, np.full(max(n_classes, 2 * len(self.class_head)) - len(self.class_head), -1)])
        needed = self.n_used + new_entries
        rebuild = False
        if needed > len(self.cls):
            size = max(needed, 2 * len(self.cls), 1024)
            for name in self._IDS:
                setattr(self, name, _grown(getattr(self, name), size))
            rebuild = True
        if 2 * needed > len(self.table):
            self.table = np.full(1 << int(np.ceil(np.log2(max(4 * needed, 16)))), -1, np.int64)
            rebuild = True
        if rebuild:
            self._rebuild()
        self._pool_room(pool_room)

    def _pool_room(self, room: int) -> None:
        """At least ``room`` free places in the pool: compact it when half of it is left
        behind by moved columns or zeros, grow it otherwise."""
        end = int(self.counts[2])
        if end + room <= len(self.pool_val):
            return
        if self.counts[3] + self.counts[1] > end // 2:
            self.compact(force=True)
            end = int(self.counts[2])
            if end + room <= len(self.pool_val):
                return
        size = max(end + room, 2 * len(self.pool_val), 4096)
        for name in self._POOL:
            if name != "pool_avg" or self.averaged:
                setattr(self, name, _grown(getattr(self, name), size))

    def _rebuild(self) -> None:
        _store_kernels.rebuild_table(self.arrays(), self.n_used)

    def compact(self, force: bool = False) -> None:
        """Rewrite the pool without the places moved columns left and without the weights ℓ1
        truncation set to 0 (when those are a quarter of it, or ``force``)."""
        if not force and (self.counts[1] + self.counts[3]) * 4 < max(int(self.counts[2]), 1):
            return
        size = max(len(self.pool_val), 16)
        new = [np.zeros(size, np.int64), np.zeros(size, np.int64), np.zeros(size), np.zeros(size if self.averaged else 0)]
        _store_kernels.compact(self.arrays(), self.counts, *new, len(self.col_len))
        self.pool_id, self.pool_cls, self.pool_val = new[0], new[1], new[2]
        if self.averaged:
            self.pool_avg = new[3]
        self._rebuild()

    def export(self) -> dict:
        """The weights column by column, each column's by class, without the weights ℓ1 truncation
        left at 0 (nor their averaged correction), the scalars and the zero count: the same model
        exports the same state whatever its growth history — capacities, and where a compaction
        fell between the calls that learned it (a truncated weight that grows again is revived in
        place, or re-added at its column's end once a compaction dropped it), are not state."""
        lengths = np.trim_zeros(self.col_len, "b")
        places = np.concatenate([np.arange(s, s + n) for s, n in zip(self.col_start.tolist(), lengths.tolist()) if n]
                                or [np.zeros(0, np.int64)])
        columns = np.repeat(np.arange(len(lengths)), lengths)
        kept = self.pool_val[places] != 0.0
        if self.averaged:
            kept |= self.pool_avg[places] != 0.0
        places, columns = places[kept], columns[kept]
        order = places[np.lexsort((self.pool_cls[places], columns))]
        lengths = np.trim_zeros(np.bincount(columns, minlength=len(lengths)), "b").astype(np.int64)
        values = self.pool_val[order].copy()
        state = {"cls": self.pool_cls[order].copy(), "val": values, "col_len": lengths,
                 "counts": np.array([len(order), np.count_nonzero(values == 0.0)], np.int64), "scalars": self.scalars.copy()}
        if self.averaged:
            state["avg"] = self.pool_avg[order].copy()
        return state

    @classmethod
    def restore(cls, state: dict, averaged: bool, n_classes: int) -> "SparseClassRows":
        store = cls(averaged)
        lengths = np.asarray(state["col_len"], np.int64)
        n = int(lengths.sum())
        store.col_len, store.col_cap = lengths.copy(), np.where(lengths > 0, np.maximum(4, lengths), 0)
        store.col_start = np.concatenate([[0], np.cumsum(store.col_cap)[:-1]]).astype(np.int64) if len(lengths) else lengths.copy()
        end = int(store.col_cap.sum())
        store.pool_id, store.pool_cls = np.zeros(end, np.int64), np.zeros(end, np.int64)
        store.pool_val, store.pool_avg = np.zeros(end), np.zeros(end if averaged else 0)
        places = np.concatenate([np.arange(s, s + k) for s, k in zip(store.col_start.tolist(), lengths.tolist()) if k]
                                or [np.zeros(0, np.int64)])
        store.pool_id[places] = np.arange(n)
        store.pool_cls[places] = np.asarray(state["cls"], np.int64)
        store.pool_val[places] = np.asarray(state["val"], np.float64)
        if averaged:
            store.pool_avg[places] = np.asarray(state["avg"], np.float64)
        store.cls = np.asarray(state["cls"], np.int64).copy()
        store.col = np.repeat(np.arange(len(lengths)), lengths).astype(np.int64)
        store.pos, store.next_class = places.astype(np.int64), np.zeros(n, np.int64)
        store.class_head = np.full(n_classes, -1, np.int64)
        store.table = np.full(1 << int(np.ceil(np.log2(max(4 * n, 16)))), -1, np.int64)
        store.counts = np.array([n, int(state["counts"][1]), end, 0], np.int64)
        store.scalars = np.asarray(state["scalars"], np.float64).copy()
        store._rebuild()
        return store


class DenseClassRows:
    """Class rows as a dense ``(classes, columns)`` matrix ``V`` (and ``U`` when averaging), grown
    by doubling, for rows that fill most columns; the scalars as :class:`SparseClassRows`'.
    float64, or float32 once :meth:`narrow` is called (the learner does when its index routes
    the steps); products are summed in float64 either way."""

    dense = True

    def __init__(self, averaged: bool):
        self.averaged = averaged
        self.V, self.U = np.zeros((0, 0)), np.zeros((0, 0))
        self.scalars = np.array([1.0, 0.0, 0.0, 0.0])  # G, SQ, A, AW
        self.n_classes, self.n_columns = 0, 0  # the extent in use

    @property
    def n_weights(self) -> int:
        """Weights stored: every class row's every column."""
        return self.n_classes * self.n_columns

    def reserve(self, n_columns: int, n_classes: int) -> None:
        """Room for ``n_classes`` rows of ``n_columns`` columns (new weights are 0)."""
        self.n_classes, self.n_columns = max(self.n_classes, n_classes), max(self.n_columns, n_columns)
        rows, cols = self.V.shape
        if self.n_classes <= rows and self.n_columns <= cols:
            return
        shape = (max(self.n_classes, 2 * rows if self.n_classes > rows else rows, 16),
                 max(self.n_columns, 2 * cols if self.n_columns > cols else cols, 1))
        self.V = _grown_matrix(self.V, shape)
        if self.averaged:
            self.U = _grown_matrix(self.U, shape)
        if self.V.nbytes >= LARGE_ARRAY_BYTES:
            return_freed_pages()

    @property
    def renormalize_below(self) -> float:
        """The kernels' ``renormalize_below`` for these rows."""
        return RENORMALIZE_BELOW_FLOAT32 if self.V.dtype == np.float32 else RENORMALIZE_BELOW[self.averaged]

    def narrow(self) -> None:
        """Keep the rows in float32 from now on: half the memory and the memory traffic. The
        scale is folded in first, so each weight keeps float32's 7 digits."""
        if self.V.dtype == np.float32:
            return
        _dense_kernels.renormalize(self.V, self.U if self.averaged else self.U[:0], self.scalars, self.n_classes)
        self.V = _grown_matrix(self.V[: self.n_classes, : self.n_columns], self.V.shape, np.float32)
        # without an average U stays empty, but float32 too: the kernels are compiled for one pair of types per width
        self.U = _grown_matrix(self.U[: self.n_classes, : self.n_columns], self.U.shape, np.float32)

    def clear_average(self) -> None:
        self.U[: self.n_classes].fill(0.0)  # rows past them are 0 and untouched: no resident memory

    def export(self) -> dict:
        state = {"dense": self.V[: self.n_classes, : self.n_columns].copy(), "scalars": self.scalars.copy()}
        if self.averaged:
            state["dense_avg"] = self.U[: self.n_classes, : self.n_columns].copy()
        return state

    @classmethod
    def restore(cls, state: dict, averaged: bool) -> "DenseClassRows":
        store = cls(averaged)
        V = np.asarray(state["dense"])
        if V.dtype == np.float32:
            store.narrow()
        store.reserve(V.shape[1], V.shape[0])
        store.V[: V.shape[0], : V.shape[1]] = V
        if averaged:
            store.U[: V.shape[0], : V.shape[1]] = np.asarray(state["dense_avg"])
        store.scalars = np.asarray(state["scalars"], np.float64).copy()
        return store

    def sparse(self) -> SparseClassRows:
        """The same model in a :class:`SparseClassRows` (its weights that are not 0, column by
        column): it scores every row as this store does."""
        V = self.V[: self.n_classes, : self.n_columns].astype(np.float64)
        U = self.U[: self.n_classes, : self.n_columns].astype(np.float64) if self.averaged else np.zeros_like(V)
        kept = (V != 0.0) | (U != 0.0)
        columns, classes = np.nonzero(kept.T)  # column-major: a column's weights together
        state = {"cls": classes.astype(np.int64), "val": V[classes, columns], "avg": U[classes, columns],
                 "col_len": np.bincount(columns, minlength=self.n_columns).astype(np.int64),
                 "counts": np.array([len(classes), int(np.count_nonzero(V[classes, columns] == 0.0))], np.int64),
                 "scalars": self.scalars}
        return SparseClassRows.restore(state, self.averaged, self.n_classes)


def _grown_matrix(matrix: np.ndarray, shape: tuple, dtype=None) -> np.ndarray:
    out = np.zeros(shape, matrix.dtype if dtype is None else dtype)
    out[: matrix.shape[0], : matrix.shape[1]] = matrix
    return out


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, array.dtype)
    out[: len(array)] = array
    return out
