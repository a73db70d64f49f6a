"""Per-example weights (issue 77, streamlearn.sample_weights): every learner honours them
(learn_one's ``w``, learn_many's ``w``; a learner that says it does not refuses any weight but 1), bad weights
are refused with the model unchanged, a weight of 0 changes no bit, learn_many equals the
learn_one loop bit for bit with weights, pending weights survive a checkpoint, and integer
weights against repeated rows. The kernel against the NumPy reference of Eq. 14 with weights:
``test_mcid_reference.py::test_weighted_kernel_matches_numpy_reference``."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import streamlearn
from streamlearn import InvalidInputError, MulticlassLogisticRegression, MulticlassSVM
from streamlearn.base import StreamClassifier
from streamlearn.mcid.solver import MCIDLearner
from helpers import assert_same_state

WEIGHTED = [cls for cls in streamlearn.LEARNERS.values() if cls.takes_weights]
MCID = [cls for cls in WEIGHTED if issubclass(cls, MCIDLearner)]
WINDOW = [streamlearn.LpNormMulticlassSVM, streamlearn.CalibratedLeastSquares, streamlearn.StagewiseRegression]


class UnweightedSVM(MulticlassSVM):
    """A learner that says it cannot honour weights (a user's subclass, say): refused."""

    takes_weights = False


UNWEIGHTED = [UnweightedSVM]
MCID_SETTINGS = [{}, {"batch_size": 3}, {"lam": "auto", "batch_size": 2}, {"standardize": True}, {"n_bits": 10},
                 {"adapt": False, "calibrate": False, "bins": None}]
EXTREME_SETTINGS = [{}, {"store": "sparse", "batch_size": 3}, {"store": "dense", "balance": True}, {"oracle": "exact", "adapt": False},
                    {"oracle": "graph", "store": "sparse", "n_candidates": 3, "index_every": 50}]
PGS_SETTINGS = [{}, {"batch_size": 3}, {"iterate": "average", "p": 1.5}, {"adapt": False, "loss": "softmax"}]
LEAST_SQUARES_SETTINGS = [{}, {"batch_size": 3}, {"link": "identity", "batch_size": 1}, {"standardize": True, "batch_size": 5}]
CASES = ([(cls, setting) for cls in MCID for setting in MCID_SETTINGS] + [(streamlearn.ExtremeSVM, s) for s in EXTREME_SETTINGS]
         + [(streamlearn.GeneralizedLeastSquares, s) for s in LEAST_SQUARES_SETTINGS]
         + [(streamlearn.MulticlassPGS, s) for s in PGS_SETTINGS]
         + [(cls, s) for cls in WINDOW for s in ({"refit_every": 7}, {"refit_every": 50, "window": 30})])


def stream(n=400, d=6, k=4, seed=0):
    """Dict rows whose features and classes come late, and weights with zeros among them."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.0, size=(k + 1, d + 2))
    y = rng.integers(0, k, n)
    y[n // 2 :: 50] = k  # a class first met in the second half
    X = centres[y] + rng.normal(size=(n, d + 2))
    rows = [{f"f{j}": float(v) for j, v in enumerate(x[: d + (i > n // 3) * 2])} for i, x in enumerate(X)]
    w = rng.choice([0.0, 0.5, 1.0, 1.0, 2.0, 3.0], n)
    return rows, y, w


def state_of(model) -> bytes:
    return pickle.dumps(model.export_state())


def test_every_learner_takes_weights_and_the_base_refuses_them():
    assert WEIGHTED == list(streamlearn.LEARNERS.values())
    assert not StreamClassifier.takes_weights  # a learner that does not say it honours them refuses them


@pytest.mark.parametrize("cls", UNWEIGHTED, ids=lambda c: c.__name__)
def test_a_learner_that_cannot_honour_weights_refuses_them_and_takes_weight_one(cls):
    rows, y, _ = stream(n=30)
    model = cls(**next(cls._unit_test_params()))
    if model.max_classes == 2:  # the binary learner's (negative, positive) pair
        y = np.asarray(model.classes_)[y % 2]
    model.learn_many(rows[:10], y[:10], np.ones(10))  # all 1: the unweighted road
    model.learn_one(rows[10], y[10], w=1.0)
    before = state_of(model)
    with pytest.raises(InvalidInputError, match="does not take per-example weights"):
        model.learn_one(rows[11], y[11], w=2.0)
    with pytest.raises(InvalidInputError, match="does not take per-example weights"):
        model.learn_many(rows[11:20], y[11:20], np.full(9, 0.5))
    assert state_of(model) == before


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf, "2", None, [1.0]])
def test_a_bad_weight_is_refused_and_the_model_is_unchanged(bad):
    rows, y, _ = stream(n=40)
    model = MulticlassSVM()
    model.learn_many(rows[:20], y[:20])
    before = state_of(model)
    with pytest.raises(InvalidInputError, match="weight"):
        model.learn_one(rows[20], y[20], w=bad)
    if bad is not None:
        weights = np.ones(20, dtype=object)
        weights[7] = bad
        with pytest.raises(InvalidInputError, match="weight") as refused:
            model.learn_many(rows[20:], y[20:], weights)
        assert refused.value.row in (None, 7)
    with pytest.raises(InvalidInputError, match="rows but there are 3 weights"):
        model.learn_many(rows[20:], y[20:], [1.0, 2.0, 3.0])
    assert state_of(model) == before


@pytest.mark.parametrize(("cls", "setting"), CASES, ids=str)
def test_a_weight_of_zero_changes_no_bit(cls, setting):
    """Rows of weight 0 — some with features and a class nothing else brings — leave the model as
    the rows of positive weight alone make it (the state, vocabulary and classes included)."""
    rows, y, w = stream()
    w[[5, 250]] = 0.0
    rows[5]["only-here"], y[250] = 1.0, 99
    weighted, alone = cls(**setting), cls(**setting)
    weighted.learn_many(rows, y, w)
    kept = np.flatnonzero(w > 0)
    alone.learn_many([rows[i] for i in kept], y[kept], w[kept])
    assert 99 not in weighted.classes and "only-here" not in weighted.feature_keys
    assert state_of(weighted) == state_of(alone)
    for x, label in zip(rows[:30], y[:30]):
        weighted.learn_one(x, label, w=0.0)
    assert state_of(weighted) == state_of(alone)


@pytest.mark.parametrize(("cls", "setting"), CASES, ids=str)
def test_learn_many_equals_the_learn_one_loop_with_weights_bit_for_bit(cls, setting):
    """One batch, batches cut at random, and the learn_one loop (weight-1 rows on the C road where
    it serves them, weighted ones on the general road) give the same model and probabilities."""
    rows, y, w = stream(seed=1)
    whole, cut, loop = cls(**setting), cls(**setting), cls(**setting)
    whole.learn_many(rows, y, w)
    cuts = np.sort(np.random.default_rng(2).choice(np.arange(1, len(y)), 9, replace=False))
    for lo, hi in zip([0, *cuts], [*cuts, len(y)]):
        cut.learn_many(rows[lo:hi], y[lo:hi], w[lo:hi])
    for x, label, weight in zip(rows, y, w):
        loop.learn_one(x, label, w=weight)
    if cls is streamlearn.ExtremeSVM:  # (its sparse store's layout follows the calls; its model does not)
        scores = [np.asarray(model.decision_function_many(rows)) for model in (whole, cut, loop)]
        assert np.array_equal(scores[0], scores[1]) and np.array_equal(scores[0], scores[2])
        assert whole.n_steps == cut.n_steps == loop.n_steps
    else:  # (compared as values: a pickle also records which arrays are one object)
        assert_same_state(whole.export_state(), cut.export_state())
        assert_same_state(whole.export_state(), loop.export_state())
    assert whole.predict_proba_one(rows[3]) == loop.predict_proba_one(rows[3])


def test_weights_move_the_model_and_scale_its_first_step():
    """From W = 0 every row's sub-gradient is the same whatever the weight's road: weight k on the
    first step is k times weight 1's step (no shrink and no average at t = 1)."""
    x, first = {"a": 1.0, "b": -0.5}, {"a": 0.2, "b": 1.0}
    settings = {"adapt": False, "calibrate": False, "fit_intercept": False, "bins": None, "average": False}
    one, three = MulticlassLogisticRegression(**settings), MulticlassLogisticRegression(**settings)
    for model, k in ((one, 1.0), (three, 3.0)):
        model.learn_one(first, "p")
        model.learn_one(x, "q", w=k)
    assert not np.array_equal(one.weight_matrix(), three.weight_matrix())
    single = MulticlassSVM(**settings)
    tripled = MulticlassSVM(**settings)
    single.learn_many([first, x], ["p", "q"], [1.0, 1.0])
    tripled.learn_many([first, x], ["p", "q"], [3.0, 3.0])
    np.testing.assert_allclose(tripled.weight_matrix()[:, :2], 3 * single.weight_matrix()[:, :2], rtol=1e-15)


@pytest.mark.parametrize("cls", WEIGHTED, ids=lambda c: c.__name__)
def test_an_integer_weight_is_close_to_repeating_the_row_after_a_stream(cls):
    """How far weight k ≡ k repeats holds after the first step: a repeat is a step of its own (the
    schedule and the shrink move), so the models differ, yet on 4,000 rows of weights 1–3 against
    the rows repeated, held-out predictions agree on ≥ 96 % (measured 98.0–98.4 %) and accuracy
    is within 1 point."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(4, 10)) * 1.5
    y, y_test = rng.integers(0, 4, 4000), rng.integers(0, 4, 2000)
    X, X_test = centres[y] + rng.normal(size=(4000, 10)), centres[y_test] + rng.normal(size=(2000, 10))
    w = rng.integers(1, 4, 4000).astype(float)
    weighted, repeated = cls(), cls()
    if weighted.max_classes == 2:  # the binary learner's (negative, positive) pair
        y, y_test = np.asarray(weighted.classes_)[y % 2], np.asarray(weighted.classes_)[y_test % 2]
    weighted.learn_many(X, y, w)
    copies = np.repeat(np.arange(4000), w.astype(int))
    repeated.learn_many(X[copies], y[copies])
    a, b = np.asarray(weighted.predict_many(X_test)), np.asarray(repeated.predict_many(X_test))
    assert (a == b).mean() >= 0.96
    assert abs((a == y_test).mean() - (b == y_test).mean()) <= 0.01


def test_pending_weights_survive_a_checkpoint_and_old_states_load():
    rows, y, w = stream(n=60, seed=3)
    w[28:31] = 2.5  # rows left pending at the cut
    uninterrupted, first = MulticlassSVM(batch_size=4), MulticlassSVM(batch_size=4)
    uninterrupted.learn_many(rows, y, w)
    first.learn_many(rows[:31], y[:31], w[:31])
    state = first.export_state()
    assert first.n_pending and "w" in state["pending"]
    resumed = MulticlassSVM.from_state(state)
    resumed.learn_many(rows[31:], y[31:], w[31:])
    assert state_of(resumed) == state_of(uninterrupted)
    plain = MulticlassSVM(batch_size=4)
    plain.learn_many(rows[:30], y[:30])
    old = plain.export_state()
    assert "w" not in old["pending"]  # an unweighted state is written as before weights existed
    assert state_of(MulticlassSVM.from_state(old)) == state_of(plain)


@pytest.mark.parametrize("store", ["sparse", "dense"])
def test_extreme_svm_takes_a_weight_as_its_balance_weighs_a_row(store):
    """ExtremeSVM's step already took a weight per row (``balance``, tested against its reference
    in ``test_memoir.py``): the running balance given as ``w`` makes the balanced model, bit for bit."""
    from streamlearn.sample_weights import running_balance

    rows, y, _ = stream(seed=4)
    balanced, given = streamlearn.ExtremeSVM(store=store, balance=True), streamlearn.ExtremeSVM(store=store)
    balanced.learn_many(rows, y)
    given.learn_many(rows, y, running_balance(np.zeros(y.max() + 1), y, 0))
    plain = streamlearn.ExtremeSVM(store=store)
    plain.learn_many(rows, y)
    scores = [np.asarray(model.decision_function_many(rows)) for model in (balanced, given, plain)]
    assert np.array_equal(scores[0], scores[1]) and not np.array_equal(scores[0], scores[2])


@pytest.mark.parametrize(("name", "params", "atol"), [
    ("CalibratedLeastSquares", {}, 1e-9), ("StagewiseRegression", {}, 1e-12), ("LpNormMulticlassSVM", {"tol": 1e-8}, 1e-5)])
def test_a_batch_solvers_integer_weights_are_the_rows_repeated(name, params, atol):
    """The window learners' batch problems with weights: least squares with ``Σ w_i`` moments (004 Alg. 2, 3),
    the ℓp-SVM's hinge ``C Σ w_i ξ_i`` (001; its solver stops at a duality gap: ``tol``)."""
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(3, 5))
    y = rng.integers(0, 3, 300)
    X, w = centres[y] + rng.normal(size=(300, 5)), rng.integers(0, 4, 300).astype(float)
    make = streamlearn.LEARNERS[name]
    weighted = make(**params).fit(X, y, w=w)
    repeats = make(**params).fit(np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int)))
    np.testing.assert_allclose(weighted.decision_function_many(X), repeats.decision_function_many(X), atol=atol)
    plain = make(**params).fit(X, y).decision_function_many(X)
    assert np.abs(weighted.decision_function_many(X) - plain).max() > 100 * atol


