"""The candidate index of :class:`~streamlearn.memoir.ExtremeSVM`'s ``oracle="means"``, for dense
rows (embeddings): an inverted-file index (IVF, cosine) over each class's **mean example**, that
proposes a row's candidate classes.

Why the means and not the class rows (002 indexes the rows): ``bench/dense_extreme_bench.py``
measured both on a learned model. A learned row points away from the examples its class shares
with its confusable neighbours and its norm follows the class's frequency, so an index over the
rows misses the best row (recall 0.36 at 10⁵ classes with 8 lists searched, 0.78 with 128, slower
than the exact scan). A class's examples lie around its mean whatever the rows do, so the lists
searched for an example hold its class and its neighbours: the most violating classes a step
needs, and the classes a prediction chooses among.

The index follows the stream as the rows' indexes do (``index_every``): the means of the classes
seen since the last refresh move to their nearest list in place, new classes are added; the
coarse lists (one per :data:`CLASSES_PER_LIST` classes, fewer past ~40,000: :meth:`MeanExampleIndex.n_lists`;
:func:`spherical_kmeans`) are trained once
``train_at`` classes exist and again each time the classes double; a row probes its ``n_probe``
nearest lists (both ``oracle_params``), and the scan of those lists returns the classes of best
cosine (:mod:`streamlearn.kernels.mean_lists`). The lists hold class ids; the scan reads the
classes' float32 sums and inverse norms, so the index costs the sums and an id per class (a faiss
IVF-Flat held a float32 copy of every direction, in per-list vectors grown by doubling: twice
the sums' memory again). The rows learned between two refreshes are added to their sums at the
second, so every row in between is searched in the index as it stood: a row's lists are chosen
by sums over the columns in order (:meth:`MeanExampleIndex.probe`) whatever the batch, and
``learn_many`` gives the ``learn_one`` loop's model. Until the first training the learner scans
every class exactly. The state (sums, centroids, lists, rows not yet added) is checkpointed: a
restore goes on identically.

``oracle="auto"`` (ExtremeSVM's default) is this index under a cost model measured on this machine
(``bench/oracle_cost_bench.py``, ``bench/results/oracle-cost.md``): the exact scan costs about
2–3 ns per class × column and example, the index a floor of 12–25 µs at d ≤ 128 and 39–140 µs at
d = 512 (its search and the candidates' re-scoring), so the index is the cheaper from 4,000–8,000
weights on (10.4× at 2,000 classes × 128, 9.6× at 1,000 × 512), at equal or better accuracy from
32 columns on. So ``"auto"`` trains it once the classes × columns reach :data:`AUTO_MIN_WEIGHTS`
(256 classes at d = 128, above every crossover measured: the gate errs towards the exact scan)
over at least :data:`AUTO_MIN_COLUMNS` columns: with fewer, the mean directions of thousands of
classes crowd together and the candidates miss (−11 points at 16 columns and 8,192 classes, ±0
at 32 and 4,096).
Sparse rows never reach it: ``store="auto"`` leaves the dense store first.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidParameterError
from ..kernels import compiled
from ..weights import LARGE_ARRAY_BYTES, return_freed_pages

_dense = compiled("memoir_dense")
_lists = compiled("mean_lists")

#: classes per coarse list (k-means wants ~39 points a centroid)
CLASSES_PER_LIST = 39
#: what reading one mean in a list's scan costs, in products of a query with one centroid (measured with
#: faiss's scan; the lists' own scan reads larger and erratic values, not yet a re-choice: bench/README.md)
SCAN_TO_CENTROID_COST = 13
#: k-means iterations of a training: a list's centroid only routes queries
KMEANS_ITERATIONS = 10
#: queries scored against every centroid at once (a block of scores of a few MiB)
PROBE_BLOCK = 1024
#: the oracle_params of oracle="means" and their defaults: classes before the first index (a
#: couple of k-means lists' worth; oracle="auto" adds its gate), coarse lists searched per row
PARAMS = {"train_at": 64, "n_probe": 2}
#: oracle="auto" trains the index only over rows of at least this many columns, once classes ×
#: columns reach AUTO_MIN_WEIGHTS (module docstring)
AUTO_MIN_COLUMNS, AUTO_MIN_WEIGHTS = 32, 1 << 15


def check_means_params(params: dict | None) -> None:
    """Refuse ``oracle_params`` that are not :data:`PARAMS`' keys with integers ≥ 1."""
    for key, value in (params or {}).items():
        if key not in PARAMS or isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidParameterError(f"oracle='means' takes oracle_params {sorted(PARAMS)} (integers >= 1), got "
                                        f"{key}={value!r}")


