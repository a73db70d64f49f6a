"""Kafka source and sink.

:class:`KafkaSource` reads one topic as a consumer of group ``group`` with auto-commit off,
with kafka-python (the default) or confluent-kafka (``client="confluent"``; see
:mod:`streamlearn.connectors.kafka_clients`); the sink produces with kafka-python.
It assigns itself *every* partition of the topic (one learner must see every record, so
a group of several daemons sharing partitions would make several half-models; the group
only holds the committed offsets), unless it is one of several daemons that mix one model
(``subscribe``, ``--mix-topic``): then it joins the group and reads the partitions the group
gives it (:class:`streamlearn.service.mixing.GroupMixer`). On start it seeks to the checkpoint's offsets when
resuming, otherwise to the beginning of the topic (a fresh model learns everything the
topic retains). :meth:`KafkaSource.commit` commits offsets synchronously; the runner calls
it only after the checkpoint holding those offsets is durable, so a crash replays exactly
the records the restored model has not learned.

A message value is msgpack or JSON holding one record, a list of records or a compact batch;
:mod:`streamlearn.connectors.kafka_messages` decodes it (a bad value or record is a dead letter with its
partition, offset and index in the message).

A broker that goes away (restarting, the network cut) is reported on stderr and waited for:
the clients reconnect by themselves, :class:`BrokerWatch` tells an idle topic from an
unreachable broker (the idle timeout does not run while the broker is away) and, past
``broker_timeout`` seconds away, the source raises
:class:`~streamlearn.connectors.errors.SourceUnavailable` (the runner then stops after a final
checkpoint). Nothing is lost or learned twice across an outage as long as the broker keeps
its log (durable storage): the consumer goes on from its own position, and a restarted daemon
from its checkpoint's.

With several partitions the records are learned in the order the consumer fetches them;
exactly-once holds, but bit-identical replay of an uninterrupted run is only guaranteed for
a single-partition topic.
"""

from __future__ import annotations

import collections
import json
import math
import socket
import sys
import threading
import time

from .errors import SourceUnavailable
from .kafka_messages import MessageDecoder, decode_messages, decode_value, encode_value  # noqa: F401 (the codec's public names, here too)
from .records import empty_batch
from ..extras import require
from .kafka_clients import CLIENTS, MARKERS, Assigned, CommitFailed, make_client, unreachable
from .kafka_security import KafkaSecurity, check_access, current
from .walker import DictRecordWalker



