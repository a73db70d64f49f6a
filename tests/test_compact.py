"""The compact batch format (streamlearn.connectors.compact): encoder and decoder, strict validation with
per-row dead letters, and models bit-identical to the same rows read from a LIBSVM file —
from a msgpack file and from a real Kafka topic."""

from __future__ import annotations

import json

import msgpack
import numpy as np
import pytest

from streamlearn.connectors.compact import decode_batch, encode_batch, encode_messages
from streamlearn.connectors.kafka import decode_messages
from streamlearn.connectors.libsvm import parse_libsvm_bytes
from streamlearn.service.checkpoint import CheckpointStore
from helpers import KAFKA_CLIENTS, assert_same_state, cli, libsvm_lines, train_reference


class Message:
    def __init__(self, offset, value):
        self.topic, self.partition, self.offset, self.value = "t", 0, offset, value


def _libsvm(n=300, seed=0) -> bytes:
    return ("\n".join(libsvm_lines(n, seed=seed)) + "\n").encode()


def _messages(text: bytes, rows_per_message: int) -> list[bytes]:
    chunk = parse_libsvm_bytes(text)
    return list(encode_messages(chunk.X, chunk.label_array, rows_per_message=rows_per_message))


def test_round_trip_gives_the_libsvm_parsers_batch():
    text = _libsvm()
    chunk = parse_libsvm_bytes(text)
    batch = decode_messages([Message(o, v) for o, v in enumerate(_messages(text, 64))], labelled=True)
    assert not batch.dead
    for name in ("indptr", "indices", "data"):
        got, want = getattr(batch.X, name), getattr(chunk.X, name)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name
    assert batch.X.needed == chunk.X.needed and batch.y.tolist() == chunk.labels
    assert batch.locate(70) == {"topic": "t", "partition": 0, "offset": 1, "index": 6}


def test_string_labels_and_unlabelled_rows():
    message = encode_batch([0, 1, 2, 3], [0, 1, 2], [1.0, 2.0, 3.0], ["cat", "dog", None])
    labelled = decode_batch(msgpack.unpackb(message), labelled=True)
    assert labelled.labels == ["cat", "dog"] and [d[:2] for d in labelled.dead] == [(2, "missing-label")]
    unlabelled = decode_batch(msgpack.unpackb(message), labelled=False)
    assert unlabelled.labels == ["cat", "dog", None] and not unlabelled.dead
    no_y = decode_batch(msgpack.unpackb(encode_batch([0, 1], [4], [1.0])), labelled=False)
    assert no_y.labels == [None]


def test_bad_rows_are_dead_letters_alone():
    indptr = [0, 2, 2, 4, 6, 7]  # row 1 empty
    indices = [0, 3, 1, 2, 5, -1 & 0xFFFF, 9]
    data = [1.0, 2.0, np.nan, 1.0, 1.0, 1.0, 4.0]
    message = msgpack.unpackb(encode_batch(indptr, np.array(indices), data, [1, 2, 3, 4, 5]))
    message["indices"] = np.array([0, 3, 1, 2, 5, -4, 9], "<i4").tobytes()  # row 3 has a negative id
    message["y"] = [1, 2, 3, 4, float("inf")]  # row 4's label is not finite
    rows = decode_batch(message, labelled=True)
    assert [(d[0], d[1]) for d in rows.dead] == [(1, "empty-features"), (2, "non-finite"), (3, "malformed"), (4, "bad-label")]
    assert rows.rows.tolist() == [0] and rows.labels.tolist() == [1] and rows.X.toarray().tolist() == [[1.0, 0, 0, 2.0]]
    assert msgpack.unpackb(rows.dead[1][3], strict_map_key=False)["x"] == {1: pytest.approx(np.nan, nan_ok=True), 2: 1.0}


@pytest.mark.parametrize("change, reason", [
    ({"version": 2}, "unsupported-version"),
    ({"indptr": np.array([0, 5], "<i8").tobytes()}, "malformed"),  # past the entries
    ({"indptr": np.array([0, 2, 1, 3], "<i8").tobytes()}, "malformed"),  # decreasing
    ({"data": b"\0" * 7}, "malformed"),  # not whole float64s
    ({"data": np.ones(2).tobytes()}, "malformed"),  # fewer values than ids
    ({"indices": "0 1 2"}, "malformed"),  # not binary
    ({"y": np.array([1, 2], "<i8").tobytes()}, "malformed"),  # labels of two rows for three
    ({"y": "abc"}, "malformed"),
])
def test_a_message_with_a_broken_structure_is_one_dead_letter(change, reason):
    value = msgpack.unpackb(encode_batch([0, 1, 2, 3], [0, 1, 2], [1.0, 2.0, 3.0], [1, 2, 3]))
    value.update(change)
    batch = decode_messages([Message(0, encode_batch([0, 1], [0], [1.0], [1])), Message(1, msgpack.packb(value))], labelled=True)
    assert [(d.position, d.reason) for d in batch.dead] == [({"topic": "t", "partition": 0, "offset": 1}, reason)]
    assert len(batch) == 1


