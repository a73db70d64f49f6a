"""Benchmark of the Primal Gradient Solver (issue 4), in one run:

1. per-example cost of p = 1.8 against p = 2 on news20 (rows scaled to unit length), binary
   (class 1 vs the rest, PrimalGradientSolver) and 20-class (MulticlassPGS, entrywise and
   block): the second pass of ``learn_many`` over the training part (the first builds the
   vocabulary), medians of interleaved repeats;
2. the paper's Table II on our data (news20, class 1 vs the rest): ℓ2-logistic,
   ℓ1.8-logistic and ℓ2-least squares. For each, the same regularised objective
   ``σ/(2(p-1)) ||w||_p² + mean loss`` is solved to convergence by scipy's L-BFGS ("QN");
   PGS runs pass after pass and we report its held-out accuracy, QN's, and the time PGS
   needs to come within 0.2 points of QN's accuracy.

3. inverse time dependency (Figs. 5-8): seconds to a fixed held-out accuracy as the training
   set grows, and the toy of Fig. 9 (two Gaussians, iterations to the Bayes direction).

    python -m bench.pgs_bench [--repeats 5] [--max-passes 20] [--runs 10] [--toy-runs 30]
    python -m bench.pgs_bench --quick --out /tmp/smoke   # a smoke run (the test suite's)

Results: bench/results/pgs.{json,md}, pgs.png.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time

import numpy as np
import scipy.optimize

from bench.common import NO_INTERCEPT, machine, pyplot

from bench.data import load
from streamlearn import MulticlassPGS, PrimalGradientSolver

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
SIGMA = 1e-4


def per_example_cost(split, repeats: int) -> dict:
    X, y = split.X_train, split.y_train
    binary = y == 1
    makers = {
        "binary p=2": lambda: PrimalGradientSolver(**NO_INTERCEPT, adapt=False, loss="hinge", p=2.0, sigma=SIGMA),
        "binary p=1.8": lambda: PrimalGradientSolver(**NO_INTERCEPT, adapt=False, loss="hinge", p=1.8, sigma=SIGMA),
        "20-class entrywise p=2": lambda: MulticlassPGS(**NO_INTERCEPT, adapt=False, p=2.0, sigma=SIGMA),
        "20-class entrywise p=1.8": lambda: MulticlassPGS(**NO_INTERCEPT, adapt=False, p=1.8, sigma=SIGMA),
        "20-class block p=2": lambda: MulticlassPGS(**NO_INTERCEPT, adapt=False, p=2.0, sigma=SIGMA, regularizer="block"),
        "20-class block p=1.8": lambda: MulticlassPGS(**NO_INTERCEPT, adapt=False, p=1.8, sigma=SIGMA, regularizer="block"),
    }
    for name, make in makers.items():  # compile and warm up
        make().learn_many(X[:200], (binary if name.startswith("binary") else y)[:200])
    times = {name: [] for name in makers}
    for _ in range(repeats):
        for name, make in makers.items():
            model = make()
            labels = binary if name.startswith("binary") else y
            model.learn_many(X, labels)  # first pass: builds the vocabulary (the same work for every p)
            start = time.perf_counter()
            model.learn_many(X, labels)  # timed: a second pass, the steady per-example cost
            times[name].append(time.perf_counter() - start)
    n = X.shape[0]
    out = {name: {"seconds": statistics.median(t), "us_per_example": 1e6 * statistics.median(t) / n, "all": t}
           for name, t in times.items()}
    for kind in ("binary", "20-class entrywise", "20-class block"):
        out[f"{kind} ratio 1.8/2"] = out[f"{kind} p=1.8"]["seconds"] / out[f"{kind} p=2"]["seconds"]
    return out


def objective_and_gradient(w, X, s, p, sigma, loss):
    """F(w) = σ/(2(p-1)) ||w||_p² + mean l, with s in {-1, +1}."""
    m = X @ w
    if loss == "logistic":
        z = -s * m
        value = np.logaddexp(0, z).mean()
        dm = -s / (1 + np.exp(-z)) / len(s)
    else:  # squared, (m - s)² / 2
        value = 0.5 * ((m - s) ** 2).mean()
        dm = (m - s) / len(s)
    norm = np.linalg.norm(w, p)
    reg = sigma / (2 * (p - 1)) * norm**2
    grad_reg = sigma / (p - 1) * (norm ** (2 - p) * np.sign(w) * np.abs(w) ** (p - 1) if norm > 0 else 0 * w)
    return value + reg, X.T @ dm + grad_reg


def quasi_newton(X, s, p, sigma, loss) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    result = scipy.optimize.minimize(objective_and_gradient, np.zeros(X.shape[1]), args=(X, s, p, sigma, loss),
                                     jac=True, method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-9, "ftol": 1e-14})
    return result.x, time.perf_counter() - start


def table2(split, max_passes: int) -> list:
    X, y = split.X_train, split.y_train
    Xt, yt = split.X_test, split.y_test
    s, st = np.where(y == 1, 1.0, -1.0), np.where(yt == 1, 1.0, -1.0)
    PrimalGradientSolver(**NO_INTERCEPT, adapt=False, loss="logistic").learn_many(X[:50], y[:50] == 1)  # load the compiled kernel before timing
    rows = []
    for name, loss, p in (("l2-logistic", "logistic", 2.0), ("l1.8-logistic", "logistic", 1.8), ("l2-least squares", "squared", 2.0)):
        w, qn_seconds = quasi_newton(X, s, p, SIGMA, loss)
        qn_acc = float(np.mean(np.sign(Xt @ w) == st))
        qn_obj = objective_and_gradient(w, X, s, p, SIGMA, loss)[0]
        bound = None
        if loss == "squared":  # a domain that holds QN's optimum, so both solve the same problem
            bound = 2.0 * float(np.linalg.norm(w, p))
        model = PrimalGradientSolver(**NO_INTERCEPT, adapt=False, loss=loss, p=p, sigma=SIGMA, bound=bound)
        elapsed, reached, curve = 0.0, None, []
        rng = np.random.default_rng(0)
        for epoch in range(1, max_passes + 1):
            order = rng.permutation(X.shape[0])
            start = time.perf_counter()
            model.learn_many(X[order], y[order] == 1)
            elapsed += time.perf_counter() - start
            wp = np.zeros(X.shape[1])
            wp[model._features.names] = model.weight_matrix()[0]  # vocabulary order -> feature index
            acc = float(np.mean(np.sign(Xt @ wp) == st))
            obj = objective_and_gradient(wp, X, s, p, SIGMA, loss)[0]
            curve.append({"pass": epoch, "seconds": elapsed, "accuracy": acc, "objective": obj})
            if reached is None and acc >= qn_acc - 0.002:
                reached = {"pass": epoch, "seconds": elapsed}
        rows.append({"problem": name, "p": p, "sigma": SIGMA, "bound": bound, "qn_accuracy": qn_acc, "qn_seconds": qn_seconds,
                     "qn_objective": qn_obj, "pgs_final_accuracy": curve[-1]["accuracy"], "pgs_best_accuracy": max(c["accuracy"] for c in curve),
                     "pgs_reached": reached, "curve": curve})
    return rows


FRACTIONS = [1 / 8, 1 / 4, 1 / 2, 3 / 4, 1]
FRACTION_NAMES = {1 / 8: "N/8", 1 / 4: "N/4", 1 / 2: "N/2", 3 / 4: "3N/4", 1: "N"}


def inverse_time(runs: int, fractions: list = FRACTIONS) -> dict:
    """Figs. 5-8: training seconds until a fixed held-out accuracy, as the training set
    grows (m = N/8 ... N of ``fractions``, examples drawn uniformly from the first m), median of ``runs``."""
    from bench.data import Split
    from bench.mcid_bench import time_to_accuracy

    cases = {
        "mnist 0 vs rest, p=1.8 logistic": ("mnist", lambda y: y == 0, lambda: PrimalGradientSolver(**NO_INTERCEPT, adapt=False, loss="logistic", p=1.8, sigma=SIGMA), 0.99),
        "mnist 10 classes, MulticlassPGS p=1.8": ("mnist", None, lambda: MulticlassPGS(**NO_INTERCEPT, adapt=False, p=1.8, sigma=SIGMA), 0.88),
        "news20 20 classes, MulticlassPGS p=1.8": ("news20", None, lambda: MulticlassPGS(**NO_INTERCEPT, adapt=False, p=1.8, sigma=SIGMA), 0.78),
    }
    out = {}
    for name, (data, relabel, make, target) in cases.items():
        split = load(data)
        if relabel is not None:
            split = Split(split.name, split.X_train, relabel(split.y_train), split.X_test, relabel(split.y_test))
        out[name] = {"target": target, "by_training_size": time_to_accuracy(split, make, target, fractions, runs, 1000, 200_000)}
    return out


def toy(runs: int, n: int = 200_000, dims=(10, 20, 40)) -> dict:
    """Fig. 9: two Gaussians with a shared covariance; iterations (examples, k = 1) of
    PGS (p = 2, logistic, σ = 0.01) until the unit-normalised predictor is within 0.05 of
    the unit-normalised w*, for training sets of m = n/8 ... n samples, median of ``runs``
    (each run draws its examples uniformly from the first m). w* is the minimiser of the
    same regularised objective on all n samples (scipy L-BFGS): the Bayes direction
    Σ⁻¹(μ₁ − μ₀) is not the regularised optimum, and with σ = 0.01 it lies more than 0.05
    away from it in 20 and 40 dimensions (smaller σ makes w huge and PGS turn slowly)."""
    out = {}
    for d in dims:
        rng = np.random.default_rng(d)
        A = rng.normal(size=(d, d)) / np.sqrt(d)
        cov = A @ A.T + 0.5 * np.eye(d)
        mu = rng.normal(size=d) * 0.5
        y = rng.random(n) < 0.5
        X = rng.multivariate_normal(np.zeros(d), cov, size=n) + np.where(y[:, None], mu, -mu)
        s = np.where(y, 1.0, -1.0)
        w_star = scipy.optimize.minimize(objective_and_gradient, np.zeros(d), args=(X, s, 2.0, 0.01, "logistic"), jac=True,
                                         method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 10_000}).x
        w_star /= np.linalg.norm(w_star)
        bayes = np.linalg.solve(cov, 2 * mu)
        bayes_gap = float(np.linalg.norm(bayes / np.linalg.norm(bayes) - w_star))
        rows = {}
        for fraction in FRACTIONS:
            m = int(fraction * n)
            iterations = []
            for run in range(runs):
                r = np.random.default_rng(10_000 + run)
                model, steps, hit = PrimalGradientSolver(**NO_INTERCEPT, adapt=False, loss="logistic", p=2.0, sigma=0.01), 0, None
                while steps < 300_000:
                    draws = r.integers(0, m, 1000)
                    model.learn_many(X[draws], y[draws])
                    steps += 1000
                    w = np.zeros(d)
                    w[model._features.names] = model.weight_matrix()[0]
                    if np.linalg.norm(w) > 0 and np.linalg.norm(w / np.linalg.norm(w) - w_star) <= 0.05:
                        hit = steps
                        break
                iterations.append(hit)
            done = [i for i in iterations if i is not None]
            rows[str(m)] = {"median_iterations": statistics.median(done) if len(done) == runs else None,
                            "reached": len(done), "runs": iterations}
        out[str(d)] = {"bayes_to_w_star": bayes_gap, "by_training_size": rows}
    return out


def write_report(results: dict, out: pathlib.Path) -> None:
    cost = results["cost"]
    lines = ["# Primal Gradient Solver benchmark (issue 4)", "",
             f"news20 (LIBSVM train file, rows scaled to unit length, 80/20 split), σ = {SIGMA}.", "",
             "## Per-example cost, p = 1.8 against p = 2 (second pass of learn_many, hinge losses, medians of "
             f"{results['repeats']} interleaved repeats)", "",
             "| learner | µs/example | ratio 1.8 / 2 (target ≤ 2×; paper's Table II ~10×) |", "|---|---:|---:|"]
    for kind in ("binary", "20-class entrywise", "20-class block"):
        lines.append(f"| {kind} p=2 | {cost[f'{kind} p=2']['us_per_example']:.2f} | |")
        lines.append(f"| {kind} p=1.8 | {cost[f'{kind} p=1.8']['us_per_example']:.2f} | {cost[f'{kind} ratio 1.8/2']:.2f}× |")
    lines += ["", "## Table II on news20 (class 1 vs the rest)", "",
              "| problem | QN (L-BFGS) acc. | QN s | PGS best acc. | PGS within 0.2 pt of QN after | PGS time to it |",
              "|---|---:|---:|---:|---:|---:|"]
    for row in results["table2"]:
        reached = row["pgs_reached"]
        lines.append(f"| {row['problem']} | {100 * row['qn_accuracy']:.2f} | {row['qn_seconds']:.2f} | {100 * row['pgs_best_accuracy']:.2f} | "
                     f"{'pass ' + str(reached['pass']) if reached else 'not within ' + str(len(row['curve'])) + ' passes'} | "
                     f"{format(reached['seconds'], '.3f') + ' s' if reached else '—'} |")
    if results.get("inverse_time"):
        lines += ["", f"## Inverse time dependency (Figs. 5-8): seconds to a fixed held-out accuracy, median of {results['runs']} runs", "",
                  "| case | target | " + " | ".join(f"m = {FRACTION_NAMES[f]}" for f in results.get("fractions", FRACTIONS)) + " |",
                  "|---|---:|" + "---:|" * len(results.get("fractions", FRACTIONS))]
        for name, case in results["inverse_time"].items():
            cells = [("%.3f" % v["median_seconds"]) if v["median_seconds"] is not None else
                     f"not always ({sum(x is not None for x in v['runs'])}/{len(v['runs'])})" for v in case["by_training_size"].values()]
            lines.append(f"| {name} | {case['target']} | " + " | ".join(cells) + " |")
    if results.get("toy"):
        lines += ["", f"## Fig. 9 toy: iterations until the unit predictor is within 0.05 of the unit w* (regularised optimum on all samples, σ = 0.01), median of {results['toy_runs']} runs", "",
                  "| dimensions | ‖Bayes − w*‖ (unit) | " + " | ".join(f"m = {m}" for m in next(iter(results["toy"].values()))["by_training_size"]) + " |",
                  "|---|---:|" + "---:|" * len(FRACTIONS)]
        for d, entry in results["toy"].items():
            cells = [f"{v['median_iterations']:,.0f}" if v["median_iterations"] is not None else f"not always ({v['reached']}/{len(v['runs'])})"
                     for v in entry["by_training_size"].values()]
            lines.append(f"| {d} | {entry['bayes_to_w_star']:.3f} | " + " | ".join(cells) + " |")
    lines.append("")
    (out / "pgs.md").write_text("\n".join(lines))


def plot(results: dict, out: pathlib.Path) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(2, 3, figsize=(13, 7.2))
    for ax, row in zip(axes[0], results["table2"]):
        ax.plot([c["seconds"] for c in row["curve"]], [100 * c["accuracy"] for c in row["curve"]], marker=".", label="PGS")
        ax.axhline(100 * row["qn_accuracy"], color="k", ls="--", label=f"QN ({row['qn_seconds']:.1f} s)")
        ax.set_title(row["problem"])
        ax.set_xlabel("PGS seconds")
        ax.set_ylabel("held-out accuracy %")
        ax.legend()
        ax.grid(alpha=0.3)
    ax = axes[1][0]
    for name, case in (results.get("inverse_time") or {}).items():
        points = [(int(m), v["median_seconds"]) for m, v in case["by_training_size"].items() if v["median_seconds"] is not None]
        if points:
            ax.plot(*zip(*points), marker="o", label=name)
    ax.set_xlabel("training set size m")
    ax.set_ylabel("seconds to target accuracy (median)")
    ax.set_title("inverse time dependency (Figs. 5-8)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax = axes[1][1]
    for d, entry in (results.get("toy") or {}).items():
        points = [(int(m), v["median_iterations"]) for m, v in entry["by_training_size"].items() if v["median_iterations"] is not None]
        if points:
            ax.plot(*zip(*points), marker="o", label=f"{d} dimensions")
    ax.set_xlabel("training set size m")
    ax.set_ylabel("iterations to ||w*/|w*| - w/|w||| <= 0.05")
    ax.set_title("Fig. 9 toy: two Gaussians")
    ax.legend()
    ax.grid(alpha=0.3)
    axes[1][2].axis("off")
    fig.tight_layout()
    fig.savefig(out / "pgs.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-passes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10, help="runs per training-set size (Figs. 5-8)")
    parser.add_argument("--toy-runs", type=int, default=30, help="runs per training-set size (Fig. 9)")
    parser.add_argument("--only", nargs="+", choices=["cost", "table2", "inverse", "toy"],
                        help="re-run only these parts and keep the others from the existing pgs.json")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--quick", action="store_true", help="a smoke run: one repeat, two passes, one run, two training-set sizes (the test suite's)")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.max_passes, args.runs, args.toy_runs = 1, 2, 1, 2
    fractions = FRACTIONS[-2:] if args.quick else FRACTIONS
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    split = load("news20")
    parts = {
        "cost": lambda: {"repeats": args.repeats, "cost": per_example_cost(split, args.repeats)},
        "table2": lambda: {"table2": table2(split, args.max_passes)},
        "inverse": lambda: {"runs": args.runs, "fractions": fractions, "inverse_time": inverse_time(args.runs, fractions)},
        "toy": lambda: {"toy_runs": args.toy_runs, "toy": toy(args.toy_runs)},
    }
    results = json.loads((out / "pgs.json").read_text()) if args.only else {}
    for name in args.only or parts:
        results.update(parts[name]())
    results["machine"] = machine()
    (out / "pgs.json").write_text(json.dumps(results, indent=1))
    write_report(results, out)
    plot(results, out)
    print((out / "pgs.md").read_text())


if __name__ == "__main__":
    main()
