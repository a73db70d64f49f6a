"""The compiled MCID learners against a plain NumPy implementation of the paper's update.

The reference below is Alg. 1 of 000_9ee2d88cd77f9d98.txt written densely and literally:
``W <- (1 - 1/t) W - 1/(lam t r) sum_i dl/dW(W^(t-1); x_i, y_i)`` (Eq. 14) with the
sub-gradients of Eq. 15 (softmax), Eq. 16 (Crammer–Singer), Eq. 17 (perceptron) and the
binary hinge / logistic losses of the one-vs-rest baselines; optional projection onto the
ball of radius 1/sqrt(lam); the averaged iterate ``(1/t) sum_s W^(s)``. A class exists from
the first mini-batch that contains it (its row of W is zero until then).
"""

from __future__ import annotations

import pickle
import struct

import numpy as np
import pytest
import scipy.sparse as sp

import streamlearn
from streamlearn import (
    MulticlassLogisticRegression,
    MulticlassPerceptron,
    MulticlassSVM,
    OneVsRestLogisticRegression,
    OneVsRestPegasos,
)
from streamlearn.kernels import compiled

NO_ENTRIES = np.zeros(0, np.int64)  # ``added`` of a map_rows call that does not grow


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def reference_gradient(name, W, x, y):
    """dl/dW (shape of W) for one example, straight from the paper's equations."""
    scores = W @ x
    K = W.shape[0]
    grad = np.zeros_like(W)
    if name == "MulticlassLogisticRegression":  # Eq. 15
        p = _softmax(scores)
        for k in range(K):
            grad[k] = -float(k == y) * x + p[k] * x
    elif name == "MulticlassSVM":  # Eq. 16
        others = [k for k in range(K) if k != y]
        if others:
            k_star = max(others, key=lambda k: (scores[k], -k))
            if 1 + scores[k_star] - scores[y] > 0:
                grad[k_star] += x
                grad[y] -= x
    elif name == "MulticlassPerceptron":  # Eq. 17
        k_star = max(range(K), key=lambda k: (scores[k], -k))
        grad[k_star] += x
        grad[y] -= x
    elif name == "OneVsRestPegasos":  # K binary hinge losses max(0, 1 - s w_k.x)
        for k in range(K):
            s = 1.0 if k == y else -1.0
            if s * scores[k] < 1:
                grad[k] = -s * x
    elif name == "OneVsRestLogisticRegression":  # K binary losses log(1 + exp(-s w_k.x))
        for k in range(K):
            s = 1.0 if k == y else -1.0
            grad[k] = -s * x / (1 + np.exp(s * scores[k]))
    return grad


def reference_mcid(name, X, y, lam, r, project=False, average_power=0.0):
    """Alg. 1 over consecutive groups of r rows; returns (last W, averaged W, steps). The
    average weights step t by t**average_power (Shamir & Zhang's polynomial decay; 0: plain)."""
    n, d = X.shape
    W = np.zeros((y.max() + 1, d))
    running_sum = np.zeros_like(W)
    total_weight = 0.0
    n_classes, t = 0, 0
    per_class_ball = name.startswith("OneVsRest")
    for first in range(0, n - n % r, r):
        n_classes = max(n_classes, y[first : first + r].max() + 1)
        grads = sum(reference_gradient(name, W[:n_classes], X[i], y[i]) for i in range(first, first + r))
        t += 1
        W[:n_classes] = (1 - 1 / t) * W[:n_classes] - grads / (lam * t * r)
        if project:
            radius = 1 / np.sqrt(lam)
            if per_class_ball:
                norms = np.linalg.norm(W, axis=1)
                W *= np.minimum(1, radius / np.maximum(norms, 1e-300))[:, None]
            else:
                W *= min(1, radius / max(np.linalg.norm(W), 1e-300))
        running_sum += t**average_power * W
        total_weight += t**average_power
    return W, running_sum / max(total_weight, 1), t