def spherical_kmeans(points: np.ndarray, n_lists: int, iterations: int = KMEANS_ITERATIONS, seed: int = 1234) -> np.ndarray:
    """``n_lists`` unit centroids of the unit ``points`` (float32) by Lloyd's iterations under the inner
    product (spherical k-means: Dhillon & Modha, *Machine Learning* 42, 2001), from distinct points
    drawn at random; a list left empty takes the point its centroid serves worst. The assignment is
    one BLAS product per block of points: faiss's k-means selects each point's centroid at several
    times the product's cost."""
    rng = np.random.default_rng(seed)
    centroids = points[np.sort(rng.choice(len(points), n_lists, replace=False))]
    for _ in range(iterations):
        nearest, closeness = np.empty(len(points), np.int64), np.empty(len(points), np.float32)
        for lo in range(0, len(points), PROBE_BLOCK):
            scores = points[lo : lo + PROBE_BLOCK] @ centroids.T
            nearest[lo : lo + PROBE_BLOCK] = scores.argmax(axis=1)
            closeness[lo : lo + PROBE_BLOCK] = scores[np.arange(len(scores)), nearest[lo : lo + PROBE_BLOCK]]
        members = sp.csr_matrix((np.ones(len(points), np.float32), (nearest, np.arange(len(points)))),
                                shape=(n_lists, len(points)))
        sums = np.asarray(members @ points, np.float32)
        empty = np.flatnonzero(np.bincount(nearest, minlength=n_lists) == 0)
        sums[empty] = points[np.argsort(closeness, kind="stable")[: len(empty)]]
        centroids = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-30)
    return np.ascontiguousarray(centroids, np.float32)


_NO_PENDING = (np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))


