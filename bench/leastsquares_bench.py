"""Benchmark of the least-squares family (issue 5) on MNIST (pixels in [0, 1]), in one run:

1. the paper's Table 1 (004_6d6f30a18e3b636b.txt): test error of linear (GeneralizedLeastSquares,
   identity link), logistic (GeneralizedLeastSquares, softmax link, Alg. 1 to convergence) and
   calibrated (CalibratedLeastSquares, Alg. 2) least squares on raw pixels and on 4,000 and
   8,000 random Fourier features, next to the paper's numbers, with fit times;
2. stagewise regression (Alg. 3) with blocks of 2,000 random Fourier features and a
   logistic inner fit: test error and time per stage;
3. the peak resident memory of the process (it includes the 8,000-feature runs).

    python -m bench.leastsquares_bench [--stages 8]

Not measured (left open): LIBLINEAR and Vowpal Wabbit on the same random features, and the
text data sets (news20, sector).

Results: bench/results/leastsquares.{json,md}, leastsquares.png.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import time

import numpy as np

from bench.data import load
from streamlearn import CalibratedLeastSquares, GeneralizedLeastSquares, RandomFourierFeatures, StagewiseRegression

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
PAPER = {"raw": (14.1, 7.8, 8.1), "rff4000": (1.83, 1.48, 1.54), "rff8000": (1.48, 1.33, 1.36)}


def median_distance(X: np.ndarray, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    a, b = X[rng.integers(0, len(X), 2000)], X[rng.integers(0, len(X), 2000)]
    return float(np.median(np.linalg.norm(a - b, axis=1)))


def choose_bandwidth(X: np.ndarray, y: np.ndarray) -> tuple[float, dict]:
    """s for the random features, chosen on a validation split of the *training* part
    (train on 20,000, validate on the last 10,000; 2,000 features, linear least squares)
    among fractions of the median distance between training points."""
    median = median_distance(X)
    scores = {}
    for fraction in (0.3, 0.45, 0.6, 0.8, 1.0):
        generator = RandomFourierFeatures(bandwidth=fraction * median, seed=3)
        model = GeneralizedLeastSquares(link="identity", max_features=10_000).fit(generator(X[:20_000], 2000, 0), y[:20_000])
        scores[fraction * median] = error(model, generator(X[-10_000:], 2000, 0), y[-10_000:])
    return min(scores, key=scores.get), {f"{k:.3f}": v for k, v in scores.items()}


def error(model, X: np.ndarray, y: np.ndarray) -> float:
    predictions = np.concatenate([model.predict_many(X[i : i + 1000]).astype(np.int64) for i in range(0, len(X), 1000)])
    return float(np.mean(predictions != y))


def table1(X, y, Xt, yt, s: float) -> list:
    rows = []
    for name, m in (("raw", None), ("rff4000", 4000), ("rff8000", 8000)):
        if m is None:
            F, Ft = X, Xt
        else:
            generator = RandomFourierFeatures(bandwidth=s, seed=7)
            F, Ft = generator(X, m, 0), generator(Xt, m, 0)
        row = {"features": name, "dimensions": F.shape[1], "paper_errors": PAPER[name]}
        for label, make, fit in (
            ("linear", lambda: GeneralizedLeastSquares(link="identity", max_features=10_000), lambda mdl: mdl.fit(F, y)),
            ("logistic", lambda: GeneralizedLeastSquares(link="softmax", max_features=10_000),
             lambda mdl: mdl.fit(F, y, max_iter=100, tol=1e-6)),
            ("calibrated", lambda: CalibratedLeastSquares(stages=5, max_features=10_000), lambda mdl: mdl.fit(F, y)),
        ):
            model = make()
            start = time.perf_counter()
            fit(model)
            seconds = time.perf_counter() - start
            row[label] = {"error": error(model, Ft, yt), "fit_seconds": seconds,
                          "iterations": len(getattr(model, "history_", [])) or None}
            print(name, label, row[label], flush=True)
            del model
        rows.append(row)
        del F, Ft
    return rows


def stagewise(X, y, Xt, yt, s: float, stages: int, block: int) -> dict:
    model = StagewiseRegression(RandomFourierFeatures(bandwidth=s, seed=11), block_size=block, stages=stages,
                                inner="logistic", inner_iterations=20, max_features=10_000)
    start = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - start
    scores = np.zeros((len(Xt), 10))
    labels = np.asarray(model.classes)  # score columns follow the classes in order of first appearance
    per_stage = []
    for t, (columns, W) in enumerate(model._stages):  # replay stage by stage on the test set
        scores += model.generator(Xt[:, columns], block, t) @ W
        per_stage.append({"stage": t + 1, "features": (t + 1) * block, "test_error": float(np.mean(labels[scores.argmax(axis=1)] != yt)),
                          "train_error": model.history_[t]})
    return {"block": block, "fit_seconds": seconds, "seconds_per_stage": seconds / stages, "stages": per_stage}


def write_report(results: dict, out: pathlib.Path) -> None:
    lines = ["# Least-squares family benchmark (issue 5): MNIST", "",
             f"60,000 training / 10,000 test images, pixels in [0, 1]; random Fourier features with bandwidth s = {results['bandwidth']:.2f},",
             "chosen among fractions of the median distance between training points by the validation error of a 20,000 /",
             f"10,000 split of the training part (errors: {results['bandwidth_validation_errors']}). One run (the fits are deterministic).", "",
             "## Table 1: test error % (ours / paper) and fit seconds", "",
             "| features | linear | logistic (Alg. 1) | calibrated (Alg. 2) |", "|---|---|---|---|"]
    for row in results["table1"]:
        cells = []
        for i, label in enumerate(("linear", "logistic", "calibrated")):
            cells.append(f"{100 * row[label]['error']:.2f} / {row['paper_errors'][i]} ({row[label]['fit_seconds']:.1f} s)")
        lines.append(f"| {row['features']} ({row['dimensions']}) | " + " | ".join(cells) + " |")
    sw = results["stagewise"]
    lines += ["", f"## Stagewise regression (Alg. 3): blocks of {sw['block']} random Fourier features, logistic inner fit (20 steps)",
              "", f"{sw['seconds_per_stage']:.1f} s per stage on average.", "", "| stage | features | test error % | train error % |",
              "|---:|---:|---:|---:|"]
    for st in sw["stages"]:
        lines.append(f"| {st['stage']} | {st['features']:,} | {100 * st['test_error']:.2f} | {100 * st['train_error']:.2f} |")
    lines += ["", f"Peak resident memory of the run: {results['peak_rss_gib']:.2f} GiB (the machine has 24 GiB).", ""]
    (out / "leastsquares.md").write_text("\n".join(lines))


def plot(results: dict, out: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    stages = results["stagewise"]["stages"]
    ax.plot([s["features"] for s in stages], [100 * s["test_error"] for s in stages], marker="o", label="stagewise (test)")
    for row in results["table1"][1:]:
        ax.scatter([row["dimensions"]], [100 * row["logistic"]["error"]], marker="x", s=60, label=f"logistic, {row['features']}")
    ax.axhline(1.1, color="k", ls="--", label="paper's stagewise 1.1 %")
    ax.set_xlabel("random Fourier features")
    ax.set_ylabel("MNIST test error %")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "leastsquares.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=int, default=8)
    parser.add_argument("--block", type=int, default=2000)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    split = load("mnist")
    X, Xt = split.X_train.toarray(), split.X_test.toarray()
    y, yt = split.y_train, split.y_test
    s, validation = choose_bandwidth(X, y)
    print("bandwidth", s, validation, flush=True)
    results = {"bandwidth": s, "bandwidth_validation_errors": validation, "table1": table1(X, y, Xt, yt, s), "stagewise": stagewise(X, y, Xt, yt, s, args.stages, args.block)}
    results["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    (out / "leastsquares.json").write_text(json.dumps(results, indent=1))
    write_report(results, out)
    plot(results, out)
    print((out / "leastsquares.md").read_text())


if __name__ == "__main__":
    main()
