"""Probabilities worth the name (streamlearn/calibration.py): the temperature is the minimiser
of the window's log-loss, the calibrated probabilities beat a uniform guess where the raw softmax
does not, and the window and β are state like any other (learn_many equals the learn_one loop,
a restored learner goes on exactly)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

import streamlearn
from streamlearn import (
    MulticlassLogisticRegression,
    MulticlassPerceptron,
    MulticlassSVM,
    OneVsRestLogisticRegression,
    OneVsRestPegasos,
)
from streamlearn.calibration import NEWEST_ROWS, PRIOR_EXAMPLES, REFIT_EVERY, SPAN_NATS, WINDOW, TemperatureCalibration, fit_temperature
from streamlearn.datasets import letter

ALL = [MulticlassSVM, MulticlassLogisticRegression, MulticlassPerceptron, OneVsRestPegasos, OneVsRestLogisticRegression]


def _log_loss(scores, targets, beta):
    return float(np.sum(logsumexp(beta * scores, axis=1) - beta * scores[np.arange(len(targets)), targets]))


def _objective(scores, targets, beta):
    """The window's log-loss plus PRIOR_EXAMPLES examples' worth of uniform targets over the classes
    each row has (finite scores), spread over the rows."""
    exists = scores > -1e299
    uniform = logsumexp(beta * scores, axis=1) - beta * np.where(exists, scores, 0.0).sum(axis=1) / exists.sum(axis=1)
    return _log_loss(scores, targets, beta) + PRIOR_EXAMPLES / len(targets) * float(np.sum(uniform))


@pytest.mark.parametrize("scale", [0.01, 1.0, 300.0])
def test_the_temperature_minimises_the_log_loss(scale):
    rng = np.random.default_rng(int(scale * 100))
    scores = scale * rng.normal(size=(500, 6))
    scores[:50, 5] = -np.inf  # a class that did not exist for the first rows
    targets = np.where(rng.random(500) < 0.6, scores.argmax(axis=1), rng.integers(0, 5, 500))
    beta = fit_temperature(scores, targets)
    finite = np.where(np.isfinite(scores), scores, -1e300)
    best = minimize_scalar(lambda b: _objective(finite, targets, b), bounds=(1e-9, 100.0 / scale), method="bounded",
                           options={"xatol": 1e-12})
    assert _objective(finite, targets, beta) <= best.fun + 1e-7 * abs(best.fun)
    assert beta == pytest.approx(best.x, rel=1e-3)


@pytest.mark.parametrize("n", [2, 20, 100, 1000])
def test_a_window_the_model_never_missed_gives_about_the_rule_of_succession_not_certainty(n):
    """With no mistake to go by, the prior's one uniform example decides: the mean probability of
    an error is of the order of Laplace's rule of succession, 1 / (n + 2), not e^-30 (the cap that
    bounds any fit) as without the prior."""
    scores = np.array([[3.0, 0.0, -1.0], [0.0, 2.0, 1.0]] * (n // 2))
    targets = np.array([0, 1] * (n // 2))
    beta = fit_temperature(scores, targets)
    spread = np.mean(scores.max(axis=1) - scores.min(axis=1))
    p_true = np.exp(beta * scores[np.arange(n), targets] - logsumexp(beta * scores, axis=1)).mean()
    assert beta < SPAN_NATS / spread and p_true < 1.0
    assert 0.5 / (n + 2) < 1.0 - p_true < 4.0 / (n + 2)


def test_a_model_no_better_than_a_guess_gets_near_uniform_probabilities():
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(REFIT_EVERY, 4))
    targets = scores.argmin(axis=1)  # always wrong
    calibration = TemperatureCalibration()
    calibration.observe(scores, targets, n_before=4)
    assert np.abs(calibration.probabilities(scores) - 0.25).max() < 1e-2


def _letter(n_train, n_test):
    train = list(letter("train"))[:n_train]
    test = list(letter("test"))[:n_test]
    return [x for x, _ in train], [y for _, y in train], [x for x, _ in test], [y for _, y in test]


def _test_log_loss(model, X, y):
    proba = model.predict_proba_many(X)
    columns = [list(proba.columns).index(label) for label in y]
    return float(-np.mean(np.log(np.maximum(proba.to_numpy()[np.arange(len(y)), columns], 1e-300))))


@pytest.mark.parametrize("cls", ALL)
def test_calibrated_probabilities_beat_a_uniform_guess_and_the_raw_softmax(cls):
    """Issue 41, item 4, on the bundled letter set (26 classes): one pass, the defaults. The temperature,
    fitted on the prequential scores of a model still learning, is never more than 1 % worse than the
    raw softmax (which the SVM's scores with bins already calibrate: 0.66 either way) and far better
    where that is overconfident (2.5 to 76 nats for the others)."""
    X, y, X_test, y_test = _letter(8000, 2000)
    calibrated, raw = cls(), cls(calibrate=False)
    calibrated.learn_many(X, y)
    raw.learn_many(X, y)
    loss, raw_loss = _test_log_loss(calibrated, X_test, y_test), _test_log_loss(raw, X_test, y_test)
    assert loss < np.log(26) and loss < 1.01 * raw_loss
    assert calibrated.temperature != 1.0 and raw.temperature == 1.0
    # one temperature: the predictions are the scores' argmax, unchanged
    assert list(calibrated.predict_many(X_test[:200])) == list(calibrated.predict_proba_many(X_test[:200]).idxmax(axis=1))


@pytest.mark.parametrize("batch_size", [1, 4])
def test_learn_many_equals_the_learn_one_loop_with_the_temperature(batch_size):
    X, y, X_test, _ = _letter(3 * REFIT_EVERY + WINDOW // 3, 50)
    one, many = MulticlassLogisticRegression(batch_size=batch_size), MulticlassLogisticRegression(batch_size=batch_size)
    for x, c in zip(X, y):
        one.learn_one(x, c)
    for start in range(0, len(X), 333):
        many.learn_many(X[start : start + 333], y[start : start + 333])
    assert one.temperature == many.temperature != 1.0
    np.testing.assert_array_equal(one.predict_proba_many(X_test).to_numpy(), many.predict_proba_many(X_test).to_numpy())


def test_a_restored_learner_goes_on_exactly_with_its_window():
    X, y, X_test, _ = _letter(2 * WINDOW + 300, 50)
    whole, first = MulticlassSVM(), MulticlassSVM()
    whole.learn_many(X, y)
    first.learn_many(X[:1100], y[:1100])
    resumed = MulticlassSVM.from_state(first.export_state())
    resumed.learn_many(X[1100:], y[1100:])
    assert resumed.temperature == whole.temperature
    np.testing.assert_array_equal(resumed.predict_proba_many(X_test).to_numpy(), whole.predict_proba_many(X_test).to_numpy())


def test_a_state_saved_before_calibration_existed_restores_with_the_raw_softmax():
    model = MulticlassSVM(calibrate=False)
    model.learn_many([{"a": 1.0}, {"b": 1.0}, {"a": 0.5}], ["x", "y", "x"])
    state = model.export_state()
    del state["params"]["calibrate"]
    restored = streamlearn.learner_from_state(state)
    assert restored.calibrate is True and restored.temperature == 1.0
    probe = [{"a": 1.0}, {"b": 2.0}]
    np.testing.assert_array_equal(restored.predict_proba_many(probe).to_numpy(), model.predict_proba_many(probe).to_numpy())


def test_calibrate_must_be_a_boolean():
    with pytest.raises(streamlearn.InvalidParameterError, match="calibrate must be True or False"):
        MulticlassSVM(calibrate="no")


def test_inspect_shows_the_temperature_of_the_checkpointed_model(tmp_path):
    import json

    from helpers import cli
    from streamlearn.service.checkpoint import CheckpointStore
    from streamlearn.datasets import path

    cli("train", path("train"), "--checkpoint-dir", tmp_path / "ck", "--quiet")
    model = streamlearn.learner_from_state(CheckpointStore(tmp_path / "ck").load_latest()["learner"])
    info = json.loads(cli("inspect", tmp_path / "ck", "--json").stdout)
    assert info["temperature"] == model.temperature != 1.0
    assert f"temperature  {model.temperature:.4g}" in cli("inspect", tmp_path / "ck").stdout.decode()


@pytest.mark.parametrize("beta", [1e-4, 0.3, 5.0])
def test_the_newton_terms_kernel_is_the_numpy_softmax_moments(beta):
    """The fit's compiled pass against its NumPy reference: each row's mean and variance of the
    scores under softmax(β s), summed; a class that did not exist (-inf) has probability 0."""
    from streamlearn.kernels import compiled

    rng = np.random.default_rng(int(beta * 10))
    scores = rng.normal(size=(300, 6)) * 20
    scores[rng.random((300, 6)) < 0.2] = -np.inf
    scores[:, 0] = rng.normal(size=300) * 20  # every row has a class
    shifted = scores - scores.max(axis=1, keepdims=True)
    centred = np.where(np.isfinite(shifted), shifted, 0.0)
    p = np.exp(beta * shifted)
    p /= p.sum(axis=1, keepdims=True)
    mean = (p * centred).sum(axis=1)
    variance = (p * centred**2).sum(axis=1) - mean**2
    got = compiled("calibration").newton_terms(scores, np.arange(300), scores.max(axis=1), beta)
    assert got == pytest.approx((mean.sum(), variance.sum()), rel=1e-10)


def test_two_examples_learned_give_no_certainty():
    """Issue 73.9: after two learn_one calls (two classes, neither scored before it was learned)
    the raw softmax of Pegasos' first margins said 0.0 / 1.0; with nothing scored yet the
    probabilities are uniform, and the first example scored brings them the prior's modesty."""
    model = MulticlassSVM()
    model.learn_one({"a": 1.0, "b": 0.2}, "x")
    model.learn_one({"a": 0.1, "b": 1.0}, "y")
    assert model.predict_proba_one({"a": 1.0, "b": 0.2}) == {"x": 0.5, "y": 0.5} and model.temperature == np.inf
    model.learn_one({"a": 0.9, "b": 0.3}, "x")
    assert 0.0 < min(model.predict_proba_one({"a": 0.1, "b": 1.0}).values()) and np.isfinite(model.temperature)


def _small_set(name):
    datasets = pytest.importorskip("sklearn.datasets")
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_train)
    order = np.random.default_rng(0).permutation(len(y_train))
    return scaler.transform(X_train)[order], y_train[order], scaler.transform(X_test), y_test


