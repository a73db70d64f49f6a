"""Maximum-inner-product oracles for :class:`~streamlearn.memoir.ExtremeSVM` (002, "Margin
approximation"): given a batch of rows, the classes whose weight rows are likely to have the
largest inner products with each, to be re-ranked exactly by the learner.

Every oracle sees the class rows through their count sketches ``S[k]`` (a random projection of
each sparse row to ``sketch_dim`` dimensions, kept up to date by the learner's step: see
:func:`streamlearn.kernels.memoir_sketch.sketch_rows`), queries with the rows' sketches, and updates
only the rows that a mini-batch changed (:meth:`MIPSOracle.update`), once per call, in place.

* :class:`ExactOracle` — no index: the learner scans its inverted index (column → class
  entries) and gets the true argmax. The reference, and the default for small ``K``.
* :class:`GraphOracle` — a navigable small-world graph (hnswlib's HNSW in inner-product space,
  as 002 used nmslib's SW-graph) over the sketches. hnswlib updates a vector in place when its
  label is added again. Chosen over a sparse MIPS library: none on PyPI takes sparse vectors
  in 10⁵–10⁶ dimensions with in-place updates; a sketch of a few hundred dimensions keeps the
  graph small and the exact re-ranking restores the precision the sketch loses.
* :class:`LSHOracle` — SimpleLSH (Neyshabur & Srebro 2015; 002's MEMOIR-LSH): 64 sign bits
  of random hyperplanes over ``[S[k]/M, sqrt(1 − ‖S[k]‖²/M²)]``, queries ranked by Hamming
  distance (a linear pass over ``K`` 64-bit codes: cheap, not sub-linear).

>>> make_oracle("lsh", seed=0).name
'lsh'
"""

from __future__ import annotations

import inspect

import numpy as np

from .errors import InvalidParameterError
from .extras import require
from .kernels import compiled

_sketch = compiled("memoir_sketch")

ORACLES = ("exact", "graph", "lsh")


class MIPSOracle:
    """The interface: ``exact`` oracles answer inside the learner's step; the others give
    candidates (:meth:`top`) from the class sketches and follow their changes (:meth:`update`)."""

    name = "?"
    exact = False

    def __init__(self, seed: int = 0):
        self.seed = seed

    def update(self, S: np.ndarray, classes: np.ndarray, n_classes: int) -> None:
        """The rows of ``classes`` changed (their sketches are ``S[classes]``)."""

    def rebuild(self, S: np.ndarray, n_classes: int) -> None:
        """Every row may have changed (a restore, a rescale)."""
        self.update(S, np.arange(n_classes), n_classes)

    def top(self, S: np.ndarray, queries: np.ndarray, n_classes: int, n: int) -> np.ndarray:
        """``(len(queries), n)`` candidate classes per query sketch (-1 pads)."""
        raise NotImplementedError

    def export(self) -> dict | None:
        """What a checkpoint keeps of the index (``None``: it is rebuilt from the sketches)."""
        return None

    def restore(self, state: dict, S: np.ndarray, n_classes: int) -> None:
        """The index of a checkpoint: :meth:`export`'s state, or rebuilt from the sketches."""
        self.rebuild(S, n_classes)


class ExactOracle(MIPSOracle):
    name = "exact"
    exact = True


class GraphOracle(MIPSOracle):
    """hnswlib HNSW over the class sketches (inner-product space), one thread, seeded.

    A changed row is marked deleted and inserted again under a fresh index label into the
    deleted element's place, so the index does not grow with the updates; hnswlib repairs the
    neighbourhood of each, which is most of this oracle's cost (``bench/results/memoir.md``).
    That repair costs about ``M²`` distances, so the defaults ``M=6, ef_construction=16`` are
    the smallest graph ``bench.memoir_bench`` found as accurate as larger ones on WordNet's
    validation split (the fastest within one standard error of the best)."""

    name = "graph"

    def __init__(self, seed: int = 0, M: int = 6, ef_construction: int = 16, ef: int = 48):
        super().__init__(seed)
        require("hnswlib", "graph", "ExtremeSVM(oracle='graph')")  # at construction, not at the first row
        self.M, self.ef_construction, self.ef = M, ef_construction, ef
        self._index = None
        self._dim = None
        self._label_of = np.full(0, -1, np.int64)  # class -> its label in the index (-1: not in it)
        self._class_of = np.full(0, -1, np.int64)  # label -> class
        self._next_label = 0

    def _ensure(self, dim: int, n_classes: int, n_new: int) -> None:
        import hnswlib

        if self._index is None or self._dim != dim:
            self._index = hnswlib.Index(space="ip", dim=dim)
            self._index.init_index(max_elements=max(2 * n_classes, 16), ef_construction=self.ef_construction, M=self.M,
                                   random_seed=self.seed, allow_replace_deleted=True)
            self._index.set_num_threads(1)
            self._dim = dim
            self._label_of = np.full(max(n_classes, 16), -1, np.int64)
            self._class_of = np.full(0, -1, np.int64)
            self._next_label = 0
        live = self._live()
        if live + n_new > self._index.get_max_elements():
            self._index.resize_index(max(live + n_new, 2 * self._index.get_max_elements()))
        if n_classes > len(self._label_of):
            self._label_of = np.concatenate([self._label_of, np.full(max(n_classes, 2 * len(self._label_of)) - len(self._label_of), -1)])

    def _live(self) -> int:
        return int(np.count_nonzero(self._label_of >= 0))

    def update(self, S, classes, n_classes) -> None:
        classes = np.asarray(classes, np.int64)
        if not len(classes):
            return
        self._ensure(S.shape[1], n_classes, len(classes))
        old = self._label_of[classes]
        for label in old[old >= 0].tolist():
            self._index.mark_deleted(label)
        labels = np.arange(self._next_label, self._next_label + len(classes))
        self._next_label += len(classes)
        if len(self._class_of) < self._next_label:
            self._class_of = np.concatenate([self._class_of, np.full(max(self._next_label, 2 * len(self._class_of)) - len(self._class_of), -1)])
        self._class_of[labels] = classes
        self._label_of[classes] = labels
        self._index.add_items(S[classes], labels, replace_deleted=True)

    def rebuild(self, S, n_classes) -> None:
        self._index = None
        live = np.flatnonzero(np.any(S[:n_classes] != 0, axis=1))
        if len(live):
            self.update(S, live, n_classes)

    def top(self, S, queries, n_classes, n) -> np.ndarray:
        out = np.full((len(queries), n), -1, np.int64)
        count = 0 if self._index is None else self._live()
        if not count or not len(queries):
            return out
        k = min(n, count)
        self._index.set_ef(max(self.ef, k))
        labels, _ = self._index.knn_query(queries, k=k)
        out[:, :k] = self._class_of[labels]
        return out

    def __getstate__(self):  # an index is rebuilt from the sketches, never pickled
        return {**self.__dict__, "_index": None, "_dim": None}


