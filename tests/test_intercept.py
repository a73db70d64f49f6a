"""Every learner's intercept (``fit_intercept=True``, the default): a reserved feature on every row the
model sees, after scaling, at the value ``intercept_scaling`` gives it (``"auto"``: the data's scale,
streamlearn.intercept). The kernels against the NumPy references with a column of those values
(helpers.auto_intercept_values) are in test_mcid_reference.py, test_pgs_reference.py and test_memoir.py."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn import MulticlassLogisticRegression, MulticlassSVM, OneVsRestPegasos
from streamlearn.base import INTERCEPT_NAME
from helpers import assert_same_state, auto_intercept_values


@pytest.mark.parametrize("cls", [MulticlassSVM, MulticlassLogisticRegression, OneVsRestPegasos])
def test_a_threshold_away_from_the_origin_needs_the_intercept(cls):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 2))
    y = (X[:, 0] > 1.0).astype(np.int64)  # 16 % positives, a boundary that misses the origin
    with_, without = cls(bins=None), cls(fit_intercept=False, bins=None)  # (bins learn a threshold themselves)
    for model in (with_, without):
        model.learn_many(X[:5000], y[:5000])
    hits = {m: (m.predict_many(X[5000:]).astype(np.int64) == y[5000:]).mean() for m in (with_, without)}
    assert hits[with_] > 0.97 and hits[with_] > hits[without] + 0.05, hits


@pytest.mark.parametrize("make", [
    lambda **kw: streamlearn.PrimalGradientSolver(**kw),
    lambda **kw: streamlearn.MulticlassPGS(**kw),
    lambda **kw: streamlearn.LpNormMulticlassSVM(window=2000, refit_every=1000, **kw),
    lambda **kw: streamlearn.GeneralizedLeastSquares(**kw),
    lambda **kw: streamlearn.StagewiseRegression(window=2000, refit_every=1000, **kw),
    lambda **kw: streamlearn.ExtremeSVM(**kw),
], ids=["PrimalGradientSolver", "MulticlassPGS", "LpNormMulticlassSVM", "GeneralizedLeastSquares", "StagewiseRegression",
        "ExtremeSVM"])
def test_the_other_families_learn_the_intercept_by_default(make):
    """On by default in every family (``bench/results/options-families.md``): the same reserved
    feature, and it learns a boundary that misses the origin. (CalibratedLeastSquares takes it too,
    river's checks run it; its calibration stages learn this threshold without it.)"""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 2))
    y = (X[:, 0] > 1.0).astype(np.int64)
    with_, without = make(), make(fit_intercept=False)
    assert with_.fit_intercept is True
    for model in (with_, without):
        model.learn_many(X[:5000], y[:5000])
        model.flush()
    hits = {m: (m.predict_many(X[5000:]).astype(np.int64) == y[5000:]).mean() for m in (with_, without)}
    assert INTERCEPT_NAME in with_.export_state()["features"]["names"]
    assert hits[with_] > hits[without] + 0.02, hits
    restored = streamlearn.learner_from_state(with_.export_state())
    np.testing.assert_array_equal(restored.decision_function_many(X[5000:5100]), with_.decision_function_many(X[5000:5100]))


def test_the_intercept_survives_standardize_and_learns_the_majority_from_no_features():
    """``standardize`` turns a user's constant feature into 0; the intercept comes after it."""
    X = [{"constant": 3.0}] * 100
    y = ["a"] * 90 + ["b"] * 10
    order = np.random.default_rng(1).permutation(100)
    for fit_intercept, expected in ((True, {"a"}), (False, None)):
        model = MulticlassLogisticRegression(standardize=True, fit_intercept=fit_intercept)
        model.learn_many([X[i] for i in order], [y[i] for i in order])
        scores = model.decision_function_one({"constant": 3.0})
        if expected:
            assert scores["a"] > scores["b"]
        else:  # through the origin the standardised constant is 0: nothing to tell the classes apart
            assert scores["a"] == scores["b"] == 0.0


def test_a_state_saved_before_the_intercept_existed_restores_without_one():
    model = MulticlassSVM(fit_intercept=False, adapt=False)
    model.learn_many([{"a": 1.0}, {"b": 1.0}, {"a": 0.5}], ["x", "y", "x"])
    state = model.export_state()
    for name in ("fit_intercept", "adapt"):
        del state["params"][name]
    restored = streamlearn.learner_from_state(state)
    assert restored.fit_intercept is False and INTERCEPT_NAME not in restored.export_state()["features"]["names"]
    probe = [{"a": 1.0}, {"b": 2.0}, {"c": 1.0}]
    np.testing.assert_array_equal(restored.decision_function_many(probe), model.decision_function_many(probe))


def test_fit_intercept_must_be_a_boolean():
    with pytest.raises(streamlearn.InvalidParameterError, match="fit_intercept must be True or False"):
        MulticlassSVM(fit_intercept=1)


def test_members_with_an_intercept_mix_from_an_empty_base():
    """A fresh learner holds the intercept's column before it learns anything: the mixing base
    taken from it has weights for that column (a daemon's first change failed on the shapes)."""
    from streamlearn.service.mixing import MixState

    a, b = MulticlassSVM(lam=0.01), MulticlassSVM(lam=0.01)
    shared = MixState.of(a)
    for member in (a, b):  # a daemon starts from the group's base
        shared.write_into(member)
    for name, label in (("x", "yes"), ("z", "no")):
        a.learn_one({name: 1.0}, label)
        b.learn_one({name: 1.0}, label)
    changes = [shared.change(a, examples=2), shared.change(b, examples=2)]
    assert [shared.fold(change) for change in changes] == [1.0, 0.5]
    for member in (a, b):
        shared.write_into(member)
    assert INTERCEPT_NAME in shared.features
    np.testing.assert_array_equal(a.decision_function_many([{"x": 1.0}]), b.decision_function_many([{"x": 1.0}]))


def _scaled_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sparse rows whose scale varies from row to row (0.02 to 1.2), some of them empty."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)) * rng.uniform(0.02, 1.2, size=(n, 1))
    X[rng.random((n, 6)) < 0.5] = 0.0
    X[rng.random(n) < 0.05] = 0.0
    return X, (X[:, 0] + X[:, 1] > 0).astype(np.int64)


@pytest.mark.parametrize("cls", [MulticlassSVM, streamlearn.MulticlassPGS, streamlearn.ExtremeSVM])
def test_auto_gives_each_row_the_rules_value_and_learn_many_equals_the_learn_one_loop(cls):
    """Each row is learned with the value of the rows before it (the NumPy rule of
    helpers.auto_intercept_values), whatever the cuts between calls; the value settles after 1,000
    rows with a nonzero value and never moves again, whatever the rows' scale becomes."""
    X, y = _scaled_rows(1500, seed=3)
    one, many = cls(intercept_scaling="auto"), cls(intercept_scaling="auto")
    seen = []
    for x, k in zip(X[:1200], y[:1200].tolist()):
        seen.append(one.intercept_value)
        one.learn_one({j: v for j, v in enumerate(x.tolist()) if v}, k)
    np.testing.assert_allclose(seen, auto_intercept_values(X[:1200]), rtol=1e-12)
    cuts = [0, 1, 7, 300, 301, 1100, 1200]
    for lo, hi in zip(cuts, cuts[1:]):
        many.learn_many(X[lo:hi], y[lo:hi])
    assert_same_state(one.export_state(), many.export_state())
    settled = many.intercept_value
    assert 0.1 < settled < 1.0 and settled == pytest.approx(auto_intercept_values(X)[1200], rel=1e-12)
    many.learn_many(X[1200:] * 100.0, y[1200:])  # ten times the ceiling: a value still learning would reach it
    assert many.intercept_value == settled


@pytest.mark.parametrize(("scale", "expected"), [(1.0, 1.0), (0.01, 0.1), (0.4, 0.4)])
def test_auto_follows_the_features_scale_between_its_floor_and_ceiling(scale, expected):
    """Standard-scaled features give 1, unit-length text rows the floor 0.1; a fixed value stays."""
    rng = np.random.default_rng(0)
    X = rng.choice([-scale, scale], size=(300, 4))
    y = (X[:, 0] > 0).astype(np.int64)
    auto, fixed = MulticlassSVM(), MulticlassSVM(intercept_scaling=0.25)
    for model in (auto, fixed):
        model.learn_many(X, y)
    assert auto.intercept_value == pytest.approx(expected, rel=1e-12) and fixed.intercept_value == 0.25
    assert MulticlassSVM(fit_intercept=False).intercept_value is None


def test_the_intercepts_value_is_checkpointed_and_an_older_state_keeps_the_value_it_learned_with():
    X, y = _scaled_rows(400, seed=5)
    model = MulticlassSVM()
    model.learn_many(X, y)
    restored = streamlearn.learner_from_state(model.export_state())
    assert restored.intercept_value == model.intercept_value != 0.1
    probe = X[:20]
    np.testing.assert_array_equal(restored.decision_function_many(probe), model.decision_function_many(probe))
    state = model.export_state()
    del state["params"]["intercept_scaling"], state["intercept"]  # as saved before the value was learned
    assert streamlearn.learner_from_state(state).intercept_value == 0.1


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), "1", True, "Auto"])
def test_intercept_scaling_must_be_auto_or_a_positive_number(value):
    for cls in (MulticlassSVM, streamlearn.ExtremeSVM, streamlearn.GeneralizedLeastSquares):
        with pytest.raises(ValueError, match="intercept_scaling must be 'auto' or a positive number"):
            cls(intercept_scaling=value)


