"""The least-squares family (004_6d6f30a18e3b636b.txt, Alg. 1 and Alg. 2) against closed
forms, scipy's L-BFGS and a brute-force simplex projection."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.optimize

from streamlearn import (CalibratedLeastSquares, FeatureSampler, GeneralizedLeastSquares, RandomFourierFeatures,
                         StagewiseRegression)
from streamlearn.base import INTERCEPT_NAME
from streamlearn.errors import InvalidInputError, InvalidParameterError
from streamlearn.leastsquares import log_loss, project_simplex


def blobs(n=300, d=6, K=3, seed=0, noise=1.5):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(K, d)) * 1.5
    y = rng.integers(0, K, n)
    X = centers[y] + noise * rng.normal(size=(n, d))
    first = {}
    y = np.array([first.setdefault(v, len(first)) for v in y])  # first-appearance order, like LabelSpace
    return X, y


def weights(model, d):
    """W as (d, K) in feature order (the learner's columns follow the vocabulary)."""
    W = np.zeros((d, len(model.classes)))
    W[model.feature_space.names] = model.weights
    return W


def test_identity_link_is_the_closed_form_least_squares_solution():
    X, y = blobs()
    model = GeneralizedLeastSquares(link="identity", ridge=1e-12, fit_intercept=False).fit(X, y)
    Y = np.eye(3)[y]
    expected = np.linalg.lstsq(X, Y, rcond=None)[0]
    np.testing.assert_allclose(weights(model, X.shape[1]), expected, rtol=1e-7, atol=1e-9)


def test_ridge_is_relative_to_the_features_own_scale():
    """The ridge is ``ridge`` times the mean diagonal of Σ̂, so rescaling every feature by c
    rescales the weights by 1/c, whatever c: small features (random Fourier features are
    ~1/sqrt(m)) get no heavier a ridge than large ones. Fewer examples than features, so
    the ridge decides the solution."""
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(8, 20)), np.arange(8) % 3
    for c in (1e-3, 1e3):
        base = GeneralizedLeastSquares(link="identity", ridge=1e-3, fit_intercept=False).fit(X, y)
        scaled = GeneralizedLeastSquares(link="identity", ridge=1e-3, fit_intercept=False).fit(c * X, y)
        np.testing.assert_allclose(weights(scaled, 20), weights(base, 20) / c, rtol=1e-9, atol=0)


def test_identity_link_stream_is_recursive_least_squares():
    """Fed in batches, the stream keeps the same sufficient statistics as one batch, and the
    identity link's weights are the closed form on everything seen."""
    X, y = blobs(n=400)
    one = GeneralizedLeastSquares(link="identity", batch_size=400, ridge=1e-12, fit_intercept=False)
    one.learn_many(X, y)
    chunked = GeneralizedLeastSquares(link="identity", batch_size=400, ridge=1e-12, fit_intercept=False)
    for start in range(0, 400, 37):  # uneven chunks; the pending mechanism forms one group of 400
        chunked.learn_many(X[start : start + 37], y[start : start + 37])
    np.testing.assert_array_equal(one.XtX, chunked.XtX)
    steps = GeneralizedLeastSquares(link="identity", batch_size=25, ridge=1e-12, fit_intercept=False)
    for start in range(0, 400, 25):
        steps.learn_many(X[start : start + 25], y[start : start + 25])
    np.testing.assert_allclose(steps.XtX, X.T @ X, rtol=1e-12)
    np.testing.assert_allclose(steps.XtY, X.T @ np.eye(3)[y], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights(steps, 6), np.linalg.lstsq(X, np.eye(3)[y], rcond=None)[0], rtol=1e-7, atol=1e-9)


def test_softmax_link_decreases_the_log_loss_every_iteration_and_reaches_lbfgs():
    X, y = blobs(n=200, d=4, K=3, seed=2, noise=2.0)
    model = GeneralizedLeastSquares(link="softmax", ridge=1e-12, fit_intercept=False).fit(X, y, max_iter=2000, tol=1e-15)
    history = np.array(model.history_)
    assert len(history) > 5
    assert np.all(np.diff(history) <= 1e-15)  # Theorem 1: monotone with the 1/L step

    def loss(w):
        W = w.reshape(4, 3)
        S = X @ W
        P = np.exp(S - S.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        return log_loss(S, y), (X.T @ (P - np.eye(3)[y]) / len(y)).ravel()

    best = scipy.optimize.minimize(loss, np.zeros(12), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15})
    assert history[-1] == pytest.approx(best.fun, abs=1e-9)
    W_bfgs = best.x.reshape(4, 3)
    probabilities = model.predict_proba_many(X).to_numpy()
    expected = np.exp(X @ W_bfgs - (X @ W_bfgs).max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)