def _test_log_loss(model, X, y) -> float:
    proba = model.predict_proba_many(X)
    columns = [list(proba.columns).index(label) for label in y]
    return float(-np.mean(np.log(np.clip(proba.to_numpy()[np.arange(len(y)), columns], 1e-15, 1.0))))


@pytest.mark.parametrize("name", ["iris", "digits"])
def test_one_pass_over_a_small_set_is_calibrated(name):
    """Issue 73.9: iris' 105 rows never reached the first refit at 512 (log-loss 1.43 > ln 3, the
    raw softmax); digits was fitted on its stream's older half too (0.84). Now 0.29 and 0.30
    (LogisticRegression solved on the whole set: 0.16 and 0.10).
    Not yet: a set on which the fast tracker takes over (wine, breast cancer) keeps a β fitted on
    the averaged model's scores, ~100 times larger than the tracker's (see the issue's note)."""
    X, y, X_test, y_test = _small_set(name)
    model = MulticlassSVM()
    model.learn_many(X, y)
    assert _test_log_loss(model, X_test, y_test) < 0.4


@pytest.mark.parametrize("name", ["iris", "breast_cancer"])
def test_fit_on_a_small_set_is_calibrated_within_half_again_logistic_regression(name):
    """Issue 73.9's bound through scikit-learn's wrapper (five passes): iris 0.39 -> 0.06 against
    LogisticRegression's 0.16, breast cancer 0.109 -> 0.108 against 0.085. Not yet within it:
    wine (0.098 against 0.042) and digits (0.30 against 0.10), and no temperature gets there: the
    best β on the test rows themselves gives 0.081 and 0.312. The hinge model's scores are the limit
    (96.3 / 95.6 % accuracy against 100 / 97.2 %); MulticlassLogisticRegressionClassifier: wine 0.039."""
    pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression

    from streamlearn.sklearn import MulticlassSVMClassifier

    X, y, X_test, y_test = _small_set(name)
    ours = MulticlassSVMClassifier(random_state=0).fit(X, y)
    reference = LogisticRegression(max_iter=2000).fit(X, y)
    theirs = float(-np.mean(np.log(reference.predict_proba(X_test)[np.arange(len(y_test)), np.searchsorted(reference.classes_, y_test)])))
    assert _test_log_loss(ours.learner_, X_test, y_test) < 1.5 * theirs


