"""Every learner and regressor, with each of its test configurations, restored after it has
learned a real data set (several passes over scikit-learn's ``load_digits``): the restored
model predicts and scores bit-identically to the live one — from ``export_state()`` and
through a checkpoint file — and goes on learning identically.

Restoring only freshly-started models hid a StagewiseRegression whose restored
FeatureSampler re-ranked the features of each batch it predicted (86 % live, 7 % restored)."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn.service.checkpoint import CheckpointStore
from helpers import assert_same_state

CASES = [(name, i, params)
         for name, cls in sorted({**streamlearn.LEARNERS, **streamlearn.REGRESSORS}.items())
         for i, params in enumerate(cls._unit_test_params())]


@pytest.fixture(scope="module")
def digits():
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order] / 16.0, y[order]
    return X[:1400], y[:1400], X[1400:], y[1400:]


def _targets(model, y: np.ndarray):
    """The digit for a multi-class learner, even/odd in the learner's two classes for a binary
    one, the digit as a number for a regressor."""
    if name_of(model) in streamlearn.REGRESSORS:
        return y.astype(np.float64)
    if not model._multiclass:
        negative, positive = model._get_params()["classes"]
        return np.where(y % 2 == 0, positive, negative)
    return y


def name_of(model) -> str:
    return type(model).__name__


def _learn(model, X, y, passes: int) -> None:
    targets = _targets(model, y)
    for _ in range(passes):
        for start in range(0, len(y), 250):
            model.learn_many(X[start : start + 250], targets[start : start + 250])


def _outputs(model, X) -> list[np.ndarray]:
    """Everything a model answers about X, as arrays to compare bit for bit."""
    if name_of(model) in streamlearn.REGRESSORS:
        return [np.asarray(model.predict_many(X), np.float64)]
    return [model.decision_function_many(X), model.predict_proba_many(X).to_numpy(),
            np.asarray(model.predict_many(X).tolist())]


@pytest.mark.parametrize("name,variant,params", CASES, ids=[f"{n}-{i}" for n, i, _ in CASES])
def test_a_model_that_learned_digits_restores_bit_identically(tmp_path, digits, name, variant, params):
    X, y, X_test, y_test = digits
    cls = {**streamlearn.LEARNERS, **streamlearn.REGRESSORS}[name]
    model = cls(**params)
    _learn(model, X, y, passes=3)
    for x, target in zip(X[:3], _targets(model, y[:3])):  # leave examples waiting for a mini-batch
        model.learn_one(dict(enumerate(x)), target.item())

    live = _outputs(model, X_test)
    if name in streamlearn.REGRESSORS:
        assert np.ptp(live[0]) > 0, "the regressor learned nothing"
    else:  # a model that learned nothing would make the comparison below empty
        chance = 1.0 / len(model.classes)
        accuracy = np.mean(live[2] == _targets(model, y_test))
        assert accuracy > chance + 0.1, f"{name} reached only {accuracy:.3f}"

    from_state = streamlearn.learner_from_state(model.export_state())
    store = CheckpointStore(tmp_path)
    store.save({"learner": model.export_state(), "position": None})
    from_file = streamlearn.learner_from_state(store.load_latest()["learner"])
    for restored in (from_state, from_file):
        assert_same_state(model.export_state(), restored.export_state())
        for a, b in zip(live, _outputs(restored, X_test)):
            assert a.tobytes() == b.tobytes(), f"{name}: the restored model answers differently"

    if not model.resumes_exactly:  # an index rebuilt on restore: the same model, not the same future
        return
    _learn(model, X[:600], y[:600], passes=1)  # and learning goes on identically
    _learn(from_file, X[:600], y[:600], passes=1)
    assert_same_state(model.export_state(), from_file.export_state())
    for a, b in zip(_outputs(model, X_test), _outputs(from_file, X_test)):
        assert a.tobytes() == b.tobytes()
