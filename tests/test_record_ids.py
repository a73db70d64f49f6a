"""Record ids (issue 78's first piece): a nested record's ``"id"``, ``--id-column`` for CSV and flat records, a
Kafka record's ``"id"`` beside its message key — each goes into the record's position, so its prediction line
(``train --predictions``, ``predict``) and its dead letter carry it; an id is never a feature."""

from __future__ import annotations

import json
from collections import namedtuple

import msgpack
import pytest

from streamlearn.connectors.kafka_messages import decode_messages
from streamlearn.service import cli as cli_module
from streamlearn.service.checkpoint import CheckpointStore, restore_learner

ROWS = [({"a": 1.0, "b": 0.5}, "p", "order-1"), ({"a": -1.0, "b": 0.2}, "q", 17), ({"a": 0.9, "b": -0.1}, "p", None)]


def nested_jsonl(rows):
    return "".join(json.dumps({"x": x, "y": y, **({} if i is None else {"id": i})}) + "\n" for x, y, i in rows)


def flat_jsonl(rows):
    return "".join(json.dumps({**x, "label": y, **({} if i is None else {"ref": i})}) + "\n" for x, y, i in rows)


def csv_text(rows):
    return "a,b,ref,label\n" + "".join(f"{x['a']},{x['b']},{'' if i is None else i},{y}\n" for x, y, i in rows)


FORMATS = {"jsonl nested": ("d.jsonl", nested_jsonl, []), "jsonl flat": ("d.jsonl", flat_jsonl, ["--id-column", "ref"]),
           "csv": ("d.csv", csv_text, ["--id-column", "ref"]), "csv by index": ("d.csv", csv_text, ["--id-column", "2"])}


def run(capsys, *args):
    code = cli_module.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("kind", list(FORMATS))
def test_a_records_id_is_in_its_prediction_lines_and_not_a_feature(kind, tmp_path, capsys):
    name, encode, options = FORMATS[kind]
    (tmp_path / name).write_text(encode(ROWS))
    code, _, err = run(capsys, "train", tmp_path / name, *options, "--checkpoint-dir", tmp_path / "ck", "--quiet",
                       "--predictions", tmp_path / "p.jsonl")
    assert code == 0, err
    expected = ["order-1", "17" if kind.startswith("csv") else 17, None]  # (a CSV cell is text)
    lines = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [line["position"].get("id") for line in lines] == expected
    model = restore_learner(CheckpointStore(tmp_path / "ck").load_latest())
    assert sorted(k for k in model.feature_keys if not str(k).startswith("\x00")) == ["a", "b"]
    code, out, err = run(capsys, "predict", tmp_path / name, "--checkpoint", tmp_path / "ck")  # the job's id column
    assert code == 0, err
    assert [json.loads(line)["position"].get("id") for line in out.splitlines()] == expected


def test_a_bad_records_dead_letter_carries_its_id_and_a_bad_id_is_a_dead_letter(tmp_path, capsys):
    lines = nested_jsonl(ROWS).splitlines()
    lines.append(json.dumps({"x": {"a": "high"}, "y": "p", "id": "order-9"}))
    lines.append(json.dumps({"x": {"a": 1.0}, "y": "p", "id": [1, 2]}))
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "d.csv").write_text(csv_text(ROWS) + "x,1,order-8,p\n")
    for name, options in (("d.jsonl", []), ("d.csv", ["--id-column", "ref"])):
        code, _, err = run(capsys, "train", tmp_path / name, *options, "--checkpoint-dir", tmp_path / f"ck-{name}",
                           "--quiet")
        assert code == 0, err
        dead = [json.loads(line) for line in (tmp_path / f"ck-{name}" / "dead_letters.jsonl").read_text().splitlines()]
        if name == "d.jsonl":
            assert [(d["position"].get("id"), d["reason"]) for d in dead] == [("order-9", "non-numeric"), (None, "bad-id")]
        else:
            assert [(d["position"].get("id"), d["reason"]) for d in dead] == [("order-8", "non-numeric")]


def test_a_kafka_records_id_is_in_its_position_beside_the_message_key():
    Message = namedtuple("Message", "topic partition offset value key")
    value = msgpack.packb([{"x": {"a": 1.0}, "y": "p", "id": "r-1"}, {"x": {"a": -1.0}, "y": "q"}])
    batch = decode_messages([Message("t", 0, 5, value, b"k")], labelled=True, with_hashes=False)
    assert [batch.locate(i) for i in range(2)] == [
        {"topic": "t", "partition": 0, "offset": 5, "key": "k", "index": 0, "id": "r-1"},
        {"topic": "t", "partition": 0, "offset": 5, "key": "k", "index": 1}]
    assert batch.X == [{"a": 1.0}, {"a": -1.0}]


def test_an_id_column_that_is_missing_or_another_role_is_refused_at_once(tmp_path, capsys):
    (tmp_path / "d.csv").write_text(csv_text(ROWS))
    code, _, err = run(capsys, "train", tmp_path / "d.csv", "--id-column", "nope")
    assert code == 1 and "id column 'nope' is not in the CSV header" in err
    code, _, err = run(capsys, "train", tmp_path / "d.csv", "--id-column", "label")
    assert code == 1 and "cannot be both the label and the id" in err
    code, _, err = run(capsys, "train", tmp_path / "d.csv", "--id-column", "ref", "--weight-column", "ref")
    assert code == 1 and "cannot be both the weight and the id" in err
