"""Ordinary inputs give the right answer or a clear error (issue 40): a bad line among the
first ones, typed ``--param`` values, labels spelled otherwise, the way a checkpoint's data was
read, flat JSON lines, headerless CSV, compressed stdin, failed first runs, messages in the
options' words. One test (or a few) per item of the issue, numbered as there; the commands run
in-process where no standard input or signal is involved, so that this file stays in the quick
subset."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma

import numpy as np
import pytest

from streamlearn.base import INTERCEPT_NAME

import streamlearn
from streamlearn.connectors.formats import UnknownFormat, sniff_format
from streamlearn.service import cli as cli_module
from streamlearn.service.checkpoint import CheckpointStore
from helpers import cli, libsvm_lines

NAMES = ("setosa", "versicolor", "virginica")
MEANS = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])


def iris_like(n: int, seed: int = 0) -> list[tuple[list[float], str]]:
    """Rows like the iris data: four measurements and a species name."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        k = int(rng.integers(3))
        rows.append(([round(float(v), 3) for v in MEANS[k] + rng.normal(0, 0.3, 4)], NAMES[k]))
    return rows


def iris_csv(path, n: int, seed: int = 0, header: bool = True):
    lines = ["sl,sw,pl,pw,species"] if header else []
    lines += [",".join(map(str, x)) + f",{label}" for x, label in iris_like(n, seed)]
    path.write_text("\n".join(lines) + "\n")
    return path


def run(capsys, *args) -> tuple[int, str, str]:
    """``streamlearn ARGS`` in this process: exit code, stdout, stderr."""
    code = cli_module.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def summary(out: str) -> dict:
    return json.loads(out.splitlines()[0])


# 1. a bad line among the first ones (regression)
def test_a_bad_line_among_the_first_of_stdin_is_a_dead_letter_not_a_refusal():
    lines = libsvm_lines(60, seed=3)
    text = "\n".join(lines[:3] + ["8 1:-0.4 2:0.2 6"] + lines[3:]) + "\n"
    result = cli("train", "-", "--quiet", input=text.encode(), check=False)
    assert result.returncode == 0, result.stderr.decode()
    learned = summary(result.stdout.decode())
    assert (learned["learned"], learned["dead_letters"], learned["dead_reasons"]) == (60, 1, {"malformed": 1})


def test_a_bad_line_among_the_first_of_a_file_named_without_a_format_is_a_dead_letter(tmp_path, capsys):
    lines = libsvm_lines(60, seed=3)
    path = tmp_path / "data.txt"
    path.write_text("\n".join(lines[:3] + ["8 1:-0.4 2:0.2 6"] + lines[3:]) + "\n")
    code, out, _ = run(capsys, "train", path, "--quiet")
    assert code == 0 and summary(out)["learned"] == 60 and summary(out)["dead_letters"] == 1


def test_sniffing_goes_by_most_lines_and_shows_the_lines_it_judged():
    assert sniff_format(b"1 1:1\n2 2:1 x\n3 3:1\n") == "libsvm"
    assert sniff_format(b'{"x": {"a": 1}, "y": 1}\nnot json\n{"x": {"a": 2}, "y": 2}\n') == "jsonl"
    with pytest.raises(UnknownFormat, match=r"most of its first 3 lines.*'hello world'.*'foo bar'"):
        sniff_format(b"hello world\nfoo bar\n1 1:1\n")


# 2. the batch fit at its defaults is its own, near 004's parameter-free fit (regression)
def test_least_squares_fit_at_its_defaults_is_the_protocols_batch_fit(datasets_dir):
    """Table 1's setting, small: USPS projected on 50 principal components, 500 random Fourier
    features. The stream's trace ridge of 0.01, which fit took before, gives 8.07 % here."""
    from bench.data import load

    split = load("usps-rff")
    F, Ft = split.X_train.toarray(), split.X_test.toarray()
    model = streamlearn.GeneralizedLeastSquares().fit(F, split.y_train)
    error = float(np.mean(model.predict_many(Ft) != split.y_test))
    assert error < 0.07, error
    reference = streamlearn.GeneralizedLeastSquares(ridge=1e-4).fit(F[:800], split.y_train[:800])
    again = streamlearn.GeneralizedLeastSquares().fit(F[:800], split.y_train[:800])
    np.testing.assert_array_equal(again.predict_proba_many(Ft[:200]).to_numpy(), reference.predict_proba_many(Ft[:200]).to_numpy())
    streamed = streamlearn.GeneralizedLeastSquares()
    streamed.learn_many(F[:256], split.y_train[:256])
    assert streamed.stream_ridge == {"ridge": 1e-3} and streamed.fit_ridge == {"ridge": 1e-4}  # each mode its own