def test_mixed_members_score_with_the_shared_models_intercept_value():
    """Members whose own rows gave them different values hold the shared one after a mix."""
    from streamlearn.service.mixing import MixState

    X, y = _scaled_rows(600, seed=7)
    a, b = MulticlassSVM(lam=0.01), MulticlassSVM(lam=0.01)
    shared = MixState.of(a)
    a.learn_many(X[:300], y[:300])
    b.learn_many(X[300:] * 0.3, y[300:])
    assert a.intercept_value != b.intercept_value
    for change in [shared.change(a, examples=300), shared.change(b, examples=300)]:
        shared.fold(change)
    for member in (a, b):
        shared.write_into(member)
    assert a.intercept_value == b.intercept_value
    a_scores, b_scores = a.decision_function_many(X[:30]), b.decision_function_many(X[:30])
    np.testing.assert_array_equal(a_scores[:, np.argsort(a.classes)], b_scores[:, np.argsort(b.classes)])


def test_rows_of_huge_values_keep_the_statistics_finite_at_the_ceiling():
    """Rows of values at the largest magnitude accepted (LARGEST_VALUE; beyond it a value is
    refused) neither warn nor leave inf in the state."""
    import warnings

    from streamlearn.kernels.codes import LARGEST_VALUE

    model = MulticlassSVM()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.learn_many(np.array([[LARGEST_VALUE, -LARGEST_VALUE], [1e149, 0.0], [1e140, LARGEST_VALUE]]), [0, 1, 0])
    state = model.export_state()["intercept"]
    assert np.isfinite(state["total"]) and state["rows"] == 3 and model.intercept_value == 1.0


