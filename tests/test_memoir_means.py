"""ExtremeSVM(oracle="means"): candidates from an index over the classes' mean examples (dense rows).
The candidate step against the exact one, learning and prediction through the index,
``learn_many`` against the ``learn_one`` loop, checkpoints, recall, refusals."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn import ExtremeSVM
from streamlearn.kernels import compiled
from streamlearn.service.checkpoint import CheckpointStore
from helpers import assert_same_state, auto_intercept_values

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
    no_watch_params = np.zeros(0)
    no_watch_params.setflags(write=False)  # read-only, as the library's are: one compiled kernel for both
    _dense.learn_groups(indptr, indices, data, y, np.ones(n), 1, 0, V, U, scalars, 0, 1e-6, False, 3.0, 1e-4, True, 2.0,
                        lowest, np.array([7], np.uint64), np.zeros(n_classes), np.zeros(n_classes), 1e-4,
                        np.zeros(n, np.bool_), candidates, np.zeros(0), no_watch_params)
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
    one, many = ExtremeSVM(**SMALL, index_every=48), ExtremeSVM(**SMALL, index_every=48)  # 24 rows pending at 600
    for x, k in zip(X[:600], y[:600].tolist()):
        one.learn_one(dict(enumerate(x.tolist())), k)
    for start in range(0, 600, 70):
        many.learn_many(X[start : min(start + 70, 600)], y[start : min(start + 70, 600)])
    assert_same_state(one.export_state(), many.export_state())
    assert "centroids" in one.export_state()["model"]["means"]  # trained: 60 classes > 40
    expected = np.zeros((60, 9))  # the intercept's column first (the learner registers it before any feature)
    np.add.at(expected, y[:600], np.hstack([auto_intercept_values(X[:600])[:, None], X[:600]]))  # each class's examples, summed
    state = many.export_state()["model"]["means"]
    assert state["sums"].dtype == np.float32  # they only give the index its float32 directions
    indptr, indices, data, pending_y = state["pending"]  # the rows since the last refresh: added at the next
    assert len(pending_y) == 24 and pending_y.tolist() == y[600 - len(pending_y) : 600].tolist()
    sums = state["sums"].astype(np.float64)
    for i, k in enumerate(pending_y.tolist()):
        sums[k, indices[indptr[i] : indptr[i + 1]]] += data[indptr[i] : indptr[i + 1]]
    np.testing.assert_allclose(sums, expected, rtol=1e-5, atol=1e-5)
    assert many.class_rows.V.dtype == np.float32  # the index routes the steps: float32 rows
    store = CheckpointStore(tmp_path)
    store.save({"learner": many.export_state()})
    restored = streamlearn.learner_from_state(store.load_latest()["learner"])
    for model in (many, restored):
        model.learn_many(X[600:], y[600:])
    assert_same_state(many.export_state(), restored.export_state())
    assert restored.class_rows.V.dtype == np.float32 and restored.class_rows.U.dtype == np.float32
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


def test_the_list_scan_is_the_numpy_reference_of_the_best_cosines_in_the_probed_lists():
    """Classes placed, moved and moved back across lists (the pool compacted and grown on the
    way): each row's candidates are the n classes of best cosine among its probed lists' members,
    as NumPy finds them over the members it knows of."""
    from streamlearn.memoir.means import MeanExampleIndex

    rng = np.random.default_rng(14)
    means = MeanExampleIndex(train_at=300, n_probe=2)
    means.reserve(300, 16)
    means.sums[:300] = rng.normal(size=(300, 16))
    means.refresh(300)
    for round_ in range(6):  # moves: members leave lists, lists outgrow their room
        moved = rng.choice(300, 120, replace=False)
        means.sums[moved] = rng.normal(size=(120, 16)) * (round_ + 1)
        means.changed[moved] = True
        means.refresh(300)
    queries = rng.normal(size=(40, 16)).astype(np.float32)
    got = means.candidates(queries, 7)
    directions = means.sums[:300].astype(np.float64)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    nearest = np.argmax(directions.astype(np.float32) @ means.centroids.T, axis=1)  # each class's list
    probed = np.argsort(-(queries.astype(np.float64) @ means.centroids.T.astype(np.float64)), axis=1, kind="stable")[:, :2]
    for row in range(len(queries)):
        members = np.flatnonzero(np.isin(nearest, probed[row]))
        cosines = directions[members] @ queries[row].astype(np.float64)
        expected = members[np.argsort(-cosines, kind="stable")][:7]
        assert set(got[row][got[row] >= 0].tolist()) == set(expected.tolist()), row
        assert (got[row] >= 0).sum() == min(7, len(members))


def _top_lists_reference(queries, centroids, n):
    """The ``n`` largest inner products of each query, in float64 (a stable sort: ties to the lowest list)."""
    scores = queries.astype(np.float64) @ centroids.astype(np.float64).T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :n]
    return order, np.take_along_axis(scores, order, axis=1)


def _probe(queries, centroids, fast_scores, n):
    lists, closeness = np.empty((len(queries), n), np.int64), np.empty((len(queries), n), np.float32)
    largest_norm = float(np.linalg.norm(centroids.astype(np.float64), axis=1).max())
    _dense.probe_lists(queries, centroids, largest_norm, fast_scores, n, lists, closeness)
    return lists, closeness


def test_the_probed_lists_are_the_numpy_reference_whatever_the_fast_scores_rounding():
    """A query's lists come from BLAS scores whose rounding depends on the batch: any scores within
    the error bound give the same lists, the reference's, one query alone or in a block."""
    rng = np.random.default_rng(8)
    centroids = rng.normal(size=(60, 24)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    queries = (3 * rng.normal(size=(400, 24))).astype(np.float32)
    expected, scores = _top_lists_reference(queries, centroids, 3)
    assert (np.diff(np.sort(scores, axis=1)) > 1e-4).all()  # no near-tie: the reference is the only answer
    blas = queries @ centroids.T
    bound = 24 * 2.0**-24 * np.linalg.norm(queries, axis=1, keepdims=True)  # one product's error bound
    for fast in (blas, blas + rng.uniform(-bound, bound, blas.shape).astype(np.float32),
                 (queries.astype(np.float64) @ centroids.T.astype(np.float64)).astype(np.float32)):
        lists, closeness = _probe(queries, centroids, fast, 3)
        np.testing.assert_array_equal(lists, expected)
        np.testing.assert_allclose(closeness, scores, rtol=1e-5, atol=1e-5)
    one_at_a_time = np.vstack([_probe(queries[i : i + 1], centroids, blas[i : i + 1], 3)[0] for i in range(len(queries))])
    np.testing.assert_array_equal(one_at_a_time, expected)


def test_near_tied_lists_are_told_apart_by_the_exact_sum_not_by_the_fast_scores():
    """Twin centroids whose scores differ by less than the fast scores' error: whichever twin the
    fast scores rank first, the lists are the ones the in-order sums give."""
    rng = np.random.default_rng(12)
    base = rng.normal(size=(20, 24))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    twins = base * (1 + 1e-6 * rng.normal(size=(20, 1)))  # within a few roundings of its twin
    centroids = np.vstack([base, twins]).astype(np.float32)
    queries = rng.normal(size=(300, 24)).astype(np.float32)
    blas = queries @ centroids.T
    expected = _probe(queries, centroids, blas, 3)[0]  # an odd count: the last list's twin is the first left out
    bound = 24 * 2.0**-24 * np.linalg.norm(queries, axis=1, keepdims=True) * 1.0001
    flipped = 0
    for seed in range(5):
        fast = blas + np.random.default_rng(seed).uniform(-bound, bound, blas.shape).astype(np.float32)
        flipped += int((np.argsort(-fast, axis=1, kind="stable")[:, :3] != expected).any(axis=1).sum())
        np.testing.assert_array_equal(_probe(queries, centroids, fast, 3)[0], expected)
    assert flipped > 0  # the fast scores alone would have chosen otherwise


def test_probed_ties_go_to_the_lowest_list_and_missing_lists_are_minus_one():
    centroids = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]], np.float32)
    queries = np.array([[2.0, 0.5]], np.float32)
    lists = _probe(queries, centroids, queries @ centroids.T, 2)[0]
    np.testing.assert_array_equal(lists, [[1, 2]])
    np.testing.assert_array_equal(_probe(queries, centroids[:1], queries @ centroids[:1].T, 2)[0], [[0, -1]])


