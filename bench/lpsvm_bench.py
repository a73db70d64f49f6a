"""The ℓp-norm multi-class SVM of 001 (issue 25): ``LpNormMulticlassSVM.fit`` against LIBLINEAR's
Crammer–Singer solver and the paper's Table 2, in one run.

1. **Correctness** (sector, letter): at p = 2 the problem is Crammer & Singer's; ours at tol 1e-4
   against ``liblinear -s 4`` at the same C (ε = 1e-4): primal objective of (P) evaluated on both
   weight matrices, and test accuracy.
2. **Speed** (sector, letter; p = 2): seconds (median of ``--repeats`` runs, in rounds of
   both solvers in one process) to a primal objective within 1e-3 and 1e-4 (relative) of the best
   one either solver found, ours over a range of ``tol``, LIBLINEAR over a range of ``-e``; and
   seconds per outer iteration (β step) for p < 2 on sector.
3. **Table 2** (sector: the files as shipped; news20: the shipped file split 80/20 by
   ``bench.data``'s seed): for each seed, the training part is shuffled by the seed and its last
   20 % held out for validation (not 5-fold: see ``bench/README.md``); C and p are chosen on it
   (p = 2 alone for the Crammer–Singer row), refitted on the whole training part, and tested.
   Mean ± sd over the seeds, beside the paper's figures.
4. **Batch against online**: ``MulticlassPGS(regularizer="block", loss="hinge")`` (the paper's model:
   no intercept, no change watch) at the same p with ``sigma = 1/(C n)`` (the same objective divided
   by C n) after 1 and 5 passes, against the batch solver: test accuracy and the objective (P) at its weights; accuracy against p for both.

    python -m bench.lpsvm_bench                 # every section (hours: see bench/README.md)
    python -m bench.lpsvm_bench --only table2 --seeds 1 --C-exponents=-2,0,2,4
    python -m bench.lpsvm_bench --quick --out /tmp/smoke

Writes ``bench/results/lpsvm.{json,md,png}``; a section run alone keeps the others' results.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

from bench.common import NO_INTERCEPT, accuracy, machine, pyplot
from bench.data import Split, load

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
PAPER_TABLE2 = {"sector": {"lp": (94.20, 0.34), "cs": (93.89, 0.27)}, "news20": {"lp": (86.19, 0.12), "cs": (85.12, 0.29)}}
P_GRID = [round(1.1 + 0.1 * k, 1) for k in range(10)]


def rows_of(X):
    from streamlearn.batches import SparseRows

    X = X.tocsr()
    X.sort_indices()
    return SparseRows(X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64))


def fit(split: Split, p: float, C: float, tol: float, seed: int = 0, max_iter: int = 50, max_epochs: int = 1000) -> dict:
    """Our solver on the training part: test accuracy, seconds, primal, history."""
    from streamlearn import LpNormMulticlassSVM

    model = LpNormMulticlassSVM(**NO_INTERCEPT, p=p, C=C, tol=tol, seed=seed, max_iter=max_iter, max_epochs=max_epochs)
    start = time.perf_counter()
    model.fit(split.X_train, split.y_train)
    seconds = time.perf_counter() - start
    return {"accuracy": accuracy(model.predict_many(split.X_test), split.y_test), "seconds": seconds,
            "primal": model.history_[-1]["primal"], "gap": model.history_[-1]["gap"],
            "history": model.history_}


def liblinear(split: Split, C: float, eps: float) -> dict:
    """``liblinear -s 4`` (no bias): test accuracy, seconds, and (P) at its weights."""
    from liblinear.liblinearutil import parameter, predict, problem, train

    from streamlearn.lpsvm import primal_objective

    classes, y = np.unique(split.y_train, return_inverse=True)
    start = time.perf_counter()
    model = train(problem(split.y_train.astype(float), split.X_train), parameter(f"-s 4 -c {C} -e {eps} -q"))
    seconds = time.perf_counter() - start
    predicted, _, _ = predict(split.y_test.astype(float), split.X_test, model, "-q")
    d = split.X_train.shape[1]
    W = np.zeros((d, len(classes)))
    for k, label in enumerate(model.get_labels()):
        W[:, int(np.searchsorted(classes, label))] = np.asarray(model.get_decfun(k)[0])[:d]
    primal = primal_objective(rows_of(split.X_train), y.astype(np.int64), W, np.ones(len(classes)), 2.0, C)
    return {"accuracy": accuracy(predicted, split.y_test), "seconds": seconds, "primal": float(primal)}


def correctness(names: list, C: float, log) -> dict:
    out = {}
    for name in names:
        split = split_of(name)
        ours = fit(split, 2.0, C, 1e-4)
        theirs = liblinear(split, C, 1e-4)
        out[name] = {"C": C, "ours": {k: v for k, v in ours.items() if k != "history"}, "liblinear": theirs,
                     "primal_relative_difference": (ours["primal"] - theirs["primal"]) / theirs["primal"]}
        log(f"correctness {name}: {out[name]}")
    return out


def median_of(runs: list) -> dict:
    """Repeated runs of one setting: the median seconds, every run's seconds, and the worst primal
    (a setting counts as reaching a level only if every run reached it)."""
    worst = max(runs, key=lambda r: r["primal"])
    return {**{k: v for k, v in worst.items() if k != "history"}, "seconds": statistics.median(r["seconds"] for r in runs),
            "seconds_each": [r["seconds"] for r in runs]}


def speed(names: list, C: float, tols: list, epsilons: list, repeats: int, log) -> dict:
    out = {}
    for name in names:
        split = split_of(name)
        ours_runs, their_runs = {tol: [] for tol in tols}, {eps: [] for eps in epsilons}
        for _ in range(repeats):  # rounds of both solvers, so that a slow spell of the machine hits both
            for tol in tols:
                ours_runs[tol].append(fit(split, 2.0, C, tol))
            for eps in epsilons:
                their_runs[eps].append(liblinear(split, C, eps))
        ours = {str(tol): median_of(runs) for tol, runs in ours_runs.items()}
        theirs = {str(eps): median_of(runs) for eps, runs in their_runs.items()}
        best = min(r["primal"] for r in (*ours.values(), *theirs.values()))
        reached = {}
        for level in (1e-3, 1e-4):
            for side, runs in (("ours", ours), ("liblinear", theirs)):
                times = [r["seconds"] for r in runs.values() if r["primal"] <= best * (1 + level)]
                reached[f"{side}@{level:g}"] = min(times) if times else None
        out[name] = {"C": C, "repeats": repeats, "ours": ours, "liblinear": theirs, "best_primal": best, "seconds_to": reached}
        log(f"speed {name}: {reached}")
    split = split_of("sector")
    per_iteration = {}
    for p in (1.2, 1.5, 1.8):
        history = fit(split, p, C, 1e-3)["history"]
        per_iteration[str(p)] = {"iterations": len(history), "median_seconds": statistics.median(h["seconds"] for h in history),
                                 "epochs": [h["epochs"] for h in history]}
        log(f"outer iterations sector p={p}: {per_iteration[str(p)]}")
    out["per_iteration_sector"] = per_iteration
    return out


def validation_split(split: Split, seed: int) -> Split:
    order = np.random.default_rng(seed).permutation(split.X_train.shape[0])
    cut = int(0.8 * len(order))
    train, held = order[:cut], order[cut:]
    return Split(f"{split.name}-val{seed}", split.X_train[train], split.y_train[train], split.X_train[held], split.y_train[held])


def table2(names: list, seeds: int, exponents: list, p_grid: list, select_tol: float, tol: float, log, save) -> dict:
    """``save(partial)`` is called after every seed: a run stopped early keeps what it measured."""
    out = {}
    for name in names:
        split = split_of(name)
        runs = []
        out[name] = {"runs": runs, "grid": {"p": p_grid, "C_exponents": exponents, "select_tol": select_tol, "tol": tol},
                     "machine": machine()}
        for seed in range(seeds):
            val = validation_split(split, seed)
            scores = {}
            for p in p_grid:
                for e in exponents:
                    scores[(p, e)] = fit(val, p, 2.0**e, select_tol, seed)["accuracy"]
                    log(f"table2 {name} seed {seed} p={p} C=2^{e}: validation {scores[(p, e)]:.4f}")
            lp_choice = max(scores, key=lambda k: (scores[k], k[0]))  # ties: the larger p (closer to CS)
            cs_choice = max((k for k in scores if k[0] == 2.0), key=lambda k: scores[k])
            lp_test = fit(split, lp_choice[0], 2.0 ** lp_choice[1], tol, seed)
            cs_test = fit(split, 2.0, 2.0 ** cs_choice[1], tol, seed)
            runs.append({"seed": seed, "lp_choice": {"p": lp_choice[0], "C_exponent": lp_choice[1]},
                         "cs_choice": {"C_exponent": cs_choice[1]}, "lp_test": lp_test["accuracy"], "cs_test": cs_test["accuracy"],
                         "validation": {f"{p}|{e}": v for (p, e), v in scores.items()}})
            log(f"table2 {name} seed {seed}: {runs[-1]['lp_choice']} {lp_test['accuracy']:.4f} / CS {cs_test['accuracy']:.4f}")
            save(out)
    return out


def online(names: list, C: float, p_grid: list, log) -> dict:
    from streamlearn import MulticlassPGS
    from streamlearn.lpsvm import primal_objective

    out = {}
    for name in names:
        split = split_of(name)
        classes, y = np.unique(split.y_train, return_inverse=True)
        rows = rows_of(split.X_train)
        n = len(y)
        by_p = {}
        for p in p_grid:
            batch = fit(split, p, C, 1e-3)
            entry = {"batch": {"accuracy": batch["accuracy"], "primal": batch["primal"], "seconds": batch["seconds"]}}
            model = MulticlassPGS(**NO_INTERCEPT, adapt=False, loss="hinge", p=p, sigma=1.0 / (C * n), regularizer="block")
            order = np.random.default_rng(0).permutation(n)
            start = time.perf_counter()
            for passes in range(1, 6):
                for lo in range(0, n, 1000):
                    chunk = order[lo : lo + 1000]
                    model.learn_many(split.X_train[chunk], split.y_train[chunk])
                if passes in (1, 5):
                    W = model.weight_matrix().T  # (d, K), columns in the model's class order
                    columns = [int(np.searchsorted(classes, c)) for c in model.classes]
                    W_sorted = np.zeros((split.X_train.shape[1], len(classes)))
                    W_sorted[: W.shape[0], columns] = W[: split.X_train.shape[1]]
                    entry[f"pgs_{passes}"] = {
                        "accuracy": accuracy(model.predict_many(split.X_test), split.y_test),
                        "primal": float(primal_objective(rows, y.astype(np.int64), W_sorted, np.ones(len(classes)), p, C)),
                        "seconds": time.perf_counter() - start}
            by_p[str(p)] = entry
            log(f"online {name} p={p}: {entry}")
        out[name] = {"C": C, "by_p": by_p}
    return out


_quick = False


def split_of(name: str) -> Split:
    """A benchmark split; in a smoke run the first 3,000 training rows only."""
    split = load(name)
    return split.subsample(3000) if _quick else split


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["correctness", "speed", "table2", "online"], action="append")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--C-exponents", default="-6,-5,-4,-3,-2,-1,0,1,2,3,4,5,6")
    parser.add_argument("--p-grid", default=",".join(map(str, P_GRID)))
    parser.add_argument("--repeats", type=int, default=3, help="runs per setting in the speed section (median seconds)")
    parser.add_argument("--select-tol", type=float, default=1e-2, help="tol of the fits that choose C and p")
    parser.add_argument("--datasets", help="Table 2's data sets, comma-separated (default: sector,news20)")
    parser.add_argument("--merge-table2", metavar="JSON", help="copy the Table 2 entries of another run's lpsvm.json "
                        "into this one (data sets run in parallel processes), then rewrite the report")
    parser.add_argument("--report-only", action="store_true", help="rewrite lpsvm.md and lpsvm.png from lpsvm.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run on letter: small grids, one seed")
    parser.add_argument("--out", default=str(RESULTS), help="folder for lpsvm.{json,md,png}")
    args = parser.parse_args(argv)
    global _quick
    _quick = args.quick
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "lpsvm.json"
    results = json.loads(path.read_text()) if path.exists() and not args.quick else {}
    if args.merge_table2:
        other = json.loads(pathlib.Path(args.merge_table2).read_text())["table2"]
        results.setdefault("table2", {}).update({name: r for name, r in other.items() if name != "machine"})
    if args.merge_table2 or args.report_only:
        path.write_text(json.dumps(results, indent=1))
        (out / "lpsvm.md").write_text(report(results))
        plot(results, out / "lpsvm.png")
        return 0
    results["machine"] = machine()
    sections = args.only or ["correctness", "speed", "table2", "online"]
    run_by = {section: results["machine"] for section in sections}  # sections may come from different runs

    def log(text):
        print(text, file=sys.stderr, flush=True)

    exponents = [int(e) for e in args.C_exponents.split(",")]
    p_grid = [float(p) for p in args.p_grid.split(",")]
    if args.quick:
        names, exponents, p_grid, seeds = ["letter"], [0], [1.5, 2.0], 1
    else:
        names, seeds = None, args.seeds
    if "correctness" in sections:
        results["correctness"] = correctness(names or ["sector", "letter"], 1.0, log)
    if "speed" in sections and not args.quick:
        results["speed"] = speed(["sector", "letter"], 1.0, [1e-2, 3e-3, 1e-3, 3e-4, 1e-4], [0.1, 0.03, 0.01, 3e-3, 1e-3, 1e-4],
                                 args.repeats, log)
    def save(partial: dict) -> None:
        results["table2"] = {**results.get("table2", {}), **partial, "machine": run_by["table2"]}
        path.write_text(json.dumps(results, indent=1))

    if "table2" in sections:
        table2(names or (args.datasets or "sector,news20").split(","), seeds, exponents, p_grid, args.select_tol, 1e-3, log, save)
    if "online" in sections:
        results["online"] = online(names or ["sector"], 1.0, p_grid if args.quick else [1.2, 1.5, 1.8, 2.0], log)
    for section, provenance in run_by.items():
        if isinstance(results.get(section), dict):
            results[section]["machine"] = provenance
    path.write_text(json.dumps(results, indent=1))
    (out / "lpsvm.md").write_text(report(results))
    plot(results, out / "lpsvm.png")
    print(report(results))
    return 0


def _datasets(section: dict):
    """A section's per-data-set entries (not its provenance nor its extra tables)."""
    return [(name, r) for name, r in section.items() if name not in ("machine", "per_iteration_sector")]


