"""The scikit-learn face (streamlearn.sklearn): scikit-learn's own estimator checks for every
classifier and the regressor (expected failures: :func:`expected_failures`), pipelines with StandardScaler and
TfidfVectorizer, a grid search, partial_fit with a class that comes late, and the learner's numbers
bit for bit."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import streamlearn
import streamlearn.sklearn as sk

pytestmark = pytest.mark.slow  # every estimator through every scikit-learn check, as river's suite


def expected_failures(estimator) -> dict:
    """The checks scikit-learn itself expects to fail for ``SGDClassifier`` and that fail here for
    the same reason, one line each."""
    if not isinstance(estimator, sk.WeightedClassifierEstimator):
        return {}
    scale = ("the check's blobs are unscaled (σ = 20) and the default one-pass learner is not scale-robust (issue 73, "
             "item 8): with standardize=True the same check predicts its heavy class on ≥ 92 % (tests/test_class_weights.py)")
    if isinstance(estimator, (sk.GeneralizedLeastSquaresClassifier, sk.CalibratedLeastSquaresClassifier)):
        return {}  # their batch solvers: weights are repeats exactly, and the bias is free enough
    if isinstance(estimator, sk.StagewiseRegressionClassifier):
        return {"check_class_weight_classifiers": "its default ridge (0.1 of the mean diagonal, the defaults protocol's) "
                "holds back the bias the check's unscaled blobs need; with ridge=1e-6 it holds (tests/test_class_weights.py)"}
    if isinstance(estimator, sk.LpNormMulticlassSVMClassifier):
        why = ("its coordinate ascent stops at a duality gap of tol=1e-3: weighted and repeated rows reach one optimum "
               "within it, not within the check's tolerance (at tol=1e-8: tests/test_weights.py)")
        return {"check_sample_weight_equivalence_on_dense_data": why, "check_sample_weight_equivalence_on_sparse_data": why}
    why = ("a weight scales a row's stochastic step, as SGDClassifier's does; k repeats are k steps "
           "(and a pass's shuffled order differs), so the two models differ (tests/test_weights.py pins what holds)")
    if isinstance(estimator, sk.ExtremeSVMClassifier):
        scale = ("the check's blobs are unscaled (σ = 20) and the default learner is not scale-robust (issue 73, item 8); "
                 "standardized, the change watch's restarts over the check's five passes still lose the heavy class "
                 "(84 %): with standardize=True, adapt=False it holds (tests/test_class_weights.py)")
    return {"check_sample_weight_equivalence_on_dense_data": why, "check_sample_weight_equivalence_on_sparse_data": why,
            "check_class_weight_classifiers": scale}


@parametrize_with_checks([cls(random_state=0) for cls in (*sk.CLASSIFIERS.values(), *sk.REGRESSORS.values())],
                         expected_failed_checks=expected_failures)
def test_scikit_learns_own_checks_pass(estimator, check):
    check(estimator)


def blobs(n: int = 600, k: int = 4, d: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(k, d))
    y = rng.integers(0, k, n)
    return centres[y] + rng.normal(size=(n, d)), np.array([f"c{label}" for label in y])


def test_a_pipeline_with_a_scaler_and_a_grid_search_over_the_learners_parameters():
    X, y = blobs()
    search = GridSearchCV(make_pipeline(StandardScaler(), sk.MulticlassSVMClassifier(random_state=0)),
                          {"multiclasssvmclassifier__lam": [1e-4, 1e-2], "multiclasssvmclassifier__passes": [1, 3]}, cv=3)
    search.fit(X[:450], y[:450])
    assert set(search.best_params_) == {"multiclasssvmclassifier__lam", "multiclasssvmclassifier__passes"}
    assert search.score(X[450:], y[450:]) > 0.9
    assert clone(search.best_estimator_).get_params()["multiclasssvmclassifier__lam"] == search.best_params_[
        "multiclasssvmclassifier__lam"]


def test_a_text_pipeline_with_tfidf():
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = ["the cat purrs", "a dog barks", "cats purr softly", "dogs bark loudly", "the cat sleeps", "the dog runs"] * 20
    labels = ["cat", "dog", "cat", "dog", "cat", "dog"] * 20
    model = make_pipeline(TfidfVectorizer(), sk.MulticlassLogisticRegressionClassifier(random_state=0)).fit(texts, labels)
    assert model.predict(["a purring cat", "a barking dog"]).tolist() == ["cat", "dog"]
    assert model.predict_proba(["a purring cat"]).shape == (1, 2)


def test_partial_fit_takes_a_class_that_comes_late_and_gives_the_learners_numbers_bit_for_bit():
    X, y = blobs(seed=1)
    face = sk.MulticlassSVMClassifier(batch_size=8)
    learner = streamlearn.MulticlassSVM(batch_size=8)
    early = y != "c3"  # class c3 only in the last batch
    batches = [(X[early][:200], y[early][:200]), (X[early][200:], y[early][200:]), (X[~early], y[~early])]
    for i, (Xb, yb) in enumerate(batches):
        face.partial_fit(Xb, yb)  # no classes declared (declared ones would be all: test_trust_answers)
        learner.learn_many(Xb, yb)
        learner.flush()
        if i == 0:
            assert face.classes_.tolist() == ["c0", "c1", "c2"]
    assert face.classes_.tolist() == ["c0", "c1", "c2", "c3"]
    order = face.learner_.class_indices(face.classes_.tolist())
    np.testing.assert_array_equal(face.predict_proba(X), learner.predict_proba_many(X).to_numpy()[:, order])
    np.testing.assert_array_equal(face.decision_function(X), learner.decision_function_many(X)[:, order])
    assert face.predict(X).tolist() == learner.predict_many(X).tolist()


def test_fit_is_a_fresh_model_dataframes_keep_their_names_and_the_face_pickles():
    import pandas as pd

    X, y = blobs(seed=2)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    face = sk.ExtremeSVMClassifier(random_state=3).fit(frame, y)
    assert face.feature_names_in_.tolist() == list(frame.columns) and face.n_features_in_ == X.shape[1]
    again = pickle.loads(pickle.dumps(face))
    np.testing.assert_array_equal(again.predict_proba(frame), face.predict_proba(frame))
    refit = clone(face).fit(frame, y)
    np.testing.assert_array_equal(refit.decision_function(frame), face.decision_function(frame))
    with pytest.raises(ValueError, match="passes must be a positive integer"):
        sk.ExtremeSVMClassifier(passes=0).fit(frame, y)


def test_the_regressor_face_fits_a_linear_target():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(400, 5))
    y = X @ np.array([0.5, -0.3, 0.2, 0.0, 0.1])
    model = make_pipeline(StandardScaler(), sk.PrimalGradientRegressorEstimator(random_state=0)).fit(X, y)
    assert model.score(X, y) > 0.9