class MeanExampleIndex:
    """Sums of each class's examples and the inverted lists over their directions (module docstring)."""

    def __init__(self, train_at: int = PARAMS["train_at"], n_probe: int = PARAMS["n_probe"], min_columns: int = 1,
                 min_weights: int = 0):
        self.train_at, self.n_probe, self.min_columns, self.min_weights = train_at, n_probe, min_columns, min_weights
        self.sums = np.zeros((0, 0), np.float32)  # float32: they only give the index its float32 directions
        self.changed = np.zeros(0, np.bool_)  # classes whose mean moved since the last refresh
        self.n_indexed, self.n_trained, self.dim = 0, 0, 0
        self.centroids = np.zeros((0, 0), np.float32)  # the coarse lists' centroids
        self.largest_norm = 0.0
        self._inv_norms, self._list_of, self._slot = np.zeros(0, np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._members, self._pool_end = np.zeros(0, np.int64), 0
        self._start, self._length, self._capacity = (np.zeros(0, np.int64) for _ in range(3))
        self._pending: list[tuple] = []  # rows learned since the last refresh: (indptr, indices, data, y)

    @property
    def ready(self) -> bool:
        return len(self.centroids) > 0

    @property
    def n_lists_trained(self) -> int:
        """The coarse lists of the index (0 before its first training)."""
        return len(self.centroids)

    def reserve(self, n_classes: int, width: int) -> None:
        """Room in :attr:`sums` / :attr:`changed` for ``n_classes`` classes and ``width`` columns (grown
        by doubling the classes)."""
        n_rows = len(self.sums) if n_classes <= len(self.sums) else max(n_classes, 2 * len(self.sums))
        width = max(self.sums.shape[1], width)
        if n_rows > self.sums.shape[0] or width > self.sums.shape[1]:
            grown = np.zeros((n_rows, width), np.float32)
            grown[: self.sums.shape[0], : self.sums.shape[1]] = self.sums
            self.sums = grown
            if grown.nbytes >= LARGE_ARRAY_BYTES:
                return_freed_pages()
        if n_rows > len(self.changed):
            extra = n_rows - len(self.changed)
            self.changed = np.concatenate([self.changed, np.zeros(extra, np.bool_)])
            self._inv_norms = np.concatenate([self._inv_norms, np.zeros(extra, np.float32)])
            self._list_of = np.concatenate([self._list_of, np.full(extra, -1, np.int64)])
            self._slot = np.concatenate([self._slot, np.full(extra, -1, np.int64)])

    def add_rows(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, y: np.ndarray) -> None:
        """Rows learned (CSR, ``indptr`` from 0; within :attr:`sums`' columns): added to their
        classes' sums at the next :meth:`refresh`, so that every row until then is searched in
        the index as it stood (``learn_many`` ≡ the ``learn_one`` loop)."""
        if len(y):
            self._pending.append((indptr.copy(), indices.copy(), data.copy(), np.asarray(y, np.int64).copy()))

    def could_train(self, n_classes: int) -> bool:
        """Whether :meth:`refresh` at ``n_classes`` classes would train the index (its gate)."""
        width = self.sums.shape[1]
        return (n_classes >= max(self.train_at, 2 * self.n_trained) and width >= self.min_columns
                and n_classes * width >= self.min_weights)

    def n_lists(self, n_classes: int) -> int:
        """The coarse lists of an index trained at ``n_classes`` classes: one per
        :data:`CLASSES_PER_LIST`, or fewer, ``√(n_probe · SCAN_TO_CENTROID_COST · n_classes)``: a row
        scores every centroid and scans ``n_probe`` lists of ``n_classes / lists`` means, and that
        count makes the two costs equal, their sum least (past ~40,000 classes at ``n_probe = 2``).
        k-means, on :data:`CLASSES_PER_LIST` classes a list drawn at random, then costs
        ``n_classes`` rather than ``n_classes²``.

        >>> MeanExampleIndex(n_probe=2).n_lists(10_000), MeanExampleIndex(n_probe=2).n_lists(1_000_000)
        (256, 5099)
        """
        balanced = int(np.sqrt(self.n_probe * SCAN_TO_CENTROID_COST * n_classes))
        return max(1, min(n_classes // CLASSES_PER_LIST, balanced))

    def _directions(self, classes: np.ndarray) -> np.ndarray:
        """The unit directions of ``classes``' sums (their :attr:`dim` columns), float32."""
        return np.ascontiguousarray(self.sums[classes, : self.dim] * self._inv_norms[classes, None], np.float32)

    def refresh(self, n_classes: int, keep: int = 0) -> None:
        """Add the rows learned since the last refresh to their sums (but the last ``keep``:
        learned after the refresh's place in the stream), then re-place the moved means and add
        the new classes (train again when the classes doubled)."""
        kept = []
        if keep:
            indptr, indices, data, y = self._pending.pop()
            cut = len(y) - keep
            self._pending.append((indptr[: cut + 1], indices, data, y[:cut]))
            kept = [(indptr[cut:] - indptr[cut], indices[indptr[cut] :], data[indptr[cut] :], y[cut:])]
        for indptr, indices, data, y in self._pending:
            _lists.add_rows(indptr, indices, data, y, self.sums, self.changed)
        self._pending = kept
        if self.could_train(n_classes):
            self._train(n_classes)
        if not self.ready:
            return
        classes = np.concatenate([np.flatnonzero(self.changed[: self.n_indexed]), np.arange(self.n_indexed, n_classes)])
        if len(classes):
            self._place(classes.astype(np.int64))
        self.n_indexed = max(self.n_indexed, n_classes)
        self.changed[:] = False

    def _train(self, n_classes: int) -> None:
        """New coarse lists (k-means over the directions), empty: :meth:`refresh` fills them."""
        self.dim = self.sums.shape[1]
        every = np.arange(n_classes)
        _lists.inverse_norms(self.sums, every, self.dim, self._inv_norms)
        n_lists, trained_on = self.n_lists(n_classes), every
        if n_lists < n_classes // CLASSES_PER_LIST:  # past the root's count: k-means on CLASSES_PER_LIST points a list
            trained_on = np.sort(np.random.default_rng(n_classes).choice(n_classes, CLASSES_PER_LIST * n_lists, replace=False))
        self.use_centroids(spherical_kmeans(self._directions(trained_on), n_lists))
        self.n_trained = n_classes

    def use_centroids(self, centroids: np.ndarray) -> None:
        """New coarse lists around ``centroids`` (float32 rows of :attr:`sums`' width), empty: the
        next :meth:`refresh` places every class in its list."""
        self._set_centroids(centroids)
        self.dim = self.centroids.shape[1]
        self._list_of[:], self._slot[:] = -1, -1
        self._start, self._length, self._capacity = (np.zeros(len(self.centroids), np.int64) for _ in range(3))
        self._members, self._pool_end, self.n_indexed = np.zeros(max(16, 2 * len(self.sums)), np.int64), 0, 0

    def _set_centroids(self, centroids: np.ndarray) -> None:
        self.centroids = np.ascontiguousarray(centroids, np.float32)
        self.largest_norm = float(np.linalg.norm(self.centroids.astype(np.float64), axis=1).max())

    def _place(self, classes: np.ndarray) -> None:
        """Each of ``classes`` (its inverse norm updated) into the list :meth:`probe` finds for it."""
        _lists.inverse_norms(self.sums, classes, self.dim, self._inv_norms)
        lists = self.probe(self._directions(classes), 1)[0][:, 0].copy()
        done = 0
        while done < len(classes):
            placed, self._pool_end = _lists.place(classes[done:], lists[done:], self._list_of, self._slot, self._members,
                                                  self._start, self._length, self._capacity, self._pool_end)
            done += placed
            if done < len(classes):
                self._make_room()

    def _make_room(self) -> None:
        """Compact the pool when moved lists left half of it behind, else double it."""
        if self._pool_end > 2 * int(self._length.sum()):
            self._lay_out(self._list_members())
        else:
            self._members = np.concatenate([self._members, np.zeros(len(self._members), np.int64)])

    def _list_members(self) -> list[np.ndarray]:
        return [self._members[s : s + n] for s, n in zip(self._start.tolist(), self._length.tolist())]

    def _lay_out(self, members: list[np.ndarray]) -> None:
        """The lists' members, in order, in a fresh pool with room for as many again."""
        self._length = np.array([len(m) for m in members], np.int64)
        self._capacity = np.maximum(4, 2 * self._length)
        self._start = np.concatenate([[0], np.cumsum(self._capacity)[:-1]]).astype(np.int64)
        self._pool_end = int(self._capacity.sum())
        self._members = np.zeros(max(16, 2 * self._pool_end), np.int64)
        self._slot[:], self._list_of[:] = -1, -1
        for l, (s, listed) in enumerate(zip(self._start.tolist(), members)):
            self._members[s : s + len(listed)] = listed
            self._slot[listed] = np.arange(s, s + len(listed))
            self._list_of[listed] = l

    def probe(self, queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` coarse lists closest to each of the float32 ``queries``, and their scores
        (:func:`~streamlearn.kernels.memoir_dense.probe_lists`), a block of rows at a time."""
        lists, closeness = np.empty((len(queries), n), np.int64), np.empty((len(queries), n), np.float32)
        for lo in range(0, len(queries), PROBE_BLOCK):
            block = slice(lo, lo + PROBE_BLOCK)
            _dense.probe_lists(queries[block], self.centroids, self.largest_norm, queries[block] @ self.centroids.T, n,
                               lists[block], closeness[block])
        return lists, closeness

    def candidates(self, dense_rows: np.ndarray, n: int) -> np.ndarray:
        """``(rows, n)`` candidate classes per row (-1 pads) of dense rows (fastest as float32 of
        :attr:`dim` columns, which are taken as they are)."""
        queries = dense_rows
        if dense_rows.dtype != np.float32 or dense_rows.shape[1] != self.dim or not dense_rows.flags.c_contiguous:
            queries = np.zeros((len(dense_rows), self.dim), np.float32)
            width = min(self.dim, dense_rows.shape[1])
            queries[:, :width] = dense_rows[:, :width]
        probed = self.probe(queries, min(self.n_probe, len(self.centroids)))[0]
        out, best = np.empty((len(queries), n), np.int64), np.empty((len(queries), n), np.float32)
        _lists.scan(queries, probed, self.sums, self._inv_norms, self._members, self._start, self._length, n, out, best)
        return out

    def export(self, n_classes: int) -> dict:
        kept = min(n_classes, len(self.sums))  # the same state however the stream was fed
        sums, changed = np.zeros((n_classes, self.sums.shape[1]), np.float32), np.zeros(n_classes, np.bool_)
        sums[:kept], changed[:kept] = self.sums[:kept], self.changed[:kept]
        pieces = [_NO_PENDING, *self._pending]  # each piece's indptr from 0, its arrays exactly its rows'
        offsets = np.cumsum([int(piece[0][-1]) for piece in pieces])
        pending = [np.concatenate([[0]] + [piece[0][1:] + offset - piece[0][-1] for piece, offset in zip(pieces, offsets)])]
        pending += [np.concatenate([piece[i] for piece in pieces]) for i in (1, 2, 3)]
        state = {"sums": sums, "changed": changed, "n_indexed": self.n_indexed, "n_trained": self.n_trained, "dim": self.dim,
                 "pending": pending}
        if self.ready:
            state["centroids"] = self.centroids.copy()
            state["list_lengths"] = self._length.copy()
            state["members"] = np.concatenate(self._list_members())
        return state

    def restore(self, state: dict) -> None:
        """Take the state :meth:`export` gave (this index keeps its own parameters and gate)."""
        self.sums = np.zeros((0, 0), np.float32)
        self.changed = np.zeros(0, np.bool_)
        self.reserve(*np.shape(state["sums"]))
        self.sums[:] = state["sums"]
        self.changed[:] = state["changed"]
        self.n_indexed, self.n_trained, self.dim = int(state["n_indexed"]), int(state["n_trained"]), int(state["dim"])
        if "index" in state:  # saved with a faiss index, before these lists: trained again at the next refresh
            self.n_indexed, self.n_trained, self.changed[:] = 0, 0, False
        indptr, indices, data, y = (np.asarray(a) for a in state.get("pending", _NO_PENDING))
        self._pending = [(indptr.astype(np.int64), indices.astype(np.int64), data.astype(np.float64), y.astype(np.int64))]
        self.centroids = np.zeros((0, 0), np.float32)
        if "centroids" in state:
            self._set_centroids(np.asarray(state["centroids"], np.float32))
            lengths = np.asarray(state["list_lengths"], np.int64)
            members = np.asarray(state["members"], np.int64)
            self._lay_out(np.split(members, np.cumsum(lengths)[:-1]))
            _lists.inverse_norms(self.sums, np.arange(self.n_indexed), self.dim, self._inv_norms)