# 3. --param values by their declared types
@pytest.mark.parametrize("spelling", ["false", "False", "no", "off", "0", "NO"])
def test_a_false_boolean_param_switches_the_option_off(spelling):
    model = cli_module.build_learner("MulticlassSVM", [f"average={spelling}", f"project={spelling}"])
    assert model.average is False and model.project is False


def test_params_are_read_by_their_types_and_a_wrong_one_is_refused_by_name():
    model = cli_module.build_learner("MulticlassSVM", ["lam=1e-4", "batch_size=8", "n_bits=none", "average=yes"])
    assert (model.lam, model.batch_size, model.n_bits, model.average) == (1e-4, 8, None, True)
    assert cli_module.build_learner("MulticlassSVM", ["lam=auto"]).lam == "auto"
    assert cli_module.build_learner("PrimalGradientSolver", ["classes=-1,1"]).classes_ == (-1, 1)
    with pytest.raises(cli_module.ConfigError, match=r"average=maybe: MulticlassSVM's average is a bool"):
        cli_module.build_learner("MulticlassSVM", ["average=maybe"])
    with pytest.raises(cli_module.ConfigError, match=r"batch_size is an int"):
        cli_module.build_learner("MulticlassSVM", ["batch_size=1.5"])
    with pytest.raises(cli_module.ConfigError, match=r"has no parameter 'lamda'.*lam, batch_size"):
        cli_module.build_learner("MulticlassSVM", ["lamda=1"])


def test_the_learners_command_lists_every_parameter_with_its_type_and_default(capsys):
    code, out, _ = run(capsys, "learners")
    assert code == 0
    for name in streamlearn.LEARNER_NAMES:
        assert f"{name}: " in out
    assert "    average: bool = True" in out and "    lam: float | str | None = None" in out
    assert "    classes: tuple = (False, True)" in out
    code, out, _ = run(capsys, "learners", "ExtremeSVM")
    assert out.startswith("ExtremeSVM: ") and "MulticlassSVM: " not in out


# 4. labels spelled otherwise
def test_labels_1_and_1_0_are_one_class(tmp_path, capsys):
    lines = [line.replace("1 ", "+1 ", 1) if line.startswith("1 ") else line for line in libsvm_lines(800, n_classes=2, seed=5)]
    lines = [("-1" + line[1:]) if line.startswith("2 ") else line for line in lines]
    (tmp_path / "train.svm").write_text("\n".join(lines) + "\n")
    spelled = [line.replace("+1 ", "1.0 ", 1).replace("-1 ", "-1.0 ", 1) for line in lines]
    (tmp_path / "spelled.svm").write_text("\n".join(spelled) + "\n")
    assert run(capsys, "train", tmp_path / "train.svm", "--checkpoint-dir", tmp_path / "ck", "--quiet")[0] == 0
    same = json.loads(run(capsys, "evaluate", tmp_path / "train.svm", "--checkpoint", tmp_path / "ck")[1])
    code, out, err = run(capsys, "evaluate", tmp_path / "spelled.svm", "--checkpoint", tmp_path / "ck")
    assert code == 0 and "warning" not in err
    assert json.loads(out)["accuracy"] == same["accuracy"] > 0.8  # was 0.0 with a log-loss of 34.5


def test_csv_labels_0_and_0_0_are_one_class(tmp_path, capsys):
    rows = [(x, {"setosa": 0, "versicolor": 1, "virginica": 2}[label]) for x, label in iris_like(600, 2)]
    (tmp_path / "a.csv").write_text("a,b,c,d,y\n" + "".join(",".join(map(str, x)) + f",{t}\n" for x, t in rows))
    (tmp_path / "b.csv").write_text("a,b,c,d,y\n" + "".join(",".join(map(str, x)) + f",{t}.0\n" for x, t in rows))
    run(capsys, "train", tmp_path / "a.csv", "--checkpoint-dir", tmp_path / "ck", "--quiet")
    assert json.loads(run(capsys, "evaluate", tmp_path / "b.csv", "--checkpoint", tmp_path / "ck")[1])["accuracy"] > 0.8