def make_stream(n=360, d=25, n_classes=6, seed=0):
    """A sparse stream whose classes appear one after another (class k first at ~k*n/(2K))."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_classes, d))
    y = np.empty(n, np.int64)
    for i in range(n):
        y[i] = rng.integers(0, min(n_classes, 1 + i * 2 * n_classes // n))
    X = centers[y] + rng.normal(scale=1.0, size=(n, d))
    X[rng.random((n, d)) < 0.6] = 0.0  # sparse rows, features coming and going
    return X, y


def learner_matrix(model, d, averaged=False):
    """The learner's weights as a dense (K, d) array in the stream's column order."""
    W = model.weight_matrix(averaged=averaged)
    out = np.zeros((W.shape[0], d))
    out[:, model._features.names] = W
    order = np.argsort(model.classes)  # classes are ints seen in order
    return out[order]


LEARNERS = [
    MulticlassLogisticRegression,
    MulticlassSVM,
    MulticlassPerceptron,
    OneVsRestPegasos,
    OneVsRestLogisticRegression,
]


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("lam", "r", "project"), [(0.05, 1, False), (0.01, 3, True), (0.2, 7, False), (1e-3, 2, True)])
@pytest.mark.parametrize(("average", "average_power"), [(False, 0.0), (True, 0.0), (True, 2.5)])
def test_kernel_matches_numpy_reference(cls, lam, r, project, average, average_power):
    """Without projection or average the kernel takes other roads (no norms kept; softmax
    and one-vs-rest update every class in one pass), so those settings are checked too."""
    X, y = make_stream()
    model = cls(lam=lam, batch_size=r, project=project, average=average, average_power=average_power)
    model._renormalize_below = 0.5  # fold the scale into V every few steps
    model.learn_many(sp.csr_matrix(X), y)
    W_ref, W_avg_ref, t = reference_mcid(cls.__name__, X, y, lam, r, project, average_power)
    assert model.n_steps == t
    scale = max(1.0, np.abs(W_ref).max())
    np.testing.assert_allclose(learner_matrix(model, X.shape[1]), W_ref, rtol=0, atol=1e-9 * scale)
    if average:
        np.testing.assert_allclose(learner_matrix(model, X.shape[1], averaged=True), W_avg_ref, rtol=0, atol=1e-9 * scale)


@pytest.mark.parametrize("cls", [MulticlassSVM, MulticlassLogisticRegression], ids=lambda c: c.__name__)
def test_renormalization_happens_often_and_changes_nothing(cls):
    X, y = make_stream(n=600)
    renormalized, never = cls(lam=0.05, average=True), cls(lam=0.05, average=True)
    renormalized._renormalize_below = 0.5
    never._renormalize_below = 0.0
    renormalized.learn_many(X, y)
    never.learn_many(X, y)
    # Without renormalisation the scale is prod(1 - 1/s) = 1/t. With it the scale is
    # reset to 1 whenever it drops below 0.5, and each reset can raise it at most 3x
    # (shrink factors are >= 2/3 from t = 3 on): reaching >= 0.5 from 1/600 takes >= 5 resets.
    assert never._weights.scale[0] < 0.5**8
    assert renormalized._weights.scale[0] >= 0.5
    np.testing.assert_allclose(renormalized.weight_matrix(), never.weight_matrix(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        renormalized.weight_matrix(averaged=True), never.weight_matrix(averaged=True), rtol=1e-9, atol=1e-9
    )


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_learn_many_equals_learn_one_loop_bit_for_bit(cls):
    X, y = make_stream(n=200, seed=3)
    rng = np.random.default_rng(1)
    one = cls(lam=0.01, batch_size=4, average=True)
    mixed = cls(lam=0.01, batch_size=4, average=True)
    for row, label in zip(X, y):
        one.learn_one({j: v for j, v in enumerate(row) if v != 0.0}, int(label))
    i = 0
    while i < len(y):  # chunks of random sizes, some single learn_one calls in between
        size = int(rng.integers(1, 9))
        if size == 1:
            one_row = X[i]
            mixed.learn_one({j: v for j, v in enumerate(one_row) if v != 0.0}, int(y[i]))
        else:
            mixed.learn_many(sp.csr_matrix(X[i : i + size]), y[i : i + size])
        i += size
    assert one.n_pending == mixed.n_pending == len(y) % 4
    d = X.shape[1]
    np.testing.assert_array_equal(learner_matrix(one, d), learner_matrix(mixed, d))
    np.testing.assert_array_equal(learner_matrix(one, d, averaged=True), learner_matrix(mixed, d, averaged=True))


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_state_export_and_pickle_resume_exactly(cls):
    X, y = make_stream(n=150, seed=5)
    full = cls(lam=0.02, batch_size=3, average=True, project=True)
    full.learn_many(X, y)
    head = cls(lam=0.02, batch_size=3, average=True, project=True)
    head.learn_many(X[:71], y[:71])  # 71 = 23 steps + 2 pending rows
    for resumed in (streamlearn.learner_from_state(head.export_state()), pickle.loads(pickle.dumps(head))):
        resumed.learn_many(X[71:], y[71:])
        np.testing.assert_array_equal(resumed.weight_matrix(), full.weight_matrix())
        assert resumed.predict_proba_one({0: 1.0, 3: -2.0}) == full.predict_proba_one({0: 1.0, 3: -2.0})


def test_hashing_trick_sums_collisions_and_is_order_free():
    model = MulticlassSVM(lam=0.1, n_bits=2)  # 4 columns: collisions are certain
    x = {f"f{i}": float(i + 1) for i in range(10)}
    model.learn_one(x, "a")
    model.learn_one({"f0": 1.0}, "b")
    cols, vals = model._features.encode_one(x, grow=False)
    assert len(cols) == len(set(cols.tolist())) <= 4
    assert vals.sum() == pytest.approx(sum(x.values()))
    shuffled = dict(reversed(list(x.items())))
    assert model.decision_function_one(shuffled) == model.decision_function_one(x)


@pytest.mark.parametrize("n_bits", [None, 3])
def test_positional_and_dict_roads_give_an_int_name_one_column(n_bits):
    """Columns of arrays/CSR (the vectorised road) and int dict keys (the dict road) are the
    same names: wherever a name enters first, both roads find it in the same column, also
    after a restore and after the position cache grows."""
    from streamlearn.features import FeatureSpace

    rng = np.random.default_rng(0)
    space = FeatureSpace(n_bits)
    space.encode_one({5: 1.0, 900: 2.0}, grow=True)  # dict road first, 900 beyond any cache
    for width in (3, 8, 40, 1000):  # the cache grows several times
        space.encode_many(sp.random(4, width, density=0.5, random_state=int(rng.integers(1 << 30)), format="csr"), grow=True)
        space.encode_one({int(rng.integers(2000)): 1.0, "s": 1.0}, grow=True)
    for fs in (space, FeatureSpace.restore(space.export())):
        names = [n for n in fs.names if type(n) is int] if n_bits is None else list(range(2000))
        by_dict = fs.columns(names, grow=False)
        width = max(names) + 1
        eye = sp.csr_matrix((np.ones(len(names)), (np.arange(len(names)), names)), shape=(len(names), width))
        by_position = fs.encode_many(eye, grow=False).indices
        np.testing.assert_array_equal(by_position, by_dict)
        assert (by_dict >= 0).all()
    if n_bits is None:
        assert space.names[:2] == [5, 900] and len(set(space.names)) == len(space.names)


@pytest.mark.parametrize("n_bits", [None, 4])
def test_far_apart_positions_take_the_road_of_names_with_the_same_result(n_bits, monkeypatch):
    """A LIBSVM index of 10**12 made the position cache ask for 8 TB (one of 3e8 took 2.4 GB):
    batches whose positions would blow the cache up go by their distinct positions instead,
    with the same vocabulary, rows and scores as the cache gives."""
    import streamlearn.features as features

    rng = np.random.default_rng(1)
    batches = [sp.random(6, 50, density=0.3, random_state=int(rng.integers(1 << 30)), format="csr") for _ in range(4)]
    results = []
    for limit in (1 << 22, 0):  # the position cache, then (limit 0) the road of names for every batch
        monkeypatch.setattr(features, "_DENSE_POSITIONS", limit)
        model = MulticlassSVM(lam=0.1, n_bits=n_bits)
        for k, X in enumerate(batches):
            model.learn_many(X, [k % 3] * 6)
        rows = model._features.encode_many(batches[0], grow=False)
        results.append((model._features.names, rows.indptr.tolist(), rows.indices.tolist(), model.decision_function_many(batches[1])))
    assert results[0][:3] == results[1][:3]
    np.testing.assert_array_equal(results[0][3], results[1][3])
    monkeypatch.undo()
    far = sp.csr_matrix((np.ones(3), ([0, 0, 1], [1, 10**12, 2])), shape=(2, 10**12 + 1))
    model = MulticlassSVM(n_bits=n_bits)
    model.learn_many(far, ["a", "b"])
    assert len(model._features._int_name_columns) < 1 << 23 and model.predict_many(far).tolist() == ["a", "b"]


def test_map_rows_kernel_matches_a_plain_reference():
    """The compiled batch encoder: map positions to columns, drop unknown ones, order each
    row by the columns' name keys (stable), against a per-row Python reference."""
    map_rows = compiled("rows").map_rows

    rng = np.random.default_rng(3)
    matrix = sp.random(40, 30, density=0.3, random_state=4, format="csr")
    column_of = rng.permutation(30)
    column_of[rng.choice(30, 6, replace=False)] = -1  # unknown features
    keys = rng.integers(0, 5, 30)  # repeated keys: the order among equal keys is the row's
    out_idx, out_val = np.full(matrix.nnz + 5, -7, np.int64), np.full(matrix.nnz + 5, np.nan)  # longer than needed
    indptr, n, _, _ = map_rows(matrix.indptr, matrix.indices, matrix.data, column_of, keys, out_idx, out_val, False, False, 0,
                               NO_ENTRIES, True)  # fmt: skip
    indices, data = out_idx[:n], out_val[:n]
    for i in range(40):
        lo, hi = matrix.indptr[i], matrix.indptr[i + 1]
        pairs = [(column_of[j], v) for j, v in zip(matrix.indices[lo:hi], matrix.data[lo:hi]) if column_of[j] >= 0]
        pairs.sort(key=lambda cv: keys[cv[0]])  # Python's sort is stable
        assert indices[indptr[i] : indptr[i + 1]].tolist() == [c for c, _ in pairs]
        assert data[indptr[i] : indptr[i + 1]].tolist() == [v for _, v in pairs]
    assert indptr[-1] == n == sum(column_of[matrix.indices] >= 0)


