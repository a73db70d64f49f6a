"""FeatureSpace (streamlearn.features): names to columns by every input road, hashing, the
position cache, and the compiled batch encoder against plain references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamlearn import MulticlassSVM
from streamlearn.kernels import compiled

NO_ENTRIES = np.zeros(0, np.int64)  # ``added`` of a map_rows call that does not grow


def test_hashing_trick_sums_collisions_and_is_order_free():
    model = MulticlassSVM(lam=0.1, n_bits=2)  # 4 columns: collisions are certain
    x = {f"f{i}": float(i + 1) for i in range(10)}
    model.learn_one(x, "a")
    model.learn_one({"f0": 1.0}, "b")
    cols, vals = model.feature_space.encode_one(x, grow=False)
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
        model = MulticlassSVM(lam=0.1, n_bits=n_bits, fit_intercept=False)
        for k, X in enumerate(batches):
            model.learn_many(X, [k % 3] * 6)
        rows = model.feature_space.encode_many(batches[0], grow=False)
        results.append((model.feature_space.names, rows.indptr.tolist(), rows.indices.tolist(), model.decision_function_many(batches[1])))
    assert results[0][:3] == results[1][:3]
    np.testing.assert_array_equal(results[0][3], results[1][3])
    monkeypatch.undo()
    far = sp.csr_matrix((np.ones(3), ([0, 0, 1], [1, 10**12, 2])), shape=(2, 10**12 + 1))
    model = MulticlassSVM(n_bits=n_bits, fit_intercept=False)
    model.learn_many(far, ["a", "b"])
    assert model.feature_space.position_cache_size < 1 << 23 and model.predict_many(far).tolist() == ["a", "b"]


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



def test_weights_of_a_positional_stream_are_sized_once_with_the_same_result():
    """A sparse matrix stream sizes the weights for the positions it spans at the first
    growth instead of doubling batch after batch (each doubling copied them); the model is
    the same as one whose weights grew by doubling."""
    rng = np.random.default_rng(3)
    X = sp.random(400, 4999, density=0.002, format="csr", random_state=4)
    X = sp.hstack([X, np.ones((400, 1))], format="csr")  # the first batch spans every position
    y = rng.integers(0, 4, 400)
    sized, doubling = MulticlassSVM(lam=0.01), MulticlassSVM(lam=0.01)
    doubling.feature_space.__class__ = type("NoHint", (type(doubling.feature_space),), {"likely_columns": property(lambda self: 0)})
    buffers, doubled = [], []  # the arrays themselves: an id could be reused once one is freed
    for start in range(0, 400, 40):
        sized.learn_many(X[start : start + 40], y[start : start + 40])
        doubling.learn_many(X[start : start + 40], y[start : start + 40])
        buffers.append(sized.weight_store.V)
        doubled.append(doubling.weight_store.V)
    assert all(V is buffers[0] for V in buffers)
    assert len({id(V) for V in doubled}) > 2
    assert sized.weight_store.V.shape[0] <= 8 * len(sized.feature_keys)  # model columns (bins' included)
    np.testing.assert_array_equal(sized.weight_matrix(), doubling.weight_matrix())


def test_likely_columns_stays_within_eight_times_the_columns_in_use():
    model = MulticlassSVM(fit_intercept=False)  # the columns are the batch's alone
    X = sp.csr_matrix(([1.0, 1.0], ([0, 1], [3, 1_000_000])), shape=(2, 1_000_001))
    model.learn_many(X, [0, 1])
    assert model.feature_space.n_columns == 2 and model.feature_space.likely_columns == 16
    assert model.weight_store.V.shape[0] <= 8 * len(model.feature_keys)  # model columns (bins' included)


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
        "print('scipy.sparse' in sys.modules, 'numba' in sys.modules)\n"
    )
    sparse, numba = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    if sparse == "True" and numba == "True":  # the JIT's run: numba 0.61 with scipy 1.14 loads it itself
        jit = "import sys, numba.np.arraymath\nprint('scipy.sparse' in sys.modules)\n"
        if subprocess.run([sys.executable, "-c", jit], capture_output=True, text=True, check=True).stdout.strip() == "True":
            pytest.skip("numba.np.arraymath loads scipy.sparse (through scipy.linalg) with these versions")
    assert sparse == "False"


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_a_dense_array_learns_and_scores_as_its_csr_matrix_bit_for_bit(dtype):
    """The dense road (one compiled pass, no CSR in between) gives the rows, the vocabulary
    and so the model the CSR road gives, for every batch split, in learning and in scoring,
    whatever the array's dtype and layout."""
    import scipy.sparse as sp

    from streamlearn import MulticlassSVM

    rng = np.random.default_rng(7)
    X = (rng.normal(size=(300, 20)) * 4 * (rng.random((300, 20)) < 0.4)).astype(dtype)
    X[:, 3] = 0  # a column never seen: not in the vocabulary
    y = rng.integers(0, 4, 300)
    dense, sparse = MulticlassSVM(), MulticlassSVM()
    for lo, hi in ((0, 1), (1, 120), (120, 300)):
        dense.learn_many(np.asfortranarray(X[lo:hi]), y[lo:hi])
        sparse.learn_many(sp.csr_matrix(X[lo:hi]), y[lo:hi])
    assert dense.feature_keys == sparse.feature_keys and 3 not in dense.feature_keys
    assert (dense.weight_matrix(True) == sparse.weight_matrix(True)).all()
    X_test = rng.normal(size=(40, 24))  # wider than anything learned: the unknown columns are dropped
    assert (dense.decision_function_many(X_test) == sparse.decision_function_many(sp.csr_matrix(X_test))).all()


