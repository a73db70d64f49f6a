"""The ℓp-norm multi-class SVM of 001 (streamlearn/lpsvm.py) against plain NumPy versions of the
paper's equations: the restricted subproblem (Eq. 13) by bisection on its multiplier, a pass of
dual coordinate ascent on Problem 15 written densely, the class weights of Eq. 14 against the
variational form of Eq. 8, and p = 2 against LIBLINEAR's Crammer–Singer solver (-s 4)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import streamlearn
from streamlearn import InvalidParameterError, LpNormMulticlassSVM
from streamlearn.batches import SparseRows
from streamlearn.kernels import compiled
from streamlearn.lpsvm import class_weights, dual_objective, lp_norm, primal_objective, solve

from helpers import assert_same_state

_lpsvm = compiled("lpsvm")


def reference_restricted_step(g, a, u):
    """Eq. 13 by its KKT conditions: δ_j = min((g_j − θ)/a_j, u_j), θ by bisection on Σ δ = 0."""
    def total(theta):
        return np.minimum((g - theta) / a, u).sum()

    lo, hi = (g - a * u).min() - 1.0, g.max() + 1.0 + np.abs(u).max() * a.max()
    assert total(lo) >= 0 >= total(hi)
    for _ in range(400):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if total(mid) > 0 else (lo, mid)
    return np.minimum((g - 0.5 * (lo + hi)) / a, u)


def feasible_alpha(rng, n, c, y, C):
    """Dual variables with α_i ≤ C e_{y_i} and α_i · 1 = 0."""
    alpha = np.zeros((n, c))
    for i in range(n):
        others = [j for j in range(c) if j != y[i]]
        take = rng.random(len(others)) < 0.5
        alpha[i, others] = -rng.random(len(others)) * take * C / max(1, len(others))
        alpha[i, y[i]] = -alpha[i, others].sum()
    return alpha


@pytest.mark.parametrize("seed", range(20))
def test_restricted_step_solves_eq13(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.integers(2, 12))
    y = int(rng.integers(c))
    C = float(rng.uniform(0.1, 3))
    alpha = feasible_alpha(rng, 1, c, [y], C)[0]
    u = -alpha
    u[y] += C
    g = rng.normal(size=c) * 3
    a = rng.uniform(0.1, 2, size=c) * (1e-9 if seed % 5 == 0 else 1.0) ** rng.integers(0, 2, size=c)  # some near 0
    delta, work = np.empty(c), (np.empty(c), np.empty(c, np.int64), np.empty(c + 1), np.empty(c + 1))
    _lpsvm.restricted_step(g, a, u, delta, *work)
    reference = reference_restricted_step(g, a, u)
    # where some a_j are ~1e-10, δ_j = (g_j − θ)/a_j turns θ's last bits into 1e-7: compare to
    # that precision, and the objective of Eq. 13 tightly
    np.testing.assert_allclose(delta, reference, rtol=1e-5, atol=1e-9 * np.abs(delta).max())
    # and its KKT conditions tightly: one multiplier θ = g_j − a_j δ_j on every free class,
    # every clamped one (δ_j = u_j) with g_j − a_j u_j ≥ θ
    free = delta < u
    marginal = g - a * delta
    theta = np.median(marginal[free])
    scale = np.abs(g).max() + 1.0
    assert np.abs(marginal[free] - theta).max() <= 1e-9 * scale
    assert (marginal[~free] >= theta - 1e-9 * scale).all()
    assert abs(delta.sum()) <= 1e-14 * np.abs(delta).max() and (delta <= u).all()  # feasible


def _problem(n=60, d=12, c=4, seed=0, density=0.5):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=rng, format="csr") * 2
    y = rng.integers(0, c, n)
    X = (X + sp.csr_matrix((np.ones(n), (np.arange(n), y * (d // c))), shape=(n, d))).tocsr()  # a signal
    X.sort_indices()
    return SparseRows(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64)), y.astype(np.int64), X


def reference_epoch(X, y, order, beta, C, V, alpha, w=None):
    """One pass of dual coordinate ascent on Problem 15 (Eq. 12 gradient, Eq. 13 step), dense;
    ``w``: example weights, each scaling its box ``alpha_{i,y_i} <= C w_i`` (the weighted hinge)."""
    for i in order:
        x = X[i].toarray()[0]
        if x @ x == 0:
            continue
        g = -beta * (V.T @ x)
        g[y[i]] += 1.0
        u = -alpha[i].copy()
        u[y[i]] += C * (1.0 if w is None else w[i])
        delta = reference_restricted_step(g, beta * (x @ x), u)
        alpha[i] += delta
        V += np.outer(x, delta)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_dca_epochs_equal_the_dense_reference(weighted):
    rows, y, X = _problem()
    w = np.random.default_rng(7).choice([0.5, 1.0, 3.0], len(y)) if weighted else None
    weights = np.zeros(0) if w is None else w
    c = 4
    rng = np.random.default_rng(1)
    beta = rng.uniform(0.3, 1.0, c)
    V, alpha = np.zeros((X.shape[1], c)), np.zeros((X.shape[0], c))
    V_ref, alpha_ref = V.copy(), alpha.copy()
    sqnorm = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    orders = []
    for _ in range(4):
        order = rng.permutation(X.shape[0])
        orders.append(order)
        classes = np.tile(np.arange(c), (len(y), 1))  # nothing shrunk: the whole Eq. 13 every time
        _lpsvm.dca_epoch(rows.indptr, rows.indices, rows.data, y, order, sqnorm, beta, 0.7, V, alpha, classes,
                         np.full(len(y), c), np.ones(len(y), bool), weights)
        reference_epoch(X, y, order, beta, 0.7, V_ref, alpha_ref, w)
        np.testing.assert_allclose(alpha, alpha_ref, atol=1e-9)
        np.testing.assert_allclose(V, V_ref, atol=1e-9)
    W = V * beta
    scores = X @ W
    margins = scores[np.arange(len(y)), y] - np.where(np.eye(c, dtype=bool)[y], -np.inf, scores).max(axis=1)
    hinges = np.maximum(0, 1 - margins)
    assert _lpsvm.hinge_total(rows.indptr, rows.indices, rows.data, y, V, beta, weights) == pytest.approx(
        (hinges if w is None else w * hinges).sum())
    if weighted:  # the boxes moved the solution
        unweighted_V, unweighted_alpha = np.zeros_like(V), np.zeros_like(alpha)
        for order in orders:
            reference_epoch(X, y, order, beta, 0.7, unweighted_V, unweighted_alpha)
        assert not np.allclose(V, unweighted_V)
    out = np.zeros((len(y), c))
    _lpsvm.scores(rows.indptr, rows.indices, rows.data, V, beta, out)
    np.testing.assert_allclose(out, scores, atol=1e-12)


@pytest.mark.parametrize("p", [1.1, 1.5, 1.9])
def test_eq14_class_weights_attain_the_variational_form_of_eq8(p):
    """min over ||β||_{p/(2−p)} ≤ 1 of Σ ||w_j||² / (2 β_j) is ½ (Σ ||w_j||^p)^(2/p), at Eq. 14's β."""
    rng = np.random.default_rng(0)
    norms = rng.uniform(0.1, 3, 7)
    beta = class_weights(norms, p)
    assert lp_norm(beta, p / (2 - p)) == pytest.approx(1.0)
    assert (norms**2 / (2 * beta)).sum() == pytest.approx(0.5 * lp_norm(norms, p) ** 2)
    for _ in range(200):  # and no other feasible β does better
        other = rng.uniform(0.01, 1, 7)
        other /= lp_norm(other, p / (2 - p))
        assert (norms**2 / (2 * other)).sum() >= (norms**2 / (2 * beta)).sum() - 1e-12


