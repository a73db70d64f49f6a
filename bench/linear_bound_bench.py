"""How well can any linear model do on the drift bench's streams? (issue 41's target against river's
Hoeffding adaptive tree)

    python -m bench.linear_bound_bench                  # ~1 min
    python -m bench.linear_bound_bench --quick --out /tmp/smoke

Writes ``bench/results/linear-bound.json``, ``.md`` and ``.png``.

For each concept of the abrupt and gradual streams of ``bench/drift_bench.py`` (the same generators
and seeds), scikit-learn's ``LogisticRegression`` (behind a ``StandardScaler``, C = 10) is fitted on
``--train`` fresh examples of that concept (its generator continued past the stream's 20,000) and
scored on the stream's own examples of it (Agrawal's 10,000-wide mix is scored as its two concepts): a linear model fitted with hindsight, with no change to follow and no example
spent learning. Its accuracy approximates from above what any linear learner can score on that
stream prequentially (the logistic loss is not the 0/1 loss, so it is an estimate, not a proof).
The streams that drift continuously (RandomRBFDrift, Hyperplane with ``mag_change``) have no fixed
concept and are left out. The mean over the six streams the trees run on is set beside the
tree's accuracy in ``results/drift.json`` when that file is there.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pathlib

import numpy as np

from bench.common import machine, pyplot, save_results

RESULTS = pathlib.Path(__file__).parent / "results"
#: the six streams river's trees run on in drift_bench, each as (concept generators, examples of each)
TREE_STREAMS = ["sea", "hyperplane", "sine", "rbf5", "led", "agrawal"]


def concepts(name: str) -> list:
    """Makers of the concept generators of one drift_bench stream, in order (the same seeds; each
    gives the stream 20,000 examples)."""
    from river.datasets import synth

    makers = {
        "sea": [lambda: synth.SEA(variant=0, seed=1), lambda: synth.SEA(variant=2, seed=2)],
        "hyperplane": [lambda: synth.Hyperplane(seed=1, n_features=10), lambda: synth.Hyperplane(seed=2, n_features=10)],
        "sine": [lambda: synth.Sine(classification_function=0, seed=1), lambda: synth.Sine(classification_function=1, seed=2)],
        "rbf5": [lambda m=m: synth.RandomRBF(seed_model=m, seed_sample=m, n_classes=5, n_features=10) for m in (1, 2)],
        "led": [lambda: synth.LED(seed=1, noise_percentage=0.1, irrelevant_features=True),
                lambda: synth.LEDDrift(seed=2, noise_percentage=0.1, irrelevant_features=True, n_drift_features=7)],
        "agrawal": [lambda: synth.Agrawal(classification_function=0, seed=1), lambda: synth.Agrawal(classification_function=2, seed=2)],
    }
    if name not in makers:
        raise ValueError(f"no fixed concepts for stream {name!r}")
    return makers[name]


def _arrays(examples, n: int):
    xs, ys = zip(*itertools.islice(examples, n))
    keys = list(xs[0])
    return np.array([[x[k] for k in keys] for x in xs], float), np.array(ys)


def bound(name: str, n_train: int, n_test: int) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    scores = []
    for make in concepts(name):
        # fresh examples: the same generator past the stream's 20,000 (its concept does not move)
        X, y = _arrays(itertools.islice(make(), 20_000, None), n_train)
        X_test, y_test = _arrays(make(), n_test)
        model = make_pipeline(StandardScaler(), LogisticRegression(C=10.0, max_iter=2000)).fit(X, y)
        scores.append(float((model.predict(X_test) == y_test).mean()))
    return float(np.mean(scores))


def tree_accuracy(path: pathlib.Path) -> dict:
    if not path.exists():
        return {}
    cells = json.loads(path.read_text())["cells"]
    return {c["stream"]: c["accuracy"] for c in cells if c["learner"] == "river HoeffdingAdaptiveTree"}


def report(results: dict) -> str:
    lines = ["# The best linear model with hindsight on the drift bench's streams", "",
             f"Commit {results['machine']['commit'][:10]}; `{results['machine']['command']}`; "
             f"{results['train']:,} fresh examples per concept, scored on the stream's own {results['test']:,}.", "",
             "| stream | linear bound | river HoeffdingAdaptiveTree (drift.json) |", "|---|---:|---:|"]
    for name, value in results["bound"].items():
        tree = results["tree"].get(name)
        lines.append(f"| {name} | {value:.4f} | " + ("" if tree is None else f"{tree:.4f}") + " |")
    tree_mean = results["mean_tree"]
    lines.append(f"| **mean** | **{results['mean_bound']:.4f}** | " + ("" if tree_mean is None else f"**{tree_mean:.4f}**") + " |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    names = list(results["bound"])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(np.arange(len(names)) - 0.2, [results["bound"][n] for n in names], 0.4, label="linear, with hindsight")
    ax.bar(np.arange(len(names)) + 0.2, [results["tree"].get(n, np.nan) for n in names], 0.4, label="river HAT, prequential")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("accuracy")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2,000 examples per concept")
    parser.add_argument("--train", type=int, default=50_000, help="fresh examples each concept's model is fitted on")
    parser.add_argument("--out", default=str(RESULTS), help="folder of the results")
    args = parser.parse_args(argv)
    n_train, n_test = (2000, 2000) if args.quick else (args.train, 20_000)
    bounds = {name: bound(name, n_train, n_test) for name in TREE_STREAMS}
    trees = tree_accuracy(RESULTS / "drift.json")
    results = {"machine": machine(), "train": n_train, "test": n_test, "bound": bounds, "tree": trees,
               "mean_bound": float(np.mean(list(bounds.values()))),
               "mean_tree": float(np.mean([trees[n] for n in TREE_STREAMS])) if all(n in trees for n in TREE_STREAMS) else None}
    print(save_results(args.out, "linear-bound", results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