def test_spherical_kmeans_finds_separated_directions_deterministically():
    from streamlearn.memoir.means import spherical_kmeans

    rng = np.random.default_rng(9)
    directions = np.eye(6, 16)
    points = directions[rng.integers(6, size=600)] + 0.05 * rng.normal(size=(600, 16))
    points = (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)
    centroids = spherical_kmeans(points, 6)
    assert centroids.shape == (6, 16) and centroids.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(centroids, axis=1), 1.0, rtol=1e-5)
    assert (centroids @ directions.T).max(axis=0).min() > 0.99  # every direction found
    assert spherical_kmeans(points, 6).tobytes() == centroids.tobytes()
    crowded = spherical_kmeans(points, 40)  # more lists than directions: the empty ones take points
    assert np.isfinite(crowded).all() and np.allclose(np.linalg.norm(crowded, axis=1), 1.0, rtol=1e-5)


def test_every_class_stays_in_the_list_its_current_mean_finds():
    """After moved means and new classes are re-indexed, each class's own direction (its largest
    inner product, 1) finds it through one probed list: it sits in its nearest list, up to date."""
    from streamlearn.memoir.means import MeanExampleIndex

    rng = np.random.default_rng(10)
    means = MeanExampleIndex(train_at=200, n_probe=1)
    means.reserve(320, 12)
    means.sums[:200] = rng.normal(size=(200, 12))
    means.refresh(200)
    assert means.ready and means.n_lists_trained == 200 // 39
    means.reserve(320, 12)
    moved = rng.choice(200, 50, replace=False)
    means.sums[moved] = rng.normal(size=(50, 12))
    means.changed[moved] = True
    means.sums[200:320] = rng.normal(size=(120, 12))
    means.refresh(320)
    directions = means.sums[:320] / np.linalg.norm(means.sums[:320], axis=1, keepdims=True)
    np.testing.assert_array_equal(means.candidates(directions, 1)[:, 0], np.arange(320))


