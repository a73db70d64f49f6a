"""Answers that were wrong with exit 0 (issue 73, "Trust III"): one test (or a few) per item of
the issue, numbered as there. The commands run in-process where no standard input or signal is
involved, so that this file stays in the quick subset."""

from __future__ import annotations

import json

import numpy as np
import pytest

import streamlearn
from streamlearn.service import cli as cli_module
from test_ordinary_inputs import iris_csv, iris_like, run, summary


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


# 4. output files: never a second copy; a sink that does not match its checkpoint is an error
def _labelled_jsonl(path, n=200, seed=0):
    rng = np.random.default_rng(seed)
    path.write_text("".join(json.dumps({"x": {"a": float(v)}, "y": int(v > 0)}) + "\n" for v in rng.normal(size=n)))
    return path


def test_a_fresh_run_refuses_a_predictions_file_another_run_wrote(tmp_path, capsys):
    data, predictions = _labelled_jsonl(tmp_path / "d.jsonl"), tmp_path / "p.jsonl"
    assert run(capsys, "train", data, "--checkpoint-dir", tmp_path / "a", "--predictions", predictions, "--quiet")[0] == 0
    code, _, err = run(capsys, "train", data, "--checkpoint-dir", tmp_path / "b", "--predictions", predictions, "--quiet")
    assert code == 1 and "p.jsonl holds another run's lines: --overwrite replaces them" in err
    assert predictions.read_text().count("\n") == 200
    assert run(capsys, "train", data, "--checkpoint-dir", tmp_path / "b", "--predictions", predictions, "--overwrite",
               "--quiet")[0] == 0
    assert predictions.read_text().count("\n") == 200


def test_resume_without_checkpoints_but_with_a_runs_files_is_refused(tmp_path, capsys):
    data, model = _labelled_jsonl(tmp_path / "d.jsonl"), tmp_path / "m"
    assert run(capsys, "train", data, "--checkpoint-dir", model, "--quiet")[0] == 0
    for checkpoint in model.glob("ckpt-*.slc"):
        checkpoint.unlink()
    code, _, err = run(capsys, "train", data, "--checkpoint-dir", model, "--resume", "--quiet")
    assert code == 1 and "holds no checkpoint to resume, but" in err and "metrics.jsonl holds another run's lines" in err
    fresh = tmp_path / "fresh"
    code, out, err = run(capsys, "train", data, "--checkpoint-dir", fresh, "--resume", "--quiet")
    assert code == 0 and "nothing to resume in" in err and summary(out)["learned"] == 200


def test_resume_refuses_a_sink_shorter_than_its_checkpoint_says(tmp_path, capsys):
    data, model, predictions = _labelled_jsonl(tmp_path / "d.jsonl"), tmp_path / "m", tmp_path / "p.jsonl"
    assert run(capsys, "train", data, "--checkpoint-dir", model, "--predictions", predictions, "--quiet")[0] == 0
    predictions.unlink()
    code, _, err = run(capsys, "train", data, "--checkpoint-dir", model, "--predictions", predictions, "--resume", "--quiet")
    assert code == 1 and "p.jsonl holds 0 bytes where" in err and "removed or cut since" in err
    assert not predictions.exists()


def test_a_sink_in_a_missing_directory_is_refused_not_created(tmp_path, capsys):
    data = _labelled_jsonl(tmp_path / "d.jsonl")
    code, _, err = run(capsys, "train", data, "--dead-letter", tmp_path / "nowhere" / "x.jsonl", "--quiet")
    assert code == 1 and "--dead-letter" in err and "no directory" in err and not (tmp_path / "nowhere").exists()


