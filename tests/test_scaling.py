"""The online standardiser (streamlearn.scaling): its compiled kernel against a plain NumPy
reference, learn_many against the learn_one loop, and what it does for unscaled data."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn.batches import SparseRows
from streamlearn.scaling import OnlineStandardizer


def reference_standardize(rows: list[dict], learn: bool, history: list[dict], enter_after: bool = False) -> list[dict]:
    """Each row scaled by the mean and standard deviation of every row before it (and itself
    when learning, unless ``enter_after``: it enters once scaled), an absent feature counting as
    0; plain Python and NumPy."""
    out = []
    for row in rows:
        if learn and not enter_after:
            history.append(row)
        n = len(history)
        scaled = {}
        for j, x in row.items():
            if x == 0:  # a zero is an absent feature: it sits at the mean
                scaled[j] = 0.0
                continue
            column = np.array([h.get(j, 0.0) for h in history]) if n else np.zeros(0)
            mean = column.sum() / n if n else 0.0
            variance = (column**2).sum() / n - mean**2 if n else 0.0
            if not n:
                scaled[j] = x
            elif variance > 1e-12 * ((column**2).sum() / n):
                scaled[j] = (x - mean) / np.sqrt(variance)
            else:
                scaled[j] = x - mean
        out.append(scaled)
        if learn and enter_after:
            history.append(row)
    return out


def as_rows(dicts: list[dict]) -> SparseRows:
    indptr = np.cumsum([0] + [len(d) for d in dicts])
    indices = np.array([j for d in dicts for j in d], np.int64)
    data = np.array([v for d in dicts for v in d.values()])
    return SparseRows(indptr, indices, data)


def test_the_kernel_equals_the_numpy_reference():
    rng = np.random.default_rng(3)
    rows = [{int(j): float(rng.normal(5 * j, 1 + j)) * (rng.random() > 0.1) for j in rng.choice(8, rng.integers(1, 6),
                                                                                                     replace=False)}
            for _ in range(120)]
    scaler, history = OnlineStandardizer(), []
    for start in range(0, 120, 17):  # learning batches, then a prediction of the next rows
        batch = rows[start : start + 17]
        got = scaler.learn_transform(as_rows(batch)).data
        want = [v for d in reference_standardize(batch, True, history) for v in d.values()]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        ahead = rows[start + 17 : start + 20]
        if ahead:
            got = scaler.transform(as_rows(ahead)).data
            want = [v for d in reference_standardize(ahead, False, history) for v in d.values()]
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert scaler.n_seen == 120


@pytest.mark.parametrize("name", sorted(streamlearn.LEARNERS))
def test_learn_many_equals_the_learn_one_loop_with_standardize(name):
    cls = streamlearn.LEARNERS[name]
    rng = np.random.default_rng(0)
    X = rng.normal(loc=[100.0, 1.0, 0.01, 50.0], scale=[30.0, 0.2, 0.005, 1.0], size=(90, 4))
    y = (X[:, 0] > 100).astype(int) + (X[:, 1] > 1)
    if not cls()._multiclass:
        y = y > 0
    params = {"standardize": True, **({"refit_every": 20, "window": 40} if "refit_every" in cls()._get_params() else {})}
    one, many = cls(**params), cls(**params)
    for x, target in zip(X, y.tolist()):
        one.learn_one(dict(enumerate(x)), target)
    many.learn_many(X[:50], y[:50])
    many.learn_many(X[50:], y[50:])
    assert one.decision_function_many(X).tobytes() == many.decision_function_many(X).tobytes()


def test_standardize_takes_unscaled_dense_data_from_chance_to_useful():
    """The wine data (13 measurements on scales from 0.1 to 1,600): one pass of MulticlassSVM
    stays near chance on the raw values and learns with standardize=True."""
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_wine(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    accuracy = {}
    for standardize in (False, True):
        model = streamlearn.MulticlassSVM(standardize=standardize)
        hits = 0
        for x, target in zip(X, y.tolist()):
            hits += model.predict_one(dict(enumerate(x))) == target
            model.learn_one(dict(enumerate(x)), target)
        accuracy[standardize] = hits / len(y)
    assert accuracy[False] < 0.5 < 0.85 < accuracy[True]


def test_standardize_must_be_a_bool():
    with pytest.raises(ValueError, match="standardize must be True or False"):
        streamlearn.MulticlassSVM(standardize="yes")
