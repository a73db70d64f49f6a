"""What a user of the ``streamlearn`` command sees when something is off: every run that loses
records says so on stderr, a run that learned nothing fails, a directory holding a model is not
silently replaced, a stop while starting is a clean stop. One test per defect of the trust
campaign (issue 28), each asserting the exit code and the stderr line."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time

import numpy as np
import pytest

from streamlearn.service.checkpoint import CheckpointStore
from helpers import PYTHON, cli, libsvm_lines

pytestmark = pytest.mark.slow  # whole processes or every river check: not in the quick subset


def _err(result) -> str:
    return result.stderr.decode()


def _summary(result) -> dict:
    return json.loads(result.stdout.decode().splitlines()[0])


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """load_digits as a LIBSVM training file, a LIBSVM test file and a CSV (label column "target")."""
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order] / 16.0, y[order]
    folder = tmp_path_factory.mktemp("digits")

    def libsvm(rows, labels):
        return "".join(f"{t} " + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(x) if v) + "\n" for x, t in zip(rows, labels))

    (folder / "train.svm").write_text(libsvm(X[:1400], y[:1400]))
    (folder / "test.svm").write_text(libsvm(X[1400:], y[1400:]))
    header = ",".join(f"pixel{j}" for j in range(64)) + ",target\n"
    (folder / "digits.csv").write_text(header + "".join(",".join(f"{v:g}" for v in x) + f",{t}\n" for x, t in zip(X, y)))
    return folder


# 1. a learner whose checkpoints were wrong
def test_stagewise_regression_evaluates_from_its_checkpoint_as_it_learned(tmp_path, digits):
    ck = tmp_path / "ck"
    cli("train", digits / "train.svm", "--learner", "StagewiseRegression", "--param", "refit_every=500",
        "--param", "block_size=64", "--passes", "3", "--checkpoint-dir", ck, "--quiet")
    evaluated = json.loads(cli("evaluate", digits / "test.svm", "--checkpoint", ck).stdout)
    assert evaluated["accuracy"] > 0.8  # was 9.8 %: the restored sampler read other features


# 3. damage in the version field
def test_a_flipped_version_byte_falls_back_to_the_previous_checkpoint(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(3000, seed=4)) + "\n")
    ck = tmp_path / "ck"
    cli("train", path, "--checkpoint-dir", ck, "--checkpoint-every", "1000", "--quiet")
    newest = CheckpointStore(ck).paths()[-1]
    data = bytearray(newest.read_bytes())
    data[13] ^= 0xFF
    newest.write_bytes(bytes(data))
    result = cli("train", path, "--checkpoint-dir", ck, "--resume", "--quiet")
    assert "is corrupt (checksum mismatch); falling back to an older checkpoint" in _err(result)


def _catches_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has a handler for SIGTERM (its bit in /proc/PID/status's SigCgt)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return any(line.startswith("SigCgt:") and int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)) for line in status)
    except FileNotFoundError:
        return False


# 4. a stop while the command starts: timed from the moment the entry point catches stops (what
# comes before is the interpreter's start-up, bench/results/startup.md), so a busy machine does not move it
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2])
def test_sigterm_while_starting_is_a_final_checkpoint_and_exit_0(tmp_path, delay):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(20_000, seed=1)) + "\n")
    ck = tmp_path / "ck"
    process = subprocess.Popen([str(pathlib.Path(PYTHON).with_name("streamlearn")), "train", str(path), "--checkpoint-dir",
                                str(ck), "--quiet", "--learner", "MulticlassLogisticRegression"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not _catches_sigterm(process.pid) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(delay)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    assert b"Traceback" not in err
    assert CheckpointStore(ck).load_latest() is not None
    learned = json.loads(out.decode().splitlines()[0])["learned"]
    if learned < 20_000:  # stopped before the end: said so, with the way to go on
        assert f"stopped by SIGTERM after {learned:,} examples learned".encode() in err
        assert b"with --resume continues" in err


# 5. runs that lost every record without a word
def test_a_csv_without_a_label_column_is_refused_with_the_option_to_use(tmp_path):
    path = tmp_path / "wine.csv"
    path.write_text("alcohol,malic,cultivar\n14.2,1.7,1\n13.2,2.1,2\n")
    result = cli("train", path, check=False)
    assert result.returncode == 1
    assert _err(result).strip().splitlines()[-1].startswith("streamlearn: error: file") and "--label-column" in _err(result)
    assert _summary(cli("train", path, "--label-column", "cultivar", "--quiet"))["learned"] == 2


@pytest.mark.parametrize("name", ["digits.data", "digits.txt", "digits"])
def test_a_csv_named_otherwise_is_read_as_csv(tmp_path, digits, name):
    (tmp_path / name).write_bytes((digits / "digits.csv").read_bytes())
    summary = _summary(cli("train", tmp_path / name, "--quiet"))
    assert summary["learned"] == 1797 and summary["dead_letters"] == 0


def test_a_semicolon_csv_and_a_csv_on_stdin_are_read(tmp_path, digits):
    text = (digits / "digits.csv").read_text()
    (tmp_path / "semi.csv").write_text(text.replace(",", ";"))
    assert _summary(cli("train", tmp_path / "semi.csv", "--quiet"))["learned"] == 1797
    piped = _summary(cli("train", "-", "--quiet", input=text.encode()))
    assert piped["learned"] == 1797 and piped["dead_letters"] == 0  # was parsed as LIBSVM: 1,798 dead


def test_files_of_different_formats_are_each_read_in_theirs(tmp_path):
    (tmp_path / "a.svm").write_text("1 1:1\n2 2:1\n")
    (tmp_path / "b.jsonl").write_text('{"x": {"1": 1}, "y": 1}\n')
    assert _summary(cli("train", tmp_path / "a.svm", tmp_path / "b.jsonl", "--quiet"))["learned"] == 3


def test_a_binary_file_is_one_clear_error(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(256)) * 4)
    result = cli("train", path, check=False)
    assert result.returncode == 1 and "binary data" in _err(result)


def test_an_empty_source_learned_nothing_and_exits_4(tmp_path):
    path = tmp_path / "empty.svm"
    path.write_text("")
    result = cli("train", path, "--quiet", check=False)
    assert result.returncode == 4 and "nothing was learned: the source held no records" in _err(result)


def test_a_binary_learner_on_ten_classes_stops_early_naming_the_learner(tmp_path, digits):
    result = cli("train", digits / "train.svm", "--learner", "PrimalGradientSolver", "--quiet", check=False)
    assert result.returncode == 3
    last = _err(result).strip().splitlines()[-1]
    assert "of the first" in last and "PrimalGradientSolver" in last and "learns the two classes" in last
    assert _summary(result)["seen"] < 1400  # stopped after its first batch, not at the end


def test_a_stream_that_starts_mostly_bad_stops_and_names_the_format(tmp_path):
    path = tmp_path / "d.svm"  # named LIBSVM, holds JSON lines
    path.write_text("".join(json.dumps({"x": {"a": i}, "y": i % 2}) + "\n" for i in range(300)))
    result = cli("train", path, "--quiet", check=False)
    assert result.returncode == 3 and "--format" in _err(result).strip().splitlines()[-1]
    # --max-errors sets the user's own tolerance instead
    tolerant = cli("train", path, "--quiet", "--max-errors", "1000", "--overwrite", check=False)
    assert tolerant.returncode == 4 and "nothing was learned" in _err(tolerant)


def test_every_run_with_bad_records_ends_with_one_line_saying_where_they_went(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(300, seed=3)) + "\nnot libsvm\n1 2:nan\n")
    result = cli("train", path, "--checkpoint-dir", tmp_path / "ck", "--quiet")
    lines = [line for line in _err(result).splitlines() if "bad records" in line]
    assert lines == [f"streamlearn: 2 bad records (malformed 1, non-finite 1) -> {tmp_path / 'ck' / 'dead_letters.jsonl'}"]


# 6. models replaced or thrown away without a word
def test_a_directory_holding_a_model_is_refused_unless_overwritten(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(500, seed=5)) + "\nbad line\n")
    ck = tmp_path / "ck"
    cli("train", path, "--checkpoint-dir", ck, "--quiet")
    again = cli("train", path, "--checkpoint-dir", ck, "--quiet", check=False)
    assert again.returncode == 1 and "already holds checkpoints" in _err(again) and "--overwrite" in _err(again)
    metrics_before = (ck / "metrics.jsonl").read_text().count("\n")
    cli("train", path, "--checkpoint-dir", ck, "--quiet", "--overwrite")
    assert (ck / "metrics.jsonl").read_text().count("\n") == metrics_before  # replaced, not appended
    assert (ck / "dead_letters.jsonl").read_text().count("\n") == 1
    both = cli("train", path, "--checkpoint-dir", ck, "--resume", "--overwrite", check=False)
    assert both.returncode == 1 and "choose one" in _err(both)


def test_without_a_checkpoint_dir_the_user_is_told_the_model_is_not_kept(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(100, seed=6)) + "\nbad\n")
    result = cli("train", path, "--quiet", cwd=tmp_path)
    assert "the model was not saved (no --checkpoint-dir)" in _err(result)
    assert "-> dead_letters.jsonl (appended)" in _err(result)


# 7. predictions on data the model cannot read
def test_predict_reads_unlabelled_libsvm_and_warns_on_unknown_features(tmp_path, digits):
    ck = tmp_path / "ck"
    cli("train", digits / "train.svm", "--checkpoint-dir", ck, "--quiet")
    unlabelled = tmp_path / "u.svm"
    unlabelled.write_text("".join(line.split(" ", 1)[1] + "\n" for line in (digits / "test.svm").read_text().splitlines()))
    result = cli("predict", unlabelled, "--checkpoint", ck)
    assert result.stdout.decode().count("\n") == 397 and "397 predictions (0.0% of the feature mass unknown" in _err(result)
    foreign = cli("predict", digits / "digits.csv", "--checkpoint", ck)
    assert "warning: 100% of the feature mass is on features the model has never seen" in _err(foreign)
    evaluated = cli("evaluate", digits / "digits.csv", "--checkpoint", ck)
    assert json.loads(evaluated.stdout)["unknown_features"] == 1.0 and "warning: 100%" in _err(evaluated)


# 8. training further on a new file
def test_init_from_trains_a_model_further_on_another_source(tmp_path, digits):
    first, second = tmp_path / "first", tmp_path / "second"
    cli("train", digits / "train.svm", "--checkpoint-dir", first, "--quiet", "--param", "lam=0.001")
    result = cli("train", digits / "test.svm", "--checkpoint-dir", second, "--init-from", first, "--quiet")
    assert f"starting from {first}" in _err(result)
    payload = CheckpointStore(second).load_latest()
    assert payload["learner"]["params"]["lam"] == 0.001  # the model of `first`, its parameters
    assert payload["runner"]["counters"]["learned"] == 397  # the new source, from its beginning
    assert payload["learner"]["model"]["t"] == 1400 + 397
    refused = cli("train", digits / "test.svm", "--checkpoint-dir", second, "--resume", "--init-from", first, check=False)
    assert refused.returncode == 1 and "choose one" in _err(refused)


# 9. dense, unscaled features
def test_standardize_learns_unscaled_dense_features(tmp_path):
    datasets = pytest.importorskip("sklearn.datasets")
    X, y = datasets.load_wine(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    path = tmp_path / "wine.csv"
    path.write_text("a,b,c,d,e,f,g,h,i,j,k,l,m,label\n" + "".join(",".join(map(str, x)) + f",{t}\n"
                                                                 for x, t in zip(X[order], y[order])))
    plain = _summary(cli("train", path, "--quiet"))["prequential"]["accuracy"]
    ck = tmp_path / "ck"
    scaled = _summary(cli("train", path, "--quiet", "--standardize", "--checkpoint-dir", ck))["prequential"]["accuracy"]
    assert plain < 0.5 and scaled > 0.85
    assert json.loads(cli("evaluate", path, "--checkpoint", ck).stdout)["accuracy"] > 0.9  # the checkpoint scales too


# 10. the hold-out figures
def test_the_final_holdout_figure_is_reported_apart_from_the_running_one(tmp_path, digits):
    summary = _summary(cli("train", digits / "train.svm", "--holdout", "0.2", "--passes", "3", "--quiet"))
    running, final = summary["holdout"], summary["holdout_final"]
    assert running["n"] + running["unscored"] == 3 * final["n"]  # each pass scores the held-out records once, the final model once
    assert final["accuracy"] > running["accuracy"]
    from_file = _summary(cli("train", digits / "train.svm", "--holdout", digits / "test.svm", "--quiet"))
    assert from_file["holdout"]["n"] == 397 and from_file["holdout_final"] == from_file["holdout"]


# 11. the small things
def test_help_is_whole_and_lists_the_learners():
    top = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "--help"], capture_output=True, text=True)
    assert top.returncode == 0 and "Examples:\n" in top.stdout and "Exit codes:" in top.stdout
    assert not top.stdout.rstrip().endswith("::")
    train = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "train", "--help"], capture_output=True, text=True)
    for name in ("MulticlassSVM", "PrimalGradientSolver", "StagewiseRegression", "--standardize", "--init-from",
                 "--overwrite"):
        assert name in train.stdout


def test_usage_errors_and_bad_record_stops_have_different_exit_codes(tmp_path):
    usage = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "train", "--no-such-option"], capture_output=True)
    assert usage.returncode == 2
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(200, seed=7)) + "\nbad\nbad\nbad\n")
    stopped = cli("train", path, "--max-errors", "1", "--quiet", check=False)
    assert stopped.returncode == 3


def test_passes_on_stdin_is_refused_not_ignored():
    result = cli("train", "-", "--passes", "3", input=b"1 1:1\n", check=False)
    assert result.returncode == 1 and "stdin and Kafka are read once" in _err(result)


def test_the_source_can_be_set_in_the_config_file(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(200, seed=8)) + "\n")
    config = tmp_path / "job.toml"
    config.write_text(f'source = "{path}"\nlearner = "MulticlassLogisticRegression"\nquiet = true\n')
    assert _summary(cli("train", "--config", config))["learned"] == 200
    empty = tmp_path / "none.toml"
    empty.write_text("quiet = true\n")
    missing = cli("train", "--config", empty, check=False)
    assert missing.returncode == 2 and "train needs a source" in _err(missing)


def test_a_too_long_label_is_a_dead_letter_with_its_reason(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"x": {"a": i % 3}, "y": i % 2}) + "\n" for i in range(1, 200))
                    + json.dumps({"x": {"a": 1}, "y": "x" * 1_000_000}) + "\n")
    ck = tmp_path / "ck"
    result = cli("train", path, "--checkpoint-dir", ck, "--quiet")
    assert "1 bad records (label-too-long 1)" in _err(result)
    assert json.loads((ck / "dead_letters.jsonl").read_text())["reason"] == "label-too-long"
    assert os.path.getsize(CheckpointStore(ck).paths()[-1]) < 100_000
