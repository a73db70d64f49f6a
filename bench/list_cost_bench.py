"""How many coarse lists the mean-example index of ``ExtremeSVM`` (``streamlearn.memoir.means``)
should have: what a query's two parts cost against the lists' count, measured on this machine.

    python -m bench.list_cost_bench [--classes 65536,177000] [--lists 0.5,1,2,4] [--repeats 7] [--out DIR]

A query first scores every centroid (``MeanExampleIndex.probe``: one BLAS product and the choice
of the ``n_probe = 2`` nearest), then the scan of those lists' means (``MeanExampleIndex.candidates``
less the coarse step, 10 results). For each class count K, the means are the unit rows of
:func:`bench.dense_extreme_bench.embedding_stream` (clustered, d = 128), the lists are k-means'
(:func:`~streamlearn.memoir.means.spherical_kmeans`, 3 iterations), and the counts tried are
``--lists`` × the index's own choice (``MeanExampleIndex.n_lists``), and ``K / 39`` (one list per
``CLASSES_PER_LIST`` classes). Reported: µs per query of each part (medians of ``--repeats``
over 1,024 queries, one thread, CPU time), the cost of one centroid's product and of one scanned
mean, and their ratio — the ``SCAN_TO_CENTROID_COST`` the index's count rests on.

Writes ``list-cost.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np

from .common import machine, pyplot, save_results
from .dense_extreme_bench import embedding_stream

RESULTS_NAME = "list-cost"
QUERIES, N_PROBE, RESULTS = 1024, 2, 10


def _median_seconds(work, repeats: int, at_least: float = 0.02) -> float:
    """The median over ``repeats`` of one call's CPU seconds, each sample calling ``work`` until
    ``at_least`` seconds passed (the process clock ticks coarsely on some kernels)."""
    times = []
    for _ in range(repeats):
        started, calls = time.process_time(), 0
        while (spent := time.process_time() - started) < at_least or not calls:
            work()
            calls += 1
        times.append(spent / calls)
    return float(np.median(times))


def measure(n_classes: int, n_lists: int, repeats: int) -> dict:
    """One index of ``n_lists`` lists over ``n_classes`` means: each part's cost per query."""
    from streamlearn.memoir.means import MeanExampleIndex, spherical_kmeans

    rows, _ = embedding_stream(n_classes + QUERIES, n_classes, 128)
    means, queries = rows[:n_classes], np.ascontiguousarray(rows[n_classes:])
    index = MeanExampleIndex(train_at=2**62, n_probe=N_PROBE)  # never trains itself: the lists are these
    index.reserve(n_classes, 128)
    index.sums[:n_classes] = means
    index.use_centroids(spherical_kmeans(means, n_lists, iterations=3))
    index.refresh(n_classes)
    lists, _ = index.probe(queries, N_PROBE)
    sizes = np.bincount(index.probe(means, 1)[0][:, 0], minlength=n_lists)
    scanned = int(sizes[lists].sum())
    coarse = _median_seconds(lambda: index.probe(queries, N_PROBE), repeats)
    scan = _median_seconds(lambda: index.candidates(queries, RESULTS), repeats) - coarse  # the lists' scan alone
    return {"classes": n_classes, "lists": n_lists, "coarse_us": 1e6 * coarse / QUERIES, "scan_us": 1e6 * scan / QUERIES,
            "centroid_ns": 1e9 * coarse / (QUERIES * n_lists), "mean_ns": 1e9 * scan / scanned,
            "scanned_per_query": scanned / QUERIES}


def run(class_counts: list[int], factors: list[float], repeats: int) -> dict:
    from streamlearn.memoir.means import CLASSES_PER_LIST, MeanExampleIndex

    rows = []
    for n_classes in class_counts:
        chosen = MeanExampleIndex(n_probe=N_PROBE).n_lists(n_classes)
        counts = sorted({max(1, int(f * chosen)) for f in factors} | {n_classes // CLASSES_PER_LIST})
        for n_lists in counts:
            rows.append({**measure(n_classes, n_lists, repeats), "chosen": n_lists == chosen})
            print(rows[-1], flush=True)
    return {"rows": rows}


def report(results: dict) -> str:
    m = results["machine"]
    lines = ["# How many coarse lists: the mean-example index's two costs per query", "",
             f"Commit {m['commit'][:10]}; `{m['command']}`. One thread, CPU time, medians; d = 128, "
             f"{N_PROBE} lists probed, {RESULTS} results. Chosen: `MeanExampleIndex.n_lists`.", "",
             "| classes | lists | coarse µs | scan µs | total µs | ns per centroid | ns per scanned mean | ratio |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results["rows"]:
        lists = f"**{r['lists']:,}** (chosen)" if r["chosen"] else f"{r['lists']:,}"
        lines.append(f"| {r['classes']:,} | {lists} | {r['coarse_us']:.1f} | {r['scan_us']:.1f} | "
                     f"{r['coarse_us'] + r['scan_us']:.1f} | {r['centroid_ns']:.2f} | {r['mean_ns']:.1f} | "
                     f"{r['mean_ns'] / r['centroid_ns']:.1f} |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for n_classes in sorted({r["classes"] for r in results["rows"]}):
        cells = [r for r in results["rows"] if r["classes"] == n_classes]
        ax.plot([r["lists"] for r in cells], [r["coarse_us"] + r["scan_us"] for r in cells], "-o", label=f"K = {n_classes:,}")
        chosen = [r for r in cells if r["chosen"]]
        ax.plot([r["lists"] for r in chosen], [r["coarse_us"] + r["scan_us"] for r in chosen], "k*", markersize=12)
    ax.set_xscale("log")
    ax.set_xlabel("coarse lists (star: the index's choice)")
    ax.set_ylabel("µs per query, coarse step + list scans (CPU)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", default="65536,177000", help="the class counts measured")
    parser.add_argument("--lists", default="0.5,1,2,4", help="multiples of the index's own list count tried")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 4,000 classes, two counts, 2 repeats")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    if args.quick:
        args.classes, args.lists, args.repeats = "4000", "1", 2
    results = {"machine": machine(), **run([int(k) for k in args.classes.split(",")],
                                           [float(f) for f in args.lists.split(",")], args.repeats)}
    print(save_results(args.out, RESULTS_NAME, results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
