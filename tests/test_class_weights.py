"""Class weights (issue 77, :mod:`streamlearn.class_weights`): ``class_weight={label: weight}`` is the
per-example weight of the example's class, ``"balanced"`` the running estimate against its plain
definition, every road bit for bit (learn_one loop, batches cut anywhere, a checkpoint between), and on
an imbalanced stream the minority class is found more often."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn.class_weights import RunningBalance
from streamlearn.errors import InvalidParameterError
from helpers import assert_same_state

MCID = ["MulticlassSVM", "MulticlassLogisticRegression", "MulticlassPerceptron", "OneVsRestPegasos",
        "OneVsRestLogisticRegression"]
OTHERS = [name for name in streamlearn.LEARNERS if name not in MCID]


def balanced_reference(targets) -> list[float]:
    """The module docstring's estimator, one example at a time: ``since / (K · count)``."""
    counts, first, out = {}, {}, []
    for number, k in enumerate(targets, 1):
        counts[k] = counts.get(k, 0) + 1
        first.setdefault(k, number)
        out.append((number - first[k] + 1) / (len(first) * counts[k]))
    return out


def imbalanced(n: int, seed: int = 0, late: int = 0):
    """Dict rows of three classes, priors 10 : 3 : 1, the rarest appearing only after ``late`` rows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1.0, (3, 5))
    y = rng.choice(3, n, p=[10 / 14, 3 / 14, 1 / 14])
    if late:
        y[:late][y[:late] == 2] = 0
    X = centres[y] + rng.normal(0, 1.0, (n, 5))
    return [dict(enumerate(row.tolist())) for row in X], [f"c{k}" for k in y]


def test_the_running_balance_is_its_definition_whatever_the_batches():
    rng = np.random.default_rng(3)
    targets = rng.choice(5, 700, p=[0.6, 0.2, 0.1, 0.07, 0.03])
    targets[:200][targets[:200] > 2] = 0  # classes 3 and 4 appear late
    balance, got = RunningBalance(), []
    cuts = np.sort(rng.choice(np.arange(1, 700), 40, replace=False))
    for part in np.split(targets, cuts):
        got.extend(balance.weights(part).tolist())
    np.testing.assert_allclose(got, balance_reference := balanced_reference(targets.tolist()), rtol=1e-15)
    assert got[0] == 1.0 and max(got[200:220]) < 50  # no huge first step for a late class
    restored = RunningBalance.restore(balance.export())
    assert restored.weights(np.array([4]))[0] == balance.weights(np.array([4]))[0]
    assert len(balance_reference) == 700


@pytest.mark.parametrize("name", MCID + [name for name in OTHERS if streamlearn.LEARNERS[name]().max_classes != 2])
def test_a_class_weight_dict_is_the_weight_of_each_example_of_its_class(name):
    X, y = imbalanced(400)
    table = {"c0": 0.5, "c2": 4.0}  # c1 not named: 1
    w = np.array([table.get(label, 1.0) for label in y]) * np.tile([1.0, 2.0, 0.5, 1.0], 100)
    weighted = streamlearn.LEARNERS[name](class_weight=table)
    weighted.learn_many(X, y, np.tile([1.0, 2.0, 0.5, 1.0], 100))
    by_hand = streamlearn.LEARNERS[name]()
    by_hand.learn_many(X, y, w)
    assert_same_state(weighted.export_state()["model"], by_hand.export_state()["model"])
    assert weighted.class_weights() == {"c0": 0.5, "c1": 1.0, "c2": 4.0}


ROADS = ([(name, settings) for name in MCID for settings in ({}, {"batch_size": 3}, {"standardize": True}, {"lam": "auto"})]
         + [(name, {"refit_every": 40} if "refit_every" in streamlearn.LEARNERS[name]()._get_params() else {}) for name in OTHERS])


@pytest.mark.parametrize(("name", "settings"), ROADS, ids=str)
def test_balanced_is_the_same_model_on_every_road(name, settings):
    X, y = imbalanced(300, late=120)
    if streamlearn.LEARNERS[name]().max_classes == 2:  # the binary learner: the rarest class against the others
        y = [label == "c2" for label in y]
    make = lambda: streamlearn.LEARNERS[name](class_weight="balanced", **settings)  # noqa: E731
    many = make()
    many.learn_many(X, y)
    one = make()
    for x, label in zip(X, y):
        one.learn_one(x, label)
    cut, resumed = make(), None
    for lo, hi in ((0, 7), (7, 150), (150, 151), (151, 300)):
        if lo == 151:
            resumed = streamlearn.learner_from_state(cut.export_state())  # a checkpoint between
            cut = resumed
        cut.learn_many(X[lo:hi], y[lo:hi])
    by_hand = streamlearn.LEARNERS[name](**settings)
    classes = list(by_hand.classes_) if by_hand.max_classes == 2 else list(dict.fromkeys(y))  # class indices' order
    by_hand.learn_many(X, y, balanced_reference([classes.index(label) for label in y]))
    if name == "ExtremeSVM":  # (its sparse store's byte layout follows the calls; its model does not)
        scores = many.decision_function_many(X)
        for other in (one, cut, by_hand):
            assert np.array_equal(np.asarray(other.decision_function_many(X)), np.asarray(scores))
        return
    for other in (one, cut):
        assert_same_state(many.export_state(), other.export_state())
    assert_same_state(many.export_state()["model"], by_hand.export_state()["model"])


def test_balanced_finds_the_minority_class_more_often_on_an_imbalanced_stream():
    X, y = imbalanced(6000, seed=1)
    test_X, test_y = imbalanced(3000, seed=1)
    recalls = []
    for class_weight in (None, "balanced"):
        model = streamlearn.MulticlassSVM(class_weight=class_weight)
        model.learn_many(X, y)
        predicted = np.array(model.predict_many(test_X))
        rare = np.array(test_y) == "c2"
        recalls.append(float((predicted[rare] == "c2").mean()))
    assert recalls[1] > recalls[0] + 0.1, recalls


@pytest.mark.parametrize("bad", ["balance", {"a": 0}, {"a": -1.0}, {"a": float("nan")}, {"a": True}, ["a"]])
def test_a_bad_class_weight_is_refused_at_construction(bad):
    with pytest.raises(InvalidParameterError, match="class_weight"):
        streamlearn.MulticlassSVM(class_weight=bad)


@pytest.mark.parametrize(("face", "params"), [("MulticlassSVMClassifier", {"standardize": True}),
                                              ("MulticlassPGSClassifier", {"standardize": True}),
                                              ("PrimalGradientSolverClassifier", {"standardize": True}),
                                              ("StagewiseRegressionClassifier", {"ridge": 1e-6}),
                                              ("ExtremeSVMClassifier", {"standardize": True, "adapt": False})])
def test_scikit_learns_class_weight_check_holds_with_the_setting_its_blobs_need(face, params):
    """scikit-learn's ``check_class_weight_classifiers`` fails on its unscaled blobs for these faces (expected
    failures in test_sklearn.py); standardized (or, least squares, with a free bias) the heavy class is
    predicted as the check asks."""
    from sklearn.datasets import make_blobs
    from sklearn.model_selection import train_test_split

    import streamlearn.sklearn as sk

    for n_centers in (2, 3) if face != "PrimalGradientSolverClassifier" else (2,):
        X, y = make_blobs(centers=n_centers, random_state=0, cluster_std=20)
        X_train, X_test, y_train, _ = train_test_split(X, y, test_size=0.5, random_state=0)
        weights = {0: 1000, 1: 0.0001, 2: 0.0001} if n_centers == 3 else {0: 1000, 1: 0.0001}
        model = getattr(sk, face)(class_weight=weights, random_state=0, **params).fit(X_train, y_train)
        assert np.mean(model.predict(X_test) == 0) > 0.87


def test_inspect_shows_the_class_weights_of_a_balanced_run(tmp_path):
    from helpers import cli

    X, y = imbalanced(200)
    import json

    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"x": {str(k): v for k, v in x.items()}, "y": label}) + "\n"
                                              for x, label in zip(X, y)))
    cli("train", tmp_path / "d.jsonl", "--param", "class_weight=balanced", "--checkpoint-dir", tmp_path / "ck", "--quiet")
    text = cli("inspect", tmp_path / "ck").stdout.decode()
    line = next(line for line in text.splitlines() if line.startswith("class weight"))
    weights = dict(pair.split() for pair in line.removeprefix("class weight").strip().split(", "))
    assert float(weights["c2"]) > float(weights["c1"]) > float(weights["c0"])


@pytest.mark.parametrize("name", ["GeneralizedLeastSquares", "CalibratedLeastSquares", "LpNormMulticlassSVM"])
def test_a_batch_fit_balances_by_the_datas_own_frequencies(name):
    """``fit`` knows the whole data: ``"balanced"`` is scikit-learn's ``n / (K n_k)`` there."""
    X, y = imbalanced(500, seed=2)
    counts = {label: y.count(label) for label in set(y)}
    by_hand = [len(y) / (len(counts) * counts[label]) for label in y]
    balanced = streamlearn.LEARNERS[name](class_weight="balanced").fit(X, y)
    weighted = streamlearn.LEARNERS[name]().fit(X, y, w=np.array(by_hand))
    np.testing.assert_allclose(balanced.decision_function_many(X), weighted.decision_function_many(X), atol=1e-12)
