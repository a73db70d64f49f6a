"""The confluent-kafka consumer client of :mod:`streamlearn.connectors.kafka_clients` (librdkafka underneath)."""

from __future__ import annotations

import time

from .kafka_clients import PROBE_TIMEOUT_S, CommitFailed, Message, unreachable, wait_for_partitions
from .kafka_security import KafkaSecurity, current


class ConfluentClient:
    """confluent-kafka's ``Consumer`` (librdkafka)."""

    #: log_level 2: librdkafka logs every failed reconnect (tens a second) while a broker is away;
    #: the source reports the outage itself (streamlearn.connectors.kafka.BrokerWatch)
    #: reconnect.backoff.max.ms: a broker back from a restart is found within a second, not ten
    DEFAULTS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "fetch.max.bytes": 64 << 20,
                "max.partition.fetch.bytes": 16 << 20, "log_level": 2, "reconnect.backoff.max.ms": 1000}
    #: seconds to wait for the topic's metadata before calling the broker unreachable (at most ``--broker-timeout``)
    METADATA_TIMEOUT_S = 10.0
    COMMIT_TIMEOUT_S = 10.0
    WAITING_SLICE_S = 1.0

    def __init__(self, bootstrap: str, group: str, topic: str, options: dict, security: KafkaSecurity | None = None,
                 first_contact_s: float | None = None):
        try:
            import confluent_kafka
        except ImportError:
            raise ValueError("client=confluent needs confluent-kafka: pip install 'streamlearn[kafka-fast]'") from None
        self._kafka = confluent_kafka
        self._metadata_timeout_s = self.METADATA_TIMEOUT_S if first_contact_s is None else min(
            self.METADATA_TIMEOUT_S, float(first_contact_s))
        self.bootstrap, self.topic = bootstrap, topic
        self._commit_thread = None
        self._config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                        "auto.offset.reset": "earliest", **self.DEFAULTS, **options, **current(security).confluent()}
        self._consumer = confluent_kafka.Consumer(self._config)
        self._committer = None  # a handle of its own: a commit waiting on the consumer's would block its polls
        self._probe = None  # a handle of its own for end_offsets, which assigns it
        self.while_committing = None  # called once a WAITING_SLICE_S while a commit waits (set by the source)

    def _partitions(self) -> list[int]:
        try:
            metadata = self._consumer.list_topics(self.topic, timeout=self._metadata_timeout_s)
        except self._kafka.KafkaException as error:
            raise unreachable(self.bootstrap, error) from None
        topic = metadata.topics.get(self.topic)
        return [] if topic is None or topic.error is not None else list(topic.partitions)

    def assign(self, starts: dict) -> dict:
        partitions = wait_for_partitions(self._partitions, self.topic, self.bootstrap)
        resolved = {p: starts[p] if p in starts else self._consumer.get_watermark_offsets(self._partition(p), timeout=10)[0]
                    for p in partitions}
        self._consumer.assign([self._partition(p, o) for p, o in resolved.items()])
        return resolved

    def _partition(self, p: int, offset: int | None = None):
        return self._kafka.TopicPartition(self.topic, p) if offset is None else self._kafka.TopicPartition(self.topic, p, offset)

    def end_offsets(self, partitions) -> dict:
        """Each partition's end as a fetch answers it (see :data:`PROBE_TIMEOUT_S`), by a
        handle of its own; a partition not answered in time is left out."""
        if self._probe is None:  # small fetches: only the answers' watermarks are wanted
            self._probe = self._kafka.Consumer({**self._config, "max.partition.fetch.bytes": 1})
        probe = self._probe
        try:
            listed = {p: probe.get_watermark_offsets(self._partition(p), timeout=10)[1] for p in partitions}
            probe.assign([self._partition(p, max(0, end - 1)) for p, end in listed.items()])
            deadline, ends = time.monotonic() + PROBE_TIMEOUT_S, {}
            while len(ends) < len(listed) and time.monotonic() < deadline:
                probe.consume(1, 0.01)
                ends = {p: max(end, fetched) for p, end in listed.items()
                        if (fetched := probe.get_watermark_offsets(self._partition(p), cached=True)[1]) >= 0}
            return ends
        except self._kafka.KafkaException:  # the broker went away meanwhile: nothing is known
            return {}

    def poll(self, timeout_ms: int, max_records: int) -> list:
        messages = []
        for m in self._consumer.consume(num_messages=max_records, timeout=timeout_ms / 1000):
            if m.error() is None:
                messages.append(Message(m.topic(), m.partition(), m.offset(), m.value(), m.key()))
            elif m.error().fatal():  # librdkafka reconnects by itself after the others (a broker restarting)
                raise ValueError(f"Kafka consumer error on {self.topic}: {m.error()}")
        return messages

    def commit(self, offsets: dict) -> None:
        """A synchronous commit, given up after ``COMMIT_TIMEOUT_S`` (librdkafka's waits for a
        broker that went away to come back): it runs on a thread of its own, one at a time, so
        a commit left waiting can never land after a newer one, and through a second librdkafka
        handle, since a commit left waiting on the consumer's own handle keeps its polls from
        returning (the source could then never see that the broker is gone). While it waits,
        ``while_committing()`` runs once a ``WAITING_SLICE_S`` (the source's watch reports an
        outage that starts meanwhile)."""
        import threading

        if self._commit_thread is not None and self._commit_thread.is_alive():
            raise CommitFailed("the previous commit still waits for the broker")
        if self._committer is None:
            self._committer = self._kafka.Consumer(self._config)
        outcome: dict = {}

        def commit():
            try:
                answered = self._committer.commit(offsets=[self._partition(p, o) for p, o in offsets.items()],
                                                  asynchronous=False)
            except self._kafka.KafkaException as error:
                outcome["error"] = str(error)
                return
            refused = [f"partition {tp.partition}: {tp.error}" for tp in answered or () if tp.error is not None]
            if refused:  # librdkafka answers a partition's refusal in the list, not by raising
                outcome["error"] = "; ".join(refused)

        self._commit_thread = threading.Thread(target=commit, name="streamlearn-kafka-commit", daemon=True)
        self._commit_thread.start()
        deadline = time.monotonic() + self.COMMIT_TIMEOUT_S
        while self._commit_thread.is_alive() and (left := deadline - time.monotonic()) > 0:
            self._commit_thread.join(min(left, self.WAITING_SLICE_S))
            if self._commit_thread.is_alive() and self.while_committing is not None:
                self.while_committing()
        if self._commit_thread.is_alive():
            raise CommitFailed(f"no answer within {self.COMMIT_TIMEOUT_S:g} s")
        if "error" in outcome:
            raise CommitFailed(outcome["error"])

    def committed(self, partition: int) -> int | None:
        offset = self._consumer.committed([self._partition(partition)], timeout=10)[0].offset
        return offset if offset >= 0 else None

    def close(self) -> None:
        self._consumer.close()
        if self._probe is not None:
            self._probe.close()
        if self._committer is not None and not (self._commit_thread is not None and self._commit_thread.is_alive()):
            self._committer.close()  # one still waiting for the broker is left to the process's exit
