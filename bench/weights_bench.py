"""Class and example weights on imbalanced streams (issue 77): the MCID default learner without and
with ``class_weight="balanced"``, beside scikit-learn's ``SGDClassifier.partial_fit`` and river's
``StandardScaler | OneVsRestClassifier(LogisticRegression)`` without and with per-example weights of
the same running class balance, in the same run; and the speed cost of weights.

    python -m bench.weights_bench [--examples 40000] [--draws 3]
    python -m bench.weights_bench --quick --out /tmp/smoke

Streams (rows kept by rejection so that the class priors are those named, falling geometrically
from the first class to the last): river's Agrawal (9 raw attributes; binary) and RandomRBF (10
classes, 10 features) at 1:10 and 1:100, and the bundled ``letter`` training set (26 classes, 15,000
rows, in a shuffled order per draw) at 1:10. Features are standardised by each learner's own means
(``standardize=True``; a ``StandardScaler`` fitted on the first block for SGD; river's online
scaler). ``class_weight="balanced"`` weighs a row ``1 / (K f_k)`` from the running frequencies
(:class:`streamlearn.class_weights.RunningBalance`); the peers get that very weight per example as
``sample_weight`` / ``w`` (scikit-learn's ``partial_fit`` refuses ``class_weight="balanced"``: it
needs the whole data's frequencies). Learned in blocks of 500, prequentially: each block is predicted
before it is learned. Measured: accuracy, balanced accuracy (mean per-class recall), macro-F1 and
the recall of the rarest class; medians over ``--draws`` draws. Speed: ``learn_many`` on the
RandomRBF 1:10 stream with ``w=None``, ``w`` all 1 and ``class_weight="balanced"``, CPU time of
interleaved runs, the median of the per-pair ratios.

Writes ``weights.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import time

import numpy as np

from streamlearn import MulticlassSVM
from streamlearn.class_weights import RunningBalance

from .common import machine, pyplot, save_results

RESULTS_NAME = "weights"
BLOCK = 500


def imbalanced_stream(kind: str, ratio: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``n`` rows of ``kind`` whose class priors fall geometrically to ``1/ratio``."""
    if kind == "letter":
        from streamlearn.datasets import letter

        rows = list(letter("train"))
        order = np.random.default_rng(seed).permutation(len(rows))
        source = ((rows[i][0], rows[i][1] - 1) for i in order)
        n_classes, width = 26, 16
    else:
        from river.datasets import synth

        if kind == "agrawal":
            source, n_classes = synth.Agrawal(classification_function=2, seed=seed), 2
        else:
            source, n_classes = synth.RandomRBF(seed_model=seed, seed_sample=seed + 1, n_classes=10, n_features=10), 10
        width = None
    keep = ratio ** (-np.arange(n_classes) / (n_classes - 1))
    rng = np.random.default_rng(seed)
    X, y = [], []
    for x, label in source:
        if rng.random() < keep[int(label)]:
            X.append([x.get(j, 0.0) for j in range(1, width + 1)] if width else list(x.values()))
            y.append(int(label))
            if len(y) == n:
                break
    return np.asarray(X, np.float64), np.asarray(y, np.int64)


def scores(predicted: np.ndarray, y: np.ndarray) -> dict:
    """Accuracy, balanced accuracy, macro-F1 and the rarest class's recall."""
    classes = np.unique(y)
    recall = np.array([np.mean(predicted[y == k] == k) for k in classes])
    precision = np.array([np.mean(y[predicted == k] == k) if (predicted == k).any() else 0.0 for k in classes])
    f1 = np.where(recall + precision > 0, 2 * recall * precision / np.maximum(recall + precision, 1e-300), 0.0)
    rarest = int(np.argmin([np.sum(y == k) for k in classes]))
    return {"accuracy": float(np.mean(predicted == y)), "balanced_accuracy": float(recall.mean()),
            "macro_f1": float(f1.mean()), "minority_recall": float(recall[rarest])}


def prequential(learner: str, X, y, weights) -> dict:
    """Predict each block, then learn it (``weights``: ``"balanced"`` for streamlearn, the running
    balance's weights per row for the peers, ``None``); the learning's CPU time apart."""
    blocks = [(lo, min(lo + BLOCK, len(y))) for lo in range(0, len(y), BLOCK)]
    predicted, learn_time = [], 0.0
    if learner == "streamlearn":
        model = MulticlassSVM(standardize=True, class_weight="balanced" if weights is not None else None)
        predict, learn = lambda lo, hi: model.predict_many(X[lo:hi]), lambda lo, hi: model.learn_many(X[lo:hi], y[lo:hi])
    elif learner == "SGD":
        from sklearn.linear_model import SGDClassifier
        from sklearn.preprocessing import StandardScaler

        model, Z, classes = SGDClassifier(random_state=0), StandardScaler().fit(X[:BLOCK]).transform(X), np.unique(y)
        predict = lambda lo, hi: model.predict(Z[lo:hi])  # noqa: E731
        learn = lambda lo, hi: model.partial_fit(Z[lo:hi], y[lo:hi], classes=classes,  # noqa: E731
                                                 sample_weight=None if weights is None else weights[lo:hi])
    else:
        model, rows = river_model(), [dict(enumerate(row)) for row in X.tolist()]
        predict = lambda lo, hi: [model.predict_one(x) for x in rows[lo:hi]]  # noqa: E731

        def learn(lo, hi):
            for i in range(lo, hi):
                model.learn_one(rows[i], int(y[i]), w=1.0 if weights is None else float(weights[i]))
    for lo, hi in blocks:
        if lo:
            predicted.append(np.asarray([-1 if p is None else p for p in predict(lo, hi)], np.int64))
        start = time.process_time()
        learn(lo, hi)
        learn_time += time.process_time() - start
    return {**scores(np.concatenate(predicted), y[BLOCK:]), "learn_s": learn_time}


