"""The two Kafka consumer clients :class:`streamlearn.connectors.kafka.KafkaSource` can read with, behind
one small interface: assign every partition of a topic from given offsets, poll messages, find
the partitions' ends, commit offsets synchronously, read the group's committed offsets.

* ``kafka-python`` (the default; pure Python, a dependency of streamlearn);
* ``confluent`` — confluent-kafka, librdkafka underneath (``pip install streamlearn[kafka-fast]``):
  fetching and decompression in C threads, so a daemon's one Python thread is left for learning.

Both are used the same way: no auto-commit, no group subscription (the source assigns itself
every partition; the group only holds the committed offsets), offsets committed synchronously
only after the checkpoint holding them is durable. Both pass the same tests on a real broker.
Daemons that mix one model join the group instead (:meth:`streamlearn.connectors.kafka_python.KafkaPythonClient.subscribe`):
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


def message_size(message) -> int:
    """Bytes of a message's value (a marker: none), what the prefetch bound counts."""
    return len(getattr(message, "value", None) or b"")


class CommitFailed(Exception):
    """The broker did not take a commit (it is restarting, the coordinator moved)."""


def unreachable(bootstrap: str, error: Exception) -> ValueError:
    """The one-line error for a broker a consumer or producer could not bootstrap from."""
    return ValueError(f"cannot reach the Kafka broker at {bootstrap}: {error}")


def wait_for_partitions(list_partitions, topic: str, bootstrap: str) -> list[int]:
    deadline = time.monotonic() + 30
    partitions = list_partitions()
    while not partitions:
        if time.monotonic() > deadline:
            raise ValueError(f"topic {topic!r} does not exist on {bootstrap}")
        time.sleep(0.2)
        partitions = list_partitions()
    return sorted(partitions)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, exist_ok: bool = False, security=None) -> None:
    """Create a topic and wait until its metadata is visible (``exist_ok``: one that exists,
    made by someone else perhaps at the same moment, will do)."""
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    from .kafka_security import current

    secured = current(security).kafka_python()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **secured)
    try:
        if not (exist_ok and topic in admin.list_topics()):
            admin.create_topics([NewTopic(topic, partitions, 1)])
    except TopicAlreadyExistsError:
        if not exist_ok:
            raise
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **secured)
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
    count is class state. Each model change published for mixing records it (:mod:`streamlearn.connectors.mixlog`)."""
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
#: how long a fetch of the mixing log or of the end probe may wait at the broker: one whose storage
#: answers slower than the wait (Tansu on S3) returns empty answers, and a client that asks again at
#: once keeps that storage too busy to answer anything (at 10 ms a group stalled for minutes after a
#: restart of such a broker); a read at the log's end waits this long for the answer that ends it
FETCH_WAIT_MS = 200


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


def make_client(name: str, bootstrap: str, group: str, topic: str, options: dict, security=None,
                first_contact_s: float | None = None):
    """The consumer client called ``name`` (one of :data:`CLIENTS`; the caller validated it), with
    ``security`` (a :class:`~streamlearn.connectors.kafka_security.KafkaSecurity`; ``None``: the process's);
    ``first_contact_s`` bounds the wait for the broker's first answer (``--broker-timeout``;
    ``None``: the client's own bound, 10 to 30 s)."""
    if name == "confluent":
        from .kafka_confluent import ConfluentClient

        return ConfluentClient(bootstrap, group, topic, options, security, first_contact_s)
    from .kafka_python import KafkaPythonClient

    return KafkaPythonClient(bootstrap, group, topic, options, security, first_contact_s)