def test_fit_callback_sees_every_iterate():
    """The callback gets each iteration's model: its log-loss is the history's entry, and
    the model after the last call is the fitted one."""
    X, y = blobs(n=150, d=4, seed=4)
    seen = []
    model = GeneralizedLeastSquares(link="softmax").fit(
        X, y, max_iter=7, tol=0.0, callback=lambda it, m: seen.append((it, m.decision_function_many(X).copy())))
    assert [it for it, _ in seen] == list(range(1, 8))
    for it, scores in seen:
        assert log_loss(scores, y) == pytest.approx(model.history_[it], rel=1e-12)
    np.testing.assert_array_equal(seen[-1][1], model.decision_function_many(X))


@pytest.mark.parametrize("make", [
    lambda stages: CalibratedLeastSquares(stages=stages),
    lambda stages: StagewiseRegression(RandomFourierFeatures(bandwidth=2.0, seed=3), block_size=6, stages=stages),
], ids=["calibrated", "stagewise"])
def test_staged_fit_callback_sees_each_prefix_of_stages(make):
    """After stage t the callback's model scores as a fit of t stages does, so a held-out
    choice of the stage count needs one fit."""
    X, y = blobs(n=200, d=4, seed=6)
    seen = []
    make(4).fit(X, y, callback=lambda t, m: seen.append((t, m.decision_function_many(X).copy())))
    assert [t for t, _ in seen] == [1, 2, 3, 4]
    for t, scores in seen:
        np.testing.assert_allclose(scores, make(t).fit(X, y).decision_function_many(X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("params, ridge_of", [
    ({}, lambda S: 1e-3 * np.trace(S) / len(S)),
    ({"trace_ridge": 0.3}, lambda S: 0.3 * np.trace(S)),
    ({"ridge": 0.5}, lambda S: 0.5 * np.trace(S) / len(S)),
], ids=["default-ridge", "trace-ridge", "relative-ridge"])
def test_a_softmax_stream_step_is_eq_6_with_its_ridge(params, ridge_of):
    """Each stream step is Eq. 6 of 004 on the running Σ̂ plus the ridge: ``trace_ridge ·
    tr(Σ̂)``, or ``ridge`` times the mean diagonal (1e-3 by default). NumPy reference of the steps."""
    X, y = blobs(n=60, d=5, seed=9)
    model = GeneralizedLeastSquares(batch_size=20, fit_intercept=False, **params)
    model.learn_many(X, y)
    K, XtX, W = 3, np.zeros((5, 5)), np.zeros((5, 3))
    for start in range(0, 60, 20):
        Xb, Y = X[start : start + 20], np.eye(K)[y[start : start + 20]]
        XtX += Xb.T @ Xb
        S = XtX / (start + 20)
        scores = Xb @ W
        P = np.exp(scores - scores.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        W -= np.linalg.solve(S + ridge_of(S) * np.eye(5), Xb.T @ (P - Y) / 20)
    np.testing.assert_allclose(weights(model, 5), W, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cls", [GeneralizedLeastSquares, CalibratedLeastSquares, StagewiseRegression])
def test_a_ridge_and_a_trace_ridge_together_are_refused(cls):
    with pytest.raises(InvalidParameterError, match="ridge or trace_ridge, not both"):
        cls(ridge=1.0, trace_ridge=0.1)
    if cls is StagewiseRegression:  # it has no ridge of its own to fall back on
        with pytest.raises(InvalidParameterError, match="give ridge .* or trace_ridge"):
            cls(ridge=None, trace_ridge=None)
    else:  # neither: the stream's default trace ridge (and fit's parameter-free ridge)
        assert cls(ridge=None, trace_ridge=None).stream_ridge == cls.default_stream_ridge
    with pytest.raises(ValueError, match="trace_ridge"):
        cls(ridge=None, trace_ridge=0.0)


def test_calibrated_least_squares_with_a_trace_ridge_is_alg_2_with_that_ridge_on_both_fits():
    """One stage of Alg. 2 (Eq. 10, then Eq. 11 and the simplex projection) with
    ``Σ̂ + trace_ridge · tr(Σ̂) · I`` in both solves. NumPy reference."""
    X, y = blobs(n=200, d=5, seed=2)
    model = CalibratedLeastSquares(stages=1, ridge=None, trace_ridge=0.05, fit_intercept=False).fit(X, y)
    Y = np.eye(3)[y]

    def ridged_solve(A, B):
        S = A.T @ A / len(A)
        return np.linalg.solve(S + 0.05 * np.trace(S) * np.eye(len(S)), A.T @ B / len(A))

    tilde = X @ ridged_solve(X, Y)
    U = np.hstack([tilde, tilde**2, tilde**3])
    np.testing.assert_allclose(model.decision_function_many(X), project_simplex(U @ ridged_solve(U, Y)), rtol=1e-9, atol=1e-12)


def test_stagewise_with_a_trace_ridge_is_ridge_regression_with_that_ridge():
    X, y = blobs(n=300, d=6)
    model = StagewiseRegression(FeatureSampler(), block_size=6, stages=1, ridge=None, trace_ridge=0.1).fit(X, y)
    S = X.T @ X / 300
    W = np.linalg.solve(S + 0.1 * np.trace(S) * np.eye(6), X.T @ np.eye(3)[y] / 300)
    np.testing.assert_allclose(model.decision_function_many(X), X @ W, rtol=1e-9, atol=1e-12)


def test_softmax_stream_learns():
    X, y = blobs(n=3000, seed=3, noise=1.0)
    model = GeneralizedLeastSquares(batch_size=50)
    model.learn_many(X[:2500], y[:2500])
    assert np.mean(model.predict_many(X[2500:]).astype(int) == y[2500:]) > 0.9


@pytest.mark.parametrize("k", [2, 3, 5, 8])
def test_simplex_projection_is_the_euclidean_projection(k):
    rng = np.random.default_rng(k)
    V = rng.normal(size=(20, k)) * 2
    P = project_simplex(V)
    assert np.allclose(P.sum(axis=1), 1) and (P >= 0).all()
    for v, p in zip(V, P):
        qp = scipy.optimize.minimize(lambda z: ((z - v) ** 2).sum(), np.full(k, 1 / k), jac=lambda z: 2 * (z - v),
                                     method="SLSQP", bounds=[(0, None)] * k,
                                     constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1, "jac": lambda z: np.ones(k)}],
                                     options={"ftol": 1e-14, "maxiter": 500})
        np.testing.assert_allclose(p, qp.x, atol=1e-6)
        # and nothing on the simplex is closer (random points)
        others = rng.dirichlet(np.ones(k), 200)
        assert ((others - v) ** 2).sum(axis=1).min() >= ((p - v) ** 2).sum() - 1e-12


def test_calibrated_least_squares_improves_the_square_loss_every_stage():
    X, y = blobs(n=500, seed=4, noise=1.8)
    model = CalibratedLeastSquares(stages=8).fit(X, y)
    history = np.array(model.history_)
    assert np.all(np.diff(history) <= 1e-10)
    linear = GeneralizedLeastSquares(link="identity").fit(X, y)
    Y = np.eye(3)[y]
    linear_error = ((project_simplex(linear.decision_function_many(X)) - Y) ** 2).sum(axis=1).mean()
    assert history[-1] <= linear_error + 1e-9
    proba = model.predict_proba_many(X).to_numpy()
    assert np.allclose(proba.sum(axis=1), 1) and (proba >= 0).all()


def test_calibrated_stream_refits_its_window():
    X, y = blobs(n=600, seed=5, noise=1.0)
    model = CalibratedLeastSquares(stages=3, window=200, refit_every=100)
    for xi, yi in zip(X[:500], y[:500]):
        model.learn_one(dict(enumerate(xi)), yi)
    assert model.n_window_rows == 200 and model.n_stages_fitted == 3
    assert np.mean(model.predict_many(X[500:]).astype(int) == y[500:]) > 0.85


@pytest.mark.parametrize("make", [lambda: GeneralizedLeastSquares(max_features=3, batch_size=2),
                                  lambda: CalibratedLeastSquares(max_features=3, refit_every=2, stages=2)])
def test_dense_models_refuse_too_many_features_and_stay_unchanged(make):
    """learn_one used to let the vocabulary grow past max_features (raising only later, and then
    on every prediction); learn_many and fit grew it before refusing."""
    model = make()
    model.learn_one({"a": 1.0, "b": 1.0}, 0)
    model.learn_one({"c": 1.0}, 1)
    before = pickle.dumps(model)
    for refused in (lambda: model.learn_one({"d": 1.0}, 0), lambda: model.learn_many([{"a": 1.0}, {"e": 2.0}], [0, 1]),
                    lambda: model.learn_many(np.eye(4), [0, 1, 0, 1]), lambda: model.fit(np.eye(4), [0, 1, 0, 1])):
        with pytest.raises(InvalidInputError, match="takes at most 3 features") as info:
            refused()
        assert info.value.reason == "bad-shape" and pickle.dumps(model) == before
    model.learn_one({"a": 1.0}, 0)
    model.learn_one({"c": 2.0}, 1)
    assert model.predict_one({"a": 1.0}) == 0 and model.feature_space.names == [INTERCEPT_NAME, "a", "b", "c"]  # the limit is the user's


def test_dense_models_refuse_bad_parameters():
    with pytest.raises(InvalidParameterError, match="link must be"):
        GeneralizedLeastSquares(link="probit")
    with pytest.raises(InvalidParameterError, match="powers"):
        CalibratedLeastSquares(powers=(0,))


def test_stagewise_with_one_block_of_all_features_is_least_squares():

    X, y = blobs(n=300, d=6)
    model = StagewiseRegression(FeatureSampler(), block_size=6, stages=1, ridge=1e-12).fit(X, y)
    np.testing.assert_allclose(model.decision_function_many(X), X @ np.linalg.lstsq(X, np.eye(3)[y], rcond=None)[0],
                               rtol=1e-6, atol=1e-8)


def test_stagewise_random_fourier_features_fit_a_nonlinear_problem():

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(1500, 2))
    y = (np.linalg.norm(X, axis=1) > 0.6).astype(int)  # a disc: not linearly separable
    linear = GeneralizedLeastSquares(link="identity").fit(X[:1000], y[:1000])
    assert np.mean(linear.predict_many(X[1000:]).astype(int) == y[1000:]) < 0.75
    model = StagewiseRegression(RandomFourierFeatures(bandwidth=0.5, seed=1), block_size=100, stages=4, inner="logistic",
                                inner_iterations=20).fit(X[:1000], y[:1000])
    assert np.all(np.diff(model.history_) <= 0.02)  # training error falls stage by stage (up to noise)
    assert np.mean(model.predict_many(X[1000:]).astype(int) == y[1000:]) > 0.93
    restored = type(model).from_state(model.export_state())
    np.testing.assert_array_equal(restored.decision_function_many(X[1000:]), model.decision_function_many(X[1000:]))


def test_random_fourier_features_approximate_the_gaussian_kernel():

    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, 3))
    Z = RandomFourierFeatures(bandwidth=1.5, seed=2)(X, 40_000, stage=0)
    kernel = np.exp(-((X[:, None] - X[None]) ** 2).sum(axis=2) / (2 * 1.5**2))
    np.testing.assert_allclose(Z @ Z.T, kernel, atol=0.03)