# 5. a value whose square overflows is bad input: refused, the model unchanged
@pytest.mark.parametrize("value", [1e308, -1e200, 1.01e150])
def test_a_value_whose_square_overflows_is_refused_on_every_road(value):
    from streamlearn.errors import InvalidInputError

    model = streamlearn.MulticlassSVM()
    model.learn_one({"a": 1.0}, "x")
    before = model.export_state()
    for learn in (lambda: model.learn_one({"a": value}, "y"), lambda: model.learn_many([{"a": 1.0}, {"a": value}], ["x", "y"]),
                  lambda: model.learn_many(np.array([[1.0], [value]]), ["x", "y"]),
                  lambda: model.learn_many(__import__("scipy.sparse").sparse.csr_matrix(np.array([[value]])), ["y"])):
        with pytest.raises(InvalidInputError, match="beyond"):
            learn()
    from helpers import assert_same_state

    assert_same_state(model.export_state(), before)
    model.learn_one({"a": 1e150}, "y")  # the bound itself is a value


@pytest.mark.parametrize("options", [{}, {"standardize": True, "bins": None}])
def test_a_dense_batch_with_a_bad_value_after_a_new_column_changes_nothing(options):
    """A dense batch (bins or standardize on: its zeros are copied out) whose bad value comes after
    a column new to the vocabulary: refused with its row and column, the vocabulary and the model
    as they were."""
    from helpers import assert_same_state
    from streamlearn.errors import InvalidInputError

    model = streamlearn.MulticlassSVM(**options)
    first = np.zeros((4, 6))
    first[:, :3] = np.arange(12).reshape(4, 3) + 1.0
    model.learn_many(first, [0, 1, 0, 1])
    before, columns = model.export_state(), list(model.feature_keys)
    spoiled = first.copy()
    spoiled[2, 4] = 5.0  # a column the vocabulary does not have yet, in a row before the bad one
    spoiled[3, 1] = np.nan
    with pytest.raises(InvalidInputError, match=r"row 3.*feature 1|feature 1.*row 3"):
        model.learn_many(spoiled, [0, 1, 0, 1])
    assert list(model.feature_keys) == columns
    assert_same_state(model.export_state(), before)
    spoiled[3, 1] = 0.5
    model.learn_many(spoiled, [0, 1, 0, 1])
    reference = streamlearn.MulticlassSVM(**options)
    reference.learn_many(first, [0, 1, 0, 1])
    reference.learn_many(spoiled, [0, 1, 0, 1])
    assert_same_state(model.export_state(), reference.export_state())


@pytest.mark.parametrize("fmt, line", [("libsvm", "2 1:1e308\n"), ("csv", "1e308,2\n"), ("jsonl", '{"x": {"a": 1e308}, "y": 2}\n')])
def test_a_huge_value_in_a_file_is_a_dead_letter_and_the_rest_learned(tmp_path, capsys, fmt, line):
    good = {"libsvm": "1 1:0.5\n", "csv": "0.5,1\n", "jsonl": '{"x": {"a": 0.5}, "y": 1}\n'}[fmt]
    path = tmp_path / f"d.{fmt}"
    path.write_text(("a,label\n" if fmt == "csv" else "") + good * 20 + line + good * 20)
    code, out, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "m", "--quiet")
    assert code == 0 and summary(out)["learned"] == 40 and summary(out)["dead_reasons"] == {"non-finite": 1}
    dead = json.loads((tmp_path / "m" / "dead_letters.jsonl").read_text())
    assert dead["position"]["line"] == 22 - (fmt != "csv") and "beyond" in dead["message"]


# 6. LIBSVM labels that are not UTF-8 are dead letters, not one merged class
def test_undecodable_libsvm_labels_are_dead_letters(tmp_path, capsys):
    path = tmp_path / "u8.svm"
    path.write_bytes(b"\xff 1:0.5\n\xfe 1:-0.5\n1 1:0.3\n2 2:0.3\n" + b"caf\xc3\xa9 3:1\n")
    code, out, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "m", "--quiet", "--max-errors", "5")
    assert summary(out)["dead_reasons"] == {"malformed": 2}
    lines = [json.loads(l) for l in (tmp_path / "m" / "dead_letters.jsonl").read_text().splitlines()]
    assert [l["position"]["line"] for l in lines] == [1, 2] and "not UTF-8" in lines[0]["message"]
    code, out, _ = run(capsys, "inspect", tmp_path / "m", "--json")
    assert json.loads(out)["first_classes"] == [1, 2, "café"]