@pytest.mark.parametrize("link", ["identity", "softmax"])
def test_generalized_least_squares_integer_weights_are_the_rows_repeated(link):
    """The weighted problem of 004 Alg. 1: ``Σ w x xᵀ``, ``Σ w x yᵀ`` and the weighted gradient, so an
    integer weight is the row repeated — exactly in ``fit`` and in the identity link's stream (its
    model is the closed form of the sums); the softmax stream takes a step per group, so repeats that
    fall in other groups give another path (not pinned)."""
    rng = np.random.default_rng(4)
    X, y = rng.normal(size=(240, 5)), rng.integers(0, 3, 240)
    w = rng.integers(0, 4, 240).astype(float)
    repeated_X, repeated_y = np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int))
    weighted = streamlearn.GeneralizedLeastSquares(link=link).fit(X, y, w=w)
    repeats = streamlearn.GeneralizedLeastSquares(link=link).fit(repeated_X, repeated_y)
    np.testing.assert_allclose(weighted.decision_function_many(X), repeats.decision_function_many(X), atol=1e-12)
    assert not np.allclose(weighted.decision_function_many(X),
                           streamlearn.GeneralizedLeastSquares(link=link).fit(X, y).decision_function_many(X))
    if link == "identity":
        streamed, streamed_repeats = (streamlearn.GeneralizedLeastSquares(link=link, batch_size=7) for _ in range(2))
        streamed.learn_many(X, y, w)
        streamed_repeats.learn_many(repeated_X, repeated_y)
        streamed.flush(), streamed_repeats.flush()
        np.testing.assert_allclose(streamed.decision_function_many(X), streamed_repeats.decision_function_many(X), atol=1e-12)


