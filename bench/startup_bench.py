"""Start-up of the ``streamlearn`` command with its ahead-of-time kernels and on numba's JIT alone.

    python -m bench.startup_bench [--repeats 15]

``streamlearn train`` on a one-line LIBSVM file, run as a whole command, the two ways
interleaved (``STREAMLEARN_JIT=1`` forces the JIT; its cache is warmed first, so the figure is a
cached start, not a first compilation). Writes ``bench/results/startup.{json,md,png}``.

It also measures the window in which a SIGTERM still kills ``streamlearn train`` (exit 143, no
checkpoint): the time from the process's start until its handler is installed (the SIGTERM bit
of ``SigCgt`` in ``/proc/PID/status``), beside the time a bare ``python -c pass`` takes to exit,
which is the interpreter's own share of that window. Both on an idle machine and with both cores
busy (two spinning processes beside it, ``--no-load`` skips that part).

Then what a stop *does* at each moment of the start: SIGTERM and SIGINT sent at 0, 2, 4, … ms after
the command starts (both cores busy), each outcome classed — killed (no checkpoint), a
``KeyboardInterrupt`` traceback (SIGINT inside the interpreter's own start-up, before the
command's first line runs), or a clean stop (a final checkpoint, exit 0) — with the moment from
which every stop was clean.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import signal
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


@contextlib.contextmanager
def busy_cores(n: int):
    """``n`` processes spinning beside the measurement (a loaded machine)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.3)
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def stop_outcome(command: list[str], signum: int, delay_s: float) -> str:
    """What ``signum`` sent ``delay_s`` after starting ``command`` does: ``"killed"``, ``"traceback"``
    or ``"clean"`` (exit 0 and the stop said, so a final checkpoint)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(delay_s)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    if "Traceback" in err:
        return "traceback"
    return "clean" if process.returncode == 0 and "stopped by SIG" in err else "killed"


def stop_sweep(command_of, delays_ms, repeats: int) -> dict:
    """:func:`stop_outcome` of SIGTERM and SIGINT at each delay, ``repeats`` times each, interleaved;
    ``command_of()`` gives a fresh command (its own checkpoint directory)."""
    out = {}
    for _ in range(repeats):
        for delay in delays_ms:
            for name in ("SIGTERM", "SIGINT"):
                out.setdefault(name, {}).setdefault(delay, []).append(
                    stop_outcome(command_of(), getattr(signal, name), delay / 1000))
    return out


def sweep_summary(outcomes: dict) -> dict:
    """Per signal: the latest delay with a kill, the delays with a traceback, and the first delay
    from which every stop was clean."""
    summary = {}
    for name, by_delay in outcomes.items():
        delays = sorted(by_delay)
        unclean = [d for d in delays if any(o != "clean" for o in by_delay[d])]
        summary[name] = {"last_killed_ms": max((d for d in delays if "killed" in by_delay[d]), default=None),
                         "traceback_ms": [d for d in delays if "traceback" in by_delay[d]],
                         "clean_from_ms": next((d for d in delays if d > max(unclean, default=-1)), None)}
    return summary


def bare_interpreter() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--output", default=str(RESULTS), help="folder for startup.{json,md,png}")
    parser.add_argument("--no-load", action="store_true", help="skip the loaded-machine windows and the stop sweep")
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
        sweep = {}
        if not args.no_load:
            with busy_cores(os.cpu_count() or 2):
                for _ in range(args.repeats):
                    window.setdefault("the same, both cores busy", []).append(stop_window([script, "train", path, "--quiet"]))
                    window.setdefault("python -c pass exits, both cores busy", []).append(bare_interpreter())
                counter = iter(range(10**6))
                sweep = stop_sweep(lambda: [script, "train", path, "--quiet", "--checkpoint-dir",
                                            os.path.join(work, f"ck{next(counter)}")], range(0, 100, 4), 2)
    from bench.common import machine, pyplot

    medians = {k: statistics.median(v) for k, v in times.items()}
    window_medians = {k: statistics.median(v) for k, v in window.items()}
    output.mkdir(parents=True, exist_ok=True)
    (output / "startup.json").write_text(json.dumps({"machine": machine(), "seconds": times, "median": medians,
                                                     "stop_window_seconds": window, "stop_window_median": window_medians,
                                                     "stop_sweep": {n: {str(d): o for d, o in v.items()} for n, v in sweep.items()}},
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
    summary = sweep_summary(sweep) if sweep else {}
    if summary:
        lines += ["", "## What a stop does while `train` starts (both cores busy)", "",
                  "SIGTERM and SIGINT sent 0, 4, …, 96 ms after the command starts, twice each: killed (no checkpoint), "
                  "a `KeyboardInterrupt` traceback (SIGINT inside Python's own start-up: `site` and the modules it "
                  "imports), or a clean stop (final checkpoint, exit 0).", "",
                  "| signal | killed, latest at ms | traceback at ms | every stop clean from ms |", "|---|---:|---|---:|"]
        lines += [f"| {name} | {v['last_killed_ms']} | {', '.join(map(str, v['traceback_ms'])) or '—'} | {v['clean_from_ms']} |"
                  for name, v in summary.items()]
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