# 7. a LIBSVM line that repeats an index is a dead letter (scikit-learn's loader refuses it)
def test_repeated_libsvm_indices_are_dead_letters(tmp_path, capsys):
    path = tmp_path / "dup.svm"
    path.write_text("1 1:0.5 2:1\n" * 10 + "1 1:0.5 " + "1:0.5 " * 1000 + "\n" + "2 3:1 1:2 3:4\n" + "2 3:1 1:2\n" * 10)
    code, out, _ = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "m", "--quiet")
    assert code == 0 and summary(out)["learned"] == 20 and summary(out)["dead_reasons"] == {"duplicate-feature": 2}
    lines = [json.loads(l) for l in (tmp_path / "m" / "dead_letters.jsonl").read_text().splitlines()]
    assert [l["position"]["line"] for l in lines] == [11, 12]


# bullet: LIBSVM's qid tokens are accepted and ignored
def test_libsvm_query_ids_are_ignored(tmp_path, capsys):
    from streamlearn.libsvm import parse_libsvm_bytes

    with_qid = parse_libsvm_bytes(b"3 qid:1 1:0.5 4:1\n1 qid:12 2:1\n")
    without = parse_libsvm_bytes(b"3 1:0.5 4:1\n1 2:1\n")
    assert not with_qid.errors and with_qid.labels == without.labels
    assert (with_qid.X.indices == without.X.indices).all() and (with_qid.X.data == without.X.data).all()
    path = tmp_path / "rank.txt"
    path.write_text("".join(f"{i % 3} qid:{i // 10} 1:{i / 100} 2:1\n" for i in range(60)))
    code, out, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "m", "--quiet")
    assert code == 0 and summary(out)["learned"] == 60, err


# 13. predict_many returns the labels' own type (scikit-learn's metrics take it)
@pytest.mark.parametrize("learner", ["MulticlassSVM", "ExtremeSVM", "LpNormMulticlassSVM"])
def test_predict_many_of_integer_classes_is_an_integer_array(learner):
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0)
    model = getattr(streamlearn, learner)()
    model.learn_many(X, y)
    model.flush()
    predicted = model.predict_many(X)
    assert predicted.dtype == np.int64 and f1_score(y, predicted, average="macro") > 0.3
    text = getattr(streamlearn, learner)()
    text.learn_many(X, np.array(["a", "b"])[y % 2])
    assert text.predict_many(X[:2]).dtype == object
    mixed = getattr(streamlearn, learner)()
    mixed.learn_many(X[:2], ["a", 1])
    assert mixed.predict_many(X[:2]).dtype == object


# 12. one rule for missing values: an absent feature; a missing label makes a record unlabelled
def test_missing_csv_cells_are_absent_features_and_a_missing_label_is_predicted(tmp_path, capsys):
    path = tmp_path / "m.csv"
    path.write_text("a,b,label\n1,2,x\n2,1,y\n3,,\n1,NA,x\n1,nan,y\n2, N/A ,NA\n")
    code, out, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "m", "--predictions", tmp_path / "p.jsonl",
                         "--quiet")
    assert code == 0 and summary(out)["dead_letters"] == 0 and summary(out)["learned"] == 4
    lines = [json.loads(l) for l in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(lines) == 6 and [l["label"] for l in lines] == ["x", "y", None, "x", "y", None]
    # without --predictions every record needs its label: the unlabelled ones are dead letters
    code, out, _ = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "n", "--quiet")
    assert summary(out)["dead_reasons"] == {"missing-label": 2}
    from streamlearn.connectors.records import check_record

    assert check_record({"x": {"a": None, "b": 2.0}, "y": 1}, True) == ({"b": 2.0}, 1, 1.0)


