"""Issue 26 end to end: three ``streamlearn train`` daemons in one consumer group learn one model
from a 6-partition topic of MNIST (60,000 records) by mixing through a mixing topic, on a real
broker. "Every record learned exactly once by the group" is checked on the mixing topic itself:
folded in log order, the accepted changes' input ranges tile every partition from its beginning
to its end without gap or overlap, and their examples add up to 60,000; every daemon's last
checkpoint holds that same shared model (its coverage and counts), whose test accuracy is
within :data:`MIXING_COST` of one daemon learning the whole topic alone."""

from __future__ import annotations

import json
import pathlib
import subprocess
import time

import numpy as np
import pytest

from helpers import PYTHON
from conftest import PATIENCE

pytestmark = pytest.mark.slow  # whole processes or every river check: not in the quick subset

PARTITIONS = 6
ROWS_PER_MESSAGE = 100
#: how far below one daemon alone the group's model may score: mixing three members in turn costs
#: 0.25-0.51 points on this split with a fixed schedule (bench/results/scaleout.md; issue 26's target
#: was 0.5), and the daemons' schedule follows the machine's timing, which moves a run by about 0.2
#: more. It catches a fold that breaks the model (the "sum" fold: 56-91 %) or members that do not
#: mix (their models alone: 91.3 %); that no record is lost or doubled is check_exactly_once's to say
MIXING_COST = 0.0075


@pytest.fixture(scope="module")
def mnist(datasets_dir):
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # bench/ is not installed; its MNIST reader is
    from bench.data import load
    from streamlearn.connectors.compact import encode_messages

    split = load("mnist")
    messages = list(encode_messages(split.X_train, np.asarray(split.y_train, np.int64), rows_per_message=ROWS_PER_MESSAGE))
    return split, messages


@pytest.fixture(scope="module")
def mnist_topic(broker, mnist):
    """The MNIST topic on the session's broker and its end offset per partition."""
    from localbroker import create_topic, produce

    create_topic(broker, "mnist-scaleout", PARTITIONS)
    produce(broker, "mnist-scaleout", mnist[1], partitions=PARTITIONS)
    return "mnist-scaleout", _ends(len(mnist[1]))


