"""Which approximate max-inner-product index can follow ExtremeSVM's class rows (issue 44): hnswlib,
faiss and usearch on the index's own workload, in one run.

    python -m bench.ann_bench [--classes 100000] [--dim 128] [--out DIR]

The workload is what a dense ExtremeSVM asks of an index over its class rows: ``--classes`` rows
of ``--dim`` float32 (unit vectors around clustered prototypes), then rounds in which the rows a
stream's steps changed (``--changed`` per round, drawn with power-law class frequencies, each
moved by a step toward or away from an example) are re-indexed in one batch, and one-at-a-time
queries (the learner's step asks for one example's candidates) return the top ``--k`` rows by
inner product. Measured, per library, one thread: the build time, the re-index time per changed
row, the queries per second, recall (the true maximum-inner-product row among the ``k``
candidates, the issue's definition) against an exact scan of the current rows after each round,
and the index's resident memory against the rows' own bytes; then, on the final rows, queries
per second and recall at each search effort of the library's sweep (HNSW's ``ef``, IVF's
``nprobe``), so that libraries compare at equal recall. A library not installed is reported as
missing. Peers in the same run: the exact scan itself, one NumPy product per query and one BLAS
product per block of 1,000 queries.
Writes ``ann.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import numpy as np

from .common import machine, pyplot, save_results

RESULTS_NAME = "ann"
SEED = 44


def class_rows(n: int, dim: int, rng) -> np.ndarray:
    """``n`` unit rows around ``n // 20`` clustered prototypes (rows of one cluster are alike, as the
    classes of one topic are)."""
    centres = rng.standard_normal((max(1, n // 20), dim)).astype(np.float32)
    rows = centres[rng.integers(0, len(centres), n)] + 0.5 * rng.standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def queries(rows: np.ndarray, n: int, rng) -> np.ndarray:
    """Examples near power-law-chosen classes' rows (unit vectors)."""
    picked = np.minimum(rng.zipf(1.3, n) - 1, len(rows) - 1)
    # noise of norm ~0.7 against a unit row: an example's cosine with its class's row is ~0.8
    q = rows[picked] + (0.7 / np.sqrt(rows.shape[1])) * rng.standard_normal((n, rows.shape[1])).astype(np.float32)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


class Hnswlib:
    name = "hnswlib HNSW (M=16)"
    efforts = (16, 64, 256)  # ef, the search's candidate list

    def __init__(self, dim: int, capacity: int):
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=dim)
        self.index.init_index(max_elements=capacity, ef_construction=100, M=16, random_seed=SEED)
        self.index.set_num_threads(1)

    def add(self, ids, rows):
        self.index.add_items(rows, ids)  # an existing id is updated in place

    update = add

    def set_effort(self, effort):
        self.index.set_ef(effort)

    def query(self, q, k):
        return self.index.knn_query(q, k)[0][0]


class FaissIvf:
    name = "faiss IVF-Flat (nlist 4√K)"
    efforts = (2, 8, 32)  # nprobe, the lists searched

    def __init__(self, dim: int, capacity: int):
        import faiss

        faiss.omp_set_num_threads(1)
        self.faiss, self.dim = faiss, dim
        self.nlist = max(1, int(4 * np.sqrt(capacity)))
        self.index = None

    def add(self, ids, rows):
        if self.index is None:  # IVF needs its coarse centroids trained on rows
            quantizer = self.faiss.IndexFlatIP(self.dim)
            self.index = self.faiss.IndexIVFFlat(quantizer, self.dim, self.nlist, self.faiss.METRIC_INNER_PRODUCT)
            self.index.train(rows)
            self.index.make_direct_map(True)  # in-place update_vectors needs it, with ids 0..n-1 as add gives
        self.index.add(rows)

    def update(self, ids, rows):
        self.index.update_vectors(ids.astype(np.int64), rows)

    def set_effort(self, effort):
        self.index.nprobe = effort

    def query(self, q, k):
        return self.index.search(q.reshape(1, -1), k)[1][0]