@pytest.mark.parametrize("p", [1.2, 1.5, 2.0])
def test_algorithm1_primal_falls_at_every_outer_iteration_and_the_gap_closes(p):
    rows, y, X = _problem(n=120, d=20, c=5, seed=2)
    V, alpha, beta, history = solve(rows, y, 20, 5, p, 1.0, 1e-6, 100, 10_000, np.random.default_rng(0))
    primals = [h["primal"] for h in history]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(primals, primals[1:])), primals
    assert all(h["dual"] <= h["primal"] for h in history)
    assert history[-1]["gap"] <= 1e-6
    assert primal_objective(rows, y, V, beta, p, 1.0) == pytest.approx(history[-1]["primal"])
    assert dual_objective(alpha, y, V, p) == pytest.approx(history[-1]["dual"])
    # α stays dual feasible: α_i ≤ C e_{y_i}, Σ_j α_ij = 0
    bound = np.where(np.eye(5, dtype=bool)[y], 1.0, 0.0)
    assert (alpha <= bound + 1e-12).all() and np.abs(alpha.sum(axis=1)).max() < 1e-9


def test_p2_is_crammer_singer_as_liblinear_solves_it():
    liblinear = pytest.importorskip("liblinear.liblinearutil", reason="liblinear-official is not installed")
    rows, y, X = _problem(n=300, d=30, c=6, seed=3, density=0.3)
    C = 0.5
    V, alpha, beta, history = solve(rows, y, 30, 6, 2.0, C, 1e-6, 100, 10_000, np.random.default_rng(0))
    assert np.allclose(beta, 1.0)  # Eq. 14 at p = 2
    model = liblinear.train(liblinear.problem(y.astype(float), X), liblinear.parameter(f"-s 4 -c {C} -e 1e-6 -q"))
    W = np.zeros((30, 6))
    for k, label in enumerate(model.get_labels()):
        W[:, int(label)] = np.asarray(model.get_decfun(k)[0])[:30]
    theirs = primal_objective(rows, y, W, np.ones(6), 2.0, C)
    assert history[-1]["primal"] == pytest.approx(theirs, rel=1e-5)
    # the optimum is unique (the objective is strongly convex in W); scores tie often at it, so
    # compare the weights, not the argmax
    assert np.abs(V * beta - W).max() <= 1e-4 * np.abs(W).max()