@pytest.mark.parametrize("n_classes, width", [(7, 9), (4, 4), (7, 8), (10, 12), (23, 24), (33, 36)])
def test_row_dots_matches_numpy_and_both_roads_give_the_same_bits(n_classes, width):
    """The scoring kernel against NumPy, on rows of every length and with columns beyond the
    weight rows (never learned: zero weight) anywhere in a row; its vector road (classes in
    blocks of 4, 16 per pass: widths 8..36 give 1..4-vector blocks and several passes) and its
    plain loop (an output too short for whole vectors) give the same bits."""
    from streamlearn.kernels.scaled import row_dots

    rng = np.random.default_rng(11)
    n_learned = 25
    M = rng.normal(size=(n_learned, width))  # spare class capacity, as the weight store keeps
    lengths = np.arange(60) % 20
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = np.concatenate([np.sort(rng.choice(32, n, replace=False)) for n in lengths]).astype(np.int64)
    data = rng.normal(size=len(indices))
    padded, exact = np.empty(width), np.empty(n_classes)
    for row in range(len(lengths)):
        lo, hi = indptr[row], indptr[row + 1]
        learned = indices[lo:hi] < n_learned
        expected = data[lo:hi][learned] @ M[indices[lo:hi][learned], :n_classes]
        row_dots(indptr, indices, data, row, M, n_classes, padded)
        row_dots(indptr, indices, data, row, M, n_classes, exact)
        np.testing.assert_allclose(padded[:n_classes], expected, rtol=1e-12, atol=1e-12)
        assert padded[:n_classes].tobytes() == exact.tobytes()


