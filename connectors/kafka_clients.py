"""The two Kafka consumer clients :class:`connectors.kafka.KafkaSource` can read with, behind
one small interface: assign every partition of a topic from given offsets, poll messages, find
the partitions' ends, commit offsets synchronously, read the group's committed offsets.

* ``kafka-python`` (the default; pure Python, a dependency of streamlearn);
* ``confluent`` — confluent-kafka, librdkafka underneath (``pip install streamlearn[kafka-fast]``):
  fetching and decompression in C threads, so a daemon's one Python thread is left for learning.

Both are used the same way: no auto-commit, no group subscription (the source assigns itself
every partition; the group only holds the committed offsets), offsets committed synchronously
only after the checkpoint holding them is durable. Both pass the same tests on a real broker.
Daemons that mix one model join the group instead (:meth:`KafkaPythonClient.subscribe`):
kafka-python only.
"""

from __future__ import annotations

import time
from typing import NamedTuple

CLIENTS = ("kafka-python", "confluent")


class Message(NamedTuple):
    """A consumed message, whichever client fetched it."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    key: bytes | None = None


class Assigned(NamedTuple):
    """In a subscribed consumer's message stream: these partitions are this member's from here on,
    each from its offset (``{partition: offset}``; ``None``: the group's committed offset, else the
    beginning, as the consumer finds it), in a group of ``group_size`` members."""

    offsets: dict
    group_size: int


class Revoked(NamedTuple):
    """In a subscribed consumer's message stream: these partitions are no longer this member's."""

    partitions: frozenset


#: what a subscribed consumer's stream holds besides messages
MARKERS = (Assigned, Revoked)


def _size(message) -> int:
    """Bytes of a message's value (a marker: none), what the prefetch bound counts."""
    return len(getattr(message, "value", None) or b"")


class CommitFailed(Exception):
    """The broker did not take a commit (it is restarting, the coordinator moved)."""


def unreachable(bootstrap: str, error: Exception) -> ValueError:
    """The one-line error for a broker a consumer or producer could not bootstrap from."""
    return ValueError(f"cannot reach the Kafka broker at {bootstrap}: {error}")


def _wait_for_partitions(list_partitions, topic: str, bootstrap: str) -> list[int]:
    deadline = time.monotonic() + 30
    partitions = list_partitions()
    while not partitions:
        if time.monotonic() > deadline:
            raise ValueError(f"topic {topic!r} does not exist on {bootstrap}")
        time.sleep(0.2)
        partitions = list_partitions()
    return sorted(partitions)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, exist_ok: bool = False) -> None:
    """Create a topic and wait until its metadata is visible (``exist_ok``: one that exists,
    made by someone else perhaps at the same moment, will do)."""
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        if not (exist_ok and topic in admin.list_topics()):
            admin.create_topics([NewTopic(topic, partitions, 1)])
    except TopicAlreadyExistsError:
        if not exist_ok:
            raise
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + 20
        while not consumer.partitions_for_topic(topic):
            if time.monotonic() > deadline:
                raise ValueError(f"topic {topic!r} did not appear on {bootstrap}")
            time.sleep(0.1)
            consumer.topics()  # refresh metadata
    finally:
        consumer.close()


def group_sized_assignor():
    """A kafka-python partition assignor (round robin) that also tells every member how many
    members the group has: the group's leader writes the count into each member's assignment,
    and the new class's ``group_size`` holds it after each rebalance (``None`` before the first).
    One class per consumer (``partition_assignment_strategy=[group_sized_assignor()]``): the
    count is class state. Each model change published for mixing records it (:mod:`connectors.mixlog`)."""
    from kafka.coordinator.assignors.abstract import ConsumerProtocolAssignment
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    class GroupSizedAssignor(RoundRobinPartitionAssignor):
        name = "streamlearn-group-sized"
        group_size: int | None = None

        @classmethod
        def assign(cls, cluster, members):
            counted = str(len(members)).encode("ascii")
            return {member: ConsumerProtocolAssignment(given.version, given.assignment, counted)
                    for member, given in super().assign(cluster, members).items()}

        @classmethod
        def on_assignment(cls, assignment, generation):
            cls.group_size = int(assignment.user_data) if assignment.user_data else None

    return GroupSizedAssignor


#: how long ``end_offsets`` waits for the fetch answers that tell where partitions end. Not
#: ListOffsets: Tansu answers it with the start of a partition's last record batch plus one, or
#: (keeping its log in S3) an older end still (an idle group member would stop while the group
#: still learns; a hold-out read "to its end" would miss records; a mixing topic would be read short)
PROBE_TIMEOUT_S = 5.0


