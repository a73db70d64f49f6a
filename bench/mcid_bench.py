"""MCID benchmark: streamlearn's five MCID learners against peers, in one run.

    python -m bench.mcid_bench            # all datasets (about 15-25 min on 2 cores)
    python -m bench.mcid_bench --quick --out /tmp/smoke   # a smoke run on USPS (the test suite's)

Writes ``bench/results/mcid.json``, ``bench/results/mcid.md`` and ``bench/results/mcid_*.png``.

What is measured (every ratio is between numbers taken in this same process and run):

* throughput (examples/s, median of ``--repeats`` runs): ``learn_many`` on in-memory CSR
  batches of 1,000 rows against scikit-learn ``SGDClassifier.partial_fit`` on the same
  batches (``MulticlassSVM`` with its one-pass parameters, and *plain*: the same λ without
  the averaged iterate and the projection, the cheapest step); ``learn_one`` on dicts
  against river ``SoftmaxRegression.learn_one`` on the same dicts;
* held-out accuracy after 1 and 5 passes (each pass in a seeded random order) for the
  five learners, scikit-learn SGD (hinge, log loss), river SoftmaxRegression (1 pass
  only: 5 passes of river's pure-Python learner take too long), Vowpal Wabbit ``--oaa``
  through its own command-line driver, and LIBLINEAR ``-s 4`` (Crammer–Singer, batch);
* hyper-parameters (λ, averaging (none, plain, polynomial-decay) and projection for ours, alpha for SGD, C for LIBLINEAR)
  chosen on a validation split carved from the training part (last 20 %), never on the test part;
* the paper's Fig. 3 (MCID vs one-vs-rest at equal iterations) and Fig. 1 (seconds to a
  fixed held-out accuracy as the training set grows, median of 5 runs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
from tqdm import tqdm

from bench.common import machine, pyplot, write_vw
from bench.data import Split, load
from streamlearn import (
    MulticlassLogisticRegression,
    MulticlassPerceptron,
    MulticlassSVM,
    OneVsRestLogisticRegression,
    OneVsRestPegasos,
)

#: the papers' solver: no restart on a detected change (streamlearn.adaptation), no intercept, no temperature
#: (streamlearn.calibration) and no feature bins, so that these experiments are the paper's and their results do
#: not hang on a detector
PAPER = {"adapt": False, "fit_intercept": False, "calibrate": False, "bins": None}
OURS = [MulticlassSVM, MulticlassLogisticRegression, MulticlassPerceptron, OneVsRestPegasos, OneVsRestLogisticRegression]
LAMBDAS = [1e-6, 1e-5, 1e-4, 3e-4, 1e-3]
ALPHAS = [1e-6, 1e-5, 1e-4, 3e-4, 1e-3]  # the same grid for scikit-learn's alpha (its λ)
CS = {"news20": [0.1, 1.0, 10.0], "sector": [0.1, 1.0, 10.0], "mnist": [0.01, 0.1]}
# the last iterate, the plain average, the polynomial-decay average (power 2)
AVERAGES = [{"average": False}, {"average": True, "average_power": 0.0}, {"average": True, "average_power": 2.0}]
BATCH = 1000
SEED = 7
warnings.filterwarnings("ignore")


def accuracy(pred, y) -> float:
    return float(np.mean(np.asarray(pred).astype(np.int64) == y))


def pass_orders(n: int, passes: int, seed: int = SEED) -> list:
    rng = np.random.default_rng(seed)
    return [rng.permutation(n) for _ in range(passes)]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ------------------------------------------------------------------ our learners
def train_ours(cls, params, split: Split, orders) -> dict:
    """Train pass by pass on the given orders; accuracy after 1 and after all passes."""
    model = cls(**params, **PAPER)
    out = {}
    for p, order in enumerate(orders, 1):
        X, y = split.X_train[order], split.y_train[order]
        for i in range(0, X.shape[0], BATCH):
            model.learn_many(X[i : i + BATCH], y[i : i + BATCH])
        if p in (1, len(orders)):
            out[p] = accuracy(model.predict_many(split.X_test), split.y_test)
    return out


def choose_ours(cls, split: Split, passes: int) -> tuple[dict, float]:
    """(λ, average, average_power, project) with the best validation accuracy after
    ``passes`` passes."""
    val = split.validation()
    orders = pass_orders(val.X_train.shape[0], passes)
    best = None
    for lam in LAMBDAS:
        for average in AVERAGES:
            for project in (False, True):
                params = {"lam": lam, **average, "project": project}
                acc = train_ours(cls, params, val, orders)[passes]
                if best is None or acc > best[1]:
                    best = (params, acc)
    return best


# ------------------------------------------------------------------------- peers
def sgd_model(loss, alpha):
    from sklearn.linear_model import SGDClassifier

    return SGDClassifier(loss=loss, alpha=alpha, random_state=SEED)


def train_sgd(loss, alpha, split: Split, orders) -> dict:
    model = sgd_model(loss, alpha)
    classes = np.unique(np.concatenate([split.y_train, split.y_test]))
    out = {}
    for p, order in enumerate(orders, 1):
        X, y = split.X_train[order], split.y_train[order]
        for i in range(0, X.shape[0], BATCH):
            model.partial_fit(X[i : i + BATCH], y[i : i + BATCH], classes=classes)
        if p in (1, len(orders)):
            out[p] = accuracy(model.predict(split.X_test), split.y_test)
    return out


def choose_sgd(loss, split: Split, passes: int):
    val = split.validation()
    orders = pass_orders(val.X_train.shape[0], passes)
    scored = [(a, train_sgd(loss, a, val, orders)[passes]) for a in ALPHAS]
    return max(scored, key=lambda s: s[1])


def as_dicts(X, rows) -> list:
    return [dict(zip(X.indices[X.indptr[i] : X.indptr[i + 1]].tolist(), X.data[X.indptr[i] : X.indptr[i + 1]].tolist())) for i in rows]


def river_softmax_one_pass(split: Split, order) -> float:
    from river.linear_model import SoftmaxRegression

    model = SoftmaxRegression()
    X = split.X_train
    for start in range(0, len(order), 5000):
        chunk = order[start : start + 5000]
        for x, y in zip(as_dicts(X, chunk), split.y_train[chunk].tolist()):
            model.learn_one(x, y)
    preds = [model.predict_one(x) for x in as_dicts(split.X_test, range(split.X_test.shape[0]))]
    return accuracy(preds, split.y_test)


def vw_run(split: Split, passes: int, workdir: str) -> dict:
    """Vowpal Wabbit --oaa through its own driver: train time and test accuracy."""
    labels = np.unique(np.concatenate([split.y_train, split.y_test]))
    to_vw = {int(c): k + 1 for k, c in enumerate(labels)}  # VW wants labels 1..K
    y_tr = np.array([to_vw[int(c)] for c in split.y_train])
    y_te = np.array([to_vw[int(c)] for c in split.y_test])
    train, test = os.path.join(workdir, "train.vw"), os.path.join(workdir, "test.vw")
    order = pass_orders(split.X_train.shape[0], 1)[0]
    write_vw(train, split.X_train, y_tr, order)
    write_vw(test, split.X_test, y_te, range(split.X_test.shape[0]))
    model, preds = os.path.join(workdir, "m.vw"), os.path.join(workdir, "p.txt")
    cmd = [sys.executable, "-m", "vowpalwabbit", "-d", train, "--oaa", str(len(labels)), "-f", model, "--quiet"]
    if passes > 1:
        cache = os.path.join(workdir, "c.cache")
        if os.path.exists(cache):
            os.remove(cache)
        cmd += ["--passes", str(passes), "--holdout_off", "--cache_file", cache]
    seconds = timed(lambda: subprocess.run(cmd, check=True))
    subprocess.run([sys.executable, "-m", "vowpalwabbit", "-t", "-i", model, "-d", test, "-p", preds, "--quiet"], check=True)
    pred = np.loadtxt(preds).astype(int)
    return {"accuracy": float(np.mean(pred == y_te)), "seconds": seconds, "examples_per_s": passes * len(order) / seconds}


def liblinear_cs(split: Split, C: float) -> tuple[float, float]:
    from liblinear.liblinearutil import parameter, predict, problem, train

    prob = problem(split.y_train.astype(float), split.X_train)
    start = time.perf_counter()
    model = train(prob, parameter(f"-s 4 -c {C} -q"))
    seconds = time.perf_counter() - start
    pred, _, _ = predict(split.y_test.astype(float), split.X_test, model, "-q")
    return accuracy(pred, split.y_test), seconds


# -------------------------------------------------------------------- throughput
#: each streamlearn learn_many row and the scikit-learn row it is compared with (same λ = alpha)
PAIRS = {
    "streamlearn learn_many, plain": "sklearn SGD hinge partial_fit",
    # the scikit-learn face's cost: the same learner through streamlearn.sklearn's partial_fit
    "streamlearn.sklearn partial_fit, plain": "streamlearn learn_many, plain",
    "streamlearn learn_many, averaged": "sklearn SGD hinge partial_fit, averaged",
    "streamlearn learn_one": "river SoftmaxRegression learn_one",
}


def throughput(split: Split, params: dict, repeats: int) -> dict:
    """examples/s of each side, like for like: ``MulticlassSVM(lam=λ)`` against
    ``SGDClassifier(loss="hinge", alpha=λ)`` (each library's default step, no averaging: the
    target ratio), and ``MulticlassSVM`` with its one-pass parameters (averaged iterate)
    against ``SGDClassifier(..., average=True)``; λ is the validated one-pass λ."""
    X, y = split.X_train, split.y_train
    classes = np.unique(y)
    lam = params["lam"]
    # the same CSR batches for both sides, cut once outside the timing (slicing is neither's work)
    batches = [(X[i : i + BATCH], y[i : i + BATCH]) for i in range(0, X.shape[0], BATCH)]

    def ours_many(chosen: dict):
        model = MulticlassSVM(**chosen, **PAPER)
        for X_batch, y_batch in batches:
            model.learn_many(X_batch, y_batch)

    def sgd_many(loss, average=False):
        from sklearn.linear_model import SGDClassifier

        model = SGDClassifier(loss=loss, alpha=lam, average=average, random_state=SEED)
        for X_batch, y_batch in batches:
            model.partial_fit(X_batch, y_batch, classes=classes)

    def face_many():
        from streamlearn.sklearn import MulticlassSVMClassifier

        model = MulticlassSVMClassifier(lam=lam, average=False, **PAPER)
        for X_batch, y_batch in batches:
            model.partial_fit(X_batch, y_batch, classes=classes)

    n_one, n_river = min(20000, X.shape[0]), 2000
    dicts = as_dicts(X, range(n_one))
    labels = y[:n_one].tolist()

    def ours_one():
        model = MulticlassSVM(**params, **PAPER)
        for x, label in zip(dicts, labels):
            model.learn_one(x, label)

    def river_one():
        from river.linear_model import SoftmaxRegression

        model = SoftmaxRegression()
        for x, label in zip(dicts[:n_river], labels[:n_river]):
            model.learn_one(x, label)

    MulticlassSVM(**params, **PAPER).learn_many(X[:10], y[:10])  # load the kernels first
    sides = [  # (name, examples per run, run)
        ("streamlearn learn_many, plain", X.shape[0], lambda: ours_many({"lam": lam, "average": False})),
        ("sklearn SGD hinge partial_fit", X.shape[0], lambda: sgd_many("hinge")),
        ("streamlearn.sklearn partial_fit, plain", X.shape[0], face_many),
        ("streamlearn learn_many, averaged", X.shape[0], lambda: ours_many(params)),
        ("sklearn SGD hinge partial_fit, averaged", X.shape[0], lambda: sgd_many("hinge", average=True)),
        ("sklearn SGD log partial_fit", X.shape[0], lambda: sgd_many("log_loss")),
        ("streamlearn learn_one", n_one, ours_one),
        ("river SoftmaxRegression learn_one", n_river, river_one),
    ]
    runs = {name: [] for name, _, _ in sides}
    # Interleaved, so that machine noise hits every side alike, and the order rotated from repeat
    # to repeat: a run right after another side's large allocations was measured up to 3x slower
    # than the same run later in the round, so no side may always take the same slot.
    for repeat in range(repeats):
        shift = repeat % len(sides)
        for name, n, run in sides[shift:] + sides[:shift]:
            runs[name].append(n / timed(run))
    out = {name: {"median": statistics.median(v), "runs": v} for name, v in runs.items()}
    for ours, peer in PAIRS.items():  # the ratio, and the ratio within each repeat (same moment of the machine)
        out[ours]["ratio"] = out[ours]["median"] / out[peer]["median"]
        out[ours]["ratio_per_repeat"] = [a / b for a, b in zip(runs[ours], runs[peer])]
    return out


# ------------------------------------------------------------- the paper's claims
def equal_iterations(split: Split, lam: float, iterations: list) -> dict:
    """Fig. 3: test accuracy after T steps (r = 1, examples drawn uniformly with replacement)."""
    rng = np.random.default_rng(SEED)
    draws = rng.integers(0, split.X_train.shape[0], max(iterations))
    X, y = split.X_train[draws], split.y_train[draws]
    out = {}
    for cls in OURS[:2] + OURS[3:]:
        model, done, curve = cls(lam=lam, average=False, **PAPER), 0, []
        for T in iterations:
            model.learn_many(X[done:T], y[done:T])
            done = T
            curve.append(accuracy(model.predict_many(split.X_test), split.y_test))
        out[cls.__name__] = curve
    return out


def time_to_accuracy(split: Split, make_model, target: float, fractions: list, runs: int, check_every: int, max_steps: int) -> dict:
    """Fig. 1 (and 003's Figs. 5-8): training seconds (evaluation excluded) until test
    accuracy >= target, for training sets of the first m = fraction * N examples, sampled
    uniformly with replacement; ``make_model()`` gives a fresh learner."""
    N = split.X_train.shape[0]
    out = {}
    for fraction in fractions:
        m = int(fraction * N)
        seconds = []
        for run in range(runs):
            rng = np.random.default_rng(1000 + run)
            model, spent, steps, reached = make_model(), 0.0, 0, False
            while steps < max_steps:
                draws = rng.integers(0, m, check_every)
                X, y = split.X_train[draws], split.y_train[draws]
                spent += timed(lambda: model.learn_many(X, y))
                steps += check_every
                if accuracy(model.predict_many(split.X_test), split.y_test) >= target:
                    reached = True
                    break
            seconds.append(spent if reached else None)
        done = [s for s in seconds if s is not None]
        out[str(m)] = {"median_seconds": statistics.median(done) if len(done) == runs else None, "runs": seconds}
    return out


# --------------------------------------------------------------------------- main
#: training rows of the smoke run (--quick): river's pure-Python peers take most of its time
QUICK_ROWS = 600


def run_dataset(name: str, repeats: int, fig1_runs: int, rows: int | None = None) -> dict:
    split = load(name) if rows is None else load(name).subsample(rows)
    result = {"dataset": name, "train": list(split.X_train.shape), "test": list(split.X_test.shape), "classes": split.n_classes}
    orders = pass_orders(split.X_train.shape[0], 5)
    acc = {}
    for cls in tqdm(OURS, desc=f"{name}: ours", leave=False):
        p1, val1 = choose_ours(cls, split, 1)
        p5, val5 = choose_ours(cls, split, 5)
        acc[cls.__name__] = {
            "1 pass": train_ours(cls, p1, split, orders[:1])[1], "params 1 pass": p1, "validation 1 pass": val1,
            "5 passes": train_ours(cls, p5, split, orders)[5], "params 5 passes": p5, "validation 5 passes": val5,
        }  # fmt: skip
    for loss in tqdm(("hinge", "log_loss"), desc=f"{name}: sgd", leave=False):
        a1, _ = choose_sgd(loss, split, 1)
        a5, _ = choose_sgd(loss, split, 5)
        acc[f"sklearn SGD {loss}"] = {
            "1 pass": train_sgd(loss, a1, split, orders[:1])[1], "params 1 pass": {"alpha": a1},
            "5 passes": train_sgd(loss, a5, split, orders)[5], "params 5 passes": {"alpha": a5},
        }  # fmt: skip
    acc["river SoftmaxRegression"] = {"1 pass": river_softmax_one_pass(split, orders[0]), "5 passes": None}
    with tempfile.TemporaryDirectory() as tmp:
        vw1, vw5 = vw_run(split, 1, tmp), vw_run(split, 5, tmp)
    acc["Vowpal Wabbit --oaa"] = {"1 pass": vw1["accuracy"], "5 passes": vw5["accuracy"], "seconds 1 pass": vw1["seconds"]}
    val = split.validation()
    best_C = max(CS[name], key=lambda C: liblinear_cs(val, C)[0])
    ll_acc, ll_s = liblinear_cs(split, best_C)
    acc["LIBLINEAR -s 4"] = {"1 pass": None, "5 passes": None, "converged": ll_acc, "C": best_C, "seconds": ll_s}
    result["accuracy"] = acc
    svm_params = acc["MulticlassSVM"]["params 1 pass"]
    result["throughput"] = throughput(split, svm_params, repeats)
    if name in ("news20", "mnist"):
        lam = svm_params["lam"]
        iters = [500, 1000, 2000, 5000, 10000, 20000, 50000]
        result["fig3_equal_iterations"] = {"lam": lam, "iterations": iters, "accuracy": equal_iterations(split, lam, iters)}
        target = {"news20": 0.75, "mnist": 0.88}[name]
        result["fig1_time_to_accuracy"] = {
            "target_accuracy": target, "params": svm_params, "runs": fig1_runs,
            "by_training_size": time_to_accuracy(split, lambda: MulticlassSVM(**svm_params, **PAPER), target, [1 / 8, 1 / 4, 1 / 2, 1], fig1_runs, 500, 100000),
        }  # fmt: skip
    return result


def fmt(v, pct=True):
    if v is None:
        return "—"
    return f"{100 * v:.2f}" if pct else f"{v:,.0f}"


def write_report(results: list, path_md: str):
    lines = ["# MCID benchmark", "", f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
             "Generated by `python -m bench.mcid_bench`; raw numbers in `mcid.json`.", ""]  # fmt: skip
    for r in results:
        t = r["throughput"]
        lines += [f"## {r['dataset']} (train {r['train'][0]:,} x {r['train'][1]:,}, test {r['test'][0]:,}, {r['classes']} classes)", ""]
        lines += ["| learner | test acc. 1 pass (%) | test acc. 5 passes (%) | params (1 pass / 5 passes) |", "|---|---|---|---|"]
        for name, a in r["accuracy"].items():
            if "converged" in a:
                lines.append(f"| {name} (batch, converged) | {fmt(a['converged'])} | {fmt(a['converged'])} | C={a['C']} ({a['seconds']:.1f} s) |")
                continue
            params = f"{a.get('params 1 pass', '')} / {a.get('params 5 passes', '')}" if "params 1 pass" in a else ""
            lines.append(f"| {name} | {fmt(a['1 pass'])} | {fmt(a['5 passes'])} | {params} |")
        lines += ["", "| throughput (examples/s, median) | value | against | ratio (per repeat) |", "|---|---|---|---|"]
        for name, v in t.items():
            if name in PAIRS:
                per = ", ".join(f"{r:.2f}" for r in v["ratio_per_repeat"])
                lines.append(f"| {name} | {fmt(v['median'], False)} | {PAIRS[name]} | **{v['ratio']:.2f}x** ({per}) |")
            else:
                lines.append(f"| {name} | {fmt(v['median'], False)} | | |")
        lam = r["accuracy"]["MulticlassSVM"]["params 1 pass"]["lam"]
        lines += ["", f"Like for like at λ = alpha = {lam} (MulticlassSVM's validated one-pass λ): *plain* is "
                  "`MulticlassSVM(lam=λ)` against `SGDClassifier(loss='hinge', alpha=λ)` (each library's default step, "
                  "no averaging); *averaged* is MulticlassSVM with its one-pass parameters above against "
                  "`SGDClassifier(..., average=True)`; learn_one uses the one-pass parameters; *streamlearn.sklearn "
                  "partial_fit* is the plain learner through its scikit-learn face (`MulticlassSVMClassifier.partial_fit`"
                  ", the same batches), its ratio the face's share of the learner's own speed."]
        if "fig1_time_to_accuracy" in r:
            f1 = r["fig1_time_to_accuracy"]
            lines += ["", f"Fig. 1 — MulticlassSVM seconds to {100 * f1['target_accuracy']:.0f}% test accuracy "
                      f"(median of {f1['runs']} runs, training time only):", "", "| m | median s |", "|---|---|"]  # fmt: skip
            for m, v in f1["by_training_size"].items():
                seconds = "not reached in every run" if v["median_seconds"] is None else f"{v['median_seconds']:.3f}"
                lines.append(f"| {int(m):,} | {seconds} |")
            f3 = r["fig3_equal_iterations"]
            lines += ["", f"Fig. 3 — test accuracy (%) at equal iterations, λ={f3['lam']}, r=1:", "",
                      "| learner | " + " | ".join(str(i) for i in f3["iterations"]) + " |", "|---" * (len(f3["iterations"]) + 1) + "|"]  # fmt: skip
            for name, curve in f3["accuracy"].items():
                lines.append(f"| {name} | " + " | ".join(f"{100 * c:.2f}" for c in curve) + " |")
        lines.append("")
    with open(path_md, "w") as f:
        f.write("\n".join(lines))


def plot(results: list, outdir: str):
    plt = pyplot()

    curves = [r for r in results if "fig1_time_to_accuracy" in r]
    fig, axes = plt.subplots(2, max(len(curves), 1), figsize=(6 * max(len(curves), 1), 9), squeeze=False)
    for col, r in enumerate(curves):
        f1 = r["fig1_time_to_accuracy"]
        ms = [int(m) for m in f1["by_training_size"]]
        secs = [v["median_seconds"] for v in f1["by_training_size"].values()]
        ax = axes[0, col]
        ax.plot([m for m, s in zip(ms, secs) if s is not None], [s for s in secs if s is not None], "o-")
        ax.set(title=f"{r['dataset']}: seconds to {100 * f1['target_accuracy']:.0f}% (Fig. 1)", xlabel="training set size m", ylabel="median training seconds")
        f3 = r["fig3_equal_iterations"]
        ax = axes[1, col]
        for name, curve in f3["accuracy"].items():
            ax.plot(f3["iterations"], [100 * c for c in curve], "o-", label=name)
        ax.set(xscale="log", title=f"{r['dataset']}: accuracy at equal iterations (Fig. 3)", xlabel="iterations T", ylabel="test accuracy (%)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "mcid_paper_figures.png"), dpi=110)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    names = list(results[0]["throughput"])
    width = 0.8 / len(results)
    for i, r in enumerate(results):
        ax.bar(np.arange(len(names)) + i * width, [r["throughput"][n]["median"] for n in names], width, label=r["dataset"])
    ax.set(yscale="log", ylabel="examples/s (median)", title="Throughput, same run")
    ax.set_xticks(np.arange(len(names)) + width, [n.replace(" ", "\n", 2) for n in names], fontsize=7)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "mcid_throughput.png"), dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["news20", "sector", "mnist"])
    parser.add_argument("--repeats", type=int, default=5, help="throughput repeats (median reported)")
    parser.add_argument("--fig1-runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run on USPS's first rows: one candidate per grid, one repeat")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    parser.add_argument("--report-only", action="store_true", help="rebuild mcid.md and the plots from mcid.json")
    parser.add_argument("--merge", action="store_true", help="replace only these datasets' entries in an existing mcid.json")
    parser.add_argument("--throughput-only", action="store_true",
                        help="re-measure only the throughput rows of an existing mcid.json (its one-pass parameters)")
    args = parser.parse_args(argv)
    if args.throughput_only:
        with open(os.path.join(args.out, "mcid.json")) as f:
            saved = json.load(f)
        for r in saved["results"]:
            if r["dataset"] in args.datasets:
                r["throughput"] = throughput(load(r["dataset"]), r["accuracy"]["MulticlassSVM"]["params 1 pass"], args.repeats)
        with open(os.path.join(args.out, "mcid.json"), "w") as f:
            json.dump(saved, f, indent=1)
        args.report_only = True
    if args.report_only:
        with open(os.path.join(args.out, "mcid.json")) as f:
            results = json.load(f)["results"]
        write_report(results, os.path.join(args.out, "mcid.md"))
        plot(results, args.out)
        return
    rows = None
    if args.quick:  # a smoke run: USPS's first QUICK_ROWS, one candidate per grid, one repeat (the test suite runs it)
        global OURS, LAMBDAS, ALPHAS, AVERAGES
        rows = QUICK_ROWS
        args.repeats, args.fig1_runs = 1, 1
        args.datasets = ["usps"]
        OURS, LAMBDAS, ALPHAS, AVERAGES = OURS[:1], [1e-4], [1e-4], AVERAGES[:1]
        CS["usps"] = [1.0]
    os.makedirs(args.out, exist_ok=True)
    results = []
    if args.merge and os.path.exists(os.path.join(args.out, "mcid.json")):
        with open(os.path.join(args.out, "mcid.json")) as f:
            results = [r for r in json.load(f)["results"] if r["dataset"] not in args.datasets]
    for name in tqdm(args.datasets, desc="datasets"):
        start = time.perf_counter()
        results.append(run_dataset(name, args.repeats, args.fig1_runs, rows))
        results[-1]["bench_seconds"] = time.perf_counter() - start
        results.sort(key=lambda r: ["news20", "sector", "mnist", "usps", "letter"].index(r["dataset"]))
        with open(os.path.join(args.out, "mcid.json"), "w") as f:
            json.dump({"machine": machine(), "results": results}, f, indent=1)
    write_report(results, os.path.join(args.out, "mcid.md"))
    plot(results, args.out)
    print(open(os.path.join(args.out, "mcid.md")).read())


if __name__ == "__main__":
    main()