def test_mcid_svm_learns_a_separable_problem():
    rng = np.random.default_rng(0)
    centers = rng.normal(scale=4, size=(5, 10))
    y = rng.integers(0, 5, 3000)
    X = centers[y] + rng.normal(size=(3000, 10))
    model = MulticlassSVM(lam=1e-3, average=True)
    model.learn_many(X[:2500], y[:2500])
    accuracy = np.mean(model.predict_many(X[2500:]).astype(int) == y[2500:])
    assert accuracy > 0.95


def test_unknown_positions_kernel_matches_a_plain_reference():
    """New int names of a batch, in order of first appearance, and the column map left as
    it was (the kernel marks positions in it while it runs)."""
    unknown_positions = compiled("rows").unknown_positions

    rng = np.random.default_rng(5)
    indices = rng.integers(0, 50, 400).astype(np.int32)
    column_of = np.where(rng.random(50) < 0.5, rng.permutation(50), -1).astype(np.int64)
    before = column_of.copy()
    expected = list(dict.fromkeys(int(c) for c in indices if column_of[c] < 0))
    assert unknown_positions(indices, column_of).tolist() == expected
    assert (column_of == before).all()


def test_map_rows_with_positional_keys_orders_rows_like_the_key_table():
    """``keys_are_positions``: the order check reads positions, which must give the same
    rows as reading the key table when each known column's key is its position."""
    map_rows = compiled("rows").map_rows

    rng = np.random.default_rng(6)
    matrix = sp.random(30, 40, density=0.3, random_state=7, format="csr")
    matrix.indices[:] = matrix.indices[::-1].copy()  # rows out of position order: the sort path runs
    column_of = rng.permutation(40)
    column_of[rng.choice(40, 8, replace=False)] = -1
    keys = np.zeros(40, np.int64)
    keys[column_of[column_of >= 0]] = np.flatnonzero(column_of >= 0)  # key of a column = its position
    results = []
    for flag in (False, True):
        out_idx, out_val = np.empty(matrix.nnz, np.int64), np.empty(matrix.nnz)
        indptr, n, _, _ = map_rows(matrix.indptr, matrix.indices, matrix.data, column_of, keys, out_idx, out_val, flag, False,
                                   0, NO_ENTRIES, True)  # fmt: skip
        results.append((indptr.tolist(), out_idx[:n].tolist(), out_val[:n].tolist()))
    assert results[0] == results[1]
    indptr, cols, _ = results[1]
    assert all(keys[cols[p]] <= keys[cols[p + 1]] for i in range(30) for p in range(indptr[i], indptr[i + 1] - 1))