def assign_afresh(consumer, starts: dict) -> None:
    """Assign a kafka-python consumer of no group the partitions of ``starts`` (``TopicPartition``
    → offset) from scratch, so that its ``highwater(tp)`` is unknown until a fetch answered after
    this call tells where the partition ends (see :data:`PROBE_TIMEOUT_S`)."""
    consumer.unsubscribe()
    consumer.assign(list(starts))
    for tp, offset in starts.items():
        consumer.seek(tp, offset)


def end_now(consumer, tp, listed: int) -> int | None:
    """Where ``tp`` ends as the broker has told since :func:`assign_afresh`: the larger of
    ListOffsets' answer ``listed`` and a fetch's high watermark, since either may fall short;
    ``None`` before a fetch answered."""
    fetched = consumer.highwater(tp)
    return None if fetched is None else max(listed, fetched)


class KafkaPythonClient:
    """kafka-python's ``KafkaConsumer``, polled on a thread of its own once assigned.

    kafka-python fetches a partition again only when its last fetch is consumed, so a consumer
    polled between learning steps leaves the network idle while the learner works. The poll
    thread keeps up to ``PREFETCH_BYTES`` of messages ahead of the learner; the consumer is only
    ever used from that thread (it is not thread-safe): commits and look-ups are handed to it.
    Messages fetched ahead are not part of any position, so a stop loses nothing."""

    #: larger fetches than kafka-python's 1 MB per partition: compact batches arrive in fewer round trips;
    #: a broker back from a restart is found again within a second
    DEFAULTS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "reconnect_backoff_max_ms": 1000,
                "max_partition_fetch_bytes": 16 << 20, "fetch_max_bytes": 64 << 20}
    PREFETCH_BYTES = 64 << 20
    #: a commit to a broker that went away fails after this long instead of blocking the daemon
    COMMIT_TIMEOUT_MS = 10_000

    def __init__(self, bootstrap: str, group: str, topic: str, options: dict):
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        self.bootstrap, self.topic = bootstrap, topic
        self._thread = None
        self._probe = None  # a consumer of no group, made by end_offsets
        self.while_waiting = None  # see _call
        self._assignor = group_sized_assignor()  # used only by subscribe(): assign() joins no group
        try:
            self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                           auto_offset_reset="earliest", partition_assignment_strategy=[self._assignor],
                                           **{**self.DEFAULTS, **options})
        except KafkaError as error:
            raise unreachable(bootstrap, error) from None

    def _partition(self, p: int):
        from kafka import TopicPartition

        return TopicPartition(self.topic, p)

    def assign(self, starts: dict) -> dict:
        """Assign every partition, each from ``starts[p]`` (or its beginning); the offsets it
        starts at. Then the poll thread starts."""
        consumer = self._consumer
        partitions = _wait_for_partitions(lambda: consumer.partitions_for_topic(self.topic), self.topic, self.bootstrap)
        assigned = [self._partition(p) for p in partitions]
        consumer.assign(assigned)
        for tp in assigned:
            if tp.partition in starts:
                consumer.seek(tp, starts[tp.partition])
            else:
                consumer.seek_to_beginning(tp)
        resolved = {tp.partition: consumer.position(tp) for tp in assigned}
        self._start()
        return resolved

    def subscribe(self, start_of) -> None:
        """Join the group instead (group subscription, :func:`group_sized_assignor`): each
        partition the group gives this member starts at ``start_of(p)`` (``None``: the group's
        committed offset, else the beginning). Assignments and revocations come out of
        :meth:`poll` as :class:`Assigned` / :class:`Revoked`, in order with the messages;
        prefetched messages of a revoked partition are dropped. Then the poll thread starts."""
        from kafka import ConsumerRebalanceListener

        client, consumer = self, self._consumer

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                client._mark({tp.partition for tp in revoked}, Revoked(frozenset(tp.partition for tp in revoked)))

            def on_partitions_assigned(self, assigned):  # on kafka-python's IO thread: nothing here may block
                offsets = {tp.partition: start_of(tp.partition) for tp in assigned}
                for tp in assigned:
                    if offsets[tp.partition] is not None:
                        consumer.seek(tp, offsets[tp.partition])
                client._mark(set(offsets), Assigned(offsets, client._assignor.group_size or 1))

        _wait_for_partitions(lambda: consumer.partitions_for_topic(self.topic), self.topic, self.bootstrap)
        consumer.subscribe([self.topic], listener=Listener())
        self._start()

    def _mark(self, partitions: set, marker=None) -> None:
        """Drop the prefetched messages of ``partitions`` and put ``marker`` (if any) in their
        place (on the poll thread)."""
        with self._ready:
            kept = [m for m in self._fetched if isinstance(m, MARKERS) or m.partition not in partitions]
            self._bytes = sum(_size(m) for m in kept)
            self._fetched.clear()
            self._fetched.extend(kept)
            if marker is not None:
                self._fetched.append(marker)
            self._ready.notify_all()

    def rewind(self, offsets: dict) -> dict:
        """Seek the given partitions that are still assigned to ``offsets`` and drop what was
        prefetched of them (a subscribed consumer; the learner's thread); the partitions moved."""
        consumer = self._consumer

        def seek():
            assigned = {tp.partition: tp for tp in consumer.assignment()}
            moved = {p: o for p, o in offsets.items() if p in assigned}
            self._mark(set(moved))
            for p, o in moved.items():
                consumer.seek(assigned[p], o)
            return moved

        return self._call(seek)

    # ------------------------------------------------------------ the poll thread
    def _start(self) -> None:
        import collections
        import threading

        self._fetched: collections.deque = collections.deque()
        self._bytes = 0
        self._commands: collections.deque = collections.deque()
        self._error = None
        self._stop = False
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="streamlearn-kafka-poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._stop and not self._commands and self._bytes >= self.PREFETCH_BYTES:
                    self._ready.wait()
                if self._stop:
                    return
                commands, self._commands = list(self._commands), type(self._commands)()
            for call, done in commands:
                try:
                    done["result"] = call()
                except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
                    done["error"] = error
                with self._ready:
                    done["finished"] = True
                    self._ready.notify_all()
            if self._bytes >= self.PREFETCH_BYTES:
                continue
            try:
                fetched = self._consumer.poll(timeout_ms=100, max_records=500)
            except BaseException as error:  # noqa: BLE001 - raised again in the learner's poll
                with self._ready:
                    self._error = error
                    self._ready.notify_all()
                return
            messages = [m for part in fetched.values() for m in part]
            if messages:
                with self._ready:
                    self._fetched.extend(messages)
                    self._bytes += sum(_size(m) for m in messages)
                    self._ready.notify_all()

    #: seconds between two calls of ``while_waiting`` while a call waits for the poll thread
    WAITING_SLICE_S = 1.0

    def _call(self, call, watched: bool = True):
        """Run ``call()`` on the poll thread (or here, before it started) and return its result.

        A call to a broker that went away can wait for minutes (kafka-python's request timeout):
        while it waits, ``while_waiting()`` (set by the source: it reports the outage and raises
        once ``--broker-timeout`` has passed) runs once a ``WAITING_SLICE_S``, unless ``watched``
        is false (a call bounded by a timeout of its own)."""
        if self._thread is None or not self._thread.is_alive():
            return call()
        done: dict = {}
        with self._ready:
            self._commands.append((call, done))
            self._ready.notify_all()
        while True:
            with self._ready:
                if "finished" not in done:
                    self._ready.wait(self.WAITING_SLICE_S)
                if "finished" in done:
                    break
            if watched and self.while_waiting is not None:
                self.while_waiting()
        if "error" in done:
            raise done["error"]
        return done["result"]

    def poll(self, timeout_ms: int, max_records: int) -> list:
        if self._thread is None:
            fetched = self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
            return [m for part in fetched.values() for m in part]
        deadline = time.monotonic() + timeout_ms / 1000
        with self._ready:
            while not self._fetched and self._error is None and time.monotonic() < deadline:
                self._ready.wait(max(0.0, deadline - time.monotonic()))
            if not self._fetched and self._error is not None:
                raise self._error
            taken = [self._fetched.popleft() for _ in range(min(max_records, len(self._fetched)))]
            self._bytes -= sum(_size(m) for m in taken)
            self._ready.notify_all()
        return taken

    # -------------------------------------------------------------------------
    def partitions(self) -> list[int]:
        return self._call(lambda: sorted(self._consumer.partitions_for_topic(self.topic) or []))

    def end_offsets(self, partitions) -> dict:
        """Each partition's end (high watermark) as a fetch answers it (see :data:`PROBE_TIMEOUT_S`),
        by a consumer of its own that joins no group; a partition not answered in time is left out."""
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        try:
            if self._probe is None:  # small fetches answered at once: only the answers' watermarks are wanted
                self._probe = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                            max_partition_fetch_bytes=1, fetch_max_bytes=1, fetch_max_wait_ms=10)
            probe = self._probe
            parts = [self._partition(p) for p in partitions]
            listed = probe.end_offsets(parts)
            assign_afresh(probe, {tp: max(0, end - 1) for tp, end in listed.items()})  # any offset up to the end will do
            deadline = time.monotonic() + PROBE_TIMEOUT_S
            while any(end_now(probe, tp, listed[tp]) is None for tp in parts) and time.monotonic() < deadline:
                probe.poll(timeout_ms=10, max_records=1)
            ends = {tp.partition: end_now(probe, tp, listed[tp]) for tp in parts}
            return {p: end for p, end in ends.items() if end is not None}
        except KafkaError:  # the broker went away meanwhile: nothing is known
            return {}

    def commit(self, offsets: dict) -> None:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        committed = {self._partition(p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        try:
            self._call(lambda: self._consumer.commit(offsets=committed, timeout_ms=self.COMMIT_TIMEOUT_MS), watched=False)
        except KafkaError as error:
            raise CommitFailed(str(error)) from None

    def committed(self, partition: int) -> int | None:
        return self._call(lambda: self._consumer.committed(self._partition(partition)))

    #: seconds to wait at close for the poll thread, which may be inside a call to a broker that went away
    CLOSE_TIMEOUT_S = 5.0

    def close(self) -> None:
        if self._thread is not None:
            with self._ready:
                self._stop = True
                self._ready.notify_all()
            self._thread.join(self.CLOSE_TIMEOUT_S)
            if self._thread.is_alive():  # still waiting for the broker: the consumer is its, left to the process's exit
                return
            self._thread = None
        if self._probe is not None:
            self._probe.close()
        self._consumer.close(autocommit=False)


class ConfluentClient:
    """confluent-kafka's ``Consumer`` (librdkafka)."""

    #: log_level 2: librdkafka logs every failed reconnect (tens a second) while a broker is away;
    #: the source reports the outage itself (connectors.kafka.BrokerWatch)
    #: reconnect.backoff.max.ms: a broker back from a restart is found within a second, not ten
    DEFAULTS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "fetch.max.bytes": 64 << 20,
                "max.partition.fetch.bytes": 16 << 20, "log_level": 2, "reconnect.backoff.max.ms": 1000}
    #: seconds to wait for the topic's metadata before calling the broker unreachable
    METADATA_TIMEOUT_S = 10.0
    COMMIT_TIMEOUT_S = 10.0

    def __init__(self, bootstrap: str, group: str, topic: str, options: dict):
        try:
            import confluent_kafka
        except ImportError:
            raise ValueError("client=confluent needs confluent-kafka: pip install 'streamlearn[kafka-fast]'") from None
        self._kafka = confluent_kafka
        self.bootstrap, self.topic = bootstrap, topic
        self._commit_thread = None
        self._config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                        "auto.offset.reset": "earliest", **self.DEFAULTS, **options}
        self._consumer = confluent_kafka.Consumer(self._config)
        self._committer = None  # a handle of its own: a commit waiting on the consumer's would block its polls
        self._probe = None  # a handle of its own for end_offsets, which assigns it

    def _partitions(self) -> list[int]:
        try:
            metadata = self._consumer.list_topics(self.topic, timeout=self.METADATA_TIMEOUT_S)
        except self._kafka.KafkaException as error:
            raise unreachable(self.bootstrap, error) from None
        topic = metadata.topics.get(self.topic)
        return [] if topic is None or topic.error is not None else list(topic.partitions)

    def assign(self, starts: dict) -> dict:
        partitions = _wait_for_partitions(self._partitions, self.topic, self.bootstrap)
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
        returning (the source could then never see that the broker is gone)."""
        import threading

        if self._commit_thread is not None and self._commit_thread.is_alive():
            raise CommitFailed("the previous commit still waits for the broker")
        if self._committer is None:
            self._committer = self._kafka.Consumer(self._config)
        outcome: dict = {}

        def commit():
            try:
                self._committer.commit(offsets=[self._partition(p, o) for p, o in offsets.items()], asynchronous=False)
            except self._kafka.KafkaException as error:
                outcome["error"] = str(error)

        self._commit_thread = threading.Thread(target=commit, name="streamlearn-kafka-commit", daemon=True)
        self._commit_thread.start()
        self._commit_thread.join(self.COMMIT_TIMEOUT_S)
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


def make_client(name: str, bootstrap: str, group: str, topic: str, options: dict):
    """The consumer client called ``name`` (one of :data:`CLIENTS`; the caller validated it)."""
    return {"kafka-python": KafkaPythonClient, "confluent": ConfluentClient}[name](bootstrap, group, topic, options)
