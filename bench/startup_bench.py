"""Start-up of the ``streamlearn`` command with its ahead-of-time kernels and on numba's JIT alone.

    python -m bench.startup_bench [--repeats 15]

``streamlearn train`` on a one-line LIBSVM file, run as a whole command, the two ways
interleaved (``STREAMLEARN_JIT=1`` forces the JIT; its cache is warmed first, so the figure is a
cached start, not a first compilation). Writes ``bench/results/startup.{json,md,png}``.

It also measures the window in which a SIGTERM still kills ``streamlearn train`` (exit 143, no
checkpoint): the time from the process's start until its handler is installed (the SIGTERM bit
of ``SigCgt`` in ``/proc/PID/status``), beside the time a bare ``python -c pass`` takes to exit,
which is the interpreter's own share of that window.
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
    subprocess.run([sys.executable, "-m", "streamlearn.service.cli", "train", path, "--quiet"], env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - start


#: the SIGTERM bit of /proc/PID/status's SigCgt mask
_SIGTERM_BIT = 1 << 14


def stop_window(command: list[str]) -> float:
    """Seconds from starting ``command`` until it catches SIGTERM (it is killed then)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while process.poll() is None:
            try:
                with open(f"/proc/{process.pid}/status") as status:
                    mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigCgt:"))
            except (FileNotFoundError, StopIteration):
                mask = 0
            if mask & _SIGTERM_BIT:
                return time.perf_counter() - start
            time.sleep(0.0002)
        raise RuntimeError(f"{command} ended before it caught SIGTERM")
    finally:
        process.kill()
        process.wait()


def bare_interpreter() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
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
        script = str(pathlib.Path(sys.executable).with_name("streamlearn"))
        window = {"streamlearn train catches SIGTERM": [], "python -c pass exits": []}
        for _ in range(args.repeats):
            window["streamlearn train catches SIGTERM"].append(stop_window([script, "train", path, "--quiet"]))
            window["python -c pass exits"].append(bare_interpreter())
    from bench.common import machine, pyplot

    medians = {k: statistics.median(v) for k, v in times.items()}
    window_medians = {k: statistics.median(v) for k, v in window.items()}
    output.mkdir(parents=True, exist_ok=True)
    (output / "startup.json").write_text(json.dumps({"machine": machine(), "seconds": times, "median": medians,
                                                     "stop_window_seconds": window, "stop_window_median": window_medians},
                                                    indent=1))
    lines = ["# Start-up of `streamlearn train` on a one-line file", "",
             f"Medians of {args.repeats} interleaved runs of the whole command (`python -m bench.startup_bench`).", "",
             "| kernels | median s | min s | max s |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {medians[k]:.3f} | {min(v):.3f} | {max(v):.3f} |" for k, v in times.items()]
    lines += ["", "## The window in which SIGTERM still kills `train`", "",
              "From the process's start until `streamlearn train` (the installed command) has its SIGTERM handler; "
              "a stop after that is a final checkpoint and exit 0. Beside it, the whole run of a bare interpreter: "
              "most of the window is Python's own start-up.", "",
              "| what | median ms | min ms | max ms |", "|---|---:|---:|---:|"]
    lines += [f"| {k} | {1000 * window_medians[k]:.1f} | {1000 * min(v):.1f} | {1000 * max(v):.1f} |" for k, v in window.items()]
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
