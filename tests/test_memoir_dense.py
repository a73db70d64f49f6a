"""ExtremeSVM's dense class rows (``store``): the same iterates as the sparse store, bit for bit,
and as the NumPy reference of 002 Alg. 1; ``learn_many`` equals the ``learn_one`` loop; ``"auto"``
leaves the dense store at the same example however the stream is fed; checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
import streamlearn.memoir.dense as memoir_dense
from streamlearn import ExtremeSVM
from streamlearn.service.checkpoint import CheckpointStore
from helpers import assert_same_state
from test_memoir import reference_l2, weights_of


def dense_stream(n: int, n_classes: int, d: int, seed: int):
    """Rows filling all ``d`` columns around class centres, classes numbered by first appearance."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, d))
    y = rng.integers(n_classes, size=n)
    X = centres[y] + 0.8 * rng.normal(size=(n, d))
    first = {}
    for k in y.tolist():
        first.setdefault(k, len(first))
    return X, np.array([first[k] for k in y.tolist()])


PARAMS = [{}, {"adapt": False}, {"eta0": "pegasos", "lam": 1e-2, "average": False},
          {"batch_size": 3, "project": True, "lam": 1e-3}, {"fallback": "random", "seed": 3, "average": False},
          {"balance": True, "average_power": 1.0}]


@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("store", ["dense", "sparse"])
def test_every_class_score_is_the_weights_product_and_ranks_as_predictions_do(store, average):
    """``decision_function_many`` (river's every-class scores) is linear in the row, the product
    with the weights the unit rows read, and its argmax is ``predict_many``'s exact scan."""
    X, y = dense_stream(600, 9, 12, seed=5)
    rows = [dict(enumerate(r.tolist())) for r in X]
    model = ExtremeSVM(store=store, average=average, oracle="exact")
    model.learn_many(rows[:500], y[:500].tolist())
    assert model.dense == (store == "dense")
    scores, intercepts = model.decision_function_many(rows[500:]), model.decision_function_many([{}])[0]
    weights = weights_of(model, 12) - intercepts[:, None]  # a unit row's scores count the intercept too
    assert np.abs(scores - (X[500:] @ weights.T + intercepts)).max() < 1e-9 * np.abs(scores).max()
    assert scores.argmax(axis=1).tolist() == model.class_indices(model.predict_many(rows[500:])).tolist()


@pytest.mark.parametrize("params", PARAMS)
def test_the_dense_store_gives_the_sparse_stores_iterates_bit_for_bit(params):
    X, y = dense_stream(900, 12, 16, seed=1)
    rows = [dict(enumerate(r.tolist())) for r in X]
    dense, sparse = ExtremeSVM(**params), ExtremeSVM(store="sparse", **params)
    for x, k in zip(rows, y.tolist()):
        dense.learn_one(x, k)
        sparse.learn_one(x, k)
    assert dense.dense and not sparse.dense
    assert weights_of(dense, 16).tobytes() == weights_of(sparse, 16).tobytes()
    assert list(dense.predict_many(X[:200])) == list(sparse.predict_many(X[:200]))
    assert dense.n_steps == sparse.n_steps and dense.n_changes == sparse.n_changes
    assert dense.n_weights == 12 * (16 + 1)  # the columns and the intercept's


@pytest.mark.parametrize("params", [{"eta0": "pegasos", "lam": 1e-2, "average": True, "average_power": 2.0},
                                    {"eta0": 2.0, "eta_decay": 1e-3, "lam": 1e-3, "batch_size": 2, "project": True,
                                     "average": False}])
def test_the_dense_kernel_is_the_numpy_reference_of_alg_1(params):
    X, y = dense_stream(600, 8, 10, seed=2)
    rows = [dict(enumerate(r.tolist())) for r in X]
    model = ExtremeSVM(adapt=False, fit_intercept=False, **params)
    model.learn_many(rows, y.tolist())
    assert model.dense
    settings = {key: value for key, value in params.items() if key != "eta0" or value != "pegasos"}
    reference = reference_l2(rows, y.tolist(), 10, **settings)
    assert np.abs(weights_of(model, 10) - reference).max() <= 1e-9 * max(1.0, np.abs(reference).max())


@pytest.mark.parametrize("params", [{"eta0": "pegasos", "lam": 1e-2, "average": True, "average_power": 2.0},
                                    {"eta0": 2.0, "eta_decay": 1e-3, "lam": 1e-3, "batch_size": 2, "project": True,
                                     "average": False}])
