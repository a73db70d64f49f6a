"""A learner's first use on a fresh install: the ahead-of-time kernels against numba's JIT compiling them.

    python -m bench.first_use_bench [--repeats 3] [--learners MulticlassSVM,MulticlassPGS,...] [--out DIR]
    python -m bench.first_use_bench --quick --out DIR   # its smoke run: one learner, one repeat

Each run is a fresh process that imports streamlearn, learns 300 rows of 64 dense features
(``learn_many``, then ``learn_one``) and predicts (``predict_many``, ``predict_one``), timed whole,
with numba's cache in an empty folder of its own — what a user's first command meets after
``pip install``. Two ways, interleaved: the installed ahead-of-time build (a call it does not
cover would JIT-compile here too), and ``STREAMLEARN_JIT=1`` (every kernel compiled at first
call). Each run also says whether it imported numba. Writes ``first-use.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
LEARNERS = {
    "MulticlassSVM": "MulticlassSVM()",
    "MulticlassLogisticRegression": "MulticlassLogisticRegression()",
    "MulticlassPGS": "MulticlassPGS()",
    "ExtremeSVM": "ExtremeSVM()",
    "GeneralizedLeastSquares": "GeneralizedLeastSquares()",
    "LpNormMulticlassSVM": "LpNormMulticlassSVM()",
}
PROGRAM = """
import sys
import numpy as np
import streamlearn
rng = np.random.default_rng(0)
X, y = rng.normal(size=(300, 64)), rng.integers(0, 5, 300)
model = streamlearn.{make}
model.learn_many(X[:299], y[:299])
if hasattr(model, "learn_one"):
    model.learn_one(dict(enumerate(X[299].tolist())), int(y[299]))
model.predict_many(X[:20])
model.predict_one(dict(enumerate(X[0].tolist())))
print("numba" in sys.modules)
"""


def first_use(make: str, jit: bool) -> tuple[float, bool]:
    """Seconds of one fresh process's first use of ``make``, and whether it imported numba."""
    env = {k: v for k, v in os.environ.items() if k != "STREAMLEARN_JIT"}
    if jit:
        env["STREAMLEARN_JIT"] = "1"
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        env["NUMBA_CACHE_DIR"] = cache
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", PROGRAM.format(make=make)], env=env, check=True, capture_output=True,
                              text=True)
        seconds = time.perf_counter() - start
    return seconds, done.stdout.strip().splitlines()[-1] == "True"


def report(results: dict) -> str:
    m = results["machine"]
    lines = ["# A learner's first use on a fresh install (bench/first_use_bench.py)", "",
             f"Commit {m['commit'][:10]}; `{m['command']}`; medians of {results['repeats']} interleaved runs, each a fresh "
             "process with numba's cache in an empty folder: import, learn 300 rows of 64 features, predict.", "",
             "| learner | ahead of time (s) | imports numba | JIT from an empty cache (s) | JIT / ahead of time |",
             "|---|---:|---|---:|---:|"]
    for name, r in results["learners"].items():
        aot, jit = statistics.median(r["ahead of time"]), statistics.median(r["JIT"])
        lines.append(f"| {name} | {aot:.2f} | {'yes' if any(r['ahead of time imports numba']) else 'no'} | {jit:.2f} | "
                     f"{jit / aot:.1f}× |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: pathlib.Path) -> None:
    from bench.common import pyplot

    plt = pyplot()
    names = list(results["learners"])
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.2))
    for offset, (way, label) in enumerate((("ahead of time", "ahead of time"), ("JIT", "JIT, empty cache"))):
        ax.barh([i + 0.4 * offset for i in range(len(names))],
                [statistics.median(results["learners"][n][way]) for n in names], height=0.4, label=label)
    ax.set_yticks([i + 0.2 for i in range(len(names))], names, fontsize=8)
    ax.set_xlabel("seconds, whole process (median)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--learners", default=",".join(LEARNERS), help="comma-separated, of " + ", ".join(LEARNERS))
    parser.add_argument("--quick", action="store_true", help="a smoke run: GeneralizedLeastSquares, one repeat")
    parser.add_argument("--out", default=str(RESULTS), help="folder of the results")
    args = parser.parse_args(argv)
    names = ["GeneralizedLeastSquares"] if args.quick else [n.strip() for n in args.learners.split(",") if n.strip()]
    unknown = [n for n in names if n not in LEARNERS]
    if unknown:
        parser.error(f"unknown learners {unknown}: choose among {', '.join(LEARNERS)}")
    repeats = 1 if args.quick else args.repeats
    from bench.common import machine, save_results

    results = {"machine": machine(), "repeats": repeats, "learners": {}}
    for name in names:
        runs = {"ahead of time": [], "ahead of time imports numba": [], "JIT": []}
        for _ in range(repeats):
            seconds, imported = first_use(LEARNERS[name], jit=False)
            runs["ahead of time"].append(seconds)
            runs["ahead of time imports numba"].append(imported)
            runs["JIT"].append(first_use(LEARNERS[name], jit=True)[0])
        results["learners"][name] = runs
        print(name, {k: [round(v, 2) for v in vs] for k, vs in runs.items()}, flush=True)
    print(save_results(args.out, "first-use", results, report, plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