def _mean_sd(values: list) -> str:
    values = [100 * v for v in values]
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"


def report(results: dict) -> str:
    lines = ["# ℓp-norm multi-class SVM (paper 001)", "",
             f"{results['machine']['cpu']}; `python -m bench.lpsvm_bench` (protocol in its docstring). Commit of each "
             "section's run: " + ", ".join(f"{s} {results[s]['machine']['commit'][:10]}" for s in
                                           ("correctness", "speed", "table2", "online") if "machine" in results.get(s, {})) + ".", ""]
    if "correctness" in results:
        lines += ["## p = 2 against LIBLINEAR -s 4 (same C, tol 1e-4 / -e 1e-4)", "",
                  "| data | C | primal ours | primal LIBLINEAR | relative difference | test % ours | test % LIBLINEAR | s ours | s LIBLINEAR |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, r in _datasets(results["correctness"]):
            lines.append(f"| {name} | {r['C']:g} | {r['ours']['primal']:.6g} | {r['liblinear']['primal']:.6g} | "
                         f"{r['primal_relative_difference']:+.2e} | {100 * r['ours']['accuracy']:.2f} | "
                         f"{100 * r['liblinear']['accuracy']:.2f} | {r['ours']['seconds']:.1f} | {r['liblinear']['seconds']:.1f} |")
        lines.append("")
    if "speed" in results:
        repeats = next(r for _, r in _datasets(results["speed"])).get("repeats", 1)
        lines += [f"## Seconds to a primal objective within 1e-3 / 1e-4 of the best found (p = 2, C = 1; median of {repeats} runs per setting)", "",
                  "| data | ours 1e-3 | LIBLINEAR 1e-3 | ratio | ours 1e-4 | LIBLINEAR 1e-4 | ratio |", "|---|---:|---:|---:|---:|---:|---:|"]
        for name, r in _datasets(results["speed"]):
            t = r["seconds_to"]
            cells = []
            for level in ("0.001", "0.0001"):
                ours, theirs = t.get(f"ours@{level}"), t.get(f"liblinear@{level}")
                ratio = f"{ours / theirs:.2f}×" if ours and theirs else "—"
                cells += [f"{ours:.2f}" if ours else "not reached", f"{theirs:.2f}" if theirs else "not reached", ratio]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", "Outer iterations on sector (C = 1, tol 1e-3): " + "; ".join(
            f"p = {p}: {r['iterations']} iterations, median {r['median_seconds']:.2f} s each (epochs {r['epochs']})"
            for p, r in results["speed"]["per_iteration_sector"].items()), ""]
    if "table2" in results:
        lines += ["## Table 2 on our data (test accuracy %, mean ± sd over seeds)", "",
                  "| data | seeds | ℓp-norm MC-SVM | Crammer & Singer | paper ℓp | paper CS | chosen p, log2 C (ℓp) | commit |",
                  "|---|---:|---:|---:|---:|---:|---|---|"]
        for name, r in _datasets(results["table2"]):
            paper = PAPER_TABLE2.get(name, {})
            lp, cs = paper.get("lp"), paper.get("cs")
            lines.append(f"| {name} | {len(r['runs'])} | {_mean_sd([x['lp_test'] for x in r['runs']])} | "
                         f"{_mean_sd([x['cs_test'] for x in r['runs']])} | {f'{lp[0]:.2f} ± {lp[1]:.2f}' if lp else '—'} | "
                         f"{f'{cs[0]:.2f} ± {cs[1]:.2f}' if cs else '—'} | "
                         + "; ".join(f"{x['lp_choice']['p']}, {x['lp_choice']['C_exponent']}" for x in r["runs"])
                         + f" | {r.get('machine', results['table2'].get('machine', {})).get('commit', '')[:10]} |")
        grid = next(r for _, r in _datasets(results["table2"]))["grid"]
        lines += ["", f"Grid: p ∈ {grid['p']}, log2 C ∈ {grid['C_exponents']}; selection fits at tol {grid['select_tol']}, "
                  f"final fits at tol {grid['tol']}.", ""]
    if "online" in results:
        lines += ["## Batch solver against MulticlassPGS (block norm, hinge, σ = 1/(C n)), C = 1", "",
                  "| data | p | batch test % | PGS 1 pass | PGS 5 passes | batch (P) | PGS 1 pass (P) | PGS 5 passes (P) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name, r in _datasets(results["online"]):
            for p, e in r["by_p"].items():
                lines.append(f"| {name} | {p} | {100 * e['batch']['accuracy']:.2f} | {100 * e['pgs_1']['accuracy']:.2f} | "
                             f"{100 * e['pgs_5']['accuracy']:.2f} | {e['batch']['primal']:.5g} | {e['pgs_1']['primal']:.5g} | "
                             f"{e['pgs_5']['primal']:.5g} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, r in _datasets(results.get("online", {})):
        ps = [float(p) for p in r["by_p"]]
        axes[0].plot(ps, [100 * e["batch"]["accuracy"] for e in r["by_p"].values()], "o-", label=f"{name} batch (001)")
        axes[0].plot(ps, [100 * e["pgs_5"]["accuracy"] for e in r["by_p"].values()], "s--", label=f"{name} PGS 5 passes")
    axes[0].set_xlabel("p")
    axes[0].set_ylabel("test accuracy %")
    axes[0].set_title("accuracy against p (C = 1)")
    axes[0].legend(fontsize=8)
    for name, r in _datasets(results.get("speed", {})):
        for side, marker in (("ours", "o-"), ("liblinear", "s--")):
            runs = sorted(r[side].values(), key=lambda x: x["seconds"])
            axes[1].semilogy([x["seconds"] for x in runs], [max(x["primal"] / r["best_primal"] - 1, 1e-9) for x in runs],
                             marker, label=f"{name} {side}")
    axes[1].set_xlabel("seconds")
    axes[1].set_ylabel("primal / best − 1")
    axes[1].set_title("p = 2: primal suboptimality against time")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