class LSHOracle(MIPSOracle):
    """SimpleLSH codes of the class sketches; Hamming ranking (compiled)."""

    name = "lsh"

    def __init__(self, seed: int = 0, n_bits: int = 64):
        super().__init__(seed)
        self.n_bits = n_bits
        self.planes = None
        self.codes = np.zeros(0, np.uint64)
        self.max_norm = 0.0

    def _planes(self, dim: int) -> np.ndarray:
        if self.planes is None or self.planes.shape[1] != dim + 1:
            self.planes = np.random.default_rng(self.seed).standard_normal((self.n_bits, dim + 1))
        return self.planes

    def update(self, S, classes, n_classes) -> None:
        planes = self._planes(S.shape[1])
        if len(self.codes) < len(S):
            self.codes = np.concatenate([self.codes, np.zeros(len(S) - len(self.codes), np.uint64)])
        if not len(classes):
            return
        norms = np.sqrt((S[classes].astype(np.float64) ** 2).sum(axis=1))
        if norms.max() > self.max_norm:  # M must bound every row: a new bound re-codes them all
            self.max_norm = 2.0 * float(norms.max())
            classes = np.arange(n_classes)
        listed = np.ascontiguousarray(classes, np.int64)
        _sketch.lsh_codes(S, listed, len(listed), planes, self.max_norm, self.codes)

    def rebuild(self, S, n_classes) -> None:
        self.max_norm = 0.0
        self.update(S, np.arange(n_classes), n_classes)

    def export(self) -> dict:
        """The codes as they are (rows changed since the last refresh keep their old codes)."""
        return {"codes": self.codes.copy(), "max_norm": self.max_norm}

    def restore(self, state, S, n_classes) -> None:
        self._planes(S.shape[1])
        self.codes = np.zeros(len(S), np.uint64)
        self.codes[: len(state["codes"])] = np.asarray(state["codes"], np.uint64)[: len(S)]
        self.max_norm = float(state["max_norm"])

    def top(self, S, queries, n_classes, n) -> np.ndarray:
        out = np.full((len(queries), n), -1, np.int64)
        if not n_classes or self.max_norm == 0.0:
            return out
        _sketch.lsh_top(np.ascontiguousarray(queries), self._planes(S.shape[1]), self.codes, n_classes, out)
        return out


def make_oracle(name: str, seed: int = 0, params: dict | None = None) -> MIPSOracle:
    """The oracle called ``name`` (one of :data:`ORACLES`), built with ``params`` (its constructor's
    keywords, e.g. ``{"M": 8}`` for :class:`GraphOracle`).

    >>> make_oracle("graph", params={"n_bits": 8})
    Traceback (most recent call last):
    ...
    streamlearn.errors.InvalidParameterError: oracle_params for 'graph' take M, ef_construction, ef; got n_bits
    """
    oracles = {"exact": ExactOracle, "graph": GraphOracle, "lsh": LSHOracle}
    if name not in oracles:
        raise InvalidParameterError(f"oracle must be one of {', '.join(ORACLES)}, got {name!r}")
    params = dict(params or {})
    accepted = [p for p in inspect.signature(oracles[name].__init__).parameters if p not in ("self", "seed")]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise InvalidParameterError(f"oracle_params for {name!r} take {', '.join(accepted) or 'nothing'}; got {', '.join(unknown)}")
    for key, value in params.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidParameterError(f"oracle_params[{key!r}] must be a positive integer, got {value!r}")
    return oracles[name](seed=seed, **params)