# 11. a 0-based / 1-based mismatch of LIBSVM indices is noticed
@pytest.mark.parametrize("model_base, data_base", [(1, 0), (0, 1)])
def test_an_index_shift_between_model_and_data_is_named(tmp_path, capsys, model_base, data_base):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X[:, 0] = X[:, -1] = 1.0  # the first and last index present in every row (as in a dense data set)

    def write(path, base, rows):
        path.write_text("".join(f"{y[i]} " + " ".join(f"{j + base}:{v:g}" for j, v in enumerate(X[i]) if v) + "\n" for i in rows))
        return path

    train = write(tmp_path / "train.svm", model_base, range(0, 1200))
    assert run(capsys, "train", train, "--checkpoint-dir", tmp_path / "m", "--quiet")[0] == 0
    same = write(tmp_path / "same.svm", model_base, range(1200, 1797))
    code, _, err = run(capsys, "evaluate", same, "--checkpoint", tmp_path / "m")
    assert code == 0 and "-based" not in err
    shifted = write(tmp_path / "shifted.svm", data_base, range(1200, 1797))
    for command in ("evaluate", "predict"):
        code, _, err = run(capsys, command, shifted, "--checkpoint", tmp_path / "m")
        assert code == 0 and f"the data look {data_base}-based and the model's {model_base}-based" in err, err


# bullet: predict needs no labels: labels that are no class of the model are a warning, not exit 1
def test_predict_does_not_fail_on_labels_it_does_not_need(tmp_path, capsys):
    data = _labelled_jsonl(tmp_path / "d.jsonl")
    assert run(capsys, "train", data, "--checkpoint-dir", tmp_path / "m", "--quiet")[0] == 0
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"x": {"a": 0.1 * i}, "y": f"z{i}"}) + "\n" for i in range(20)))
    code, out, err = run(capsys, "predict", other, "--checkpoint", tmp_path / "m")
    assert code == 0 and out.count("\n") == 20 and "warning: none of the 20 labels" in err
    code, _, err = run(capsys, "evaluate", other, "--checkpoint", tmp_path / "m")
    assert code == 1 and "error: none of the 20 labels" in err


# 10. the model does not depend on the order of a row's entries (bins on: which columns get bins)
def test_the_order_of_a_rows_entries_changes_no_bit_of_the_model():
    from helpers import assert_same_state
    from streamlearn.libsvm import parse_libsvm_bytes

    rng = np.random.default_rng(3)
    rows = [(np.sort(rng.choice(3000, int(rng.integers(3, 12)), replace=False)), rng.normal(size=12)) for _ in range(1500)]
    y = rng.integers(0, 4, len(rows)).tolist()
    shuffled = [rng.permutation(len(cols)) for cols, _ in rows]

    def dicts(permute):
        return [{int(c): float(v) for c, v in zip(cols[order], vals[: len(cols)][order])}
                for (cols, vals), order in zip(rows, shuffled if permute else [np.arange(len(c)) for c, _ in rows])]

    def text(X):
        return "".join(f"{label} " + " ".join(f"{k}:{v!r}" for k, v in x.items()) + "\n" for label, x in zip(y, X)).encode()

    for to_batch in (lambda X: X, lambda X: parse_libsvm_bytes(text(X)).X):
        models = []
        for permute in (False, True):
            model = streamlearn.MulticlassSVM()
            model.learn_many(to_batch(dicts(permute)), y)
            models.append(model)
        assert models[0].feature_keys == models[1].feature_keys
        assert_same_state(models[0].export_state(), models[1].export_state())
    one = streamlearn.MulticlassSVM()
    for x, label in zip(dicts(True), y):
        one.learn_one(x, label)
    assert one.feature_keys == models[0].feature_keys


