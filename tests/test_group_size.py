"""The group-sized assignor on a real broker: members of one consumer group split a topic's
partitions and each learns how many members the group has, again after one leaves."""

import threading
import time

from streamlearn.connectors.kafka_clients import group_sized_assignor
from localbroker import create_topic


def test_every_member_learns_the_group_size_and_the_partitions_are_split(broker):
    from kafka import KafkaConsumer

    create_topic(broker, "group-sized", partitions=4)
    seen: dict = {}

    def member(name: str, seconds: float, done) -> None:
        assignor = group_sized_assignor()
        consumer = KafkaConsumer(bootstrap_servers=broker, group_id="group-sized", enable_auto_commit=False,
                                 session_timeout_ms=6000, heartbeat_interval_ms=500,
                                 partition_assignment_strategy=[assignor])
        consumer.subscribe(["group-sized"])
        states = seen.setdefault(name, [])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
            state = (tuple(sorted(tp.partition for tp in consumer.assignment())), assignor.group_size)
            if state[0] and (not states or states[-1] != state):
                states.append(state)
            if done(states):
                break
        consumer.close()

    def shared_then_alone(states):
        return any(size == 2 for _, size in states) and states[-1] == ((0, 1, 2, 3), 1)

    def shared(states):  # held until the other member has seen its share too (a fixed 2 s was not always enough)
        return bool(states) and states[-1][1] == 2 and any(size == 2 for _, size in seen.get("staying", []))

    staying = threading.Thread(target=member, args=("staying", 30.0, shared_then_alone))
    leaving = threading.Thread(target=member, args=("leaving", 15.0, shared))
    staying.start()
    leaving.start()
    leaving.join()
    staying.join()
    both = [s for s in seen["staying"] if s[1] == 2]
    assert both and seen["leaving"] and seen["leaving"][-1][1] == 2, seen
    assert set(both[-1][0]).isdisjoint(seen["leaving"][-1][0])
    assert set(both[-1][0]) | set(seen["leaving"][-1][0]) == {0, 1, 2, 3}
    assert seen["staying"][-1] == ((0, 1, 2, 3), 1), seen  # alone after the other left


def test_a_member_sees_records_past_the_group_coverage_even_where_list_offsets_falls_short(broker):
    """A member idle past its timeout stops only once the group's coverage reaches every
    partition's end. Tansu answers ListOffsets with the start of a partition's last record batch
    plus one: here, one batch of 40 records per partition, it says 1. The ends come from fetches."""
    from streamlearn.connectors.kafka import KafkaSource
    from localbroker import produce

    create_topic(broker, "group-ends", partitions=2)
    produce(broker, "group-ends", [b"1,a:1" for _ in range(80)], partitions=2)  # one producer batch per partition
    source = KafkaSource(broker, "group-ends", group="group-ends", subscribe=True, value_format="csv")
    try:
        batches = iter(source)
        next(batches)  # connects and joins
        client = source.consumer
        assert client.end_offsets([0, 1]) == {0: 40, 1: 40}
        source.set_starts({0: 40, 1: 39})
        assert source.left_to_learn()  # partition 1 holds one record past the coverage
        source.set_starts({0: 40, 1: 40})
        assert not source.left_to_learn()
    finally:
        source.close()
