"""Extreme classification on dense inputs (issue 44): a synthetic embedding stream, ``ExtremeSVM``
as it is (dense rows stored as sparse ones), the exact dense method written with BLAS in NumPy,
and prototypes of an indexed dense path, in one run.

    python -m bench.dense_extreme_bench [--classes 10000] [--dim 128] [--examples 40000] [--out DIR]

The stream (:func:`embedding_stream`): ``--classes`` unit prototypes of ``--dim`` around clustered
centres (20 classes to a cluster: siblings are confusable), class frequencies by a power law, and
classes appearing over time (class ``k`` cannot occur before example ``k · n / (2 K)``, as
``memoir_bench.synthetic_stream``); an example is its class's prototype plus noise of norm ~0.7,
normalized (cosine ~0.8 with its prototype). The first ``--examples`` learn one pass, the next
quarter as many are the test.

Measured, one thread: learning and prediction examples/s, test accuracy, the resident memory the
learning adds, for

* ``ExtremeSVM(oracle="exact")`` (the dense store ``store="auto"`` picks for these rows),
  ``learn_many`` / ``predict_many`` on blocks of 1,000 CSR rows, with ``adapt=False``, and with
  ``store="sparse"`` (the rows stored as sparse ones, as before the dense store); and at its
  defaults (``oracle="auto"``: the mean-example index from 2,000 classes on) and with
  ``oracle="means", adapt=False``, these two also run under ``--no-sparse``;
* **the exact dense scan with BLAS** (:class:`DenseMemoir`): 002's MEMOIR-ℓ2 step with the
  exact oracle, mini-batches of ``--batch`` whose violators all come from one product
  ``X_b W^T`` at the batch's starting weights (002's mini-batch rule), the Pegasos shrink as one
  scale, the average of the iterates kept lazily; prediction one product per block. It is the
  "no index" method a dense ``ExtremeSVM`` must beat by its index;
* the same learner with **candidates from an index** (faiss IVF-Flat, the index
  ``bench/ann_bench.py`` chose): the top 10 of the index, re-scored exactly, are the violator's
  candidates, and prediction re-ranks them under the average. Two indexes: over the current
  class rows (:class:`IvfCandidates`, 002's design), and over each class's mean example
  (:class:`CentroidCandidates`). Prototypes, to measure which design pays before one is built
  into ``ExtremeSVM``; the candidates' recall on the test rows is reported, of the true best
  current row and of the example's own class.

Writes ``dense-extreme.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import pathlib
import resource
import time

import numpy as np

from .common import accuracy, machine, pyplot, save_results, vw_oaa

RESULTS_NAME = "dense-extreme"
SEED = 44


def embedding_stream(n: int, n_classes: int, dim: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit rows (float32) and their classes (module docstring)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n_classes // 20), dim))
    prototypes = centres[np.arange(n_classes) // 20 % len(centres)] + 0.6 * rng.standard_normal((n_classes, dim))
    prototypes /= np.linalg.norm(prototypes, axis=1, keepdims=True)
    cumulative = np.cumsum(1.0 / np.arange(1, n_classes + 1) ** 0.8)
    available = np.maximum(2, np.minimum(n_classes, (2 * n_classes * (np.arange(n) + 1)) // n))
    labels = np.searchsorted(cumulative, rng.random(n) * cumulative[available - 1], side="right")
    X = prototypes[labels] + (0.7 / np.sqrt(dim)) * rng.standard_normal((n, dim))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X.astype(np.float32), labels.astype(np.int64)


class IvfCandidates:
    """faiss IVF-Flat over the class rows (the index ``bench/ann_bench.py`` chose), trained on the
    rows seen once ``train_at`` classes have appeared, with one list per ``ROWS_PER_LIST`` of them
    (k-means wants ~39 points a centroid), and trained again on all the rows each time the classes
    seen double; rows of classes that appear in between are added, rows a step changed are
    re-indexed in place (``update_vectors``) after each mini-batch."""

    ROWS_PER_LIST = 39

    def __init__(self, dim: int, nprobe: int = 8, k: int = 10, train_at: int = 2_000):
        import faiss

        faiss.omp_set_num_threads(1)
        self.faiss, self.dim, self.nprobe, self.k, self.train_at = faiss, dim, nprobe, k, train_at
        self.index, self.n_indexed, self.n_trained, self.trainings = None, 0, 0, 0

    @property
    def ready(self) -> bool:
        return self.index is not None

    def _vectors(self, W: np.ndarray, ids) -> np.ndarray:
        """What the index holds for the classes ``ids``: their rows."""
        return np.ascontiguousarray(W[ids])

    def _train(self, W: np.ndarray, n_seen: int) -> None:
        quantizer = self.faiss.IndexFlatIP(self.dim)
        n_lists = max(8, n_seen // self.ROWS_PER_LIST)
        self.index = self.faiss.IndexIVFFlat(quantizer, self.dim, n_lists, self.faiss.METRIC_INNER_PRODUCT)
        self.index.cp.niter = 10  # k-means to 10 iterations, not 25: a list's centroid only routes queries
        self.index.train(self._vectors(W, np.arange(n_seen)))
        self.index.nprobe = self.nprobe
        self.index.make_direct_map(True)
        self.n_indexed, self.n_trained, self.trainings = 0, n_seen, self.trainings + 1

    def follow(self, W: np.ndarray, n_seen: int, changed: np.ndarray, xb: np.ndarray, yb: np.ndarray) -> None:
        """Take the rows ``changed`` by the mini-batch ``xb, yb`` and every class seen since the last call."""
        if n_seen >= max(self.train_at, 2 * self.n_trained):
            self._train(W, n_seen)
        if self.index is None:
            return
        old = changed[changed < self.n_indexed]
        if len(old):
            self.index.update_vectors(old.astype(np.int64), self._vectors(W, old))
        if n_seen > self.n_indexed:
            self.index.add(self._vectors(W, np.arange(self.n_indexed, n_seen)))
            self.n_indexed = n_seen

    def search(self, xb: np.ndarray) -> np.ndarray:
        return self.index.search(xb, self.k)[1]


class CentroidCandidates(IvfCandidates):
    """The same IVF-Flat, over each class's **mean example** (unit length) instead of its row: a
    class's examples lie around it, so a query's lists hold its own class and its confusable
    neighbours, whatever the rows' norms. A mini-batch moves only its own labels' means."""

    def __init__(self, dim: int, n_classes: int, **kwargs):
        super().__init__(dim, **kwargs)
        self.sums = np.zeros((n_classes, dim), np.float32)

    def _vectors(self, W: np.ndarray, ids) -> np.ndarray:
        sums = self.sums[ids]
        return np.ascontiguousarray(sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-30), np.float32)

    def follow(self, W: np.ndarray, n_seen: int, changed: np.ndarray, xb: np.ndarray, yb: np.ndarray) -> None:
        np.add.at(self.sums, yb, xb)
        super().follow(W, n_seen, np.unique(yb), xb, yb)


class DenseMemoir:
    """One pass of MEMOIR-ℓ2 (002 Alg. 1; ExtremeSVM's default step ``eta0 / (1 + eta_decay t)``,
    ``t`` counting examples) on dense rows, in mini-batches whose violators ``r = argmax_{k≠y}``
    all come at the batch's starting weights (002's mini-batch rule): from one BLAS product
    ``X_b W^T`` (the exact oracle), or from an index's candidates re-scored exactly. A violated
    margin steps ``W_y += ηx``, ``W_r −= ηx`` after the shrink ``(1 − λη)``, kept as one scale.
    The t²-weighted average of the iterates is kept lazily (a row's sum is brought up to date
    only when it changes), so a step costs its rows, not ``K × d``. Classes are numbered by
    first appearance."""

    def __init__(self, n_classes: int, dim: int, lam: float = 1e-6, eta0: float = 3.0, eta_decay: float = 1e-4,
                 index: IvfCandidates | None = None):
        self.W = np.zeros((n_classes, dim), np.float32)
        self.total = np.zeros((n_classes, dim), np.float32)  # a row's weighted sum up to its last change
        self.mark = np.zeros(n_classes)  # the weights' cumulative sum at that change
        self.cumulative, self.weight_sum, self.scale, self.t, self.n_seen = 0.0, 0.0, 1.0, 0, 0
        self.lam, self.eta0, self.eta_decay, self.index = lam, eta0, eta_decay, index

    def _violators(self, xb, yb) -> tuple[np.ndarray, np.ndarray]:
        rows = np.arange(len(yb))
        own = np.einsum("bd,bd->b", self.W[yb], xb)
        if self.index is not None and self.index.ready:
            candidates = self.index.search(xb)
            scores = np.einsum("bkd,bd->bk", self.W[np.maximum(candidates, 0)], xb)
            scores[(candidates == yb[:, None]) | (candidates < 0)] = -np.inf
            r = candidates[rows, np.argmax(scores, axis=1)]
            best = scores[rows, np.argmax(scores, axis=1)]
        else:
            scores = xb @ self.W[:self.n_seen].T
            scores[rows, yb] = -np.inf
            r = np.argmax(scores, axis=1)
            best = scores[rows, r]
        return r, self.scale * best + 1.0 > self.scale * own

    def learn(self, xb: np.ndarray, yb: np.ndarray) -> None:
        self.n_seen = max(self.n_seen, int(yb.max()) + 1)
        self.t += len(yb)
        eta = self.eta0 / (1.0 + self.eta_decay * self.t)
        r, violated = self._violators(xb, yb)
        changed = np.unique(np.concatenate([yb[violated], r[violated]]))
        self.total[changed] += (self.cumulative - self.mark[changed])[:, None].astype(np.float32) * self.W[changed]
        self.mark[changed] = self.cumulative
        self.scale *= 1.0 - self.lam * eta
        step = (eta / self.scale) * xb[violated]  # each example's own step, summed (a mean over the batch learns less)
        np.add.at(self.W, yb[violated], step)
        np.add.at(self.W, r[violated], -step)
        self.cumulative += self.t * self.t * self.scale  # this iterate's weight, t² (ExtremeSVM's default power)
        self.weight_sum += self.t * self.t
        if self.index is not None:
            self.index.follow(self.W, self.n_seen, changed, xb, yb)

    def averaged(self, ids=slice(None)) -> np.ndarray:
        mark = self.mark[ids]
        return (self.total[ids] + (self.cumulative - mark)[..., None].astype(np.float32) * self.W[ids]) / self.weight_sum

    def predict(self, xb: np.ndarray) -> np.ndarray:
        """Exact: one product with the averaged rows; with an index: the current rows' candidates
        re-ranked under the average."""
        if self.index is None or not self.index.ready:
            return np.argmax(xb @ self.averaged(slice(0, self.n_seen)).T, axis=1)
        candidates = self.index.search(xb)
        scores = np.einsum("bkd,bd->bk", self.averaged(np.maximum(candidates, 0)), xb)
        scores[candidates < 0] = -np.inf
        return candidates[np.arange(len(xb)), np.argmax(scores, axis=1)]


class DenseSoftmax:
    """The "no index" peer: multinomial logistic regression, one pass of mini-batch SGD (step
    ``lr`` on the batch's mean gradient), every score and the whole gradient of the seen classes'
    rows ``W`` (float32) by BLAS products; classes numbered by first appearance."""

    def __init__(self, n_classes: int, dim: int, lr: float):
        self.W, self.lr, self.n_seen = np.zeros((n_classes, dim), np.float32), lr, 0

    def learn(self, xb: np.ndarray, yb: np.ndarray) -> None:
        self.n_seen = max(self.n_seen, int(yb.max()) + 1)
        W = self.W[: self.n_seen]
        scores = xb @ W.T
        scores -= scores.max(axis=1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(yb)), yb] -= 1.0
        W -= (self.lr / len(yb)) * (p.T @ xb)

    def predict(self, xb: np.ndarray) -> np.ndarray:
        return np.argmax(xb @ self.W[: self.n_seen].T, axis=1)


def _per_second(n: int, seconds: float) -> float:
    """``n / seconds``; NaN when the process clock did not move (a smoke run's few rows)."""
    return n / seconds if seconds > 0 else float("nan")


def _rss_mib() -> float:
    """The process's resident memory now (a model's and its index's arrays are large, so mmap'd:
    freed ones leave it, and the growth over one run is what that run holds)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def by_appearance(y: np.ndarray, *more: np.ndarray) -> list[np.ndarray]:
    """Classes renumbered in order of first appearance in ``y`` (as streamlearn's learners number
    them); a class of ``more`` never seen in ``y`` becomes -1."""
    first = {}
    for label in y.tolist():
        first.setdefault(label, len(first))
    return [np.array([first.get(v, -1) for v in a.tolist()], np.int64) for a in (y, *more)]


def _candidate_recalls(model: DenseMemoir, index: IvfCandidates, Xt: np.ndarray, yt: np.ndarray) -> dict:
    """On the test rows: how often the candidates hold the true best current row (the exact
    oracle's answer), and how often they hold the example's own class."""
    found_best, found_label = 0, 0
    for lo in range(0, len(yt), 1000):  # blocks: 50,000 x 50,000 scores at once would be 10 GB
        xb = Xt[lo:lo + 1000]
        candidates = index.search(xb)
        best = np.argmax(xb @ model.W[:model.n_seen].T, axis=1)
        found_best += int((candidates == best[:, None]).any(axis=1).sum())
        found_label += int((candidates == yt[lo:lo + 1000, None]).any(axis=1).sum())
    return {"recall": found_best / len(yt), "label_recall": found_label / len(yt)}


def run_dense(X, y, Xt, yt, n_classes: int, batch: int, index: IvfCandidates | None, softmax_lr: float | None = None) -> dict:
    """:class:`DenseMemoir` (with ``index``), or :class:`DenseSoftmax` given ``softmax_lr``."""
    y, yt = by_appearance(y, yt)
    before = _rss_mib()
    if softmax_lr is None:
        model = DenseMemoir(n_classes, X.shape[1], index=index)
    else:
        model = DenseSoftmax(n_classes, X.shape[1], softmax_lr)
    started = time.process_time()
    for lo in range(0, len(y), batch):
        model.learn(X[lo:lo + batch], y[lo:lo + batch])
    learn = time.process_time() - started
    held = _rss_mib() - before
    started = time.process_time()
    predicted = np.concatenate([model.predict(Xt[lo:lo + 1000]) for lo in range(0, len(yt), 1000)])
    predict = time.process_time() - started
    row = {"learn_per_s": _per_second(len(y), learn), "predict_per_s": _per_second(len(yt), predict), "accuracy": accuracy(predicted, yt),
           "rss_growth_mib": held}
    if index is not None and index.ready:
        row.update(_candidate_recalls(model, index, Xt, yt), index_trainings=index.trainings)
    return row


def run_vw(X, y, Xt, yt, reduction: str) -> dict:
    """Vowpal Wabbit (``--oaa`` / ``--log_multi``, one pass, its defaults) on the same rows."""
    import scipy.sparse as sp

    got = vw_oaa(sp.csr_matrix(X), y, sp.csr_matrix(Xt), yt, reduction=reduction)
    return {"learn_per_s": _per_second(len(y), got["seconds"]), "predict_per_s": _per_second(len(yt), got["test_seconds"]),
            "accuracy": got["accuracy"], "rss_growth_mib": float("nan")}


def run_oplt(X, y, Xt, yt) -> dict:
    """napkinXC's online PLT (``Model(model="oplt")``), one pass, one thread, its defaults."""
    import tempfile

    from napkinxc.models import Model

    with tempfile.TemporaryDirectory() as work:
        model = Model(output=work, model="oplt", threads=1, seed=0)
        before = _rss_mib()
        started = time.process_time()
        model.fit(X.astype(np.float64), [[int(k)] for k in y])
        learn = time.process_time() - started
        held = _rss_mib() - before
        started = time.process_time()
        predicted = np.array([p[0] if p else -1 for p in model.predict(Xt.astype(np.float64), top_k=1)])
        predict = time.process_time() - started
    return {"learn_per_s": _per_second(len(y), learn), "predict_per_s": _per_second(len(yt), predict),
            "accuracy": accuracy(predicted, yt), "rss_growth_mib": held}


def run_extreme(X, y, Xt, yt, params: dict) -> dict:
    """One pass of ``ExtremeSVM(**params)`` fed the float32 arrays as they are, as the NumPy peers are."""
    import streamlearn

    warm = streamlearn.ExtremeSVM(**params)  # the kernels are compiled before the clock starts: both
    warm.learn_many(X[:50], y[:50])          # the float64 rows' and, past an index's training, the float32 ones'
    warm.learn_many(*_index_warm_up(X.shape[1]))
    warm.predict_many(Xt[:10])
    model = streamlearn.ExtremeSVM(**params)
    before = _rss_mib()
    started = time.process_time()
    for lo in range(0, len(y), 1000):
        model.learn_many(X[lo:lo + 1000], y[lo:lo + 1000])
    learn = time.process_time() - started
    held = _rss_mib() - before
    started = time.process_time()
    predicted = np.concatenate([model.predict_many(Xt[lo:lo + 1000]) for lo in range(0, len(yt), 1000)])
    predict = time.process_time() - started
    row = {"learn_per_s": _per_second(len(y), learn), "predict_per_s": _per_second(len(yt), predict), "accuracy": accuracy(predicted, yt),
           "rss_growth_mib": held, "classes_seen": len(model.classes)}
    if params.get("oracle", "auto") != "exact":  # the most violating class among the index's candidates, on test rows
        row["recall"] = model.violator_recall(Xt[:2000], yt[:2000])
    row.update(checkpoint_costs(model))
    return row


def fresh_process_memory(n_classes: int, dim: int, examples: int, params: dict) -> float:
    """:func:`run_extreme`'s resident growth in a fresh interpreter (the stream made again there):
    in this process the methods run before leave glibc's mmap threshold raised by their freed
    arrays, so a later model's growing arrays come from the heap, whose freed holes stay resident."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_fresh_growth, (n_classes, dim, examples, params))


def _fresh_growth(n_classes: int, dim: int, examples: int, params: dict) -> float:
    X, y = embedding_stream(examples + examples // 4, n_classes, dim)
    return run_extreme(X[:examples], y[:examples], X[examples:], y[examples:], params)["rss_growth_mib"]


def _index_warm_up(dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows enough for ``oracle="auto"`` to train its index (300 classes × ``dim`` columns, past
    its gate at ``dim`` ≥ 110) and learn through it."""
    rng = np.random.default_rng(0)
    return rng.standard_normal((900, dim)).astype(np.float32), np.arange(900) % 300


def checkpoint_costs(model) -> dict:
    """What a checkpoint of ``model`` costs (the service's own store: msgpack, checksummed, fsync'd)
    and what the restore after a ``kill -9`` costs: the index is restored from its bytes, not rebuilt."""
    import tempfile

    import streamlearn
    from streamlearn.service.checkpoint import CheckpointStore

    with tempfile.TemporaryDirectory() as work:
        store = CheckpointStore(work)
        started = time.perf_counter()
        path = store.save({"learner": model.export_state()})
        saved = time.perf_counter() - started
        started = time.perf_counter()
        streamlearn.learner_from_state(store.load_latest()["learner"])
        restored = time.perf_counter() - started
        size = pathlib.Path(path).stat().st_size
    return {"checkpoint_s": saved, "restore_s": restored, "checkpoint_mib": size / 2**20}


CANDIDATES = {"ExtremeSVM(oracle='exact', store='sparse') (dense rows stored as sparse)": {"oracle": "exact", "store": "sparse"},
              "ExtremeSVM(oracle='exact') (its dense store)": {"oracle": "exact"},
              "ExtremeSVM(oracle='exact', adapt=False) (its dense store)": {"oracle": "exact", "adapt": False}}
INDEXED = {"ExtremeSVM() (defaults: oracle='auto', its dense store)": {},
           "ExtremeSVM(oracle='means', adapt=False) (its dense store)": {"oracle": "means", "adapt": False}}
DENSE = "exact dense scan, BLAS per mini-batch (NumPy)"
PEERS = {"softmax": "softmax, one pass of mini-batch SGD with BLAS (NumPy; step {lr:g}, the best of 1-4,096 on the 10^4 run's test rows)",
         "oplt": "napkinXC online PLT (one thread)", "vw_log_multi": "Vowpal Wabbit --log_multi (one pass)",
         "vw_oaa": "Vowpal Wabbit --oaa (one pass)"}
IVF = "IVF over the rows (nprobe {}), candidates re-scored exactly (NumPy + faiss prototype)"
CENTROIDS = "IVF over the classes' mean examples (nprobe {}), candidates re-scored exactly (NumPy + faiss prototype)"


def run_peer(name: str, X, y, Xt, yt, n_classes: int, batch: int, softmax_lr: float) -> dict:
    if name == "softmax":
        return run_dense(X, y, Xt, yt, n_classes, batch, None, softmax_lr=softmax_lr)
    if name == "oplt":
        return run_oplt(X, y, Xt, yt)
    return run_vw(X, y, Xt, yt, "--" + name.removeprefix("vw_"))


def run(n_classes: int, dim: int, examples: int, batch: int, sparse: bool = True, nprobes=(8,), centroid_nprobes=(2,),
        peers=(), softmax_lr: float = 1024.0, repeats: int = 1) -> dict:
    X, y = embedding_stream(examples + examples // 4, n_classes, dim)
    X, y, Xt, yt = X[:examples], y[:examples], X[examples:], y[examples:]
    out = {"classes": n_classes, "dim": dim, "examples": examples, "test": len(yt), "batch": batch,
           "classes_seen": int(len(np.unique(y))), "dense_weights_mib": n_classes * dim * 4 / 2**20, "rows": {}}
    out["rows"][DENSE] = run_dense(X, y, Xt, yt, n_classes, batch, None)
    for peer in peers:
        out["rows"][PEERS[peer].format(lr=softmax_lr)] = run_peer(peer, X, y, Xt, yt, n_classes, batch, softmax_lr)
    train_at = min(2_000, n_classes // 4)
    for nprobe in nprobes:  # the lists searched: recall against speed
        index = IvfCandidates(dim, nprobe=nprobe, train_at=train_at)
        out["rows"][IVF.format(nprobe)] = run_dense(X, y, Xt, yt, n_classes, batch, index)
    for nprobe in centroid_nprobes:
        index = CentroidCandidates(dim, n_classes, nprobe=nprobe, train_at=train_at)
        out["rows"][CENTROIDS.format(nprobe)] = run_dense(X, y, Xt, yt, n_classes, batch, index)
    for name, params in {**(CANDIDATES if sparse else {}), **INDEXED}.items():
        out["rows"][name] = run_extreme(X, y, Xt, yt, params)
    for name, params in INDEXED.items():
        out["rows"][name]["rss_fresh_mib"] = fresh_process_memory(n_classes, dim, examples, params)
    for name, row in out["rows"].items():
        print(name, row, flush=True)
    if repeats > 1:
        out["interleaved"] = interleaved(X, y, Xt, yt, n_classes, batch, repeats)
    return out


def interleaved(X, y, Xt, yt, n_classes: int, batch: int, repeats: int) -> dict:
    """The exact dense scan and ``ExtremeSVM()``, learned and tested in turn ``repeats`` times: the
    ratios of each pair, whose median holds on a host whose speed drifts between two runs."""
    runs = {"exact": [], "extreme": []}
    for _ in range(repeats):
        runs["exact"].append(run_dense(X, y, Xt, yt, n_classes, batch, None))
        runs["extreme"].append(run_extreme(X, y, Xt, yt, {}))
        print("interleaved", {k: (v[-1]["learn_per_s"], v[-1]["predict_per_s"]) for k, v in runs.items()}, flush=True)
    for key in ("learn_per_s", "predict_per_s"):
        runs[key.removesuffix("_per_s") + "_ratio"] = [e[key] / d[key] for e, d in zip(runs["extreme"], runs["exact"])]
    return runs


def _memory(row: dict) -> str:
    """The memory cell: this run's growth, and a fresh process's when measured."""
    if np.isnan(row["rss_growth_mib"]):
        return "—"
    fresh = f" / {row['rss_fresh_mib']:,.0f}" if "rss_fresh_mib" in row else ""
    return f"{row['rss_growth_mib']:,.0f}{fresh}"


def report(results: dict) -> str:
    m = results["machine"]
    lines = ["# Extreme classification on dense inputs (issue 44)", "",
             f"Commit {m['commit'][:10]}; `{m['command']}`. Synthetic embedding stream: {results['classes']:,} "
             f"classes ({results['classes_seen']:,} seen in the pass), d = {results['dim']}, {results['examples']:,} "
             f"examples learned in one pass, {results['test']:,} tested; CPU time, one thread. Dense weights "
             f"K × d float32: {results['dense_weights_mib']:.0f} MiB.", "",
             "Recall, on the test rows: the candidates hold the true best current row (the exact oracle's "
             "answer) / the example's own class. Memory: the growth of the resident set while the model learns "
             "(the rows, their average, the index), in this run's process / in a fresh process (the same pass; "
             "here the methods run before leave glibc's mmap threshold raised, and a later model's growing arrays "
             "leave holes in the heap).", "",
             "| method | learn ex/s | predict ex/s | test accuracy | recall of the best row | recall of the label | memory MiB | "
             "checkpoint s / restore s / MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in results["rows"].items():
        recalls = [f"{r[key]:.3f}" if key in r else "" for key in ("recall", "label_recall")]
        lines.append(f"| {name} | {r['learn_per_s']:,.0f} | {r['predict_per_s']:,.0f} | {100 * r['accuracy']:.2f} % | "
                     f"{' | '.join(recalls)} | {_memory(r)} | "
                     + (f"{r['checkpoint_s']:.2f} / {r['restore_s']:.2f} / {r['checkpoint_mib']:,.0f} |" if "checkpoint_s" in r else " |"))
    if "interleaved" in results:
        runs = results["interleaved"]
        lines += ["", f"Interleaved: the exact dense scan and `ExtremeSVM()` learned and tested in turn, "
                      f"{len(runs['exact'])} times (`--repeats`); `ExtremeSVM()` / exact scan, median (range):", "",
                  "| | learn ex/s, exact / ExtremeSVM() (medians) | predict ex/s (medians) | learn ratio | predict ratio |",
                  "|---|---:|---:|---:|---:|",
                  "| " + " | ".join([f"{len(runs['exact'])} pairs"] + [
                      f"{np.median([r[key] for r in runs['exact']]):,.0f} / {np.median([r[key] for r in runs['extreme']]):,.0f}"
                      for key in ("learn_per_s", "predict_per_s")] + [
                      f"**{np.median(runs[key]):.2f}×** ({min(runs[key]):.2f}–{max(runs[key]):.2f})"
                      for key in ("learn_ratio", "predict_ratio")]) + " |"]
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 5))
    names = list(results["rows"])
    for i, key in enumerate(("learn_per_s", "predict_per_s")):
        ax.bar(np.arange(len(names)) + 0.4 * i, [results["rows"][n][key] for n in names], 0.4, label=key.replace("_per_s", ""))
    ax.set_xticks(np.arange(len(names)) + 0.2, [n.split(", candidates")[0].split(" (its")[0].split(" (dense")[0] for n in names], fontsize=6,
                  rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("examples / s (CPU time)")
    ax.set_title(f"{results['classes']:,} classes, d = {results['dim']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--examples", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=64, help="the dense method's mini-batch")
    parser.add_argument("--nprobe", default="8,32,128", help="the IVF prototype's lists searched, one run each ('' for no run)")
    parser.add_argument("--centroid-nprobe", default="2,8", help="the mean-example index's lists searched, one run each ('' for no run)")
    parser.add_argument("--no-sparse", action="store_true", help="leave the exact ExtremeSVM rows out (hours at 10^5 classes: every example scans every class)")
    parser.add_argument("--peers", default=",".join(PEERS), help=f"the peers run, of {', '.join(PEERS)} ('' for none)")
    parser.add_argument("--softmax-lr", type=float, default=1024.0, help="the softmax peer's step")
    parser.add_argument("--repeats", type=int, default=1, help="then the exact scan and ExtremeSVM() this many times in turn (ratios' medians)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 500 classes, 3,000 examples")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    if args.quick:
        args.classes, args.examples, args.nprobe, args.centroid_nprobe = 500, 3_000, "8", "2"
    results = {"machine": machine(), **run(args.classes, args.dim, args.examples, args.batch, not args.no_sparse,
                                                    [int(n) for n in args.nprobe.split(",") if n],
                                                    [int(n) for n in args.centroid_nprobe.split(",") if n],
                                                    [p for p in args.peers.split(",") if p], args.softmax_lr, args.repeats)}
    print(save_results(args.out, RESULTS_NAME, results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
