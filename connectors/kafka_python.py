"""The kafka-python consumer client of :mod:`streamlearn.connectors.kafka_clients` (the default)."""

from __future__ import annotations

import time

from .kafka_clients import (FETCH_WAIT_MS, MARKERS, PROBE_TIMEOUT_S, Assigned, CommitFailed, Revoked, assign_afresh, end_now,
                            group_sized_assignor, message_size, unreachable, wait_for_partitions)
from .kafka_security import KafkaSecurity, current


def first_contact(seconds: float | None) -> dict:
    """kafka-python's option that bounds the wait for a first broker (its default: 30 s)."""
    return {} if seconds is None else {"bootstrap_timeout_ms": max(1, int(1000 * float(seconds)))}


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

    def __init__(self, bootstrap: str, group: str, topic: str, options: dict, security: KafkaSecurity | None = None,
                 first_contact_s: float | None = None):
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        self.bootstrap, self.topic = bootstrap, topic
        self._security = current(security).kafka_python()
        self.poll_thread = None
        self._probe = None  # a consumer of no group, made by end_offsets
        self.while_waiting = self.while_committing = None  # see call
        self._assignor = group_sized_assignor()  # used only by subscribe(): assign() joins no group
        try:
            self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                           auto_offset_reset="earliest", partition_assignment_strategy=[self._assignor],
                                           **{**self.DEFAULTS, **first_contact(first_contact_s), **options},
                                           **self._security)
        except KafkaError as error:
            raise unreachable(bootstrap, error) from None

    def partition(self, p: int):
        from kafka import TopicPartition

        return TopicPartition(self.topic, p)

    def assign(self, starts: dict) -> dict:
        """Assign every partition, each from ``starts[p]`` (or its beginning); the offsets it
        starts at. Then the poll thread starts."""
        consumer = self.consumer
        partitions = wait_for_partitions(lambda: consumer.partitions_for_topic(self.topic), self.topic, self.bootstrap)
        assigned = [self.partition(p) for p in partitions]
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

        client, consumer = self, self.consumer

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                client._mark({tp.partition for tp in revoked}, Revoked(frozenset(tp.partition for tp in revoked)))

            def on_partitions_assigned(self, assigned):  # on kafka-python's IO thread: nothing here may block
                offsets = {tp.partition: start_of(tp.partition) for tp in assigned}
                for tp in assigned:
                    if offsets[tp.partition] is not None:
                        consumer.seek(tp, offsets[tp.partition])
                client._mark(set(offsets), Assigned(offsets, client._assignor.group_size or 1))

        wait_for_partitions(lambda: consumer.partitions_for_topic(self.topic), self.topic, self.bootstrap)
        consumer.subscribe([self.topic], listener=Listener())
        self._start()

    def _mark(self, partitions: set, marker=None) -> None:
        """Drop the prefetched messages of ``partitions`` and put ``marker`` (if any) in their
        place (on the poll thread)."""
        with self._ready:
            kept = [m for m in self._fetched if isinstance(m, MARKERS) or m.partition not in partitions]
            self._bytes = sum(message_size(m) for m in kept)
            self._fetched.clear()
            self._fetched.extend(kept)
            if marker is not None:
                self._fetched.append(marker)
            self._ready.notify_all()

    def rewind(self, offsets: dict) -> dict:
        """Seek the given partitions that are still assigned to ``offsets`` and drop what was
        prefetched of them (a subscribed consumer; the learner's thread); the partitions moved."""
        consumer = self.consumer

        def seek():
            assigned = {tp.partition: tp for tp in consumer.assignment()}
            moved = {p: o for p, o in offsets.items() if p in assigned}
            self._mark(set(moved))
            for p, o in moved.items():
                consumer.seek(assigned[p], o)
            return moved

        return self.call(seek)

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
        self.poll_thread = threading.Thread(target=self._run, name="streamlearn-kafka-poll", daemon=True)
        self.poll_thread.start()

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
                fetched = self.consumer.poll(timeout_ms=100, max_records=500)
            except BaseException as error:  # noqa: BLE001 - raised again in the learner's poll
                if getattr(error, "retriable", False):  # see RETRY_POLL_S
                    with self._ready:
                        self._ready.wait(self.RETRY_POLL_S)
                    continue
                with self._ready:
                    self._error = error
                    self._ready.notify_all()
                return
            messages = [m for part in fetched.values() for m in part]
            if messages:
                with self._ready:
                    self._fetched.extend(messages)
                    self._bytes += sum(message_size(m) for m in messages)
                    self._ready.notify_all()

    #: seconds before the poll thread polls again after a retriable error: kafka-python lets a refused
    #: connection out of ``poll`` while it looks for the group's coordinator on a broker that is restarting;
    #: the source's broker watch decides, on empty polls, whether the broker is away for too long
    RETRY_POLL_S = 0.5

    #: seconds between two calls of ``while_waiting`` while a call waits for the poll thread
    WAITING_SLICE_S = 1.0

    def call(self, call, committing: bool = False):
        """Run ``call()`` on the poll thread (or here, before it started) and return its result.

        A call to a broker that went away can wait for minutes (kafka-python's request timeout):
        while it waits, ``while_waiting()`` (set by the source: it reports the outage and raises
        once ``--broker-timeout`` has passed) runs once a ``WAITING_SLICE_S``; while a commit
        (bounded by a timeout of its own) waits, ``while_committing()`` runs instead (it
        reports the outage and never raises)."""
        if self.poll_thread is None or not self.poll_thread.is_alive():
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
            watch = self.while_committing if committing else self.while_waiting
            if watch is not None:
                watch()
        if "error" in done:
            raise done["error"]
        return done["result"]

    def poll(self, timeout_ms: int, max_records: int) -> list:
        if self.poll_thread is None:
            fetched = self.consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
            return [m for part in fetched.values() for m in part]
        deadline = time.monotonic() + timeout_ms / 1000
        with self._ready:
            while not self._fetched and self._error is None and time.monotonic() < deadline:
                self._ready.wait(max(0.0, deadline - time.monotonic()))
            if not self._fetched and self._error is not None:
                raise self._error
            taken = [self._fetched.popleft() for _ in range(min(max_records, len(self._fetched)))]
            self._bytes -= sum(message_size(m) for m in taken)
            self._ready.notify_all()
        return taken

    # -------------------------------------------------------------------------
    def partitions(self) -> list[int]:
        return self.call(lambda: sorted(self.consumer.partitions_for_topic(self.topic) or []))

    def end_offsets(self, partitions) -> dict:
        """Each partition's end (high watermark) as a fetch answers it (see :data:`PROBE_TIMEOUT_S`),
        by a consumer of its own that joins no group; a partition not answered in time is left out."""
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        try:
            if self._probe is None:  # small fetches: only the answers' watermarks are wanted
                self._probe = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                            max_partition_fetch_bytes=1, fetch_max_bytes=1, fetch_max_wait_ms=FETCH_WAIT_MS,
                                            **self._security)
            probe = self._probe
            parts = [self.partition(p) for p in partitions]
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

        committed = {self.partition(p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        try:
            self.call(lambda: self.consumer.commit(offsets=committed, timeout_ms=self.COMMIT_TIMEOUT_MS), committing=True)
        except KafkaError as error:
            raise CommitFailed(str(error)) from None

    def committed(self, partition: int) -> int | None:
        return self.call(lambda: self.consumer.committed(self.partition(partition)))

    #: seconds to wait at close for the poll thread, which may be inside a call to a broker that went away
    CLOSE_TIMEOUT_S = 1.0
    #: milliseconds the consumer's own close may spend leaving the group (kafka-python's default: its request timeout, 30 s)
    CLOSE_TIMEOUT_MS = 800

    def close(self) -> None:
        if self.poll_thread is not None:
            with self._ready:
                self._stop = True
                self._ready.notify_all()
            self.poll_thread.join(self.CLOSE_TIMEOUT_S)
            if self.poll_thread.is_alive():  # still waiting for the broker: the consumer is its, left to the process's exit
                return
            self.poll_thread = None
        if self._probe is not None:
            self._probe.close(timeout_ms=self.CLOSE_TIMEOUT_MS)
        self.consumer.close(autocommit=False, timeout_ms=self.CLOSE_TIMEOUT_MS)