def test_the_row_statistics_kernel_is_numpys_mean_square_of_the_nonzero_values():
    """``rows.mean_squares`` (the intercept's per-row statistics) against NumPy, rows without a nonzero value
    marked -1; and a row alone gives the bits it gives within a batch (learn_one equals learn_many)."""
    import scipy.sparse as sp

    from streamlearn.kernels import compiled

    m = sp.random(30, 12, density=0.3, random_state=2, format="csr")
    m.data[::5] = 0.0  # explicit zeros are not counted
    m.data *= np.random.default_rng(2).choice([1e-3, 1.0, 1e3], len(m.data))
    out = np.zeros(30)
    compiled("rows").mean_squares(m.indptr.astype(np.int64), m.data, out)
    for i, row in enumerate(m.toarray()):
        nonzero = row[row != 0]
        if len(nonzero):
            assert out[i] == pytest.approx(np.mean(nonzero**2), rel=1e-13)
        else:
            assert out[i] == -1.0
        alone = np.zeros(1)
        compiled("rows").mean_squares(np.array([0, m.indptr[i + 1] - m.indptr[i]], np.int64), m.data[m.indptr[i] : m.indptr[i + 1]], alone)
        assert alone[0] == out[i]
    assert (out == -1.0).any()  # the sample has an empty row


def test_the_command_lines_param_takes_both_forms_of_intercept_scaling():
    from streamlearn.service.cli.common import build_learner

    assert build_learner("MulticlassSVM", ["intercept_scaling=0.5"]).intercept_value == 0.5
    assert build_learner("ExtremeSVM", ["intercept_scaling=auto"]).intercept_scaling == "auto"