def test_the_encoder_refuses_what_the_format_cannot_hold():
    for args in (([0, 2], [0], [1.0]), ([1, 1], [0], [1.0]), ([0, 1], [-1], [1.0]), ([0, 1], [2**31], [1.0])):
        with pytest.raises(ValueError):
            encode_batch(*args)
    with pytest.raises(ValueError, match="2 labels for 1 rows"):
        encode_batch([0, 1], [0], [1.0], [1, 2])
    with pytest.raises(ValueError):
        list(encode_messages(parse_libsvm_bytes(_libsvm(4)).X, None, rows_per_message=0))


def test_compact_and_dict_messages_mixed_learn_the_same_model():
    text = _libsvm(200, seed=3)
    chunk = parse_libsvm_bytes(text)
    compact = _messages(text, 50)
    dicts = []
    for r in range(100, 150):
        lo, hi = chunk.X.indptr[r], chunk.X.indptr[r + 1]
        dicts.append({"x": dict(zip(chunk.X.indices[lo:hi].tolist(), chunk.X.data[lo:hi].tolist())), "y": chunk.labels[r]})
    values = [compact[0], compact[1], msgpack.packb(dicts), compact[3]]
    batch = decode_messages([Message(o, v) for o, v in enumerate(values)], labelled=True)
    assert isinstance(batch.X, list) and len(batch) == 200 and batch.locate(120) == {"topic": "t", "partition": 0, "offset": 2, "index": 20}
    import streamlearn

    model = streamlearn.MulticlassSVM()
    model.learn_many(batch.X, batch.y)
    assert_same_state(model.export_state(), train_reference(text).export_state())


def test_a_msgpack_file_of_compact_batches_trains_the_libsvm_files_model(tmp_path):
    text = _libsvm(500, seed=5)
    (tmp_path / "rows.svm").write_bytes(text)
    bad = msgpack.unpackb(encode_batch([0, 1], [0], [1.0], [1]))
    bad["data"] = np.array([np.inf]).tobytes()
    messages = _messages(text, 128)
    (tmp_path / "rows.msgpack").write_bytes(b"".join(messages[:2] + [msgpack.packb(bad)] + messages[2:]))
    for name in ("rows.svm", "rows.msgpack"):
        cli("train", tmp_path / name, "--checkpoint-dir", tmp_path / f"ck-{name}", "--dead-letter", tmp_path / f"dead-{name}")
    a = CheckpointStore(tmp_path / "ck-rows.svm").load_latest()
    b = CheckpointStore(tmp_path / "ck-rows.msgpack").load_latest()
    assert_same_state(a["learner"], b["learner"])
    letters = [json.loads(line) for line in (tmp_path / "dead-rows.msgpack").read_text().splitlines()]
    assert [(d["position"]["record"], d["position"]["index"], d["reason"]) for d in letters] == [(3, 0, "non-finite")]


@pytest.mark.kafka
@pytest.mark.parametrize("client", KAFKA_CLIENTS)
def test_compact_messages_through_a_topic_train_the_libsvm_files_model(tmp_path, broker, client):
    from localbroker import create_topic, produce

    text = _libsvm(3000, seed=7)
    (tmp_path / "rows.svm").write_bytes(text)
    create_topic(broker, f"compact-{client}")
    produce(broker, f"compact-{client}", _messages(text, 100))
    cli("train", f"kafka://{broker}/compact-{client}?group=g&client={client}", "--checkpoint-dir", tmp_path / "ck-kafka",
        "--idle-timeout", "2")
    cli("train", tmp_path / "rows.svm", "--checkpoint-dir", tmp_path / "ck-file")
    kafka = CheckpointStore(tmp_path / "ck-kafka").load_latest()
    assert_same_state(kafka["learner"], CheckpointStore(tmp_path / "ck-file").load_latest()["learner"])
    assert kafka["position"]["offsets"] == {"0": 30} and kafka["runner"]["counters"]["learned"] == 3000
