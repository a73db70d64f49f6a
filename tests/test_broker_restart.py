"""A broker that goes away and comes back: the daemon reports it, waits, and goes on, and
nothing is lost or learned twice; a broker away past ``--broker-timeout`` ends the daemon
with exit code 1 after a final checkpoint, and ``--resume`` later learns the rest exactly once.

The broker is a real Tansu keeping its log in S3 (a moto S3 server on loopback), so a restart
on the same address finds its topics, messages and committed offsets again (the ``durable``
fixture of conftest.py)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from streamlearn.connectors.kafka import encode_value
from streamlearn.service.checkpoint import CheckpointStore
from helpers import KAFKA_CLIENTS, PYTHON, assert_same_state, records, train_reference_records
from conftest import PATIENCE

pytestmark = pytest.mark.slow  # whole processes or every river check: not in the quick subset


def _messages(recs: list, per_message: int = 20) -> list[bytes]:
    return [encode_value(recs[i : i + per_message]) for i in range(0, len(recs), per_message)]


def _learned(directory) -> int:
    payload = CheckpointStore(directory).load_latest() if directory.exists() else None
    return payload["runner"]["counters"]["learned"] if payload else 0


def _wait_until_learned(directory, n: int, process, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while _learned(directory) < n:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"the daemon did not checkpoint {n} learned records in {timeout} s"
        time.sleep(0.2)


def _daemon(bootstrap, topic, client, ck, *extra) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, "-m", "streamlearn.service.cli", "train", f"kafka://{bootstrap}/{topic}?group=g&client={client}",
                             "--learner", "MulticlassSVM", "--param", "lam=0.01", "--checkpoint-dir", str(ck),
                             "--checkpoint-interval", "0.3", "--batch-records", "100", "--quiet", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _learning_the_first_half(broker, topic: str, recs: list, client: str, ck, *extra) -> subprocess.Popen:
    """A topic holding the first half of ``recs`` and a daemon that has checkpointed all of it."""
    from localbroker import create_topic, produce

    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, _messages(recs[: len(recs) // 2]))
    daemon = _daemon(broker.bootstrap, topic, client, ck, *extra)
    _wait_until_learned(ck, len(recs) // 2, daemon)
    return daemon


@pytest.mark.kafka
@pytest.mark.parametrize("client", KAFKA_CLIENTS)
def test_a_broker_restart_mid_stream_loses_nothing_and_learns_nothing_twice(tmp_path, durable, client):
    from localbroker import produce

    recs = records(3000, seed=21)
    topic = f"restart-{client}"
    daemon = _learning_the_first_half(durable, topic, recs, client, tmp_path / "ck", "--idle-timeout", "4")
    durable.stop(crash=True)
    time.sleep(6)  # longer than the idle timeout: its clock does not run while the broker is away
    assert daemon.poll() is None, daemon.communicate()
    # paused while the broker restarts and takes the second half: however long that takes on a
    # busy machine, the daemon finds the records there when it looks (its idle timeout is 4 s)
    daemon.send_signal(signal.SIGSTOP)
    try:
        durable.start()
        produce(durable.bootstrap, topic, _messages(recs[1500:]))
    finally:
        daemon.send_signal(signal.SIGCONT)
    out, err = daemon.communicate(timeout=PATIENCE)
    assert daemon.returncode == 0, err
    # the outage is reported where the daemon meets it: its source's watch, or a commit that failed meanwhile
    watched = "is unreachable; waiting for it for up to 300 s" in err and "is back after" in err
    assert watched or "could not commit offsets" in err, err
    assert json.loads(out.splitlines()[-1])["learned"] == 3000
    payload = CheckpointStore(tmp_path / "ck").load_latest()
    assert payload["position"]["offsets"] == {"0": 150}
    assert_same_state(payload["learner"], train_reference_records(recs, lam=0.01).export_state())


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["confluent"])  # the restart test above runs both clients; the timeout is the source's
def test_a_broker_away_past_the_timeout_ends_the_daemon_with_code_1_after_a_final_checkpoint(tmp_path, durable, client):
    from localbroker import produce

    recs = records(2000, seed=22)
    topic = f"timeout-{client}"
    daemon = _learning_the_first_half(durable, topic, recs, client, tmp_path / "ck", "--broker-timeout", "3")
    durable.stop(crash=True)
    try:
        out, err = daemon.communicate(timeout=PATIENCE)
    finally:
        durable.start()
    assert daemon.returncode == 1, err
    # the outage is measured when the watch next probes, so a busy host may report more than 3 s
    away = re.search(r"has been unreachable for (\d+) s \(--broker-timeout 3\); stopping; the model is saved in", err)
    assert away and int(away.group(1)) >= 3, err
    assert "Traceback" not in err
    payload = CheckpointStore(tmp_path / "ck").load_latest()
    assert payload["runner"]["counters"]["learned"] == 1000 and payload["position"]["offsets"] == {"0": 50}
    produce(durable.bootstrap, topic, _messages(recs[1000:]))
    resumed = _daemon(durable.bootstrap, topic, client, tmp_path / "ck", "--resume", "--idle-timeout", "3")
    out, err = resumed.communicate(timeout=PATIENCE)
    assert resumed.returncode == 0, err
    payload = CheckpointStore(tmp_path / "ck").load_latest()
    assert payload["runner"]["counters"]["learned"] == 2000 and payload["position"]["offsets"] == {"0": 100}
    assert_same_state(payload["learner"], train_reference_records(recs, lam=0.01).export_state())


def _wait_until_stopped(pid: int) -> None:
    """Until every thread of ``pid`` is stopped: a signal reaches a busy process's threads a
    little after ``os.kill`` returns, and a request answered meanwhile is not the test's case."""
    from pathlib import Path

    deadline = time.monotonic() + 10
    while any(_thread_state(stat) != "T" for stat in Path(f"/proc/{pid}/task").glob("*/stat")):
        assert time.monotonic() < deadline, "the broker did not stop within 10 s of SIGSTOP"
        time.sleep(0.01)


