"""Checkpoint files (atomic, checksummed, versioned, fall-back) and the runner's metrics."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from river import metrics as river_metrics

import streamlearn
from streamlearn.service.checkpoint import (FORMAT_VERSION, CheckpointError, CheckpointStore, CorruptCheckpoint, dumps, loads,
                                   with_digest)
from streamlearn.service.metrics import ClassificationMetrics
from helpers import assert_same_state, records


@pytest.mark.parametrize("name", sorted(streamlearn.LEARNERS))
def test_a_restored_learner_predicts_exactly_as_the_saved_one(tmp_path, name):
    cls = streamlearn.LEARNERS[name]
    recs = records(300)
    if not cls()._multiclass:  # a binary learner: two classes
        recs = [{"x": r["x"], "y": r["y"] == "c0"} for r in recs]
    model = cls(**list(cls._unit_test_params())[-1])  # the non-default options (mini-batches, averaging, ...)
    for r in recs[:200]:
        model.learn_one(r["x"], r["y"])
    model.learn_one(recs[200]["x"], recs[200]["y"])  # leaves a pending example
    store = CheckpointStore(tmp_path)
    store.save({"learner": model.export_state(), "position": None})
    restored = streamlearn.learner_from_state(store.load_latest()["learner"])
    assert_same_state(model.export_state(), restored.export_state())
    if not model.resumes_exactly:  # its index is rebuilt: same weights, not the same future
        return
    for r in recs[201:]:
        assert model.decision_function_one(r["x"]) == restored.decision_function_one(r["x"])
        model.learn_one(r["x"], r["y"])
        restored.learn_one(r["x"], r["y"])
    assert_same_state(model.export_state(), restored.export_state())


def test_keeps_the_last_n_and_falls_back_past_a_corrupt_one(tmp_path):
    store = CheckpointStore(tmp_path, keep=3)
    for i in range(5):
        store.save({"i": i, "w": np.full(4, float(i))})
    assert [p.name for p in store.paths()] == [f"ckpt-{i:012d}.slc" for i in (3, 4, 5)]
    newest = store.paths()[-1]
    data = bytearray(newest.read_bytes())
    data[-3] ^= 0xFF  # flip bits in the payload
    newest.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="checksum mismatch"):
        payload = store.load_latest()
    assert payload["i"] == 3 and payload["path"].endswith("ckpt-000000000004.slc")
    store.paths()[-2].write_bytes(b"STREAMLEARN")  # truncated
    with pytest.warns(UserWarning):
        assert store.load_latest()["i"] == 2
    for p in store.paths():
        p.write_bytes(b"garbage")
    with pytest.warns(UserWarning), pytest.raises(CorruptCheckpoint, match="no usable checkpoint"):
        store.load_latest()


def test_another_format_version_is_refused_with_a_clear_message():
    body = dumps({"a": 1})[struct.calcsize("<12sI32s"):]
    with pytest.raises(CheckpointError, match=f"format version {FORMAT_VERSION + 1}.*reads version {FORMAT_VERSION}"):
        loads(with_digest(FORMAT_VERSION + 1, body))  # an intact file that a later streamlearn wrote


@pytest.mark.parametrize("byte", range(12, 16))
def test_a_flipped_byte_in_the_version_field_is_damage_and_falls_back(tmp_path, byte):
    """The version field is inside the digest: a flipped bit there is a corrupt file (the
    store falls back to the previous checkpoint), not "another format version" (which
    stopped the job)."""
    store = CheckpointStore(tmp_path)
    store.save({"i": 1})
    store.save({"i": 2})
    newest = store.paths()[-1]
    data = bytearray(newest.read_bytes())
    data[byte] ^= 0xFE
    newest.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="checksum mismatch"):
        assert store.load_latest()["i"] == 1


def test_format_1_checkpoints_are_still_read():
    import hashlib

    body = dumps({"a": [1, 2]})[struct.calcsize("<12sI32s"):]
    legacy = struct.pack("<12sI32s", b"STREAMLEARN\0", 1, hashlib.sha256(body).digest()) + body
    assert loads(legacy) == {"a": [1, 2]}
    damaged = bytearray(legacy)
    damaged[-1] ^= 1
    with pytest.raises(CorruptCheckpoint):
        loads(bytes(damaged))


def test_a_full_disk_is_one_clear_error_and_leaves_no_partial_file(tmp_path, monkeypatch):
    import errno
    import os

    store = CheckpointStore(tmp_path)
    store.save({"learner": {"w": np.arange(3.0)}})

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(CheckpointError, match="cannot write a checkpoint in .*No space left on device.*--resume"):
        store.save({"learner": {"w": np.arange(4.0)}})
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000000001.slc"]
    assert store.load_latest()["learner"]["w"].tolist() == [0.0, 1.0, 2.0]


def test_no_temporary_file_is_left_behind(tmp_path):
    store = CheckpointStore(tmp_path)
    store.save({"x": np.arange(5)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000000001.slc"]


def test_arrays_keep_dtype_and_shape_and_objects_are_refused():
    payload = loads(dumps({"a": np.arange(6, dtype=np.int32).reshape(2, 3), "b": np.float32(1.5), "t": (1, 2)}))
    assert payload["a"].dtype == np.int32 and payload["a"].shape == (2, 3)
    assert payload["b"] == 1.5 and payload["t"] == (1, 2)
    with pytest.raises(TypeError):
        dumps({"bad": np.array([object()])})


def test_integers_beyond_64_bits_round_trip(tmp_path):
    """A label or an int feature name beyond msgpack's 64-bit integers (JSON allows them) is
    checkpointed as such: the daemon must not learn a record it cannot checkpoint."""
    assert loads(dumps({"big": [10**30, -(2**64), 2**64 - 1, -(2**63)]}))["big"] == [10**30, -(2**64), 2**64 - 1, -(2**63)]
    model = streamlearn.MulticlassSVM()
    model.learn_one({"a": 1.0, 2**70: 0.5}, 10**30)
    model.learn_one({"b": 1.0}, "small")
    store = CheckpointStore(tmp_path)
    store.save({"learner": model.export_state()})
    restored = streamlearn.learner_from_state(store.load_latest()["learner"])
    assert_same_state(model.export_state(), restored.export_state())
    assert restored.classes == [10**30, "small"]
    assert restored.decision_function_one({2**70: 1.0}) == model.decision_function_one({2**70: 1.0})


def test_tuple_labels_and_feature_names_round_trip():
    """A tuple label, or a DataFrame's MultiIndex column names, came back as lists: the
    checkpoint was written but could not be restored (unhashable type: 'list')."""
    import pandas as pd

    X = pd.DataFrame(np.eye(3), columns=pd.MultiIndex.from_tuples([("a", 1), ("a", 2), ("b", (1, 2))]))
    model = streamlearn.MulticlassSVM()
    model.learn_many(X, [("c", 1), ("c", 2), "z"])
    restored = streamlearn.learner_from_state(loads(dumps({"learner": model.export_state()}))["learner"])
    assert_same_state(model.export_state(), restored.export_state())
    assert restored.classes == [("c", 1), ("c", 2), "z"] and restored.predict_many(X).tolist() == model.predict_many(X).tolist()


_TEXT = st.text(max_size=3) | st.text(alphabet=st.sampled_from(["a", "é", "\ud800"]), max_size=2)
_KEYS = st.recursive(_TEXT | st.integers() | st.booleans() | st.floats(allow_nan=False), lambda inner: st.tuples(inner, inner), max_leaves=3)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(examples=st.lists(st.tuples(st.dictionaries(_KEYS, st.floats(-10, 10), min_size=1, max_size=3),
                                   _KEYS.filter(lambda y: not isinstance(y, str) or y.strip())),  # a blank label is refused
                         min_size=1, max_size=12))
def test_any_hashable_labels_and_names_survive_a_checkpoint(examples):
    """Labels and feature names of every kind a river user may pass (strings with lone
    surrogates, ints of any size, bools, floats, tuples of these): the restored learner
    exports the same state and scores the same."""
    model = streamlearn.MulticlassSVM(lam=0.1)
    for x, y in examples:
        model.learn_one(x, y)
    restored = streamlearn.learner_from_state(loads(dumps({"learner": model.export_state()}))["learner"])
    assert_same_state(model.export_state(), restored.export_state())
    for x, _ in examples:
        assert model.decision_function_one(x) == restored.decision_function_one(x)


def test_strings_with_lone_surrogates_round_trip():
    """JSON's "\\ud800" decodes to a str that is not valid UTF-8: as a label or a feature name
    it made every checkpoint fail (UnicodeEncodeError), so the daemon stopped."""
    model = streamlearn.MulticlassSVM()
    model.learn_one({"\udfff": 1.0}, "\ud800")
    model.learn_one({"b": 1.0}, "ok")
    restored = streamlearn.learner_from_state(loads(dumps({"learner": model.export_state()}))["learner"])
    assert restored.classes == ["\ud800", "ok"]
    assert restored.decision_function_one({"\udfff": 1.0}) == model.decision_function_one({"\udfff": 1.0})


def test_metrics_equal_river_example_by_example():
    rng = np.random.default_rng(3)
    labels = ["a", "b", "c", 4]
    ours = ClassificationMetrics()
    acc, f1, ce = river_metrics.Accuracy(), river_metrics.MacroF1(), river_metrics.CrossEntropy()
    for _ in range(20):
        n = int(rng.integers(1, 30))
        y_true = [labels[i] for i in rng.integers(0, 4, n)]
        y_pred = [labels[i] for i in rng.integers(0, 4, n)]
        proba = rng.dirichlet(np.ones(4), n)
        p_true = [proba[i, labels.index(y)] for i, y in enumerate(y_true)]
        ours.update(y_true, y_pred, p_true)
        for i in range(n):
            acc.update(y_true[i], y_pred[i])
            f1.update(y_true[i], y_pred[i])
            ce.update(y_true[i], dict(zip(labels, proba[i])))
        summary = ours.summary()
        assert summary["accuracy"] == pytest.approx(acc.get(), abs=1e-12)
        assert summary["macro_f1"] == pytest.approx(f1.get(), abs=1e-12)
        assert summary["log_loss"] == pytest.approx(ce.get(), abs=1e-9)
    restored = ClassificationMetrics.restore(loads(dumps(ours.export())))
    assert restored.summary() == ours.summary()


def test_metrics_leave_out_missing_predictions_and_charge_unseen_classes():
    """No prediction (no class known, no fit yet) is unscored, as in river's progressive_val_score;
    a prediction that gives the true class 0 (a class the model never saw) costs -log 1e-15."""
    m = ClassificationMetrics()
    m.update(["a", "b", "c"], [None, "b", "b"], [0.0, 0.5, 0.0])
    summary = m.summary()
    assert summary["n"] == 2 and summary["unscored"] == 1
    assert summary["accuracy"] == 0.5
    assert summary["log_loss"] == pytest.approx((-np.log(0.5) - np.log(1e-15)) / 2)
    restored = ClassificationMetrics.restore(loads(dumps(m.export())))
    assert restored.summary() == summary
    with pytest.raises(ValueError):
        m.update(["a"], [])
