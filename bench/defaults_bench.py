"""Defaults that win on data nobody tuned for (issue 24): the protocol that chooses the MCID
learners' defaults, and how those defaults do against each data set's own tuned configuration and
Vowpal Wabbit's default ``--oaa``, one pass.

    python -m bench.defaults_bench            # about 40 minutes on 2 cores
    python -m bench.defaults_bench --learners ExtremeSVM   # one learner, merged into the existing results
    python -m bench.defaults_bench --learners GeneralizedLeastSquares --datasets usps-rff   # its new data sets only
    python -m bench.defaults_bench --quick    # two data sets cut to 1,000 rows, a small grid: the test suite's smoke run

Writes ``bench/results/defaults.{json,md,png}``.

**Protocol.** Data sets: every classification set of ``../shared/datasets`` that the learner
takes — news20, sector, MNIST, USPS, letter for the dense-weight learners; those and WordNet's
10,087 classes for ExtremeSVM; the dense ones (MNIST, USPS, letter) for the least-squares learners,
whose ``d × d`` statistics hold a few thousand features. Each is split as in :mod:`bench.data`;
its *validation* split is the last 20 % of the shuffled training part. One pass in a seeded random
order, batches of 1,000 rows, then ``flush()``. Candidates (:func:`candidates`): for the MCID
learners λ ∈ {1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3} (half decades) × averaging (none, plain,
power 2) × projection (off, on); for ExtremeSVM the same λ × averaging (none, power 2, power 3) ×
step (Pegasos' 1/(λt), or 002's η₀/(1 + decay·t) at the values its WordNet validation chose); for
GeneralizedLeastSquares the softmax link × ridge {1e-3, 0.1, 0.3, 1, 3, 10} (relative to the mean
diagonal of Σ̂) or trace ridge {1e-3, 3e-3, 1e-2, 3e-2, 0.1} (relative to its trace, growing with the
dimension) × mini-batch size {32, 64, 128, 256}, the identity link × ridge {1e-6, 1e-3, 0.1} (its fit does
not depend on the batch), and the old default; for CalibratedLeastSquares ridge {1e-6, 1e-3, 0.1, 1, 10} ×
stages {2, 5, 10} and trace ridge {1e-5, 3e-5, 1e-4, 3e-4, 1e-3} × stages {5, 10}; for
StagewiseRegression ridge {1e-6, 1e-3, 0.1, 1} × (stages, block size) {(10, 1000), (5, 200), (10, 100)}
(both refit their default window of 10,000 examples every 1,000). GeneralizedLeastSquares and
CalibratedLeastSquares are chosen on random-feature inputs too (usps-rff, letter-rff: Table 1's
construction, :mod:`bench.data`), and their batch ``fit`` apart from their stream (``NAME.fit``: the
whole training part fitted once, other parameters at their defaults) over ridge {1e-6 (004's
parameter-free setting), 1e-4, 1e-2} or trace ridge {1e-4, 1e-3, 1e-2}. A candidate's
*regret* on a data set is the best validation accuracy of any candidate there minus its own. The
default is the candidate with the smallest mean regret over the data sets (ties: the smaller
worst regret). Leave-one-data-set-out: for each data set, the same choice made without it — its
test accuracy is what a user gets on data the defaults were not chosen on. *Tuned* is each data
set's own best candidate on validation. Vowpal Wabbit runs ``--oaa K`` at its defaults, with ``-b 28`` on
WordNet (10,087 classes in its default 2^18 weights collide: 1.03 %). Test accuracies are reported, never used to choose.

The candidates are fixed λ values, each one model's cost. ``lam="auto"`` (the four decades of the
grid learned at once, the best by progressive accuracy predicting) is measured beside them with the
chosen default's other settings: it needs no validation split but costs four models, so it is
reported as an option, not offered to the choice.
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import sys

import numpy as np

from bench.common import accuracy, machine, pyplot, save_results, vw_oaa
from bench.data import load

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
DATASETS = ["news20", "sector", "mnist", "usps", "letter"]
DENSE = ["mnist", "usps", "letter"]
RANDOM_FEATURES = ["usps-rff", "letter-rff"]  # Table 1's random-feature inputs (bench.data)
#: the batch fit of a least-squares learner, chosen apart from its stream: ``NAME.fit`` in the results
FIT = ".fit"
#: the MCID learners (000), which share one set of parameters and take lam="auto"
MCID = ["MulticlassSVM", "MulticlassLogisticRegression", "MulticlassPerceptron", "OneVsRestPegasos",
        "OneVsRestLogisticRegression"]
#: every learner of the protocol and the data sets it is chosen on
LEARNERS = {**{name: DATASETS for name in MCID}, "MulticlassPGS": DATASETS, "ExtremeSVM": DATASETS + ["wordnet"],
            "GeneralizedLeastSquares": DENSE + RANDOM_FEATURES, "CalibratedLeastSquares": DENSE + RANDOM_FEATURES,
            "StagewiseRegression": DENSE,
            "GeneralizedLeastSquares" + FIT: DENSE + RANDOM_FEATURES, "CalibratedLeastSquares" + FIT: DENSE + RANDOM_FEATURES}
#: each learner's configuration before this protocol (the *old default* column)
OLD_DEFAULTS = {"MulticlassPGS": {"sigma": 1e-4, "iterate": "last"},
                "ExtremeSVM": {"lam": 1e-5, "average": True, "average_power": 3.0, "eta0": "pegasos"},
                "GeneralizedLeastSquares": {"link": "softmax", "ridge": 1e-6, "batch_size": 32},
                "CalibratedLeastSquares": {"ridge": 1e-6, "stages": 5},
                "StagewiseRegression": {"ridge": 1e-6, "stages": 10, "block_size": 1000},
                # fit() took the stream's trace ridge until it had a default of its own
                "GeneralizedLeastSquares" + FIT: {"trace_ridge": 1e-2}, "CalibratedLeastSquares" + FIT: {"trace_ridge": 1e-4}}
OLD_MCID_DEFAULT = {"lam": 1e-4, "average": False, "project": False}
AVERAGES = {"last": {"average": False}, "average": {"average": True, "average_power": 0.0},
            "average^2": {"average": True, "average_power": 2.0}}
SEED = 7
BATCHES = (32, 64, 128, 256)  # GeneralizedLeastSquares' examples per step
#: VW's defaults but for the hash table: --oaa 10087 in the default 2^18 weights collides (1.03 % on WordNet)
VW_ARGS = {"wordnet": ("-b", "28")}
QUICK_ROWS = 1000  # training rows per data set in the smoke run (--quick)


#: ExtremeSVM's step: Pegasos' 1/(λt), or 002's schedule (Table 4) at the values memoir_bench's WordNet validation chose
STEPS = {"pegasos": {"eta0": "pegasos"}, "002": {"eta0": 3.0, "eta_decay": 1e-4}}
EXTREME_AVERAGES = {"last": {"average": False}, "average^2": {"average": True, "average_power": 2.0},
                    "average^3": {"average": True, "average_power": 3.0}}


def candidates(learner: str, quick: bool) -> list[dict]:
    if learner.endswith(FIT):  # the batch fit's ridge: 004's parameter-free 1e-6, larger relative ridges, trace ridges
        if quick:
            return [{"ridge": 1e-6}, {"trace_ridge": 1e-2}]
        return [{"ridge": ridge} for ridge in (1e-6, 1e-4, 1e-2)] + [{"trace_ridge": t} for t in (1e-4, 1e-3, 1e-2)]
    if learner == "MulticlassPGS":  # σ of 003's Eq. 7, and its iterate (Fig. 1 line 9; "random" is a device of the proof)
        sigmas = (1e-4,) if quick else (1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
        return [{"sigma": sigma, "iterate": iterate} for sigma in sigmas for iterate in ("last", "average")]
    if learner == "GeneralizedLeastSquares":  # Alg. 1's link, the ridge on Σ̂ (relative, or to its trace), examples per step
        if quick:
            return ([{"link": link, "ridge": 1e-6, "batch_size": 32} for link in ("softmax", "identity")]
                    + [{"link": "softmax", "trace_ridge": 1e-2, "batch_size": 32}])
        # the identity link's fit does not depend on the batch size; the old default is a candidate
        return ([{"link": "softmax", "ridge": ridge, "batch_size": batch} for ridge in (1e-3, 1e-1, 3e-1, 1.0, 3.0, 10.0)
                 for batch in BATCHES] + [OLD_DEFAULTS["GeneralizedLeastSquares"]]
                + [{"link": "softmax", "trace_ridge": trace_ridge, "batch_size": batch}
                   for trace_ridge in (1e-3, 3e-3, 1e-2, 3e-2, 1e-1) for batch in BATCHES]
                + [{"link": "identity", "ridge": ridge, "batch_size": 32} for ridge in (1e-6, 1e-3, 1e-1)])
    if learner == "CalibratedLeastSquares":  # Alg. 2's stages and the ridge (relative, or to the trace), refitting its window
        return ([{"ridge": ridge, "stages": stages} for ridge in (1e-6, 1e-3, 0.1, 1.0, 10.0) for stages in (2, 5, 10)]
                + [{"ridge": None, "trace_ridge": trace_ridge, "stages": stages}
                   for trace_ridge in (1e-5, 3e-5, 1e-4, 3e-4, 1e-3) for stages in (5, 10)])
    if learner == "StagewiseRegression":  # Alg. 3 on its default generator (features sampled by frequency)
        return [{"ridge": ridge, "stages": stages, "block_size": block} for ridge in (1e-6, 1e-3, 0.1, 1.0)
                for stages, block in ((10, 1000), (5, 200), (10, 100))]
    lambdas = (1e-4,) if quick else (1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3)
    if learner == "ExtremeSVM":
        steps = ("pegasos",) if quick else tuple(STEPS)
        return [{"lam": lam, **average, **STEPS[step]} for lam in lambdas for average in EXTREME_AVERAGES.values()
                for step in steps]
    return [{"lam": lam, **average, "project": project}
            for lam in lambdas for average in AVERAGES.values() for project in (False, True)]


def one_pass(cls, params: dict, X, y, X_test, y_test, seed: int = SEED) -> float:
    """Test accuracy after one pass of ``cls(**params)`` over the training part shuffled by ``seed``."""
    model = cls(**params)
    order = np.random.default_rng(seed).permutation(X.shape[0])
    X, y = X[order], y[order]
    for start in range(0, X.shape[0], 1000):
        model.learn_many(X[start : start + 1000], y[start : start + 1000])
    model.flush()  # the rows still waiting for a full mini-batch
    return accuracy(model.predict_many(X_test), y_test)


def batch_fit(cls, params: dict, X, y, X_test, y_test) -> float:
    """The learner's ``fit`` on the whole training part (its other parameters at their defaults)."""
    return accuracy(cls(**params).fit(X, y).predict_many(X_test), y_test)


