"""The live model end to end: a daemon learns while an HTTP service answers from its checkpoints.

    python examples/serve_live.py

1. ``streamlearn train - --checkpoint-dir DIR --predictions DIR/predictions.jsonl`` learns the
   bundled letter training data as it arrives on stdin (a checkpoint every second), writing the
   prediction it makes for each record before learning it; every tenth record comes without its
   label, and is predicted, not learned;
2. ``streamlearn serve --checkpoint-dir DIR`` answers ``POST /predict`` from the newest checkpoint
   and reloads each new one (the live page is at ``/``);
3. while the data flows, a client asks the service about one held-out record and prints how the
   answer changes with each checkpoint; at the end it scores the service on the held-out set and
   reads ``/model`` and ``/metrics``.
"""

from __future__ import annotations

import bz2
import json
import pathlib
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "streamlearn" / "data"


def call(url: str, body: bytes | None = None):
    with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=30) as response:
        raw = response.read()
        return json.loads(raw) if "json" in response.headers.get("Content-Type", "") else raw.decode()


def main() -> dict:
    train_lines = bz2.decompress((DATA / "letter.scale.bz2").read_bytes()).decode().splitlines()
    test_lines = bz2.decompress((DATA / "letter.scale.t.bz2").read_bytes()).decode().splitlines()
    fed = [line.split(" ", 1)[1] if i % 10 == 9 else line for i, line in enumerate(train_lines)]  # every 10th: no label
    held_out = [({j: float(v) for j, v in (f.split(":") for f in line.split()[1:])}, int(line.split()[0])) for line in test_lines]
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp) / "model"
        trainer = subprocess.Popen([sys.executable, "-m", "streamlearn.service.cli", "train", "-", "--checkpoint-dir", str(directory),
                                    "--checkpoint-interval", "1", "--predictions", str(directory / "predictions.jsonl"),
                                    "--batch-records", "500", "--quiet"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        trainer.stdin.write(("\n".join(fed[:500]) + "\n").encode())
        trainer.stdin.flush()
        while not list(directory.glob("ckpt-*.slc")):
            time.sleep(0.1)
        service = subprocess.Popen([sys.executable, "-m", "streamlearn.service.cli", "serve", "--checkpoint-dir", str(directory),
                                    "--port", "0", "--reload-interval", "0.2"], stderr=subprocess.PIPE, text=True)
        url = service.stderr.readline().split()[2].rstrip("/")
        print(f"service at {url}/ (open it in a browser for the live page)")
        probe = json.dumps({"x": held_out[0][0]}).encode()
        seen, answers_seen = None, set()
        try:
            for start in range(500, len(fed), 1000):  # the stream goes on, 1,000 records a step
                trainer.stdin.write(("\n".join(fed[start : start + 1000]) + "\n").encode())
                trainer.stdin.flush()
                time.sleep(0.4)
                answer = call(f"{url}/predict?proba=1", probe)
                answers_seen.add(answer["sequence"])
                if answer["sequence"] != seen and answer["prediction"] is not None:  # None: no class learned yet
                    seen = answer["sequence"]
                    print(f"checkpoint {seen:3d}: predicts {answer['prediction']} for a held-out {held_out[0][1]} "
                          f"(p = {answer['proba'][str(answer['prediction'])]:.2f})")
            trainer.stdin.close()
            trainer.wait(timeout=60)
            time.sleep(0.5)  # the last checkpoint, reloaded
            answers = [a for i in range(0, len(held_out), 1000)  # 1,000 records a request: under the default --max-body
                       for a in call(f"{url}/predict", json.dumps([{"x": x} for x, _ in held_out[i : i + 1000]]).encode())["predictions"]]
            correct = sum(a["prediction"] == y for a, (_, y) in zip(answers, held_out))
            info = call(f"{url}/model")
            print(f"final model: {info['learner']}, {info['records_learned']:,} records learned, checkpoint {info['sequence']}")
            print(f"held-out accuracy through the service: {correct / len(held_out):.2%} ({len(held_out):,} records)")
            metrics = [line for line in call(f"{url}/metrics").splitlines() if line.startswith("streamlearn_prequential_accuracy")]
            print(f"/metrics: {metrics[0]}")
            predictions = (directory / "predictions.jsonl").read_text().splitlines()
            unlabelled = sum(json.loads(line)["label"] is None for line in predictions)
            print(f"predictions file: {len(predictions):,} lines, {unlabelled:,} for records without a label")
        finally:
            service.terminate()
            service.wait(timeout=30)
    return {"accuracy": correct / len(held_out), "checkpoints_answered": len(answers_seen), "predictions": len(predictions),
            "unlabelled": unlabelled, "learned": info["records_learned"]}


if __name__ == "__main__":
    main()
