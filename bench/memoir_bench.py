"""Extreme classification benchmark (issue 23): ExtremeSVM (paper 002, MEMOIR) on WordNet
hypernyms (10,087 classes) against the peers, an ablation, and a synthetic scaling run, in one run.

    python -m bench.memoir_bench               # everything (about 20-30 min on 2 cores)
    python -m bench.memoir_bench --only scaling
    python -m bench.memoir_bench --quick --output /tmp/smoke   # a smoke run (the test suite's)

Writes ``bench/results/memoir.json``, ``memoir.md`` and ``memoir.png``.

Every configuration runs in its own process (``--one``), one thread, so that its peak RSS is
its own (the whole process: Python, data, model, index); times are wall-clock seconds of the
training call(s) only, data loading excluded, in this same run.

* **Our configuration** is chosen on a validation split: the first 90 % of the training file
  (shuffled when it was built) trained in one pass, the last 10 % scored; grid λ ∈ {3e-6, 1e-5,
  3e-5}, averaging power ∈ {2, 3}, fallback ∈ {lowest, random} with the Pegasos step, and at
  λ = 1e-5, fallback lowest, power ∈ {2, 3} 002's schedule ``eta0 / (1 + eta_decay t)`` with
  eta0 ∈ {1, 3, 10, 30}, eta_decay ∈ {1e-5, 1e-4, 1e-3}; exact oracle. The chosen
  configuration then learns the whole training file in 1 and 5 passes (the same file order
  each pass) and is scored on the test file.
* **Peers** at their defaults or the settings the dataset README quotes: Vowpal Wabbit
  ``--oaa 10087 -b 28`` and ``--log_multi 10087`` one pass; napkinXC PLT (batch) and its online
  PLT (``model="oplt"``); omikuji (batch label trees); fastText (:data:`FASTTEXT`; feature ids as
  words, values dropped); MulticlassSVM (dense weights) one pass at the chosen λ and averaging.
* **Ablation** (002's table on our data), one pass: ℓ2 / ℓ1 × exact / graph / LSH, with the
  oracle's recall (share of rows whose most violating class the oracle's candidates contain,
  against an exact scan at the same model) sampled during training.
  The graph's ``M`` and ``ef_construction`` are chosen first, on the validation split with the
  chosen configuration, among :data:`GRAPH_GRID`: the fastest whose accuracy is within one
  standard error (binomial, of the validation rows) of the best; they are ``GraphOracle``'s defaults.
* **Scaling**: a synthetic stream (:func:`synthetic_stream`) at K = 10³, 10⁴, 10⁵, time per
  example (after the first 10,000 examples; the median of ``--repeats`` runs, made in rounds)
  and peak RSS for each oracle, at the oracles' defaults.

The dense section (issue 44: embeddings, d = 128 / 512, 10⁴–10⁶ classes, the exact dense scan
with BLAS and the dense peers) is its own module, ``bench/dense_extreme_bench.py``: its stream,
peers and interleaved pairs share nothing with this run's sparse WordNet protocol, and at 10⁶
classes it takes as long as this whole run.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp

from bench.common import NO_INTERCEPT, machine, pyplot
from bench.data import DATASETS, wordnet_part

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
N_CLASSES = 10_087
GRID = [{"lam": lam, "average": True, "average_power": power, "fallback": fallback, "eta0": "pegasos"}
        for lam in (3e-6, 1e-5, 3e-5) for power in (2.0, 3.0) for fallback in ("lowest", "random")]
#: 002's step schedule η = eta0 / (1 + eta_decay t) in place of Pegasos' 1/(λt) (its Table 4)
GRID += [{"lam": 1e-5, "average": True, "average_power": power, "fallback": "lowest", "eta0": eta0, "eta_decay": decay}
         for power in (2.0, 3.0) for eta0 in (1.0, 3.0, 10.0, 30.0) for decay in (1e-5, 1e-4, 1e-3)]


#: hnswlib's graph degree and construction beam; an update's repair costs about M² distances
GRAPH_GRID = [{"M": 12, "ef_construction": 48}, {"M": 8, "ef_construction": 24}, {"M": 6, "ef_construction": 16}]


def peak_rss_gb(children: bool = False) -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF)
    return usage.ru_maxrss / 1e6  # kilobytes on Linux


def data(split: str, rows: int | None = None):
    """(X_train, y_train, X_test, y_test): ``"test"`` the files, ``"validation"`` the first 90 %
    of the training file against its last 10 %; ``rows``: only the first rows of each (``--quick``)."""
    if rows:
        X, y, X_test, y_test = data(split)
        return X[:rows], y[:rows], X_test[: rows // 4], y_test[: rows // 4]
    X, y = wordnet_part("train")
    if split == "validation":
        cut = int(0.9 * X.shape[0])
        return X[:cut], y[:cut], X[cut:], y[cut:]
    X_test, y_test = wordnet_part("test")
    width = max(X.shape[1], X_test.shape[1])
    return X, y, sp.csr_matrix(X_test, shape=(X_test.shape[0], width)) if X_test.shape[1] < width else X_test, y_test


# ---------------------------------------------------------------------- one run
def run_ours(spec: dict) -> dict:
    """Train an ExtremeSVM (or MulticlassSVM) pass by pass in batches of 1,000 rows; test
    accuracy after each pass, the oracle's recall sampled along the way."""
    import streamlearn

    X, y, X_test, y_test = data(spec["split"], spec.get("rows"))
    cls = getattr(streamlearn, spec.get("learner", "ExtremeSVM"))
    params = {**NO_INTERCEPT, **spec["params"]}  # 002's model (and MulticlassSVM beside it, as it was run)
    model = cls(**params)
    warm = cls(**params)  # compile the kernels outside the timed part
    warm.learn_many(X[:2000], y[:2000])
    warm.predict_many(X_test[:10])
    del warm
    seconds, per_pass, recalls = 0.0, [], []
    for _ in range(spec.get("passes", 1)):
        for start in range(0, X.shape[0], 1000):
            t0 = time.perf_counter()
            model.learn_many(X[start : start + 1000], y[start : start + 1000])
            seconds += time.perf_counter() - t0
            if spec.get("recall") and start % 10_000 == 0 and start + 1200 <= X.shape[0]:
                recalls.append((start, model.violator_recall(X[start + 1000 : start + 1200], y[start + 1000 : start + 1200])))
        t0 = time.perf_counter()
        predicted = model.predict_many(X_test)
        predict_seconds = time.perf_counter() - t0
        per_pass.append(float(np.mean(predicted.astype(np.int64) == y_test)))
    out = {"accuracy": per_pass[-1], "accuracy_per_pass": per_pass, "train_seconds": seconds,
           "examples_per_s": spec.get("passes", 1) * X.shape[0] / seconds, "predict_seconds": predict_seconds,
           "peak_rss_gb": peak_rss_gb()}
    if hasattr(model, "n_weights"):
        out["weights"] = model.n_weights
    else:
        out["weights"] = int(np.count_nonzero(model.weight_matrix()))
    if recalls:
        out["recall"] = recalls
    return out


