"""ExtremeSVM (002, MEMOIR) against plain NumPy references of its equations, against
MulticlassSVM, and its store, sketches, oracles and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn import ExtremeSVM
from streamlearn.service.checkpoint import CheckpointStore
from streamlearn.kernels import compiled
from streamlearn.memoir import SparseClassRows
from helpers import assert_same_state, auto_intercept_values

_sketch = compiled("memoir_sketch")


def sparse_stream(n: int, n_classes: int, d: int, seed: int, appear_every: int = 60):
    """Rows of 6 features around a class centre; class k first appears at row k·appear_every."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, d))
    X, y = [], []
    for i in range(n):
        k = int(rng.integers(min(n_classes, 2 + i // appear_every)))
        cols = rng.choice(d, 6, replace=False)
        X.append({int(c): float(centres[k, c] + 0.5 * rng.normal()) for c in cols})
        y.append(k)
    first = {}
    for k in y:  # classes numbered in order of first appearance, as the learners number them
        first.setdefault(k, len(first))
    return X, [first[k] for k in y]


def dense(x: dict, d: int) -> np.ndarray:
    out = np.zeros(d)
    for j, v in x.items():
        out[j] = v
    return out


def reference_l2(X, y, d, lam, batch_size=1, project=False, average=False, average_power=0.0, eta0=None, eta_decay=0.0):
    """002 Alg. 1 (= 000 Alg. 3 in MCID form) with dense W and an exact argmax: for each group,
    every r at W^(t-1) (ties to the lowest index, over the classes seen so far), then
    W ← (1 − 1/t) W − 1/(λ t b) Σ (x on r, −x on y) — with ``eta0``, 002's schedule
    η = eta0/(1 + eta_decay t): W ← (1 − λη) W − η/b Σ (...) — the projection, the weighted average."""
    K = max(y) + 1
    W, S, total, t, known = np.zeros((K, d)), np.zeros((K, d)), 0.0, 0, 0
    for start in range(0, len(y) - len(y) % batch_size, batch_size):
        group = range(start, start + batch_size)
        known = max(known, max(y[i] for i in group) + 1)
        updates = []
        for i in group:
            x = dense(X[i], d)
            scores = W[:known] @ x
            scores[y[i]] = -np.inf
            r = int(np.argmax(scores)) if known > 1 else -1
            if r >= 0 and 1.0 + scores[r] - W[y[i]] @ x > 0:
                updates.append((r, y[i], x))
        t += 1
        if eta0 is None:
            if t > 1:
                W *= 1.0 - 1.0 / t
            step = 1.0 / (lam * t * batch_size)
        else:
            step = eta0 / (1.0 + eta_decay * t)
            W *= 1.0 - lam * step
            step /= batch_size
        for r, k, x in updates:
            W[r] -= step * x
            W[k] += step * x
        if project:
            norm = np.linalg.norm(W)
            if norm > 1 / np.sqrt(lam):
                W *= 1 / np.sqrt(lam) / norm
        c = float(t) ** average_power
        S += c * W
        total += c
    return S / total if average else W


def reference_l1(X, y, d, lam, eta0, eta_decay, batch_size=1):
    """002 Alg. 2: the same r, steps η = eta0/(1 + eta_decay t) (no shrink), then Eq. 13 on the
    group's rows R = {y, r}: every weight moves C λ η / |R| toward 0, or becomes 0."""
    K = max(y) + 1
    W, t, known = np.zeros((K, d)), 0, 0
    for start in range(0, len(y) - len(y) % batch_size, batch_size):
        group = range(start, start + batch_size)
        known = max(known, max(y[i] for i in group) + 1)
        updates, rows = [], set()
        for i in group:
            x = dense(X[i], d)
            scores = W[:known] @ x
            scores[y[i]] = -np.inf
            r = int(np.argmax(scores))
            rows |= {r, y[i]}
            if 1.0 + scores[r] - W[y[i]] @ x > 0:
                updates.append((r, y[i], x))
        t += 1
        eta = eta0 / (1 + eta_decay * t)
        for r, k, x in updates:
            W[r] -= eta * x
            W[k] += eta * x
        threshold = known * lam * eta / len(rows)
        for k in rows:
            W[k] = np.sign(W[k]) * np.maximum(np.abs(W[k]) - threshold, 0.0)
    return W


def weights_of(model, d: int) -> np.ndarray:
    """The (K, d) weights a model predicts with, from its scores on the unit vectors."""
    return model.decision_function_many([{j: 1.0} for j in range(d)]).T


@pytest.mark.parametrize("params", [
    {"lam": 1e-3, "average": False}, {"lam": 1e-2, "batch_size": 3, "average": False},
    {"lam": 1e-4, "project": True, "average": False},
    {"lam": 1e-2, "average": True, "average_power": 2.0},
    {"lam": 1e-3, "project": True, "average": True, "average_power": 0.0, "batch_size": 2},
])
def test_l2_with_the_exact_oracle_is_the_dense_pegasos_reference_and_multiclass_svm(params):
    X, y = sparse_stream(900, 8, 30, seed=1)
    model, mcid = ExtremeSVM(**params, eta0="pegasos", fit_intercept=False), streamlearn.MulticlassSVM(**params, fit_intercept=False, adapt=False, bins=None)
    for x, k in zip(X, y):
        model.learn_one(x, k)
        mcid.learn_one(x, k)
    reference = reference_l2(X, y, 30, **params)
    got = weights_of(model, 30)
    assert np.abs(got - reference).max() <= 1e-9 * max(1.0, np.abs(reference).max())
    assert np.abs(got - weights_of(mcid, 30)).max() <= 1e-9 * max(1.0, np.abs(reference).max())
    assert [model.predict_one(x) for x in X[-200:]] == [mcid.predict_one(x) for x in X[-200:]]


@pytest.mark.parametrize("params", [
    {}, {"lam": 1e-3, "eta0": 0.5, "eta_decay": 0.01, "batch_size": 3, "average": False},
    {"lam": 1e-2, "eta0": 2.0, "eta_decay": 1e-3, "project": True, "average": True, "average_power": 3.0},
])
def test_l2_with_002s_step_schedule_is_the_dense_reference(params):
    """The default step (002's schedule at 3 / (1 + 1e-4 t), λ = 1e-6, averaged with power 2)
    and others against the dense reference, classes appearing mid-stream."""
    X, y = sparse_stream(700, 8, 30, seed=6, appear_every=40)
    model = ExtremeSVM(**params, fit_intercept=False)
    for x, k in zip(X, y):
        model.learn_one(x, k)
    eta0, eta_decay = model.step
    settings = {"lam": model.lam, "batch_size": model.batch_size, "project": model.project, "average": model.averaged,
                "average_power": model.average_power_in_use}
    reference = reference_l2(X, y, 30, **settings, eta0=eta0, eta_decay=eta_decay)
    assert np.abs(weights_of(model, 30) - reference).max() <= 1e-9 * max(1.0, np.abs(reference).max())


def test_the_schedule_refuses_a_first_step_that_would_zero_the_weights():
    with pytest.raises(ValueError, match="lam \\* eta0 must be below 1"):
        ExtremeSVM(lam=0.5)
    assert ExtremeSVM(lam=0.5, eta0="pegasos").step == ("pegasos", None)
    with pytest.raises(ValueError, match="eta0='pegasos' is the step of penalty='l2'"):
        ExtremeSVM(penalty="l1", eta0="pegasos")


@pytest.mark.parametrize("penalty", ["l2", "l1"])
def test_the_default_intercept_is_the_reference_with_a_constant_column(penalty):
    """``fit_intercept`` (the default) is the reference's weight of a last column of the rule's
    values (helpers.auto_intercept_values): a model's score of the empty row is its
    ``intercept_value`` times it."""
    X, y = sparse_stream(700, 8, 30, seed=6, appear_every=40)
    params = {"lam": 1e-3, "eta0": 0.5, "eta_decay": 0.01, "batch_size": 2}
    model = ExtremeSVM(penalty=penalty, **params, **({"average": False} if penalty == "l2" else {}))
    model.learn_many(X, y)
    with_constant = [{**x, 30: value} for x, value in zip(X, auto_intercept_values(X))]
    reference = (reference_l2(with_constant, y, 31, **params) if penalty == "l2"
                 else reference_l1(with_constant, y, 31, 1e-3, 0.5, 0.01, 2))
    empty = model.decision_function_many([{}])[0]
    got = np.column_stack([weights_of(model, 30) - empty[:, None], empty / model.intercept_value])
    assert np.abs(got - reference).max() <= 1e-9 * max(1.0, np.abs(reference).max())


@pytest.mark.parametrize("batch_size", [1, 4])
def test_l1_is_the_truncated_reference_and_sparse(batch_size):
    X, y = sparse_stream(700, 6, 25, seed=2)
    model = ExtremeSVM(lam=0.05, penalty="l1", eta0=0.5, eta_decay=0.01, batch_size=batch_size, fit_intercept=False)
    model.learn_many(X, y)
    reference = reference_l1(X, y, 25, 0.05, 0.5, 0.01, batch_size)
    assert np.abs(weights_of(model, 25) - reference).max() <= 1e-9
    assert model.n_weights == np.count_nonzero(reference) < 0.9 * reference.size  # truncation made zeros, reclaimed


def test_the_weight_count_stays_right_when_truncated_weights_come_back_between_calls():
    """A weight truncated to 0 and learned again before a compaction is a weight again: learned in
    calls of 32 rows, n_weights is the reference's non-zero count (it once kept counting it as 0)."""
    X, y = sparse_stream(700, 6, 25, seed=2)
    model = ExtremeSVM(lam=0.05, penalty="l1", eta0=0.5, eta_decay=0.01, batch_size=4, adapt=False, fit_intercept=False)
    for start in range(0, 700, 32):
        model.learn_many(X[start : start + 32], y[start : start + 32])
    reference = reference_l1(X, y, 25, 0.05, 0.5, 0.01, 4)
    assert np.abs(weights_of(model, 25) - reference).max() <= 1e-9
    assert model.n_weights == np.count_nonzero(reference)


@pytest.mark.parametrize("params", [
    {}, {"penalty": "l1", "lam": 1e-3}, {"oracle": "lsh", "fallback": "random", "seed": 3, "index_every": 16},
    {"oracle": "graph", "seed": 4, "index_every": 16, "sketch_dim": 32, "batch_size": 2},
    {"balance": True, "average": True, "average_power": 2.0},
])
def test_learn_many_equals_the_learn_one_loop(params):
    X, y = sparse_stream(400, 10, 40, seed=3, appear_every=20)
    one, many = ExtremeSVM(**params), ExtremeSVM(**params)
    for x, k in zip(X, y):
        one.learn_one(x, k)
    for start in range(0, 400, 70):
        many.learn_many(X[start : start + 70], y[start : start + 70])
    assert_same_state(one.export_state(), many.export_state())
    assert list(one.predict_many(X[:50])) == list(many.predict_many(X[:50]))


def test_the_store_keeps_only_touched_weights_and_grows_with_classes():
    """1,000 classes over 20,000 features: memory follows the non-zeros, never K × d."""
    rng = np.random.default_rng(5)
    model = ExtremeSVM(lam=1e-3)
    for i in range(3000):
        k = int(rng.integers(1000))
        model.learn_one({int(j): 1.0 for j in rng.choice(20_000, 5, replace=False)}, k)
    assert len(model.classes) > 900
    assert model.n_weights <= 2 * 5 * 3000 + len(model.classes) < 1000 * 20_000 // 100  # (the intercept: one per class)
    assert model.class_rows.pool_val.nbytes < 2_000_000


def test_kernels_match_numpy_sketches_codes_and_hamming_ranking():
    rng = np.random.default_rng(6)
    indptr = np.array([0, 3, 5, 9])
    indices = np.array([1, 7, 40, 2, 7, 0, 3, 9, 11])
    data = rng.normal(size=9)
    out = np.empty((3, 16), np.float32)
    _sketch.sketch_rows(indptr, indices, data, 1, out)
    buckets = {}
    for j in range(50):  # each column's (position, sign), read off the sketch of a unit row
        unit = np.empty((1, 16), np.float32)
        _sketch.sketch_rows(np.array([0, 1]), np.array([j]), np.array([1.0]), 1, unit)
        (position,) = np.flatnonzero(unit[0])
        buckets[j] = (position, unit[0, position])
    assert all(abs(sign) == 1.0 for _, sign in buckets.values())
    reference = np.zeros((3, 16))
    for i in range(3):
        for p in range(indptr[i], indptr[i + 1]):
            position, sign = buckets[int(indices[p])]
            reference[i, position] += sign * data[p]
    np.testing.assert_allclose(out, reference, rtol=1e-6)
    vectors = rng.normal(size=(20, 16)).astype(np.float32)
    planes = rng.normal(size=(64, 17))
    codes = np.zeros(20, np.uint64)
    max_norm = 2 * float(np.linalg.norm(vectors, axis=1).max())  # (a Python float, as the library passes)
    _sketch.lsh_codes(vectors, np.arange(20), 20, planes, max_norm, codes)
    augmented = np.hstack([vectors / max_norm, np.sqrt(1 - (np.linalg.norm(vectors, axis=1) / max_norm) ** 2)[:, None]])
    bits = (augmented @ planes.T >= 0)
    assert codes.tolist() == [sum(1 << int(b) for b in np.flatnonzero(row)) for row in bits]
    queries = rng.normal(size=(4, 16)).astype(np.float32)
    top = np.empty((4, 5), np.int64)
    _sketch.lsh_top(queries, planes, codes, 20, top)
    query_bits = (np.hstack([queries / np.linalg.norm(queries, axis=1, keepdims=True), np.zeros((4, 1))]) @ planes.T >= 0)
    for i in range(4):
        distance = (bits != query_bits[i]).sum(axis=1)
        cutoff = np.sort(distance)[4]
        assert set(np.flatnonzero(distance < cutoff)) <= set(top[i]) <= set(np.flatnonzero(distance <= cutoff))


def topic_stream(n: int, n_classes: int, seed: int):
    """Each class draws its 5 features from its own 12 of 600 (a text-like, separable stream)."""
    rng = np.random.default_rng(seed)
    vocabulary = [rng.choice(600, 12, replace=False) for _ in range(n_classes)]
    X, y = [], []
    for _ in range(n):
        k = int(rng.integers(n_classes))
        X.append({int(j): float(rng.uniform(0.5, 1.5)) for j in rng.choice(vocabulary[k], 5, replace=False)})
        y.append(k)
    return X, y


@pytest.mark.parametrize(("oracle", "least_recall", "least_share"), [("graph", 0.7, 0.95), ("lsh", 0.075, 0.2)])
def test_an_approximate_oracle_finds_violators_and_learns(oracle, least_recall, least_share):
    """200 classes, 10 candidates: a random guess finds the violator 5 % of the time. The graph
    over sketches finds most, and learns almost what the exact scan does; SimpleLSH (skewed row
    norms squeeze most codes together) finds fewer, above chance (bench/results/memoir.md)."""
    X, y = topic_stream(6000, 200, seed=7)
    # Pegasos' decaying step: the index's current iterate stays near the averaged one the predictions use
    model = ExtremeSVM(lam=1e-3, oracle=oracle, sketch_dim=256, index_every=32, seed=1, predict_exact=False, eta0="pegasos")
    model.learn_many(X[:5000], y[:5000])
    assert model.violator_recall(X[5000:], y[5000:]) > least_recall
    exact = ExtremeSVM(lam=1e-3, eta0="pegasos")
    exact.learn_many(X[:5000], y[:5000])
    truth = np.array(y[5000:], dtype=object)
    exact_accuracy = np.mean(exact.predict_many(X[5000:]) == truth)
    assert exact_accuracy > 0.95 and np.mean(model.predict_many(X[5000:]) == truth) > least_share * exact_accuracy


@pytest.mark.parametrize("params", [
    {"average": True, "average_power": 2.0}, {"penalty": "l1"}, {"oracle": "lsh", "index_every": 20, "seed": 1},
])
def test_a_checkpoint_restores_the_same_model_and_learning_goes_on_identically(tmp_path, params):
    X, y = sparse_stream(600, 12, 40, seed=8, appear_every=30)
    model = ExtremeSVM(**params)
    model.learn_many(X[:450], y[:450])
    store = CheckpointStore(tmp_path)
    store.save({"learner": model.export_state()})
    restored = streamlearn.learner_from_state(store.load_latest()["learner"])
    assert_same_state(model.export_state(), restored.export_state())
    model.learn_many(X[450:], y[450:])
    restored.learn_many(X[450:], y[450:])
    assert_same_state(model.export_state(), restored.export_state())
    assert list(model.predict_many(X[:100])) == list(restored.predict_many(X[:100]))


def test_a_graph_index_is_rebuilt_on_restore():
    X, y = sparse_stream(500, 12, 40, seed=9, appear_every=20)
    model = ExtremeSVM(oracle="graph", sketch_dim=32, index_every=16, seed=2)
    model.learn_many(X, y)
    restored = streamlearn.learner_from_state(model.export_state())
    assert list(model.predict_many(X[:100])) == list(restored.predict_many(X[:100]))  # predictions: exact scans
    assert restored.violator_recall(X[:200], y[:200]) > 0.5


def test_prequential_scores_every_class_without_a_score_matrix():
    """The runner's test-then-train figures: the exact softmax over every class (the untouched
    ones at score 0), as the dense scores of the same weights give."""
    X, y = sparse_stream(300, 9, 30, seed=10)
    model = ExtremeSVM(lam=1e-2)
    model.learn_many(X[:250], y[:250])
    copy = streamlearn.learner_from_state(model.export_state())
    predicted, p_true = model.prequential(X[250:], y[250:], learn=True)
    scores = copy.decision_function_many(X[250:])
    proba = np.exp(scores - scores.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    columns = copy.class_indices(y[250:])
    np.testing.assert_allclose(p_true, proba[np.arange(50), columns], rtol=1e-9)
    assert predicted.tolist() == scores.argmax(axis=1).tolist()
    copy.learn_many(X[250:], y[250:])
    assert_same_state(model.export_state(), copy.export_state())


def test_bad_parameters_are_refused_clearly():
    for params, message in (({"penalty": "l3"}, "penalty"), ({"oracle": "tree"}, "oracle must be one of"),
                            ({"fallback": "any"}, "fallback"), ({"average": True, "penalty": "l1"}, "average=True is for"),
                            ({"lam": 0}, "lam"), ({"index_every": 0}, "index_every"),
                            ({"oracle": "graph", "oracle_params": {"n_bits": 8}}, "take M, ef_construction, ef; got n_bits"),
                            ({"oracle": "lsh", "oracle_params": {"n_bits": 0}}, "positive integer")):
        with pytest.raises(ValueError, match=message):
            ExtremeSVM(**params)


def test_store_export_restore_round_trip_after_compaction():
    model = ExtremeSVM(penalty="l1", lam=0.2, eta0=0.5)
    X, y = sparse_stream(800, 8, 30, seed=11)
    model.learn_many(X, y)
    store = model.class_rows
    store.compact(force=True)
    again = SparseClassRows.restore(store.export(), averaged=False, n_classes=len(model.classes))
    for key, value in store.export().items():
        assert np.array_equal(np.asarray(value), np.asarray(again.export()[key])), key


def test_many_classes_take_the_sparse_scan_and_still_equal_the_reference():
    """With 300 classes and rows whose columns reach few of them, the exact scan lists the
    classes it reaches instead of scoring every class: the same weights either way."""
    X, y = sparse_stream(1500, 300, 2000, seed=12, appear_every=4)
    model = ExtremeSVM(lam=1e-3, average=True, average_power=2.0, eta0="pegasos", fit_intercept=False)  # its column reaches every class
    model.learn_many(X, y)
    reference = reference_l2(X, y, 2000, 1e-3, average=True, average_power=2.0)
    got = weights_of(model, 2000)
    assert np.abs(got - reference).max() <= 1e-9 * max(1.0, np.abs(reference).max())
    rows = model.feature_space.encode_many(X[-200:], grow=False)
    scans = [model.class_rows.col_len[rows.indices[a:b]].sum() for a, b in zip(rows.indptr[:-1], rows.indptr[1:])]
    assert np.mean(np.array(scans) <= len(model.classes)) > 0.9  # mostly the sparse way


def test_the_graph_oracle_defaults_are_the_benchmark_choice():
    """GraphOracle's M and ef_construction are the ones memoir_bench chose on validation."""
    import inspect
    import json
    import pathlib

    from streamlearn.mips import GraphOracle

    results = pathlib.Path(__file__).resolve().parents[1] / "bench" / "results" / "memoir.json"
    chosen = json.loads(results.read_text())["graph_chosen"]
    defaults = inspect.signature(GraphOracle.__init__).parameters
    assert {key: defaults[key].default for key in chosen} == chosen


def test_the_graph_oracle_without_hnswlib_names_its_extra(monkeypatch):
    """hnswlib is the graph extra's (issue 76: it ships no wheels, so a core install needs no
    compiler); asking for the graph without it says what to install."""
    import sys

    from streamlearn.extras import MissingExtraError

    monkeypatch.setitem(sys.modules, "hnswlib", None)  # the import fails, as on a core install
    with pytest.raises(MissingExtraError, match=r"pip install 'streamlearn\[graph\]'"):
        ExtremeSVM(oracle="graph").learn_one({"a": 1.0}, "x")