def test_float32_rows_follow_the_numpy_reference_of_alg_1_within_their_rounding(params):
    """The rows an index-routed model keeps (float32, narrowed mid-stream) against the float64
    reference: the same argmaxes, so weights within float32's rounding of the reference's."""
    X, y = dense_stream(600, 8, 10, seed=2)
    rows = [dict(enumerate(r.tolist())) for r in X]
    model = ExtremeSVM(adapt=False, fit_intercept=False, oracle="exact", **params)
    model.learn_many(rows[:100], y[:100].tolist())
    model.class_rows.narrow()
    model.learn_many(rows[100:], y[100:].tolist())
    assert model.class_rows.V.dtype == np.float32
    settings = {key: value for key, value in params.items() if key != "eta0" or value != "pegasos"}
    reference = reference_l2(rows, y.tolist(), 10, **settings)
    scale = max(1.0, np.abs(reference).max())
    assert np.abs(weights_of(model, 10) - reference).max() <= 1e-5 * scale
    float64 = ExtremeSVM(adapt=False, fit_intercept=False, oracle="exact", **params)
    float64.learn_many(rows, y.tolist())  # and they are not the float64 rows: the test sees float32's rounding
    assert np.abs(weights_of(float64, 10) - reference).max() <= 1e-9 * scale < np.abs(weights_of(model, 10) - reference).max()


@pytest.mark.parametrize("batch_size", [1, 3])
def test_learn_many_on_an_array_equals_the_learn_one_loop(batch_size):
    X, y = dense_stream(500, 10, 12, seed=3)
    one, many = ExtremeSVM(batch_size=batch_size), ExtremeSVM(batch_size=batch_size)
    for x, k in zip(X, y.tolist()):
        one.learn_one(dict(enumerate(x.tolist())), k)
    for start in range(0, 500, 70):
        many.learn_many(X[start : start + 70], y[start : start + 70])
    assert one.dense and many.dense
    assert_same_state(one.export_state(), many.export_state())


def turning_sparse_stream(n_dense: int, n: int, seed: int):
    """``n_dense`` rows on 8 columns, then rows of 3 new columns each: the rows stop filling the columns."""
    rng = np.random.default_rng(seed)
    X = [{f"c{j}": float(rng.normal()) for j in range(8)} for _ in range(n_dense)]
    X += [{f"w{3 * i + j}": 1.0 for j in range(3)} for i in range(n - n_dense)]
    return X, rng.integers(5, size=n).tolist()


def test_auto_leaves_the_dense_store_at_the_same_example_however_fed():
    X, y = turning_sparse_stream(60, 200, seed=4)
    one, many, sparse = ExtremeSVM(batch_size=2), ExtremeSVM(batch_size=2), ExtremeSVM(batch_size=2, store="sparse")
    for x, k in zip(X[:60], y[:60]):
        one.learn_one(x, k)
    assert one.dense  # still: 8 columns, all filled
    for x, k in zip(X[60:], y[60:]):
        one.learn_one(x, k)
    for start in range(0, 200, 45):
        many.learn_many(X[start : start + 45], y[start : start + 45])
    sparse.learn_many(X, y)
    assert not one.dense and not many.dense
    assert_same_state(one.export_state(), many.export_state())
    probe = [{name: 1.0} for x in X for name in x][:300]
    assert one.decision_function_many(probe).tobytes() == sparse.decision_function_many(probe).tobytes()


def test_auto_leaves_the_dense_store_when_rows_thin_out_over_known_columns_however_fed():
    """Rows that name one known column each, no new one: the store fills ever less of its
    columns, and ``learn_many``'s batches leave it at the example ``learn_one`` does."""
    rng = np.random.default_rng(7)
    X = [{f"c{j}": float(rng.normal()) for j in range(40)} for _ in range(20)]
    X += [{f"c{int(rng.integers(40))}": 1.0} for _ in range(150)]
    y = rng.integers(5, size=len(X)).tolist()
    one, many = ExtremeSVM(batch_size=2), ExtremeSVM(batch_size=2)
    for x, k in zip(X, y):
        one.learn_one(x, k)
    for start in range(0, len(X), 45):
        many.learn_many(X[start : start + 45], y[start : start + 45])
    assert not one.dense and not many.dense
    assert_same_state(one.export_state(), many.export_state())