def test_evaluate_warns_when_most_labels_are_unknown_and_fails_when_none_is(tmp_path, capsys):
    iris_csv(tmp_path / "iris.csv", 300)
    run(capsys, "train", tmp_path / "iris.csv", "--label-column", "species", "--checkpoint-dir", tmp_path / "ck", "--quiet")
    text = (tmp_path / "iris.csv").read_text()
    (tmp_path / "upper.csv").write_text(text.replace("setosa", "SETOSA").replace("versicolor", "VERSICOLOR"))
    (tmp_path / "none.csv").write_text(text.replace("setosa", "s").replace("versicolor", "v").replace("virginica", "g"))
    code, _, err = run(capsys, "evaluate", tmp_path / "upper.csv", "--checkpoint", tmp_path / "ck")
    assert code == 0 and "of the labels are no class of the model" in err
    code, _, err = run(capsys, "evaluate", tmp_path / "none.csv", "--checkpoint", tmp_path / "ck")
    assert code == 1 and "none of the 300 labels is a class of the model" in err


# 5. predict and evaluate read data as the checkpoint's job did
def test_predict_reuses_the_label_column_of_training_and_fails_when_nothing_is_predicted(tmp_path, capsys):
    iris_csv(tmp_path / "iris.csv", 500)
    iris_csv(tmp_path / "test.csv", 200, seed=1)
    run(capsys, "train", tmp_path / "iris.csv", "--label-column", "species", "--checkpoint-dir", tmp_path / "ck", "--quiet")
    code, _, err = run(capsys, "predict", tmp_path / "test.csv", "--checkpoint", tmp_path / "ck", "--output", tmp_path / "p.jsonl")
    assert code == 0, err
    predictions = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(predictions) == 200 and {p["prediction"] for p in predictions} <= set(NAMES)
    assert json.loads(run(capsys, "evaluate", tmp_path / "test.csv", "--checkpoint", tmp_path / "ck")[1])["n"] == 200
    (tmp_path / "bad.csv").write_text("sl,sw,pl,pw,species\n" + "x,y,z,w,setosa\n" * 50)
    code, _, err = run(capsys, "predict", tmp_path / "bad.csv", "--checkpoint", tmp_path / "ck", "--output", tmp_path / "q.jsonl")
    assert code == 4 and "nothing was predicted" in err
    assert err.count("skipped bad record") == 10  # not one line per record


# 6. a sizeable share of unknown feature mass
def test_evaluating_one_based_indices_on_a_zero_based_model_warns(tmp_path, capsys):
    lines = libsvm_lines(1500, n_features=8, seed=6)  # 1-based indices 1..8: index 8 is new to a 0..7 model
    (tmp_path / "one.svm").write_text("\n".join(lines) + "\n")
    zero = [" ".join([line.split()[0]] + [f"{int(k) - 1}:{v}" for k, v in (p.split(":") for p in line.split()[1:])])
            for line in lines]
    (tmp_path / "zero.svm").write_text("\n".join(zero) + "\n")
    run(capsys, "train", tmp_path / "zero.svm", "--checkpoint-dir", tmp_path / "ck", "--quiet")
    code, out, err = run(capsys, "evaluate", tmp_path / "one.svm", "--checkpoint", tmp_path / "ck")
    assert 0.1 < json.loads(out)["unknown_features"] < 0.5
    assert "of the feature mass is on features the model has never seen" in err
    assert "warning" not in run(capsys, "evaluate", tmp_path / "zero.svm", "--checkpoint", tmp_path / "ck")[2]


# 7. the hold-out source is read as the training source
def test_a_holdout_file_takes_the_label_column(tmp_path, capsys):
    iris_csv(tmp_path / "b.csv", 400)
    iris_csv(tmp_path / "b_test.csv", 100, seed=1)
    code, out, err = run(capsys, "train", tmp_path / "b.csv", "--label-column", "species", "--holdout", tmp_path / "b_test.csv",
                         "--quiet")
    assert code == 0, err
    assert summary(out)["holdout_final"]["n"] == 100


