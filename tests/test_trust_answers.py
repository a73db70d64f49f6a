"""Answers that were wrong with exit 0 (issue 73, "Trust III"): one test (or a few) per item of
the issue, numbered as there. The commands run in-process where no standard input or signal is
involved, so that this file stays in the quick subset."""

from __future__ import annotations

import json

import numpy as np
import pytest

import streamlearn
from streamlearn.service import cli as cli_module
from test_ordinary_inputs import iris_csv, iris_like


def run(capsys, *args) -> tuple[int, str, str]:
    """``streamlearn ARGS`` in this process: exit code, stdout, stderr."""
    code = cli_module.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def summary(out: str) -> dict:
    return json.loads(out.splitlines()[0])


# 1. the window learners fit a stream shorter than refit_every; no model means no prediction
@pytest.mark.parametrize("learner", ["LpNormMulticlassSVM", "CalibratedLeastSquares", "StagewiseRegression"])
def test_a_window_learner_fits_a_stream_shorter_than_its_refit_period(tmp_path, capsys, learner):
    train, test = iris_csv(tmp_path / "train.csv", 120), iris_csv(tmp_path / "test.csv", 90, seed=1)
    code, out, _ = run(capsys, "train", train, "--learner", learner, "--label-column", "species",
                         "--checkpoint-dir", tmp_path / "m", "--quiet")
    assert code == 0
    prequential = summary(out)["prequential"]
    # the one batch was scored before any fit: no prediction, not 120 wrong ones at maximal loss
    assert prequential["unscored"] == 120 and prequential["n"] == 0
    code, out, _ = run(capsys, "evaluate", test, "--checkpoint", tmp_path / "m")
    assert code == 0 and summary(out)["accuracy"] > 0.8


def test_flush_refits_the_window_and_a_learner_without_a_fit_predicts_the_class_frequencies():
    rows = iris_like(30)
    X, y = [dict(enumerate(x)) for x, _ in rows], [label for _, label in rows]
    model = streamlearn.LpNormMulticlassSVM(refit_every=1000)
    model.learn_many(X, y)
    assert not model.has_model and model.n_pending == 30
    frequencies = {label: y.count(label) / len(y) for label in model.classes}
    majority = max(frequencies, key=frequencies.get)
    assert model.predict_proba_one(X[0]) == pytest.approx(frequencies)
    assert model.predict_one(X[0]) == majority and list(model.predict_many(X[:2])) == [majority] * 2
    assert model.predict_proba_many(X[:1]).iloc[0].to_dict() == pytest.approx(frequencies)
    model.flush()
    assert model.has_model and model.n_pending == 0 and model.n_fits == 1
    assert np.mean([p == t for p, t in zip(model.predict_many(X), y)]) > 0.8
    model.flush()  # nothing entered since: no second fit
    assert model.n_fits == 1
    restored = streamlearn.learner_from_state(model.export_state())
    assert restored.has_model and restored.predict_one(X[0]) == model.predict_one(X[0])


# 2. a feature named y does not win over a column named label
def test_a_coordinate_named_y_is_a_feature_beside_a_label_column(tmp_path, capsys):
    rng = np.random.default_rng(0)
    points = rng.normal(size=(300, 3))
    labels = np.where(points[:, 0] > 0, "east", "west")
    csv = tmp_path / "points.csv"
    csv.write_text("x,y,z,label\n" + "".join(f"{a:.3f},{b:.3f},{c:.3f},{k}\n" for (a, b, c), k in zip(points, labels)))
    jsonl = tmp_path / "points.jsonl"
    jsonl.write_text("".join(json.dumps({"x": a, "y": b, "z": c, "label": k}) + "\n" for (a, b, c), k in zip(points, labels)))
    for path in (csv, jsonl):
        code, _, _ = run(capsys, "train", path, "--checkpoint-dir", tmp_path / path.suffix[1:], "--quiet")
        assert code == 0
        code, out, _ = run(capsys, "inspect", tmp_path / path.suffix[1:], "--json")
        shown = json.loads(out)
        assert sorted(shown["first_classes"]) == ["east", "west"] and shown["features"] == 4  # x, y, z, the intercept


def test_a_header_with_two_label_names_is_refused_with_the_fix(tmp_path, capsys):
    path = tmp_path / "two.csv"
    path.write_text("a,class,label\n1,2,y\n")
    code, _, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "m")
    assert code != 0 and "'label' and 'class' could each be the label: give --label-column NAME" in err
    code, _, _ = run(capsys, "train", path, "--label-column", "label", "--checkpoint-dir", tmp_path / "m2", "--quiet")
    assert code == 0


# 3. serve reloads a checkpoint rewritten under the name it serves (train --overwrite)
def test_the_service_reloads_a_run_started_over_under_the_same_sequence_numbers(tmp_path, capsys):
    from streamlearn.service.serve.holders import ModelHolder

    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"x": {"f": i % 3}, "y": "old"}) + "\n" for i in range(20)))
    second.write_text("".join(json.dumps({"x": {"f": i % 3}, "y": f"new{i % 2}"}) + "\n" for i in range(20)))
    assert run(capsys, "train", first, "--checkpoint-dir", tmp_path / "m", "--quiet")[0] == 0
    holder = ModelHolder(tmp_path / "m", log=open(tmp_path / "log", "w"))
    assert holder.refresh() and holder.current.model.classes == ["old"]
    served = holder.current.path
    assert run(capsys, "train", second, "--checkpoint-dir", tmp_path / "m", "--overwrite", "--quiet")[0] == 0
    assert holder.store.paths()[-1] == served  # the same name, another run
    assert holder.refresh() and holder.current.model.classes == ["new0", "new1"]
    assert not holder.refresh()


# issue 74, item 5: a checkpoint seen half-written is tried again once it is rewritten whole
def test_a_half_written_checkpoint_is_retried_once_rewritten(tmp_path, capsys):
    import shutil

    from streamlearn.service.serve.holders import ModelHolder

    data = tmp_path / "a.jsonl"
    data.write_text("".join(json.dumps({"x": {"f": i % 3}, "y": i % 2}) + "\n" for i in range(20)))
    assert run(capsys, "train", data, "--checkpoint-dir", tmp_path / "m", "--quiet")[0] == 0
    whole = sorted((tmp_path / "m").glob("ckpt-*.slc"))[-1]
    served = tmp_path / "served"
    served.mkdir()
    target = served / whole.name
    target.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])  # `cp` caught half way
    holder = ModelHolder(served, log=open(tmp_path / "log", "w"))
    assert not holder.refresh() and len(holder.skipped) == 1
    assert not holder.refresh()  # the same bytes: not read again
    shutil.copyfile(whole, target)
    assert holder.refresh() and holder.current.model.classes == [0, 1]