def _thread_state(stat) -> str:
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return "T"  # a thread that ended answers nothing either


def _broker_holding(topic: str, recs: list):
    """A broker of its own (to stop or kill) holding ``topic`` with ``recs``."""
    from localbroker import LocalBroker, create_topic, produce

    broker = LocalBroker()
    broker.start()
    try:
        create_topic(broker.bootstrap, topic)
        produce(broker.bootstrap, topic, _messages(recs))
    except BaseException:
        broker.stop(crash=True)
        raise
    return broker


def _confluent_client_that_committed(broker, topic: str):
    """A confluent client that has polled ``topic`` and committed (its committing handle knows the coordinator)."""
    pytest.importorskip("confluent_kafka")
    from streamlearn.connectors.kafka_confluent import ConfluentClient

    client = ConfluentClient(broker.bootstrap, "g", topic, {})
    client.assign({0: 0})
    deadline = time.monotonic() + 20
    while not client.poll(200, 10):
        assert time.monotonic() < deadline, f"nothing polled from {topic}, which holds messages"
    client.commit({0: 1})
    return client


@pytest.mark.kafka
def test_a_commit_left_waiting_on_a_broker_that_died_does_not_stop_the_polls(monkeypatch):
    """A broker killed while it holds a commit unanswered: the commit is given up after its
    timeout and the consumer's polls still return (a sync commit on the consumer's own
    librdkafka handle kept them from ever returning, and the daemon hung)."""
    import os
    import signal
    import threading

    from streamlearn.connectors.kafka_clients import CommitFailed
    from streamlearn.connectors.kafka_confluent import ConfluentClient

    broker = _broker_holding("held", records(200, seed=23))
    try:
        client = _confluent_client_that_committed(broker, "held")
        monkeypatch.setattr(ConfluentClient, "COMMIT_TIMEOUT_S", 1.0)
        os.kill(broker.process.pid, signal.SIGSTOP)  # connections are still accepted; nothing is answered
        _wait_until_stopped(broker.process.pid)
        with pytest.raises(CommitFailed, match="no answer within 1 s"):
            client.commit({0: 5})
    finally:
        broker.stop(crash=True)
    polled = threading.Thread(target=client.poll, args=(200, 10), daemon=True)
    polled.start()
    polled.join(10)
    assert not polled.is_alive(), "a poll did not return within 10 s of the broker's death"
    client.close()


