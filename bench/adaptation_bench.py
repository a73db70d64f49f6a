"""What ``adapt=True`` costs where nothing changes, for the families that took it after the MCID
learners (issue 41): the Primal Gradient Solver and ExtremeSVM.

    python -m bench.adaptation_bench [--repeats 3] [--out DIR]

One pass (shuffled, ``learn_many`` in blocks of 1,000: ``bench.defaults_bench.one_pass``'s order)
of each learner at its defaults with ``adapt`` on and off, interleaved repeat by repeat so that the
ratio holds on a noisy machine: test accuracy (identical when the watch never fires), changes
detected, and the median learning time. ``MulticlassPGS`` on news20 and MNIST; ``ExtremeSVM`` on
WordNet (10,087 classes) with the exact oracle and with LSH (its watch predicts each row by the
averaged iterate with an exact scan: the cost measured here). Writes
``adaptation.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import numpy as np

from .common import accuracy, machine, pyplot, save_results
from .defaults_bench import SEED

RESULTS_NAME = "adaptation"
#: (data set, learner, its parameters besides adapt)
CELLS = [("news20", "MulticlassPGS", {}), ("mnist", "MulticlassPGS", {}),
         ("wordnet", "ExtremeSVM", {}), ("wordnet", "ExtremeSVM", {"oracle": "lsh", "seed": 1})]
#: --quick (the test suite's smoke run): the bundled set, once
QUICK_CELLS = [("letter", "MulticlassPGS", {}), ("letter", "ExtremeSVM", {})]


def _data(name: str):
    if name == "wordnet":
        from .memoir_bench import data

        return data("test")
    from .data import load

    split = load(name)
    return split.X_train, split.y_train, split.X_test, split.y_test


def one_pass_timed(learner: str, params: dict, X, y, X_test, y_test) -> dict:
    import streamlearn

    model = getattr(streamlearn, learner)(**params)
    order = np.random.default_rng(SEED).permutation(X.shape[0])
    X, y = X[order], y[order]
    seconds = 0.0
    for start in range(0, X.shape[0], 1000):
        t0 = time.perf_counter()
        model.learn_many(X[start : start + 1000], y[start : start + 1000])
        seconds += time.perf_counter() - t0
    model.flush()
    return {"accuracy": accuracy(model.predict_many(X_test), y_test), "seconds": seconds, "changes": model.n_changes}


def cell(name: str, learner: str, params: dict, repeats: int) -> dict:
    X, y, X_test, y_test = _data(name)
    import streamlearn

    getattr(streamlearn, learner)(**params).learn_many(X[:2000], y[:2000])  # compile outside the timed part
    runs = {"on": [], "off": []}
    for _ in range(repeats):
        for key, adapt in (("on", True), ("off", False)):
            runs[key].append(one_pass_timed(learner, {**params, "adapt": adapt}, X, y, X_test, y_test))
    ratios = [a["seconds"] / b["seconds"] for a, b in zip(runs["on"], runs["off"])]
    out = {"set": name, "learner": learner, "params": params, "runs": runs, "time_ratio_median": statistics.median(ratios),
           "time_ratios": ratios}
    for key in runs:
        out[f"accuracy_{key}"] = runs[key][0]["accuracy"]
        out[f"seconds_{key}"] = statistics.median(r["seconds"] for r in runs[key])
        out[f"changes_{key}"] = runs[key][0]["changes"]
    return out


def report(results: dict) -> str:
    m = results["machine"]
    lines = ["# `adapt=True` where nothing changes: PGS and ExtremeSVM (bench/adaptation_bench.py)\n",
             f"`{m['command']}` at `{m['commit'][:10]}`{' (uncommitted changes)' if m['uncommitted_changes'] else ''}, "
             f"{m['cpu']}, {m['cores']} cores. One shuffled pass, `learn_many` in blocks of 1,000, adapt on and off "
             f"interleaved ({results['repeats']} repeats); time = median learning seconds, ratio = median of the "
             "per-repeat ratios.\n",
             "| set | learner | accuracy on | accuracy off | changes detected | seconds on | seconds off | time on / off |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for c in results["cells"]:
        label = c["learner"] + (f"({', '.join(f'{k}={v!r}' for k, v in c['params'].items())})" if c["params"] else "()")
        lines.append(f"| {c['set']} | {label} | {c['accuracy_on']:.4f} | {c['accuracy_off']:.4f} | {c['changes_on']} | "
                     f"{c['seconds_on']:.2f} | {c['seconds_off']:.2f} | {c['time_ratio_median']:.2f}× |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    cells = results["cells"]
    fig, ax = plt.subplots(figsize=(7, 3))
    labels = [f"{c['set']}\n{c['learner']}{' lsh' if c['params'].get('oracle') == 'lsh' else ''}" for c in cells]
    for i, c in enumerate(cells):
        ax.scatter([i] * len(c["time_ratios"]), c["time_ratios"], color="C0", s=12)
        ax.scatter([i], [c["time_ratio_median"]], color="C3", marker="_", s=300)
    ax.set_xticks(range(len(cells)), labels, fontsize=7)
    ax.axhline(1, color="k", lw=0.5)
    ax.set_ylabel("learning time, adapt on / off")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run: letter, one repeat")
    parser.add_argument("--only", default="", help="only the cells whose data set or learner is one of these (comma-separated)")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results"))
    args = parser.parse_args(argv)
    wanted = [w for w in args.only.split(",") if w]
    cells = []
    if args.quick:
        args.repeats = 1
    for name, learner, params in QUICK_CELLS if args.quick else CELLS:
        if wanted and name not in wanted and learner not in wanted:
            continue
        cells.append(cell(name, learner, params, args.repeats))
        c = cells[-1]
        print(f"{name:8s} {learner:14s} {params} acc {c['accuracy_on']:.4f}/{c['accuracy_off']:.4f} "
              f"changes {c['changes_on']} time {c['time_ratio_median']:.2f}x", flush=True)
    results = {"machine": machine(), "repeats": args.repeats, "cells": cells}
    print(save_results(args.out, RESULTS_NAME, results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
