"""What the benchmarks share: provenance of a run, writing its results, Vowpal Wabbit's text
format and command, accuracy, processes' CPU time. (Benchmarks import this, never each other.)"""

from __future__ import annotations

import os
import pathlib
import platform
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np


#: environment variables that cap the threads of BLAS and numba
THREAD_LIMITS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


ROOT = pathlib.Path(__file__).resolve().parents[1]
#: the papers' models have no intercept; every learner fits one by default since issue 41, so a
#: paper experiment turns it off (and ``adapt`` where the learner has it: the MCID benches' ``PAPER``)
NO_INTERCEPT = {"fit_intercept": False}


def code_state() -> tuple[str, bool]:
    """The checkout's commit, and whether its code (results and notes aside) has uncommitted
    changes: then the commit alone does not reproduce the figures."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    changed = subprocess.run(["git", "status", "--porcelain", "--", "streamlearn", "connectors", "bench", "setup.py",
                              "pyproject.toml", ":!bench/results", ":!bench/README.md"], capture_output=True, text=True,
                             cwd=ROOT).stdout.strip()
    return commit, bool(changed)


#: the code a benchmark process runs is the checkout as it was when it started: a commit made
#: while a long run goes on must not be recorded as the run's
CODE_AT_START = code_state()


def machine() -> dict:
    """Where and from what a result comes: the commit (at the process's start), the CPU, the
    library versions, the command."""
    import importlib.metadata as metadata

    commit, changed = CODE_AT_START
    cpu = next((line.split(":", 1)[1].strip() for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    versions = {}
    for package in ("streamlearn", "numpy", "numba", "scipy", "river", "scikit-learn", "vowpalwabbit", "liblinear-official",
                    "hnswlib", "napkinxc", "omikuji"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    script = pathlib.Path(sys.argv[0]).resolve()
    module = ".".join(script.relative_to(ROOT).with_suffix("").parts) if script.is_relative_to(ROOT) else sys.argv[0]
    # thread limits change the timings: they are part of the command that reproduces them
    limits = [f"{name}={os.environ[name]}" for name in THREAD_LIMITS if name in os.environ]
    return {"commit": commit, "uncommitted_changes": changed, "cpu": cpu, "cores": os.cpu_count(),
            "python": platform.python_version(), "versions": versions,
            "command": " ".join([*limits, "python -m", module, shlex.join(sys.argv[1:])])}


def broker_helpers():
    """The checkout's throw-away broker helpers (``tests/localbroker.py``: ``local_broker``, ``produce``),
    which no wheel installs."""
    tests = str(pathlib.Path(__file__).resolve().parents[1] / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import localbroker

    return localbroker


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, every thread) process ``pid`` has used; NaN once it is gone."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_pid(bootstrap: str) -> int | None:
    """The process id of the Tansu broker listening on ``bootstrap`` (``None``: not found)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if f"tcp://{bootstrap}".encode() in cmdline and b"broker" in cmdline:
            return int(pid)
    return None


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (benchmarks run without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_results(folder, name: str, results: dict, report, plot) -> str:
    """Write ``name.json``, ``name.md`` (``report(results)``) and ``name.png`` (``plot``) into
    ``folder``; return the report."""
    import json

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(results, indent=1))
    text = report(results)
    (folder / f"{name}.md").write_text(text)
    plot(results, folder / f"{name}.png")
    return text


def accuracy(predicted, y) -> float:
    return float(np.mean(np.asarray(predicted).astype(np.int64) == np.asarray(y)))


def write_vw(path, X, y, rows=None) -> None:
    """Rows of a CSR matrix in Vowpal Wabbit's text format (labels as given: 1..K for ``--oaa``)."""
    rows = range(X.shape[0]) if rows is None else rows
    indptr, entry = X.indptr, "{}:{:.9g}".format
    with open(path, "w") as f:
        for i in rows:  # each row's entries as Python numbers: formatting NumPy scalars one by one is several times slower
            lo, hi = indptr[i], indptr[i + 1]
            f.write(f"{int(y[i])} | " + " ".join(map(entry, X.indices[lo:hi].tolist(), X.data[lo:hi].tolist())) + "\n")


def vw_oaa(X_train, y_train, X_test, y_test, args=(), passes: int = 1, reduction: str = "--oaa") -> dict:
    """``vw --oaa K`` (or another multi-class ``reduction`` taking K: ``--log_multi``), its own
    command-line driver, on the rows in order: test accuracy, train and test seconds (wall)."""
    labels = np.unique(np.concatenate([y_train, y_test]))
    to_vw = {int(c): k + 1 for k, c in enumerate(labels)}  # VW wants labels 1..K
    with tempfile.TemporaryDirectory() as work:
        train, test, model, preds = (os.path.join(work, n) for n in ("train.vw", "test.vw", "m.vw", "p.txt"))
        write_vw(train, X_train, [to_vw[int(c)] for c in y_train])
        write_vw(test, X_test, [to_vw[int(c)] for c in y_test])
        command = [sys.executable, "-m", "vowpalwabbit", "-d", train, reduction, str(len(labels)), *args, "-f", model, "--quiet"]
        if passes > 1:
            command += ["--passes", str(passes), "--holdout_off", "--cache_file", os.path.join(work, "c.cache")]
        start = time.perf_counter()
        subprocess.run(command, check=True)
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "vowpalwabbit", "-t", "-i", model, "-d", test, "-p", preds, "--quiet"], check=True)
        test_seconds = time.perf_counter() - start
        predicted = np.loadtxt(preds).astype(int)
    return {"accuracy": float(np.mean(predicted == np.array([to_vw[int(c)] for c in y_test]))), "seconds": seconds,
            "test_seconds": test_seconds}