def parse_kafka_uri(uri: str) -> dict:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=NAME&client=CLIENT`` → bootstrap, topic,
    group, client (``kafka-python``, the default, or ``confluent``: :mod:`streamlearn.connectors.kafka_clients`).

    >>> parse_kafka_uri("kafka://h:1/events?group=g&client=confluent")["client"]
    'confluent'
    """
    from urllib.parse import parse_qs, urlparse

    parts = urlparse(uri)
    if parts.scheme != "kafka" or not parts.netloc or not parts.path.strip("/"):
        raise ValueError(f"not a Kafka URI: {uri!r} (expected kafka://HOST:PORT/TOPIC?group=NAME)")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = set(query) - {"group", "client"}
    if unknown:
        raise ValueError(f"unknown Kafka URI option(s) {', '.join(sorted(unknown))} in {uri!r}: known are group and client")
    client = query.get("client", "kafka-python")
    if client not in CLIENTS:
        raise ValueError(f"client must be one of {', '.join(CLIENTS)}, got {client!r} in {uri!r}")
    require("kafka", "kafka", "a kafka:// source or sink")
    if client == "confluent":
        require("confluent_kafka", "kafka-fast", "kafka://...?client=confluent")
    return {"bootstrap": parts.netloc, "topic": parts.path.strip("/"), "group": query.get("group"), "client": client,
            "options": query}


class BrokerWatch:
    """Whether a source's broker can be reached, looked at only when a poll brought nothing
    (a flowing topic needs no look): a TCP connection to any bootstrap address, at most once
    a second while it answers, backing off to once every ``MAX_BACKOFF_S`` while it does not.
    A connection is all it checks; the client's own requests say the rest.

    :meth:`away` reports the start and the end of an outage on ``log`` and raises
    :class:`~streamlearn.connectors.errors.SourceUnavailable` once it has lasted ``timeout`` seconds
    (``None``: never)."""

    PROBE_EVERY_S, MAX_BACKOFF_S, CONNECT_TIMEOUT_S = 1.0, 5.0, 1.0

    def __init__(self, bootstrap: str, timeout: float | None, log=None):
        self.addresses = [(host, int(port)) for host, port in (a.strip().rsplit(":", 1) for a in bootstrap.split(","))]
        self.bootstrap, self.log = bootstrap, log or sys.stderr
        self.timeout = None if timeout is None or math.isinf(timeout) else timeout
        self.down_since: float | None = None
        self._next_probe = 0.0
        self._backoff = self.PROBE_EVERY_S

    def reachable(self) -> bool:
        for address in self.addresses:
            try:
                socket.create_connection(address, timeout=self.CONNECT_TIMEOUT_S).close()
                return True
            except OSError:
                continue
        return False

    def heard(self) -> None:
        """Messages arrived: the broker is there."""
        if self.down_since is not None:
            self._back()

    def _back(self) -> None:
        print(f"streamlearn: the Kafka broker at {self.bootstrap} is back after {time.monotonic() - self.down_since:.1f} s",
              file=self.log, flush=True)
        self.down_since, self._backoff = None, self.PROBE_EVERY_S

    def away(self, may_stop: bool = True) -> bool:
        """After a poll that brought nothing: whether the broker is unreachable (probing it
        when due); raises :class:`SourceUnavailable` once it has been away ``timeout`` s,
        unless not ``may_stop`` (see :meth:`notice`)."""
        now = time.monotonic()
        if now < self._next_probe:
            return self.down_since is not None
        if self.reachable():
            if self.down_since is not None:
                self._back()
            self._next_probe = now + self.PROBE_EVERY_S
            return False
        if self.down_since is None:
            self.down_since = now
            limit = "for ever" if self.timeout is None else f"for up to {self.timeout:g} s (--broker-timeout)"
            print(f"streamlearn: the Kafka broker at {self.bootstrap} is unreachable; waiting for it {limit}",
                  file=self.log, flush=True)
        elif may_stop and self.timeout is not None and now - self.down_since >= self.timeout:
            raise SourceUnavailable(f"the Kafka broker at {self.bootstrap} has been unreachable for "
                                    f"{now - self.down_since:.0f} s (--broker-timeout {self.timeout:g})")
        self._next_probe = now + self._backoff
        self._backoff = min(2 * self._backoff, self.MAX_BACKOFF_S)
        return True

    def notice(self) -> None:
        """While a commit waits (bounded by its own timeout): report an outage's start or end,
        never stop — the runner commits outside the source's loop, and the next empty poll
        applies the timeout."""
        self.away(may_stop=False)


#: the longest a source's close may take after the final checkpoint (leaving the group, closing
#: connections): what it leaves undone costs the group a rebalance timeout, never a record
CLOSE_WITHIN_S = 2.0
#: the longest wait for a broker's first answer: an address that never answered is more likely
#: wrong than away, so it is not waited for as long as an outage (``--broker-timeout``'s default is 300 s)
FIRST_CONTACT_S = 30.0


def first_contact_bound(broker_timeout: float | None) -> float:
    """How long a source waits for its broker's first answer: ``broker_timeout``, at most :data:`FIRST_CONTACT_S`."""
    return FIRST_CONTACT_S if broker_timeout is None else min(FIRST_CONTACT_S, float(broker_timeout))