def test_window_refits_warm_start_and_resume_bit_for_bit():
    rows, y, X = _problem(n=400, d=25, c=5, seed=4)
    labels = [f"class{k}" for k in y]
    whole = LpNormMulticlassSVM(p=1.5, window=150, refit_every=40, seed=3)
    whole.learn_many(X, labels)
    assert whole.n_fits == 10 and whole.n_window_rows == 150
    first = LpNormMulticlassSVM(p=1.5, window=150, refit_every=40, seed=3)
    first.learn_many(X[:217], labels[:217])
    resumed = streamlearn.learner_from_state(first.export_state())
    resumed.learn_many(X[217:], labels[217:])
    assert_same_state(resumed.export_state(), whole.export_state())
    one_by_one = LpNormMulticlassSVM(p=1.5, window=150, refit_every=40, seed=3)
    for i in range(X.shape[0]):
        one_by_one.learn_one(dict(zip(X[i].indices.tolist(), X[i].data.tolist())), labels[i])
    np.testing.assert_array_equal(one_by_one.decision_function_many(X), whole.decision_function_many(X))
    assert whole.history_[-1]["gap"] <= whole.tol


def test_a_warm_started_window_refit_reaches_the_optimum_of_a_cold_fit_on_the_window():
    rows, y, X = _problem(n=400, d=25, c=5, seed=4)
    labels = [f"class{k}" for k in y]
    warm = LpNormMulticlassSVM(p=1.5, tol=1e-8, window=150, refit_every=50)
    warm.learn_many(X, labels)
    assert warm.n_fits == 8 and len(set(labels[-150:])) == 5
    cold = LpNormMulticlassSVM(p=1.5, tol=1e-8).fit(X[-150:], labels[-150:])
    assert warm.history_[-1]["primal"] == pytest.approx(cold.history_[-1]["primal"], rel=1e-6)


def test_parameters_are_checked():
    for bad in ({"p": 1.0}, {"p": 2.5}, {"p": True}, {"C": 0}, {"tol": -1}, {"max_iter": 0}, {"window": 0}):
        with pytest.raises(InvalidParameterError):
            LpNormMulticlassSVM(**bad)


def test_a_stream_refit_spends_at_most_its_steps():
    """Issue 73: with defaults a 20-class, 200-feature raw set took 300 s for 7,000 rows and a
    SIGTERM waited 105 s for the refit in progress; a stream refit now takes at most
    ``refit_steps`` coordinate steps, in whole passes over the window (``fit`` is bounded by
    ``max_iter × max_epochs`` alone)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 30)) * 3.0
    y = rng.integers(0, 6, 600)  # labels no model explains: the solver's hardest case
    model = LpNormMulticlassSVM(window=600, refit_every=300, refit_steps=2100, tol=1e-6)
    model.learn_many(X[:300], y[:300])  # a window of 300: 7 passes
    assert sum(h["epochs"] for h in model.history_) <= 7 and model.history_[-1].get("budget_spent")
    model.learn_many(X[300:], y[300:])  # of 600: 3 passes
    assert sum(h["epochs"] for h in model.history_) <= 3 and model.n_fits == 2
    full = LpNormMulticlassSVM(tol=1e-6, max_epochs=7).fit(X[:300], y[:300])
    assert sum(h["epochs"] for h in full.history_) > 7
