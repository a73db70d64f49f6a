"""Property tests of the record decoders (JSON lines, msgpack files, Kafka messages, CSV, LIBSVM): whatever
arrives, they never raise; every record is either handed on or dead-lettered with its
position, never both and never neither; a record is handed on exactly when it is valid (the
spec restated below, independently of ``streamlearn.connectors.records``); and every record handed on can
be learned and checkpointed (a record the daemon learns but cannot checkpoint would stop it at
every restart). On top of them, the runner: any valid stream is learned exactly as a
``learn_one`` loop learns it, and a record the learner refuses is a dead letter, not a stop."""

from __future__ import annotations

import collections
import json
import math

import msgpack
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import streamlearn
from streamlearn.connectors import FileSource, JsonLinesSink
from streamlearn.kernels.codes import LARGEST_VALUE
from streamlearn.connectors.formats import CsvDecoder, JsonLinesDecoder, LibsvmDecoder, MsgpackDecoder
from streamlearn.connectors.kafka import decode_messages
from streamlearn import InvalidInputError
from streamlearn.service.checkpoint import CheckpointStore
from streamlearn.service.runner import Runner
from helpers import assert_same_state

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
Message = collections.namedtuple("Message", "topic partition offset value")


def is_valid(obj) -> bool:
    """A labelled record: ``{"x": a mapping of string or int (not bool) names to numbers (not bools:
    JSON's true is no number) that are finite as floats, or null (an absent feature, the README's
    rule for missing values), at least one a number, "y": a string (not blank), an int, a bool or
    a finite float}``, values within ±LARGEST_VALUE. A bad name is refused even when its value is null (its record is malformed)."""
    if not isinstance(obj, dict) or "x" not in obj or not isinstance(obj["x"], dict):
        return False
    if any(isinstance(name, bool) or not isinstance(name, (str, int)) for name in obj["x"]):
        return False
    present = [value for value in obj["x"].values() if value is not None]
    if not present:
        return False
    for value in present:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        try:
            if not math.isfinite(float(value)) or abs(float(value)) > LARGEST_VALUE:  # (its square leaves the floats)
                return False
        except OverflowError:
            return False
    y = obj.get("y")
    if isinstance(y, str):
        return bool(y.strip())
    return isinstance(y, int) or (isinstance(y, float) and math.isfinite(y))


def texts(json: bool):
    """Short strings; JSON ones may hold lone surrogates ("\\ud800" decodes to one), msgpack's cannot."""
    odd = st.text(alphabet=st.sampled_from(["a", "1", " ", "é", "\ud800", "\udfff"]), max_size=3)
    return st.text(max_size=3) | odd if json else st.text(max_size=3)


def scalars(big_ints: bool):
    ints = st.integers() if big_ints else st.integers(-(2**63), 2**64 - 1)
    return st.none() | st.booleans() | ints | st.floats() | texts(json=big_ints)


def records(big_ints: bool, names):
    """Mostly near-valid records (so that both sides of every check are hit), and any value."""
    scalar = scalars(big_ints)
    numbers = st.floats() | (st.integers() if big_ints else st.integers(-(2**63), 2**64 - 1)) | st.booleans()
    features = st.dictionaries(names, numbers | scalar | st.lists(scalar, max_size=2), max_size=4)
    big = st.integers(-(10**30), 10**30) if big_ints else st.integers(-(2**63), 2**64 - 1)
    label = texts(json=big_ints) | big | st.floats() | scalar | st.lists(scalar, max_size=1)
    return st.one_of(st.fixed_dictionaries({"x": features}, optional={"y": label}), scalar, st.lists(scalar, max_size=2))


JSON_RECORDS = records(big_ints=True, names=texts(json=True))
MSGPACK_RECORDS = records(big_ints=False, names=st.text(max_size=3) | st.integers(-(2**63), 2**64 - 1) | st.booleans() | st.none())
GARBAGE = st.binary(max_size=12).map(lambda b: b"\xc1" + b)  # 0xc1 is never msgpack and never starts JSON


