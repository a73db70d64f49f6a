"""The candidate index of :class:`~streamlearn.memoir.ExtremeSVM`'s ``oracle="means"``, for dense
rows (embeddings): an inverted-file index (faiss ``IndexIVFFlat``, inner product) over each class's
**mean example**, normalised, that proposes a row's candidate classes.

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
nearest lists (both ``oracle_params``), and faiss returns the best candidates of those lists
(``search_preassigned``). faiss keeps the lists; the centroids and every choice of a list are
made here (:meth:`MeanExampleIndex.probe`): faiss's selection of the nearest centroids costs
several times their products, and its products' rounding depends on the batch, which would let
``learn_many`` part from the ``learn_one`` loop. Until the first training the learner scans every
class exactly. The state (sums, index bytes) is checkpointed: a restore goes on identically.

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

_dense = compiled("memoir_dense")

#: classes per coarse list (k-means wants ~39 points a centroid)
CLASSES_PER_LIST = 39
#: what reading one mean in a list's scan costs, in products of a query with one centroid (faiss's
#: scan against the coarse step's BLAS product, measured: bench/results/list-cost.md)
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
    """Refuse ``oracle_params`` that are not :data:`PARAMS`' keys with integers ≥ 1, and say so
    now when faiss is missing (not at the first index, thousands of classes into a stream)."""
    import importlib.util

    if importlib.util.find_spec("faiss") is None:
        raise InvalidParameterError("ExtremeSVM's mean-example index is kept in faiss, a dependency: pip install faiss-cpu")
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


def _faiss():
    import faiss

    faiss.omp_set_num_threads(1)  # k-means and searches single-threaded: the same index, run after run
    return faiss


class MeanExampleIndex:
    """Sums of each class's examples and the IVF index over their directions (module docstring)."""

    def __init__(self, train_at: int = PARAMS["train_at"], n_probe: int = PARAMS["n_probe"], min_columns: int = 1,
                 min_weights: int = 0):
        self.train_at, self.n_probe, self.min_columns, self.min_weights = train_at, n_probe, min_columns, min_weights
        self.sums = np.zeros((0, 0), np.float32)  # float32: they only give the index its float32 directions
        self.changed = np.zeros(0, np.bool_)  # classes whose mean moved since the last refresh
        self.index, self.n_indexed, self.n_trained, self.dim = None, 0, 0, 0
        self.centroids = np.zeros((0, 0), np.float32)  # the coarse lists' centroids, copied
        self.largest_norm = 0.0

    @property
    def ready(self) -> bool:
        return self.index is not None

    def reserve(self, n_classes: int, width: int) -> None:
        """Room in :attr:`sums` / :attr:`changed` for ``n_classes`` classes and ``width`` columns (grown
        by doubling the classes); the learning kernel adds each learned row to its class's sum there."""
        n_rows = len(self.sums) if n_classes <= len(self.sums) else max(n_classes, 2 * len(self.sums))
        width = max(self.sums.shape[1], width)
        if n_rows > self.sums.shape[0] or width > self.sums.shape[1]:
            grown = np.zeros((n_rows, width), np.float32)
            grown[: self.sums.shape[0], : self.sums.shape[1]] = self.sums
            self.sums = grown
            self.changed = np.concatenate([self.changed, np.zeros(len(grown) - len(self.changed), np.bool_)])

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

    def _directions(self, classes) -> np.ndarray:
        sums = self.sums[classes, : self.dim]
        return np.ascontiguousarray(sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), np.float32(1e-30)), np.float32)

    def refresh(self, n_classes: int) -> None:
        """Re-index the moved means and add the new classes (train again when the classes doubled)."""
        if self.could_train(n_classes):
            self._train(n_classes)
        if self.index is None:
            return
        moved = np.flatnonzero(self.changed[: self.n_indexed])
        if len(moved):
            self._move(moved.astype(np.int64), self._directions(moved))
        if n_classes > self.n_indexed:
            self._add(self._directions(np.arange(self.n_indexed, n_classes)))
            self.n_indexed = n_classes
        self.changed[:] = False

    def _train(self, n_classes: int) -> None:
        faiss = _faiss()
        self.dim = self.sums.shape[1]
        quantizer = faiss.IndexFlatIP(self.dim)
        n_lists, trained_on = self.n_lists(n_classes), np.arange(n_classes)
        if n_lists < n_classes // CLASSES_PER_LIST:  # past the root's count: k-means on CLASSES_PER_LIST points a list
            trained_on = np.sort(np.random.default_rng(n_classes).choice(n_classes, CLASSES_PER_LIST * n_lists, replace=False))
        quantizer.add(spherical_kmeans(self._directions(trained_on), n_lists))
        index = faiss.IndexIVFFlat(quantizer, self.dim, quantizer.ntotal, faiss.METRIC_INNER_PRODUCT)  # trained: a full quantizer
        index.make_direct_map(True)
        index.nprobe = min(self.n_probe, index.nlist)  # search_preassigned takes no list -1
        self.index, self.n_indexed, self.n_trained = index, 0, n_classes
        self._keep_centroids()

    def _add(self, directions: np.ndarray) -> None:
        """Append ``directions`` to the index, each in the list :meth:`probe` finds for it."""
        lists = self.probe(directions, 1)[0]
        swig_ptr = _faiss().swig_ptr
        self.index.add_core(len(directions), swig_ptr(directions), None, swig_ptr(lists))

    def _move(self, classes: np.ndarray, directions: np.ndarray) -> None:
        """faiss's ``update_vectors`` with each direction's list found by :meth:`probe` (an IVF-Flat
        code is the vector's float32 bytes)."""
        lists = self.probe(directions, 1)[0]
        swig_ptr = _faiss().swig_ptr
        self.index.direct_map.update_codes(self.index.invlists, len(classes), swig_ptr(classes), swig_ptr(lists),
                                           swig_ptr(directions.view(np.uint8)))

    def probe(self, queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` coarse lists closest to each of the float32 ``queries``, and their scores
        (:func:`~streamlearn.kernels.memoir_dense.probe_lists`), a block of rows at a time."""
        lists, closeness = np.empty((len(queries), n), np.int64), np.empty((len(queries), n), np.float32)
        for lo in range(0, len(queries), PROBE_BLOCK):
            block = slice(lo, lo + PROBE_BLOCK)
            _dense.probe_lists(queries[block], self.centroids, self.largest_norm, queries[block] @ self.centroids.T, n,
                               lists[block], closeness[block])
        return lists, closeness

    def _keep_centroids(self) -> None:
        self.centroids = np.ascontiguousarray(self.index.quantizer.reconstruct_n(0, self.index.nlist), np.float32)
        self.largest_norm = float(np.linalg.norm(self.centroids.astype(np.float64), axis=1).max())

    def candidates(self, dense_rows: np.ndarray, n: int) -> np.ndarray:
        """``(rows, n)`` candidate classes per row (-1 pads) of dense rows (fastest as float32 of
        :attr:`dim` columns, which are taken as they are)."""
        queries = dense_rows
        if dense_rows.dtype != np.float32 or dense_rows.shape[1] != self.dim or not dense_rows.flags.c_contiguous:
            queries = np.zeros((len(dense_rows), self.dim), np.float32)
            width = min(self.dim, dense_rows.shape[1])
            queries[:, :width] = dense_rows[:, :width]
        lists, closeness = self.probe(queries, self.index.nprobe)
        return np.ascontiguousarray(self.index.search_preassigned(queries, n, lists, closeness)[1], np.int64)

    def export(self, n_classes: int) -> dict:
        sums, changed = np.zeros((n_classes, self.sums.shape[1]), np.float32), np.zeros(n_classes, np.bool_)
        kept = min(n_classes, len(self.sums))  # the same state however the stream was fed
        sums[:kept], changed[:kept] = self.sums[:kept], self.changed[:kept]
        state = {"sums": sums, "changed": changed,
                 "n_indexed": self.n_indexed, "n_trained": self.n_trained, "dim": self.dim}
        if self.index is not None:
            state["index"] = _faiss().serialize_index(self.index)
        return state

    def restore(self, state: dict) -> None:
        """Take the state :meth:`export` gave (this index keeps its own parameters and gate)."""
        self.sums = np.asarray(state["sums"], np.float32).copy()
        self.changed = np.asarray(state["changed"], np.bool_).copy()
        self.n_indexed, self.n_trained, self.dim = int(state["n_indexed"]), int(state["n_trained"]), int(state["dim"])
        self.index = None
        if "index" in state:
            self.index = _faiss().deserialize_index(np.asarray(state["index"], np.uint8))
            self.index.nprobe = min(self.n_probe, self.index.nlist)
            self._keep_centroids()