# bullet: a checkpoint with a valid checksum but no checkpoint inside, or a model that cannot be rebuilt
@pytest.mark.filterwarnings("ignore:.*holds no checkpoint:UserWarning")
@pytest.mark.parametrize("damage", ["empty map", "a list", "no learner", "weights cut in half"])
def test_an_intact_file_that_holds_no_usable_checkpoint_is_one_line(tmp_path, capsys, damage):
    from streamlearn.service.checkpoint import dumps, loads

    data = _labelled_jsonl(tmp_path / "d.jsonl")
    assert run(capsys, "train", data, "--checkpoint-dir", tmp_path / "m", "--quiet")[0] == 0
    newest = sorted((tmp_path / "m").glob("ckpt-*.slc"))[-1]
    payload = loads(newest.read_bytes())
    if damage == "empty map":
        payload = {}
    elif damage == "a list":
        payload = [1, 2]
    elif damage == "no learner":
        del payload["learner"]
    else:
        arrays = payload["learner"]["model"]["arrays"]
        arrays["V"] = arrays["V"].ravel()[: arrays["V"].size // 2]
    for path in (tmp_path / "m").glob("ckpt-*.slc"):
        path.write_bytes(dumps(payload))
    for command in (["train", data, "--checkpoint-dir", tmp_path / "m", "--resume"], ["evaluate", data, "--checkpoint", tmp_path / "m"]):
        code, _, err = run(capsys, *command)
        assert code == 1 and err.count("\n") <= 3 and "Traceback" not in err, err
        assert any(words in err for words in ("holds no checkpoint", "holds no model", "cannot be restored",
                                              "not a run's state")), err


# bullets: CSV files that sniffing could not read, usage errors with the command's usage, messages in words
def test_a_csv_of_cr_line_ends_trains_and_random_bytes_are_one_line(tmp_path, capsys):
    cr = tmp_path / "cr.csv"
    cr.write_bytes(b"a,b,label\r1,2,x\r2,1,y\r3,1,x\r")
    code, out, err = run(capsys, "train", cr, "--checkpoint-dir", tmp_path / "m", "--quiet")
    assert code == 0 and summary(out)["learned"] == 3, err
    noise = tmp_path / "noise.csv"
    noise.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8)))
    code, _, err = run(capsys, "train", noise, "--checkpoint-dir", tmp_path / "n", "--quiet")
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err and len(err) < 600


def test_usage_errors_show_the_commands_usage_and_exit_2(tmp_path, capsys):
    data = _labelled_jsonl(tmp_path / "d.jsonl")
    for args, words in ((["train", data, "--bogus"], "unrecognized arguments: --bogus"),
                        (["train", data, "--format", "parquet"], "unknown format 'parquet'")):
        with pytest.raises(SystemExit) as stopped:
            cli_module.main([str(a) for a in args])
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and "usage: streamlearn train" in err and words in err


def test_options_that_would_be_ignored_are_refused_or_said(tmp_path, capsys):
    data, svm = _labelled_jsonl(tmp_path / "d.jsonl"), tmp_path / "d.svm"
    svm.write_text("".join(f"{i % 2} 1:{i / 10}\n" for i in range(40)))
    refused = [(["--standardize", "--param", "standardize=false"], "--standardize is --param standardize=True"),
               (["--mix-every", "100"], "--mix-every sets how often --mix-topic mixes")]
    for extra, words in refused:
        code, _, err = run(capsys, "train", data, "--checkpoint-dir", tmp_path / "x", *extra)
        assert code == 1 and words in err, err
    for option in (["--label-column", "y"], ["--no-header"]):
        code, _, err = run(capsys, "train", svm, "--checkpoint-dir", tmp_path / "y", *option)
        assert code == 1 and f"{option[0]} is for CSV" in err and "the source is LIBSVM" in err
    assert run(capsys, "train", data, "--checkpoint-dir", tmp_path / "a", "--quiet")[0] == 0
    code, _, err = run(capsys, "train", data, "--checkpoint-dir", tmp_path / "b", "--init-from", tmp_path / "a", "--standardize",
                       "--quiet")
    assert code == 0 and "--learner/--param/--standardize are ignored" in err


