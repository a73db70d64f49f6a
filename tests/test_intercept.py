"""The MCID learners' intercept (``fit_intercept=True``, the default): a reserved feature of value 1
on every row the model sees, after scaling. The kernel against the NumPy reference with a column of
ones, and learn_many against the learn_one loop, are in test_mcid_reference.py."""

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
