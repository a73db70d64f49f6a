"""The mixing topic of issue 26: where the members of a consumer group publish their model
changes (:mod:`streamlearn.mixing`) and read everyone's, in one order — the topic has one
partition, so its order is the one every member folds in.

A publication is a dict: ``member`` (a name), ``seq`` (the member's count of publications),
``members`` (the group's size as the member saw it: the fold's ``N``), ``ranges`` (``{partition:
(start, end)}``, the input the change was learned from: :class:`streamlearn.mixing.Coverage`)
and ``change`` (:meth:`streamlearn.mixing.MixState.change`), sent as msgpack with the checkpoints'
encoding of arrays. ``streamlearn train ... --mix-topic TOPIC`` publishes and reads through it
(:class:`streamlearn.mixing.GroupMixer`).
"""

from __future__ import annotations

import time

from streamlearn.checkpoint import pack, unpack

from .kafka_clients import create_topic, unreachable


class MixLog:
    """Publish to and read from the one partition of a mixing topic (kafka-python); with
    ``create``, make the topic if it does not exist."""

    def __init__(self, bootstrap: str, topic: str, create: bool = False):
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.errors import KafkaError

        self.topic = topic
        self._partition = TopicPartition(topic, 0)
        try:
            # a change holds a model's worth of weights: far past kafka-python's 1 MB default
            self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=256 << 20)
            self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                           max_partition_fetch_bytes=256 << 20, fetch_max_bytes=256 << 20)
        except KafkaError as error:
            raise unreachable(bootstrap, error) from None
        if create:
            create_topic(bootstrap, topic, exist_ok=True)
        partitions = self._consumer.partitions_for_topic(topic)
        if partitions is not None and len(partitions) != 1:
            self.close()
            raise ValueError(f"the mixing topic {topic!r} has {len(partitions)} partitions: it needs one (its order "
                             "is the order every member folds in)")
        self._consumer.assign([self._partition])

    def publish(self, publication: dict) -> int:
        """Send one publication and wait until the broker has it; its offset in the log."""
        return self._producer.send(self.topic, pack(publication)).get(timeout=60).offset

    def read(self, start: int, timeout: float = 30.0) -> list[tuple[int, dict]]:
        """Every publication from offset ``start`` to the end of the log as it is now:
        ``[(offset, publication), ...]`` in log order."""
        end = self._consumer.end_offsets([self._partition])[self._partition]
        self._consumer.seek(self._partition, start)
        out: list = []
        deadline = time.monotonic() + timeout
        while start + len(out) < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(out)} of {end - start} publications of {self.topic!r} in {timeout} s")
            for message in self._consumer.poll(timeout_ms=500).get(self._partition, []):
                if message.offset >= start + len(out):
                    out.append((message.offset, unpack(message.value)))
        return out

    def close(self) -> None:
        self._producer.close()
        self._consumer.close()