def learn_and_checkpoint(batch, tmp_path) -> None:
    """What the runner does with a decoded batch: learn it, checkpoint, restore."""
    if not len(batch):
        return
    model = streamlearn.MulticlassSVM()
    model.learn_many(batch.X, batch.y)
    store = CheckpointStore(tmp_path)
    store.save({"learner": model.export_state()})
    restored = streamlearn.learner_from_state(store.load_latest()["learner"])
    assert_same_state(model.export_state(), restored.export_state())


@SETTINGS
@given(items=st.lists(JSON_RECORDS.map(lambda r: ("record", r)) | GARBAGE.filter(lambda b: b"\n" not in b and b"\r" not in b)
                      .map(lambda b: ("garbage", b)), max_size=12))
def test_json_lines_decoder_accounts_for_every_line(items, tmp_path_factory):
    lines = [json.dumps(v).encode() if kind == "record" else v for kind, v in items]
    batch = JsonLinesDecoder(labelled=True).decode(b"".join(line + b"\n" for line in lines), 0, 0, "f.jsonl")
    valid_lines = [n for n, (kind, v) in enumerate(items, 1) if kind == "record" and is_valid(json.loads(json.dumps(v)))]
    bad_lines = [n for n, line in enumerate(lines, 1) if line.strip() and n not in valid_lines]
    assert [batch.locate(i)["line"] for i in range(len(batch))] == valid_lines
    assert [d.position["line"] for d in batch.dead] == bad_lines
    learn_and_checkpoint(batch, tmp_path_factory.mktemp("ck"))


@SETTINGS
@given(items=st.lists(MSGPACK_RECORDS, max_size=12), tail=st.none() | GARBAGE)
@example(items=[{"x": {"": 0.0, False: None}, "y": "0"}], tail=None)  # a bad name with a null value: malformed
@example(items=[{"x": {"": 1.0000000000000002e+150}, "y": "0"}], tail=None)  # past ±1e150: bad (found by the fuzzer)
def test_msgpack_file_decoder_accounts_for_every_record(items, tail, tmp_path_factory):
    data = b"".join(msgpack.packb(r, use_bin_type=True) for r in items) + (tail or b"")
    batch, consumed, n = MsgpackDecoder(labelled=True).decode(data, True, 0, 0, "f.msgpack", 10**6)
    assert consumed == len(data) and n == len(items)
    valid = [i + 1 for i, r in enumerate(items) if is_valid(r)]
    assert [batch.locate(i)["record"] for i in range(len(batch))] == valid
    expected_dead = [i + 1 for i in range(len(items)) if i + 1 not in valid] + ([len(items) + 1] if tail else [])
    assert [d.position["record"] for d in batch.dead] == expected_dead
    assert not tail or batch.dead[-1].reason == "undecodable"
    learn_and_checkpoint(batch, tmp_path_factory.mktemp("ck"))


@SETTINGS
@given(messages=st.lists(
    st.tuples(st.sampled_from(["msgpack", "json"]), st.booleans(), st.lists(JSON_RECORDS, min_size=1, max_size=4)) | GARBAGE,
    max_size=8))