# 8. a failed first run leaves no model in the way
def test_a_corrected_retry_is_not_refused_after_a_first_run_that_learned_nothing(tmp_path, capsys):
    iris_csv(tmp_path / "iris.csv", 300)
    code, _, _ = run(capsys, "train", tmp_path / "iris.csv", "--format", "jsonl", "--checkpoint-dir", tmp_path / "ck", "--quiet")
    assert code == 3
    code, out, err = run(capsys, "train", tmp_path / "iris.csv", "--label-column", "species", "--checkpoint-dir",
                         tmp_path / "ck", "--quiet")
    assert code == 0, err
    assert summary(out)["learned"] == 300 and "learned nothing" in err
    assert not (tmp_path / "ck" / "dead_letters.jsonl").read_text()  # the failed run's dead letters went with it
    code, _, err = run(capsys, "train", tmp_path / "iris.csv", "--label-column", "species", "--checkpoint-dir",
                       tmp_path / "ck", "--quiet")
    assert code == 1 and "already holds checkpoints" in err  # a model that learned is still protected


# 9. compressed stdin
@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress], ids=["gzip", "bz2", "xz"])
def test_compressed_stdin_is_decompressed(tmp_path, compress):
    text = iris_csv(tmp_path / "iris.csv", 300).read_bytes()
    result = cli("train", "-", "--label-column", "species", "--quiet", input=compress(text), check=False)
    assert result.returncode == 0, result.stderr.decode()
    assert summary(result.stdout.decode())["learned"] == 300


def test_decompressed_reads_hand_over_the_bytes_a_plain_stream_starts_with():
    from streamlearn.connectors.files import decompressed

    for data, kind in ((b"1 1:1\n", None), (gzip.compress(b"1 1:1\n"), "gzip")):
        stream = io.BytesIO(data)
        read, _, compression = decompressed(stream.read, None)
        assert compression == kind and read(100) == b"1 1:1\n"


# 10. flat JSON lines
def test_flat_json_lines_are_learned(tmp_path, capsys):
    rows = iris_like(500, 3)
    (tmp_path / "iris.jsonl").write_text("".join(json.dumps({"species": t, **dict(zip(("sl", "sw", "pl", "pw"), x))}) + "\n"
                                                 for x, t in rows))
    code, out, err = run(capsys, "train", tmp_path / "iris.jsonl", "--label-column", "species", "--checkpoint-dir",
                         tmp_path / "ck", "--quiet")
    assert code == 0, err
    assert summary(out)["learned"] == 500 and summary(out)["prequential"]["accuracy"] > 0.8
    (tmp_path / "named.jsonl").write_text("".join(json.dumps({**dict(zip(("sl", "sw", "pl", "pw"), x)), "label": t}) + "\n"
                                                  for x, t in rows))
    assert summary(run(capsys, "train", tmp_path / "named.jsonl", "--quiet")[1])["learned"] == 500
    code, _, err = run(capsys, "train", tmp_path / "iris.jsonl", "--quiet")
    assert code == 3 and "flat JSON record's label field" in err


# 11. headerless CSV
def test_a_headerless_csv_is_found_and_no_row_becomes_the_header(tmp_path, capsys):
    iris_csv(tmp_path / "plain.csv", 3000, header=False)
    code, out, err = run(capsys, "train", tmp_path / "plain.csv", "--label-column", "4", "--checkpoint-dir", tmp_path / "ck",
                         "--quiet")
    assert code == 0, err
    assert summary(out)["learned"] == 3000
    names = CheckpointStore(tmp_path / "ck").load_latest()["learner"]["features"]["names"]
    assert [name for name in names if name != INTERCEPT_NAME] == [0, 1, 2, 3]
    numeric = [(x, NAMES.index(t)) for x, t in iris_like(200, 4)]
    (tmp_path / "numeric.csv").write_text("".join(",".join(map(str, x)) + f",{t}\n" for x, t in numeric))
    code, out, _ = run(capsys, "train", tmp_path / "numeric.csv", "--no-header", "--label-column", "4", "--quiet")
    assert code == 0 and summary(out)["learned"] == 200
    code, _, err = run(capsys, "train", tmp_path / "numeric.csv", "--quiet")
    assert code == 1 and "no header line (5 columns): give --label-column INDEX" in err


