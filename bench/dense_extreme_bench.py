"""Extreme classification on dense inputs (issue 44), today's baseline: a synthetic embedding stream,
``ExtremeSVM`` as it is (dense rows stored as sparse ones), and the exact dense method written with
BLAS in NumPy, in one run.

    python -m bench.dense_extreme_bench [--classes 10000] [--dim 128] [--examples 40000] [--out DIR]

The stream (:func:`embedding_stream`): ``--classes`` unit prototypes of ``--dim`` around clustered
centres (20 classes to a cluster: siblings are confusable), class frequencies by a power law, and
classes appearing over time (class ``k`` cannot occur before example ``k · n / (2 K)``, as
``memoir_bench.synthetic_stream``); an example is its class's prototype plus noise of norm ~0.7,
normalized (cosine ~0.8 with its prototype). The first ``--examples`` learn one pass, the next
quarter as many are the test.

Measured, one thread: learning and prediction examples/s, test accuracy, the process's peak RSS
growth, for

* ``ExtremeSVM()`` at its defaults (exact oracle), ``learn_many`` / ``predict_many`` on blocks of
  1,000 CSR rows, and with ``adapt=False``;
* **the exact dense scan with BLAS** (:func:`dense_crammer_singer`): 002's MEMOIR-ℓ2 step with the
  exact oracle, mini-batches of ``--batch`` whose violators all come from one product
  ``X_b W^T`` at the batch's starting weights (002's mini-batch rule), the Pegasos shrink as one
  scale, the average of the iterates kept alongside; prediction one product per block. It is the
  "no index" method a dense ``ExtremeSVM`` must beat by its index.

Writes ``dense-extreme.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import pathlib
import resource
import time

import numpy as np

from .common import accuracy, machine, pyplot, save_results

RESULTS_NAME = "dense-extreme"
SEED = 44


def embedding_stream(n: int, n_classes: int, dim: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit rows (float32) and their classes (module docstring)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1, n_classes // 20), dim))
    prototypes = centres[np.arange(n_classes) // 20 % len(centres)] + 0.6 * rng.standard_normal((n_classes, dim))
    prototypes /= np.linalg.norm(prototypes, axis=1, keepdims=True)
    cumulative = np.cumsum(1.0 / np.arange(1, n_classes + 1) ** 0.8)
    available = np.maximum(2, np.minimum(n_classes, (2 * n_classes * (np.arange(n) + 1)) // n))
    labels = np.searchsorted(cumulative, rng.random(n) * cumulative[available - 1], side="right")
    X = prototypes[labels] + (0.7 / np.sqrt(dim)) * rng.standard_normal((n, dim))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X.astype(np.float32), labels.astype(np.int64)


def dense_crammer_singer(X, y, n_classes: int, lam: float = 1e-6, eta0: float = 3.0, eta_decay: float = 1e-4,
                         batch: int = 64):
    """One pass of MEMOIR-ℓ2 (002 Alg. 1, exact oracle; ExtremeSVM's default step
    ``eta0 / (1 + eta_decay t)``) on dense rows: per mini-batch one BLAS product gives every
    example's scores at the batch's starting weights, the violators ``r = argmax_{k≠y}`` of the
    examples whose margin is under 1 step ``W_y += ηx``, ``W_r -= ηx`` after the shrink
    ``(1 − λη)``, ``t`` counting examples. Returns the last and the t²-weighted averaged weights (``K × d``, float32)."""
    d = X.shape[1]
    W = np.zeros((n_classes, d), np.float32)
    scale, total, weights, t = 1.0, np.zeros((n_classes, d), np.float64), 0.0, 0
    for lo in range(0, len(y), batch):
        xb, yb = X[lo:lo + batch], y[lo:lo + batch]
        t += len(yb)  # the schedule counts examples, as ExtremeSVM's does with batch_size 1
        eta = eta0 / (1.0 + eta_decay * t)
        scores = scale * (xb @ W.T)
        rows = np.arange(len(yb))
        own = scores[rows, yb].copy()
        scores[rows, yb] = -np.inf
        r = np.argmax(scores, axis=1)
        violated = scores[rows, r] + 1.0 > own
        scale *= 1.0 - lam * eta
        step = (eta / scale) * xb[violated]  # each example's own step, summed (a mean over the batch learns less)
        np.add.at(W, yb[violated], step)
        np.add.at(W, r[violated], -step)
        total += (t * t * scale) * W  # the t²-weighted average of the iterates (ExtremeSVM's default power)
        weights += t * t
    return scale * W, (total / weights).astype(np.float32)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_dense(X, y, Xt, yt, n_classes: int, batch: int) -> dict:
    before = _peak_rss_mib()
    started = time.process_time()
    _, averaged = dense_crammer_singer(X, y, n_classes, batch=batch)
    learn = time.process_time() - started
    started = time.process_time()
    predicted = np.concatenate([np.argmax(Xt[lo:lo + 1000] @ averaged.T, axis=1) for lo in range(0, len(yt), 1000)])
    predict = time.process_time() - started
    return {"learn_per_s": len(y) / learn, "predict_per_s": len(yt) / predict, "accuracy": accuracy(predicted, yt),
            "peak_rss_growth_mib": _peak_rss_mib() - before}


def run_extreme(X, y, Xt, yt, params: dict) -> dict:
    import scipy.sparse as sp

    import streamlearn

    model = streamlearn.ExtremeSVM(**params)
    before = _peak_rss_mib()
    started = time.process_time()
    for lo in range(0, len(y), 1000):
        model.learn_many(sp.csr_matrix(X[lo:lo + 1000]), y[lo:lo + 1000])
    learn = time.process_time() - started
    started = time.process_time()
    predicted = np.concatenate([model.predict_many(sp.csr_matrix(Xt[lo:lo + 1000])) for lo in range(0, len(yt), 1000)])
    predict = time.process_time() - started
    return {"learn_per_s": len(y) / learn, "predict_per_s": len(yt) / predict, "accuracy": accuracy(predicted, yt),
            "peak_rss_growth_mib": _peak_rss_mib() - before, "classes_seen": len(model.classes)}


CANDIDATES = {"ExtremeSVM() (sparse rows)": {}, "ExtremeSVM(adapt=False) (sparse rows)": {"adapt": False}}
DENSE = "exact dense scan, BLAS per mini-batch (NumPy)"


def run(n_classes: int, dim: int, examples: int, batch: int) -> dict:
    X, y = embedding_stream(examples + examples // 4, n_classes, dim)
    X, y, Xt, yt = X[:examples], y[:examples], X[examples:], y[examples:]
    out = {"classes": n_classes, "dim": dim, "examples": examples, "test": len(yt), "batch": batch,
           "classes_seen": int(len(np.unique(y))), "dense_weights_mib": n_classes * dim * 4 / 2**20, "rows": {}}
    out["rows"][DENSE] = run_dense(X, y, Xt, yt, n_classes, batch)
    for name, params in CANDIDATES.items():
        out["rows"][name] = run_extreme(X, y, Xt, yt, params)
    for name, row in out["rows"].items():
        print(name, row, flush=True)
    return out


def report(results: dict) -> str:
    m = results["machine"]
    lines = ["# Extreme classification on dense inputs: today's baseline (issue 44)", "",
             f"Commit {m['commit'][:10]}; `{m['command']}`. Synthetic embedding stream: {results['classes']:,} "
             f"classes ({results['classes_seen']:,} seen in the pass), d = {results['dim']}, {results['examples']:,} "
             f"examples learned in one pass, {results['test']:,} tested; CPU time, one thread. Dense weights "
             f"K × d float32: {results['dense_weights_mib']:.0f} MiB.", "",
             "| method | learn ex/s | predict ex/s | test accuracy | peak RSS growth MiB |", "|---|---:|---:|---:|---:|"]
    for name, r in results["rows"].items():
        lines.append(f"| {name} | {r['learn_per_s']:,.0f} | {r['predict_per_s']:,.0f} | {100 * r['accuracy']:.2f} % | "
                     f"{r['peak_rss_growth_mib']:,.0f} |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(results["rows"])
    for i, key in enumerate(("learn_per_s", "predict_per_s")):
        ax.bar(np.arange(len(names)) + 0.4 * i, [results["rows"][n][key] for n in names], 0.4, label=key.replace("_per_s", ""))
    ax.set_xticks(np.arange(len(names)) + 0.2, [n.split(" (")[0] for n in names], fontsize=6)
    ax.set_yscale("log")
    ax.set_ylabel("examples / s (CPU time)")
    ax.set_title(f"{results['classes']:,} classes, d = {results['dim']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--examples", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=64, help="the dense method's mini-batch")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 500 classes, 3,000 examples")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    if args.quick:
        args.classes, args.examples = 500, 3_000
    results = {"machine": machine(), **run(args.classes, args.dim, args.examples, args.batch)}
    print(save_results(args.out, RESULTS_NAME, results, report, plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