def test_feature_sampler_blocks_follow_frequency():
    from streamlearn import FeatureSampler

    X = np.array([[1.0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 0, 0]])
    sampler = FeatureSampler()
    assert sampler.columns(X, 2, 0).tolist() == [0, 3] and sampler.columns(X, 2, 1).tolist() == [1, 2]


def test_random_fourier_features_make_a_river_pipeline_that_learns_a_ring():
    """``RandomFourierFeatures(...) | GeneralizedLeastSquares()`` in river's progressive
    validation: the ring no linear model separates (a linear one stays near chance)."""
    from river import compose, evaluate, metrics

    from streamlearn import RandomFourierFeatures

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 2))
    y = (X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4).astype(int)
    stream = [({"a": a, "b": b}, int(t)) for (a, b), t in zip(X, y)]
    pipeline = RandomFourierFeatures(bandwidth=1.0, n_components=100) | GeneralizedLeastSquares()
    assert isinstance(pipeline, compose.Pipeline)
    nonlinear = evaluate.progressive_val_score(stream, pipeline, metrics.Accuracy()).get()
    linear = evaluate.progressive_val_score(stream, GeneralizedLeastSquares(), metrics.Accuracy()).get()
    assert nonlinear > 0.9 > 0.6 > linear
    features = RandomFourierFeatures(bandwidth=1.0, n_components=100, seed=3)
    import pandas as pd

    frame = pd.DataFrame(X[:5], columns=["a", "b"])
    one = [features.transform_one(row) for row in frame.to_dict(orient="records")]
    np.testing.assert_allclose(features.transform_many(frame).to_numpy(), [[r[i] for i in range(100)] for r in one])


@pytest.mark.parametrize("name", ["StagewiseRegression", "CalibratedLeastSquares"])
def test_a_window_refit_of_late_features_is_the_same_by_learn_many_and_by_the_learn_one_loop(name):
    """A batch registers its late features before its rows enter the window; the refit works on the
    columns the entered rows have met, as the loop's vocabulary holds them, so a generator that
    ranks the columns (FeatureSampler) sees the same matrix either way (a defect found in issue 77:
    the rankings differed)."""
    from helpers import assert_same_state

    rng = np.random.default_rng(1)
    y = rng.integers(0, 4, 400)
    X = rng.normal(size=(400, 8)) + y[:, None]
    rows = [{f"f{j}": float(v) for j, v in enumerate(x[: 6 + (i > 133) * 2])} for i, x in enumerate(X)]
    keep = rng.random(400) < 0.8
    rows, y = [r for r, k in zip(rows, keep) if k], y[keep]
    import streamlearn

    make = getattr(streamlearn, name)
    many, loop = make(refit_every=50, window=30), make(refit_every=50, window=30)
    many.learn_many(rows, y)
    for x, label in zip(rows, y):
        loop.learn_one(x, label)
    assert_same_state(many.export_state(), loop.export_state())