# 12. what a binary learner wants
def test_a_binary_learner_says_which_classes_it_takes(tmp_path, capsys):
    lines = [("-1" if line.startswith("1 ") else "+1") + line[1:] for line in libsvm_lines(300, n_classes=2, seed=7)]
    (tmp_path / "pm.svm").write_text("\n".join(lines) + "\n")
    code, _, err = run(capsys, "train", tmp_path / "pm.svm", "--learner", "PrimalGradientSolver", "--quiet")
    assert "refused-bad-label" in err  # +1 is True, -1 is refused
    assert "learns the two classes (False, True)" in err and "--param classes=NEGATIVE,POSITIVE" in err
    assert "a binary learner takes 2 classes" not in err
    code, out, _ = run(capsys, "train", tmp_path / "pm.svm", "--learner", "PrimalGradientSolver", "--param", "classes=-1,1",
                       "--quiet", "--overwrite")  # the first run's dead letters are in ./dead_letters.jsonl
    assert code == 0 and summary(out)["learned"] == 300


# 14. messages in the options' words
@pytest.mark.parametrize("option, value, message", [
    ("--checkpoint-every", "0", "--checkpoint-every must be a positive number of examples"),
    ("--checkpoint-interval", "-1", "--checkpoint-interval must be a positive number of seconds"),
    ("--batch-records", "0", "--batch-records must be a positive number of records"),
    ("--passes", "0", "--passes must be a positive number of passes"),
])
def test_a_bad_option_value_is_named_as_the_option(tmp_path, capsys, option, value, message):
    path = tmp_path / "d.svm"
    path.write_text("1 1:1\n")
    code, _, err = run(capsys, "train", path, option, value)
    assert code == 1 and message in err


def test_a_directory_a_missing_source_and_an_unwritable_checkpoint_say_what_they_are(tmp_path, capsys, monkeypatch):
    (tmp_path / "adir").mkdir()
    code, _, err = run(capsys, "train", tmp_path / "adir")
    assert code == 1 and "is a directory: give its files" in err
    code, _, err = run(capsys, "train")
    assert code == 2 and "train needs a source" in err
    import builtins
    import errno

    real_open = builtins.open

    def refusing(path, *args, **kwargs):
        if str(path).endswith(".slc.tmp"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refusing)
    path = tmp_path / "d.svm"
    path.write_text("1 1:1\n")
    code, _, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "ck", "--quiet")
    assert code == 1
    assert "no checkpoint was written: make the directory writable" in err and "free space" not in err


# 15. --quiet is quiet
def test_quiet_prints_no_progress_lines_however_long_the_job(monkeypatch):
    from streamlearn.connectors.files import FileSource
    from streamlearn.service.runner import Runner

    monkeypatch.setattr(Runner, "PROGRESS_EVERY", 0.0)
    for progress, expected in ((False, False), (None, True)):
        log = io.StringIO()
        runner = Runner(streamlearn.MulticlassSVM(), _source(), progress=progress, log=log)
        assert runner.run() == 0
        assert ('"progress"' in log.getvalue()) is expected


def _source():
    import tempfile

    from streamlearn.connectors.files import FileSource

    path = tempfile.NamedTemporaryFile("w", suffix=".svm", delete=False)
    path.write("\n".join(libsvm_lines(300, seed=8)) + "\n")
    path.close()
    return FileSource([path.name], batch_records=50)


# 16. a directory named like a checkpoint
def test_a_directory_named_like_a_checkpoint_is_skipped(tmp_path, capsys):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(300, seed=9)) + "\n")
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "ckpt-000000000050.slc").mkdir()
    with pytest.warns(UserWarning, match="ckpt-000000000050.slc is not a checkpoint file; skipped"):
        code, out, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "ck", "--resume", "--quiet")
        assert code == 0, err
        assert summary(out)["learned"] == 300
        assert CheckpointStore(tmp_path / "ck").load_latest()["runner"]["counters"]["learned"] == 300
        code, out, err = run(capsys, "train", path, "--checkpoint-dir", tmp_path / "ck", "--resume", "--quiet")
    assert code == 0 and summary(out)["learned"] == 300  # resumed at the end: nothing learned twice


def test_serve_skips_a_directory_named_like_a_checkpoint(tmp_path, capsys):
    from streamlearn.service.serve import ModelHolder

    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(100, seed=9)) + "\n")
    run(capsys, "train", path, "--checkpoint-dir", tmp_path / "ck", "--quiet")
    (tmp_path / "ck" / "ckpt-000000000050.slc").mkdir()
    holder = ModelHolder(tmp_path / "ck", log=io.StringIO())
    assert holder.refresh() and holder.current.counters["learned"] == 100


