"""Scaling out (issue 26): how much accuracy model mixing keeps against one learner.

**Mixing, in one process** (the model side, :mod:`streamlearn.mixing`): MNIST (the shipped split,
pixels in [0, 1]), one pass in a seeded order, ``MulticlassSVM()`` at its defaults. ``N`` members
take interleaved chunks of 500 rows (as a group's members take partitions). In synchronous rounds
each member learns ``every`` rows of its share from the shared model, then every member's change
is folded in member order, and all go on from the result. Reported, as test accuracy:

* *one learner*: the whole stream, one model;
* *average*: the fold of :mod:`streamlearn.mixing` (each change, its step count included, at
  weight 1/N: the average of the members' models);
* *average, t summed*: the same, but the step counter ``t`` takes every member's steps in full
  (the group's examples), and *sum*: the changes at weight 1 — the two alternatives the fold
  was chosen against;
* *unmixed*: N separate models, each on its share only (the mean of their accuracies).

The Kafka daemons' throughput (1, 2, 3 daemons on this machine) is not measured here yet: the
daemons do not mix yet (``bench/README.md``).

    python -m bench.scaleout_bench            # a few minutes
    python -m bench.scaleout_bench --quick    # the test suite's smoke run

Writes ``bench/results/scaleout.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

from bench.common import accuracy, machine, pyplot, save_results
from bench.data import load

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
CHUNK = 500
SEED = 7
FOLDS = ("average", "average, t summed", "sum")


def shares(n_rows: int, members: int) -> list[np.ndarray]:
    """Each member's rows: interleaved chunks of :data:`CHUNK` rows, in stream order."""
    chunks = np.array_split(np.arange(n_rows), max(1, n_rows // CHUNK))
    return [np.concatenate(chunks[i::members]) for i in range(members)]


def fold(shared, change, members: int, how: str) -> None:
    """Fold ``change`` into ``shared`` the way ``how`` (one of :data:`FOLDS`) says."""
    shared.fold(change, members=1 if how == "sum" else members)
    if how == "average, t summed":
        shared.t += change["steps"] * (1 - 1 / members)


def mixed(X, y, X_test, y_test, members: int, every: int, how: str) -> float:
    """One pass of ``members`` members mixing every ``every`` rows of each share (test accuracy)."""
    from streamlearn import MulticlassSVM
    from streamlearn.mixing import MixState

    models = [MulticlassSVM() for _ in range(members)]
    shared = MixState.of(models[0])
    parts = shares(X.shape[0], members)
    for start in range(0, max(len(p) for p in parts), every):
        base = shared.copy()
        for model, part in zip(models, parts):
            rows = part[start : start + every]
            if len(rows):
                model.learn_many(X[rows], y[rows])
            fold(shared, base.change(model, examples=len(rows)), members, how)
        for model in models:
            shared.write_into(model)
    return accuracy(models[0].predict_many(X_test), y_test)


def unmixed(X, y, X_test, y_test, members: int) -> float:
    """The mean test accuracy of ``members`` separate models, each on its share."""
    from streamlearn import MulticlassSVM

    scores = []
    for part in shares(X.shape[0], members):
        model = MulticlassSVM()
        model.learn_many(X[part], y[part])
        scores.append(accuracy(model.predict_many(X_test), y_test))
    return float(np.mean(scores))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6,000 training rows, two members, two intervals")
    parser.add_argument("--out", default=str(RESULTS), help="folder for scaleout.{json,md,png}")
    args = parser.parse_args(argv)
    from streamlearn import MulticlassSVM

    split = load("mnist")
    order = np.random.default_rng(SEED).permutation(split.X_train.shape[0])
    X, y = split.X_train[order], split.y_train[order]
    X_test, y_test = split.X_test, split.y_test
    if args.quick:
        X, y, X_test, y_test = X[:6000], y[:6000], X_test[:2000], y_test[:2000]
    members_grid, intervals = ((2,), (500, 2000)) if args.quick else ((2, 3), (500, 2000, 10_000))
    one = MulticlassSVM()
    one.learn_many(X, y)
    results = {"machine": machine(), "data": "mnist", "rows": int(X.shape[0]), "one_learner": accuracy(one.predict_many(X_test), y_test),
               "by_members": {}}
    for members in members_grid:
        row = {"unmixed": unmixed(X, y, X_test, y_test, members)}
        for how in FOLDS:
            row[how] = {str(every): mixed(X, y, X_test, y_test, members, every, how) for every in intervals}
        results["by_members"][str(members)] = row
        print(f"{members} members: {row}", file=sys.stderr, flush=True)
    print(save_results(args.out, "scaleout", results, report, plot))
    return 0


def report(results: dict) -> str:
    intervals = list(next(iter(results["by_members"].values()))["average"])
    lines = ["# Scaling out: mixing in one process", "",
             f"Commit {results['machine']['commit'][:10]}; `python -m bench.scaleout_bench` (protocol in its docstring). "
             f"MNIST, {results['rows']:,} training rows, one pass, `MulticlassSVM()`; test accuracy %. One learner on the "
             f"whole stream: **{100 * results['one_learner']:.2f}**.", "",
             "| members | fold | " + " | ".join(f"change every {int(e):,} rows" for e in intervals) + " |",
             "|---:|---|" + "---:|" * len(intervals)]
    for members, row in results["by_members"].items():
        for how in FOLDS:
            lines.append(f"| {members} | {how} | " + " | ".join(f"{100 * row[how][e]:.2f}" for e in intervals) + " |")
        lines.append(f"| {members} | unmixed (mean of {members} models) | " + " | ".join(
            f"{100 * row['unmixed']:.2f}" for _ in intervals) + " |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 4))
    for members, row in results["by_members"].items():
        intervals = [int(e) for e in row["average"]]
        for how, style in zip(FOLDS, ("-o", "-.s", "--x")):
            ax.plot(intervals, [100 * row[how][str(e)] for e in intervals], style, label=f"{members} members, {how}")
        ax.axhline(100 * row["unmixed"], linestyle=":", color="grey")
    ax.axhline(100 * results["one_learner"], color="black", label="one learner")
    ax.set_xscale("log")
    ax.set_xlabel("rows each member learns between mixes")
    ax.set_ylabel("test accuracy %, one pass")
    ax.set_ylim(max(0, 100 * results["one_learner"] - 20), 100)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