def test_a_fit_keeps_the_scores_of_the_scale_that_predicts_now():
    """A learnable 5-class stream of 500 rows on which the fast tracker takes over (three switches):
    fitted on every recent row, the averaged model's scores (~100x the tracker's) made the
    temperature near-uniform (test log-loss 1.56 at 92 % accuracy; the raw softmax gave 0.50);
    fitted on the rows of the newest rows' scale, and refitted when it moves, 0.31."""
    from helpers import libsvm_lines

    def parsed(lines):
        rows = [line.split() for line in lines]
        return [{int(k): float(v) for k, v in (t.split(":") for t in r[1:])} for r in rows], [int(r[0]) for r in rows]

    lines = libsvm_lines(2000, seed=4)
    (X, y), (X_test, y_test) = parsed(lines[:500]), parsed(lines[500:])
    model = MulticlassSVM()
    model.learn_many(X, y)
    assert model.n_switches > 0 and _test_log_loss(model, X_test, np.array(y_test)) < 0.45


def test_the_newest_spread_kernel_is_the_numpy_median_of_the_newest_rows_spreads():
    from streamlearn.kernels import calibration as kernel

    rng = np.random.default_rng(7)
    scores = rng.normal(size=(WINDOW, 6)) * rng.choice([0.1, 10.0], size=(WINDOW, 1))
    scores[rng.random(WINDOW) < 0.3, 4:] = -np.inf  # classes a row did not have
    for entered, n in ((0, 16), (5, 16), (700, 16), (WINDOW + 300, 16), (3000, 1)):
        rows = (entered - 1 - np.arange(min(n, entered, WINDOW))) % WINDOW
        finite = np.where(np.isinf(scores[rows]), np.nan, scores[rows])
        expected = float(np.median(np.nanmax(finite, axis=1) - np.nanmin(finite, axis=1))) if len(rows) else 0.0
        assert kernel.newest_spread(scores, entered, n) == pytest.approx(expected, rel=1e-15)