# 17. the README's commands run where its files are not
def test_the_bundled_data_set_is_found_by_its_file_name(capsys):
    code, out, err = run(capsys, "train", "letter.scale.t", "--quiet")
    assert code == 0 and summary(out)["learned"] == 5000 and "bundled data set" in err


def test_int_labels_find_their_classes_by_table_as_by_dict_while_classes_keep_appearing():
    """The small-int table follows each new class (not rebuilt per class): its answers stay the
    dict's, for labels first seen as ints, floats equal to ints, booleans and text."""
    from streamlearn.labels import LabelSpace

    rng = np.random.default_rng(0)
    space, reference = LabelSpace(), {}
    space.indices([True, 2.0, "3", 2.5], grow=True)  # True is 1, 2.0 is 2; "3" and 2.5 are no int
    for label in (True, 2.0, "3", 2.5):
        reference.setdefault(label, len(reference))
    for _ in range(30):
        batch = rng.integers(0, 3000, size=200)
        got = space.indices(batch, grow=True)
        for label in batch.tolist():
            reference.setdefault(label, len(reference))
        assert got.tolist() == [reference[v] for v in batch.tolist()]
    assert space.indices(np.array([1, 2, 3]), grow=False).tolist() == [0, 1, reference[3]]
    assert space.indices(np.array([2, 4000]), grow=False).tolist() == [1, -1]  # unknown, not entered
    assert 4000 not in space.labels


@pytest.mark.parametrize("first", [[5, 300, 7, 70_000], [True, 5, False, 900], [5, 2.0, "a", 7], [(1, 2), 3],
                                   [(1, 2), (3, 4)], [2**70, 3], [2**63, 3]])
def test_the_small_int_table_built_from_labels_already_there_finds_them_as_the_dict_does(first):
    """Labels first entered one by one (a list), then an int array whose range grows the table:
    every int of it finds the class the dict gives it, whatever the labels before were."""
    from streamlearn.labels import LabelSpace

    space = LabelSpace()
    entered = space.indices(first, grow=True).tolist()
    queries = np.array([0, 1, 2, 3, 5, 7, 300, 900, 70_000, 100_000])
    expected = [next((k for label, k in zip(first, entered) if label == v), -1) for v in queries.tolist()]
    assert space.indices(queries[:5], grow=False).tolist() == expected[:5]  # a small table first, then grown
    assert space.indices(queries, grow=False).tolist() == expected


def test_a_label_space_of_small_ints_answers_as_a_dict_before_and_after_other_labels_come():
    """Labels that are all small ints are found by table alone; floats equal to them, booleans,
    text and large ints then come, one at a time and in arrays: every answer (classes, unknowns,
    the count of new labels, the exported labels) is a dict's, numbering in order of first appearance."""
    from streamlearn.labels import LabelSpace

    rng = np.random.default_rng(3)
    space, reference = LabelSpace(), {}

    def expect(labels, grow):
        out = []
        for label in labels:
            if label not in reference and grow:
                reference[label] = len(reference)
            out.append(reference.get(label, -1))
        return out

    for _ in range(5):  # arrays of small ints only
        batch = rng.integers(0, 5000, size=100)
        assert space.n_new(batch) == len(set(batch.tolist()) - set(reference))
        assert space.indices(batch, grow=True).tolist() == expect(batch.tolist(), True)
    assert space.indices([7.0, True, 4999, 10**7], grow=False).tolist() == expect([7.0, True, 4999, 10**7], False)
    assert space.indices(np.array([0, 6000, 2**21]), grow=False).tolist() == expect([0, 6000, 2**21], False)
    known = float(batch[0])  # equal to a label seen as an int
    assert space.n_new([known, 2**30, "x"]) == 2 and space.n_new([3.5]) == 1
    for extra in ([False, 3.5], ["a", 12], [2**40, 9], [1.0, "b", True]):  # each its own kind of label
        assert space.indices(extra, grow=True).tolist() == expect(extra, True)
        batch = rng.integers(0, 7000, size=100)
        assert space.indices(batch, grow=True).tolist() == expect(batch.tolist(), True)
        assert space.indices([3, 3.5], grow=False).tolist() == expect([3, 3.5], False)
    assert space.labels == list(reference)
    assert LabelSpace.restore(space.export()).indices(list(reference), grow=False).tolist() == list(range(len(reference)))
