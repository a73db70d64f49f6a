"""Bad input raises a ValueError naming the row and the problem, and leaves the model unchanged."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from streamlearn import InvalidInputError, InvalidParameterError, MulticlassSVM, OneVsRestPegasos


@pytest.fixture
def trained():
    model = MulticlassSVM(lam=0.1, batch_size=2)
    model.learn_many(pd.DataFrame({"a": [1.0, 0.0, 2.0], "b": [0.0, 1.0, 1.0]}), ["x", "y", "x"])
    return model


def _unchanged(model, action):
    before = pickle.dumps(model)
    with pytest.raises(InvalidInputError) as info:
        action(model)
    assert pickle.dumps(model) == before, "a rejected input changed the model"
    assert isinstance(info.value, ValueError)
    return info.value


@pytest.mark.parametrize(
    ("x", "reason", "feature"),
    [
        ({"a": math.nan}, "non-finite", "a"),
        ({"a": 1.0, "new": math.inf}, "non-finite", "new"),
        ({"a": 1.0, "new": "3.5"}, "non-numeric", "new"),
        ({"a": None}, "non-numeric", "a"),
        ({"new": [1.0]}, "non-numeric", "new"),
        ({"a": 1.0, "new": 10**400}, "non-finite", "new"),  # an int beyond the float range
        ({"a": -(10**400)}, "non-finite", "a"),
    ],
)
def test_learn_one_rejects_bad_values(trained, x, reason, feature):
    error = _unchanged(trained, lambda m: m.learn_one(x, "x"))
    assert error.reason == reason and error.feature == feature
    assert repr(feature) in str(error)


@pytest.mark.parametrize("label", [None, "", "   ", math.nan, np.nan])
def test_learn_one_rejects_empty_labels(trained, label):
    error = _unchanged(trained, lambda m: m.learn_one({"brand_new_feature": 1.0}, label))
    assert error.reason == "empty-label"


def test_learn_many_names_the_bad_row_dataframe(trained):
    X = pd.DataFrame({"a": [1.0, 2.0, 3.0, np.nan], "c": [0.0, 1.0, 1.0, 1.0]})
    error = _unchanged(trained, lambda m: m.learn_many(X, ["x", "y", "z", "x"]))
    assert (error.reason, error.row, error.feature) == ("non-finite", 3, "a")
    assert "row 3" in str(error)


def test_learn_many_names_the_bad_row_object_column(trained):
    X = pd.DataFrame({"a": [1.0, "oops", 3.0]})
    error = _unchanged(trained, lambda m: m.learn_many(X, ["x", "y", "x"]))
    assert (error.reason, error.row, error.feature) == ("non-numeric", 1, "a")


def test_learn_many_names_an_integer_too_large_for_a_float(trained):
    for X in ([{"a": 1.0}, {"a": 2, "c": 10**400}], pd.DataFrame({"a": [1, 2], "c": [0, 10**400]}, dtype=object),
              np.array([[1, 0], [2, 10**400]], dtype=object)):
        error = _unchanged(trained, lambda m: m.learn_many(X, ["x", "y"]))
        assert (error.reason, error.row) == ("non-finite", 1) and error.feature in ("c", 1)
        assert "401 digits is too large for a float" in str(error)


def test_learn_many_names_the_bad_row_sparse_and_dense(trained):
    dense = np.ones((4, 3))
    dense[2, 1] = np.inf
    for X in (dense, sp.csr_matrix(dense)):
        error = _unchanged(trained, lambda m: m.learn_many(X, ["x"] * 4))
        assert (error.reason, error.row, error.feature) == ("non-finite", 2, 1)


@pytest.mark.parametrize("bad_index", [-1, 3, 10**6])
def test_sparse_matrix_with_a_column_index_outside_its_width_is_refused(trained, bad_index):
    """SciPy builds such a matrix without looking; a negative index was read as a position
    counted from the end of the column map, and learned silently under the wrong feature."""
    X = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([0, 2, bad_index]), np.array([0, 1, 2, 3])), shape=(3, 3))
    for action in (lambda m: m.learn_many(X, ["x"] * 3), lambda m: m.predict_many(X)):
        error = _unchanged(trained, action)
        assert (error.reason, error.row) == ("bad-shape", 2) and str(bad_index) in str(error)


def test_sparse_matrix_with_broken_row_pointers_is_refused(trained):
    X = sp.csr_matrix(np.ones((3, 3)))
    X.indptr[1], X.indptr[2] = 7, 2  # decreasing: the compiled loops would read past the arrays
    error = _unchanged(trained, lambda m: m.learn_many(X, ["x"] * 3))
    assert error.reason == "bad-shape" and "row pointers" in str(error)


def test_learn_many_rejects_length_mismatch_and_empty_label(trained):
    X = pd.DataFrame({"a": [1.0, 2.0]})
    assert _unchanged(trained, lambda m: m.learn_many(X, ["x"])).reason == "length-mismatch"
    error = _unchanged(trained, lambda m: m.learn_many(X, ["x", None]))
    assert (error.reason, error.row) == ("empty-label", 1)


def test_learn_many_rejects_bad_shapes_and_types(trained):
    assert _unchanged(trained, lambda m: m.learn_many(np.ones(3), ["x"] * 3)).reason == "bad-shape"
    assert _unchanged(trained, lambda m: m.learn_many("not a batch", ["x"] * 11)).reason == "bad-type"
    assert _unchanged(trained, lambda m: m.learn_one([1.0, 2.0], "x")).reason == "bad-type"
    for x in (None, 5):  # len(x) ahead of the type check raised a bare TypeError
        assert _unchanged(trained, lambda m: m.learn_one(x, "x")).reason == "bad-type"


def test_prediction_rejects_bad_values_too(trained):
    with pytest.raises(InvalidInputError):
        trained.predict_one({"a": math.nan})
    with pytest.raises(InvalidInputError):
        trained.predict_many(pd.DataFrame({"a": [np.inf]}))


@pytest.mark.parametrize(
    "params", [{"lam": 0}, {"lam": -1.0}, {"lam": math.nan}, {"lam": math.inf}, {"batch_size": 0}, {"batch_size": 1.5}, {"n_bits": 0}]
)
def test_bad_parameters_fail_at_construction(params):
    with pytest.raises(ValueError):
        OneVsRestPegasos(**params)


def test_parameter_error_is_a_value_error_with_the_name():
    with pytest.raises(InvalidParameterError, match="lam must be a positive finite number"):
        MulticlassSVM(lam=0.0)