def key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def choose(validation: dict, names: list, tie: float = 0.0) -> str:
    """The candidate with the smallest mean regret over ``names``; the candidates within ``tie`` of it
    are tied, and the smallest worst regret among them wins."""
    regrets = {}
    for name in names:
        best = max(validation[name].values())
        for candidate, score in validation[name].items():
            regrets.setdefault(candidate, []).append(best - score)
    least = min(np.mean(r) for r in regrets.values())
    tied = [c for c in regrets if np.mean(regrets[c]) <= least + tie]
    return min(tied, key=lambda c: (max(regrets[c]), np.mean(regrets[c])))


def scored_choices(validation: dict, scores: dict, names: list, name: str, default: str, tie: float = 0.0) -> dict:
    """Data set ``name``'s test ``scores`` of the ``default``, of the choice made without ``name``
    (*leave one out*, :func:`choose` with ``tie``) and of ``name``'s own best on validation (*tuned*), with those choices."""
    held_out = choose(validation, [n for n in names if n != name], tie)
    tuned = max(validation[name], key=validation[name].get)
    return {"default": scores[default], "leave_one_out": scores[held_out], "leave_one_out_choice": held_out,
            "tuned": scores[tuned], "tuned_choice": tuned}


@functools.lru_cache(maxsize=None)  # each worker process loads a data set once for all its candidates
def dataset(name: str, rows: int | None = None):
    """Data set ``name``, its training part cut to its first ``rows`` rows (``--quick``)."""
    split = load(name)
    return split.subsample(rows) if rows else split