def test_past_tens_of_thousands_of_classes_the_lists_grow_like_the_root_of_the_classes(monkeypatch):
    """Lists of ~39 classes up to ~n_probe · 13 · 39² classes; then √(n_probe · 13 · K): the count
    that balances the coarse step against the list scans (bench/results/list-cost.md)."""
    from streamlearn.memoir.means import MeanExampleIndex

    from streamlearn.memoir import means as means_module

    rng = np.random.default_rng(12)
    trained_on = []
    kmeans = means_module.spherical_kmeans
    monkeypatch.setattr(means_module, "spherical_kmeans", lambda points, n: trained_on.append(len(points)) or kmeans(points, n))
    for n_classes, n_lists in ((5_000, 5_000 // 39), (24_000, int(np.sqrt(13 * 24_000)))):
        means = MeanExampleIndex(train_at=n_classes, n_probe=1)
        means.reserve(n_classes, 8)
        means.sums[:n_classes] = rng.normal(size=(n_classes, 8))
        means.refresh(n_classes)
        assert means.n_lists_trained == n_lists
        directions = means.sums[:n_classes] / np.linalg.norm(means.sums[:n_classes], axis=1, keepdims=True)
        np.testing.assert_array_equal(means.candidates(directions, 1)[:, 0], np.arange(n_classes))  # all indexed
    assert n_lists < 24_000 // 39
    assert trained_on == [5_000, 39 * n_lists]  # k-means on ~39 classes a list, drawn when there are more


def test_learn_many_equals_the_learn_one_loop_while_several_lists_are_probed():
    X, y = clustered_stream(2500, 260, 8, seed=11)
    params = {"oracle": "means", "oracle_params": {"train_at": 120, "n_probe": 1}, "index_every": 40}
    one, many = ExtremeSVM(**params), ExtremeSVM(**params)
    for x, k in zip(X, y.tolist()):
        one.learn_one(dict(enumerate(x.tolist())), k)
    for start in range(0, len(y), 333):
        many.learn_many(X[start : start + 333], y[start : start + 333])
    assert_same_state(one.export_state(), many.export_state())
    assert many.index_recall is not None and len(many.classes) == 260
    assert list(one.predict_many(X[:300])) == list(many.predict_many(X[:300]))


def test_a_state_saved_with_a_faiss_index_restores_and_trains_its_lists_again():
    """Checkpoints written before the index kept its own lists hold faiss bytes under "index" and
    no pending rows: the sums are restored, and the next refresh trains the lists anew."""
    X, y = clustered_stream(900, 60, 8, seed=3)
    model = ExtremeSVM(**SMALL, index_every=50)
    model.learn_many(X[:600], y[:600])
    state = model.export_state()
    means = state["model"]["means"]
    old = {"sums": means["sums"].astype(np.float64), "changed": means["changed"], "n_indexed": means["n_indexed"],
           "n_trained": means["n_trained"], "dim": means["dim"], "index": np.zeros(16, np.uint8)}
    restored = streamlearn.learner_from_state({**state, "model": {**state["model"], "means": old}})
    assert "centroids" not in restored.export_state()["model"]["means"]
    restored.learn_many(X[600:700], y[600:700])
    assert "centroids" in restored.export_state()["model"]["means"]
    assert np.mean(restored.predict_many(X[700:]).astype(np.int64) == y[700:]) > 0.5
