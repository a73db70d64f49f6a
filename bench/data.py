"""Benchmark datasets from ``../shared/datasets`` as CSR train/validation/test splits.

* news20: LIBSVM train file, rows scaled to unit length, 80/20 train/test split
  (seeded permutation); no official test part is available.
* sector: the LIBSVM train/test files as given (rows already unit length).
* mnist: the IDX files, pixels scaled to [0, 1].
* letter: the LIBSVM letter files streamlearn bundles (features scaled to [-1, 1]).
* usps: the ESL USPS digits (pixels in [-1, 1]), train/test files as given.
* usps-rff, letter-rff: random-feature inputs as 004's Table 1 builds them: the set projected on
  its 50 leading principal components (letter has 16 features: kept), 500 random Fourier
  features at the median distance's bandwidth (seed 0), and a constant feature.

The validation split used to choose hyper-parameters is the last 20 % of the (shuffled)
training part, never the test part.
"""

from __future__ import annotations

import io
import os
import pathlib
import tarfile
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

DATASETS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "datasets"
CACHE = pathlib.Path(__file__).resolve().parent / ".cache"
SPLIT_SEED = 20261122


@dataclass
class Split:
    name: str
    X_train: sp.csr_matrix
    y_train: np.ndarray
    X_test: sp.csr_matrix
    y_test: np.ndarray

    @property
    def n_classes(self) -> int:
        return len(np.unique(np.concatenate([self.y_train, self.y_test])))

    def validation(self) -> "Split":
        """Train on the first 80 % of the training part, validate on the last 20 %."""
        cut = int(0.8 * self.X_train.shape[0])
        return Split(f"{self.name}-val", self.X_train[:cut], self.y_train[:cut], self.X_train[cut:], self.y_train[cut:])

    def subsample(self, m: int) -> "Split":
        return Split(f"{self.name}[:{m}]", self.X_train[:m], self.y_train[:m], self.X_test, self.y_test)


def _shuffled(X, y, seed=SPLIT_SEED):
    order = np.random.default_rng(seed).permutation(X.shape[0])
    return X[order], y[order]


def _news20() -> Split:
    # scikit-learn is imported by each reader, not above: over a second in every process that reads only the cache
    from sklearn.datasets import load_svmlight_file
    from sklearn.preprocessing import normalize

    X, y = load_svmlight_file(str(DATASETS / "news20.bz2"), n_features=62061)
    X, y = _shuffled(normalize(X.astype(np.float64)), y.astype(np.int64))
    cut = int(0.8 * X.shape[0])
    return Split("news20", X[:cut], y[:cut], X[cut:], y[cut:])


def _sector() -> Split:
    from sklearn.datasets import load_svmlight_files

    X_tr, y_tr, X_te, y_te = load_svmlight_files(
        [str(DATASETS / "sector.scale.bz2"), str(DATASETS / "sector.t.scale.bz2")], n_features=55197
    )
    X_tr, y_tr = _shuffled(X_tr.astype(np.float64), y_tr.astype(np.int64))
    return Split("sector", X_tr, y_tr, X_te.astype(np.float64).tocsr(), y_te.astype(np.int64))


def _mnist() -> Split:
    with tarfile.open(DATASETS / "mnist-idx.tar.xz", "r:xz") as tar:
        raw = {m.name.split("/")[-1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}

    def images(name):
        return sp.csr_matrix(np.frombuffer(raw[name], np.uint8, offset=16).reshape(-1, 784) / 255.0)

    def labels(name):
        return np.frombuffer(raw[name], np.uint8, offset=8).astype(np.int64)

    X_tr, y_tr = _shuffled(images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte"))
    return Split("mnist", X_tr, y_tr, images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte"))


def _letter() -> Split:
    """The letter files streamlearn bundles (LIBSVM's scaled UCI Letter Recognition)."""
    from sklearn.datasets import load_svmlight_files

    from streamlearn.datasets import path

    X_tr, y_tr, X_te, y_te = load_svmlight_files([str(path("train")), str(path("test"))], n_features=16)
    X_tr, y_tr = _shuffled(X_tr.astype(np.float64), y_tr.astype(np.int64))
    return Split("letter", X_tr, y_tr, X_te.astype(np.float64).tocsr(), y_te.astype(np.int64))


def _usps() -> Split:
    from sklearn.datasets import load_svmlight_files

    X_tr, y_tr, X_te, y_te = load_svmlight_files(
        [str(DATASETS / "usps-esl.train.svm.bz2"), str(DATASETS / "usps-esl.test.svm.bz2")], n_features=256)
    X_tr, y_tr = _shuffled(X_tr.astype(np.float64), y_tr.astype(np.int64))
    return Split("usps", X_tr, y_tr, X_te.astype(np.float64).tocsr(), y_te.astype(np.int64))


def wordnet_part(part: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """WordNet hypernyms (10,087 classes), ``part`` "train" or "test", in file order."""
    from streamlearn.connectors.libsvm import read_libsvm

    X, y = read_libsvm(DATASETS / f"wordnet-hypernym.{part}.bz2")
    return X.astype(np.float64), np.asarray(y, np.int64)


def _wordnet() -> Split:
    (X_tr, y_tr), (X_te, y_te) = wordnet_part("train"), wordnet_part("test")
    width = max(X_tr.shape[1], X_te.shape[1])
    X_tr, X_te = (sp.csr_matrix(X, shape=(X.shape[0], width)) for X in (X_tr, X_te))
    X_tr, y_tr = _shuffled(X_tr, y_tr)
    return Split("wordnet", X_tr, y_tr, X_te, y_te)


RFF_COMPONENTS = 500


def _random_features(base: str) -> Split:
    """Data set ``base`` as random Fourier features (see the module docstring)."""
    from bench.leastsquares_bench import median_distance, pca, rff

    split = load(base)
    X, Xt = split.X_train.toarray(), split.X_test.toarray()
    Z, Zt = pca(X, Xt) if X.shape[1] > 50 else (X, Xt)
    F, Ft = rff(Z, Zt, median_distance(Z), RFF_COMPONENTS, 0)
    return Split(f"{base}-rff", sp.csr_matrix(F), split.y_train, sp.csr_matrix(Ft), split.y_test)


LOADERS = {"news20": _news20, "sector": _sector, "mnist": _mnist, "letter": _letter, "usps": _usps, "wordnet": _wordnet,
           "usps-rff": lambda: _random_features("usps"), "letter-rff": lambda: _random_features("letter")}


def load(name: str) -> Split:
    """Load (and cache as .npz under bench/.cache) one benchmark split."""
    if not DATASETS.is_dir():
        raise SystemExit(f"datasets not found at {DATASETS}: the benchmark needs ../shared/datasets")
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"{name}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as f:
            parts = {k: f[k] for k in f.files}

        def csr(p):
            return sp.csr_matrix((parts[p + "_data"], parts[p + "_indices"], parts[p + "_indptr"]), shape=tuple(parts[p + "_shape"]))

        return Split(name, csr("Xtr"), parts["ytr"], csr("Xte"), parts["yte"])
    split = LOADERS[name]()
    buf = io.BytesIO()
    arrays = {"ytr": split.y_train, "yte": split.y_test}
    for p, X in (("Xtr", split.X_train), ("Xte", split.X_test)):
        arrays.update({p + "_data": X.data, p + "_indices": X.indices, p + "_indptr": X.indptr, p + "_shape": np.array(X.shape)})
    np.savez(buf, **arrays)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(buf.getvalue())
    os.replace(partial, path)  # whole or absent: the tests and the smoke runs load the same sets at once
    return split