@pytest.fixture(scope="module")
def alone(broker, mnist, mnist_topic, tmp_path_factory):
    """Test accuracy of one daemon learning the whole topic (no mixing)."""
    ck = tmp_path_factory.mktemp("alone")
    done = subprocess.run([PYTHON, "-m", "streamlearn", "train", f"kafka://{broker}/{mnist_topic[0]}?group=alone",
                           "--checkpoint-dir", str(ck), "--idle-timeout", "3", "--quiet"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return _accuracy(ck, mnist[0])


def _ends(n_messages: int) -> dict:
    return {p: len(range(p, n_messages, PARTITIONS)) for p in range(PARTITIONS)}


def _daemon(bootstrap: str, topic: str, group: str, ck, *extra, env=None) -> subprocess.Popen:
    import os

    return subprocess.Popen([PYTHON, "-m", "streamlearn", "train", f"kafka://{bootstrap}/{topic}?group={group}",
                             "--mix-topic", f"{group}-mix", "--mix-every", "2000", "--checkpoint-dir", str(ck),
                             "--quiet", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def _accuracy(ck, split) -> float:
    from streamlearn import learner_from_state
    from streamlearn.service.checkpoint import CheckpointStore

    model = learner_from_state(CheckpointStore(ck).load_latest()["learner"])
    return float(np.mean(np.asarray(model.predict_many(split.X_test)) == split.y_test))


def _inspect(ck) -> dict:
    done = subprocess.run([PYTHON, "-m", "streamlearn", "inspect", str(ck), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def check_exactly_once(bootstrap: str, mix_topic: str, ends: dict, n_records: int) -> dict:
    """Fold the mixing topic as a member does and check that the accepted ranges tile every
    partition; the accepted examples per member."""
    from streamlearn.connectors.mixlog import MixLog
    from streamlearn.service.mixing import Coverage

    log = MixLog(bootstrap, mix_topic)
    try:
        publications = [publication for _, publication in log.read(0)]
    finally:
        log.close()
    coverage, taken, by_member = Coverage(), {p: [] for p in ends}, {}
    for publication in publications:
        if coverage.accept(publication["ranges"]):
            for p, (start, end) in publication["ranges"].items():
                taken[int(p)].append((start, end))
            by_member[publication["member"]] = by_member.get(publication["member"], 0) + publication["change"]["examples"]
    for p, ranges in taken.items():  # accepted in log order: each starts where the one before ended
        assert ranges[0][0] == 0 and ranges[-1][1] == ends[p], (p, ranges)
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), (p, ranges)
    assert sum(by_member.values()) == n_records
    return by_member


def check_daemons(cks: list, split, ends: dict, n_records: int, alone: float) -> None:
    """Every daemon's last checkpoint: the whole topic covered, every record counted once, the
    accuracy of one daemon alone within :data:`MIXING_COST`."""
    for ck in cks:
        mixing = _inspect(ck)["mixing"]
        assert {int(p): o for p, o in mixing["covered"].items()} == ends
        assert mixing["examples"] == sum(mixing["by_member"].values()) == n_records
        assert abs(_accuracy(ck, split) - alone) <= MIXING_COST, (_accuracy(ck, split), alone)


def _finish(daemons: list) -> list[str]:
    """Wait for every daemon to end well (:data:`PATIENCE`: a net against a hang); their stderr."""
    errors = []
    for daemon in daemons:
        _, err = daemon.communicate(timeout=PATIENCE)
        assert daemon.returncode == 0, err[-3000:]
        errors.append(err)
    return errors


@pytest.mark.kafka
def test_three_daemons_learn_one_model_every_record_once(tmp_path, broker, mnist, mnist_topic, alone):
    split, messages = mnist
    topic, ends = mnist_topic
    cks = [tmp_path / f"d{i}" for i in range(3)]
    _finish([_daemon(broker, topic, "three", ck, "--idle-timeout", "3") for ck in cks])
    by_member = check_exactly_once(broker, "three-mix", ends, len(split.y_train))
    assert len(by_member) == 3  # each daemon brought its share in
    check_daemons(cks, split, ends, len(split.y_train), alone)
    # a daemon that joins later starts from the newest mixed model, not from zero
    late = tmp_path / "late"
    _finish([_daemon(broker, topic, "three", late, "--idle-timeout", "2")])
    check_daemons([late], split, ends, len(split.y_train), alone)


@pytest.mark.kafka
def test_a_daemon_killed_for_good_and_one_killed_and_resumed_lose_and_double_nothing(tmp_path, broker, mnist, mnist_topic,
                                                                                       alone):
    """Daemon 0 dies (SIGKILL) right after its 2nd publication and stays dead: the group
    rebalances and the others learn its partitions on from the shared coverage. Daemon 1 dies
    right after its 4th publication, before folding or checkpointing it, and is restarted with
    ``--resume``: it folds its own publication from the log and does not learn those records
    again."""
    split, messages = mnist
    topic, ends = mnist_topic
    cks = [tmp_path / f"d{i}" for i in range(3)]
    # a daemon waits past its idle timeout while the group's coverage has not reached every partition's end
    daemons = [_daemon(broker, topic, "killed", cks[0], "--idle-timeout", "3", env={"STREAMLEARN_CRASH_AT": "mix-published:2"}),
               _daemon(broker, topic, "killed", cks[1], "--idle-timeout", "3", env={"STREAMLEARN_CRASH_AT": "mix-published:4"}),
               _daemon(broker, topic, "killed", cks[2], "--idle-timeout", "3")]
    for victim in daemons[:2]:
        victim.wait(timeout=PATIENCE)
        assert victim.returncode == -9, victim.stderr.read()[-2000:]
    resumed = _daemon(broker, topic, "killed", cks[1], "--idle-timeout", "3", "--resume")
    _finish([daemons[2], resumed])
    check_exactly_once(broker, "killed-mix", ends, len(split.y_train))
    check_daemons(cks[1:], split, ends, len(split.y_train), alone)


@pytest.mark.kafka
def test_mixing_refuses_what_cannot_mix_with_one_clear_line(tmp_path, broker, mnist_topic):
    topic, _ = mnist_topic
    for extra, message in ((["--learner", "GeneralizedLeastSquares"], "cannot mix"),
                           (["--param", "lam=auto"], "give it one λ")):
        done = subprocess.run([PYTHON, "-m", "streamlearn", "train", f"kafka://{broker}/{topic}?group=refused",
                               "--mix-topic", "refused-mix", "--idle-timeout", "1", *extra], capture_output=True, text=True)
        assert done.returncode != 0 and message in done.stderr, done.stderr
    done = subprocess.run([PYTHON, "-m", "streamlearn", "train", str(pathlib.Path(__file__)), "--mix-topic", "m"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "the source must be kafka://" in done.stderr, done.stderr


def test_mix_every_must_be_positive():
    from streamlearn.service.mixing import GroupMixer

    with pytest.raises(ValueError, match="mix_every must be a positive integer"):
        GroupMixer(log=None, every=0, member="m")
    done = subprocess.run([PYTHON, "-m", "streamlearn", "train", "kafka://127.0.0.1:1/t?group=g", "--mix-topic", "m",
                           "--mix-every", "0"], capture_output=True, text=True)
    assert done.returncode != 0 and "--mix-every must be a positive number" in done.stderr, done.stderr


def _group_examples(ck) -> int:
    from streamlearn.service.checkpoint import CheckpointStore

    payload = CheckpointStore(ck).load_latest() if ck.exists() else None
    return payload["mixing"]["examples"] if payload and "mixing" in payload else 0


#: seconds in which no daemon's checkpoint shows more of the group's work, past which the group is taken as
#: stalled, not slow: a wall-clock limit on the whole half failed a healthy group on a host busy with other work
STALLED_AFTER = 300


def _wait_while_the_group_learns(cks: list, daemons: list, done) -> None:
    """Until ``done(examples)`` holds for the most examples any daemon's checkpoint counts for the group,
    or, with ``done=None``, until every daemon has ended; fails when the checkpoints stop moving for
    :data:`STALLED_AFTER` seconds, or when a daemon ends before ``done``."""
    seen, moved = None, time.monotonic()
    while True:
        counts = [_group_examples(ck) for ck in cks]
        if done is not None and done(max(counts)):
            return
        ended = [d.poll() is not None for d in daemons]
        if done is None and all(ended):
            return
        assert done is None or not any(ended), "a daemon ended before the group had learned what it was given"
        if counts != seen:
            seen, moved = counts, time.monotonic()
        assert time.monotonic() - moved < STALLED_AFTER, f"no checkpoint moved in {STALLED_AFTER} s: {counts}"
        time.sleep(0.5)


@pytest.mark.kafka
def test_a_broker_restart_in_the_middle_loses_and_doubles_nothing(tmp_path, durable, mnist, alone):
    """The first half of the topic is learned by the group; the broker (durable storage) is
    killed and started again on the same address; the second half arrives; the daemons report
    the outage, wait, and end with every record learned once."""
    from localbroker import create_topic, produce

    split, messages = mnist
    half = len(messages) // 2
    assert half % PARTITIONS == 0  # the second half goes on round robin where the first stopped
    create_topic(durable.bootstrap, "mnist-restart", PARTITIONS)
    produce(durable.bootstrap, "mnist-restart", messages[:half], partitions=PARTITIONS)
    cks = [tmp_path / f"d{i}" for i in range(3)]
    # the idle clock stops while the broker is away; the second half must arrive within the timeout after it is back;
    # a checkpoint every 2,000 examples shows the group's progress (at the default 10,000 a daemon's first comes at the half's end)
    daemons = [_daemon(durable.bootstrap, "mnist-restart", "restart", ck, "--idle-timeout", "12", "--checkpoint-every", "2000")
               for ck in cks]
    _wait_while_the_group_learns(cks, daemons, lambda examples: examples >= half * ROWS_PER_MESSAGE)
    durable.stop(crash=True)
    time.sleep(5)  # long enough for every daemon to find the broker away
    durable.start()
    produce(durable.bootstrap, "mnist-restart", messages[half:], partitions=PARTITIONS)
    # whether a daemon reports the outage depends on where it meets it (its source's poll, a commit, the mixing
    # topic report it; one waiting inside a consumer call through a short outage goes on without a word): not checked
    _wait_while_the_group_learns(cks, daemons, None)
    _finish(daemons)
    check_exactly_once(durable.bootstrap, "restart-mix", _ends(len(messages)), len(split.y_train))
    check_daemons(cks, split, _ends(len(messages)), len(split.y_train), alone)