@pytest.mark.parametrize(("name", "settings"), [
    ("MulticlassPGS", {"p": 2.0, "adapt": False, "fit_intercept": False, "batch_size": 2}),  # p = 2: ∇r* is linear
    ("PrimalGradientSolver", {"p": 2.0, "adapt": False, "fit_intercept": False, "batch_size": 2}),
    ("ExtremeSVM", {"adapt": False, "batch_size": 2})])
def test_in_every_stochastic_family_weight_k_on_the_first_step_is_k_times_its_step(name, settings):
    """The PGS (003 Fig. 1 line 7 from Lam = 0) and MEMOIR (002) steps: a first group of weight k moves the
    model k times as far as weight 1's, as k repeats of it in that group would (the batch solvers'
    weights are repeats in their problem: test_a_batch_solvers_integer_weights_are_the_rows_repeated)."""
    X, probe = [{"a": 1.0, "b": -0.5}, {"a": 0.2, "b": 1.0}], [{"a": 0.3, "b": 0.7}]
    model = streamlearn.LEARNERS[name](**settings)
    y = list(model.classes_) if model.max_classes == 2 else ["p", "q"]
    one, three = streamlearn.LEARNERS[name](**settings), streamlearn.LEARNERS[name](**settings)
    one.learn_many(X, y, [1.0, 1.0])
    three.learn_many(X, y, [3.0, 3.0])
    scores = one.decision_function_many(probe)
    assert np.abs(scores).max() > 0
    np.testing.assert_allclose(three.decision_function_many(probe), 3.0 * scores, rtol=1e-12)