class KafkaSource:
    """Records from a Kafka topic (see the module docstring).

    ``idle_timeout`` (seconds) ends the stream after that long spent polling without a message
    while the broker is reachable (for tests and batch jobs; a poll counts at most its
    ``poll_timeout_ms``, so a process stopped or suspended meanwhile is not idle); ``None`` runs forever.
    ``broker_timeout`` (seconds): how long an unreachable broker is waited for before the
    source raises :class:`~streamlearn.connectors.errors.SourceUnavailable`; ``None``: for ever. ``until_end`` ends it once every partition
    is read up to where it ended when the source connected (a hold-out topic evaluated at
    each checkpoint, ``streamlearn evaluate``): no idle wait. While idle the source yields
    empty batches every ``poll_timeout_ms`` so the runner can checkpoint and see a signal.

    ``subscribe`` (kafka-python only): join the consumer group instead of assigning every
    partition, for several daemons that mix one model (:mod:`streamlearn.service.mixing`). Then the
    source knows which partitions are its own (:attr:`owned`) and the group's size
    (:attr:`group_size`), starts a partition the group gives it where :meth:`set_starts` says,
    records the offsets it read of each partition since :meth:`take_ranges` last took them,
    sets :attr:`mix_due` (and cuts the batch) when a partition it has read records of is about
    to be taken away or given anew, and :meth:`rewind` moves partitions back (or ahead). Its
    idle timeout ends the stream only once the group's coverage reaches every partition's end:
    a member leaving earlier could leave records no member is left to learn."""

    kind = "kafka"
    #: polls return within ``poll_timeout_ms``: the runner sees a signal between batches
    blocks_on_input = False
    #: a topic never ends (an idle timeout only pauses the daemon): the runner does not flush
    #: the examples waiting for a full mini-batch, a restart learns them with the records to come
    endless = True

    def __init__(self, bootstrap: str, topic: str, group: str | None = None, labelled: bool = True,
                 value_format: str = "auto", batch_records: int = 1000, poll_timeout_ms: int = 200,
                 idle_timeout: float | None = None, until_end: bool = False, client: str = "kafka-python",
                 broker_timeout: float | None = None, subscribe: bool = False, security: KafkaSecurity | None = None,
                 **consumer_options):
        if int(batch_records) < 1:
            raise ValueError(f"batch_records must be positive, got {batch_records!r}")
        if idle_timeout is not None and not float(idle_timeout) > 0:
            raise ValueError(f"idle_timeout must be a positive number of seconds, got {idle_timeout!r}")
        if broker_timeout is not None and not float(broker_timeout) > 0:
            raise ValueError(f"broker_timeout must be a positive number of seconds, got {broker_timeout!r}")
        self.broker_timeout = broker_timeout
        self.bootstrap, self.topic = bootstrap, topic
        self.group = group or f"streamlearn-{topic}"
        self.labelled, self.value_format = labelled, value_format
        self.batch_records, self.poll_timeout_ms, self.idle_timeout = int(batch_records), poll_timeout_ms, idle_timeout
        if client not in CLIENTS:
            raise ValueError(f"client must be one of {', '.join(CLIENTS)}, got {client!r}")
        if subscribe and client != "kafka-python":
            raise ValueError("joining a consumer group (model mixing) needs client=kafka-python")
        self.client, self.consumer_options = client, consumer_options
        self.security = current(security)
        check_access(bootstrap, self.security, client)  # a refused certificate or password: one line now, not retries
        self.subscribe = bool(subscribe)
        self._starts: dict[int, int] = {}  # subscribed: where a partition given to this member starts
        self._round: dict[int, list] = {}  # subscribed: [start, end) read of each partition since take_ranges
        self.owned: set[int] = set()
        self.group_size = 1
        self.mix_due = False
        self._polled: collections.deque = collections.deque()  # fetched, not yet in a batch: not in the position
        self.name = f"kafka://{bootstrap}/{topic}?group={self.group}"
        self.offsets: dict[int, int] = {}
        self.consumer = None
        self.until_end = until_end
        self._end: dict[int, int] = {}  # with until_end: where each partition ended at connection
        self.with_hashes = True  # record hashes, for hash hold-outs (the runner turns them off otherwise)
        self._walker = DictRecordWalker()  # its name table lives as long as the source
        self._watch = BrokerWatch(bootstrap, broker_timeout)

    def seek(self, position: dict) -> None:
        if position.get("kind") != self.kind or position.get("topic") != self.topic:
            raise ValueError(f"the checkpoint was taken on {position.get('topic') or position.get('kind')}, not on topic {self.topic!r}")
        self.offsets = {int(p): int(o) for p, o in position["offsets"].items()}
        if self.subscribe:
            self.set_starts(self.offsets)
            self.offsets = {}

    def set_starts(self, offsets: dict) -> None:
        """Subscribed: where each partition starts when the group gives it to this member."""
        self._starts = {int(p): int(o) for p, o in offsets.items()}

    @property
    def unpublished(self) -> bool:
        """Subscribed: records were read since :meth:`take_ranges` last took them."""
        return bool(self._round)

    def take_ranges(self) -> dict:
        """Subscribed: ``{partition: (start, end)}`` read since the last call; forgotten here."""
        ranges, self._round, self.mix_due = {p: tuple(r) for p, r in self._round.items()}, {}, False
        return ranges

    def rewind(self, offsets: dict) -> None:
        """Subscribed: read the given partitions of this member's from ``offsets`` on (what was
        read of them since, and not yet taken into a batch, is dropped)."""
        wanted = {int(p): int(o) for p, o in offsets.items() if int(p) in self.owned and self.offsets.get(int(p)) != int(o)}
        if not wanted or self.consumer is None:
            return
        moved = self.consumer.rewind(wanted)
        self.offsets.update(moved)
        self._polled = collections.deque(m for m in self._polled if isinstance(m, MARKERS) or m.partition not in moved)

    def left_to_learn(self) -> bool:
        """Subscribed: whether some partition holds records past the group's coverage (the
        starts :meth:`set_starts` was last given), or its end could not be learned."""
        if not self.subscribe or self.consumer is None:
            return False
        partitions = self.consumer.partitions()
        ends = self.consumer.end_offsets(partitions)
        return len(ends) < len(partitions) or any(end > self._starts.get(p, 0) for p, end in ends.items())

    def _follow(self, marker) -> None:
        """Take a group change (:class:`~streamlearn.connectors.kafka_clients.Assigned` / ``Revoked``) into the position."""
        if isinstance(marker, Assigned):
            self.offsets.update({p: o for p, o in marker.offsets.items() if o is not None})
            self.owned |= set(marker.offsets)
            self.group_size = marker.group_size
        else:
            self.owned -= marker.partitions
            for p in marker.partitions:
                self.offsets.pop(p, None)

    def _connect(self):
        consumer = make_client(self.client, self.bootstrap, self.group, self.topic, self.consumer_options, self.security,
                               first_contact_s=first_contact_bound(self.broker_timeout))
        consumer.while_waiting = self._watch.away  # a call waiting for a broker that went away reports it
        consumer.while_committing = self._watch.notice  # a commit left waiting by a broker that died, too
        if self.subscribe:
            consumer.subscribe(lambda p: self._starts.get(p))
            self.consumer = consumer
            return consumer
        try:
            self.offsets = consumer.assign(self.offsets)  # the starting offsets, resolved: the first position
            if self.until_end:
                self._end = consumer.end_offsets(self.offsets)
                if len(self._end) < len(self.offsets):  # reading less than the whole topic would go unnoticed
                    raise SourceUnavailable(f"{self.bootstrap} did not say where {self.topic}'s partitions "
                                            f"{sorted(set(self.offsets) - set(self._end))} end")
        except BaseException:
            consumer.close()
            raise
        self.consumer = consumer
        return consumer

    def _at_end(self) -> bool:
        return self.until_end and all(self.offsets.get(p, 0) >= end for p, end in self._end.items())

    def _position(self) -> dict:
        return {"kind": self.kind, "topic": self.topic, "offsets": {str(p): o for p, o in sorted(self.offsets.items())}}

    def __iter__(self):
        """Batches of whole messages holding at least ``batch_records`` records (fewer when the
        topic has no more for now, or after ``poll_timeout_ms`` of gathering): cut by count, not
        by what one fetch happened to bring, so a replay after a restart cuts the same batches.
        With ``until_end`` the stream ends once the offsets reach the ends found at connection."""
        consumer = self.consumer or self._connect()
        yield empty_batch(self._position())
        watch = self._watch
        # seconds spent polling in vain since the last message, each poll counted at most its timeout:
        # time the process did not run (stopped, suspended) or spent on a checkpoint is not idleness
        idle = 0.0
        per_message = None  # records per message, observed, to poll about as many messages as a batch needs
        while not self._at_end():
            polling = time.monotonic()
            builder, per_message = self._gather(consumer, per_message)
            if len(builder):
                watch.heard()
                idle = 0.0
                batch = builder.build()
                batch.position = self._position()
                yield batch
            else:
                idle += min(time.monotonic() - polling, self.poll_timeout_ms / 1000)
                if watch.away():  # not idle: the idle clock starts again when the broker is back
                    idle = 0.0
                elif self.idle_timeout is not None and idle > self.idle_timeout:
                    if self.left_to_learn():  # the group's work is not done: a member that leaves now may leave records behind
                        idle = 0.0
                    else:
                        return
                yield empty_batch(self._position())

    def _gather(self, consumer, per_message):
        """The next batch's messages, decoded into a :class:`MessageDecoder` (see :meth:`__iter__`),
        and the updated estimate of records per message."""
        builder, deadline = MessageDecoder(self.labelled, self.value_format, self.with_hashes, self._walker), None
        polled = self._polled
        while len(builder) < self.batch_records:
            if not polled:
                wait = self.poll_timeout_ms if deadline is None else max(0, int(1000 * (deadline - time.monotonic())))
                wanted = 1 if per_message is None else max(1, math.ceil((self.batch_records - len(builder)) / per_message))
                polled.extend(consumer.poll(wait, wanted))
                if not polled:
                    break
            if isinstance(polled[0], MARKERS):
                touched = set(polled[0].offsets) if isinstance(polled[0], Assigned) else polled[0].partitions
                if touched & set(self._round):  # what was read of them is published first
                    self.mix_due = True
                    break
                self._follow(polled.popleft())
                continue
            message = polled.popleft()
            before = len(builder)
            builder.add(message)
            if self.subscribe:
                start = self.offsets.get(message.partition, message.offset)
                self._round.setdefault(message.partition, [start, start])[1] = message.offset + 1
            self.offsets[message.partition] = max(self.offsets.get(message.partition, 0), message.offset + 1)
            size = len(builder) - before
            per_message = max(1.0, size if per_message is None else 0.9 * per_message + 0.1 * size)
            deadline = deadline or time.monotonic() + self.poll_timeout_ms / 1000
        return builder, per_message

    def committed(self) -> dict:
        """The group's committed offsets ``{partition: offset}`` (for checks and ``inspect``)."""
        consumer = self.consumer or self._connect()
        return {p: consumer.committed(p) for p in sorted(self.offsets)}

    def commit(self, position: dict) -> None:
        """Commit a position's offsets to the group (synchronously).

        A commit the broker refuses or does not answer (it is restarting, the coordinator
        moved) is reported on stderr and not retried here: the checkpoint, written before,
        holds the position and a restart seeks to it, so nothing is lost or learned twice;
        the group's offsets only lag until the next checkpoint's commit goes through."""
        if self.consumer is None:
            return
        try:
            if not self._watch.reachable():  # a commit to a broker that is away would wait for it
                raise CommitFailed("the broker is unreachable")
            offsets = {int(p): int(o) for p, o in position["offsets"].items()}
            if self.subscribe:  # a member commits the partitions it holds; the others' owners commit theirs
                offsets = {p: o for p, o in offsets.items() if p in self.owned}
            if offsets:
                self.consumer.commit(offsets)
        except CommitFailed as error:
            print(f"streamlearn: could not commit offsets {position['offsets']} to group {self.group!r} ({error}); "
                  "the checkpoint holds them, the next checkpoint commits again", file=sys.stderr)

    def close(self) -> None:
        """Close the consumer within :data:`CLOSE_WITHIN_S` (a client still closing then is left to
        the process's exit, said in one line): the final checkpoint already holds the position."""
        if self.consumer is None:
            return
        consumer, self.consumer = self.consumer, None
        failures = []

        def close_consumer():
            try:
                consumer.close()
            except Exception as error:  # reported by the caller's thread
                failures.append(error)

        closing = threading.Thread(target=close_consumer, name="streamlearn-kafka-close", daemon=True)
        closing.start()
        closing.join(CLOSE_WITHIN_S)
        if closing.is_alive():
            print(f"streamlearn: the Kafka consumer did not close within {CLOSE_WITHIN_S:g} s; the process exits "
                  "without waiting for it (the checkpoint holds the position)", file=sys.stderr, flush=True)
        elif failures:
            raise failures[0]