def _write_vw(path, X, y) -> None:
    with open(path, "w") as f:
        for i in range(X.shape[0]):
            row = X[i]
            f.write(f"{y[i] + 1} | " + " ".join(f"{j}:{v:.6g}" for j, v in zip(row.indices, row.data)) + "\n")


def run_vw(spec: dict) -> dict:
    X, y, X_test, y_test = data("test")
    with tempfile.TemporaryDirectory() as work:
        train, test, model, preds = (os.path.join(work, n) for n in ("train.vw", "test.vw", "m.vw", "p.txt"))
        _write_vw(train, X, y)
        _write_vw(test, X_test, y_test)
        command = [sys.executable, "-m", "vowpalwabbit", "-d", train, *spec["args"], "-f", model, "--quiet"]
        t0 = time.perf_counter()
        subprocess.run(command, check=True)
        seconds = time.perf_counter() - t0
        rss = peak_rss_gb(children=True)
        subprocess.run([sys.executable, "-m", "vowpalwabbit", "-t", "-i", model, "-d", test, "-p", preds, "--quiet"], check=True)
        predicted = np.loadtxt(preds).astype(np.int64) - 1
        size = os.path.getsize(model)
    return {"accuracy": float(np.mean(predicted == y_test)), "train_seconds": seconds, "examples_per_s": X.shape[0] / seconds,
            "peak_rss_gb": rss, "model_mb": size / 1e6}


