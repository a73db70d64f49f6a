"""The runner and the CLI: dead letters, hold-out, SIGTERM, corrupt checkpoints, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

import streamlearn
from streamlearn.connectors import FileSource, JsonLinesSink
from streamlearn.connectors.libsvm import parse_libsvm_bytes
from streamlearn.service.checkpoint import CheckpointStore
from streamlearn.service.runner import Runner
from helpers import PYTHON, assert_same_state, cli, libsvm_lines, records, train_reference, train_reference_records

BAD_LINES = {
    7: ("3 4:nan 5:1", "non-finite"),
    40: ("this is not libsvm", "malformed"),
    41: ("2:1 3:4", "missing-label"),
    99: ("4 1:1e999", "non-finite"),
    150: ("5", "empty-features"),
}


def seeded_stream(tmp_path, n=300):
    """A LIBSVM file with known bad lines at known (1-based) line numbers."""
    lines = libsvm_lines(n)
    for number in sorted(BAD_LINES):
        lines.insert(number - 1, BAD_LINES[number][0])
    path = tmp_path / "seeded.svm"
    path.write_text("\n".join(lines) + "\n")
    good = "\n".join(l for i, l in enumerate(lines, 1) if i not in BAD_LINES) + "\n"
    return path, good.encode()


def final_state(directory):
    return CheckpointStore(directory).load_latest()


def test_dead_letters_hold_exactly_the_bad_records_and_the_model_only_the_good(tmp_path):
    path, good = seeded_stream(tmp_path)
    result = cli("train", path, "--learner", "MulticlassSVM", "--param", "lam=0.01", "--checkpoint-dir", tmp_path / "ck",
                 "--checkpoint-every", "50", "--batch-records", "32")
    summary = json.loads(result.stdout)
    assert summary["dead_letters"] == len(BAD_LINES) and summary["learned"] == 300
    letters = [json.loads(l) for l in (tmp_path / "ck" / "dead_letters.jsonl").read_text().splitlines()]
    assert [(d["position"]["line"], d["record"], d["reason"]) for d in letters] == [
        (n, text, reason) for n, (text, reason) in sorted(BAD_LINES.items())]
    assert all(d["position"]["source"] == str(path) for d in letters)
    reference = train_reference(good, "MulticlassSVM", lam=0.01)
    assert_same_state(final_state(tmp_path / "ck")["learner"], reference.export_state())


@pytest.mark.parametrize(("learner", "params", "refused", "reason"), [
    # a binary learner: labels 0/1 are its classes (False/True), a 2 is a third class
    ("PrimalGradientSolver", {}, {5: "2 1:1", 60: "2 3:0.5", 61: "2 2:1"}, "refused-bad-label"),
    # a dense least-squares learner with room for 6 features: a record bringing a 7th and an 8th
    ("GeneralizedLeastSquares", {"max_features": 6, "batch_size": 4}, {9: "1 7:1 8:1", 70: "0 1:1 9:2"}, "refused-bad-shape"),
])
def test_records_the_learner_refuses_are_dead_letters_and_the_rest_is_learned(tmp_path, learner, params, refused, reason):
    """Well-formed records a learner cannot take used to stop the daemon (exit 1) without
    learning the valid records of their batch."""
    rng = np.random.default_rng(3)
    lines = [f"{rng.integers(0, 2)} " + " ".join(f"{j}:{rng.random():.3f}" for j in sorted(rng.choice(np.arange(1, 7), 3, replace=False)))
             for _ in range(120)]
    for number in sorted(refused):
        lines.insert(number - 1, refused[number])
    path = tmp_path / "d.svm"
    path.write_text("\n".join(lines) + "\n")
    args = [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
    summary = json.loads(cli("train", path, "--learner", learner, *args, "--checkpoint-dir", tmp_path / "ck",
                             "--batch-records", "25").stdout)
    assert summary["dead_letters"] == len(refused) and summary["learned"] == 120
    letters = [json.loads(l) for l in (tmp_path / "ck" / "dead_letters.jsonl").read_text().splitlines()]
    assert [(d["position"]["line"], d["reason"]) for d in letters] == [(n, reason) for n in sorted(refused)]
    good = "\n".join(l for i, l in enumerate(lines, 1) if i not in refused) + "\n"
    assert_same_state(final_state(tmp_path / "ck")["learner"], train_reference(good.encode(), learner, **params).export_state())


def test_a_stream_of_ever_new_labels_is_bounded_by_max_classes(tmp_path):
    """20,000 records, each with a label never seen before (a hostile topic): with
    ``max_classes=50`` the model takes the first 50 labels and stops growing; every other
    record is a dead letter at its line, and the model is the one the first 50 records give."""
    rng = np.random.default_rng(4)
    lines = [f"{i + 1} " + " ".join(f"{j}:{rng.random():.3f}" for j in sorted(rng.choice(np.arange(1, 30), 4, replace=False)))
             for i in range(20_000)]
    lines[60] = "7 1:1"  # a known label after the cap: still learned
    path = tmp_path / "labels.svm"
    path.write_text("\n".join(lines) + "\n")
    dead = JsonLinesSink(str(tmp_path / "dead.jsonl"))
    runner = Runner(streamlearn.MulticlassSVM(lam=0.01), FileSource([str(path)], batch_records=256), dead_letter_sink=dead,
                    max_classes=50, progress=False)
    assert runner.run() == 0
    dead.close()
    assert len(runner.model.classes) == 50 and runner.counters["learned"] == 51
    letters = [json.loads(l) for l in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert runner.dead_reasons == {"refused-class-limit": 20_000 - 51} and len(letters) == 20_000 - 51
    assert [d["position"]["line"] for d in letters] == [n for n in range(51, 20_001) if n != 61]
    good = "\n".join(lines[:50] + [lines[60]]) + "\n"
    assert_same_state(runner.model.export_state(), train_reference(good.encode(), "MulticlassSVM", lam=0.01).export_state())
    with pytest.raises(ValueError, match="max_classes must be a positive integer"):
        Runner(streamlearn.MulticlassSVM(), FileSource([str(path)]), max_classes=0)


def test_max_errors_stops_with_exit_code_3_after_learning_what_was_valid(tmp_path):
    path, _ = seeded_stream(tmp_path)
    result = cli("train", path, "--checkpoint-dir", tmp_path / "ck", "--max-errors", "2", "--batch-records", "45", check=False)
    assert result.returncode == 3 and b"more than --max-errors 2" in result.stderr
    payload = final_state(tmp_path / "ck")
    assert payload["runner"]["counters"]["dead_letters"] == 3  # lines 7, 40 and 41 are in the first 45
    assert payload["runner"]["counters"]["learned"] == 45 - 3


def test_hash_holdout_records_are_scored_but_never_learned(tmp_path):
    recs = records(2000)
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    source = FileSource([str(path)], batch_records=128)
    runner = Runner(streamlearn.MulticlassLogisticRegression(lam=0.01), source, holdout=0.2, checkpoint_every=500,
                    metrics_sink=JsonLinesSink(str(tmp_path / "m.jsonl")), progress=False)
    assert runner.run() == 0
    held = runner.counters["held_out"]
    assert 300 < held < 500 and runner.counters["learned"] == 2000 - held
    from streamlearn.connectors.records import record_hash

    kept = [r for r, line in zip(recs, path.read_bytes().splitlines()) if record_hash(line) >= 0.2 * 2**64]
    reference = train_reference_records(kept, "MulticlassLogisticRegression", lam=0.01)
    assert_same_state(runner.model.export_state(), reference.export_state())
    lines = [json.loads(l) for l in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert lines[-1]["holdout"]["n"] + lines[-1]["holdout"]["unscored"] == held and lines[-1]["holdout"]["accuracy"] > 0.8


def test_holdout_source_is_evaluated_at_every_checkpoint(tmp_path):
    train, test = tmp_path / "train.svm", tmp_path / "test.svm"
    lines = libsvm_lines(1200)
    train.write_text("\n".join(lines[:1000]) + "\n")
    test.write_text("\n".join(lines[1000:]) + "\nnot a record\n")
    cli("train", train, "--checkpoint-dir", tmp_path / "ck", "--checkpoint-every", "250", "--batch-records", "250",
        "--holdout", test, "--metrics", tmp_path / "m.jsonl")
    rows = [json.loads(l) for l in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["learned"] for r in rows] == [250, 500, 750, 1000, 1000]
    assert all(r["holdout"]["n"] == 200 and r["holdout"]["bad_records"] == 1 for r in rows)
    assert rows[-1]["holdout"]["accuracy"] > 0.8
    evaluated = json.loads(cli("evaluate", test, "--checkpoint", tmp_path / "ck").stdout)
    assert evaluated["accuracy"] == rows[-1]["holdout"]["accuracy"] and evaluated["bad_records"] == 1
    cli("plot", tmp_path / "m.jsonl", "-o", tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with open(tmp_path / "m.jsonl", "a") as f:  # a log cut short mid-line, then more lines
        f.write('{"learned": 12\n' + json.dumps(rows[-1]) + "\n")
    damaged = cli("plot", tmp_path / "m.jsonl", "-o", tmp_path / "again.png")  # used to end in a JSON traceback
    assert damaged.stderr.decode().splitlines()[0] == f"streamlearn: warning: {tmp_path / 'm.jsonl'}: line(s) 6 are not JSON and were skipped"
    assert (tmp_path / "again.png").exists()


def test_sigterm_finishes_the_batch_checkpoints_and_exits_0(tmp_path):
    lines = libsvm_lines(500)
    process = subprocess.Popen([PYTHON, "-m", "streamlearn.service.cli", "train", "-", "--checkpoint-dir", str(tmp_path / "ck"),
                                "--checkpoint-every", "250", "--checkpoint-interval", "1000", "--quiet"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdin.write(("\n".join(lines) + "\n").encode())
    process.stdin.flush()  # stdin stays open: the daemon is left waiting for more input
    deadline = time.monotonic() + 60
    # the second periodic checkpoint (the starting one is written before the first batch): every line learned
    while not ((state := final_state(tmp_path / "ck")) and state["runner"]["counters"]["learned"] == 500):
        assert time.monotonic() < deadline and process.poll() is None, "the 500 lines were not all learned within 60 s"
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    payload = final_state(tmp_path / "ck")
    assert payload["runner"]["counters"]["learned"] == 500
    assert payload["runner"]["counters"]["checkpoints"] >= 2  # the periodic one and the one at SIGTERM
    reference = train_reference(("\n".join(lines) + "\n").encode())
    assert_same_state(payload["learner"], reference.export_state())


def test_resume_falls_back_past_a_corrupt_checkpoint_and_ends_identical(tmp_path):
    path = tmp_path / "d.svm"
    text = ("\n".join(libsvm_lines(1000)) + "\n").encode()
    half = text[: text.index(b"\n", len(text) // 2) + 1]
    path.write_bytes(half)  # first run sees half the stream ...
    args = ["train", path, "--checkpoint-dir", tmp_path / "ck", "--checkpoint-every", "100", "--batch-records", "50"]
    cli(*args)
    newest = CheckpointStore(tmp_path / "ck").paths()[-1]
    newest.write_bytes(newest.read_bytes()[:-10])  # ... and its last checkpoint is damaged
    result = cli(*args, "--resume")
    assert b"checksum" in result.stderr or b"corrupt" in result.stderr
    assert json.loads(result.stdout)["learned"] == half.count(b"\n")
    assert_same_state(final_state(tmp_path / "ck")["learner"], train_reference(half).export_state())


def test_train_passes_and_toml_config(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(200)) + "\n")
    config = tmp_path / "job.toml"
    config.write_text(f'learner = "MulticlassPerceptron"\npasses = 3\ncheckpoint_dir = "{tmp_path / "ck"}"\n[param]\nlam = 0.5\n')
    summary = json.loads(cli("train", path, "--config", config).stdout)
    assert summary["learned"] == 600
    state = final_state(tmp_path / "ck")["learner"]
    assert state["class"] == "MulticlassPerceptron" and state["params"]["lam"] == 0.5


@pytest.mark.parametrize("args, message", [
    (["--learner", "Nope"], "unknown learner 'Nope'; choose one of"),
    (["--param", "lam=-1"], "lam must be a positive finite number"),
    (["--param", "colour=1"], "MulticlassSVM has no parameter 'colour'"),
    (["--param", "lam"], "--param expects KEY=VALUE"),
    (["--resume"], "--resume needs --checkpoint-dir"),
    (["--max-errors", "-1"], "--max-errors must be 0 or more"),  # -1 stopped the stream after its first batch
    (["--checkpoint-interval", "-3"], "--checkpoint-interval must be a positive number of seconds"),
    (["--batch-records", "0"], "--batch-records must be a positive number of records"),
])
def test_bad_configuration_fails_with_one_line(tmp_path, args, message):
    path = tmp_path / "d.svm"
    path.write_text("1 1:1\n")
    result = cli("train", path, *args, check=False)
    assert result.returncode == 1
    assert result.stderr.decode().strip().count("\n") == 0 and message in result.stderr.decode()


def test_predict_writes_one_line_per_record_with_its_position(tmp_path):
    path = tmp_path / "d.svm"
    text = "\n".join(libsvm_lines(300)) + "\n"
    path.write_text(text)
    cli("train", path, "--checkpoint-dir", tmp_path / "ck")
    out = cli("predict", path, "--checkpoint", tmp_path / "ck", "--output", tmp_path / "p.jsonl", "--proba").stderr
    assert b"300 predictions" in out
    rows = [json.loads(l) for l in (tmp_path / "p.jsonl").read_text().splitlines()]
    model = streamlearn.learner_from_state(final_state(tmp_path / "ck")["learner"])
    chunk = parse_libsvm_bytes(text.encode())
    assert [r["prediction"] for r in rows] == model.predict_many(chunk.X).tolist()
    assert [r["position"]["line"] for r in rows] == list(range(1, 301))
    assert all(abs(sum(r["proba"].values()) - 1) < 1e-9 for r in rows)
    info = json.loads(cli("inspect", tmp_path / "ck", "--json").stdout)
    assert info["learner"] == "MulticlassSVM" and info["classes"] == 5 and info["counters"]["learned"] == 300


def test_predict_proba_writes_tuple_labels_as_json_keys(tmp_path):
    """A model trained in Python on tuple labels: --proba ended in a TypeError (JSON keys)."""
    model = streamlearn.MulticlassSVM(lam=0.1)
    for _ in range(5):
        model.learn_one({"a": 1.0}, ("cat", 1))
        model.learn_one({"b": 1.0}, ("dog", 2))
    CheckpointStore(tmp_path / "ck").save({"learner": model.export_state()})
    (tmp_path / "in.jsonl").write_text('{"x": {"a": 1}}\n')
    out = json.loads(cli("predict", tmp_path / "in.jsonl", "--checkpoint", tmp_path / "ck", "--proba").stdout)
    assert out["prediction"] == ["cat", 1] and set(out["proba"]) == {'["cat", 1]', '["dog", 2]'}
    assert out["proba"]['["cat", 1]'] > out["proba"]['["dog", 2]']


def test_predict_into_a_reader_that_stops_early_exits_quietly_with_code_0(tmp_path):
    """``streamlearn predict … | head -1``: the command ends on the broken pipe with exit
    code 0 and no traceback, also in the fast exit after it (which flushes stdout once more)."""
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(20_000)) + "\n")
    cli("train", path, "--checkpoint-dir", tmp_path / "ck")
    process = subprocess.Popen([PYTHON, "-m", "streamlearn.service.cli", "predict", str(path), "--checkpoint", str(tmp_path / "ck")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = json.loads(process.stdout.readline())
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 0, stderr.decode()
    assert first["position"]["line"] == 1 and b"Traceback" not in stderr and b"Exception ignored" not in stderr


def test_main_module_dispatches_cli_commands(tmp_path):
    result = subprocess.run([PYTHON, "-m", "streamlearn", "inspect", str(tmp_path)], capture_output=True)
    assert result.returncode == 1 and b"no checkpoint in" in result.stderr
    assert b"usage: streamlearn" in subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "--help"], capture_output=True).stdout
    version = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith(f"streamlearn {streamlearn.__version__} (kernels: ")


def test_the_cli_module_loads_no_numpy_and_train_limits_openblas_for_first_order_learners():
    script = ("import os, sys\nfrom streamlearn.service import cli\nassert 'numpy' not in sys.modules, 'numpy imported'\n"
              "args = cli.make_parser(sys.argv[1:]).parse_args(sys.argv[1:])\ncli._blas_threads_for(args)\n"
              "print(os.environ.get('OPENBLAS_NUM_THREADS'))")

    def openblas_threads(*argv, **env):
        environment = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
        result = subprocess.run([PYTHON, "-c", script, *argv], capture_output=True, text=True, env={**environment, **env})
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert openblas_threads("train", "x.svm") == "1"  # MulticlassSVM by default
    assert openblas_threads("train", "x.svm", "--learner", "MulticlassPGS") == "1"
    assert openblas_threads("train", "x.svm", "--learner", "GeneralizedLeastSquares") == "None"  # BLAS-heavy: its threads
    assert openblas_threads("train", "x.svm", OPENBLAS_NUM_THREADS="2") == "2"  # the user's choice wins
    assert openblas_threads("evaluate", "x.svm", "--checkpoint", "c") == "None"


def test_streamlearn_names_load_on_first_use():
    assert set(streamlearn.LEARNERS) == set(streamlearn.LEARNER_NAMES)
    assert set(streamlearn.__all__) <= set(dir(streamlearn))
    assert all(getattr(streamlearn, name) is not None for name in streamlearn.__all__)
    assert set(streamlearn.FIRST_ORDER_LEARNERS) < set(streamlearn.LEARNER_NAMES)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        streamlearn.nothing  # noqa: B018


def test_train_with_a_hash_holdout_reads_ahead_with_record_hashes(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(1500)) + "\n")
    summary = json.loads(cli("train", path, "--holdout", "0.2", "--quiet", "--dead-letter", tmp_path / "dead.jsonl",
                             "--batch-records", "100").stdout.decode().splitlines()[-1])
    library = Runner(streamlearn.MulticlassSVM(), FileSource([str(path)], batch_records=100), holdout=0.2, progress=False)
    assert library.run() == 0
    assert summary["held_out"] == library.counters["held_out"] and 150 < summary["held_out"] < 450
    assert summary["learned"] == 1500 - summary["held_out"] and summary["holdout"] == library.holdout_metrics.summary()


def test_a_finite_stream_learns_its_last_partial_mini_batch(tmp_path):
    """GeneralizedLeastSquares takes steps of 128: a file of 300 records left 44 pending, never
    learned. The runner flushes them at the end of a file; ``flush()`` does it in the library."""
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(300, seed=9)) + "\n")
    ck = tmp_path / "ck"
    cli("train", path, "--learner", "GeneralizedLeastSquares", "--checkpoint-dir", ck, "--quiet")
    state = CheckpointStore(ck).load_latest()["learner"]
    assert state["pending"]["y"] == [] and state["model"]["n"] == 300
    model = streamlearn.GeneralizedLeastSquares()
    model.learn_many(parse_libsvm_bytes(path.read_bytes()).X, parse_libsvm_bytes(path.read_bytes()).labels)
    assert model.n_pending == 300 % model.batch_size == 44
    model.flush()
    assert model.n_pending == 0
    assert_same_state(model.export_state(), state)


def test_a_runner_answers_its_summary_before_it_runs(tmp_path):
    """Its state exists from the start: a service that reports a runner's summary before its
    first batch gets zeros, not an AttributeError."""
    path = tmp_path / "few.svm"
    path.write_text("\n".join(libsvm_lines(5)) + "\n")
    runner = Runner(streamlearn.MulticlassSVM(), FileSource([str(path)]), progress=False)
    before = runner.summary()
    assert before["learned"] == before["seen"] == 0 and before["elapsed_s"] == 0.0 and before["data_seconds"] == 0.0
    assert runner.run() == 0 and runner.summary()["learned"] == 5


def test_a_runner_takes_its_options_as_one_dataclass_or_as_keywords(tmp_path):
    """``RunnerOptions`` checks its values when made; keywords override a given options object."""
    from streamlearn.service.runner import RunnerOptions

    with pytest.raises(ValueError, match="hold-out fraction"):
        RunnerOptions(holdout=1.5)
    path = tmp_path / "few.svm"
    path.write_text("\n".join(libsvm_lines(5)) + "\n")
    options = RunnerOptions(checkpoint_every=2, progress=False)
    runner = Runner(streamlearn.MulticlassSVM(), FileSource([str(path)]), options, checkpoint_every=3)
    assert runner.options.checkpoint_every == 3 and options.checkpoint_every == 2
    with pytest.raises(ValueError, match="max_classes must be a positive integer"):
        Runner(streamlearn.MulticlassSVM(), FileSource([str(path)]), options, max_classes=0)