def test_map_rows_growing_equals_adding_the_new_names_first():
    """With ``grow``, unknown positions get the next columns as the pass meets them: the
    same column map, keys and rows as listing the new names (:func:`unknown_positions`),
    giving them columns in that order, and mapping afterwards."""
    map_rows, unknown_positions = compiled("rows").map_rows, compiled("rows").unknown_positions

    rng = np.random.default_rng(8)
    matrix = sp.random(30, 50, density=0.2, random_state=9, format="csr")
    known = rng.choice(50, 20, replace=False)
    base_map = np.full(50, -1, np.int64)
    base_map[known] = np.arange(20)
    base_keys = np.zeros(20 + 50, np.int64)
    base_keys[:20] = known  # an int name's key is itself

    two_step_map, two_step_keys = base_map.copy(), base_keys.copy()
    new = unknown_positions(matrix.indices, two_step_map)
    two_step_map[new] = 20 + np.arange(len(new))
    two_step_keys[20 : 20 + len(new)] = new
    out = np.empty(matrix.nnz, np.int64), np.empty(matrix.nnz)
    expected_ptr, n_expected, _, _ = map_rows(matrix.indptr, matrix.indices, matrix.data, two_step_map, two_step_keys, *out, True,
                                              False, 0, NO_ENTRIES, True)  # fmt: skip
    expected = (expected_ptr.tolist(), out[0][:n_expected].tolist(), out[1][:n_expected].tolist())

    grown_map, grown_keys, added = base_map.copy(), base_keys.copy(), np.empty(50, np.int64)
    out = np.empty(matrix.nnz, np.int64), np.empty(matrix.nnz)
    indptr, n, n_added, _ = map_rows(matrix.indptr, matrix.indices, matrix.data, grown_map, grown_keys, *out, True, True, 20,
                                     added, True)  # fmt: skip
    assert len(new) > 0 and n == matrix.nnz
    assert added[:n_added].tolist() == new.tolist()
    assert (grown_map == two_step_map).all() and (grown_keys == two_step_keys).all()
    assert (indptr.tolist(), out[0][:n].tolist(), out[1][:n].tolist()) == expected