def run_napkinxc(spec: dict) -> dict:
    from napkinxc.models import PLT, Model

    X, y, X_test, y_test = data("test")
    with tempfile.TemporaryDirectory() as work:
        model = PLT(work, threads=1, seed=0) if spec["model"] == "plt" else Model(output=work, model="oplt", threads=1, seed=0)
        t0 = time.perf_counter()
        model.fit(X, [[int(k)] for k in y])
        seconds = time.perf_counter() - t0
        predicted = np.array([p[0] if p else -1 for p in model.predict(X_test, top_k=1)])
        size = sum(f.stat().st_size for f in pathlib.Path(work).rglob("*") if f.is_file())
    return {"accuracy": float(np.mean(predicted == y_test)), "train_seconds": seconds, "examples_per_s": X.shape[0] / seconds,
            "peak_rss_gb": peak_rss_gb(), "model_mb": size / 1e6}


def run_omikuji(spec: dict) -> dict:
    import omikuji

    X, y, X_test, y_test = data("test")
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "train.txt")
        with open(path, "w") as f:
            f.write(f"{X.shape[0]} {X.shape[1]} {N_CLASSES}\n")
            for i in range(X.shape[0]):
                row = X[i]
                f.write(f"{y[i]} " + " ".join(f"{j}:{v:.6g}" for j, v in zip(row.indices, row.data)) + "\n")
        t0 = time.perf_counter()
        model = omikuji.Model.train_on_data(path, n_threads=1)
        seconds = time.perf_counter() - t0
        predicted = []
        for i in range(X_test.shape[0]):
            row = X_test[i]
            top = model.predict(list(zip(row.indices.tolist(), row.data.tolist())), top_k=1)
            predicted.append(top[0][0] if top else -1)
        model.save(os.path.join(work, "model"))
        size = sum(f.stat().st_size for f in pathlib.Path(work, "model").rglob("*") if f.is_file())
    return {"accuracy": float(np.mean(np.array(predicted) == y_test)), "train_seconds": seconds,
            "examples_per_s": X.shape[0] / seconds, "peak_rss_gb": peak_rss_gb(), "model_mb": size / 1e6}


def run_fasttext(spec: dict) -> dict:
    """fastText's supervised classifier on the same rows, each feature id a word (its value
    dropped: fastText reads words), one thread; ``spec``: ``epoch`` and ``loss``."""
    import fasttext

    X, y, X_test, y_test = data("test")

    def words(row) -> str:
        return " ".join(f"f{j}" for j in row.indices)

    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "train.txt")
        with open(path, "w") as f:
            for i in range(X.shape[0]):
                f.write(f"__label__{y[i]} {words(X[i])}\n")
        t0 = time.perf_counter()
        model = fasttext.train_supervised(input=path, epoch=spec["epoch"], loss=spec["loss"], thread=1, verbose=0)
        seconds = time.perf_counter() - t0
        labels, _ = model.predict([words(X_test[i]) for i in range(X_test.shape[0])], k=1)
        model.save_model(os.path.join(work, "model.bin"))
        size = os.path.getsize(os.path.join(work, "model.bin"))
    predicted = np.array([int(found[0].removeprefix("__label__")) if found else -1 for found in labels])
    return {"accuracy": float(np.mean(predicted == y_test)), "train_seconds": seconds,
            "examples_per_s": spec["epoch"] * X.shape[0] / seconds, "peak_rss_gb": peak_rss_gb(), "model_mb": size / 1e6}