@pytest.mark.kafka
def test_a_commit_waiting_on_a_broker_that_died_reports_the_outage_without_ending_the_daemon(monkeypatch):
    """A broker killed just after the source looked at it, with a commit in flight: librdkafka's
    commit waits for it, and the source's watch runs meanwhile, so the outage is reported
    while it lasts (it went unreported when the broker was back before the commit gave up);
    a commit is bounded by its own timeout, so the watch does not end the daemon there."""
    import io

    from streamlearn.connectors.kafka import BrokerWatch
    from streamlearn.connectors.kafka_clients import CommitFailed
    from streamlearn.connectors.kafka_confluent import ConfluentClient

    broker = _broker_holding("committing", records(100, seed=25))
    try:
        client = _confluent_client_that_committed(broker, "committing")
    finally:
        broker.stop(crash=True)
    log = io.StringIO()
    client.while_committing = BrokerWatch(broker.bootstrap, 1, log=log).notice  # a --broker-timeout shorter than the commit's
    monkeypatch.setattr(ConfluentClient, "COMMIT_TIMEOUT_S", 3.0)
    with pytest.raises(CommitFailed, match="no answer within 3 s"):
        client.commit({0: 5})
    assert "is unreachable; waiting for it for up to 1 s" in log.getvalue()
    client.close()


@pytest.mark.kafka
def test_a_call_waiting_for_a_broker_that_died_reports_the_outage_and_ends_at_the_timeout():
    """kafka-python's requests to a broker that went away wait for minutes: the source's watch
    runs while such a call waits, so the outage is reported and ``--broker-timeout`` holds."""
    import io

    from streamlearn.connectors.errors import SourceUnavailable
    from streamlearn.connectors.kafka import BrokerWatch
    from streamlearn.connectors.kafka_python import KafkaPythonClient

    broker = _broker_holding("watched", records(100, seed=24))
    try:
        client = KafkaPythonClient(broker.bootstrap, "g", "watched", {})
        client.assign({0: 0})
    finally:
        broker.stop(crash=True)
    log = io.StringIO()
    client.while_waiting = BrokerWatch(broker.bootstrap, 2, log=log).away
    started = time.monotonic()
    with pytest.raises(SourceUnavailable, match="--broker-timeout 2"):
        client.call(lambda: client.consumer.end_offsets([client.partition(0)]))  # a ListOffsets waits for minutes
    assert time.monotonic() - started < 60  # its own wait is minutes; a busy host may add seconds to the watch's 3
    assert "is unreachable; waiting for it for up to 2 s" in log.getvalue()
    client.CLOSE_TIMEOUT_S = 0.5  # its poll thread still waits inside the call
    client.close()


def test_a_refused_connection_out_of_kafka_pythons_poll_is_retried_not_raised(monkeypatch):
    """kafka-python 3 lets a ``KafkaConnectionError`` (retriable) out of ``poll`` while it looks for
    the group's coordinator on a broker that is restarting; a daemon of a ``--mix-topic`` group died
    of it with exit 1. The poll thread polls again; a fatal error still reaches the learner's poll."""
    import collections

    import kafka
    from kafka.errors import KafkaConnectionError, UnsupportedVersionError

    from streamlearn.connectors.kafka_python import KafkaPythonClient

    Message = collections.namedtuple("Message", "partition offset value")

    class RestartingBrokerConsumer:
        """A KafkaConsumer whose polls answer from ``script`` in turn (an error is raised), then bring nothing."""

        script: list = []

        def __init__(self, **config):
            self.polls = 0

        def partitions_for_topic(self, topic):
            return {0}

        def assign(self, partitions):
            self.partitions = partitions

        def seek_to_beginning(self, partition):
            pass

        def position(self, partition):
            return 0

        def poll(self, timeout_ms, max_records):
            self.polls += 1
            if self.script:
                answer = self.script.pop(0)
                if isinstance(answer, Exception):
                    raise answer
                return {self.partitions[0]: answer}
            time.sleep(timeout_ms / 1000)
            return {}

        def close(self, autocommit=False, timeout_ms=None):  # kafka-python's signature
            pass

    monkeypatch.setattr(kafka, "KafkaConsumer", RestartingBrokerConsumer)
    monkeypatch.setattr(KafkaPythonClient, "RETRY_POLL_S", 0.05)
    RestartingBrokerConsumer.script = [KafkaConnectionError("111 ECONNREFUSED") for _ in range(3)] + [[Message(0, 0, b"1 1:1")]]
    client = KafkaPythonClient("127.0.0.1:9", "g", "t", {})
    client.assign({})
    taken = []
    deadline = time.monotonic() + 10
    while not taken and time.monotonic() < deadline:
        taken = client.poll(200, 10)
    assert [m.value for m in taken] == [b"1 1:1"]
    assert client.consumer.polls >= 4
    client.close()

    RestartingBrokerConsumer.script = [UnsupportedVersionError("the broker cannot do this")]
    client = KafkaPythonClient("127.0.0.1:9", "g", "t", {})
    client.assign({})
    with pytest.raises(UnsupportedVersionError):
        client.poll(2000, 10)
    client.close()