@pytest.mark.parametrize("canonical", [True, False], ids=["sorted-rows", "a-row-out-of-order"])
def test_map_rows_without_copying_values_gives_the_same_rows(canonical):
    """``copy_values=False`` leaves the values in ``data`` (a canonical batch) or copies
    them when a row must be reordered; the rows are those of the copying pass either way."""
    map_rows = compiled("rows").map_rows

    matrix = sp.random(30, 50, density=0.2, random_state=11, format="csr")
    indices = matrix.indices.copy()
    if not canonical:  # swap two entries of the first row with at least two
        row = int(np.flatnonzero(np.diff(matrix.indptr) >= 2)[0])
        lo = matrix.indptr[row]
        indices[lo], indices[lo + 1] = indices[lo + 1], indices[lo]
    results = []
    for copy_values in (True, False):
        column_of, keys = np.full(50, -1, np.int64), np.zeros(50, np.int64)
        out_idx, out_val = np.empty(matrix.nnz, np.int64), np.full(matrix.nnz, np.nan)
        indptr, n, _, copied = map_rows(matrix.indptr, indices, matrix.data, column_of, keys, out_idx, out_val,
                                        True, True, 0, np.empty(50, np.int64), copy_values)  # fmt: skip
        assert copied == (copy_values or not canonical)
        results.append((indptr.tolist(), out_idx[:n].tolist(), (out_val[:n] if copied else matrix.data).tolist()))
    assert results[0] == results[1]


@pytest.mark.parametrize("bad", [-1.0, 11.0, float("nan"), "2", True])
def test_average_power_outside_its_domain_is_refused(bad):
    with pytest.raises(ValueError, match="average_power"):
        MulticlassSVM(average=True, average_power=bad)


def test_average_power_without_an_average_is_refused():
    with pytest.raises(ValueError, match="needs average=True"):
        MulticlassSVM(average=False, average_power=2.0)


def test_the_defaults_are_the_cross_data_set_winner():
    """λ = 1e-4, the averaged iterate with power 2, no projection: the smallest mean validation
    regret over five data sets, one pass (bench/results/defaults.md); an explicit average=False
    means the last iterate, with no power to give."""
    model = MulticlassSVM()
    assert (model.lam, model.average, model._average_power, model.project) == (1e-4, True, 2.0, False)
    assert MulticlassSVM(average=False)._average_power == 0.0


def test_weighted_average_survives_export_and_pickle():
    X, y = make_stream(n=120)
    model = MulticlassSVM(lam=0.05, average=True, average_power=2.0)
    model.learn_many(X, y)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict_proba_many(X).to_numpy(), model.predict_proba_many(X).to_numpy())
    assert restored._average_weight == model._average_weight == sum(t**2.0 for t in range(1, 121))


