"""The mixing topic: where the members of a consumer group publish their model
changes (:mod:`streamlearn.service.mixing`) and read everyone's, in one order — the topic has one
partition, so its order is the one every member folds in.

A publication is a dict: ``member`` (a name), ``seq`` (the member's count of publications),
``members`` (the group's size as the member saw it, for whoever reads the topic), ``ranges`` (``{partition:
(start, end)}``, the input the change was learned from: :class:`streamlearn.service.mixing.Coverage`)
and ``change`` (:meth:`streamlearn.service.mixing.MixState.change`), sent as msgpack with the checkpoints'
encoding of arrays. ``streamlearn train ... --mix-topic TOPIC`` publishes and reads through it
(:class:`streamlearn.service.mixing.GroupMixer`).
"""

from __future__ import annotations

import math
import sys
import time

from streamlearn.service.checkpoint import pack, unpack

from .errors import SourceUnavailable
from .kafka_clients import FETCH_WAIT_MS, assign_afresh, create_topic, end_now, unreachable


class MixLog:
    """Publish to and read from the one partition of a mixing topic (kafka-python); with
    ``create``, make the topic if it does not exist.

    A broker that goes away is reported on ``log`` and waited for, retrying with back-off, up
    to ``broker_timeout`` seconds (``None``: for ever), then
    :class:`~streamlearn.connectors.errors.SourceUnavailable`. A publication retried after a send that timed
    out may land twice; the second copy follows on from nothing and every member skips it
    (:class:`streamlearn.service.mixing.Coverage`)."""

    MAX_BACKOFF_S = 5.0
    ACK_WAIT_S = 5.0  # an acknowledgement this late is looked into (is the broker there?) and reported

    def __init__(self, bootstrap: str, topic: str, create: bool = False, broker_timeout: float | None = None, log=None,
                 security=None):
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.errors import KafkaError

        from .kafka import BrokerWatch
        from .kafka_security import check_access, current

        security = current(security)
        check_access(bootstrap, security)
        secured = security.kafka_python()

        self.topic, self.bootstrap, self.log = topic, bootstrap, log or sys.stderr
        self._watch = BrokerWatch(bootstrap, None)
        self.bytes_published = 0
        self.broker_timeout = None if broker_timeout is None or math.isinf(broker_timeout) else float(broker_timeout)
        self._partition = TopicPartition(topic, 0)
        try:
            # a change holds a model's worth of weights: far past kafka-python's 1 MB default
            self._producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_request_size=256 << 20, **secured)
            self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=FETCH_WAIT_MS,
                                           max_partition_fetch_bytes=256 << 20, fetch_max_bytes=256 << 20, **secured)
        except KafkaError as error:
            raise unreachable(bootstrap, error) from None
        if create:
            create_topic(bootstrap, topic, exist_ok=True, security=security)
        partitions = self._consumer.partitions_for_topic(topic)
        if partitions is not None and len(partitions) != 1:
            self.close()
            raise ValueError(f"the mixing topic {topic!r} has {len(partitions)} partitions: it needs one (its order "
                             "is the order every member folds in)")
        self._consumer.assign([self._partition])

    def _through_outages(self, call, what: str):
        """``call()``, retried while the broker is away (see the class docstring)."""
        from kafka.errors import KafkaError

        since, backoff = None, 0.5
        while True:
            try:
                if not self._watch.reachable():  # a client call to a broker that is away may wait it out without a word
                    raise TimeoutError("the broker is unreachable")
                result = call()
            except (KafkaError, TimeoutError) as error:
                now = time.monotonic()
                if since is None:
                    since = now
                    print(f"streamlearn: could not {what} the mixing topic {self.topic!r} on {self.bootstrap} ({error}); "
                          "retrying", file=self.log, flush=True)
                elif self.broker_timeout is not None and now - since >= self.broker_timeout:
                    raise SourceUnavailable(f"the mixing topic {self.topic!r} on {self.bootstrap} has been unreachable "
                                            f"for {now - since:.0f} s (--broker-timeout {self.broker_timeout:g})") from None
                time.sleep(backoff)
                backoff = min(2 * backoff, self.MAX_BACKOFF_S)
                continue
            if since is not None:
                print(f"streamlearn: the mixing topic {self.topic!r} answers again after {time.monotonic() - since:.1f} s",
                      file=self.log, flush=True)
            return result

    def publish(self, publication: dict) -> int:
        """Send one publication and wait until the broker has it; its offset in the log."""
        value = pack(publication)
        sent: list = []

        def acknowledged() -> int:  # waited for in slices, so that an outage meanwhile is seen and reported
            if not sent or (sent[-1].is_done and sent[-1].failed()):
                sent.append(self._producer.send(self.topic, value))
            return sent[-1].get(timeout=self.ACK_WAIT_S).offset

        offset = self._through_outages(acknowledged, "publish to")
        self.bytes_published += len(value)
        return offset

    def read(self, start: int, timeout: float = 30.0) -> list[tuple[int, dict]]:
        """Every publication from offset ``start`` to the end of the log as it is now:
        ``[(offset, publication), ...]`` in log order."""
        return self._through_outages(lambda: self._read(start, timeout), "read")

    def _read(self, start: int, timeout: float) -> list[tuple[int, dict]]:
        consumer, partition = self._consumer, self._partition
        listed = consumer.end_offsets([partition])[partition]
        assign_afresh(consumer, {partition: start})
        out: list = []
        deadline = time.monotonic() + timeout
        while (end := end_now(consumer, partition, listed)) is None or start + len(out) < end:
            if not self._watch.reachable():  # the consumer would wait for the broker without a word
                raise TimeoutError("the broker is unreachable")
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(out)} publications of {self.topic!r} from {start} in {timeout} s, "
                                   f"short of its end {end if end is not None else listed}")
            for message in consumer.poll(timeout_ms=10).get(partition, []):
                if message.offset >= start + len(out):
                    out.append((message.offset, unpack(message.value)))
        return out

    def close(self) -> None:
        self._producer.close()
        self._consumer.close()

