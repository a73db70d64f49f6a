"""ExtremeSVM(oracle="means"): candidates from an index over the classes' mean examples (dense rows).
The candidate step against the exact one, learning and prediction through the index,
``learn_many`` against the ``learn_one`` loop, checkpoints, recall, refusals."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn import ExtremeSVM
from streamlearn.base import INTERCEPT_VALUE
from streamlearn.kernels import compiled
from streamlearn.service.checkpoint import CheckpointStore
from helpers import assert_same_state

_dense = compiled("memoir_dense")


def clustered_stream(n: int, n_classes: int, d: int, seed: int):
    """Unit rows around class prototypes in clusters of 10 (confusable siblings); classes by first appearance."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes // 10 + 1, d))
    prototypes = centres[np.arange(n_classes) // 10] + 0.6 * rng.normal(size=(n_classes, d))
    y = rng.integers(n_classes, size=n)
    X = prototypes[y] + 0.3 * rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    first = {}
    for k in y.tolist():
        first.setdefault(k, len(first))
    return X, np.array([first[k] for k in y.tolist()])


#: the index trained from 40 classes on (not 2,000), so that a test's stream uses it
SMALL = {"oracle": "means", "oracle_params": {"train_at": 40}}


def _learn(X, y, candidates, n_classes, d, lowest=True):
    """The dense kernel over ``X`` from zero weights (averaged, 002's default step); the weights."""
    n = len(y)
    indptr, indices, data = np.arange(0, n * d + 1, d), np.tile(np.arange(d), n), X.ravel().copy()
    V, U = np.zeros((n_classes, d)), np.zeros((n_classes, d))
    scalars = np.array([1.0, 0.0, 0.0, 0.0])
    _dense.learn_groups(indptr, indices, data, y, np.ones(n), 1, 0, V, U, scalars, 0, 1e-6, False, 3.0, 1e-4, True, 2.0,
                        lowest, np.array([7], np.uint64), np.zeros(n_classes), np.zeros(n_classes), 1e-4,
                        np.zeros(n, np.bool_), candidates, np.zeros((0, 0)), np.zeros(0, np.bool_))
    return V, U, scalars


@pytest.mark.parametrize("lowest", [True, False])
def test_candidates_listing_every_class_are_the_exact_step_bit_for_bit(lowest):
    X, y = clustered_stream(300, 12, 6, seed=1)
    every = np.tile(np.arange(12), (300, 1))
    exact, listed = _learn(X, y, np.zeros((0, 0), np.int64), 12, 6, lowest), _learn(X, y, every, 12, 6, lowest)
    for a, b in zip(exact, listed):
        assert a.tobytes() == b.tobytes()
    none_listed = _learn(X, y, np.full((300, 3), -1), 12, 6)[0]  # only the lowest class: another model
    assert none_listed.tobytes() != exact[0].tobytes()


def test_learning_and_prediction_go_through_the_index():
    X, y = clustered_stream(6000, 200, 16, seed=2)
    model = ExtremeSVM(**SMALL, index_every=64)
    model.learn_many(X[:5000], y[:5000])
    assert model.dense and len(model.classes) == 200
    accuracy = np.mean(model.predict_many(X[5000:]).astype(np.int64) == y[5000:])
    exact = ExtremeSVM()
    exact.learn_many(X[:5000], y[:5000])
    exact_accuracy = np.mean(exact.predict_many(X[5000:]).astype(np.int64) == y[5000:])
    assert accuracy > 0.5 and accuracy > exact_accuracy - 0.05, (accuracy, exact_accuracy)
    # predictions through the candidates differ from an exact scan of the same model somewhere
    scanned = ExtremeSVM(**SMALL, index_every=64, predict_exact=True)
    scanned.learn_many(X[:5000], y[:5000])
    assert list(scanned.predict_many(X[5000:])) != list(model.predict_many(X[5000:]))
    assert 0.0 <= model.violator_recall(X[5000:5500], y[5000:5500]) <= 1.0


def test_learn_many_equals_the_learn_one_loop_and_a_checkpoint_goes_on_identically(tmp_path):
    X, y = clustered_stream(900, 60, 8, seed=3)
    one, many = ExtremeSVM(**SMALL, index_every=50), ExtremeSVM(**SMALL, index_every=50)
    for x, k in zip(X[:600], y[:600].tolist()):
        one.learn_one(dict(enumerate(x.tolist())), k)
    for start in range(0, 600, 70):
        many.learn_many(X[start : min(start + 70, 600)], y[start : min(start + 70, 600)])
    assert_same_state(one.export_state(), many.export_state())
    assert "index" in one.export_state()["model"]["means"]  # trained: 60 classes > 40
    expected = np.zeros((60, 9))  # the intercept's column first (the learner registers it before any feature)
    np.add.at(expected, y[:600], np.hstack([np.full((600, 1), INTERCEPT_VALUE), X[:600]]))  # each class's examples, summed
    np.testing.assert_allclose(many.export_state()["model"]["means"]["sums"], expected, rtol=1e-12, atol=1e-12)
    store = CheckpointStore(tmp_path)
    store.save({"learner": many.export_state()})
    restored = streamlearn.learner_from_state(store.load_latest()["learner"])
    for model in (many, restored):
        model.learn_many(X[600:], y[600:])
    assert_same_state(many.export_state(), restored.export_state())
    assert list(many.predict_many(X[:200])) == list(restored.predict_many(X[:200]))
    assert 0.0 <= many.index_recall <= 1.0 and many.index_recall == restored.index_recall


def test_the_sums_grow_by_their_classes_not_by_each_new_column():
    """Rows double only when the classes outgrow them (columns arriving batch after batch, as a
    sparse stream's first rows bring them, once doubled the rows each time: 46 GiB on news20)."""
    from streamlearn.memoir.means import MeanExampleIndex

    means = MeanExampleIndex()
    for width in range(1, 60):
        means.reserve(5, width)
    assert means.sums.shape == (5, 59) and len(means.changed) == 5
    means.reserve(6, 59)
    assert means.sums.shape == (10, 59) and len(means.changed) == 10


def _without_means(state: dict) -> dict:
    return {**state, "params": {k: v for k, v in state["params"].items() if k not in ("oracle", "oracle_params")},
            "model": {k: v for k, v in state["model"].items() if k not in ("means", "since_refresh", "recall_counts")}}


@pytest.mark.parametrize("d, params", [(40, {}), (8, {"oracle_params": {"train_at": 40}})])
def test_auto_short_of_its_gate_is_the_exact_learner_bit_for_bit(d, params):
    """Fewer classes than ``train_at`` (2,000 by default), or fewer columns than AUTO_MIN_COLUMNS:
    oracle="auto" (the default) scans exactly, the same iterates as oracle="exact"."""
    X, y = clustered_stream(1500, 120, d, seed=5)
    auto, exact = ExtremeSVM(**params), ExtremeSVM(oracle="exact")
    for model in (auto, exact):
        model.learn_many(X[:1000], y[:1000])
        for x, k in zip(X[1000:1100], y[1000:1100].tolist()):
            model.learn_one(dict(enumerate(x.tolist())), k)
    assert auto.oracle == "auto" and auto.dense and auto.index_recall is None
    assert_same_state(_without_means(auto.export_state()), _without_means(exact.export_state()))
    assert list(auto.predict_many(X[1100:])) == list(exact.predict_many(X[1100:]))


def test_auto_learns_and_predicts_through_the_index_once_its_gate_opens():
    """200 columns: the index is trained from 164 classes on (AUTO_MIN_WEIGHTS = 2^15 weights), as oracle="means" with train_at=164."""
    X, y = clustered_stream(6000, 200, 200, seed=6)
    auto, means = ExtremeSVM(), ExtremeSVM(oracle="means", oracle_params={"train_at": 164})
    for model in (auto, means):
        model.learn_many(X[:5000], y[:5000])
    assert auto.index_recall is not None and 0.0 <= auto.index_recall <= 1.0
    assert_same_state(_without_means(auto.export_state()), _without_means(means.export_state()))
    assert list(auto.predict_many(X[5000:])) == list(means.predict_many(X[5000:]))


def test_auto_on_sparse_rows_leaves_the_dense_store_and_never_indexes():
    rng = np.random.default_rng(7)
    words = [rng.choice(5000, 10, replace=False) for _ in range(60)]
    labels = rng.integers(60, size=3000).tolist()
    rows = [{f"w{j}": 1.0 for j in rng.choice(words[k], 4, replace=False)} for k in labels]
    auto, exact = ExtremeSVM(oracle_params={"train_at": 40}), ExtremeSVM(oracle="exact")
    for model in (auto, exact):
        for x, k in zip(rows, labels):
            model.learn_one(x, k)
    assert not auto.dense and auto.index_recall is None
    assert_same_state(_without_means(auto.export_state()), _without_means(exact.export_state()))


@pytest.mark.parametrize("params", [{"oracle": "means", "store": "sparse"}, {"oracle": "means", "penalty": "l1"},
                                    {"oracle": "trees"}, {"oracle": "means", "oracle_params": {"ef": 64}},
                                    {"oracle": "means", "oracle_params": {"n_probe": 0}}])
def test_bad_means_settings_are_refused_clearly(params):
    with pytest.raises(ValueError, match="oracle"):
        ExtremeSVM(**params)


@pytest.mark.slow
def test_the_index_recall_is_in_the_metrics_log_and_inspect(tmp_path):
    import json

    from helpers import cli

    X, y = clustered_stream(3000, 120, 8, seed=4)
    stream = tmp_path / "embeddings.jsonl"
    stream.write_text("".join(json.dumps({"x": {f"e{j}": v for j, v in enumerate(x.tolist())}, "y": int(k)}) + "\n" for x, k in zip(X, y)))
    ck = tmp_path / "ck"
    cli("train", stream, "--learner", "ExtremeSVM", "--param", "oracle=means", "--param", 'oracle_params={"train_at": 40}',
        "--param", "index_every=64", "--checkpoint-dir", ck, "--checkpoint-every", "500", "--quiet")
    lines = [json.loads(line) for line in (ck / "metrics.jsonl").read_text().splitlines()]
    assert 0.0 <= lines[-1]["index_recall"] <= 1.0
    assert json.loads(cli("inspect", ck, "--json").stdout)["counters"]["index_recall"] == lines[-1]["index_recall"]


def test_a_missing_faiss_is_said_when_the_learner_is_made(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "faiss" else real(name, *a))
    for oracle in ("means", "auto"):
        with pytest.raises(ValueError, match="pip install faiss-cpu"):
            ExtremeSVM(oracle=oracle)
