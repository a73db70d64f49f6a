"""The cost model of ``ExtremeSVM(oracle="auto")`` (issue 44): where the mean-example index
(``oracle="means"``) is cheaper than the exact scan of the dense class rows, and where it loses
accuracy, measured on this machine.

    python -m bench.oracle_cost_bench [--grid 128:125,500,2000 16:256,8192] [--out DIR]

For each (columns d, classes K) of ``--grid``: the synthetic embedding stream of
:func:`bench.dense_extreme_bench.embedding_stream` (max(8,000, 8 K) examples learned in one pass,
a quarter as many tested), learned by ``ExtremeSVM(oracle="exact")`` and by
``ExtremeSVM(oracle="means")`` with its index trained from ``min(2000, max(40, K // 4))``
classes on (so that it serves most of the stream), ``learn_many`` / ``predict_many`` on blocks
of 1,000 rows, one thread, CPU time. Reported: microseconds per example learned and predicted,
test accuracy, and the weights ``K × d`` of the row.

``streamlearn.memoir.means``' docstring reads its rule from these figures: ``"auto"`` trains the
index once classes × columns reach ``AUTO_MIN_WEIGHTS`` (2^15), over at least ``AUTO_MIN_COLUMNS`` (32).

Then the real data sets (``--sets``, from ``../shared/datasets``; sparse text, dense pixels, random
Fourier features): ``ExtremeSVM()`` (``oracle="auto"``) against ``ExtremeSVM(oracle="exact")``, one
pass of ``learn_many`` on blocks of 1,000 rows, ``--rounds`` interleaved rounds (alternately
first), the median CPU
seconds and the test accuracy of each: where the gate stays shut, ``"auto"`` must be the exact scan,
as fast and as accurate.

Writes ``oracle-cost.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np

from .common import machine, pyplot, save_results
from .dense_extreme_bench import embedding_stream, run_extreme

RESULTS_NAME = "oracle-cost"
GRID = "16:26,256,1000,8192 32:256,4096 128:16,64,125,500,2000 512:64,250,1000"


def parse_grid(text: str) -> list[tuple[int, int]]:
    """``"d:K,K d:K"`` as ``[(d, K), ...]``."""
    cells = []
    for part in text.split():
        dim, classes = part.split(":")
        cells.extend((int(dim), int(k)) for k in classes.split(","))
    return cells


def run(cells: list[tuple[int, int]]) -> dict:
    rows = []
    for dim, n_classes in cells:
        n = max(8_000, 8 * n_classes)
        X, y = embedding_stream(n + n // 4, n_classes, dim)
        train_at = min(2_000, max(40, n_classes // 4))
        for oracle, params in (("exact", {"oracle": "exact"}),
                               ("means", {"oracle": "means", "oracle_params": {"train_at": train_at}})):
            got = run_extreme(X[:n], y[:n], X[n:], y[n:], params)
            rows.append({"dim": dim, "classes": n_classes, "weights": dim * n_classes, "oracle": oracle,
                         "train_at": train_at if oracle == "means" else None,
                         "learn_us": 1e6 / got["learn_per_s"], "predict_us": 1e6 / got["predict_per_s"],
                         "accuracy": got["accuracy"], "classes_seen": got["classes_seen"]})
            print(rows[-1], flush=True)
    return {"rows": rows}


def run_sets(names: list[str], rounds: int) -> dict:
    import streamlearn
    from bench.data import load

    out = {}
    for name in names:
        split = load(name)
        seconds, accuracy = {"exact": [], "auto": []}, {}
        for round_ in range(rounds):
            for oracle in (("exact", "auto") if round_ % 2 == 0 else ("auto", "exact")):  # neither always goes first
                model = streamlearn.ExtremeSVM(oracle=oracle)
                started = time.process_time()
                for lo in range(0, split.X_train.shape[0], 1000):
                    model.learn_many(split.X_train[lo:lo + 1000], split.y_train[lo:lo + 1000])
                seconds[oracle].append(time.process_time() - started)
                predicted = np.asarray(model.predict_many(split.X_test)).astype(np.int64)
                accuracy[oracle] = float(np.mean(predicted == split.y_test))
        out[name] = {"classes": split.n_classes, "columns": split.X_train.shape[1], "rows": split.X_train.shape[0],
                     **{f"{o}_seconds": float(np.median(v)) for o, v in seconds.items()},
                     **{f"{o}_accuracy": a for o, a in accuracy.items()}}
        print(name, out[name], flush=True)
    return out


def report(results: dict) -> str:
    m = results["machine"]
    lines = ["# The cost model of ExtremeSVM(oracle=\"auto\"): exact scan against the mean-example index", "",
             f"Commit {m['commit'][:10]}; `{m['command']}`. One pass over the synthetic embedding stream of "
             "`dense_extreme_bench`, CPU time, one thread; µs per example.", "",
             "| d | K | K × d | exact learn µs | index learn µs | exact predict µs | index predict µs | "
             "exact accuracy | index accuracy |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = results["rows"]
    for exact, means in zip(rows[::2], rows[1::2]):
        lines.append(f"| {exact['dim']} | {exact['classes']:,} | {exact['weights']:,} | {exact['learn_us']:,.1f} | "
                     f"{means['learn_us']:,.1f} | {exact['predict_us']:,.1f} | {means['predict_us']:,.1f} | "
                     f"{100 * exact['accuracy']:.2f} % | {100 * means['accuracy']:.2f} % |")
    if results.get("sets"):
        lines += ["", f"Real data sets, one pass, median of {results['rounds']} interleaved rounds (CPU seconds):", "",
                  "| set | classes × columns | exact s | auto s | auto / exact | exact accuracy | auto accuracy |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for name, r in results["sets"].items():
            lines.append(f"| {name} | {r['classes']:,} × {r['columns']:,} | {r['exact_seconds']:.2f} | {r['auto_seconds']:.2f} | "
                         f"{r['auto_seconds'] / r['exact_seconds']:.3f} | {100 * r['exact_accuracy']:.2f} % | "
                         f"{100 * r['auto_accuracy']:.2f} % |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    rows = results["rows"]
    for dim in sorted({r["dim"] for r in rows}):
        for oracle, style in (("exact", "-o"), ("means", "--s")):
            cells = [r for r in rows if r["dim"] == dim and r["oracle"] == oracle]
            ax.plot([r["weights"] for r in cells], [r["learn_us"] for r in cells], style, label=f"{oracle}, d = {dim}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("class rows' weights K × d")
    ax.set_ylabel("µs per example learned (CPU)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", default=GRID, help="'d:K,K d:K': the cells measured")
    parser.add_argument("--sets", default="news20,sector,wordnet,mnist,letter,usps,letter-rff,usps-rff",
                        help="the real data sets auto is compared on ('' for none)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run: two small cells, letter once")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    if args.quick:
        args.grid, args.sets, args.rounds = "16:30 64:60", "letter", 1
    results = {"machine": machine(), **run(parse_grid(args.grid)), "rounds": args.rounds}
    results["sets"] = run_sets([n for n in args.sets.split(",") if n], args.rounds)
    print(save_results(args.out, RESULTS_NAME, results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
