"""Calibration benchmark: test log-loss of the probabilities after one pass, against scikit-learn.

    python -m bench.calibration_bench                      # news20, sector, MNIST, USPS, letter (~10 min)
    python -m bench.calibration_bench --quick --out /tmp/smoke   # letter only (the test suite's)

Writes ``bench/results/calibration.json``, ``.md`` and ``.png``.

Each learner learns the training part once, in the order given, in batches of 1,000 rows, with
its defaults: ``MulticlassLogisticRegression`` and ``OneVsRestLogisticRegression`` with the
fitted temperature (``calibrate=True``, :mod:`streamlearn.calibration`) and without it, and
``SGDClassifier(loss="log_loss")`` through ``partial_fit`` on the same batches (every class given
up front). The test log-loss is the mean of ``-log p(true class)``, each probability floored at
1e-15 as ``sklearn.metrics.log_loss`` does; the uniform guess scores ``log K``. Issue 41's target:
below ``log K`` on every set, and within 10 % of SGD's log-loss.
"""

from __future__ import annotations

import argparse
import pathlib
import warnings

import numpy as np

from bench.common import machine, pyplot, save_results
from bench.data import load
from streamlearn import MulticlassLogisticRegression, OneVsRestLogisticRegression

SETS = ["news20", "sector", "mnist", "usps", "letter"]
BATCH = 1000
FLOOR = 1e-15


def _log_loss(proba: np.ndarray, targets: np.ndarray) -> float:
    return float(-np.mean(np.log(np.clip(proba[np.arange(len(targets)), targets], FLOOR, 1.0))))


def _ours(cls, split, classes, **params) -> dict:
    model = cls(**params)
    for start in range(0, split.X_train.shape[0], BATCH):
        model.learn_many(split.X_train[start : start + BATCH], split.y_train[start : start + BATCH])
    frame = model.predict_proba_many(split.X_test)
    proba = np.zeros((split.X_test.shape[0], len(classes)))
    proba[:, np.searchsorted(classes, np.asarray(frame.columns))] = frame.to_numpy()
    targets = np.searchsorted(classes, split.y_test)
    # accuracy from the predictions (the scores' argmax): the raw sigmoids of the one-vs-rest learner tie at 1.0
    return {"log_loss": _log_loss(proba, targets), "accuracy": float(np.mean(np.asarray(model.predict_many(split.X_test)) == split.y_test)),
            "temperature": model.temperature}


def _sgd(split, classes) -> dict:
    from sklearn.linear_model import SGDClassifier

    model = SGDClassifier(loss="log_loss", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for start in range(0, split.X_train.shape[0], BATCH):
            model.partial_fit(split.X_train[start : start + BATCH], split.y_train[start : start + BATCH], classes=classes)
        proba = model.predict_proba(split.X_test)
    targets = np.searchsorted(classes, split.y_test)
    return {"log_loss": _log_loss(proba, targets), "accuracy": float(np.mean(proba.argmax(axis=1) == targets))}


def run(sets: list) -> dict:
    from tqdm import tqdm

    rows = []
    for name in tqdm(sets, desc="sets"):
        split = load(name)
        classes = np.unique(np.concatenate([split.y_train, split.y_test]))
        row = {"set": name, "classes": len(classes), "uniform": float(np.log(len(classes))), "sgd_log_loss": _sgd(split, classes)}
        for cls in (MulticlassLogisticRegression, OneVsRestLogisticRegression):
            row[cls.__name__] = _ours(cls, split, classes)
            row[cls.__name__ + " calibrate=False"] = _ours(cls, split, classes, calibrate=False)
        rows.append(row)
    return {"machine": machine(), "rows": rows}


LEARNERS = ["MulticlassLogisticRegression", "OneVsRestLogisticRegression"]


def report(results: dict) -> str:
    lines = ["# Calibration: test log-loss after one pass (lower is better)", "",
             f"Commit {results['machine']['commit'][:10]}; `{results['machine']['command']}`.", "",
             "| set | K | uniform (log K) | SGD log_loss | " + " | ".join(f"{n} | ratio to SGD | raw softmax" for n in LEARNERS) + " |",
             "|---|---:|---:|---:|" + "---:|---:|---:|" * len(LEARNERS)]
    for row in results["rows"]:
        sgd = row["sgd_log_loss"]["log_loss"]
        cells = [f"{row[n]['log_loss']:.3f} | {row[n]['log_loss'] / sgd:.2f} | {row[n + ' calibrate=False']['log_loss']:.3f}"
                 for n in LEARNERS]
        lines.append(f"| {row['set']} | {row['classes']} | {row['uniform']:.3f} | {sgd:.3f} | " + " | ".join(cells) + " |")
    same = all(row[n]["accuracy"] == row[n + " calibrate=False"]["accuracy"] for row in results["rows"] for n in LEARNERS)
    lines += ["", ("Test accuracy is the same with and without the temperature on every set (one temperature keeps every argmax): "
                   if same else "Test accuracy **differs** with and without the temperature on some set; with it: ")
              + ", ".join(f"{row['set']} {row[LEARNERS[0]]['accuracy']:.4f}" for row in results["rows"])
              + " (MulticlassLogisticRegression); SGD: "
              + ", ".join(f"{row['set']} {row['sgd_log_loss']['accuracy']:.4f}" for row in results["rows"]) + "."]
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    rows = results["rows"]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.2
    x = np.arange(len(rows))
    bars = [("uniform", [r["uniform"] for r in rows]), ("SGD log_loss", [r["sgd_log_loss"]["log_loss"] for r in rows])]
    bars += [(n, [r[n]["log_loss"] for r in rows]) for n in LEARNERS]
    for i, (label, values) in enumerate(bars):
        ax.bar(x + (i - 1.5) * width, values, width, label=label)
    ax.set_xticks(x, [r["set"] for r in rows])
    ax.set_ylabel("test log-loss, one pass")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run on letter only")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results"), help="folder of the results")
    args = parser.parse_args(argv)
    results = run(["letter"] if args.quick else SETS)
    print(save_results(args.out, "calibration", results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