def test_a_non_finite_value_in_a_dense_batch_is_named_and_changes_nothing():
    from streamlearn import MulticlassSVM
    from streamlearn.errors import InvalidInputError

    model = MulticlassSVM()
    model.learn_many(np.array([[1.0, 0.0]]), [0])
    keys_before = model.feature_keys
    X = np.array([[0.0, 0.0, 2.0, 1.0], [1.0, np.inf, 0.0, 3.0]])
    with pytest.raises(InvalidInputError, match="row 1, feature 1: value inf is NaN, infinite or beyond"):
        model.learn_many(X, [0, 1])
    assert model.feature_keys == keys_before and model.feature_space.n_columns == 2  # the intercept's and 0
    assert model.n_steps == 1


def nearly_dense_stream(n: int, width: int, seed: int):
    """Rows with a few zeros; the first rows leave positions 0-4 empty, so that they take their
    columns after the others (the vocabulary's order is not the positions')."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, width))
    X[rng.random(X.shape) < 0.02] = 0.0
    X[:3, :5] = 0.0
    return X, rng.integers(0, 5, n)


@pytest.mark.parametrize("params", [{}, {"batch_size": 3, "project": True}, {"lam": "auto"},
                                    {"average": False, "adapt": False, "fit_intercept": False, "calibrate": False}])
@pytest.mark.parametrize("learner", ["MulticlassSVM", "MulticlassLogisticRegression", "OneVsRestPegasos"])
def test_a_nearly_dense_array_read_in_place_learns_and_scores_as_its_csr_matrix_bit_for_bit(learner, params):
    """An MCID learner takes a dense batch with few zeros as it is, zeros and all (no copy):
    the same model, state and scores, bit for bit, as the CSR matrix of the same rows."""
    import streamlearn
    from helpers import assert_same_state

    X, y = nearly_dense_stream(600, 12, seed=11)
    in_place, sparse = getattr(streamlearn, learner)(**params), getattr(streamlearn, learner)(**params)
    for lo, hi in ((0, 3), (3, 150), (150, 402), (402, 600)):  # whole groups of 3: nothing left pending
        in_place.learn_many(X[lo:hi], y[lo:hi])
        sparse.learn_many(sp.csr_matrix(X[lo:hi]), y[lo:hi])
    assert list(in_place.feature_keys)[:3] != [0, 1, 2]  # the positions' columns are permuted
    assert_same_state(in_place.export_state(), sparse.export_state())
    X_test, _ = nearly_dense_stream(50, 12, seed=12)
    assert in_place.decision_function_many(X_test).tobytes() == sparse.decision_function_many(sp.csr_matrix(X_test)).tobytes()
    assert (X == nearly_dense_stream(600, 12, seed=11)[0]).all()  # the caller's array is untouched


def test_the_feature_space_reads_a_nearly_dense_batch_in_place_only_within_its_share_of_zeros():
    from streamlearn.features import FeatureSpace

    X, _ = nearly_dense_stream(200, 9, seed=13)
    space = FeatureSpace()
    space.encode_many(X, grow=True)
    position_of = np.empty(9, np.int64)
    position_of[np.asarray(space.columns(list(range(9)), grow=False))] = np.arange(9)
    zeros = int((X == 0).sum())
    for zero_share, in_place in (((zeros + 0.5) / X.size, True), ((zeros - 0.5) / X.size, False), (None, False)):
        rows = space.encode_many(X, grow=False, zero_share=zero_share)
        assert np.shares_memory(rows.data, X) == in_place
        assert rows.indptr[-1] - rows.indptr[0] == (X.size if in_place else np.count_nonzero(X))
        dense = np.zeros((200, 9))
        for i in range(200):
            lo, hi = rows.indptr[i], rows.indptr[i + 1]
            dense[i, position_of[rows.indices[lo:hi]]] = rows.data[lo:hi]
        assert (dense == X).all()
    wider = np.ones((4, 10))  # position 9 has no column: the copying road drops it
    rows = space.encode_many(wider, grow=False, zero_share=1.0)
    assert not np.shares_memory(rows.data, wider) and rows.indptr[-1] == 4 * 9


@pytest.mark.parametrize("first_row_fills", [True, False])
def test_new_positions_enter_the_vocabulary_as_the_copying_road_adds_them(first_row_fills):
    """Read in place, a batch whose first row holds every position without a column gives them
    columns in position order, as the copying road does; otherwise it is copied."""
    from streamlearn.features import FeatureSpace

    X, _ = nearly_dense_stream(50, 7, seed=14)
    X[0, :] = np.arange(1.0, 8.0)
    X[1:, 4] = 0.0
    if not first_row_fills:
        X[0, 2] = 0.0
    seen = np.array([[0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 2.0]])  # positions 1 and 6 come first
    in_place, copied = FeatureSpace(), FeatureSpace()
    for space in (in_place, copied):
        space.encode_many(seen, grow=True)
    rows = in_place.encode_many(X, grow=True, zero_share=1.0)
    reference = copied.encode_many(X, grow=True)
    assert np.shares_memory(rows.data, X) == first_row_fills
    assert in_place.export() == copied.export()
    assert list(in_place.export()["names"])[:2] == [1, 6]
    for i in range(50):
        lo, hi, l2, h2 = rows.indptr[i], rows.indptr[i + 1], reference.indptr[i], reference.indptr[i + 1]
        kept = rows.data[lo:hi] != 0.0
        assert rows.indices[lo:hi][kept].tolist() == reference.indices[l2:h2].tolist()
        assert rows.data[lo:hi][kept].tolist() == reference.data[l2:h2].tolist()
