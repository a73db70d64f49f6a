"""The Primal Gradient Solver against a plain, dense NumPy implementation of
003_5fe9be115ce0064e.txt Fig. 1 + Fig. 2 (O(n) per step), and the mirror-map identities."""

from __future__ import annotations

import numpy as np
import pytest

from streamlearn import MulticlassPGS, PrimalGradientSolver
from streamlearn.errors import InvalidParameterError
from streamlearn.base import INTERCEPT_NAME
from helpers import auto_intercept_values

PS = [1.2, 1.5, 1.8, 2.0]


# ------------------------------------------------------------ reference maps
def dual(p):
    return p / (p - 1.0)


def grad_r_star(theta, p, bound=None, block=False, divide_by="p"):
    """∇r*(θ) for r = ||W||²/(2(p-1)) (Fig. 2 / Corollaries 2-3); rows are classes."""
    q = dual(p)
    theta = np.atleast_2d(theta)
    if block:
        rn = np.linalg.norm(theta, axis=1)
        norm = (rn**q).sum() ** (1 / q)
        if norm == 0:
            return np.zeros_like(theta)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(rn > 0, rn ** (q - 2), 0.0)
        w = (p - 1) * norm ** (2 - q) * factor[:, None] * theta
        primal = (np.linalg.norm(w, axis=1) ** p).sum() ** (1 / p)
    else:
        norm = (np.abs(theta) ** q).sum() ** (1 / q)
        if norm == 0:
            return np.zeros_like(theta)
        w = (p - 1) * norm ** (2 - q) * np.sign(theta) * np.abs(theta) ** (q - 1)  # Fig. 2 line 3
        primal = (np.abs(w) ** p).sum() ** (1 / p)
        if divide_by == "q":
            primal = (np.abs(w) ** q).sum() ** (1 / q)
    if bound is not None and ((np.abs(w) ** p).sum() ** (1 / p) if not block else primal) > bound:
        w = w * bound / primal  # Fig. 2 line 6
    return w


def grad_r(w, p, block=False):
    """∇r(w) for r = ||w||²/(2(p-1))."""
    w = np.atleast_2d(w)
    if block:
        rn = np.linalg.norm(w, axis=1)
        norm = (rn**p).sum() ** (1 / p)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(rn > 0, rn ** (p - 2), 0.0)
        return norm ** (2 - p) * factor[:, None] * w / (p - 1)
    norm = (np.abs(w) ** p).sum() ** (1 / p)
    return norm ** (2 - p) * np.sign(w) * np.abs(w) ** (p - 1) / (p - 1)


def r(w, p, block=False):
    w = np.atleast_2d(w)
    norm = ((np.linalg.norm(w, axis=1) ** p).sum() if block else (np.abs(w) ** p).sum()) ** (1 / p)
    return norm**2 / (2 * (p - 1))


def r_star(theta, p, block=False):
    """r*(θ) = ||θ||_q² / (2(q-1)) on R^n (Corollary 3; the ℓ2,q norm for the block case)."""
    q = dual(p)
    theta = np.atleast_2d(theta)
    norm = ((np.linalg.norm(theta, axis=1) ** q).sum() if block else (np.abs(theta) ** q).sum()) ** (1 / q)
    return norm**2 / (2 * (q - 1))