def cell(learner: str, name: str, params: dict, rows: int | None = None) -> tuple[float, float]:
    """One candidate of ``learner`` on data set ``name``: its (validation, test) accuracies. One
    task per candidate, so that a large data set's grid spreads over every worker."""
    import streamlearn

    cls = getattr(streamlearn, learner.removesuffix(FIT))
    run = batch_fit if learner.endswith(FIT) else one_pass
    split = dataset(name, rows)
    val = split.validation()
    return (run(cls, params, val.X_train, val.y_train, val.X_test, val.y_test),
            run(cls, params, split.X_train, split.y_train, split.X_test, split.y_test))


def auto_cell(learner: str, name: str, params: dict, rows: int | None = None) -> float:
    import streamlearn

    split = dataset(name, rows)
    return one_pass(getattr(streamlearn, learner), params, split.X_train, split.y_train, split.X_test, split.y_test)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--jobs", type=int, default=2, help="processes running (learner, data set) cells at once")
    parser.add_argument("--learners", help="only these learners (comma-separated), merged into the existing results")
    parser.add_argument("--datasets", help="with --learners: only these of their data sets (comma-separated), merged "
                                           "into their existing scores before the choice is made again")
    parser.add_argument("--output", default=str(RESULTS), help="folder for defaults.{json,md,png}")
    args = parser.parse_args(argv)
    from concurrent.futures import ProcessPoolExecutor

    if args.datasets and not args.learners:
        parser.error("--datasets goes with --learners")
    if args.quick:
        learners = {name: ["usps", "letter"] for name in ("MulticlassSVM", "MulticlassPGS", "ExtremeSVM", "GeneralizedLeastSquares")}
        learners["GeneralizedLeastSquares" + FIT] = ["usps", "usps-rff"]
    else:
        names = args.learners.split(",") if args.learners else list(LEARNERS)
        unknown = set(names) - set(LEARNERS)
        if unknown:
            parser.error(f"unknown learners {sorted(unknown)}; the protocol's: {', '.join(LEARNERS)}")
        learners = {name: LEARNERS[name] for name in names}
    path = pathlib.Path(args.output) / "defaults.json"
    results = json.loads(path.read_text()) if args.learners and path.exists() else {"learners": {}, "vw": {}}
    results.setdefault("provenance", {})
    for learner in results["learners"]:  # learners of an earlier run keep the provenance of that run
        results["provenance"].setdefault(learner, results["machine"])
    rows = QUICK_ROWS if args.quick else None
    computed = learners  # the (learner, data set) cells this run computes; the others' scores come from the results
    if args.datasets:
        wanted = args.datasets.split(",")
        computed = {learner: [n for n in sets if n in wanted] for learner, sets in learners.items()}
        missing = [n for n in wanted if not any(n in sets for sets in learners.values())]
        if missing:
            parser.error(f"--datasets {missing} are none of these learners' data sets")
    for name in sorted({n for sets in computed.values() for n in sets} - set(results["vw"])):
        split = dataset(name, rows)
        results["vw"][name] = vw_oaa(split.X_train, split.y_train, split.X_test, split.y_test, VW_ARGS.get(name, ()))["accuracy"]
        print(f"{name}: vw --oaa {results['vw'][name]:.4f}", file=sys.stderr, flush=True)
    with ProcessPoolExecutor(args.jobs) as pool:
        grids = {learner: candidates(learner, args.quick) for learner in learners}
        cells = {(learner, name, key(params)): pool.submit(cell, learner, name, params, rows)
                 for learner, sets in computed.items() for name in sets for params in grids[learner]}
        validation = {learner: {name: dict(results["learners"].get(learner, {}).get("validation", {}).get(name, {}))
                                for name in sets if name not in computed[learner]} for learner, sets in learners.items()}
        test = {learner: {name: dict(results["learners"].get(learner, {}).get("test", {}).get(name, {}))
                          for name in sets if name not in computed[learner]} for learner, sets in learners.items()}
        for learner, sets in computed.items():
            for name in sets:
                validation[learner][name], test[learner][name] = {}, {}
        for (learner, name, candidate), future in cells.items():
            validation[learner][name][candidate], test[learner][name][candidate] = future.result()
            if len(validation[learner][name]) == len(grids[learner]):
                print(f"{learner} {name}: done", file=sys.stderr, flush=True)
        defaults = {learner: choose(validation[learner], sets) for learner, sets in learners.items()}
        autos = {learner: key({**json.loads(defaults[learner]), "lam": "auto"}) for learner in learners if learner in MCID}
        auto_runs = {(learner, name): pool.submit(auto_cell, learner, name, json.loads(autos[learner]), rows)
                     for learner in autos for name in computed[learner]}
        for (learner, name), future in auto_runs.items():
            test[learner][name][autos[learner]] = future.result()
    run = machine()
    for learner, sets in learners.items():
        default, auto = defaults[learner], autos.get(learner)
        table = {}
        for name in sets:
            scores = test[learner][name]
            table[name] = {**scored_choices(validation[learner], scores, sets, name, default),
                           "current_default": scores.get(key(OLD_DEFAULTS.get(learner, OLD_MCID_DEFAULT))), "auto": scores.get(auto)}
        results["learners"][learner] = {"default": default, "rows": table, "validation": validation[learner],
                                        "test": test[learner]}
        if args.datasets:  # the scores of the other data sets were made by the run recorded before
            run_here = {**run, "datasets": computed[learner]}
            results["provenance"][learner] = {**results["provenance"].get(learner, {}), "merged": [
                *results["provenance"].get(learner, {}).get("merged", []), run_here]}
        else:
            results["provenance"][learner] = run
    results["machine"] = run
    print(save_results(args.output, "defaults", results, report, plot))
    return 0