def test_the_temperature_is_refitted_when_the_predictor_changes_scale():
    """Issue 73.9: breast cancer, one pass; the fast tracker takes over and hands back (two
    switches), and the temperature fitted at the tracker's scale (~100x smaller) made the
    averaged model's probabilities certain: test log-loss 1.50 (LogisticRegression 0.085). A
    scale check every 8 examples refits it: 0.13."""
    X, y, X_test, y_test = _small_set("breast_cancer")
    model = MulticlassSVM()
    model.learn_many(X, y)
    assert model.n_switches >= 2 and _test_log_loss(model, X_test, y_test) < 0.2


def test_the_temperature_does_not_depend_on_columns_of_classes_not_yet_there():
    """A batch holds columns for classes a learn_one loop had not met yet (-inf): β must be the
    same bit for bit (a pairwise row sum once moved it by an ulp, and the runner's checkpoint
    differed from a learn_one loop's: test_decoder_fuzz)."""
    rng = np.random.default_rng(0)
    for _ in range(500):
        classes, rows = int(rng.integers(2, 12)), int(rng.integers(1, 20))
        scores = rng.normal(size=(rows, classes)) * rng.choice([1.0, 100.0, 1000.0])
        targets = rng.integers(0, classes, size=rows)
        padded = np.hstack([scores, np.full((rows, int(rng.integers(1, 4))), -np.inf)])
        assert fit_temperature(padded, targets) == fit_temperature(scores, targets)