# --------------------------------------------------------------------- scaling
def synthetic_stream(n: int, n_classes: int, seed: int = 0, vocabulary: int = 200_000):
    """A text-like stream with many classes (CSR rows, class ids):

    * words: a Zipf(1.1) vocabulary of ``vocabulary`` features, shared by every class;
    * a label tree: classes are the leaves of a tree of branching 10; each class draws most of
      its 8 words from its own 30-word profile, and one of them from its parent's 30-word profile,
      so that siblings are confusable;
    * class sizes follow a power law (many classes with 1-10 examples) and classes appear over
      time (class ``k`` cannot occur before example ``k · n / (2 K)``).
    """
    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, vocabulary + 1) ** 1.1
    zipf /= zipf.sum()
    n_parents = max(1, n_classes // 10)
    parent_words = rng.choice(vocabulary, size=(n_parents, 30), p=zipf)
    own_words = rng.integers(0, vocabulary, size=(n_classes, 30))
    cumulative = np.cumsum(1.0 / np.arange(1, n_classes + 1) ** 0.8)
    available = np.maximum(2, np.minimum(n_classes, (2 * n_classes * (np.arange(n) + 1)) // n))
    labels = np.searchsorted(cumulative, rng.random(n) * cumulative[available - 1], side="right")
    common = rng.choice(vocabulary, size=n, p=zipf)
    own = own_words[labels[:, None], rng.integers(0, 30, size=(n, 6))]
    parent = parent_words[labels // 10, rng.integers(0, 30, size=n)]
    rows = [np.unique(np.concatenate([own[i], [parent[i], common[i]]])) for i in range(n)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    indices = np.concatenate(rows)
    values = np.repeat(1.0 / np.sqrt(np.diff(indptr)), np.diff(indptr))  # unit-length rows
    return sp.csr_matrix((values, indices, indptr), shape=(n, vocabulary)), labels.astype(np.int64)


def run_scaling(spec: dict) -> dict:
    import streamlearn

    X, y = synthetic_stream(spec["n"], spec["classes"], seed=1)
    model = streamlearn.ExtremeSVM(**NO_INTERCEPT, **spec["params"])
    warm = streamlearn.ExtremeSVM(**NO_INTERCEPT, **spec["params"])
    warm.learn_many(X[:500], y[:500])
    del warm
    model.learn_many(X[:10_000], y[:10_000])
    t0 = time.perf_counter()
    for start in range(10_000, X.shape[0], 1000):
        model.learn_many(X[start : start + 1000], y[start : start + 1000])
    seconds = time.perf_counter() - t0
    return {"us_per_example": 1e6 * seconds / (X.shape[0] - 10_000), "peak_rss_gb": peak_rss_gb(),
            "classes_seen": len(model.classes), "weights": model.n_weights}


RUNNERS = {"ours": run_ours, "vw": run_vw, "napkinxc": run_napkinxc, "omikuji": run_omikuji, "fasttext": run_fasttext,
           "scaling": run_scaling}
#: fastText at its defaults (softmax, 5 epochs) and in its many-class setting (hierarchical softmax), one pass
FASTTEXT = {"fastText (defaults: softmax, 5 epochs)": {"epoch": 5, "loss": "softmax"},
            "fastText loss=hs, 1 epoch": {"epoch": 1, "loss": "hs"}}


def one(spec: dict) -> dict:
    """Run ``spec`` in a fresh process (one thread everywhere) and return its JSON result."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "bench.memoir_bench", "--one", json.dumps(spec)], capture_output=True,
                          text=True, env=env, cwd=pathlib.Path(__file__).resolve().parents[1])
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------- the run
def choose(log, grid=GRID, limit=None) -> tuple[dict, list]:
    rows = []
    for params in grid:
        result = one({"kind": "ours", "split": "validation", "params": params, "rows": limit})
        rows.append({"params": params, **result})
        log(f"validation {params}: {result.get('accuracy')}")
    best = max(rows, key=lambda r: (r.get("accuracy", -1), -r["params"]["lam"]))
    return best["params"], rows


def choose_graph(log, chosen: dict, limit=None, grid=GRAPH_GRID) -> tuple[dict, list]:
    """The fastest of ``grid`` within one standard error of the best validation accuracy."""
    rows = []
    for graph in grid:
        params = {**chosen, "oracle": "graph", "seed": 0, "oracle_params": graph}
        rows.append({"oracle_params": graph, **one({"kind": "ours", "split": "validation", "params": params, "rows": limit})})
        log(f"graph validation {graph}: {rows[-1].get('accuracy')} at {rows[-1].get('examples_per_s')} examples/s")
    scored = [r for r in rows if "accuracy" in r]
    best = max(r["accuracy"] for r in scored)
    n_validation = data("validation", limit)[3].shape[0]
    standard_error = (best * (1 - best) / n_validation) ** 0.5
    fastest = max((r for r in scored if r["accuracy"] >= best - standard_error), key=lambda r: r["examples_per_s"])
    return fastest["oracle_params"], rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=["wordnet", "ablation", "scaling", "fasttext"], action="append",
                        help="one section (repeatable); fasttext: only the fastText rows of the WordNet table")
    parser.add_argument("--scaling-examples", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=3, help="scaling runs per setting; the median is reported")
    parser.add_argument("--report-only", action="store_true", help="rewrite memoir.md and memoir.png from memoir.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3,000 WordNet rows, one candidate, no peers, "
                                                             "a small scaling run (the test suite's)")
    parser.add_argument("--output", default=str(RESULTS), help="folder for memoir.{json,md,png}")
    args = parser.parse_args(argv)
    output = pathlib.Path(args.output)
    limit = 3000 if args.quick else None
    if args.one:
        spec = json.loads(args.one)
        print(json.dumps(RUNNERS[spec["kind"]](spec)))
        return 0
    if not DATASETS.is_dir():
        raise SystemExit(f"datasets not found at {DATASETS}: the benchmark needs ../shared/datasets")
    path = output / "memoir.json"
    results = json.loads(path.read_text()) if path.exists() and not args.quick else {}
    if args.report_only:
        (output / "memoir.md").write_text(report(results))
        plot(results, output / "memoir.png")
        return 0
    sections = args.only or ["wordnet", "ablation", "scaling"]

    def log(text):
        print(text, file=sys.stderr, flush=True)

    if "wordnet" in sections or "ablation" in sections:
        if "chosen" not in results or "wordnet" in sections:
            results["chosen"], results["validation"] = choose(log, GRID[:1] if args.quick else GRID, limit)
    chosen = results["chosen"]
    if "wordnet" in sections:
        table = {}
        for passes in (1, 2) if args.quick else (1, 5):
            table[f"ExtremeSVM exact, {passes} pass{'es' if passes > 1 else ''}"] = one(
                {"kind": "ours", "split": "test", "params": chosen, "passes": passes, "rows": limit})
    if "wordnet" in sections and not args.quick:
        # without the averaged iterate (named: both learners average by default): its second
        # dense K x d matrix would not fit in 24 GB
        table["MulticlassSVM (dense), 1 pass"] = one({"kind": "ours", "split": "test", "learner": "MulticlassSVM",
                                                      "params": {"lam": chosen["lam"], "average": False}})
        table["ExtremeSVM exact, 1 pass, as MulticlassSVM"] = one(
            {"kind": "ours", "split": "test", "params": {"lam": chosen["lam"], "average": False, "eta0": "pegasos"}})
        table["Vowpal Wabbit --oaa -b 28, 1 pass"] = one({"kind": "vw", "args": ["--oaa", str(N_CLASSES), "-b", "28"]})
        table["Vowpal Wabbit --log_multi, 1 pass"] = one({"kind": "vw", "args": ["--log_multi", str(N_CLASSES)]})
        table["napkinXC PLT (batch)"] = one({"kind": "napkinxc", "model": "plt"})
        table["napkinXC online PLT"] = one({"kind": "napkinxc", "model": "oplt"})
        table["omikuji (batch)"] = one({"kind": "omikuji"})
    if "wordnet" in sections or "fasttext" in sections:
        table = table if "wordnet" in sections else dict(results.get("wordnet", {}))
        for name, settings in ({} if args.quick else FASTTEXT).items():
            table[name] = one({"kind": "fasttext", **settings})
    if "wordnet" in sections or "fasttext" in sections:
        for name, row in table.items():
            log(f"{name}: {row}")
        results["wordnet"] = table
    if "ablation" in sections:
        results["graph_chosen"], results["graph_validation"] = choose_graph(log, chosen, limit,
                                                                            GRAPH_GRID[-1:] if args.quick else GRAPH_GRID)
        ablation = {}
        for penalty, extra in (("l2", {}),) if args.quick else (("l2", {}), ("l1", {"lam": 1e-6, "average": False, "average_power": 0.0})):
            for oracle in ("exact", "lsh") if args.quick else ("exact", "graph", "lsh"):
                params = {**chosen, **extra, "penalty": penalty, "oracle": oracle, "seed": 0}
                if oracle == "graph":
                    params["oracle_params"] = results["graph_chosen"]
                ablation[f"{penalty}, {oracle}"] = one({"kind": "ours", "split": "test", "params": params,
                                                        "recall": oracle != "exact", "rows": limit})
                log(f"ablation {penalty} {oracle}: {ablation[f'{penalty}, {oracle}']}")
        results["ablation"] = ablation
    if "scaling" in sections:
        runs = {}
        for _ in range(1 if args.quick else args.repeats):
            for oracle in ("exact", "lsh") if args.quick else ("exact", "graph", "lsh"):
                for classes in (500, 2_000) if args.quick else (1_000, 10_000, 100_000):
                    params = {"lam": 1e-5, "average": True, "average_power": 3.0, "fallback": "random", "oracle": oracle,
                              "seed": 0, "eta0": "pegasos"}
                    row = one({"kind": "scaling", "n": 12_000 if args.quick else args.scaling_examples,
                               "classes": classes, "params": params})
                    runs.setdefault(f"{oracle} {classes}", []).append({"oracle": oracle, "classes": classes, **row})
                    log(f"scaling {oracle} {classes}: {row}")
        results["scaling"] = {key: median_run(rows) for key, rows in runs.items()}
    results["machine"] = machine()
    for section in sections:  # sections run at different times: each keeps the provenance of its own run
        results.setdefault("provenance", {})[section] = results["machine"]
    output.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    (output / "memoir.md").write_text(report(results))
    plot(results, output / "memoir.png")
    return 0


def median_run(rows: list[dict]) -> dict:
    """The run of median time per example, with every run's time beside it."""
    timed = sorted((r for r in rows if "us_per_example" in r), key=lambda r: r["us_per_example"])
    if not timed:
        return rows[0]
    return {**timed[(len(timed) - 1) // 2], "us_per_example_runs": [r["us_per_example"] for r in rows if "us_per_example" in r]}


def _fmt(row: dict, key: str, spec: str) -> str:
    value = row.get(key)
    return "—" if value is None else format(value, spec)


def report(results: dict) -> str:
    lines = ["# Extreme classification: ExtremeSVM (MEMOIR, paper 002) on WordNet hypernyms", "",
             f"{results['machine']['cpu']}, one thread per run; generated by `python -m bench.memoir_bench` (see its "
             "docstring for the protocol). Sections, the commit and command of the run that made each: "
             + "; ".join(f"{section} {m['commit'][:10]} (`{m['command']}`)" for section, m in results.get("provenance", {}).items())
             + ".", ""]
    chosen = results.get("chosen")
    if chosen:
        lines += [f"Configuration chosen on validation (first 90 % / last 10 % of the training file, one pass): `{chosen}`.", ""]
    if "wordnet" in results:
        lines += ["## WordNet (53,537 train / 13,073 test rows, 10,087 classes)", "",
                  "| learner | test accuracy % | train s | examples/s | peak RSS GB | model |", "|---|---:|---:|---:|---:|---:|"]
        for name, row in results["wordnet"].items():
            size = f"{row['weights']:,} weights" if "weights" in row else (f"{row['model_mb']:.0f} MB" if "model_mb" in row else "—")
            accuracy = "—" if "accuracy" not in row else f"{100 * row['accuracy']:.2f}"
            lines.append(f"| {name} | {accuracy} | {_fmt(row, 'train_seconds', '.1f')} | {_fmt(row, 'examples_per_s', ',.0f')} | "
                         f"{_fmt(row, 'peak_rss_gb', '.2f')} | {size if 'error' not in row else row['error']} |")
        ours = results["wordnet"].get("ExtremeSVM exact, 1 pass, as MulticlassSVM", {})
        dense = results["wordnet"].get("MulticlassSVM (dense), 1 pass", {})
        if "examples_per_s" in ours and "examples_per_s" in dense:
            lines += ["", f"With MulticlassSVM's configuration (same λ, no averaging: the same model up to rounding), "
                          f"ExtremeSVM learns {ours['examples_per_s'] / dense['examples_per_s']:.1f}x its examples/s on the "
                          "same stream, in a fraction of its memory."]
        lines.append("")
    if "graph_validation" in results:
        lines += ["## The graph oracle's parameters (validation split, chosen configuration, one pass)", "",
                  "| hnswlib M, ef_construction | validation accuracy % | examples/s |", "|---|---:|---:|"]
        for row in results["graph_validation"]:
            lines.append(f"| {row['oracle_params']['M']}, {row['oracle_params']['ef_construction']} | "
                         f"{_fmt({'a': 100 * row['accuracy']} if 'accuracy' in row else {}, 'a', '.2f')} | "
                         f"{_fmt(row, 'examples_per_s', ',.0f')} |")
        lines += ["", f"Chosen (the fastest within one standard error of the best): `{results['graph_chosen']}`.", ""]
    if "ablation" in results:
        lines += ["## Ablation (one pass; 002's table on our data)", "",
                  "| penalty, oracle | test accuracy % | train s | examples/s | peak RSS GB | weights | oracle recall (mean of samples) |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for name, row in results["ablation"].items():
            recall = row.get("recall")
            recall_text = f"{np.mean([r for _, r in recall]):.3f}" if recall else ("1 (exact)" if "exact" in name else "—")
            accuracy = "—" if "accuracy" not in row else f"{100 * row['accuracy']:.2f}"
            lines.append(f"| {name} | {accuracy} | {_fmt(row, 'train_seconds', '.1f')} | {_fmt(row, 'examples_per_s', ',.0f')} | "
                         f"{_fmt(row, 'peak_rss_gb', '.2f')} | {_fmt(row, 'weights', ',')} | {recall_text} |")
        lines.append("")
    if "scaling" in results:
        lines += ["## Scaling (synthetic stream, `bench.memoir_bench.synthetic_stream`)", "",
                  "| oracle | classes | classes seen | µs per example | peak RSS GB | weights |", "|---|---:|---:|---:|---:|---:|"]
        for row in results["scaling"].values():
            lines.append(f"| {row['oracle']} | {row['classes']:,} | {_fmt(row, 'classes_seen', ',')} | "
                         f"{_fmt(row, 'us_per_example', '.1f')} | {_fmt(row, 'peak_rss_gb', '.2f')} | {_fmt(row, 'weights', ',')} |")
        for oracle in ("exact", "graph", "lsh"):
            small, large = results["scaling"].get(f"{oracle} 1000", {}), results["scaling"].get(f"{oracle} 100000", {})
            if "us_per_example" in small and "us_per_example" in large:
                lines.append(f"\n{oracle}: cost per example at 10⁵ classes = {large['us_per_example'] / small['us_per_example']:.2f}x "
                             "the cost at 10³.")
        lines.append("")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for oracle, style in (("exact", "o-"), ("graph", "s-"), ("lsh", "^-")):
        rows = [r for r in results.get("scaling", {}).values() if r["oracle"] == oracle and "us_per_example" in r]
        if rows:
            axes[0].plot([r["classes"] for r in rows], [r["us_per_example"] for r in rows], style, label=oracle)
            axes[1].plot([r["classes"] for r in rows], [r["peak_rss_gb"] for r in rows], style, label=oracle)
    axes[0].set_yscale("log")
    for ax, label in zip(axes, ("µs per example", "peak RSS (GB)")):
        ax.set_xscale("log")
        ax.set_xlabel("classes K")
        ax.set_ylabel(label)
        ax.legend()
        ax.grid(alpha=0.3)
    axes[0].set_title("ExtremeSVM: learning cost against K")
    axes[1].set_title("memory against K")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
