"""Learning a stream that changes: streamlearn's defaults beside river's on river's synthetic streams.

    python -m bench.drift_bench [--jobs 2] [--streams sine,hyperplane,...] [--long] [--stream-seeds 5] [--out DIR]
    python -m bench.drift_bench --benchmark-sets [--seeds 5] [--jobs 2] [--out DIR]
    python -m bench.drift_bench --benchmark-sets --quick --seeds 2 --out DIR   # its smoke run: USPS, MulticlassSVM
    python -m bench.drift_bench --quick --out DIR      # the test suite's smoke run: Sine and Phishing, linear learners

Prequential (test-then-train, every example), each learner behind river's
``preprocessing.StandardScaler()`` as river's examples do, every learner with **no parameter**.
Streams (``STREAMS``): abrupt changes — SEA, Hyperplane, Sine flip, RandomRBF 5-class,
LED → LEDDrift — made by concatenating two of river's generators at the change; a gradual one
(Agrawal, ``ConceptDriftStream`` of width 10k); continuous drift (RandomRBFDrift, Hyperplane
with ``mag_change``); ``--long``: a Sine stream flipped at 10⁴, 10⁵ and 10⁶; and river's bundled
real sets (the three it ships: Phishing, ImageSegments, Bananas) as stationary controls.

Per learner and stream: overall accuracy; for each change, the accuracy over the 5,000 examples
before and after it and the **recovery** — examples from the change until the trailing
1,000-example accuracy is back within 2 points of the 5,000 before (``None``: not within the
stream; counted as the rest of the stream in medians); CPU examples/s of predict + learn (scaler
included). Writes ``bench/results/drift.{json,md,png}``; the PNG is the trailing 1,000-example
accuracy around each change.

``--stream-seeds N``: each synthetic stream drawn N times, its generators' seeds plus 0, 10, …,
10 (N − 1) (no two draws share a generator; N ≤ 10 stays below the defaults protocol's validation
seeds); river's ARF, the slowest peer, and the long stream only on the first draw. The median
recovery is then over the changes of every draw, and the mean accuracy over every draw of the
drifting streams, so that one draw's luck does not decide a comparison. The table of every stream
and the plot show the first draw.

``--benchmark-sets``: what the new defaults (``adapt``, ``fit_intercept``, ``bins``) do where nothing
changes — one pass over each stationary benchmark set (news20, sector, MNIST, USPS, letter;
``bench.defaults_bench.one_pass``: shuffled, ``learn_many`` in blocks of 1,000), test accuracy of
each MCID learner in each of ``STATIONARY_CONFIGS``, and the changes the defaults detected. Writes ``bench/results/drift-stationary.{json,md,png}``.
``--seeds N``: each pass over N shuffles (seeds ``SEED``, ``SEED + 1``, …): one shuffle moves one-pass accuracy by
tenths of a point, the size of the differences asked about, so the table gives means over the shuffles and the
paired difference's mean and standard error.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from .common import machine, pyplot, save_results

RESULTS_NAME = "drift"
#: the shift of every generator's seeds from one draw of a stream to the next (--stream-seeds), and the draws
#: that stay below the defaults protocol's validation shift (bench.options_bench.VALIDATION_SEED = 100)
DRAW_SEED_STEP, MAX_DRAWS = 10, 10
WINDOW, TRAIL, WITHIN = 5000, 1000, 0.02


class Abrupt:
    """``first`` for ``position`` examples, then ``then``."""

    def __init__(self, first, then, position: int):
        self.first, self.then, self.position = first, then, position

    def __iter__(self):
        yield from itertools.islice(self.first, self.position)
        yield from self.then


def _sine(function: int, seed: int):
    from river.datasets import synth

    return synth.Sine(classification_function=function, seed=seed)


def stream(name: str, seed: int = 0):
    """``(examples, length, change positions, kind)`` of a named stream. ``seed`` is added to every
    generator's seeds: 0 gives the streams of the committed results; the defaults protocol
    (``bench.options_bench``) chooses on other seeds than it reports."""
    from river import datasets
    from river.datasets import synth

    s = seed
    if name == "sea":
        return Abrupt(synth.SEA(variant=0, seed=1 + s), synth.SEA(variant=2, seed=2 + s), 20_000), 40_000, [20_000], "abrupt"
    if name == "hyperplane":
        return (Abrupt(synth.Hyperplane(seed=1 + s, n_features=10), synth.Hyperplane(seed=2 + s, n_features=10), 20_000), 40_000,
                [20_000], "abrupt")
    if name == "sine":
        return Abrupt(_sine(0, 1 + s), _sine(1, 2 + s), 20_000), 40_000, [20_000], "abrupt"
    if name == "rbf5":
        return (Abrupt(synth.RandomRBF(seed_model=1 + s, seed_sample=1 + s, n_classes=5, n_features=10),
                       synth.RandomRBF(seed_model=2 + s, seed_sample=2 + s, n_classes=5, n_features=10), 20_000), 40_000, [20_000], "abrupt")
    if name == "led":
        return (Abrupt(synth.LED(seed=1 + s, noise_percentage=0.1, irrelevant_features=True), synth.LEDDrift(seed=2 + s, noise_percentage=0.1, irrelevant_features=True, n_drift_features=7),
                       20_000), 40_000, [20_000], "abrupt")
    if name == "agrawal":
        return (synth.ConceptDriftStream(synth.Agrawal(classification_function=0, seed=1 + s), synth.Agrawal(classification_function=2, seed=2 + s),
                                         position=20_000, width=10_000, seed=3 + s), 40_000, [20_000], "gradual")
    if name == "rbf-drift":
        return (synth.RandomRBFDrift(seed_model=1 + s, seed_sample=1 + s, n_classes=5, n_features=10, change_speed=0.001), 40_000, [],
                "continuous")
    if name == "hyperplane-drift":
        return synth.Hyperplane(seed=1 + s, n_features=10, n_drift_features=5, mag_change=0.001), 40_000, [], "continuous"
    if name == "long":
        examples = Abrupt(Abrupt(Abrupt(_sine(0, 1 + s), _sine(1, 2 + s), 10_000), _sine(0, 3 + s), 100_000), _sine(1, 4 + s), 1_000_000)
        return examples, 1_040_000, [10_000, 100_000, 1_000_000], "long"
    data = getattr(datasets, REAL_SETS[name])()
    return data, data.n_samples, [], "stationary"


ABRUPT = ["sea", "hyperplane", "sine", "rbf5", "led"]
#: river's bundled real sets, the stationary controls
REAL_SETS = {"phishing": "Phishing", "image-segments": "ImageSegments", "bananas": "Bananas"}
STREAMS = [*ABRUPT, "agrawal", "rbf-drift", "hyperplane-drift", "phishing", "image-segments", "bananas"]
#: peers too slow for every stream run on these
TREES_ON = {*ABRUPT, "agrawal", "phishing", "image-segments", "bananas"}


def _learners(stream: str) -> dict:
    from river import forest, linear_model, multiclass, tree

    import streamlearn

    learners = {
        "MulticlassLogisticRegression()": streamlearn.MulticlassLogisticRegression,
        "MulticlassSVM()": streamlearn.MulticlassSVM,
        "MulticlassLogisticRegression(adapt=False)": lambda: streamlearn.MulticlassLogisticRegression(adapt=False),
        "MulticlassLogisticRegression(fit_intercept=False)": lambda: streamlearn.MulticlassLogisticRegression(fit_intercept=False),
        "MulticlassLogisticRegression(bins=None)": lambda: streamlearn.MulticlassLogisticRegression(bins=None),
        "MulticlassSVM(bins=None)": lambda: streamlearn.MulticlassSVM(bins=None),
        "MulticlassPGS(adapt=True)": lambda: streamlearn.MulticlassPGS(adapt=True),
        "MulticlassPGS(adapt=False)": lambda: streamlearn.MulticlassPGS(adapt=False),
        "MulticlassPGS(iterate='average', adapt=True)": lambda: streamlearn.MulticlassPGS(iterate="average", adapt=True),
        "MulticlassPGS(iterate='average', adapt=False)": lambda: streamlearn.MulticlassPGS(iterate="average", adapt=False),
        "ExtremeSVM()": streamlearn.ExtremeSVM,
        "ExtremeSVM(adapt=False)": lambda: streamlearn.ExtremeSVM(adapt=False),
        "river SoftmaxRegression()": linear_model.SoftmaxRegression,
        "river OneVsRest(LogisticRegression())": lambda: multiclass.OneVsRestClassifier(linear_model.LogisticRegression()),
    }
    if stream in TREES_ON:
        learners["river HoeffdingAdaptiveTree"] = tree.HoeffdingAdaptiveTreeClassifier
        learners["river ARF"] = lambda: forest.ARFClassifier(seed=1)
    return learners


def prequential(name: str, learner: str, seed: int = 0) -> dict:
    """One learner over one draw of a stream (``seed``: :func:`stream`'s): every example's hit, and the CPU time."""
    from river import preprocessing

    examples, n, changes, kind = stream(name, seed)
    model, scaler = _learners(name)[learner](), preprocessing.StandardScaler()
    hits = np.zeros(n, bool)
    started = time.process_time()
    for i, (x, y) in enumerate(itertools.islice(examples, n)):
        scaler.learn_one(x)
        z = scaler.transform_one(x)
        hits[i] = model.predict_one(z) == y
        model.learn_one(z, y)
    cpu = time.process_time() - started
    return {"stream": name, "seed": seed, "learner": learner, "kind": kind, "n": n, "changes": changes, "hits": hits,
            "cpu_s": cpu, "n_changes": getattr(model, "n_changes", None)}


def trailing(hits: np.ndarray) -> np.ndarray:
    """``out[e]``: the accuracy over the ``TRAIL`` examples ending before ``e + TRAIL``."""
    return np.convolve(hits.astype(float), np.ones(TRAIL) / TRAIL, "valid")


def around(hits: np.ndarray, change: int, n: int) -> dict:
    """Accuracy before and after a change, and the recovery (see the module docstring)."""
    before = float(hits[max(0, change - WINDOW) : change].mean())
    after = float(hits[change : change + WINDOW].mean())
    trail = trailing(hits)
    back = np.nonzero(trail[change:] >= before - WITHIN)[0]
    recovery = int(back[0] + TRAIL) if len(back) else None
    return {"position": change, "before": before, "after": after, "recovery": recovery,
            "recovery_or_rest": recovery if recovery is not None else n - change}


def summarize(run: dict) -> dict:
    hits = run["hits"]
    return {"stream": run["stream"], "seed": run["seed"], "learner": run["learner"], "kind": run["kind"], "n": run["n"],
            "accuracy": float(hits.mean()), "examples_per_s": run["n"] / run["cpu_s"], "detected": run["n_changes"],
            "changes": [around(hits, c, run["n"]) for c in run["changes"]],
            "curve": {str(c): trailing(hits)[max(0, c - 2 * WINDOW) : c + 3 * WINDOW : 100].round(4).tolist() for c in run["changes"]}}


def _one(task):
    return summarize(prequential(*task))


BENCHMARK_SETS = ["news20", "sector", "mnist", "usps", "letter"]
ADAPTING = ["MulticlassSVM", "MulticlassLogisticRegression", "MulticlassPerceptron", "OneVsRestPegasos",
            "OneVsRestLogisticRegression"]


#: --benchmark-sets' configurations: the defaults, each new default off, all off (the defaults before issue 41), and
#: the bins with another limit on a binned row's nonzero values (``bins_limit``, for binning.MAX_BINNED_NONZEROS)
STATIONARY_CONFIGS = {"defaults": {}, "adapt=False": {"adapt": False}, "fit_intercept=False": {"fit_intercept": False},
                      "bins=None": {"bins": None}, "before (all off)": {"adapt": False, "fit_intercept": False, "bins": None},
                      "bins in every row": {"bins_limit": 10**9}, "bins in rows of ≤ 32 values": {"bins_limit": 32}}
BEFORE = "before (all off)"


def stationary_cell(task) -> dict:
    """One pass of one MCID learner over a benchmark set in each of STATIONARY_CONFIGS, for each
    shuffle seed: ``accuracy[config]`` is the mean over the seeds (``per_seed`` keeps each), and
    ``detected[config]`` the changes detected over all of them."""
    from .data import load
    from .defaults_bench import one_pass

    import unittest.mock

    import streamlearn
    from streamlearn import binning

    name, learner, seeds = task
    split = load(name)
    out = {"set": name, "learner": learner, "seeds": list(seeds), "accuracy": {}, "per_seed": {}, "detected": {}}
    for config, params in STATIONARY_CONFIGS.items():
        models = []
        params = dict(params)
        limit = params.pop("bins_limit", binning.MAX_BINNED_NONZEROS)

        def make(**given):
            models.append(getattr(streamlearn, learner)(**given))
            return models[-1]

        with unittest.mock.patch.object(binning, "MAX_BINNED_NONZEROS", limit):  # (learn_many's road reads it per call)
            scores = [one_pass(make, params, split.X_train, split.y_train, split.X_test, split.y_test, seed) for seed in seeds]
        out["per_seed"][config] = scores
        out["accuracy"][config] = float(np.mean(scores))
        out["detected"][config] = sum(model.n_changes for model in models)
    return out


def paired_difference(cell: dict, config: str = BEFORE) -> tuple[float, float]:
    """Mean and standard error (0 for one seed), in points, of the defaults minus ``config`` over the cell's shuffles."""
    differences = 100 * (np.array(cell["per_seed"]["defaults"]) - np.array(cell["per_seed"][config]))
    error = float(differences.std(ddof=1) / np.sqrt(len(differences))) if len(differences) > 1 else 0.0
    return float(differences.mean()), error


def stationary_report(results: dict) -> str:
    m = results["machine"]
    configs = list(STATIONARY_CONFIGS)
    lines = ["# The new defaults where nothing changes (bench/drift_bench.py --benchmark-sets)\n",
             f"`{m['command']}` at `{m['commit'][:10]}`{' (uncommitted changes)' if m['uncommitted_changes'] else ''}. "
             f"One pass (`learn_many` in blocks of 1,000) over {len(results['cells'][0]['seeds'])} shuffle(s) of the "
             "training part, mean test accuracy of each MCID learner at its defaults (`adapt=True`, `fit_intercept=True`, "
             "`bins=12` in rows of at most 16 nonzero values), with each of them off, with all three off (the defaults "
             "before issue 41), and with the bins in every row or in rows of at most 32 values; the defaults minus "
             "those before and minus `bins=None`, "
             "paired by shuffle: mean ± standard error (points); changes detected by the defaults over all shuffles.\n",
             "| set | learner | " + " | ".join(configs) + " | defaults − before (points) | defaults − bins=None (points) "
             "| changes detected |",
             "|---|---|" + "---:|" * (len(configs) + 3)]
    for c in results["cells"]:
        acc = c["accuracy"]
        mean, error = paired_difference(c)
        unbinned = "{:+.2f} ± {:.2f}".format(*paired_difference(c, "bins=None")) if "bins=None" in acc else "–"
        lines.append(f"| {c['set']} | {c['learner']} | " + " | ".join(f"{acc[k]:.4f}" if k in acc else "–" for k in configs)
                     + f" | {mean:+.2f} ± {error:.2f} | {unbinned} | {c['detected']['defaults']} |")
    means = [paired_difference(c) for c in results["cells"]]
    worst = min(means)
    lines.append(f"\nLargest mean loss of the defaults against those before: {max(-worst[0], 0):.2f} ± {worst[1]:.2f} points; "
                 f"cells losing more than 0.3 points on average: {sum(m < -0.3 for m, _ in means)} of {len(means)}, "
                 f"of which more than two standard errors below −0.3: {sum(m + 2 * e < -0.3 for m, e in means)}.")
    return "\n".join(lines) + "\n"


def stationary_plot(results: dict, path) -> None:
    plt = pyplot()
    cells = results["cells"]
    fig, ax = plt.subplots(figsize=(9, 3.5))
    labels = [f"{c['set']}\n{c['learner'].replace('Multiclass', 'MC').replace('OneVsRest', 'OvR')}" for c in cells]
    others = [config for config in STATIONARY_CONFIGS if config != "defaults" and config in cells[0]["accuracy"]]
    width = 0.8 / len(others)
    for i_config, config in enumerate(others):
        ax.bar([i + width * (i_config + 0.5) - 0.4 for i in range(len(cells))],
               [100 * (c["accuracy"]["defaults"] - c["accuracy"][config]) for c in cells], width=width, label=f"defaults − {config}")
    ax.set_xticks(range(len(cells)), labels, rotation=90, fontsize=6)
    ax.set_ylabel("points")
    ax.axhline(0, color="k", lw=0.5)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--benchmark-sets", action="store_true", help="the new defaults on and off on the stationary benchmark sets")
    parser.add_argument("--quick", action="store_true", help="a smoke run: Sine and Phishing, without the trees")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results"), help="folder of the results")
    parser.add_argument("--streams", default=",".join(STREAMS))
    parser.add_argument("--long", action="store_true", help="also the Sine stream flipped at 1e4, 1e5 and 1e6")
    parser.add_argument("--learners", default="", help="only the learners whose name contains one of these (comma-separated)")
    parser.add_argument("--name", default=RESULTS_NAME, help="the results' file name (without extension; --benchmark-sets adds -stationary)")
    parser.add_argument("--seeds", type=int, default=1, help="--benchmark-sets: shuffles of each set (seeds SEED, SEED + 1, ...)")
    parser.add_argument("--stream-seeds", type=int, default=1, help="draws of each synthetic stream (its seeds + 0, 10, ...)")
    args = parser.parse_args(argv)
    wanted = [w for w in args.learners.split(",") if w]
    results_dir = pathlib.Path(args.out)
    if args.benchmark_sets:
        from .defaults_bench import SEED

        seeds = list(range(SEED, SEED + args.seeds))
        sets, learners = (["usps"], ["MulticlassSVM"]) if args.quick else (BENCHMARK_SETS, ADAPTING)
        tasks = [(s, learner, seeds) for s in sets for learner in learners if not wanted or any(w in learner for w in wanted)]
        with ProcessPoolExecutor(args.jobs) as pool:
            cells = list(pool.map(stationary_cell, tasks))
        results = {"machine": machine(), "cells": cells}
        print(save_results(results_dir, args.name + "-stationary", results, stationary_report, stationary_plot))
        return 0
    streams = ["sine", "phishing"] if args.quick else args.streams.split(",") + (["long"] if args.long else [])
    if not 1 <= args.stream_seeds <= MAX_DRAWS:
        parser.error(f"--stream-seeds must be 1 to {MAX_DRAWS} (the defaults protocol validates on seeds + 100)")
    draws = [DRAW_SEED_STEP * d for d in range(args.stream_seeds)]
    redrawn = {s for s in streams if stream(s)[3] not in ("stationary", "long")}
    tasks = [(s, learner, seed) for s in streams for learner in _learners(s)
             for seed in (draws if s in redrawn else [0])
             if not ((s == "long" or args.quick) and ("ARF" in learner or "Hoeffding" in learner))
             and not (seed and "ARF" in learner)
             and (not wanted or any(w in learner for w in wanted))
             and not (args.quick and ("PGS(" in learner or "Extreme" in learner or "bins=" in learner))]
    cells = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for cell in pool.map(_one, tasks):
            print(f"{cell['stream']:18s} {cell['seed']} {cell['learner']:42s} acc {cell['accuracy']:.4f} "
                  f"recovery {[c['recovery'] for c in cell['changes']]} {cell['examples_per_s']:.0f}/s", flush=True)
            cells.append(cell)
    results = {"machine": machine(), "window": WINDOW, "trail": TRAIL, "within": WITHIN, "cells": cells}
    print(save_results(results_dir, args.name, results, report, plot))
    return 0


def _by_learner(cells: list) -> dict:
    out: dict = {}
    for cell in cells:
        out.setdefault(cell["learner"], []).append(cell)
    return out


def report(results: dict) -> str:
    cells = results["cells"]
    m = results["machine"]
    lines = [f"# Learning a changing stream (bench/drift_bench.py)\n",
             f"`{m['command']}` at `{m['commit'][:10]}`{' (uncommitted changes)' if m['uncommitted_changes'] else ''}, "
             f"{m['cpu']}, river {m['versions']['river']}. Prequential, every learner with no parameter behind "
             "river's `StandardScaler()`. Recovery: examples from the change until the trailing "
             f"{results['trail']:,}-example accuracy is back within {results['within'] * 100:g} points of the "
             f"{results['window']:,} before it (— : never, counted as the rest of the stream in the median).\n",
             "## Summary\n",
             "| learner | median recovery (abrupt) | mean accuracy, drifting streams | … on the trees' streams "
             "| mean accuracy, stationary | examples/s (median) |",
             "|---|---:|---:|---:|---:|---:|"]
    drifting = {(c["stream"], c["seed"]) for c in cells if c["kind"] in ("abrupt", "gradual", "continuous")}
    trees = {(c["stream"], c["seed"]) for c in cells if "Hoeffding" in c["learner"]} & drifting
    for learner, mine in _by_learner(cells).items():
        recoveries = [ch["recovery_or_rest"] for c in mine if c["kind"] == "abrupt" for ch in c["changes"]]
        drift_acc = [c["accuracy"] for c in mine if (c["stream"], c["seed"]) in drifting]
        tree_acc = [c["accuracy"] for c in mine if (c["stream"], c["seed"]) in trees]
        still = [c["accuracy"] for c in mine if c["kind"] == "stationary"]
        covers = "" if len(drift_acc) == len(drifting) else f" ({len(drift_acc)} of {len(drifting)} draws)"
        lines.append(f"| {learner} | {f'{statistics.median(recoveries):,.0f}' if recoveries else '–'} | "
                     f"{f'{np.mean(drift_acc):.4f}' if drift_acc else '–'}{covers} | "
                     f"{f'{np.mean(tree_acc):.4f}' if trees and len(tree_acc) == len(trees) else '–'} | "
                     f"{f'{np.mean(still):.4f}' if still else '–'} | "
                     f"{statistics.median(c['examples_per_s'] for c in mine):,.0f} |")
    draws = len({c["seed"] for c in cells})
    lines += ["", f"Draws of each synthetic stream: {draws} (`--stream-seeds`); the trees' streams: the drifting ones "
              "river's HoeffdingAdaptiveTree ran on (every learner's mean over the same draws).",
              "", "## Every stream (the first draw)\n", "| stream | learner | accuracy | before → after (recovery) per change | detected |",
              "|---|---|---:|---|---:|"]
    for cell in (c for c in cells if c["seed"] == 0):
        changes = "; ".join(f"{c['before']:.3f} → {c['after']:.3f} ({c['recovery'] if c['recovery'] is not None else '—'})"
                            for c in cell["changes"]) or "–"
        lines.append(f"| {cell['stream']} | {cell['learner']} | {cell['accuracy']:.4f} | {changes} | "
                     f"{'' if cell['detected'] is None else cell['detected']} |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    first = [c for c in results["cells"] if c["seed"] == 0]
    panels = sorted({(c["stream"], pos) for c in first for pos in c["curve"]}, key=lambda p: (p[0], int(p[1])))
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.6 * len(panels)), squeeze=False)
    for ax, (stream, pos) in zip(axes[:, 0], panels):
        for cell in first:
            if cell["stream"] == stream and pos in cell["curve"]:
                curve = cell["curve"][pos]
                start = max(0, int(pos) - 2 * WINDOW)
                x = [start + results["trail"] + 100 * i - int(pos) for i in range(len(curve))]
                ax.plot(x, curve, label=cell["learner"], lw=1)
        ax.axvline(0, color="k", lw=0.5)
        ax.set_title(f"{stream}: change at {int(pos):,}", fontsize=9)
        ax.set_ylabel("trailing accuracy", fontsize=8)
    axes[0, 0].legend(fontsize=6, loc="lower left")
    axes[-1, 0].set_xlabel("examples since the change")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    raise SystemExit(main())