def report(results: dict) -> str:
    lines = ["# Defaults chosen across data sets (one pass)", "",
             "`python -m bench.defaults_bench` (protocol in its docstring). "
             "Test accuracy %, one pass. *default*: the configuration with the smallest mean validation regret over "
             "every data set; *leave one out*: the same choice made without the row's data set; *tuned*: the row's own "
             "best on validation; *old default*: the learner's configuration before this protocol (MCID: λ = 1e-4, last "
             "iterate, no projection; MulticlassPGS: σ = 1e-4, last iterate; ExtremeSVM: λ = 1e-5, averaged with power 3, "
             "Pegasos' step; GeneralizedLeastSquares: softmax link, ridge 1e-6, batches of 32; CalibratedLeastSquares: ridge "
             "1e-6, 5 stages; StagewiseRegression: ridge 1e-6, 10 stages of 1,000 features; the `.fit` rows, a least-squares "
             "learner's batch `fit` with its other parameters at their defaults: the stream's trace ridge, which fit "
             "took before it had a default of its own); *lam=\"auto\"* (MCID "
             "learners): the default's "
             "settings with the grid's four decades of λ learned at once and the best by progressive accuracy predicting "
             "(4x the compute; no validation split).", ""]
    for learner, block in results["learners"].items():
        run = results.get("provenance", {}).get(learner, results["machine"])
        merged = "".join(f" Data sets {', '.join(part['datasets'])} added at commit {part['commit'][:10]}, `{part['command']}`."
                         for part in run.get("merged", []))
        lines += [f"## {learner}: default `{block['default']}`", "",
                  f"Commit {run['commit'][:10]}{' (uncommitted changes)' if run.get('uncommitted_changes') else ''}, "
                  f"`{run['command']}`.{merged}", "",
                  "| data set | default | leave one out | tuned | old default | vw --oaa | default − tuned | default − vw "
                  "| lam=\"auto\" | auto − tuned | auto − vw |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, row in block["rows"].items():
            vw = results["vw"][name]
            old, auto = row["current_default"], row["auto"]
            auto_cells = ("—", "—", "—") if auto is None else (
                f"{100 * auto:.2f}", f"{100 * (auto - row['tuned']):+.2f}", f"{100 * (auto - vw):+.2f}")
            lines.append(f"| {name} | {100 * row['default']:.2f} | {100 * row['leave_one_out']:.2f} | {100 * row['tuned']:.2f} | "
                         f"{'—' if old is None else f'{100 * old:.2f}'} | {100 * vw:.2f} | "
                         f"{100 * (row['default'] - row['tuned']):+.2f} | {100 * (row['default'] - vw):+.2f} | "
                         + " | ".join(auto_cells) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()

    columns = min(3, len(results["learners"]))
    rows = -(-len(results["learners"]) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6 * columns, 4 * rows), squeeze=False)
    for ax in axes.flat[len(results["learners"]):]:
        ax.axis("off")
    for ax, (learner, block) in zip(axes.flat, results["learners"].items()):
        names = list(block["rows"])
        x = np.arange(len(names))
        for offset, (label, values) in enumerate((
                ("default", [block["rows"][n]["default"] for n in names]),
                ("leave one out", [block["rows"][n]["leave_one_out"] for n in names]),
                ("tuned", [block["rows"][n]["tuned"] for n in names]),
                ('lam="auto"', [block["rows"][n]["auto"] or np.nan for n in names]),
                ("vw --oaa", [results["vw"][n] for n in names]))):
            ax.bar(x + 0.16 * offset - 0.32, 100 * np.array(values), 0.16, label=label)
        ax.set_xticks(x, names)
        lowest = min(min(block["rows"][n]["default"], results["vw"][n]) for n in names)
        ax.set_ylim(max(0, 100 * lowest - 20), 100)
        ax.set_ylabel("test accuracy %, one pass")
        ax.set_title(learner)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
