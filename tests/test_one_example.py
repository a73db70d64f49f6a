"""The one-example road: ``learn_one(x)`` right after ``predict_one(x)`` takes the row the prediction
encoded (base.StreamClassifier._scores_one) and must learn exactly what ``learn_one`` alone learns —
with names the model has not seen, a dict changed between the calls, a scaler, hashing."""

from __future__ import annotations

import numpy as np
import pytest

from streamlearn import ExtremeSVM, MulticlassLogisticRegression, MulticlassSVM


def _dicts(n=1500, seed=0):
    """Dicts whose names vary: a core of 6, and now and then a name never seen before."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for i in range(n):
        x = {f"f{j}": float(v) for j, v in enumerate(rng.normal(size=6))}
        if i % 7 == 0:
            x[f"new{i}"] = 1.0
        rows.append(x)
        labels.append(int(x["f0"] + 0.5 * x["f1"] > 0) + (2 if x["f2"] > 1 else 0))
    return rows, labels


def _state(model) -> list:
    if hasattr(model, "weight_matrix"):
        return [model.weight_matrix(averaged=False), model.weight_matrix(), model.feature_keys]
    store = model.export_state()["model"]["store"]
    return [store["val"], store["scalars"], model.feature_keys]


@pytest.mark.parametrize("make", [MulticlassLogisticRegression, MulticlassSVM, ExtremeSVM,
                                  lambda: MulticlassSVM(standardize=True), lambda: MulticlassSVM(n_bits=8),
                                  lambda: MulticlassLogisticRegression(batch_size=3), lambda: MulticlassSVM(bins=None)])
def test_learn_one_after_predict_one_learns_what_learn_one_alone_learns(make, monkeypatch):
    from streamlearn.features import FeatureSpace

    rows, labels = _dicts()
    tested, alone = make(), make()
    encoded = []
    real_encode_one = FeatureSpace.encode_one
    monkeypatch.setattr(FeatureSpace, "encode_one", lambda space, x, grow, row=0: encoded.append(grow) or real_encode_one(space, x, grow, row))
    # every 11th dict changes between the calls: its new value must be learned
    learned = [{**x, "f3": x["f3"] + 1.0} if i % 11 == 0 else x for i, x in enumerate(rows)]
    for x, changed, y in zip(rows, learned, labels):
        tested.predict_one(x)
        tested.learn_one(changed, y)
    learned_afresh = sum(encoded)  # the learn_one calls that encoded x themselves
    for x, y in zip(learned, labels):
        alone.learn_one(x, y)
    from streamlearn.mcid import small_records

    # with bins, the prediction's row is not kept, but the C road (one-example steps) encodes in C
    in_c = small_records.compiled_road is not None and getattr(tested, "batch_size", None) == 1
    takes_the_row = not getattr(tested, "standardize", False) and getattr(tested, "n_bits", None) is None \
        and not isinstance(tested, ExtremeSVM) and (getattr(tested, "bins", None) is None or in_c)
    if takes_the_row:  # the changed dicts and those with a new name are encoded again, the rest are not
        assert 0 < learned_afresh < len(rows) / 3, learned_afresh
    else:
        assert learned_afresh == len(rows)
    for a, b in zip(_state(tested), _state(alone)):
        np.testing.assert_array_equal(a, b)


def test_a_row_kept_for_learn_one_is_taken_once_and_only_for_an_equal_dict():
    model = MulticlassSVM()
    x = {"a": 1.0, "b": 2.0}
    model.learn_one(x, 0)
    model.learn_one({"a": -1.0, "b": 0.5}, 1)
    model.predict_one(x)
    twin = MulticlassSVM.from_state(model.export_state())
    model.learn_one({"a": 1.0, "b": 2.5}, 1)  # not equal to the predicted dict: encoded afresh
    twin.learn_one({"a": 1.0, "b": 2.5}, 1)
    np.testing.assert_array_equal(model.weight_matrix(), twin.weight_matrix())
    model.predict_one(x)
    model.learn_one(x, 0)
    model.learn_one(x, 0)  # the kept row was used by the first call only; this one encodes x again
    twin.learn_one(x, 0)
    twin.learn_one(x, 0)
    np.testing.assert_array_equal(model.weight_matrix(), twin.weight_matrix())
