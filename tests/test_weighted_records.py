"""Weights in records (issue 77): every record format carries a weight — a nested record's ``"w"``,
``--weight-column`` for CSV and flat records, a compact batch's ``"w"`` array, a Kafka record's
``"w"`` — and ``streamlearn train`` learns the model ``learn_many(X, y, w)`` gives, bit for bit;
the weight is never a feature; weight 0 is predicted, not learned; a job whose every record has
weight 0 learned nothing and says so (exit 4); a bad weight is a dead letter."""

from __future__ import annotations

import json
import os
import subprocess
from collections import namedtuple

import msgpack
import numpy as np
import pytest

from streamlearn import MulticlassSVM
from streamlearn.connectors.compact import encode_batch
from streamlearn.connectors.kafka_messages import decode_messages
from streamlearn.service import cli as cli_module
from streamlearn.service.checkpoint import CheckpointStore, restore_learner
from helpers import PYTHON, assert_same_state, cli

WEIGHTS = (0.5, 1.0, 2.0, 3.0, 0.0)


def weighted_rows(n: int = 240, seed: int = 0) -> list[tuple[dict, str, float]]:
    """``(features, label, weight)`` of a three-class stream, weights among :data:`WEIGHTS`."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 2, (3, 4))
    rows = []
    for i in range(n):
        k = int(rng.integers(3))
        values = np.round(centres[k] + rng.normal(0, 1, 4), 3).tolist()
        rows.append(({f"f{j}": v for j, v in enumerate(values)}, "abc"[k], WEIGHTS[i % len(WEIGHTS)]))
    return rows


def run(capsys, *args) -> tuple[int, str]:
    code = cli_module.main([str(a) for a in args])
    return code, capsys.readouterr().err


def trained(directory):
    return restore_learner(CheckpointStore(directory).load_latest())


def reference(rows, weighted: bool = True) -> MulticlassSVM:
    model = MulticlassSVM()
    model.learn_many([x for x, _, _ in rows], [y for _, y, _ in rows], [w for _, _, w in rows] if weighted else None)
    return model


def nested_jsonl(rows) -> bytes:
    return "".join(json.dumps({"x": x, "y": y, "w": w}) + "\n" for x, y, w in rows).encode()


def flat_jsonl(rows) -> bytes:
    return "".join(json.dumps({**x, "label": y, "cost": w}) + "\n" for x, y, w in rows).encode()


def csv_text(rows) -> bytes:
    names = list(rows[0][0])
    lines = [",".join(names + ["cost", "label"])]
    lines += [",".join([repr(x[n]) for n in names] + [repr(w), y]) for x, y, w in rows]
    return ("\n".join(lines) + "\n").encode()


def nested_msgpack(rows) -> bytes:
    return b"".join(msgpack.packb({"x": x, "y": y, "w": w}) for x, y, w in rows)


def flat_msgpack(rows) -> bytes:
    return b"".join(msgpack.packb({**x, "label": y, "cost": w}) for x, y, w in rows)


#: each record format: (file name, its bytes, the options that name the weight)
FORMATS = {
    "jsonl nested": ("d.jsonl", nested_jsonl, []),
    "jsonl flat": ("d.jsonl", flat_jsonl, ["--weight-column", "cost"]),
    "csv": ("d.csv", csv_text, ["--weight-column", "cost"]),
    "csv by index": ("d.csv", csv_text, ["--weight-column", "4"]),
    "msgpack nested": ("d.msgpack", nested_msgpack, []),
    "msgpack flat": ("d.msgpack", flat_msgpack, ["--weight-column", "cost"]),
}


@pytest.mark.parametrize("kind", list(FORMATS))
@pytest.mark.parametrize("stdin", [False, True], ids=["file", "stdin"])
def test_a_records_weight_is_learned_as_its_weight_not_as_a_feature(kind, stdin, tmp_path, capsys):
    name, encode, options = FORMATS[kind]
    rows = weighted_rows()
    path = tmp_path / name
    path.write_bytes(encode(rows))
    if stdin:  # a process of its own: stdin is a file descriptor
        cli("train", "-", "--format", name.split(".")[1], *options, "--checkpoint-dir", tmp_path / "ck", "--quiet",
            input=path.read_bytes())
    else:
        code, err = run(capsys, "train", path, *options, "--checkpoint-dir", tmp_path / "ck", "--quiet")
        assert code == 0, err
    model = trained(tmp_path / "ck")
    assert sorted(k for k in model.feature_keys if not str(k).startswith("\x00")) == ["f0", "f1", "f2", "f3"]
    assert_same_state(model.export_state(), reference(rows).export_state())
    unweighted = reference(rows, weighted=False)
    assert not np.array_equal(model.decision_function_many([x for x, _, _ in rows]),
                              unweighted.decision_function_many([x for x, _, _ in rows]))
    counters = CheckpointStore(tmp_path / "ck").load_latest()["runner"]["counters"]
    assert (counters["learned"], counters["weightless"]) == (len(rows) - len(rows) // 5, len(rows) // 5)


def test_a_compact_batchs_weights_are_learned_and_its_bad_weights_are_dead_letters(tmp_path, capsys):
    rows = weighted_rows(120)
    names = {f"f{j}": j for j in range(4)}
    weights = np.array([w for _, _, w in rows])
    weights[7], weights[8] = -1.0, np.nan
    indptr = np.arange(0, 4 * len(rows) + 1, 4)
    indices = np.tile(np.arange(4), len(rows))
    data = np.array([x[n] for x, _, _ in rows for n in names])
    (tmp_path / "d.msgpack").write_bytes(encode_batch(indptr, indices, data, [y for _, y, _ in rows], weights))
    code, err = run(capsys, "train", tmp_path / "d.msgpack", "--checkpoint-dir", tmp_path / "ck", "--quiet")
    assert code == 0, err
    kept = [({names[n]: v for n, v in x.items()}, y, w) for i, (x, y, w) in enumerate(rows) if i not in (7, 8)]
    assert_same_state(trained(tmp_path / "ck").export_state(), reference(kept).export_state())
    dead = [json.loads(line) for line in (tmp_path / "ck" / "dead_letters.jsonl").read_text().splitlines()]
    assert [(d["position"]["index"], d["reason"]) for d in dead] == [(7, "bad-weight"), (8, "bad-weight")]


@pytest.mark.parametrize("bad", ['"-1"', "-1", "NaN", '"heavy"', "Infinity", "true", "[2]"])
def test_a_bad_weight_is_a_dead_letter_at_its_line_and_the_others_are_learned(bad, tmp_path, capsys):
    rows = weighted_rows(50)
    lines = nested_jsonl(rows).decode().splitlines()
    lines[9] = lines[9].replace(f'"w": {rows[9][2]}', f'"w": {bad}')
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    code, err = run(capsys, "train", tmp_path / "d.jsonl", "--checkpoint-dir", tmp_path / "ck", "--quiet")
    assert code == 0, err
    dead = [json.loads(line) for line in (tmp_path / "ck" / "dead_letters.jsonl").read_text().splitlines()]
    assert [(d["position"]["line"], d["reason"]) for d in dead] == [(10, "bad-weight")]
    assert_same_state(trained(tmp_path / "ck").export_state(), reference(rows[:9] + rows[10:]).export_state())


@pytest.mark.parametrize("kind", list(FORMATS))
def test_every_weight_zero_learns_nothing_and_says_so(kind, tmp_path, capsys):
    name, encode, options = FORMATS[kind]
    rows = [(x, y, 0.0) for x, y, _ in weighted_rows(30)]
    (tmp_path / name).write_bytes(encode(rows))
    code, err = run(capsys, "train", tmp_path / name, *options, "--checkpoint-dir", tmp_path / "ck", "--quiet")
    assert code == 4
    assert "every record's weight was 0 (30 records" in err
    assert trained(tmp_path / "ck").classes == []


def test_a_weight_zero_record_is_predicted_but_not_learned(tmp_path, capsys):
    rows = weighted_rows(50)
    (tmp_path / "d.jsonl").write_bytes(nested_jsonl(rows))
    code, err = run(capsys, "train", tmp_path / "d.jsonl", "--checkpoint-dir", tmp_path / "ck", "--quiet",
                    "--predictions", tmp_path / "p.jsonl", "--batch-records", "10")
    assert code == 0, err
    lines = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [line["position"]["line"] for line in lines] == list(range(1, 51))  # every record, in order
    assert all(line["prediction"] is not None for line in lines[10:])  # (by the model before its batch)
    prequential = CheckpointStore(tmp_path / "ck").load_latest()["runner"]["counters"]
    assert prequential["learned"] == 40 and prequential["weightless"] == 10


@pytest.mark.parametrize("learner", ["LpNormMulticlassSVM", "MulticlassPGS", "GeneralizedLeastSquares"])
def test_every_family_learns_weighted_records_as_learn_many_with_weights(learner, tmp_path, capsys):
    import streamlearn

    rows = weighted_rows(90)
    (tmp_path / "d.jsonl").write_bytes(nested_jsonl(rows))
    code, err = run(capsys, "train", tmp_path / "d.jsonl", "--learner", learner, "--checkpoint-dir", tmp_path / "ck",
                    "--quiet", "--batch-records", "40")
    assert code == 0, err
    model = streamlearn.LEARNERS[learner]()
    model.learn_many([x for x, _, _ in rows], [y for _, y, _ in rows], [w for _, _, w in rows])
    model.flush()  # (the runner flushes at the end of a file)
    assert_same_state(trained(tmp_path / "ck").export_state()["model"], model.export_state()["model"])


def test_a_kafka_records_w_is_its_weight_and_weight_column_is_refused_for_kafka():
    Message = namedtuple("Message", "topic partition offset value key")
    records = [{"x": {"a": 1.0}, "y": "p", "w": 2.5}, {"x": {"a": -1.0}, "y": "q"}]
    batch = decode_messages([Message("t", 0, 0, msgpack.packb(records), None)], labelled=True, with_hashes=False)
    assert batch.X == [{"a": 1.0}, {"a": -1.0}] and batch.w.tolist() == [2.5, 1.0]
    from streamlearn.connectors import SourceError, open_source

    with pytest.raises(SourceError, match='weight is its "w"'):
        open_source("kafka://127.0.0.1:1/t", weight_column="cost")


def test_a_csv_weight_column_that_is_missing_or_the_label_is_refused_at_once(tmp_path, capsys):
    (tmp_path / "d.csv").write_bytes(csv_text(weighted_rows(10)))
    code, err = run(capsys, "train", tmp_path / "d.csv", "--weight-column", "nope")
    assert code == 1 and "weight column 'nope' is not in the CSV header" in err
    code, err = run(capsys, "train", tmp_path / "d.csv", "--weight-column", "label")
    assert code == 1 and "cannot be both the label and the weight" in err


def test_predict_reads_the_weight_column_the_training_job_read(tmp_path, capsys):
    rows = weighted_rows(60)
    (tmp_path / "d.csv").write_bytes(csv_text(rows))
    assert run(capsys, "train", tmp_path / "d.csv", "--weight-column", "cost", "--checkpoint-dir", tmp_path / "ck",
               "--quiet")[0] == 0
    code = cli_module.main(["evaluate", str(tmp_path / "d.csv"), "--checkpoint", str(tmp_path / "ck")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "feature mass" not in err  # the cost column is not read as a feature the model never learned
    assert json.loads(out)["n"] == 60


@pytest.mark.parametrize("kind", ["jsonl nested", "csv"])
def test_kill_9_and_resume_of_a_weighted_run_is_the_uninterrupted_run(kind, tmp_path):
    name, encode, options = FORMATS[kind]
    (tmp_path / name).write_bytes(encode(weighted_rows(400)))
    # batch_size=3: weighted examples are pending at checkpoints
    job = ["train", tmp_path / name, *options, "--param", "batch_size=3", "--batch-records", "30", "--checkpoint-every",
           "40", "--quiet"]
    cli(*job, "--checkpoint-dir", tmp_path / "clean", "--predictions", tmp_path / "clean.jsonl")
    crashed = ["--checkpoint-dir", tmp_path / "crashed", "--predictions", tmp_path / "crashed.jsonl"]
    died = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", *map(str, job + crashed)], capture_output=True,
                          env={**os.environ, "STREAMLEARN_CRASH_AT": "checkpoint-write:4"}, timeout=120)
    assert died.returncode == -9, died.stderr.decode()
    cli(*job, *crashed, "--resume")
    a, b = (CheckpointStore(tmp_path / d).load_latest() for d in ("clean", "crashed"))
    assert_same_state(a["learner"], b["learner"])
    assert (tmp_path / "clean.jsonl").read_bytes() == (tmp_path / "crashed.jsonl").read_bytes()


def test_weighted_metrics_of_integer_weights_are_the_metrics_of_the_records_repeated():
    from streamlearn.service.metrics import ClassificationMetrics

    rng = np.random.default_rng(5)
    y, predicted = rng.choice(list("abc"), 300).tolist(), rng.choice(list("abcd"), 300).tolist()
    predicted[:7] = [None] * 7  # unscored
    p, w = rng.uniform(0.01, 1, 300), rng.integers(0, 4, 300)
    weighted, repeated = ClassificationMetrics(weighted=True), ClassificationMetrics()
    weighted.update(y, predicted, p, w)
    repeated.update(*(np.repeat(np.asarray(v, object), w).tolist() for v in (y, predicted)), np.repeat(p, w))
    a, b = weighted.summary(), repeated.summary()
    for key in ("accuracy", "macro_f1", "log_loss"):
        assert a[key] == pytest.approx(b[key], rel=1e-12), key
    assert a["weight"] == w[7:].sum() and a["n"] == 293 and b["n"] == w[7:].sum()
    ones = ClassificationMetrics(weighted=True)
    ones.update(y, predicted, p, np.ones(300))
    unweighted = ClassificationMetrics()
    unweighted.update(y, predicted, p)
    assert {k: v for k, v in ones.summary().items() if k != "weight"} == unweighted.summary()
    again = ClassificationMetrics.restore(weighted.export())
    assert again.weighted and again.summary() == a


def test_train_and_evaluate_weighted_metrics_count_each_record_by_its_weight(tmp_path, capsys):
    rows = [(x, y, float(k % 4)) for k, (x, y, _) in enumerate(weighted_rows(200))]
    (tmp_path / "d.jsonl").write_bytes(nested_jsonl(rows))
    code, err = run(capsys, "train", tmp_path / "d.jsonl", "--checkpoint-dir", tmp_path / "ck", "--quiet", "--proba",
                    "--weighted-metrics", "--predictions", tmp_path / "p.jsonl", "--batch-records", "25")
    assert code == 0, err
    lines = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    scored = [(line, w) for line, (_, _, w) in zip(lines, rows) if w > 0 and line["prediction"] is not None]
    hits = np.array([line["prediction"] == line["label"] for line, _ in scored])
    weights = np.array([w for _, w in scored])
    prequential = CheckpointStore(tmp_path / "ck").load_latest()["runner"]["prequential"]
    from streamlearn.service.metrics import ClassificationMetrics

    summary = ClassificationMetrics.restore(prequential).summary()
    assert summary["accuracy"] == pytest.approx((weights * hits).sum() / weights.sum(), rel=1e-12)
    assert summary["weight"] == weights.sum()
    # evaluate: integer weights count as the records repeated
    (tmp_path / "r.jsonl").write_bytes(nested_jsonl([(x, y, 1.0) for x, y, w in rows for _ in range(int(w))]))
    results = []
    for path, options in ((tmp_path / "d.jsonl", ["--weighted-metrics"]), (tmp_path / "r.jsonl", [])):
        assert cli_module.main(["evaluate", str(path), "--checkpoint", str(tmp_path / "ck"), *options]) == 0
        results.append(json.loads(capsys.readouterr().out))
    for key in ("accuracy", "macro_f1", "log_loss"):
        assert results[0][key] == pytest.approx(results[1][key], rel=1e-12)
    code, err = run(capsys, "train", tmp_path / "d.jsonl", "--checkpoint-dir", tmp_path / "ck", "--resume")
    assert code == 1 and "resume it with --weighted-metrics" in err