def test_store_dense_stays_dense_and_auto_leaves_it_above_the_size_limit(monkeypatch):
    X, y = turning_sparse_stream(20, 120, seed=5)
    always = ExtremeSVM(store="dense")
    always.learn_many(X, y)
    assert always.dense and always.n_weights == len(always.classes) * (1 + 8 + 3 * 100)  # the intercept's column too
    monkeypatch.setattr(memoir_dense, "DENSE_MAX_WEIGHTS", 30)
    rows, labels = dense_stream(100, 6, 8, seed=6)
    capped = ExtremeSVM()
    capped.learn_many(rows, labels)  # 6 classes x 8 columns > 30: sparse once the fourth class arrives
    assert not capped.dense


def test_a_dense_checkpoint_restores_the_same_model_and_learning_goes_on_identically(tmp_path):
    X, y = dense_stream(700, 15, 20, seed=7)
    model = ExtremeSVM()
    model.learn_many(X[:500], y[:500])
    store = CheckpointStore(tmp_path)
    store.save({"learner": model.export_state()})
    restored = streamlearn.learner_from_state(store.load_latest()["learner"])
    assert restored.dense
    assert_same_state(model.export_state(), restored.export_state())
    model.learn_many(X[500:], y[500:])
    restored.learn_many(X[500:], y[500:])
    assert_same_state(model.export_state(), restored.export_state())
    assert list(model.predict_many(X[:100])) == list(restored.predict_many(X[:100]))


@pytest.mark.parametrize("params", [{"store": "rows"}, {"store": "dense", "penalty": "l1"},
                                    {"store": "dense", "oracle": "lsh"}])
def test_bad_store_settings_are_refused_clearly(params):
    with pytest.raises(ValueError, match="store"):
        ExtremeSVM(**params)


def test_dense_rows_grow_with_the_columns_learned_not_those_predicted():
    """A column the features know but no learned row named yet (an example waits for its group)
    scores 0 and does not grow the rows: a model that predicted exports the state of one that did not."""
    X, y = dense_stream(120, 6, 8, seed=9)
    asked, quiet = ExtremeSVM(batch_size=3, fit_intercept=False), ExtremeSVM(batch_size=3, fit_intercept=False)
    for model in (asked, quiet):
        model.learn_many(X, y)
        model.learn_one({0: 1.0, "new": 2.0}, 0)  # pending: "new" has a column, no weight yet
    assert asked.n_pending == 1
    assert asked.predict_one({"new": 1.0}) == asked.classes[0]  # every score 0: the lowest class
    assert asked.decision_function_many([{"new": 1.0}]).tolist() == [[0.0] * 6]
    assert asked.n_weights == 6 * 8
    assert_same_state(asked.export_state(), quiet.export_state())


_kernels = streamlearn.kernels.compiled("memoir_dense")


def test_csr_rows_scatter_into_dense_rows_as_numpy_places_them():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(6, 9)) * (rng.random((6, 9)) < 0.5)
    # contiguous columns, as the library's rows are: the kernel is compiled for the library's types only
    indptr, indices, data = (np.concatenate([[0], np.cumsum((X != 0).sum(1))]), np.ascontiguousarray(np.nonzero(X)[1]),
                             X[X != 0])
    out = np.zeros((6, 7), np.float32)  # two columns past the width are dropped; values cast to float32
    _kernels.scatter_rows(indptr, indices, data, out)
    np.testing.assert_array_equal(out, X[:, :7].astype(np.float32))