PRUNE_EVERY = 10_000  # sent messages between two looks at which of them are known delivered


class KafkaSinkError(ValueError):
    """Messages the broker did not take (the daemon stops before its next checkpoint, so a
    restart sends them again: at-least-once, never lost)."""


class KafkaSink:
    """Writes JSON values to a topic (predictions, dead letters).

    ``sync`` (the runner calls it before every checkpoint) waits for every message sent so
    far and raises :class:`KafkaSinkError` if the broker refused one: ``flush`` alone
    returns even when sends failed, which would lose dead letters without a word."""

    def __init__(self, bootstrap: str, topic: str, security: KafkaSecurity | None = None):
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        self.topic = topic
        self.name = f"kafka://{bootstrap}/{topic}"
        self.unconfirmed: list = []  # futures of the messages since the last sync
        security = current(security)
        check_access(bootstrap, security)
        try:
            self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **security.kafka_python())
        except KafkaError as error:
            raise unreachable(bootstrap, error) from None

    def write(self, obj: dict) -> None:
        from kafka.errors import KafkaError

        try:
            self.unconfirmed.append(self.producer.send(self.topic, json.dumps(obj, default=str).encode("utf-8")))
        except KafkaError as error:  # no metadata within max_block_ms, a message too large...
            raise KafkaSinkError(f"cannot write to {self.name}: {error}") from None
        if len(self.unconfirmed) >= PRUNE_EVERY:  # predictions between syncs can be millions: keep what is not yet known good
            self.unconfirmed = [future for future in self.unconfirmed if not future.is_done or future.failed()]

    def sync(self) -> None:
        self.producer.flush()
        failed = [future for future in self.unconfirmed if future.failed()]
        self.unconfirmed = []
        if failed:
            raise KafkaSinkError(f"{len(failed)} message(s) to {self.name} were not written ({failed[0].exception}); "
                                 "restart with --resume: they are sent again")

    def size(self) -> int | None:
        return None  # a topic cannot be truncated: Kafka dead letters are at-least-once

    holds_lines = False  # a topic is a log that several runs write to

    def truncate(self, size) -> None:
        pass

    def close(self) -> None:
        try:
            self.sync()
        finally:
            self.producer.close()