def river_model():
    from river import linear_model, multiclass, preprocessing

    return preprocessing.StandardScaler() | multiclass.OneVsRestClassifier(linear_model.LogisticRegression())


def run_stream(kind: str, ratio: float, n: int, draws: int) -> dict:
    runs = {f"{learner}{' balanced' if weighted else ''}": []
            for learner, weighted in itertools.product(("streamlearn", "SGD", "river"), (False, True))}
    for draw in range(draws):
        X, y = imbalanced_stream(kind, ratio, n, seed=draw)
        weights = RunningBalance().weights(y)
        for name in runs:
            runs[name].append(prequential(name.split()[0], X, y, weights if name.endswith("balanced") else None))
    medians = {name: {key: float(np.median([r[key] for r in rs])) for key in rs[0]} for name, rs in runs.items()}
    return {"stream": f"{kind} 1:{ratio:g}", "examples": len(y), "draws": draws, "medians": medians, "runs": runs}


def speed(n: int, pairs: int) -> dict:
    """CPU seconds of ``learn_many`` over one stream in blocks: no weights, every weight 1, balanced."""
    X, y = imbalanced_stream("rbf", 10.0, n, seed=0)
    ones = np.ones(len(y))
    ways = {"w=None": ({}, None), "w=1": ({}, ones), 'class_weight="balanced"': ({"class_weight": "balanced"}, None)}
    times = {name: [] for name in ways}
    for _ in range(pairs):
        for name, (params, w) in ways.items():
            model = MulticlassSVM(standardize=True, **params)
            start = time.process_time()
            for lo in range(0, len(y), BLOCK):
                model.learn_many(X[lo : lo + BLOCK], y[lo : lo + BLOCK], None if w is None else w[lo : lo + BLOCK])
            times[name].append(time.process_time() - start)
    base = np.array(times["w=None"])
    return {"examples": len(y), "pairs": pairs, "seconds": times,
            "ratio": {name: float(np.median(np.array(t) / base)) for name, t in times.items()}}


def report(results: dict) -> str:
    lines = ["# Class and example weights on imbalanced streams", "",
             f"Commit {results['machine']['commit'][:10]}; prequential over blocks of {BLOCK}; medians over the draws; "
             "balanced: the running class balance (class_weight=\"balanced\"; the peers get its weights per row); "
             "learn time in CPU seconds.", "",
             "| stream | learner | accuracy | balanced accuracy | macro-F1 | rarest class's recall | learn s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    lines += [table_row(stream["stream"], name, stream["medians"]) for stream in results["streams"] for name in stream["medians"]]
    cost = results["speed"]
    lines += ["", f"Speed of `MulticlassSVM(standardize=True).learn_many` on {cost['examples']:,} rows of RandomRBF 1:10 "
              f"(CPU time, median of {cost['pairs']} interleaved per-run ratios to `w=None`):", "",
              "| weights | time / no weights |", "|---|---:|"]
    lines += [f"| {name} | {ratio:.3f}× |" for name, ratio in cost["ratio"].items()]
    return "\n".join(lines) + "\n"


def table_row(stream: str, name: str, medians: dict) -> str:
    run = medians[name]
    return (f"| {stream} | {name} | {run['accuracy']:.4f} | {run['balanced_accuracy']:.4f} | {run['macro_f1']:.4f} | "
            f"{run['minority_recall']:.4f} | {run['learn_s']:.3f} |")


def plot(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(results["streams"][0]["medians"])
    width = 0.8 / len(names)
    for j, name in enumerate(names):
        ax.bar(np.arange(len(results["streams"])) + j * width, [s["medians"][name]["balanced_accuracy"] for s in results["streams"]],
               width, label=name)
    ax.set_xticks(np.arange(len(results["streams"])) + 0.4 - width / 2, [s["stream"] for s in results["streams"]])
    ax.set_ylabel("prequential balanced accuracy (mean recall)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=40_000)
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=15, help="interleaved runs of the speed comparison (each ~0.1 s of CPU: noisy alone)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2,000 examples, one draw, two streams")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    shapes = [("agrawal", 10.0), ("agrawal", 100.0), ("rbf", 10.0), ("rbf", 100.0), ("letter", 10.0)]
    if args.quick:
        args.examples, args.draws, args.pairs, shapes = 2000, 1, 1, shapes[::2]
    streams = [run_stream(kind, ratio, args.examples, args.draws) for kind, ratio in shapes]
    results = {"machine": machine(), "streams": streams, "speed": speed(args.examples, args.pairs)}
    print(save_results(args.out, RESULTS_NAME, results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
