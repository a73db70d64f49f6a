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
from streamlearn.base import INTERCEPT_NAME
from streamlearn import (
    MulticlassLogisticRegression,
    MulticlassPGS,
    MulticlassPerceptron,
    MulticlassSVM,
    OneVsRestLogisticRegression,
    OneVsRestPegasos,
)
from helpers import auto_intercept_values

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


def reference_mcid(name, X, y, lam, r, project=False, average_power=0.0, weights=None):
    """Alg. 1 over consecutive groups of r rows; returns (last W, averaged W, steps). The
    average weights step t by t**average_power (Shamir & Zhang's polynomial decay; 0: plain).
    ``weights``: row i's sub-gradient enters the sum w_i times (the divisor stays r)."""
    n, d = X.shape
    weights = np.ones(n) if weights is None else weights
    W = np.zeros((y.max() + 1, d))
    running_sum = np.zeros_like(W)
    total_weight = 0.0
    n_classes, t = 0, 0
    per_class_ball = name.startswith("OneVsRest")
    for first in range(0, n - n % r, r):
        n_classes = max(n_classes, y[first : first + r].max() + 1)
        grads = sum(weights[i] * reference_gradient(name, W[:n_classes], X[i], y[i]) for i in range(first, first + r))
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
    """The learner's weights as a dense (K, d) array in the stream's column order; with an
    intercept, (K, d + 1), its column last (the reference's column of the intercept's values)."""
    W = model.weight_matrix(averaged=averaged)
    columns = [d if name == INTERCEPT_NAME else name for name in model.feature_space.names]
    out = np.zeros((W.shape[0], d + (INTERCEPT_NAME in model.feature_space.names)))
    out[:, columns] = W
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
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_kernel_matches_numpy_reference(cls, lam, r, project, average, average_power, fit_intercept):
    """Without projection or average the kernel takes other roads (no norms kept; softmax
    and one-vs-rest update every class in one pass), so those settings are checked too. The
    intercept is the reference's weight of a last column of the rule's values (helpers.auto_intercept_values)."""
    X, y = make_stream()
    model = cls(lam=lam, batch_size=r, project=project, average=average, average_power=average_power,
                fit_intercept=fit_intercept, adapt=False, bins=None)
    model.renormalize_below = 0.5  # fold the scale into V every few steps
    model.learn_many(sp.csr_matrix(X), y)
    X_seen = np.hstack([X, auto_intercept_values(X)[:, None]]) if fit_intercept else X
    W_ref, W_avg_ref, t = reference_mcid(cls.__name__, X_seen, y, lam, r, project, average_power)
    assert model.n_steps == t
    scale = max(1.0, np.abs(W_ref).max())
    np.testing.assert_allclose(learner_matrix(model, X.shape[1]), W_ref, rtol=0, atol=1e-9 * scale)
    if average:
        np.testing.assert_allclose(learner_matrix(model, X.shape[1], averaged=True), W_avg_ref, rtol=0, atol=1e-9 * scale)


@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("lam", "r", "project", "average"), [(0.05, 1, False, True), (0.01, 3, True, False), (0.2, 4, False, False)])
def test_weighted_kernel_matches_numpy_reference(cls, lam, r, project, average):
    """Issue 77: a row's weight multiplies its sub-gradient in Eq. 14's sum (integer weights: the
    row counted that many times in its group's sum), the tracker and the watch on as by default."""
    X, y = make_stream()
    weights = np.random.default_rng(5).choice([0.25, 1.0, 2.0, 3.0, 7.5], len(y))
    model = cls(lam=lam, batch_size=r, project=project, average=average, average_power=2.0 if average else None,
                fit_intercept=False, bins=None, calibrate=False)
    model.renormalize_below = 0.5
    model.learn_many(sp.csr_matrix(X), y, weights)
    W_ref, W_avg_ref, t = reference_mcid(cls.__name__, X, y, lam, r, project, 2.0 if average else 0.0, weights)
    assert model.n_steps == t and model.n_changes == 0
    scale = max(1.0, np.abs(W_ref).max())
    np.testing.assert_allclose(learner_matrix(model, X.shape[1]), W_ref, rtol=0, atol=1e-9 * scale)
    if average:
        np.testing.assert_allclose(learner_matrix(model, X.shape[1], averaged=True), W_avg_ref, rtol=0, atol=1e-9 * scale)


@pytest.mark.parametrize("cls", [MulticlassSVM, MulticlassLogisticRegression], ids=lambda c: c.__name__)
def test_renormalization_happens_often_and_changes_nothing(cls):
    X, y = make_stream(n=600)
    renormalized, never = cls(lam=0.05, average=True), cls(lam=0.05, average=True)
    renormalized.renormalize_below = 0.5
    never.renormalize_below = 0.0
    renormalized.learn_many(X, y)
    never.learn_many(X, y)
    # Without renormalisation the scale is prod(1 - 1/s) = 1/t. With it the scale is
    # reset to 1 whenever it drops below 0.5, and each reset can raise it at most 3x
    # (shrink factors are >= 2/3 from t = 3 on): reaching >= 0.5 from 1/600 takes >= 5 resets.
    assert never.weight_store.scale[0] < 0.5**8
    assert renormalized.weight_store.scale[0] >= 0.5
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
    assert one.feature_keys == mixed.feature_keys and one.classes == mixed.classes  # (bins' columns included)
    np.testing.assert_array_equal(one.weight_matrix(), mixed.weight_matrix())
    np.testing.assert_array_equal(one.weight_matrix(averaged=True), mixed.weight_matrix(averaged=True))


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