def test_kafka_messages_account_for_every_record(messages, tmp_path_factory):
    values, expected_good, expected_dead = [], [], []
    for message in messages:
        if isinstance(message, bytes):
            values.append(message)
            expected_dead.append((len(values) - 1, None))
            continue
        encoding, as_list, recs = message
        if encoding == "msgpack":
            try:
                value = msgpack.packb(recs if as_list else recs[0], use_bin_type=True)
            except (OverflowError, UnicodeEncodeError):  # an int beyond 64 bits, a lone surrogate: no such msgpack message
                continue
        else:
            value = json.dumps(recs if as_list else recs[0]).encode()
            if value[:1] not in (b"{", b"["):  # a JSON scalar: its first byte says msgpack ("auto")
                values.append(value)
                try:
                    msgpack.unpackb(value)  # "5" is msgpack too (the int 53): a record, not a record mapping
                    expected_dead.append((len(values) - 1, 0))
                except ValueError:  # ExtraData, FormatError...: undecodable, so no record index
                    expected_dead.append((len(values) - 1, None))
                continue
        decoded = msgpack.unpackb(value, raw=False, strict_map_key=False) if encoding == "msgpack" else json.loads(value)
        decoded = decoded if isinstance(decoded, list) else [decoded]
        values.append(value)
        for index, record in enumerate(decoded):
            (expected_good if is_valid(record) else expected_dead).append((len(values) - 1, index))
    batch = decode_messages([Message("t", 0, o, v) for o, v in enumerate(values)], labelled=True)
    assert [(batch.locate(i)["offset"], batch.locate(i)["index"]) for i in range(len(batch))] == expected_good
    assert [(d.position["offset"], d.position.get("index")) for d in batch.dead] == expected_dead
    learn_and_checkpoint(batch, tmp_path_factory.mktemp("ck"))


LINE = st.binary(max_size=24) | st.text(alphabet=st.sampled_from(list("0123456789+-.:eE,# \t\"abxnN²")), max_size=24).map(str.encode)
LINES = st.lists(LINE.filter(lambda b: b"\n" not in b and b"\r" not in b), max_size=10)


CELL = st.text(alphabet=st.sampled_from(list("0123456789+-.eE \"abnN²٣")), max_size=6)
CSV_LINES = st.lists(st.lists(CELL, min_size=3, max_size=3).map(lambda cells: ",".join(cells).encode()) | LINE, max_size=10).map(
    lambda lines: [line for line in lines if b"\n" not in line and b"\r" not in line])


@SETTINGS
@given(lines=CSV_LINES)
def test_csv_decoder_accounts_for_every_line(lines, tmp_path_factory):
    """A header, then any lines: each non-blank one is a record or a dead letter (no oracle of
    validity here: CSV cells are text, so the accounting and the learning are the property)."""
    batch = CsvDecoder().decode(b"a,b,label\n" + b"".join(line + b"\n" for line in lines), 0, 0, "f.csv")
    handed_on = [batch.locate(i)["line"] for i in range(len(batch))]
    dead = [d.position["line"] for d in batch.dead]
    assert sorted(handed_on + dead) == [n for n, line in enumerate(lines, 2) if line.strip()]
    learn_and_checkpoint(batch, tmp_path_factory.mktemp("ck"))


@SETTINGS
@given(lines=LINES)
def test_libsvm_decoder_accounts_for_every_line(lines, tmp_path_factory):
    """Any lines: each one that is neither blank nor a ``#`` comment is a record or a dead letter."""
    batch = LibsvmDecoder().decode(b"".join(line + b"\n" for line in lines), 0, 0, "f.svm")
    handed_on = [batch.locate(i)["line"] for i in range(len(batch))]
    dead = [d.position["line"] for d in batch.dead]
    assert sorted(handed_on + dead) == [n for n, line in enumerate(lines, 1) if line.strip() and not line.strip().startswith(b"#")]
    learn_and_checkpoint(batch, tmp_path_factory.mktemp("ck"))


LABELS = st.sampled_from([0, 1, 2, 10**20, -(10**25), "a", "\ud800", 2.5, True])
VALID = st.fixed_dictionaries({"x": st.dictionaries(st.sampled_from(["a", "b", "c", "\udfff", "7"]),
                                                    st.floats(-1e3, 1e3) | st.integers(-5, 5), min_size=1, max_size=3),
                               "y": LABELS})


MULTICLASS = sorted(name for name, cls in streamlearn.LEARNERS.items() if cls()._multiclass)