def test_os_errors_are_words_without_errno(tmp_path, capsys):
    from streamlearn.service.serve.server import ServiceConfigError, bind

    (tmp_path / "afile").write_text("")
    code, _, err = run(capsys, "train", _labelled_jsonl(tmp_path / "d.jsonl"), "--checkpoint-dir", tmp_path / "afile" / "m")
    assert code == 1 and "[Errno" not in err and "Not a directory" in err
    taken = bind("127.0.0.1", 0)
    try:
        with pytest.raises(ServiceConfigError, match="cannot listen on 127.0.0.1:[0-9]+: Address already in use"):
            bind("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()


# bullet: scikit-learn's partial_fit contract: classes declared on the first call are all there are
def test_partial_fit_refuses_a_label_outside_the_declared_classes():
    from streamlearn.sklearn import MulticlassSVMClassifier

    X = np.random.default_rng(0).normal(size=(30, 3))
    model = MulticlassSVMClassifier().partial_fit(X, np.arange(30) % 3, classes=[0, 1, 2])
    before = model.learner_.export_state()
    with pytest.raises(ValueError, match=r"y holds labels \[7\] that are not in classes=\[0, 1, 2\]"):
        model.partial_fit(X[:2], [7, 0])
    with pytest.raises(ValueError, match="is not the same as on the first call"):
        model.partial_fit(X[:2], [0, 1], classes=[0, 1, 2, 3])
    from helpers import assert_same_state

    assert_same_state(model.learner_.export_state(), before)
    free = MulticlassSVMClassifier().partial_fit(X, np.arange(30) % 3)
    free.partial_fit(X[:2], [7, 0])  # no classes declared: a new class may come
    assert free.classes_.tolist() == [0, 1, 2, 7]


# bullet: GeneralizedLeastSquares' learn_many is the learn_one loop bit for bit, as the README says of every learner
@pytest.mark.parametrize("params", [{}, {"batch_size": 1}, {"batch_size": 7, "standardize": True}, {"link": "identity"}])
def test_generalized_least_squares_learn_many_is_the_learn_one_loop(params):
    from sklearn.datasets import load_wine

    from helpers import assert_same_state

    X, y = load_wine(return_X_y=True)  # classes in blocks: the later ones first appear mid-stream
    rows = [{j: float(v) for j, v in enumerate(x) if v} for x in X]
    many, loop = streamlearn.GeneralizedLeastSquares(**params), streamlearn.GeneralizedLeastSquares(**params)
    many.learn_many(rows, y.tolist())
    for x, label in zip(rows, y.tolist()):
        loop.learn_one(x, label)
    assert_same_state(many.export_state(), loop.export_state())


# 9. each record's probabilities are those of its turn, whatever the batching
def test_prequential_probabilities_do_not_depend_on_where_batches_are_cut():
    from streamlearn.datasets import letter

    rows = list(letter())[:2500]  # the temperature is refitted every 512 examples: four times in here
    X, y = [x for x, _ in rows], [label for _, label in rows]

    def prequential(cut: int, **params):
        model = streamlearn.MulticlassSVM(**params)
        parts = [model.prequential(X[s : s + cut], y[s : s + cut], learn=True, return_proba=True) for s in range(0, len(X), cut)]
        scored = np.concatenate([predicted >= 0 for predicted, _, _ in parts])  # a class was known at the row's turn
        first = np.concatenate([proba[:, 0] if proba.shape[1] else np.zeros(len(proba)) for _, _, proba in parts])
        return np.concatenate([p for _, p, _ in parts]), np.where(scored, first, -1.0)  # p(true label), p(first class)

    # lam="auto": the candidates' leader, whose scores a row gets, changed after every call (a learn_one
    # loop and learn_many gave other predictions and temperature windows); now at multiples of 32 steps
    for params in ({}, {"batch_size": 3}, {"lam": "auto", "batch_size": 4, "project": True}):
        whole = prequential(1000, **params)
        for cut in (777, 1):
            other = prequential(cut, **params)
            # (to rounding: a batch's softmax runs over the classes known after it, a sum of more zeros)
            np.testing.assert_allclose(whole[0], other[0], rtol=1e-12, atol=0)
            np.testing.assert_allclose(whole[1], other[1], rtol=1e-12, atol=0)


# 8. (the warning; scale-robust defaults are not done) unscaled columns of very different scales are named
def test_columns_of_very_different_scales_are_named_once(tmp_path, capsys):
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    path = tmp_path / "wine.csv"
    path.write_text(",".join(f"f{j}" for j in range(13)) + ",label\n" + "".join(",".join(map(str, X[i])) + f",{y[i]}\n" for i in order))
    code, _, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "raw", "--quiet", "--batch-records", "50")
    assert code == 0 and err.count("warning: feature scales differ by a factor of") == 1 and "'f12' ~ " in err
    assert "--standardize" in err
    code, _, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "scaled", "--quiet", "--standardize")
    assert code == 0 and "feature scales" not in err
    scaled = tmp_path / "scaled.csv"
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    scaled.write_text(",".join(f"f{j}" for j in range(13)) + ",label\n" + "".join(",".join(map(str, Z[i])) + f",{y[i]}\n" for i in order))
    code, _, err = run(capsys, "train", scaled, "--checkpoint-dir", tmp_path / "z", "--quiet")
    assert code == 0 and "feature scales" not in err


