"""Extreme multi-class classification: MEMOIR (002, ``../shared/papers/002_d116c1700f27e6e6.txt``).

:class:`ExtremeSVM` is the Crammer–Singer multi-class SVM learned by Pegasos steps in which
the most violating class ``r = argmax_{k≠y} ⟨w_k, x⟩`` comes from a maximum-inner-product
oracle (:mod:`streamlearn.mips`) instead of a scan over all ``K`` rows:

* ``penalty="l2"`` — 002 Alg. 1 (MEMOIR-ℓ2): ``W ← (1 − λη) W`` and the sub-gradient step
  ``η`` on the violated pairs, optionally the projection onto ``‖W‖ ≤ 1/√λ``. By default ``η``
  follows 002's schedule ``eta0 / (1 + eta_decay t)`` (its Table 4) at ``3 / (1 + 1e-4 t)``,
  the configuration that won across six data sets (``bench/results/defaults.md``); with
  ``eta0="pegasos"`` it is Pegasos' ``1/(λ t)``: the MCID step of
  :class:`~streamlearn.MulticlassSVM` (000 Alg. 3) exactly, with the exact oracle;
* ``penalty="l1"`` — 002 Alg. 2 (MEMOIR-ℓ1): truncated sub-gradient descent, step
  ``η_t = eta0 / (1 + eta_decay t)``, the rows the mini-batch touched soft-thresholded
  (Eq. 13): a sparse model;
* ``oracle="lsh"`` with ``penalty="l2"`` is MEMOIR-LSH; the default ``"auto"``: the parameter ``oracle``.

How it stays bounded in ``K`` and ``d`` (the store of :mod:`streamlearn.kernels.memoir_store`):
class rows are sparse (only touched weights exist, so memory follows the model's non-zeros,
never ``K × d``) — unless the rows are dense (embeddings: ``store``, below); the Pegasos
shrink is one global scale kept outside the rows and the index (a uniform rescale never changes
an argmax); a new class is a new, empty row, at any time; the oracle's index is updated once
per ``learn_many`` / mini-batch for the rows that changed, in place. Predictions re-rank the
oracle's ``n_candidates`` exactly (the exact oracle: every class).

Rows no feature of ``x`` reaches score 0. ``fallback="lowest"`` lets the lowest-index such class
take part in the argmax (ties to the lowest index: MulticlassSVM's rule); ``"random"`` draws
``r`` uniformly among the classes when none scores above 0 (002's code), from the learner's
seeded, checkpointed generator. ``balance=True`` weighs each example's step by
``(N / K) / count(y)`` with the running counts — a stream's version of 002's uniform sampling of
classes (``p ∝ 1/count(y)``).

>>> from streamlearn import ExtremeSVM
>>> model = ExtremeSVM(lam=0.01)
>>> for _ in range(5):
...     model.learn_one({"purr": 1.0}, "cat")
...     model.learn_one({"bark": 1.0}, "dog")
...     model.learn_one({"moo": 1.0}, "cow")
>>> model.predict_one({"bark": 1.0}), len(model.classes), model.dense, model.n_weights
('dog', 3, True, 12)
"""

from __future__ import annotations

import numpy as np

from ..adaptation import ChangeWatch, average_weight_of, learn_watched, restart_step
from ..base import StreamClassifier
from ..checks import average_power_of, check_positive
from ..errors import InvalidParameterError
from ..sample_weights import running_balance
from ..batches import SparseRows
from ..kernels import compiled
from ..kernels.memoir_store import AW, A, G
from ..mips import ORACLES, make_oracle
from .dense import DenseLearning
from .means import AUTO_MIN_COLUMNS, AUTO_MIN_WEIGHTS, MeanExampleIndex, check_means_params
from .prediction import ExtremePredictions
from .store import RENORMALIZE_BELOW, DenseClassRows, SparseClassRows

