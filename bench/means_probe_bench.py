"""How many coarse lists the mean-example index probes (``ExtremeSVM``'s ``oracle_params={"n_probe": p}``,
:mod:`streamlearn.memoir.means`) against accuracy and speed, beside the exact scan (issue 73.14: on an
embedding stream of ~10⁴ classes the default was ~10 points below ``oracle="exact"``).

    python -m bench.means_probe_bench [--classes 10000,100000] [--examples 40000,200000] [--probes 2,4,8,16]
    python -m bench.means_probe_bench --quick --out /tmp/smoke

Two streams, d = 128: **clustered**, ``bench.dense_extreme_bench.embedding_stream`` (siblings of 20
classes around a centre, power-law frequencies, classes appearing over time), and **uniform**
(:func:`uniform_stream`: prototypes spread uniformly over the sphere, every class equally frequent
from the start, each example its prototype plus Gaussian noise of norm ~0.5 of it: no structure
for the coarse lists to follow). One pass in ``learn_many`` blocks of 1,000, the next quarter as
many rows the test. Each shape runs twice: on a **validation** stream (the
generator's seed shifted by 1,000: what a choice of the default may look at) and on the **reported**
stream (the bench's seed). Measured: test accuracy, learning and prediction examples/s (CPU time),
for each ``n_probe`` and, where ``--exact-up-to`` allows, ``oracle="exact"``.

Writes ``means-probe.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np

from streamlearn import ExtremeSVM

from .common import accuracy, machine, pyplot, save_results
from .dense_extreme_bench import SEED, embedding_stream

RESULTS_NAME = "means-probe"
VALIDATION_SHIFT = 1000


def uniform_stream(n: int, n_classes: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit rows and their classes (module docstring: the uniform stream)."""
    rng = np.random.default_rng(seed)
    prototypes = rng.standard_normal((n_classes, dim))
    labels = rng.integers(0, n_classes, n)
    X = prototypes[labels] + 0.5 * rng.standard_normal((n, dim))
    return X / np.linalg.norm(X, axis=1, keepdims=True), labels


STREAMS = {"clustered": lambda n, k, seed: embedding_stream(n, k, 128, seed=seed),
           "uniform": lambda n, k, seed: uniform_stream(n, k, 128, seed)}


def one_run(make, X, y, n_train: int) -> dict:
    """Learn the first ``n_train`` rows, predict the rest: accuracy and CPU examples/s of each."""
    model = make()
    start = time.process_time()
    for i in range(0, n_train, 1000):
        model.learn_many(X[i : min(i + 1000, n_train)], y[i : min(i + 1000, n_train)])
    learned = time.process_time()
    predicted = model.predict_many(X[n_train:])
    done = time.process_time()
    n_test = len(y) - n_train
    return {"accuracy": accuracy(predicted, y[n_train:]), "learn_per_s": n_train / max(learned - start, 1e-9),
            "predict_per_s": n_test / max(done - learned, 1e-9), "classes_seen": len(model.classes)}


def run_shape(stream: str, n_classes: int, n_train: int, probes: list[int], exact: bool) -> dict:
    out = {"stream": stream, "classes": n_classes, "examples": n_train}
    for split, seed in (("validation", SEED + VALIDATION_SHIFT), ("reported", SEED)):
        X, y = STREAMS[stream](n_train + n_train // 4, n_classes, seed)
        X = np.asarray(X, np.float64)
        runs = {f"n_probe={p}": one_run(lambda p=p: ExtremeSVM(oracle_params={"n_probe": p}), X, y, n_train) for p in probes}
        if exact:
            runs["exact"] = one_run(lambda: ExtremeSVM(oracle="exact"), X, y, n_train)
        out[split] = runs
        print(stream, n_classes, split, {k: round(v["accuracy"], 4) for k, v in runs.items()}, flush=True)
    return out


def report(results: dict) -> str:
    lines = ["# The mean-example index's lists probed (`n_probe`) against accuracy and speed", "",
             f"Commit {results['machine']['commit'][:10]}; CPU time, one pass, blocks of 1,000 rows; d = 128.", "",
             "| stream | classes | examples | candidate | validation acc. | reported acc. | learn ex/s | predict rows/s |",
             "|---|---:|---:|---|---:|---:|---:|---:|"]
    for shape in results["shapes"]:
        for name, run in shape["reported"].items():
            val = shape["validation"][name]
            lines.append(f"| {shape['stream']} | {shape['classes']:,} | {shape['examples']:,} | {name} | {val['accuracy']:.4f} | "
                         f"{run['accuracy']:.4f} | {run['learn_per_s']:,.0f} | {run['predict_per_s']:,.0f} |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for shape in results["shapes"]:
        names = [n for n in shape["reported"] if n.startswith("n_probe")]
        ax.plot([int(n.split("=")[1]) for n in names], [shape["reported"][n]["accuracy"] for n in names], "o-",
                label=f"{shape['stream']}, {shape['classes']:,} classes")
        if "exact" in shape["reported"]:
            ax.axhline(shape["reported"]["exact"]["accuracy"], ls="--", color="grey", label=f"exact, {shape['stream']}, {shape['classes']:,}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n_probe")
    ax.set_ylabel("test accuracy (reported stream)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", default="10000,100000")
    parser.add_argument("--examples", default="40000,200000", help="examples learned, one per --classes entry")
    parser.add_argument("--probes", default="2,4,8,16")
    parser.add_argument("--streams", default="clustered,uniform")
    parser.add_argument("--exact-up-to", type=int, default=10_000, help="run oracle='exact' on shapes of at most this many classes")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 500 classes, 3,000 examples, two probes")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    if args.quick:
        args.classes, args.examples, args.probes = "500", "3000", "2,8"
    probes = [int(p) for p in args.probes.split(",")]
    shapes = [run_shape(stream, int(k), int(n), probes, int(k) <= args.exact_up_to) for stream in args.streams.split(",")
              for k, n in zip(args.classes.split(","), args.examples.split(","))]
    print(save_results(args.out, RESULTS_NAME, {"machine": machine(), "shapes": shapes}, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