@pytest.mark.parametrize("bad", [-1.0, 11.0, float("nan"), "2", True])
def test_average_power_outside_its_domain_is_refused(bad):
    with pytest.raises(ValueError, match="average_power"):
        MulticlassSVM(average=True, average_power=bad)


def test_average_power_without_an_average_is_refused():
    with pytest.raises(ValueError, match="needs average=True"):
        MulticlassSVM(average=False, average_power=2.0)


def test_the_defaults_are_the_cross_data_set_winner():
    """Each learner's defaults are the configuration bench/defaults_bench.py chose (the smallest
    mean validation regret over the data sets it takes, one pass; bench/results/defaults.json);
    an explicit average=False means the last iterate, with no power to give."""
    import json
    import pathlib

    import streamlearn

    results = json.loads((pathlib.Path(__file__).resolve().parents[1] / "bench/results/defaults.json").read_text())
    assert set(results["learners"]) == {"MulticlassSVM", "MulticlassLogisticRegression", "MulticlassPerceptron",
                                        "OneVsRestPegasos", "OneVsRestLogisticRegression", "MulticlassPGS", "ExtremeSVM",
                                        "GeneralizedLeastSquares", "CalibratedLeastSquares", "StagewiseRegression",
                                        "GeneralizedLeastSquares.fit", "CalibratedLeastSquares.fit"}
    for name, block in results["learners"].items():
        model, chosen = getattr(streamlearn, name.removesuffix(".fit"))(), json.loads(block["default"])
        if name.endswith(".fit"):  # the batch fit's own default
            assert model.fit_ridge == chosen, name
            continue
        if name == "ExtremeSVM":  # its step: Pegasos' (the grid's key without eta0, or "pegasos") or 002's schedule
            assert model.step == (chosen.pop("eta0", "pegasos"), chosen.pop("eta_decay", None)), name
        if hasattr(model, "stream_ridge"):  # least squares: the stream's ridge (fit keeps 004's parameter-free one)
            ridge = {k: v for k, v in chosen.items() if k in ("ridge", "trace_ridge") and v is not None}
            assert model.stream_ridge == ridge, name
            chosen = {k: v for k, v in chosen.items() if k not in ("ridge", "trace_ridge")}
        for parameter, value in chosen.items():
            attribute = {"lam": "selected_lam" if hasattr(model, "selected_lam") else "lam",
                         "average_power": "_average_power", "average": "_averaged" if name == "ExtremeSVM" else "average"
                         }.get(parameter, parameter)
            assert getattr(model, attribute) == value, (name, parameter)
    assert MulticlassSVM(average=False).average_power_in_use == 0.0


def test_the_options_are_the_protocols_choice():
    """Each learner's adapt / fit_intercept / bins (and intercept value) are what bench/options_bench.py
    chose over the stationary sets and drifting streams together (bench/results/options*.json)."""
    import json
    import pathlib

    import streamlearn

    results = pathlib.Path(__file__).resolve().parents[1] / "bench/results"
    checked = set()
    for name in ("options.json", "options-families.json"):
        for learner, block in json.loads((results / name).read_text())["learners"].items():
            model = getattr(streamlearn, learner)()
            for parameter, value in json.loads(block["default"]).items():
                assert getattr(model, parameter) == value, (learner, parameter)
            checked.add(learner)
    assert {"MulticlassSVM", "MulticlassLogisticRegression", "ExtremeSVM", "MulticlassPGS"} <= checked


def test_weighted_average_survives_export_and_pickle():
    X, y = make_stream(n=120)
    model = MulticlassSVM(lam=0.05, average=True, average_power=2.0)
    model.learn_many(X, y)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict_proba_many(X).to_numpy(), model.predict_proba_many(X).to_numpy())
    assert restored.average_weight == model.average_weight == sum(t**2.0 for t in range(1, 121))


MCID_LEARNERS = [MulticlassSVM, MulticlassLogisticRegression, MulticlassPerceptron, OneVsRestPegasos, OneVsRestLogisticRegression]


#: learners whose step writes each row's scores (MCID, and PGS with each of its iterates)
SCORING_STEPS = [
    *[(cls, {"lam": 0.05, **params}) for cls in MCID_LEARNERS
      for params in ({}, {"average": True, "average_power": 2.0}, {"batch_size": 3, "average": True, "project": True},
                     {"batch_size": 4})],
    (MulticlassPGS, {"sigma": 0.05}), (MulticlassPGS, {"sigma": 0.05, "p": 1.5, "iterate": "average", "batch_size": 3}),
    (MulticlassPGS, {"sigma": 0.05, "p": 1.5, "regularizer": "block", "iterate": "random", "seed": 2}),
]


@pytest.mark.parametrize("cls, params", SCORING_STEPS, ids=lambda v: v.__name__ if isinstance(v, type) else "-".join(map(str, v.values())))
def test_score_and_learn_scores_each_example_as_decision_function_one_before_learn_one(cls, params):
    """The runner's test-then-train scores come out of the learning step itself: each example
    scored by the model as it stands when it arrives, over the classes registered before it
    (-inf for the others), bit for bit what a decision_function_one / learn_one loop gives,
    also for mini-batches whose rows wait for their group across calls."""
    rng = np.random.default_rng(12)
    n = 64
    X = rng.normal(size=(n, 5)) * (rng.random((n, 5)) < 0.7)
    y = np.concatenate([[7, 7, 3], rng.choice([7, 3, 11], 20), [5], rng.choice([7, 3, 11, 5], n - 24)])
    fused, loop = cls(**params), cls(**params)
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

