"""``streamlearn train SOURCE --predictions SINK``: one line per valid record, in stream order,
with the prediction made before the record was learned; records without a label are predicted
and not learned. File, stdout (a shell filter) and Kafka sinks."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pytest

from streamlearn.connectors.kafka import encode_value
from streamlearn.service.checkpoint import CheckpointStore
from helpers import PYTHON, assert_same_state, cli, libsvm_lines, records, train_reference, train_reference_records
from conftest import PATIENCE

pytestmark = pytest.mark.slow  # whole processes or every river check: not in the quick subset


def _stream(n: int = 600, seed: int = 3):
    """LIBSVM lines, every 7th without its label, one malformed line; and the labelled ones alone."""
    lines = []
    for i, line in enumerate(libsvm_lines(n, seed=seed)):
        lines.append(line.split(" ", 1)[1] if i % 7 == 3 else line)
    lines.insert(100, "not a line")
    labelled = [l for i, l in enumerate(lines) if l != "not a line" and ":" not in l.split(" ", 1)[0]]
    return "\n".join(lines) + "\n", "\n".join(labelled) + "\n"


def test_predictions_file_has_each_record_in_order_and_unlabelled_records_are_not_learned(tmp_path):
    text, labelled = _stream()
    path = tmp_path / "s.svm"
    path.write_text(text)
    summary = json.loads(cli("train", path, "--predictions", tmp_path / "p.jsonl", "--proba", "--checkpoint-dir",
                             tmp_path / "ck", "--batch-records", "64").stdout)
    lines = [json.loads(l) for l in (tmp_path / "p.jsonl").read_text().splitlines()]
    numbers = [n for n in range(1, 602) if n != 101]  # every valid line, in order; the malformed one is a dead letter
    assert [l["position"]["line"] for l in lines] == numbers
    unlabelled = [l for l in lines if l["label"] is None]
    assert summary["unlabelled"] == len(unlabelled) == 86 and summary["learned"] == 600 - 86 and summary["dead_letters"] == 1
    # unlabelled records are not learned: the model is the labelled lines' alone
    reference = train_reference(labelled.encode(), "MulticlassSVM")
    assert_same_state(CheckpointStore(tmp_path / "ck").load_latest()["learner"], reference.export_state())
    # the labelled records' predictions are the prequential ones the metrics count
    scored = [l for l in lines if l["label"] is not None and l["prediction"] is not None]
    assert len(scored) == summary["prequential"]["n"] and summary["prequential"]["unscored"] > 0  # the first record's
    assert np.mean([l["prediction"] == l["label"] for l in scored]) == pytest.approx(summary["prequential"]["accuracy"])
    for l in lines:
        if l["prediction"] is None:  # no class known yet at the record's turn
            assert l["proba"] == {}
        else:
            assert sum(l["proba"].values()) == pytest.approx(1.0)
            assert l["proba"][str(l["prediction"])] == max(l["proba"].values())  # (uniform before a row was scored: a tie)


def test_train_is_a_shell_filter_with_predictions_to_stdout(tmp_path):
    text, _ = _stream(300, seed=4)
    result = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "train", "-", "--predictions", "-", "--quiet"],
                            input=text.encode(), capture_output=True, check=True)
    lines = [json.loads(l) for l in result.stdout.decode().splitlines()]
    assert len(lines) == 300 and all(l["position"]["source"] == "stdin" for l in lines)
    assert json.loads(result.stderr.decode().splitlines()[0])["unlabelled"] == 43  # the summary: on stderr


def test_without_predictions_an_unlabelled_record_is_a_dead_letter(tmp_path):
    text, _ = _stream(70, seed=5)
    path = tmp_path / "s.svm"
    path.write_text(text)
    summary = json.loads(cli("train", path, "--quiet").stdout)
    assert summary["dead_reasons"] == {"missing-label": 10, "malformed": 1} and summary["unlabelled"] == 0


def test_proba_without_predictions_is_refused_with_one_line(tmp_path):
    (tmp_path / "s.svm").write_text("1 1:1\n")
    result = cli("train", tmp_path / "s.svm", "--proba", check=False)
    assert result.returncode == 1 and b"--proba adds probabilities to --predictions" in result.stderr


def _read(bootstrap, topic, timeout_ms=5000) -> list:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=timeout_ms)
    try:
        return [json.loads(m.value) for m in consumer]
    finally:
        consumer.close()


@pytest.mark.parametrize("client", ["kafka-python"])  # the sink is the same producer whatever reads the input
def test_predictions_to_a_topic_are_at_least_once_with_the_input_position_as_their_key(tmp_path, broker, client):
    """A Kafka predictions sink cannot be cut back: after a kill -9 and ``--resume`` the records
    learned since the last checkpoint are predicted again. Every record has a line, and a
    repeated line is the same line (same position, same prediction), so a consumer that keeps
    one line per position (topic, partition, offset, index) has each prediction exactly once."""
    from localbroker import create_topic

    from kafka import KafkaProducer

    recs = records(4000, seed=8)
    for i in range(0, len(recs), 9):
        del recs[i]["y"]
    source, out = f"in-{client}", f"predictions-{client}"
    create_topic(broker, source)
    create_topic(broker, out)
    producer = KafkaProducer(bootstrap_servers=broker)
    for n, i in enumerate(range(0, len(recs), 20)):
        producer.send(source, encode_value(recs[i : i + 20]), key=f"k{n}".encode(), partition=0)
    producer.flush()
    producer.close()
    args = [PYTHON, "-m", "streamlearn.service.cli", "train", f"kafka://{broker}/{source}?group=p&client={client}",
            "--predictions", f"kafka://{broker}/{out}", "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "500",
            "--batch-records", "100", "--idle-timeout", "3", "--quiet", "--resume"]
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + PATIENCE
    while (payload := CheckpointStore(tmp_path / "ck").load_latest() if (tmp_path / "ck").exists() else None) is None or \
            payload["runner"]["counters"]["seen"] < 1000:
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.01)
    first.kill()
    first.communicate()
    finished = subprocess.run(args, capture_output=True, timeout=PATIENCE)
    assert finished.returncode == 0, finished.stderr.decode()
    lines = _read(broker, out)
    by_position = {}
    for line in lines:
        key = json.dumps(line["position"], sort_keys=True)
        assert by_position.setdefault(key, line) == line  # a repeat is the same line
    assert len(by_position) == len(recs)
    assert {(l["position"]["offset"], l["position"]["index"]) for l in by_position.values()} == \
        {(i // 20, i % 20) for i in range(len(recs))}
    assert all(l["position"]["key"] == f"k{l['position']['offset']}" for l in by_position.values())
    assert sum(l["label"] is None for l in by_position.values()) == len(range(0, len(recs), 9))
    payload = CheckpointStore(tmp_path / "ck").load_latest()
    assert_same_state(payload["learner"], train_reference_records([r for r in recs if "y" in r]).export_state())


def test_a_batch_the_learner_refuses_in_part_is_predicted_record_by_record_with_probabilities(tmp_path):
    """A label a binary learner cannot take sends its batch through the one-by-one road: the
    refused record is a dead letter, every other one has its prediction line and probabilities."""
    path = tmp_path / "binary.svm"
    path.write_text("1 1:1\n0 2:1\n1 1:0.5\n2 1:1\n0 2:2\n")
    cli("train", path, "--learner", "PrimalGradientSolver", "--predictions", tmp_path / "p.jsonl", "--proba",
        "--batch-records", "5", "--checkpoint-dir", tmp_path / "model", "--quiet", check=False)
    lines = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [line["position"]["line"] for line in lines] == [1, 2, 3, 5]
    assert all(sum(line["proba"].values()) == pytest.approx(1.0) for line in lines)
    letters = (tmp_path / "model" / "dead_letters.jsonl").read_text().splitlines()
    assert len(letters) == 1 and json.loads(letters[0])["reason"] == "refused-bad-label"
