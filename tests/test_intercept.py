"""Every learner's intercept (``fit_intercept=True``, the default): a reserved feature of value
INTERCEPT_VALUE on every row the model sees, after scaling. The kernels against the NumPy references with a column of
INTERCEPT_VALUE are in test_mcid_reference.py, test_pgs_reference.py and test_memoir.py."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn import MulticlassLogisticRegression, MulticlassSVM, OneVsRestPegasos
from streamlearn.base import INTERCEPT_NAME


@pytest.mark.parametrize("cls", [MulticlassSVM, MulticlassLogisticRegression, OneVsRestPegasos])
def test_a_threshold_away_from_the_origin_needs_the_intercept(cls):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 2))
    y = (X[:, 0] > 1.0).astype(np.int64)  # 16 % positives, a boundary that misses the origin
    with_, without = cls(), cls(fit_intercept=False)
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