_memoir = compiled("memoir")
_store_kernels = compiled("memoir_store")
_sketch = compiled("memoir_sketch")
_EMPTY_CANDIDATES = np.zeros((0, 0), np.int64)
_EMPTY_SKETCH = np.zeros((0, 0), np.float32)
_NO_MISTAKES = np.zeros(0, np.bool_)
class ExtremeSVM(DenseLearning, ExtremePredictions, StreamClassifier):
    """Crammer–Singer SVM for many classes with an inexact margin (002; see the module docstring).

    Parameters
    ----------
    lam
        λ of ``λ/2 ‖W‖²`` (l2) or ``λ/2 ‖W‖₁`` (l1). The default, 1e-6 with l2's default step,
        is the defaults protocol's winner (``bench/results/defaults.md``).
    penalty
        ``"l2"`` (002 Alg. 1) or ``"l1"`` (Alg. 2: truncation, a sparse model).
    oracle
        ``"auto"`` (default): ``"means"`` where its index pays, else the exact scan (the cost
        model of :mod:`streamlearn.memoir.means`: dense rows of at least ``AUTO_MIN_COLUMNS``
        columns, classes × columns at least ``AUTO_MIN_WEIGHTS``). ``"exact"`` (a scan, every class), ``"graph"`` (hnswlib) or
        ``"lsh"`` (SimpleLSH) over sketches of the class rows (a large intercept value blurs them:
        give them ``intercept_scaling=0.1``); ``"means"``, for dense rows: an inverted-file index over
        each class's mean example (:mod:`streamlearn.memoir.means`, which says why not the rows), an
        exact scan until it is trained and after the dense store.
    n_candidates
        Classes the oracle proposes for re-ranking, when learning (and predicting without
        ``predict_exact``).
    sketch_dim
        Dimension of the class rows' count sketches the approximate oracles index.
    index_every
        Approximate oracles: the index takes the rows that changed every this many examples
        (one batched update; the candidates of the rows in between come from it as it was, and
        are re-ranked with the current weights).
    predict_exact
        Predict by an exact scan (002: "class prediction ... using exact MIPS computation",
        cheap on sparse rows); ``False``: through the oracle's candidates, re-ranked. The index
        holds the current iterate: with averaging and a step that does not decay to zero fast
        (the default schedule), its candidates may miss the averaged model's best class.
        ``None`` (default): exact, but through the candidates with the means index: it
        holds the classes' mean examples, not an iterate, and a model that learned through it
        never corrected the rows it never proposed, which an exact scan would then let win.
    batch_size
        Examples per step (the mini-batch ``b`` of 002: every ``r`` of a batch at its
        starting weights).
    project
        l2: project onto ``‖W‖ ≤ 1/√λ`` after each step.
    average, average_power
        Predict with the (polynomially weighted) averaged iterate, as :class:`~streamlearn.MulticlassSVM`;
        by default (``None``) l2 does, with power 2 (the defaults protocol's winner), and l1 does not.
    fallback
        ``"lowest"`` or ``"random"``: the rule for classes no feature reaches (module docstring).
    balance, class_weight
        Weigh each step by ``(N/K) / count(y)`` (running counts); ``class_weight`` as :class:`~streamlearn.MulticlassSVM`'s.
    eta0, eta_decay
        The step ``eta0 / (1 + eta_decay t)`` of 002. ``None``: for l1 0.1 and 0.02 (002's Table 4),
        for l2 3 and 1e-4 (the defaults protocol's winner). ``eta0="pegasos"`` (l2): the Pegasos
        step ``1/(λt)``, MulticlassSVM's. :attr:`step` is the step in use.
    oracle_params
        Keywords of the oracle's constructor: the graph's ``M``, ``ef_construction`` and ``ef``
        (:class:`~streamlearn.mips.GraphOracle`), LSH's ``n_bits``, the means' (and ``"auto"``'s) ``train_at`` and
        ``n_probe`` (:mod:`streamlearn.memoir.means`; raise ``n_probe``, 2, for embeddings without clusters: ``means-probe.md``)
    adapt
        Follow a stream that changes (default, the defaults protocol's choice:
        ``bench/results/options-families.md``): the Page-Hinkley watch of :mod:`streamlearn.adaptation`
        on the prequential mistakes (the averaged iterate's, by an exact scan, when it predicts; else
        the current iterate's, which the step finds anyway: ``r`` above ``y``); on a rise, ``t``
        restarts at ``RESTART_EXAMPLES / batch_size`` (a larger step again) and the average at the
        current iterate. ``False``: 002's learner exactly, and about half the learning time with
        averaging (the watch's scan; ``bench/results/adaptation.md``). On a stationary stream the
        watch does not fire and both are the same model.
    store
        How the class rows are kept. ``"auto"`` (default): a dense ``(classes, columns)`` matrix
        while the rows learned fill at least a quarter of the columns they name and the matrix
        stays under :data:`~streamlearn.memoir.dense.DENSE_MAX_WEIGHTS` — then, for good, the sparse store (the switch
        falls between two groups, at the same example however the stream is fed); ``"dense"``:
        the matrix always; ``"sparse"``: the sparse store always. The dense store is for
        ``penalty="l2"`` with the exact, means or auto oracle (the others always use the sparse one); both give
        the same iterates, bit for bit (:mod:`streamlearn.kernels.memoir_dense`), and the dense one
        scans a row's classes without a hash or a pointer per weight. Once the mean-example index is
        trained, the dense rows are float32: its candidates already approximate the exact argmax,
        and the rows are most of the model's memory and memory traffic (products summed in float64).
    n_bits, seed, standardize
        As every streamlearn learner (``seed`` draws the random fallback, the sketches' index
        and the LSH planes).
    fit_intercept, intercept_scaling
        As :class:`~streamlearn.MulticlassSVM`'s (an intercept, on by default: ``bench/results/options-families.md``;
        its feature's value ``"auto"``, the data's scale, or a fixed one).

    Attributes
    ----------
    n_weights
        Weights stored (the model's size; ℓ1 truncation reclaims zeros).
    classes, n_steps, n_pending
        As :class:`~streamlearn.MulticlassSVM`.

    Examples
    --------
    >>> from streamlearn import ExtremeSVM
    >>> model = ExtremeSVM(oracle="lsh", seed=0, fit_intercept=False)  # classes told by their own words
    >>> for k in range(300):  # 300 classes, each with its own words
    ...     model.learn_one({f"w{k}": 1.0, f"v{k}": 0.5}, f"class {k}")
    >>> model.predict_one({"w7": 1.0}), len(model.classes), model.n_weights <= 2 * 2 * 300
    ('class 7', 300, True)
    """

    def __init__(self, lam: float = 1e-6, penalty: str = "l2", oracle: str = "auto", n_candidates: int = 10,
                 sketch_dim: int = 1024, index_every: int = 256, predict_exact: bool | None = None, batch_size: int = 1,
                 project: bool = False, average: bool | None = None, average_power: float | None = None, fallback: str = "lowest",
                 balance: bool = False, eta0: float | str | None = None,
                 eta_decay: float | None = None, oracle_params: dict | None = None, n_bits: int | None = None,
                 seed: int | None = None, standardize: bool = False, adapt: bool = True, store: str = "auto",
                 fit_intercept: bool = True, intercept_scaling: float | str = "auto", class_weight: dict | str | None = None):
        check_positive("lam", lam)
        if not isinstance(adapt, bool):
            raise InvalidParameterError(f"adapt must be True or False, got {adapt!r}")
        for name, value in (("n_candidates", n_candidates), ("sketch_dim", sketch_dim), ("index_every", index_every)):
            check_positive(name, value, integer=True)
        if penalty not in ("l2", "l1"):
            raise InvalidParameterError(f"penalty must be 'l2' or 'l1', got {penalty!r}")
        if eta0 == "pegasos":
            if penalty != "l2":
                raise InvalidParameterError("eta0='pegasos' is the step of penalty='l2'; l1 takes a number")
        elif eta0 is not None:
            check_positive("eta0", eta0)
        first_step = DEFAULT_STEP["l2"][0] if eta0 is None else eta0
        if penalty == "l2" and first_step != "pegasos" and lam * first_step >= 1:  # W ← (1 − λη) W would zero W
            raise InvalidParameterError(f"lam * eta0 must be below 1 for the l2 step schedule, got {lam} * {first_step}: "
                                        "give a smaller eta0, or eta0='pegasos' for the step 1/(λt)")
        if oracle not in ORACLES + ("means", "auto"):
            raise InvalidParameterError(f"oracle must be one of {', '.join(ORACLES + ('means', 'auto'))}, got {oracle!r}")
        if fallback not in ("lowest", "random"):
            raise InvalidParameterError(f"fallback must be 'lowest' or 'random', got {fallback!r}")
        if eta_decay is not None and (isinstance(eta_decay, bool) or not isinstance(eta_decay, (int, float))
                                      or not 0 <= eta_decay < float("inf")):
            raise InvalidParameterError(f"eta_decay must be a number >= 0, got {eta_decay!r}")
        if oracle in ORACLES:
            make_oracle(oracle, params=oracle_params)  # checks the keywords now, not at the first example
        elif oracle == "means" and (penalty != "l2" or store == "sparse"):
            raise InvalidParameterError("oracle='means' indexes dense rows: it takes penalty='l2' and store 'auto' or 'dense'")
        else:
            check_means_params(oracle_params)
        if store not in ("auto", "sparse", "dense"):
            raise InvalidParameterError(f"store must be 'auto', 'sparse' or 'dense', got {store!r}")
        if store == "dense" and (penalty != "l2" or oracle in ("graph", "lsh")):
            raise InvalidParameterError("store='dense' is for penalty='l2' without oracle 'graph' or 'lsh' (ℓ1 truncation makes "
                                        "sparse rows; the approximate oracles index sketches of sparse rows)")
        if average and penalty == "l1":
            raise InvalidParameterError("average=True is for penalty='l2' (an average of truncated rows is not sparse)")
        self._averaged = penalty == "l2" if average is None else bool(average)  # None: l2 averages, l1 does not
        self._average_power = average_power_of(self._averaged, average_power, DEFAULT_AVERAGE_POWER)
        self.lam, self.penalty, self.oracle, self.n_candidates, self.sketch_dim = lam, penalty, oracle, n_candidates, sketch_dim
        self.index_every, self.predict_exact, self.oracle_params = index_every, predict_exact, oracle_params
        self.batch_size, self.project, self.average, self.average_power = batch_size, project, average, average_power
        self.fallback, self.balance, self.eta0, self.eta_decay = fallback, balance, eta0, eta_decay
        self.n_bits, self.seed, self.standardize, self.adapt, self.store = n_bits, seed, standardize, adapt, store
        self.fit_intercept, self.intercept_scaling, self.class_weight = fit_intercept, intercept_scaling, class_weight
        self._reset()

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"adapt": False, "average": False, "store": "sparse", "oracle": "exact", "fit_intercept": True}
        yield {"lam": 1e-2, "batch_size": 3, "project": True, "average": True, "average_power": 2.0, "oracle": "lsh",
               "fallback": "random", "seed": 1}
        yield {"lam": 1e-4, "penalty": "l1", "oracle": "graph", "n_candidates": 3, "sketch_dim": 16, "balance": True,
               "oracle_params": {"M": 6, "ef_construction": 16}, "seed": 2}
        yield {"oracle": "means", "index_every": 8, "oracle_params": {"train_at": 4, "n_probe": 1}}

    # ------------------------------------------------------------------ set-up
    def _init_model(self) -> None:
        dense = self.store != "sparse" and self.penalty == "l2" and self.oracle in ("exact", "means", "auto")
        self._store = DenseClassRows(self._averaged) if dense else SparseClassRows(self._averaged)
        gate = {"min_columns": AUTO_MIN_COLUMNS, "min_weights": AUTO_MIN_WEIGHTS} if self.oracle == "auto" else {}
        indexed = dense and self.oracle in ("means", "auto")
        self._means = MeanExampleIndex(**(self.oracle_params or {}), **gate) if indexed else None
        self._recall_counts = np.zeros(3, np.int64)  # the index's hits, rows checked, the step of the next check
        self._dense_seen = np.zeros(3, np.int64)  # rows learned densely, their entries, columns they name
        means = self.oracle not in ORACLES  # then the sparse store (once store="auto" leaves the dense one) scans exactly
        self._oracle = make_oracle("exact" if means else self.oracle, seed=self.seed or 0, params=None if means else self.oracle_params)
        self._t, self._n_learned = 0, 0  # steps; classes that existed at the last step
        self._changed, self._is_changed = np.zeros(0, np.int64), np.zeros(0, np.bool_)  # rows the index has not seen
        self._n_pending, self._since_refresh, self._needs_rebuild = 0, 0, False
        self._n_indexed = 0  # classes at the index's last refresh: the ones it may propose
        self._sketches = np.zeros((0, self.sketch_dim), np.float32) if not self._oracle.exact else _EMPTY_SKETCH
        self._rng = np.array([np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(self.seed or 0)], np.uint64)
        self._class_counts, self._stamp, self._mark = np.zeros(0, np.int64), 0, np.zeros(0, np.int64)
        self._scores, self._avg_scores, self._touched = np.zeros(0), np.zeros(0), np.zeros(0, np.int64)
        self._watch = ChangeWatch() if self.adapt else None

    @property
    def step(self) -> tuple:
        """The step in use: ``("pegasos", None)`` or ``(eta0, eta_decay)`` of ``eta0 / (1 + eta_decay t)``."""
        if self.eta0 == "pegasos":
            return ("pegasos", None)
        eta0, eta_decay = DEFAULT_STEP[self.penalty]
        return (float(eta0 if self.eta0 is None else self.eta0), float(eta_decay if self.eta_decay is None else self.eta_decay))

    def _eta0(self) -> float:
        """The kernel's ``eta0``: 0 selects the Pegasos step."""
        eta0, _ = self.step
        return 0.0 if eta0 == "pegasos" else eta0

    @property
    def resumes_exactly(self) -> bool:
        """False with ``oracle="graph"``: hnswlib's graph is rebuilt on restore (its insertion
        order and random levels are not those of the live index), so the candidates — and the
        model after more learning — may differ. The restored weights are the saved ones."""
        return self.oracle != "graph"

    @property
    def averaged(self) -> bool:
        """Whether predictions use the averaged iterate (``average``, or by default: with ``penalty="l2"``)."""
        return self._averaged

    @property
    def class_rows(self) -> SparseClassRows | DenseClassRows:
        """The class rows (:mod:`streamlearn.memoir.store`; see ``store``): read them, do not change them."""
        return self._store

    @property
    def dense(self) -> bool:
        """Whether the class rows are a dense matrix now (see ``store``)."""
        return isinstance(self._store, DenseClassRows)

    @property
    def n_weights(self) -> int:
        """Weights stored (the sparse rows' entries, or the dense matrix's classes × columns)."""
        return self._store.n_weights

    @property
    def n_steps(self) -> int:
        return self._t

    def _room(self, n_classes: int) -> None:
        """Scratch and per-class arrays for ``n_classes`` classes (grown by doubling)."""
        if n_classes <= len(self._mark):
            return
        size = max(n_classes, 2 * len(self._mark), 16)
        self._mark = np.concatenate([self._mark, np.zeros(size - len(self._mark), np.int64)])
        self._scores, self._avg_scores = np.zeros(size), np.zeros(size)
        self._touched = np.zeros(size, np.int64)
        self._changed = np.concatenate([self._changed, np.zeros(size - len(self._changed), np.int64)])
        self._is_changed = np.concatenate([self._is_changed, np.zeros(size - len(self._is_changed), np.bool_)])
        self._class_counts = np.concatenate([self._class_counts, np.zeros(size - len(self._class_counts), np.int64)])
        if not self._oracle.exact:
            grown = np.zeros((size, self.sketch_dim), np.float32)
            grown[: len(self._sketches)] = self._sketches
            self._sketches = grown

    # ----------------------------------------------------------------- learning
    @property
    def n_changes(self) -> int:
        """Rises of the prequential error detected so far (0 with ``adapt=False``; see ``adapt``)."""
        return 0 if self._watch is None else self._watch.changes

    #: a row's weight scales its step (002 Alg. 1: ``w_r -= η ω x``, ``w_y += η ω x``), as ``balance``'s does
    takes_weights = True
    _weight_feed = (None, 0)  # (weights of the rows _learn_groups learns, how many the steps took)

    def _learn_groups(self, rows: SparseRows, y: np.ndarray, scores=None, weights=None) -> None:
        self._weight_feed = (weights, 0)
        try:
            self._learn_span(rows, y, _NO_MISTAKES) if self._watch is None else self._learn_watched(rows, y)
        finally:
            self._weight_feed = (None, 0)
        if self.penalty == "l1":  # once per call, not per span: where it happens shows in the state's order
            self._store.compact()

    def _learn_watched(self, rows: SparseRows, y: np.ndarray) -> None:
        """Learn with the change watch: the dense store's kernel watches as it learns; the sparse
        store learns in the spans of :func:`~streamlearn.adaptation.learn_watched`."""
        mistakes = np.zeros(rows.n_rows, np.bool_)
        if self.dense:
            rows, y, mistakes = self._learn_dense_head(rows, y, mistakes, watched=True)
        group, n_groups = self.batch_size, rows.n_rows // self.batch_size

        def learn_between(first: int, last: int):
            lo, hi = first * group, last * group
            span = rows if first == 0 and last == n_groups else SparseRows(rows.indptr[lo : hi + 1], rows.indices, rows.data)
            self._learn_sparse(span, y[lo:hi], mistakes[lo:hi])
            return bool(mistakes[lo]) if hi - lo == 1 else mistakes[lo:hi]

        learn_watched(self._watch, n_groups, learn_between, self._restart)

    def _restart(self) -> None:
        """After a detected change: ``t`` restarts at most at RESTART_EXAMPLES' worth of steps,
        and the average at the current iterate with the weight those steps give it
        (``U = 0``, ``A = weight · g``: ``(U + A V) / weight = g V``; the weights and the index
        are unchanged)."""
        t0 = restart_step(self._t, self.batch_size)
        if t0 == self._t:
            return
        weight = average_weight_of(t0, self._average_power)
        scalars = self._store.scalars
        if self._averaged:
            self._store.clear_average()
            scalars[A] = weight * scalars[G]
        scalars[AW] = weight
        self._t = t0

    def _learn_span(self, rows: SparseRows, y: np.ndarray, mistakes: np.ndarray) -> None:
        if self.dense:
            rows, y, mistakes = self._learn_dense_head(rows, y, mistakes)
        if rows.n_rows:
            self._learn_sparse(rows, y, mistakes)

    def _learn_sparse(self, rows: SparseRows, y: np.ndarray, mistakes: np.ndarray) -> None:
        n_rows = rows.n_rows
        n_classes = max(len(self._labels), int(y.max()) + 1 if len(y) else 0)
        self._room(n_classes)
        indptr, indices, data = rows.own_arrays()
        y = np.ascontiguousarray(y, np.int64)
        self._store.reserve(self._features.n_columns, n_classes, 2 * len(indices))
        weights = self._example_weights(y, n_classes)
        exact = self._oracle.exact
        xs = _EMPTY_SKETCH if exact else self._row_sketches(indptr, indices, data)
        # the exact oracle runs inside the step: one call for every group; an index answers for
        # the rows up to its next refresh at once (it does not change until then), and is refreshed
        # with the rows that changed every ``index_every`` examples
        start = 0
        while start < n_rows:
            if exact:
                stop = n_rows
            else:
                until_refresh = max(self.index_every - self._since_refresh, 1)
                stop = min(n_rows, start + -(-until_refresh // self.batch_size) * self.batch_size)
            group_indptr = indptr[start : stop + 1]
            candidates = _EMPTY_CANDIDATES
            if not exact:
                candidates = self._oracle.top(self._sketches, xs[start:stop], self._n_indexed, self.n_candidates)
            self._t, self._n_learned, n_changed, self._stamp, renormalized, done = _memoir.learn_groups(
                group_indptr - group_indptr[0], indices[group_indptr[0] : group_indptr[-1]],
                data[group_indptr[0] : group_indptr[-1]], y[start:stop], weights[start:stop], self.batch_size,
                self._n_learned, self._store.arrays(), self._store.counts, self._store.scalars, self._t,
                float(self.lam), 0 if self.penalty == "l2" else 1, bool(self.project), self._eta0(),
                self.step[1] or 0.0, self._averaged, self._average_power, candidates, exact,
                self.fallback == "lowest", self._rng, self._scores, self._mark, self._stamp, self._touched,
                self._changed[self._n_pending :], self._is_changed, self._sketches if not exact else _EMPTY_SKETCH,
                xs[start:stop] if not exact else xs, RENORMALIZE_BELOW[self._averaged],
                mistakes[start:stop] if len(mistakes) else mistakes, self._avg_scores)
            new = self._changed[self._n_pending : self._n_pending + n_changed]
            if exact:
                self._is_changed[new] = False
            else:
                if self.penalty == "l1" and len(new):  # truncation changed whole rows: sketch them again
                    _sketch.sketch_classes(new, len(new), self._store.arrays(), _SKETCH_HASHES, self._sketches)
                self._n_pending += n_changed
                self._needs_rebuild = self._needs_rebuild or renormalized
                self._since_refresh += done
                if self._since_refresh >= self.index_every:
                    self._refresh_index()
            start += done
            if start < stop:  # the next group might not fit in the pool: make room, then go on
                self._store.reserve(0, 0, 0, _store_kernels.needed_room(self._store.arrays(), indptr, indices, start,
                                                                 self.batch_size))

    def _refresh_index(self) -> None:
        """Hand the rows changed since the last refresh to the oracle (all of them after a rescale)."""
        pending = self._changed[: self._n_pending]
        if self._needs_rebuild:
            self._oracle.rebuild(self._sketches, self._n_learned)
        else:
            self._oracle.update(self._sketches, pending.copy(), self._n_learned)
        self._is_changed[pending] = False
        self._n_pending, self._since_refresh, self._needs_rebuild = 0, 0, False
        self._n_indexed = self._n_learned

    def _example_weights(self, y: np.ndarray, n_classes: int) -> np.ndarray:
        """The next ``len(y)`` rows' weights (the caller's, fed in order by :meth:`_learn_groups`),
        times ``(N/K) / count(y)`` from the running counts with ``balance``."""
        given, used = self._weight_feed
        self._weight_feed = (given, used + len(y))
        weights = np.ones(len(y)) if given is None else given[used : used + len(y)].copy()
        return weights * running_balance(self._class_counts, y, n_classes) if self.balance else weights

    def _row_sketches(self, indptr, indices, data) -> np.ndarray:
        out = np.empty((len(indptr) - 1, self.sketch_dim), np.float32)
        _sketch.sketch_rows(indptr, indices, data, _SKETCH_HASHES, out)
        return out

    # -------------------------------------------------------------------- state
    def _export_model(self) -> dict:
        model = {"t": self._t, "n_learned": self._n_learned, "store": self._store.export(), "rng": int(self._rng[0]),
                 "class_counts": self._class_counts[: len(self._labels)].copy(), "dense_seen": self._dense_seen.copy()}
        if not self._oracle.exact:
            model["sketches"] = self._sketches[: len(self._labels)].copy()
            model["pending"] = self._changed[: self._n_pending].copy()
            model["since_refresh"], model["needs_rebuild"] = self._since_refresh, self._needs_rebuild
            model["n_indexed"] = self._n_indexed
            model["index"] = self._oracle.export()
        if self._means is not None:
            model["means"] = self._means.export(len(self._labels))
            model["since_refresh"] = self._since_refresh
            model["recall_counts"] = self._recall_counts.copy()
        if self._watch is not None:
            model["watch"] = self._watch.export()
        return model

    def _restore_model(self, model: dict) -> None:
        self._t = int(model["t"])
        self._n_learned = int(model["n_learned"])
        if "dense" in model["store"]:
            self._store = DenseClassRows.restore(model["store"], self._averaged)
        else:
            self._store = SparseClassRows.restore(model["store"], self._averaged, len(model["class_counts"]))
        self._dense_seen = np.asarray(model.get("dense_seen", np.zeros(3)), np.int64).copy()
        self._rng = np.array([model["rng"]], np.uint64)
        n_classes = len(model["class_counts"])
        self._room(n_classes)
        self._class_counts[:n_classes] = model["class_counts"]
        if not self._oracle.exact:
            self._sketches[:n_classes] = model["sketches"]
            pending = np.asarray(model["pending"], np.int64)
            if model.get("index") is not None:  # LSH: the codes as they were
                self._oracle.restore(model["index"], self._sketches, n_classes)
            else:  # a graph is rebuilt from the sketches, the pending rows' newer ones included
                self._oracle.rebuild(self._sketches, n_classes)
            self._n_pending = len(pending)
            self._changed[: len(pending)] = pending
            self._is_changed[pending] = True
            self._since_refresh, self._needs_rebuild = int(model["since_refresh"]), bool(model["needs_rebuild"])
            self._n_indexed = int(model["n_indexed"])
        if self._means is not None:
            self._means.restore(model["means"])
            self._since_refresh = int(model["since_refresh"])
            self._recall_counts = np.asarray(model["recall_counts"], np.int64).copy()
        if self._watch is not None and "watch" in model:  # absent: a state saved before adapt existed
            self._watch = ChangeWatch.restore(model["watch"])


#: the averaged iterate's power and each penalty's step (eta0, eta_decay) by default: l2's are the
#: defaults protocol's winner across six data sets (bench/results/defaults.md), l1's 002's Table 4
DEFAULT_AVERAGE_POWER = 2.0
DEFAULT_STEP = {"l2": (3.0, 1e-4), "l1": (0.1, 0.02)}

#: hashes per column in the count sketches
_SKETCH_HASHES = 1