def test_weights_of_a_positional_stream_are_sized_once_with_the_same_result():
    """A sparse matrix stream sizes the weights for the positions it spans at the first
    growth instead of doubling batch after batch (each doubling copied them); the model is
    the same as one whose weights grew by doubling."""
    rng = np.random.default_rng(3)
    X = sp.random(400, 4999, density=0.002, format="csr", random_state=4)
    X = sp.hstack([X, np.ones((400, 1))], format="csr")  # the first batch spans every position
    y = rng.integers(0, 4, 400)
    sized, doubling = MulticlassSVM(lam=0.01), MulticlassSVM(lam=0.01)
    doubling._features.__class__ = type("NoHint", (type(doubling._features),), {"likely_columns": property(lambda self: 0)})
    buffers, doubled = [], []  # the arrays themselves: an id could be reused once one is freed
    for start in range(0, 400, 40):
        sized.learn_many(X[start : start + 40], y[start : start + 40])
        doubling.learn_many(X[start : start + 40], y[start : start + 40])
        buffers.append(sized._weights.V)
        doubled.append(doubling._weights.V)
    assert all(V is buffers[0] for V in buffers)
    assert len({id(V) for V in doubled}) > 2
    assert sized._weights.V.shape[0] <= 8 * sized._features.n_columns
    np.testing.assert_array_equal(sized.weight_matrix(), doubling.weight_matrix())


def test_likely_columns_stays_within_eight_times_the_columns_in_use():
    model = MulticlassSVM()
    X = sp.csr_matrix(([1.0, 1.0], ([0, 1], [3, 1_000_000])), shape=(2, 1_000_001))
    model.learn_many(X, [0, 1])
    assert model._features.n_columns == 2 and model._features.likely_columns == 16
    assert model._weights.V.shape[0] <= 16


def test_a_stream_of_dicts_never_imports_scipy_sparse():
    """``scipy.sparse`` costs ~0.12 s of start-up: ``import streamlearn`` and learning and
    predicting from dicts must not load it (it is imported when a batch needs it)."""
    import subprocess
    import sys

    code = (
        "import sys, streamlearn\n"
        "m = streamlearn.MulticlassSVM()\n"
        "m.learn_one({'a': 1.0}, 0)\n"
        "m.learn_many([{'a': 1.0}, {'b': 2.0}], [1, 0])\n"
        "m.predict_one({'a': 1.0})\n"
        "print('scipy.sparse' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


MCID_LEARNERS = [MulticlassSVM, MulticlassLogisticRegression, MulticlassPerceptron, OneVsRestPegasos, OneVsRestLogisticRegression]


@pytest.mark.parametrize("cls", MCID_LEARNERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("params", [{}, {"average": True, "average_power": 2.0}, {"batch_size": 3, "average": True, "project": True},
                                    {"batch_size": 4}], ids=["plain", "averaged", "r3-projected", "r4"])
def test_score_and_learn_scores_each_example_as_decision_function_one_before_learn_one(cls, params):
    """The runner's test-then-train scores come out of the learning step itself: each example
    scored by the model as it stands when it arrives, over the classes registered before it
    (-inf for the others), bit for bit what a decision_function_one / learn_one loop gives,
    also for mini-batches whose rows wait for their group across calls."""
    rng = np.random.default_rng(12)
    n = 64
    X = rng.normal(size=(n, 5)) * (rng.random((n, 5)) < 0.7)
    y = np.concatenate([[7, 7, 3], rng.choice([7, 3, 11], 20), [5], rng.choice([7, 3, 11, 5], n - 24)])
    fused, loop = cls(lam=0.05, **params), cls(lam=0.05, **params)
    start = 0
    for size in (1, 7, 13, 2, 20, 21):
        Xb, yb = X[start : start + size], y[start : start + size]
        scores = fused.score_and_learn(Xb, yb)
        assert scores.shape == (size, len(fused.classes))
        for i in range(size):
            x = {j: v for j, v in enumerate(Xb[i]) if v != 0}
            expected = loop.decision_function_one(x)
            loop.learn_one(x, int(yb[i]))
            got = {c: s for c, s in zip(fused.classes, scores[i].tolist()) if s > -np.inf}
            assert list(got) == list(expected), (start + i, got, expected)
            assert [struct.pack("<d", v) for v in got.values()] == [struct.pack("<d", v) for v in expected.values()]
        start += size
    assert start == n
    np.testing.assert_array_equal(fused.weight_matrix(), loop.weight_matrix())
