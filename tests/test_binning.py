"""Feature bins (streamlearn.binning): the expansion against a plain NumPy reference, learn_many
against the learn_one loop, checkpoints, and what the bins buy on an interval concept."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn.batches import SparseRows
from streamlearn.binning import BINNED_COLUMNS, MAX_BINNED_NONZEROS, RANGE, FeatureBins, bin_name
from streamlearn.intercept import INTERCEPT_NAME

from helpers import assert_same_state
from test_scaling import as_rows, reference_standardize

MCID = ["MulticlassSVM", "MulticlassLogisticRegression", "MulticlassPerceptron", "OneVsRestPegasos",
        "OneVsRestLogisticRegression"]


def reference_bins(rows: list[dict], learn: bool, history: list[dict], n_bins: int) -> list[list]:
    """Each row over model columns (feature j at j (n_bins + 1) below BINNED_COLUMNS, after them one
    column each), then for each nonzero value of a column below BINNED_COLUMNS its bin's column: the
    interval among ``n_bins`` equal ones of [-RANGE, RANGE] of its running standardised value (plain
    Python); none for a row of more than MAX_BINNED_NONZEROS nonzero values."""
    out = []
    for row, scaled in zip(rows, reference_standardize(rows, learn, history, enter_after=True)):
        entries = [(j * (n_bins + 1) if j < BINNED_COLUMNS else BINNED_COLUMNS * (n_bins + 1) + j - BINNED_COLUMNS, v)
                   for j, v in row.items()]
        binned = sum(v != 0 for v in row.values()) <= MAX_BINNED_NONZEROS
        for j, v in row.items():
            if v != 0 and binned and j < BINNED_COLUMNS:
                z = min(max(scaled[j], -RANGE), RANGE)
                entries.append((j * (n_bins + 1) + 1 + min(int(np.floor((z + RANGE) / (2 * RANGE / n_bins))), n_bins - 1), 1.0))
        out.append(entries)
    return out


@pytest.mark.parametrize(("width", "first"), [(6, 0), (MAX_BINNED_NONZEROS + 8, 0), (6, BINNED_COLUMNS - 3)],
                         ids=["narrow", "some-rows-too-long", "columns-beyond-the-binned"])
def test_the_expansion_equals_the_numpy_reference_learning_and_scoring(width, first):
    rng = np.random.default_rng(5)
    rows = [{first + int(j): float(rng.normal(3 * j, 1 + j)) * (rng.random() > 0.15)
             for j in rng.choice(width, rng.integers(0, width - 1), replace=False)} for _ in range(150)]
    bins, history, seen = FeatureBins(7), [], set()
    for start in range(0, 150, 23):
        for learn, batch in ((True, rows[start : start + 23]), (False, rows[start + 23 : start + 30])):
            if not batch:
                continue
            last = 99_999 if start % 2 else -1  # the intercept's entry, appended in the same pass
            got = bins.expand(as_rows(batch), learn, last_column=last)
            got_rows = [list(zip(got.indices[got.indptr[i] : got.indptr[i + 1]].tolist(),
                                 got.data[got.indptr[i] : got.indptr[i + 1]].tolist())) for i in range(got.n_rows)]
            want = [row + [(last, 1.0)] * (last >= 0) for row in reference_bins(batch, learn, history, 7)]
            assert got_rows == want
            seen.update(c for row in want for c, _ in row if c % 8)
    assert len(seen) > (8 if first else 20)  # most bins were met (beyond the binned columns, none)
    too_long = [row for row in rows if sum(v != 0 for v in row.values()) > MAX_BINNED_NONZEROS]
    assert (len(too_long) > 5) == (width > MAX_BINNED_NONZEROS)


def test_a_row_is_binned_by_the_statistics_of_the_rows_before_it():
    bins = FeatureBins(6)
    rows = SparseRows(np.array([0, 1, 2]), np.array([0, 0]), np.array([10.0, 10.0]))
    out = bins.expand(rows, learn=True)  # nothing seen: the value itself (the top interval); then centred at 0
    assert out.indices.tolist() == [0, 6, 0, 4]
    far = bins.expand(SparseRows(np.array([0, 1]), np.array([0]), np.array([1e6])), learn=False)
    assert far.indices.tolist() == [0, 6]  # beyond the range: the outermost interval


def test_only_the_first_feature_columns_take_bins_columns():
    bins = FeatureBins(12)
    assert [bins.model_column(j) for j in (0, 1, BINNED_COLUMNS - 1, BINNED_COLUMNS, BINNED_COLUMNS + 5)] == [
        0, 13, 13 * (BINNED_COLUMNS - 1), 13 * BINNED_COLUMNS, 13 * BINNED_COLUMNS + 5]
    keys = bins.keys(list(range(BINNED_COLUMNS + 2)))
    assert len(keys) == bins.model_column(BINNED_COLUMNS + 2) == 13 * BINNED_COLUMNS + 2
    assert keys[-3:] == [bin_name(BINNED_COLUMNS - 1, 11), BINNED_COLUMNS, BINNED_COLUMNS + 1]


def test_feature_keys_name_every_bin_column():
    model = streamlearn.MulticlassSVM(bins=3)
    model.learn_one({"a": 1.0, "b": 2.0}, "x")
    keys = model.feature_keys
    assert len(keys) == model.weight_matrix().shape[1] == 4 * 3  # the intercept, a and b, each with 3 bin columns
    assert keys[4:8] == ["a", bin_name("a", 0), bin_name("a", 1), bin_name("a", 2)]


def _interval_concept(n: int, seed: int):
    """Class 1 when the first feature lies within one standard deviation of its mean: no linear
    function of the values separates it."""
    rng = np.random.default_rng(seed)
    X = rng.normal([50.0, 0.0, 3.0], [20.0, 1.0, 0.5], size=(n, 3))
    return X, np.where(np.abs(X[:, 0] - 50.0) < 20.0, "inside", "outside")


def test_bins_learn_an_interval_concept_that_the_raw_values_cannot():
    X, y = _interval_concept(6000, 1)
    accuracy = {}
    for bins in (None, 12):
        model = streamlearn.MulticlassLogisticRegression(bins=bins, standardize=True)
        hits = 0
        for i, (row, target) in enumerate(zip(X, y)):
            x = dict(zip("abc", row.tolist()))
            hits += i >= 3000 and model.predict_one(x) == target
            model.learn_one(x, target)
        accuracy[bins] = hits / 3000
    assert accuracy[None] < 0.75 and accuracy[12] > 0.95, accuracy


@pytest.mark.parametrize("name", MCID)
def test_learn_many_is_the_learn_one_loop_bit_for_bit(name):
    X, y = _interval_concept(300, 2)
    X[::7, 1] = 0.0  # absent values have no bin
    X[:40, 2] = 0.0  # a feature first met after the first batch's first row
    one, many = (streamlearn.LEARNERS[name](bins=10) for _ in range(2))
    for row, target in zip(X, y.tolist()):
        one.learn_one(dict(enumerate(row.tolist())), target)
    many.learn_many(X[:120], y[:120])
    many.learn_many(X[120:], y[120:])
    assert_same_state(one.export_state(), many.export_state())
    assert one.decision_function_many(X).tobytes() == many.decision_function_many(X).tobytes()


def test_a_checkpoint_resumes_the_bins_exactly():
    X, y = _interval_concept(400, 3)
    straight = streamlearn.MulticlassSVM(bins=12)
    straight.learn_many(X, y)
    first = streamlearn.MulticlassSVM(bins=12)
    first.learn_many(X[:250], y[:250])
    resumed = streamlearn.learner_from_state(first.export_state())
    resumed.learn_many(X[250:], y[250:])
    assert_same_state(resumed.export_state(), straight.export_state())
    assert resumed.export_state()["bins"]["stats"]["n_seen"] == 400


@pytest.mark.parametrize("bins", [1, 1001, 2.5, "12", True])
def test_bins_must_be_an_integer_in_range(bins):
    with pytest.raises(ValueError, match="bins must be None or an integer between 2 and 1000"):
        streamlearn.MulticlassSVM(bins=bins)


@pytest.mark.parametrize("scaling", [0.5, "auto"])
@pytest.mark.parametrize("batch", [False, True], ids=["one-by-one", "batch"])
def test_a_score_is_the_weights_times_the_row_with_its_bins_at_the_intercepts_value(scaling, batch):
    rng = np.random.default_rng(4)
    learned = [{"a": float(rng.normal(0.3, 0.2)), "b": float(rng.normal(0.0, 0.1))} for _ in range(300)]
    labels = ["in" if abs(x["a"] - 0.3) < 0.2 else "out" for x in learned]
    model = streamlearn.MulticlassSVM(bins=4, intercept_scaling=scaling)
    if batch:  # the general road's kernels, where one-by-one takes the C road of small records
        model.learn_many(learned, labels)
    for x, label in zip(learned, labels):
        if not batch:
            model.learn_one(x, label)
    history = [{0: x["a"], 1: x["b"]} for x in learned]
    probe = {"a": 0.65, "b": -0.02}
    scaled = reference_standardize([{0: probe["a"], 1: probe["b"]}], False, history)[0]
    value = model.intercept_value
    assert value == (0.5 if scaling == 0.5 else pytest.approx(0.26, abs=0.05))  # "auto": the values' RMS
    keys, W = model.feature_keys, model.weight_matrix()
    want = value * W[:, keys.index(INTERCEPT_NAME)]
    for j, name in enumerate("ab"):
        interval = min(int(np.floor((min(max(scaled[j], -RANGE), RANGE) + RANGE) / (2 * RANGE / 4))), 3)
        want = want + probe[name] * W[:, keys.index(name)] + value * W[:, keys.index(bin_name(name, interval))]
    got = model.decision_function_many([probe])[0] if batch else [model.decision_function_one(probe)[k] for k in model.classes]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bins", [10, None])
def test_a_dense_batch_expanded_while_encoded_is_the_two_pass_road_bit_for_bit(bins):
    """Once the intercept's value settles, a dense batch becomes the model's rows in one compiled
    pass (kernels/rows.dense_model_rows); the same rows as CSR take the encoding, then the bins' and
    the intercept's pass. Rows short enough for bins and rows too long, a column met late, batches
    cut at random: the same model and scores bit for bit, and the learn_one loop's."""
    from streamlearn.intercept import SETTLE_ROWS
    import scipy.sparse as sp

    rng = np.random.default_rng(8)
    n, width = SETTLE_ROWS + 1500, MAX_BINNED_NONZEROS + 10
    X = rng.normal(2.0, 3.0, size=(n, width)) * (rng.random((n, width)) < np.where(rng.random((n, 1)) < 0.5, 0.3, 0.95))
    X[: SETTLE_ROWS + 300, width - 1] = 0.0  # a column first met after the value settled
    y = (X[:, 0] > 1.0).astype(int) + (np.abs(X[:, 3]) < 2.0)
    dense, sparse, one = (streamlearn.MulticlassSVM(bins=bins) for _ in range(3))
    cuts = np.unique(np.concatenate([[0, n], rng.integers(1, n, 12)]))
    for start, stop in zip(cuts[:-1], cuts[1:]):
        dense.learn_many(X[start:stop], y[start:stop])
        sparse.learn_many(sp.csr_matrix(X[start:stop]), y[start:stop])
    assert_same_state(dense.export_state(), sparse.export_state())
    assert dense.decision_function_many(X[:300]).tobytes() == sparse.decision_function_many(sp.csr_matrix(X[:300])).tobytes()
    for row, target in zip(X, y.tolist()):
        one.learn_one({j: v for j, v in enumerate(row.tolist()) if v != 0.0}, target)
    assert_same_state(one.export_state(), dense.export_state())