# ------------------------------------------------------------ reference solver
def reference_pgs(X, y, *, multiclass, loss, p, sigma, k, bound=None, block=False, average=False, w=None):
    """Fig. 1 with the dense map of Fig. 2; ``y`` are class indices (binary: 0 = −1, 1 = +1).
    A group works on the classes seen up to its last row. Returns W (rows: classes), or
    with ``average`` the mean of the iterates W_1..W_T. ``w``: each row's weight on its
    sub-gradient in line 7's sum (the weighted loss; issue 77)."""
    n, d = X.shape
    K = int(y.max()) + 1 if multiclass else 1
    Lam = np.zeros((K, d))
    total = np.zeros((K, d))
    t, active = 0, 0
    for start in range(0, n, k):
        t += 1
        rows = range(start, start + k)
        active = max(active, max(int(y[i]) for i in rows) + 1) if multiclass else 1
        W = grad_r_star(Lam[:active] / (t * sigma), p, bound, block)  # w_{t-1}
        G = np.zeros((active, d))
        for i in rows:
            s = W @ X[i]
            if multiclass:
                if loss == "softmax":
                    e = np.exp(s - s.max())
                    coef = e / e.sum()
                    coef[y[i]] -= 1
                else:  # Crammer-Singer, ties to the lowest index
                    others = [j for j in range(active) if j != y[i]]
                    coef = np.zeros(active)
                    if others:
                        best = others[int(np.argmax(s[others]))]
                        if 1 + s[best] - s[y[i]] > 0:
                            coef[best], coef[y[i]] = 1, -1
            elif loss == "regression":  # real targets
                coef = np.array([s[0] - y[i]])
            else:
                m, sign = s[0], (1.0 if y[i] == 1 else -1.0)
                if loss == "hinge":
                    coef = np.array([-sign if sign * m < 1 else 0.0])
                elif loss == "logistic":
                    coef = np.array([-sign / (1 + np.exp(sign * m))])
                else:
                    coef = np.array([m - sign])
            G += np.outer(coef, X[i]) * (1.0 if w is None else w[i])
        Lam[:active] -= G / k
        total[:active] += grad_r_star(Lam[:active] / ((t + 1) * sigma), p, bound, block)
    if average:
        return total / t
    return grad_r_star(Lam / ((t + 1) * sigma), p, bound, block)


