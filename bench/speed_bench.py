"""Small-record and dense-row speed (issue 41, item 5), against river and scikit-learn in one run.

    python -m bench.speed_bench                         # ~5 min on 2 cores
    python -m bench.speed_bench --quick --out /tmp/smoke   # the test suite's smoke run

Writes ``bench/results/speed.json``, ``.md`` and ``.png``.

* **one example at a time**: ``predict_one`` then ``learn_one`` on each example of river's
  ``Hyperplane`` (binary, 10 features) and ``LED`` (10 classes, 24 features) streams, CPU
  seconds (``time.process_time``) per example. Ours: ``MulticlassLogisticRegression()`` with
  its defaults and with the papers' solver (``adapt``, ``fit_intercept``, ``calibrate`` and ``bins`` off);
  river: ``LogisticRegression()`` on the binary stream, ``OneVsRestClassifier(LogisticRegression())``
  and ``SoftmaxRegression()`` on the 10-class one. Targets: ≥ 1× river's ``LogisticRegression``
  on the binary stream, ≥ 2× its one-vs-rest on the 10-class one.
* **dense rows**: ``learn_many`` of ``MulticlassSVM`` on USPS and MNIST as dense float64 arrays
  in batches of 1,000 against ``SGDClassifier(loss="hinge").partial_fit`` on the same arrays
  (the same λ = alpha, no averaging on either side: ``average=False`` and ``adapt``, ``fit_intercept``,
  ``calibrate``, ``bins`` off for ours, ``fit_intercept=False`` for SGD — like for like), and ours with
  its defaults. Target: ≥ 5× ``partial_fit``.

Every measurement is repeated ``--repeats`` times, the candidates interleaved within each
repeat, and the median reported with the per-repeat ratios' range.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time
import warnings

import numpy as np

from bench.common import machine, pyplot, save_results
from bench.data import load
from streamlearn import MulticlassLogisticRegression, MulticlassSVM

PAPER = {"adapt": False, "fit_intercept": False, "calibrate": False, "bins": None}
LAMBDA = 1e-4
BATCH = 1000


def _per_example(make, stream) -> float:
    """CPU seconds per example of ``predict_one`` + ``learn_one`` over ``stream``."""
    model = make()
    start = time.process_time()
    for x, y in stream:
        model.predict_one(x)
        model.learn_one(x, y)
    return (time.process_time() - start) / len(stream)


def _per_row(learn, X, y) -> float:
    """CPU seconds per row of ``learn(X_batch, y_batch)`` over ``X`` in batches."""
    start = time.process_time()
    for first in range(0, len(y), BATCH):
        learn(X[first : first + BATCH], y[first : first + BATCH])
    return (time.process_time() - start) / len(y)


def one_at_a_time(n: int, repeats: int) -> dict:
    from river import datasets, linear_model, multiclass

    streams = {"Hyperplane (2 classes, 10 features)": list(datasets.synth.Hyperplane(seed=1, n_features=10).take(n)),
               "LED (10 classes, 24 features)": list(datasets.synth.LED(seed=1, noise_percentage=0.1, irrelevant_features=True).take(n))}
    peers = {
        "Hyperplane (2 classes, 10 features)": {"river LogisticRegression": linear_model.LogisticRegression},
        "LED (10 classes, 24 features)": {"river OvR LogisticRegression": lambda: multiclass.OneVsRestClassifier(linear_model.LogisticRegression()),
                                          "river SoftmaxRegression": linear_model.SoftmaxRegression},
    }
    results = {}
    for name, stream in streams.items():
        makers = {"ours, defaults": MulticlassLogisticRegression,
                  "ours, papers' solver": lambda: MulticlassLogisticRegression(**PAPER), **peers[name]}
        times = {label: [] for label in makers}
        for _ in range(repeats):
            for label, make in makers.items():
                times[label].append(_per_example(make, stream))
        results[name] = _summary(times, next(iter(peers[name])))
    return results


def dense_rows(sets: list, repeats: int) -> dict:
    from sklearn.linear_model import SGDClassifier

    results = {}
    for name in sets:
        split = load(name)
        X, y = split.X_train.toarray(), split.y_train
        classes = np.unique(y)

        def sgd():
            model = SGDClassifier(loss="hinge", alpha=LAMBDA, fit_intercept=False, random_state=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return _per_row(lambda a, b: model.partial_fit(a, b, classes=classes), X, y)

        makers = {"ours, like for like": lambda: _per_row(MulticlassSVM(lam=LAMBDA, average=False, **PAPER).learn_many, X, y),
                  "ours, defaults": lambda: _per_row(MulticlassSVM().learn_many, X, y),
                  "sklearn SGDClassifier partial_fit": sgd}
        times = {label: [] for label in makers}
        for _ in range(repeats):
            for label, measure in makers.items():
                times[label].append(measure())
        results[f"{name} (dense, {X.shape[1]} features)"] = _summary(times, "sklearn SGDClassifier partial_fit")
    return results


def _summary(times: dict, peer: str) -> dict:
    """Median examples/s of each candidate, and each one's speed-up over ``peer`` (median and
    range of the per-repeat ratios)."""
    out = {}
    for label, seconds in times.items():
        ratios = [p / s for p, s in zip(times[peer], seconds)]
        out[label] = {"examples_per_s": 1.0 / statistics.median(seconds), "ratio_to_peer": statistics.median(ratios),
                      "ratio_range": [min(ratios), max(ratios)], "peer": peer}
    return out


def report(results: dict) -> str:
    lines = ["# Small-record and dense-row speed (CPU time)", "",
             f"Commit {results['machine']['commit'][:10]}; `{results['machine']['command']}`; "
             f"medians of {results['repeats']} interleaved repeats.", "",
             "| workload | candidate | examples/s | × peer (median, range) | peer |", "|---|---|---:|---:|---|"]
    for section in ("one_at_a_time", "dense_rows"):
        for workload, candidates in results[section].items():
            for label, r in candidates.items():
                lines.append(f"| {workload} | {label} | {r['examples_per_s']:,.0f} | {r['ratio_to_peer']:.2f} "
                             f"({r['ratio_range'][0]:.2f}–{r['ratio_range'][1]:.2f}) | {r['peer']} |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    rows = [(f"{w.split(' (')[0]}: {label}", r["examples_per_s"]) for section in ("one_at_a_time", "dense_rows")
            for w, candidates in results[section].items() for label, r in candidates.items()]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1))
    ax.barh(range(len(rows)), [v for _, v in rows])
    ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("examples per CPU second (median)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: short streams, USPS only, one repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results"), help="folder of the results")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    results = {"machine": machine(), "repeats": repeats,
               "one_at_a_time": one_at_a_time(2000 if args.quick else 20000, repeats),
               "dense_rows": dense_rows(["usps"] if args.quick else ["usps", "mnist"], repeats)}
    print(save_results(args.out, "speed", results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