class Usearch:
    name = "usearch HNSW (connectivity 16)"
    efforts = (16, 64, 256)  # expansion_search

    def __init__(self, dim: int, capacity: int):
        from usearch.index import Index

        self.index = Index(ndim=dim, metric="ip", dtype="f32", connectivity=16, expansion_add=100)

    def add(self, ids, rows):
        self.index.add(ids, rows, threads=1)

    def update(self, ids, rows):
        self.index.remove(ids)
        self.index.add(ids, rows, threads=1)

    def query(self, q, k):
        return self.index.search(q, k, threads=1).keys

    def set_effort(self, effort):
        self.index.expansion_search = effort


LIBRARIES = [Hnswlib, FaissIvf, Usearch]


def _rss_kib() -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _exact_best(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.argmax(q @ rows.T, axis=1)


def _answer(index, probes, best, k) -> tuple[float, float]:
    """Queries per second and recall of the probes' one-at-a-time queries."""
    started = time.perf_counter()
    found = [index.query(q, k) for q in probes]
    rate = len(probes) / (time.perf_counter() - started)
    return rate, float(np.mean([b in set(np.asarray(f).tolist()) for b, f in zip(best, found)]))


def measure(library, rows: np.ndarray, rounds: list, probes: np.ndarray, k: int) -> dict:
    """Build; per round re-index the changed rows and answer the probes at the lowest effort; then
    answer them at each effort of the library's sweep on the final rows."""
    ids = np.arange(len(rows), dtype=np.int64)
    before = _rss_kib()
    started = time.perf_counter()
    index = library(rows.shape[1], len(rows))
    index.add(ids, rows)
    build = time.perf_counter() - started
    memory_kib = _rss_kib() - before
    current, updates, recalls = rows.copy(), [], []
    index.set_effort(library.efforts[0])
    for changed, moved in rounds:
        current[changed] = moved
        started = time.perf_counter()
        index.update(changed, moved)
        updates.append((time.perf_counter() - started) / len(changed))
        recalls.append(_answer(index, probes, _exact_best(current, probes), k)[1])
    best, sweep = _exact_best(current, probes), {}
    for effort in library.efforts:
        index.set_effort(effort)
        rate, recall = _answer(index, probes, best, k)
        sweep[str(effort)] = {"queries_per_s": rate, "recall": recall}
    return {"build_s": build, "update_us_per_row": 1e6 * statistics.median(updates), "recall_by_round": recalls,
            "sweep": sweep, "memory_mib": memory_kib / 1024}


def exact_scan(rows: np.ndarray, probes: np.ndarray, block: int) -> dict:
    """The exact peers: one NumPy product per query, and one BLAS product per block of queries
    (the best exact method when the learner's mini-batch is a block)."""
    started = time.perf_counter()
    for q in probes:
        int(np.argmax(rows @ q))
    one = len(probes) / (time.perf_counter() - started)
    started = time.perf_counter()
    for lo in range(0, len(probes), block):
        np.argmax(probes[lo:lo + block] @ rows.T, axis=1)
    blocked = len(probes) / (time.perf_counter() - started)
    return {"one_at_a_time_per_s": one, "blocked_per_s": blocked, "block": block, "memory_mib": rows.nbytes / 2**20}


def run(n_classes: int, dim: int, n_rounds: int, changed: int, n_probes: int, k: int) -> dict:
    rng = np.random.default_rng(SEED)
    rows = class_rows(n_classes, dim, rng)
    rounds = []
    for _ in range(n_rounds):  # the rows a stream's steps touch: power-law classes, moved by a step toward an example
        touched = np.unique(np.minimum(rng.zipf(1.3, changed) - 1, n_classes - 1)).astype(np.int64)
        step = queries(rows, len(touched), rng) * rng.choice([-0.3, 0.3], (len(touched), 1)).astype(np.float32)
        moved = rows[touched] + step
        rounds.append((touched, (moved / np.linalg.norm(moved, axis=1, keepdims=True)).astype(np.float32)))
    out = {"classes": n_classes, "dim": dim, "rounds": n_rounds, "changed_per_round": changed, "k": k,
           "probes": n_probes, "rows_mib": rows.nbytes / 2**20, "libraries": {}}
    final = rows.copy()
    for touched, moved in rounds:
        final[touched] = moved
    # examples come from the classes as the rows now are: drawn around the rows after the rounds moved them
    probes = queries(final, n_probes, rng)
    out["exact"] = exact_scan(final, probes, 1000)
    for library in LIBRARIES:
        try:
            out["libraries"][library.name] = measure(library, rows, rounds, probes, k)
        except ImportError as missing:
            out["libraries"][library.name] = {"missing": str(missing)}
        print(library.name, out["libraries"][library.name], flush=True)
    return out


def report(results: dict) -> str:
    m, exact = results["machine"], results["exact"]
    lines = ["# Indexes over class rows that change (issue 44)", "",
             f"Commit {m['commit'][:10]}; `{m['command']}`. {results['classes']:,} unit rows of {results['dim']} "
             f"float32 ({results['rows_mib']:.0f} MiB), {results['rounds']} rounds of re-indexing the rows "
             f"{results['changed_per_round']:,} power-law steps touched, then {results['probes']:,} one-at-a-time "
             f"queries for the top {results['k']}; one thread. Recall: the exact maximum-inner-product row among "
             "the candidates.", "",
             f"Exact scan (NumPy, the final rows): {exact['one_at_a_time_per_s']:,.0f} queries/s one at a time, "
             f"{exact['blocked_per_s']:,.0f} in blocks of {exact['block']:,} (one BLAS product each); "
             f"{exact['memory_mib']:.0f} MiB.", "",
             "| index | build s | re-index µs / row | recall by round (lowest effort) | memory MiB | effort | queries / s "
             "| × exact one at a time | × exact in blocks | recall |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in results["libraries"].items():
        if "missing" in r:
            lines.append(f"| {name} | not installed: {r['missing']} | | | | | | | | |")
            continue
        first = True
        for effort, at in r["sweep"].items():
            head = (f"| {name} | {r['build_s']:.1f} | {r['update_us_per_row']:.1f} | "
                    f"{' '.join(f'{x:.3f}' for x in r['recall_by_round'])} | {r['memory_mib']:.0f} |") if first else "| | | | | |"
            lines.append(f"{head} {effort} | {at['queries_per_s']:,.0f} | {at['queries_per_s'] / exact['one_at_a_time_per_s']:.1f} | "
                         f"{at['queries_per_s'] / exact['blocked_per_s']:.1f} | {at['recall']:.3f} |")
            first = False
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, r in results["libraries"].items():
        if "missing" not in r:
            points = list(r["sweep"].values())
            ax.plot([p["queries_per_s"] for p in points], [p["recall"] for p in points], "o-", label=name)
    exact = results["exact"]
    for rate, label in ((exact["one_at_a_time_per_s"], "exact, one at a time"), (exact["blocked_per_s"], "exact, in blocks")):
        ax.axvline(rate, linestyle=":", color="grey")
        ax.annotate(label, (rate, 0.05), rotation=90, fontsize=7)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("queries / s (one thread)")
    ax.set_ylabel("recall of the best row")
    ax.set_title(f"{results['classes']:,} class rows, d = {results['dim']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--changed", type=int, default=5_000, help="steps per round (rows touched: their distinct classes)")
    parser.add_argument("--probes", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2,000 classes, 2 rounds")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    if args.quick:
        args.classes, args.rounds, args.changed, args.probes = 2_000, 2, 500, 200
    results = {"machine": machine(), **run(args.classes, args.dim, args.rounds, args.changed, args.probes, args.k)}
    print(save_results(args.out, RESULTS_NAME, results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