def stream(n=120, d=9, K=4, seed=0, density=0.6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    X[np.arange(n), rng.integers(0, d, n)] += 1.0  # no empty row
    centers = rng.normal(size=(K, d))
    y = (X @ centers.T + 0.3 * rng.normal(size=(n, K))).argmax(axis=1)
    first = {}
    relabeled = np.array([first.setdefault(v, len(first)) for v in y])  # first-appearance order, like LabelSpace
    return X, relabeled


def learner_weights(model, d):
    """The learner's W with columns in feature order 0..d-1 (names are the ints)."""
    W = model.weight_matrix()
    out = np.zeros((W.shape[0], d))
    out[:, model.feature_space.names] = W
    return out


def feed(model, X, labels, in_batches):
    rows = [{j: X[i, j] for j in np.flatnonzero(X[i])} for i in range(X.shape[0])]
    if in_batches:  # learn_many in uneven chunks, with learn_one pieces in between
        i = 0
        for size in [1, 7, 2, 30, 1] + [1000] * (len(rows) // 1000 + 1):
            part = rows[i : i + size]
            if not part:
                break
            if size == 1:
                model.learn_one(part[0], labels[i])
            else:
                model.learn_many(part, list(labels[i : i + size]))
            i += size
    else:
        for x, label in zip(rows, labels):
            model.learn_one(x, label)


BINARY_CASES = [(loss, bound) for loss in ("hinge", "logistic", "squared") for bound in (None, 0.5)
                if not (loss == "squared" and bound is None)]  # least squares without a bound is refused (below)


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("loss, bound", BINARY_CASES)
def test_binary_solver_matches_the_dense_reference(p, loss, bound):
    X, y = stream(K=2, seed=int(10 * p))
    model = PrimalGradientSolver(loss=loss, p=p, sigma=0.05, batch_size=3, bound=bound, fit_intercept=False)
    feed(model, X, [bool(v) for v in y], in_batches=True)
    expected = reference_pgs(X, y, multiclass=False, loss=loss, p=p, sigma=0.05, k=3, bound=bound)
    np.testing.assert_allclose(learner_weights(model, X.shape[1]), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("bound", [None, 0.7])
@pytest.mark.parametrize("regularizer", ["entrywise", "block"])
@pytest.mark.parametrize("loss", ["hinge", "softmax"])
def test_multiclass_solver_matches_the_dense_reference_with_class_growth(p, bound, regularizer, loss):
    X, y = stream(seed=int(7 * p))
    labels = [f"class-{v}" for v in y]  # classes appear one by one, mid-stream
    model = MulticlassPGS(loss=loss, p=p, sigma=0.05, batch_size=2, bound=bound, regularizer=regularizer, fit_intercept=False)
    feed(model, X, labels, in_batches=bool(bound))
    expected = reference_pgs(X, y, multiclass=True, loss=loss, p=p, sigma=0.05, k=2, bound=bound,
                             block=regularizer == "block")
    np.testing.assert_allclose(learner_weights(model, X.shape[1]), expected, rtol=1e-9, atol=1e-12)
    scores = model.decision_function_many([{j: X[0, j] for j in np.flatnonzero(X[0])}])
    np.testing.assert_allclose(scores[0], expected @ X[0], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("regularizer", ["entrywise", "block"])
def test_averaged_iterate_matches_the_mean_of_the_dense_iterates(p, regularizer):
    X, y = stream(seed=int(3 * p))
    model = MulticlassPGS(loss="softmax", p=p, sigma=0.05, batch_size=2, bound=0.7, regularizer=regularizer, iterate="average",
                          fit_intercept=False)
    feed(model, X, list(y), in_batches=True)
    expected = reference_pgs(X, y, multiclass=True, loss="softmax", p=p, sigma=0.05, k=2, bound=0.7,
                             block=regularizer == "block", average=True)
    np.testing.assert_allclose(learner_weights(model, X.shape[1]), expected, rtol=1e-9, atol=1e-12)
    x0 = {j: X[0, j] for j in np.flatnonzero(X[0])}
    np.testing.assert_allclose(model.decision_function_many([x0])[0], expected @ X[0], rtol=1e-9, atol=1e-12)
    binary = PrimalGradientSolver(loss="logistic", p=p, sigma=0.05, iterate="average", fit_intercept=False)
    feed(binary, X, [bool(v % 2) for v in y], in_batches=True)
    expected = reference_pgs(X, y % 2, multiclass=False, loss="logistic", p=p, sigma=0.05, k=1, average=True)
    np.testing.assert_allclose(learner_weights(binary, X.shape[1]), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("scaling", [None, 0.1])
@pytest.mark.parametrize("regularizer", ["entrywise", "block"])
def test_the_default_intercept_is_the_reference_with_a_constant_column(regularizer, scaling):
    """``fit_intercept`` (the default) is the reference's weight of a last column of its values: the rule's
    (``"auto"``, this solver's default: helpers.auto_intercept_values), or a fixed 0.1."""
    X, y = stream(seed=11)
    given = {} if scaling is None else {"intercept_scaling": scaling}
    model = MulticlassPGS(loss="hinge", p=1.5, sigma=0.05, batch_size=2, regularizer=regularizer, **given)
    feed(model, X, list(y), in_batches=True)
    d = X.shape[1]
    column = auto_intercept_values(X) if scaling is None else np.full(len(y), scaling)
    expected = reference_pgs(np.hstack([X, column[:, None]]), y, multiclass=True, loss="hinge", p=1.5,
                             sigma=0.05, k=2, block=regularizer == "block")
    W, got = model.weight_matrix(), np.zeros((len(expected), d + 1))
    got[:, [d if name == INTERCEPT_NAME else name for name in model.feature_space.names]] = W
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def test_long_stream_with_exact_resummation_still_matches():
    X, y = stream(n=12000, d=6, K=3, seed=5, density=0.9)
    model = MulticlassPGS(loss="hinge", p=1.5, sigma=0.01, fit_intercept=False)
    feed(model, X, list(y), in_batches=True)
    assert model.changes_since_resummation <= 16 * 4096  # the sums were recomputed exactly on the way (else ~1e5 changes)
    expected = reference_pgs(X, y, multiclass=True, loss="hinge", p=1.5, sigma=0.01, k=1)
    np.testing.assert_allclose(learner_weights(model, 6), expected, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------ identities
@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("block", [False, True])
def test_mirror_map_identities(p, block):
    rng = np.random.default_rng(1)
    w = rng.normal(size=(4, 7))
    w[1] = 0.0  # a zero row must not produce NaN (0 to a negative power)
    np.testing.assert_allclose(grad_r_star(grad_r(w, p, block), p, block=block), w, rtol=1e-9, atol=1e-12)
    theta = rng.normal(size=(4, 7))
    w_star = grad_r_star(theta, p, block=block)
    # Fenchel-Young equality at w = ∇r*(θ): r(w) + r*(θ) = <w, θ>
    assert r(w_star, p, block) + r_star(theta, p, block) == pytest.approx(float((w_star * theta).sum()), rel=1e-10)
    # the gradient formula is the gradient of r* (finite differences)
    eps = 1e-6
    for idx in [(0, 0), (2, 3), (3, 6)]:
        bump = np.zeros_like(theta)
        bump[idx] = eps
        numeric = (r_star(theta + bump, p, block) - r_star(theta - bump, p, block)) / (2 * eps)
        assert numeric == pytest.approx(w_star[idx], rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("p", [1.2, 1.5, 1.8])
def test_fig2_line6_divides_by_the_p_norm_not_the_q_norm(p):
    """Corollary 2 (Eq. 28) gives min(B, (p-1)||θ||_q) / ||θ||_q^(q/p) θ^(q/p): that is the
    projection w B/||w||_p; the figure's w B/||w||_q is off the sphere."""
    q = dual(p)
    theta = np.random.default_rng(2).normal(size=(1, 8)) * 5
    B = 0.3
    norm_q = np.linalg.norm(theta.ravel(), q)
    eq28 = min(B, (p - 1) * norm_q) / norm_q ** (q / p) * np.sign(theta) * np.abs(theta) ** (q / p)
    with_p = grad_r_star(theta, p, bound=B)
    with_q = grad_r_star(theta, p, bound=B, divide_by="q")
    np.testing.assert_allclose(with_p, eq28, rtol=1e-12)
    assert np.linalg.norm(with_p.ravel(), p) == pytest.approx(B, rel=1e-12)  # ||w||_p <= B, on the sphere
    assert not np.allclose(with_q, eq28)


def test_bound_is_respected_by_the_learner():
    X, y = stream(K=3, seed=3)
    model = MulticlassPGS(p=1.5, sigma=1e-3, bound=0.25, fit_intercept=False)
    feed(model, X, list(y), in_batches=True)
    W = model.weight_matrix()
    assert (np.abs(W) ** 1.5).sum() ** (1 / 1.5) <= 0.25 * (1 + 1e-12)


def test_random_iterate_is_one_of_the_iterates_and_seeded():
    X, y = stream(n=60, K=3, seed=4)
    runs = []
    for _ in range(2):
        model = MulticlassPGS(p=1.5, sigma=0.05, iterate="random", seed=7, fit_intercept=False)
        feed(model, X, list(y), in_batches=False)
        runs.append(model.weight_matrix())
    np.testing.assert_array_equal(runs[0], runs[1])
    kept_t = model.kept_step
    kept_by_seed = []
    for seed in range(30):  # the kept step is spread over 1..60, not always the last one
        other = MulticlassPGS(p=1.5, sigma=0.05, iterate="random", seed=seed, fit_intercept=False)
        feed(other, X, list(y), in_batches=True)
        kept_by_seed.append(other.kept_step)
    assert len(set(kept_by_seed)) > 10 and 0.2 < np.mean(np.array(kept_by_seed) <= 30) < 0.8
    expected = reference_pgs(X[:kept_t], y[:kept_t], multiclass=True, loss="hinge", p=1.5, sigma=0.05, k=1)
    got = learner_weights(model, X.shape[1])[: expected.shape[0]]
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kwargs, message", [
    ({"p": 1.0}, "p must be in"), ({"p": 2.5}, "p must be in"), ({"sigma": 0}, "sigma must be"),
    ({"bound": -1}, "bound must be"), ({"iterate": "best"}, "iterate must be"),
])
def test_bad_parameters_are_refused(kwargs, message):
    with pytest.raises(InvalidParameterError, match=message):
        MulticlassPGS(**kwargs)
    with pytest.raises(InvalidParameterError, match=message):
        PrimalGradientSolver(**kwargs)


def test_least_squares_needs_a_bound_and_binary_refuses_a_third_class():
    with pytest.raises(InvalidParameterError, match="needs a bound"):
        PrimalGradientSolver(loss="squared")
    model = PrimalGradientSolver(classes=("ham", "spam"))
    model.learn_one({"a": 1.0}, "spam")
    with pytest.raises(ValueError, match=r"learns two classes, here \('ham', 'spam'\)"):
        model.learn_one({"a": 1.0}, "eggs")
    with pytest.raises(ValueError, match="a label outside them was given"):
        model.learn_many([{"a": 1.0}, {"b": 1.0}], ["ham", "eggs"])
    assert model.n_steps == 1


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("iterate", ["last", "average"])
def test_regressor_matches_the_dense_reference(p, iterate):
    from streamlearn import PrimalGradientRegressor

    X, _ = stream(n=150, seed=int(11 * p))
    targets = X @ np.linspace(-1, 1, X.shape[1]) + 0.1 * np.random.default_rng(0).normal(size=len(X))
    model = PrimalGradientRegressor(bound=0.8, p=p, sigma=0.05, batch_size=2, iterate=iterate)
    rows = [{j: X[i, j] for j in np.flatnonzero(X[i])} for i in range(len(X))]
    model.learn_one(rows[0], targets[0])
    model.learn_many(rows[1:90], targets[1:90])
    for x, t in zip(rows[90:], targets[90:]):
        model.learn_one(x, t)
    expected = reference_pgs(X[:150], targets[:150], multiclass=False, loss="regression", p=p, sigma=0.05, k=2, bound=0.8,
                             average=iterate == "average")
    np.testing.assert_allclose(learner_weights(model.solver, X.shape[1]), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.predict_many(rows[:5]), X[:5] @ expected[0], rtol=1e-9, atol=1e-12)
    assert (np.abs(expected[0]) ** p).sum() ** (1 / p) <= 0.8 * (1 + 1e-12)  # the bound holds (an average of points in the ball is in it)


def test_regressor_refuses_no_bound_and_bad_targets():
    from streamlearn import PrimalGradientRegressor

    with pytest.raises(InvalidParameterError, match="needs a bound B"):
        PrimalGradientRegressor(bound=None)
    model = PrimalGradientRegressor(bound=1.0)
    with pytest.raises(ValueError, match="not a finite number"):
        model.learn_one({"a": 1.0}, float("nan"))
    with pytest.raises(ValueError, match="not a finite number"):
        model.learn_many([{"a": 1.0}], ["x"])


@pytest.mark.parametrize("p", [1.2, 1.5, 2.0])
@pytest.mark.parametrize("loss", ["hinge", "softmax"])
@pytest.mark.parametrize("regularizer", ["entrywise", "block"])
def test_weighted_multiclass_solver_matches_the_weighted_dense_reference(p, loss, regularizer):
    X, y = stream(seed=int(5 * p))
    w = np.random.default_rng(1).choice([0.5, 1.0, 2.0, 3.0], len(y))
    model = MulticlassPGS(loss=loss, p=p, sigma=0.05, batch_size=2, bound=0.7, regularizer=regularizer, fit_intercept=False)
    rows = [{j: X[i, j] for j in np.flatnonzero(X[i])} for i in range(X.shape[0])]
    model.learn_many(rows[:50], list(y[:50]), w[:50])
    for i in range(50, len(rows)):
        model.learn_one(rows[i], y[i], w=w[i])
    expected = reference_pgs(X, y, multiclass=True, loss=loss, p=p, sigma=0.05, k=2, bound=0.7,
                             block=regularizer == "block", w=w)
    np.testing.assert_allclose(learner_weights(model, X.shape[1]), expected, rtol=1e-9, atol=1e-12)
    unweighted = reference_pgs(X, y, multiclass=True, loss=loss, p=p, sigma=0.05, k=2, bound=0.7, block=regularizer == "block")
    assert not np.allclose(expected, unweighted)


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_weighted_binary_solver_matches_the_weighted_dense_reference(loss):
    X, y = stream(K=2, seed=3)
    w = np.random.default_rng(2).choice([0.5, 1.0, 4.0], len(y))
    model = PrimalGradientSolver(loss=loss, p=2.0, sigma=0.05, batch_size=3, fit_intercept=False)
    model.learn_many([{j: X[i, j] for j in np.flatnonzero(X[i])} for i in range(X.shape[0])], [bool(v) for v in y], w)
    expected = reference_pgs(X, y, multiclass=False, loss=loss, p=2.0, sigma=0.05, k=3, w=w)
    np.testing.assert_allclose(learner_weights(model, X.shape[1]), expected, rtol=1e-9, atol=1e-12)
