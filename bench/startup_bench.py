"""Start-up of the ``streamlearn`` command with its ahead-of-time kernels and on numba's JIT alone.

    python -m bench.startup_bench [--repeats 15]

``streamlearn train`` on a one-line LIBSVM file, run as a whole command, the two ways
interleaved (``STREAMLEARN_JIT=1`` forces the JIT; its cache is warmed first, so the figure is a
cached start, not a first compilation). Writes ``bench/results/startup.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def one_run(path: str, jit: bool) -> float:
    env = {k: v for k, v in os.environ.items() if k != "STREAMLEARN_JIT"}
    if jit:
        env["STREAMLEARN_JIT"] = "1"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "streamlearn.cli", "train", path, "--quiet"], env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--output", default=str(RESULTS), help="folder for startup.{json,md,png}")
    args = parser.parse_args(argv)
    output = pathlib.Path(args.output)
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "one.svm")
        pathlib.Path(path).write_text("1 1:1\n")
        one_run(path, True)  # warm numba's cache
        one_run(path, False)
        times = {"ahead of time": [], "JIT only": []}
        for _ in range(args.repeats):
            times["ahead of time"].append(one_run(path, False))
            times["JIT only"].append(one_run(path, True))
    from bench.common import machine, pyplot

    medians = {k: statistics.median(v) for k, v in times.items()}
    output.mkdir(parents=True, exist_ok=True)
    (output / "startup.json").write_text(json.dumps({"machine": machine(), "seconds": times, "median": medians}, indent=1))
    lines = ["# Start-up of `streamlearn train` on a one-line file", "",
             f"Medians of {args.repeats} interleaved runs of the whole command (`python -m bench.startup_bench`).", "",
             "| kernels | median s | min s | max s |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {medians[k]:.3f} | {min(v):.3f} | {max(v):.3f} |" for k, v in times.items()]
    (output / "startup.md").write_text("\n".join(lines) + "\n")
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.boxplot(list(times.values()), tick_labels=list(times))
    ax.set_ylabel("seconds")
    ax.set_title("streamlearn train, one-line file")
    fig.tight_layout()
    fig.savefig(output / "startup.png", dpi=110)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