@pytest.mark.parametrize("learner", MULTICLASS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(recs=st.lists(VALID, min_size=1, max_size=40), batch_records=st.integers(1, 7))
def test_the_runner_learns_any_valid_stream_exactly_and_checkpoints_it(learner, recs, batch_records, tmp_path_factory):
    """Valid records whose labels change type from batch to batch (small ints, ints beyond 64
    bits, strings with lone surrogates, floats, bools): learned exactly as a learn_one loop,
    scored, checkpointed and restored. A batch of small int labels after a class 10**20 used
    to stop the runner (OverflowError building an int64 array of the classes)."""

    tmp = tmp_path_factory.mktemp("run")
    path = tmp / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    runner = Runner(streamlearn.LEARNERS[learner](), FileSource([str(path)], batch_records=batch_records),
                    checkpoint_dir=str(tmp / "ck"), checkpoint_every=5, progress=False)
    assert runner.run() == 0 and runner.counters["learned"] == len(recs) and runner.counters["dead_letters"] == 0
    reference = streamlearn.LEARNERS[learner]()
    for r in recs:
        reference.learn_one(r["x"], r["y"])
    reference.flush()  # the end of the file: the runner learns the last, smaller mini-batch
    saved = CheckpointStore(tmp / "ck").load_latest()["learner"]
    assert_same_state(saved, reference.export_state())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(recs=st.lists(st.fixed_dictionaries({"x": VALID.map(lambda r: r["x"]), "y": st.sampled_from([True, False, 0, 1, 2, "a"])}),
                     min_size=1, max_size=30), batch_records=st.integers(1, 7))
def test_the_runner_dead_letters_what_the_learner_refuses_and_learns_the_rest_exactly(recs, batch_records, tmp_path_factory):
    """A binary learner on a stream with stray labels: each refused record is a dead letter at
    its line, and the model is the one a learn_one loop over the accepted records gives."""

    tmp = tmp_path_factory.mktemp("run")
    path = tmp / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    dead = tmp / "dead.jsonl"
    runner = Runner(streamlearn.PrimalGradientSolver(), FileSource([str(path)], batch_records=batch_records),
                    checkpoint_dir=str(tmp / "ck"), checkpoint_every=5, dead_letter_sink=JsonLinesSink(str(dead)), progress=False)
    assert runner.run() == 0
    runner.dead_letters.close()
    reference, refused = streamlearn.PrimalGradientSolver(), []
    for line, r in enumerate(recs, 1):
        try:
            reference.learn_one(r["x"], r["y"])
        except InvalidInputError:
            refused.append(line)
    letters = [json.loads(l) for l in dead.read_text().splitlines()] if dead.exists() else []
    assert [d["position"]["line"] for d in letters] == refused and runner.counters["learned"] == len(recs) - len(refused)
    assert_same_state(CheckpointStore(tmp / "ck").load_latest()["learner"], reference.export_state())


PLAIN_RECORDS = st.fixed_dictionaries({
    "x": st.dictionaries(st.text(max_size=3) | st.integers(-(2**63), 2**63 - 1),
                         st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=5),
    "y": st.sampled_from(["cat", "dog", "émeu"]) | st.integers(-3, 3)})


@SETTINGS
@given(messages=st.lists(st.lists(PLAIN_RECORDS | MSGPACK_RECORDS, min_size=1, max_size=5).map(lambda r: ("list", r))
                         | PLAIN_RECORDS.map(lambda r: ("one", r)) | GARBAGE.map(lambda b: ("raw", b)), max_size=8),
       float32=st.booleans())
def test_the_compiled_dict_walker_decodes_as_the_general_decoder(messages, float32):
    """streamlearn.connectors.walker against the general msgpack decoder on the same messages (plain
    records, near-valid ones, garbage; float32 and float64 values): the same records handed on
    at the same positions, the same dead letters, and the same model bit for bit."""
    from streamlearn.connectors.walker import DictRecordWalker

    values = []
    for kind, item in messages:
        if kind == "raw":
            values.append(item)
            continue
        try:
            values.append(msgpack.packb(item if kind == "list" else item, use_bin_type=True, use_single_float=float32))
        except (OverflowError, UnicodeEncodeError, ValueError):
            continue
    found = [Message("t", 0, o, v) for o, v in enumerate(values)]
    general = decode_messages(found, labelled=True, with_hashes=False)
    walker = DictRecordWalker(capacity=4)  # a tiny table: the walk runs out of room and grows
    walked = decode_messages(found, labelled=True, with_hashes=False, walker=walker)
    assert [walked.locate(i) for i in range(len(walked))] == [general.locate(i) for i in range(len(general))]
    assert [(d.position, d.reason, d.record) for d in walked.dead] == [(d.position, d.reason, d.record) for d in general.dead]
    if len(general):
        models = []
        for batch in (general, walked):
            model = streamlearn.MulticlassSVM()
            model.learn_many(batch.X, batch.y)
            models.append(model)
        assert_same_state(models[0].export_state(), models[1].export_state())
        assert list(models[0].predict_many(general.X)) == list(models[1].predict_many(walked.X))


def test_the_walker_takes_plain_record_messages_and_leaves_the_rest():
    """So that the property above compares the compiled road, not the general one twice."""
    from streamlearn.connectors.walker import DictRecordWalker

    walker = DictRecordWalker()
    plain = msgpack.packb([{"x": {"a": 1.5, 7: 2, "b": -3}, "y": "cat"}, {"y": 4, "x": {"a": 0.0}}])
    X, y = walker.walk(plain)
    assert X.row_dicts() == [{"a": 1.5, 7: 2.0, "b": -3.0}, {"a": 0.0}] and y == ["cat", 4]
    for odd in ({"x": {"a": True}, "y": 1}, {"x": {"a": 1.0}}, {"x": {}, "y": 1}, {"x": {"a": 1.0}, "y": " "},
                {"x": {"a": 1.0}, "y": 1.5}, {"x": {"a": 1.0}, "y": 1, "z": 0}, [{"x": {"a": 1e308 * 10}, "y": 1}]):
        assert walker.walk(msgpack.packb(odd)) is None, odd
    assert walker.walk(plain + b"\x00") is None and walker.walk(plain[:-1]) is None
    assert walker.walk(b'{"x": {"a": 1}, "y": 1}') is None  # JSON


def test_walked_messages_learn_the_model_of_the_same_records_as_dicts():
    from streamlearn.connectors.walker import DictRecordWalker
    from helpers import records, train_reference_records
    from streamlearn.batches import NamedCsrBatch

    recs = records(2000, seed=3)
    found = [Message("t", 0, o, msgpack.packb(recs[i : i + 50])) for o, i in enumerate(range(0, 2000, 50))]
    batch = decode_messages(found, labelled=True, with_hashes=False, walker=DictRecordWalker())
    assert isinstance(batch.X, NamedCsrBatch) and not batch.dead
    model = streamlearn.MulticlassSVM()
    model.learn_many(batch.X[:1000], batch.y[:1000])
    model.learn_many(batch.X[1000:], batch.y[1000:])
    assert_same_state(model.export_state(), train_reference_records(recs).export_state())


def test_the_walker_fits_the_densest_message_in_its_buffers():
    """Its buffers are sized from the bytes (a record spans at least 9 of them, an entry 2): the
    densest plain message there is, one-byte names, values and labels, walks whole and right."""
    from streamlearn.connectors.walker import DictRecordWalker

    records = [{"x": {"": 0, 1: 2}, "y": 0}] * 500 + [{"x": {"": 0}, "y": 0}] * 1000
    value = msgpack.packb(records)
    assert len(value) == 3 + 11 * 500 + 9 * 1000
    X, y = DictRecordWalker().walk(value)
    assert X.shape[0] == 1500 and X.nnz == 2000 and X.row_dicts() == [r["x"] for r in records] and (y == 0).all()