# bullet: a hold-out file that shares no feature with the source is named
def test_a_holdout_file_of_other_features_is_warned_about(tmp_path, capsys):
    data = _labelled_jsonl(tmp_path / "d.jsonl")
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"x": {"zz": 0.1 * i}, "y": i % 2}) + "\n" for i in range(30)))
    code, _, err = run(capsys, "train", data, "--holdout", other, "--checkpoint-dir", tmp_path / "m", "--quiet")
    assert code == 0 and "100% of the hold-out's feature mass is on features the model never learned" in err
    code, _, err = run(capsys, "train", data, "--holdout", data, "--checkpoint-dir", tmp_path / "n", "--quiet")
    assert code == 0 and "hold-out's feature mass" not in err


# bullet: StagewiseRegression's generator can be given on the command line
def test_stagewise_generator_from_the_command_line(tmp_path, capsys):
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    path = tmp_path / "wine.csv"
    path.write_text(",".join(f"f{j}" for j in range(13)) + ",label\n" + "".join(",".join(map(str, x)) + f",{t}\n" for x, t in zip(X, y)))
    code, _, err = run(capsys, "train", path, "--learner", "StagewiseRegression", "--standardize", "--checkpoint-dir", tmp_path / "m",
                       "--param", "generator=RandomFourierFeatures(bandwidth=3.0, seed=1)", "--quiet")
    assert code == 0, err
    from streamlearn.service.checkpoint import CheckpointStore

    model = streamlearn.learner_from_state(CheckpointStore(tmp_path / "m").load_latest()["learner"])
    assert type(model.generator).__name__ == "RandomFourierFeatures" and model.generator.bandwidth == 3.0
    code, _, err = run(capsys, "train", path, "--learner", "StagewiseRegression", "--param", "generator=Foo(1)",
                       "--checkpoint-dir", tmp_path / "n")
    assert code == 1 and "give RandomFourierFeatures or FeatureSampler" in err


def test_values_at_the_bound_are_learned_even_when_their_sum_passes_it():
    model = streamlearn.MulticlassSVM(standardize=True)  # the general road, not the C one
    model.learn_one({"a": 1e150, "b": 1e150}, "x")  # a sum of 2e150
    model.learn_many([{"a": 1e150, "b": 1e150}], ["y"])
    assert model.classes == ["x", "y"]