@pytest.mark.parametrize("averaged", [True, False])
def test_prediction_among_candidates_is_the_numpy_reference(averaged):
    """The best of each row's listed classes under the predicting iterate, ``(U x + A V x) / AW``
    or ``g V x`` (pads, and classes the model does not have, skipped), against NumPy's scores:
    lists of every length, so that classes scored four at a time meet those scored alone."""
    rng = np.random.default_rng(6)
    n_rows, n_classes, d = 40, 13, 7
    V, U, X = rng.normal(size=(n_classes, d)), rng.normal(size=(n_classes, d)), rng.normal(size=(n_rows, d))
    scalars = np.array([0.7, 0.0, 0.4, 2.5])  # g, Σ V², A, AW
    candidates = np.array([rng.choice(np.arange(n_classes + 3), 11, replace=False) for _ in range(n_rows)])  # distinct, as an index's
    for row in range(n_rows):
        candidates[row, row % 12 :] = -1
    indptr, indices, data = np.arange(0, n_rows * d + 1, d), np.tile(np.arange(d), n_rows), X.ravel().copy()
    predicted, labelled, p_true = np.empty(n_rows, np.int64), np.empty(n_rows, np.int64), np.empty(n_rows)
    y = rng.integers(-1, n_classes, size=n_rows)  # -1: a class the model does not know
    _kernels.predict_rows(indptr, indices, data, V, U, scalars, n_classes, averaged, np.zeros(0, np.int64), predicted,
                          np.zeros(0), np.zeros(n_classes), np.zeros(n_classes), candidates)
    _kernels.predict_rows(indptr, indices, data, V, U, scalars, n_classes, averaged, y, labelled, p_true,
                          np.zeros(n_classes), np.zeros(n_classes), candidates)
    scores = (X @ U.T + 0.4 * X @ V.T) / 2.5 if averaged else 0.7 * X @ V.T
    for row in range(n_rows):
        listed = [k for k in candidates[row] if 0 <= k < n_classes]
        expected = max(listed, key=lambda k: (scores[row, k], -k)) if listed else 0
        assert predicted[row] == expected == labelled[row], (row, listed)
        # y's probability: the softmax over the listed classes and y
        pool = sorted(set(listed) | ({int(y[row])} if y[row] >= 0 else set()))
        weights = np.exp(scores[row, pool] - scores[row, pool].max()) if pool else np.zeros(0)
        want = 0.0 if y[row] < 0 else weights[pool.index(y[row])] / weights.sum()
        assert p_true[row] == pytest.approx(want, rel=1e-9, abs=1e-12), (row, listed, int(y[row]))


@pytest.mark.parametrize("params", [{}, {"batch_size": 3}, {"average_power": 1.0, "lam": 1e-4}])
def test_the_dense_store_restarts_where_the_sparse_store_does(params):
    """The dense kernel watches and restarts inside its step; the sparse store learns in the watch's
    Python spans (the reference): the same changes, steps and iterates through two label swaps."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(7000, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
    y[2500:5000] = 1 - y[2500:5000]
    dense, sparse = ExtremeSVM(**params), ExtremeSVM(store="sparse", **params)
    for lo in range(0, len(y), 500):
        dense.learn_many(X[lo : lo + 500], y[lo : lo + 500])
        sparse.learn_many(X[lo : lo + 500], y[lo : lo + 500])
    assert dense.dense and dense.n_changes >= 2
    assert (dense.n_changes, dense.n_steps) == (sparse.n_changes, sparse.n_steps)
    assert weights_of(dense, 6).tobytes() == weights_of(sparse, 6).tobytes()
    assert list(dense.predict_many(X[:300])) == list(sparse.predict_many(X[:300]))


_TRIM_SCRIPT = """
import os, numpy as np
from streamlearn.weights import return_freed_pages
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
first = np.ones((30 << 20) // 8)
del first  # freeing a 30 MiB block raises glibc's mmap threshold: the blocks below come from the heap
pairs = [(np.ones(100_000), np.ones(2_500)) for _ in range(300)]  # each freed block lies under a live one
live = [small for _, small in pairs]
del pairs
held = resident()
print(return_freed_pages(), held, resident())
"""


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/statm"), reason="reads the resident set from /proc")
def test_freed_heap_blocks_under_a_live_one_are_given_back_to_the_os():
    import subprocess
    import sys

    # a fresh interpreter: the test runner's own heap decides where a block comes from
    trimmed, held, after = subprocess.run([sys.executable, "-c", _TRIM_SCRIPT], check=True, capture_output=True,
                                          text=True).stdout.split()
    if trimmed != "True":
        pytest.skip("the C library has no malloc_trim")
    assert float(after) < float(held) - 150  # 234 MiB of freed blocks


def test_growing_dense_rows_and_index_sums_give_freed_pages_back(monkeypatch):
    import streamlearn.memoir.means as means
    import streamlearn.memoir.store as store

    calls = []
    monkeypatch.setattr(store, "return_freed_pages", lambda: calls.append("rows"))
    monkeypatch.setattr(means, "return_freed_pages", lambda: calls.append("sums"))
    X, y = dense_stream(12_000, 6_000, 128, seed=2)
    model = ExtremeSVM(oracle="means", oracle_params={"train_at": 40})
    model.learn_many(X[:100], y[:100])
    assert calls == []  # arrays under a MiB
    model.learn_many(X[100:], y[100:])
    assert "rows" in calls and "sums" in calls
