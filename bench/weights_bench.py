"""Per-example weights on imbalanced streams (issue 77): the MCID default learner without and with
inverse-frequency weights, beside scikit-learn's ``SGDClassifier.partial_fit`` with the same
``sample_weight``, in the same run.

    python -m bench.weights_bench [--examples 40000] [--draws 3]
    python -m bench.weights_bench --quick --out /tmp/smoke

Streams (river's generators, rows kept by rejection so that the class priors are those named): Agrawal
(9 raw attributes, standardised by the learners' own ``standardize=True`` / a ``StandardScaler``
fitted on the first block for SGD), binary at 1:10 and 1:100; RandomRBF, 10 classes, 10 features,
priors falling geometrically from the first class to the last at 1:10 and 1:100. Each row's weight is
``n_seen / (K_seen · count_seen(y))`` from the counts of the rows before it and itself (what a
streaming user can compute; ``class_weight="balanced"`` is not built yet). Learned in ``learn_many`` /
``partial_fit`` blocks of 500, prequentially: each block is predicted before it is learned. Measured:
prequential accuracy and balanced accuracy (the mean of the per-class recalls), and the CPU time of
learning with and without weights (medians over ``--draws`` draws of each stream).

Writes ``weights.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import time

import numpy as np

from streamlearn import MulticlassSVM

from .common import machine, pyplot, save_results

RESULTS_NAME = "weights"
BLOCK = 500


def imbalanced_stream(kind: str, ratio: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of river's generator ``kind`` whose class priors fall geometrically to ``1/ratio``."""
    from river.datasets import synth

    if kind == "agrawal":
        source, n_classes = synth.Agrawal(classification_function=2, seed=seed), 2
    else:
        source, n_classes = synth.RandomRBF(seed_model=seed, seed_sample=seed + 1, n_classes=10, n_features=10), 10
    priors = ratio ** (-np.arange(n_classes) / (n_classes - 1))
    keep = priors / priors.max()
    rng = np.random.default_rng(seed)
    X, y = [], []
    for x, label in source:
        if rng.random() < keep[int(label)]:
            X.append(list(x.values()))
            y.append(int(label))
            if len(y) == n:
                break
    return np.asarray(X, np.float64), np.asarray(y, np.int64)


def running_weights(y: np.ndarray) -> np.ndarray:
    """Each row's inverse-frequency weight from the counts up to it (module docstring)."""
    counts, out = {}, np.empty(len(y))
    for i, label in enumerate(y.tolist()):
        counts[label] = counts.get(label, 0) + 1
        out[i] = (i + 1) / (len(counts) * counts[label])
    return out


def balanced_accuracy(predicted: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean([np.mean(predicted[y == k] == k) for k in np.unique(y)]))


def prequential(learner: str, X, y, weights) -> dict:
    """Predict each block, then learn it; the learning's CPU time apart."""
    if learner == "streamlearn":
        model, learn_time, predicted = MulticlassSVM(standardize=True), 0.0, []
        for lo in range(0, len(y), BLOCK):
            hi = min(lo + BLOCK, len(y))
            if lo:
                predicted.append(np.asarray(model.predict_many(X[lo:hi]), np.int64))
            start = time.process_time()
            model.learn_many(X[lo:hi], y[lo:hi], None if weights is None else weights[lo:hi])
            learn_time += time.process_time() - start
    else:
        from sklearn.linear_model import SGDClassifier
        from sklearn.preprocessing import StandardScaler

        model, learn_time, predicted = SGDClassifier(random_state=0), 0.0, []
        scaler = StandardScaler().fit(X[:BLOCK])
        Z, classes = scaler.transform(X), np.unique(y)
        for lo in range(0, len(y), BLOCK):
            hi = min(lo + BLOCK, len(y))
            if lo:
                predicted.append(model.predict(Z[lo:hi]))
            start = time.process_time()
            model.partial_fit(Z[lo:hi], y[lo:hi], classes=classes, sample_weight=None if weights is None else weights[lo:hi])
            learn_time += time.process_time() - start
    predicted, truth = np.concatenate(predicted), y[BLOCK:]
    return {"accuracy": float(np.mean(predicted == truth)), "balanced_accuracy": balanced_accuracy(predicted, truth),
            "learn_s": learn_time}


def run_stream(kind: str, ratio: float, n: int, draws: int) -> dict:
    runs = {f"{learner}{' weighted' if weighted else ''}": []
            for learner, weighted in itertools.product(("streamlearn", "SGD"), (False, True))}
    for draw in range(draws):
        X, y = imbalanced_stream(kind, ratio, n, seed=draw)
        weights = running_weights(y)
        for name in runs:
            runs[name].append(prequential(name.split()[0], X, y, weights if name.endswith("weighted") else None))
    medians = {name: {key: float(np.median([r[key] for r in rs])) for key in rs[0]} for name, rs in runs.items()}
    return {"stream": f"{kind} 1:{ratio:g}", "examples": n, "draws": draws, "medians": medians, "runs": runs}


def report(results: dict) -> str:
    lines = ["# Per-example weights on imbalanced streams", "",
             f"Commit {results['machine']['commit'][:10]}; prequential over blocks of {BLOCK}; medians over the draws; "
             "weights: running inverse class frequency; learn time in CPU seconds.", "",
             "| stream | learner | accuracy | balanced accuracy | learn s | weighted / unweighted learn time |",
             "|---|---|---:|---:|---:|---:|"]
    lines += [table_row(stream["stream"], name, stream["medians"]) for stream in results["streams"] for name in stream["medians"]]
    return "\n".join(lines) + "\n"


def table_row(stream: str, name: str, medians: dict) -> str:
    """One learner's line of the report; a weighted run's learning time also as a ratio to its unweighted twin's."""
    run, base = medians[name], medians[name.split()[0]]["learn_s"]
    ratio = f"{run['learn_s'] / base:.2f}×" if name.endswith("weighted") and base > 0 else ""
    return f"| {stream} | {name} | {run['accuracy']:.4f} | {run['balanced_accuracy']:.4f} | {run['learn_s']:.3f} | {ratio} |"


def plot(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(results["streams"][0]["medians"])
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        ax.bar(np.arange(len(results["streams"])) + j * width, [s["medians"][name]["balanced_accuracy"] for s in results["streams"]],
               width, label=name)
    ax.set_xticks(np.arange(len(results["streams"])) + 0.4 - width / 2, [s["stream"] for s in results["streams"]])
    ax.set_ylabel("prequential balanced accuracy")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=40_000)
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2,000 examples, one draw, two streams")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    shapes = [("agrawal", 10.0), ("agrawal", 100.0), ("rbf", 10.0), ("rbf", 100.0)]
    if args.quick:
        args.examples, args.draws, shapes = 2000, 1, shapes[::2]
    streams = [run_stream(kind, ratio, args.examples, args.draws) for kind, ratio in shapes]
    print(save_results(args.out, RESULTS_NAME, {"machine": machine(), "streams": streams}, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
