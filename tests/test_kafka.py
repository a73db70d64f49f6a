"""Kafka source and sinks against a real broker: bad messages go to a dead-letter topic,
JSON and msgpack values, one record or a list per message, predictions to a topic."""

from __future__ import annotations

import json
import time

import msgpack
import pytest
from kafka import KafkaConsumer

from streamlearn.connectors.kafka import KafkaSource, encode_value, parse_kafka_uri
from streamlearn.service.checkpoint import CheckpointStore
from helpers import KAFKA_CLIENTS, assert_same_state, cli, records, train_reference_records


def read_topic(bootstrap, topic, expected, timeout_ms=5000) -> list:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=timeout_ms, group_id=f"reader-{topic}", session_timeout_ms=6000,
                             heartbeat_interval_ms=1000)
    values = []
    for message in consumer:
        values.append(json.loads(message.value))
        if len(values) == expected:
            break
    consumer.close()
    return values


@pytest.mark.parametrize("client", KAFKA_CLIENTS)
def test_bad_messages_go_to_a_dead_letter_topic_and_the_model_sees_only_good_records(tmp_path, broker, client):
    from localbroker import create_topic, produce

    good = records(600, seed=9)
    bad = {
        3: (b"\xc1\xc1", "undecodable"),
        10: (encode_value({"x": {"a": float("nan")}, "y": "c0"}), "non-finite"),
        11: (b'{"x": {"a": 1.0}}', "missing-label"),
        20: (b'{"x": {"a": "one"}, "y": "c1"}', "non-numeric"),
        21: (b"{not json", "undecodable"),
    }
    messages, g = [], 0
    for offset in range(len(good) // 20 + len(bad)):
        if offset in bad:
            messages.append(bad[offset][0])
        elif offset % 2:  # JSON lists and msgpack lists of records
            messages.append(json.dumps(good[g : g + 20]).encode())
            g += 20
        else:
            messages.append(encode_value(good[g : g + 20]))
            g += 20
    assert g == len(good)
    mixed = f"mixed-{client}"
    create_topic(broker, mixed)
    create_topic(broker, f"{mixed}-dead")
    produce(broker, mixed, messages)
    result = cli("train", f"kafka://{broker}/{mixed}?group=g1&client={client}", "--checkpoint-dir", tmp_path / "ck",
                 "--idle-timeout", "2", "--dead-letter", f"kafka://{broker}/{mixed}-dead", "--batch-records", "50")
    assert json.loads(result.stdout)["dead_letters"] == len(bad)
    letters = read_topic(broker, f"{mixed}-dead", len(bad))
    assert [(d["position"]["offset"], d["reason"]) for d in letters] == [(o, r) for o, (_, r) in sorted(bad.items())]
    payload = CheckpointStore(tmp_path / "ck").load_latest()
    assert_same_state(payload["learner"], train_reference_records(good).export_state())
    assert payload["position"]["offsets"] == {"0": len(messages)}


@pytest.mark.parametrize("client", KAFKA_CLIENTS)
def test_predictions_to_a_topic_and_offsets_committed(tmp_path, broker, client):
    from localbroker import create_topic, produce

    recs = records(300, seed=3)
    train, inputs, outputs = (f"p-{name}-{client}" for name in ("train", "in", "out"))
    for topic in (train, inputs, outputs):
        create_topic(broker, topic)
    produce(broker, train, [msgpack.packb(r) for r in recs])
    produce(broker, inputs, [msgpack.packb({"x": r["x"]}) for r in recs[:50]])
    cli("train", f"kafka://{broker}/{train}?group=trainer&client={client}", "--checkpoint-dir", tmp_path / "ck", "--idle-timeout", "2")
    source = KafkaSource(broker, train, "trainer", client=client)
    assert source.committed() == {0: 300}
    source.close()
    cli("predict", f"kafka://{broker}/{inputs}?group=predictor&client={client}", "--checkpoint", tmp_path / "ck",
        "--output", f"kafka://{broker}/{outputs}", "--idle-timeout", "2")
    answers = read_topic(broker, outputs, 50)
    model = train_reference_records(recs)
    assert [a["prediction"] for a in answers] == [model.predict_one(r["x"]) for r in recs[:50]]
    assert [a["position"]["offset"] for a in answers] == list(range(50))
    # evaluate reads a topic up to where it ends now, without waiting out the idle timeout
    start = time.monotonic()
    evaluated = json.loads(cli("evaluate", f"kafka://{broker}/{train}?group=evaluator&client={client}", "--checkpoint", tmp_path / "ck",
                               "--idle-timeout", "120").stdout)
    assert evaluated["n"] == 300 and time.monotonic() - start < 60


@pytest.mark.parametrize("client", KAFKA_CLIENTS)
def test_a_topic_read_to_its_end_yields_every_record_however_the_producer_batched_them(broker, client):
    """Tansu answers ListOffsets with the start of a partition's last record batch plus one
    (here far short of 10,000): the end is taken from fetch answers instead."""
    from localbroker import create_topic, produce

    topic = f"to-the-end-{client}"
    create_topic(broker, topic, partitions=2)
    produce(broker, topic, [msgpack.packb(r) for r in records(20_000, seed=5)], partitions=2)
    source = KafkaSource(broker, topic, "reader", client=client, until_end=True, batch_records=100)
    try:
        learned = sum(len(batch) for batch in source)
    finally:
        source.close()
    assert learned == 20_000 and source.offsets == {0: 10_000, 1: 10_000}


def test_kafka_uri():
    assert parse_kafka_uri("kafka://h:1,h2:2/topic?group=g") == {"bootstrap": "h:1,h2:2", "topic": "topic", "group": "g",
                                                              "client": "kafka-python", "options": {"group": "g"}}
    with pytest.raises(ValueError, match="not a Kafka URI"):
        parse_kafka_uri("kafka:///nothing")
    with pytest.raises(ValueError, match="unknown Kafka URI option"):
        parse_kafka_uri("kafka://h:1/t?grup=g")
    with pytest.raises(ValueError, match="client must be one of kafka-python, confluent"):
        parse_kafka_uri("kafka://h:1/t?client=rdkafka")
    from streamlearn.connectors import open_sink

    with pytest.raises(ValueError, match="a Kafka sink takes no options"):
        open_sink("kafka://h:1/dead?client=confluent")


@pytest.mark.parametrize("client, options", [("kafka-python", {"bootstrap_timeout_ms": 300}), ("confluent", {})])
def test_an_unreachable_broker_is_one_clear_error(client, options, monkeypatch):
    """It used to end in a kafka-python traceback (nothing listens on port 1)."""
    from streamlearn.connectors.kafka_confluent import ConfluentClient

    monkeypatch.setattr(ConfluentClient, "METADATA_TIMEOUT_S", 1.0)
    source = KafkaSource("127.0.0.1:1", "t", client=client, **options)
    with pytest.raises(ValueError, match="cannot reach the Kafka broker at 127.0.0.1:1"):
        next(iter(source))


@pytest.mark.parametrize("client", KAFKA_CLIENTS)
def test_the_broker_timeout_bounds_the_first_contact_too(client):
    """Issue 74.8: ``--broker-timeout 5`` took 31 s to fail on a broker never reached (kafka-python's
    own bootstrap wait)."""
    source = KafkaSource("127.0.0.1:1", "t", client=client, broker_timeout=1.0)
    started = time.monotonic()
    with pytest.raises(ValueError, match="cannot reach the Kafka broker at 127.0.0.1:1"):
        next(iter(source))
    assert time.monotonic() - started < 4.0


def test_a_consumer_that_does_not_close_holds_the_exit_back_two_seconds_at_most(capsys):
    """Issue 74.7: after SIGTERM the checkpoint was on disk in 0.33 s and the process exited 5-12 s
    later while the consumer closed; a close is bounded (``CLOSE_WITHIN_S``) and says so."""
    import threading

    from streamlearn.connectors.kafka import CLOSE_WITHIN_S

    released = threading.Event()

    class Stuck:
        def close(self):
            released.wait(30)

    source = KafkaSource("127.0.0.1:1", "t")
    source.consumer = Stuck()
    started = time.monotonic()
    source.close()
    took = time.monotonic() - started
    released.set()
    assert CLOSE_WITHIN_S <= 2.0 and took < CLOSE_WITHIN_S + 0.5 and source.consumer is None
    assert "did not close within 2 s" in capsys.readouterr().err

    class Failing:
        def close(self):
            raise OSError("connection reset")

    source.consumer = Failing()
    with pytest.raises(OSError, match="connection reset"):
        source.close()


def test_impossible_source_settings_are_refused():
    from streamlearn.connectors import StdinSource

    with pytest.raises(ValueError, match="idle_timeout must be a positive number of seconds"):
        KafkaSource("127.0.0.1:1", "t", idle_timeout=-1)
    for make in (lambda: KafkaSource("127.0.0.1:1", "t", batch_records=0), lambda: StdinSource(batch_records=0)):
        with pytest.raises(ValueError, match="batch_records must be positive"):
            make()


def test_a_failed_commit_is_reported_and_the_daemon_goes_on(capsys):
    """The checkpoint already holds the position (a restart seeks to it): a commit the broker
    does not answer must not stop the daemon; the next checkpoint commits again."""
    from kafka.errors import KafkaTimeoutError

    from streamlearn.connectors.kafka_python import KafkaPythonClient

    class Unanswered:
        def commit(self, offsets):
            raise KafkaTimeoutError("coordinator not available")

    client = KafkaPythonClient.__new__(KafkaPythonClient)  # its consumer replaced by one the broker never answers
    client.topic, client.consumer, client.poll_thread = "t", Unanswered(), None
    source = KafkaSource("127.0.0.1:1", "t", group="g")
    source.consumer = client
    source.commit({"kind": "kafka", "topic": "t", "offsets": {"0": 42}})
    assert "could not commit offsets {'0': 42} to group 'g'" in capsys.readouterr().err


def test_a_message_the_broker_refused_is_an_error_at_sync_not_a_silent_loss(monkeypatch):
    """``flush`` returns even when sends failed: dead letters sent to a topic could vanish."""
    from kafka.errors import KafkaTimeoutError

    import streamlearn.connectors.kafka as kafka_module
    from streamlearn.connectors.kafka import KafkaSink, KafkaSinkError

    class Future:
        is_done = True

        def __init__(self, error=None):
            self.exception = error

        def failed(self):
            return self.exception is not None

    class Producer:
        def __init__(self):
            self.futures = [Future(), Future(KafkaTimeoutError("no leader")), Future()]

        def send(self, topic, value):
            return self.futures.pop(0)

        def flush(self):
            pass

        def close(self):
            pass

    sink = KafkaSink.__new__(KafkaSink)
    sink.topic, sink.name, sink.unconfirmed, sink.producer = "dead", "kafka://h:1/dead", [], Producer()
    for i in range(3):
        sink.write({"i": i})
    with pytest.raises(KafkaSinkError, match="1 message\\(s\\) to kafka://h:1/dead were not written .*no leader"):
        sink.sync()
    sink.sync()  # the failure was reported once; nothing pending
    monkeypatch.setattr(kafka_module, "PRUNE_EVERY", 2)  # between syncs, delivered messages are let go
    sink.producer.futures = [Future(), Future(KafkaTimeoutError("gone")), Future(), Future()]
    for i in range(4):
        sink.write({"i": i})
    assert len(sink.unconfirmed) == 1 and sink.unconfirmed[0].failed()
    with pytest.raises(KafkaSinkError, match="gone"):
        sink.sync()


def test_time_the_daemon_did_not_run_is_not_idle_time():
    """The idle timeout counts polls that brought nothing, each at most its timeout: a poll that
    took 2 s (the process stopped or suspended meanwhile) is 0.2 s of idleness, so a source with
    a 0.5 s idle timeout goes on and reads the record that came meanwhile."""
    import socket

    from streamlearn.connectors.kafka_clients import Message

    class StoppedOnce:
        def __init__(self):
            self.calls = 0

        def poll(self, timeout_ms, max_records):
            self.calls += 1
            if self.calls == 1:
                time.sleep(2.0)  # what a SIGSTOP in the middle of a poll looks like from inside
                return []
            if self.calls == 2:
                return [Message("t", 0, 0, encode_value({"x": {"a": 1.0}, "y": "c"}), None)]
            time.sleep(timeout_ms / 1000)
            return []

    with socket.create_server(("127.0.0.1", 0)) as listening:  # a reachable "broker": the watch probes it
        source = KafkaSource(f"127.0.0.1:{listening.getsockname()[1]}", "t", idle_timeout=0.5, poll_timeout_ms=200)
        source.consumer = StoppedOnce()
        started = time.monotonic()
        records = sum(len(batch) for batch in source)
    assert records == 1
    assert time.monotonic() - started >= 2.5  # it still ended, after 0.5 s of polls in vain