def test_observing_a_batch_gives_each_row_the_temperature_of_one_row_at_a_time():
    """Scores that change scale ~100x in runs (the tracker taking over and handing back), a class
    met late, a window that wraps: cut into batches at random, every row's β and the final window
    equal one row at a time. A batch once wrote its rows past a scale check into the ring before
    the fit there, which then fitted on rows of the future (a Kafka run killed and resumed ended
    with another β than an uninterrupted one)."""
    rng = np.random.default_rng(3)
    n = 5 * WINDOW
    scale = np.repeat(rng.choice([0.05, 1.0, 100.0], size=n // 100 + 1), 100)[:n, None]
    scores = rng.normal(size=(n, 5)) * scale
    targets = np.where(rng.random(n) < 0.8, scores.argmax(axis=1), rng.integers(0, 5, n))
    classes = np.where(np.arange(n) < 700, 4, 5)  # class 4 exists from row 700
    targets = np.where(targets >= classes, 0, targets)
    one, batched, betas = TemperatureCalibration(), TemperatureCalibration(), []
    for i in range(n):
        one.observe(scores[i : i + 1, : classes[i]], targets[i : i + 1], int(classes[i]))
        betas.append(one.beta)
    cuts = np.unique(np.concatenate([[0, 700, n], rng.integers(1, n, 40)]))
    for start, stop in zip(cuts[:-1], cuts[1:]):
        batched.start_log()
        batched.observe(scores[start:stop, : classes[start]], targets[start:stop], int(classes[start]))
        np.testing.assert_array_equal(batched.betas_at(np.arange(1, stop - start + 1)), betas[start:stop])
        batched.stop_log()
    assert len(set(betas)) > 20  # the scale moves were met
    for key, value in one.export().items():
        np.testing.assert_array_equal(batched.export()[key], value)


def _numpy_fit(scores, targets, start=1.0):
    """The fit of the calibration module's docstring in plain NumPy: Newton's method on L(β) with
    the prior's uniform targets, steps within a factor 4, β within [FLAT_NATS, SPAN_NATS] / spread."""
    from streamlearn.calibration import FLAT_NATS, MAX_ITERATIONS

    exists = np.isfinite(scores)
    shifted = scores - scores.max(axis=1, keepdims=True)
    centred = np.where(exists, shifted, 0.0)
    spread = float(np.mean(-centred.min(axis=1)))
    low, high, prior = FLAT_NATS / spread, SPAN_NATS / spread, PRIOR_EXAMPLES / len(targets)
    total_true = centred[np.arange(len(targets)), targets].sum() + prior * (centred.sum(axis=1) / exists.sum(axis=1)).sum()
    beta = min(max(start, low), high)
    for _ in range(MAX_ITERATIONS):
        p = np.where(exists, np.exp(beta * shifted), 0.0)
        p /= p.sum(axis=1, keepdims=True)
        mean = (p * centred).sum(axis=1)
        gradient = (1 + prior) * mean.sum() - total_true
        curvature = (1 + prior) * ((p * centred**2).sum(axis=1) - mean**2).sum()
        step = beta - gradient / curvature if curvature > 0 else (4 * beta if gradient < 0 else 0.0)
        after = min(max(step, beta / 4, low), 4 * beta, high)
        if abs(after - beta) <= 1e-7 * beta:
            return after
        beta = after
    return beta


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_fit_is_the_numpy_fit(seed):
    """kernels/calibration.fit_beta against the module docstring's fit in NumPy (sums in another
    order: equal to rounding)."""
    rng = np.random.default_rng(seed)
    rows, classes = int(rng.integers(1, 700)), int(rng.integers(2, 12))
    scores = rng.normal(size=(rows, classes)) * rng.choice([0.01, 1.0, 100.0])
    scores[: rows // 3, classes - 1] = -np.inf  # a class met late
    targets = np.where(rng.random(rows) < 0.7, scores.argmax(axis=1), 0)
    start = float(rng.choice([0.0, 1.0, 50.0]))
    assert fit_temperature(scores, targets, start) == pytest.approx(_numpy_fit(scores, targets, start), rel=1e-9)


def test_a_fit_on_no_rows_or_tied_scores_keeps_its_start():
    assert fit_temperature(np.zeros((0, 3)), np.zeros(0, np.int64), 2.5) == 2.5
    assert fit_temperature(np.ones((4, 3)), np.zeros(4, np.int64), 0.5) == 0.5


def test_refits_come_at_the_first_example_then_each_doubling_then_every_refit_every():
    from streamlearn.calibration import SETTINGS
    from streamlearn.kernels.calibration import next_refit

    due = [next_refit.py_func(n, SETTINGS) for n in (0, 1, 3, 32, 100, 511, 512, 1000)]
    assert due == [1, 2, 4, 64, 128, 512, 1024, 1024]


def test_every_refit_point_is_one_the_one_row_road_calls_the_kernel_at():
    """TemperatureCalibration.count_entered calls the kernel only at counts up to or at multiples of
    SCALE_CHECK_EVERY: every count at which a refit falls due must be one of them."""
    from streamlearn.calibration import SCALE_CHECK_EVERY, SETTINGS
    from streamlearn.kernels.calibration import next_refit

    due = {next_refit.py_func(n, SETTINGS) for n in range(20 * REFIT_EVERY)}
    assert all(d <= SCALE_CHECK_EVERY or d % SCALE_CHECK_EVERY == 0 for d in due) and len(due) > 20
