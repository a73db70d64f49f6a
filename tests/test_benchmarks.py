"""Every benchmark's ``--quick`` smoke run, once, so that none rots unnoticed: it runs to the
end and writes its JSON (with the run's provenance), Markdown table and plot. The figures of
a smoke run mean nothing; the committed results come from full runs (bench/README.md)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

pytestmark = pytest.mark.slow  # whole processes or every river check: not in the quick subset

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: benchmark module (and a label, for a second run of one module), its smoke-run arguments (output
#: folder appended), the files it writes
SMOKE_RUNS = {
    "mcid_bench": (["--quick", "--out"], ["mcid.json", "mcid.md", "mcid_throughput.png"]),
    "pgs_bench": (["--quick", "--out"], ["pgs.json", "pgs.md", "pgs.png"]),
    "runtime_bench": (["--quick", "--out"], ["runtime.json", "runtime.md", "runtime.png"]),
    "memoir_bench": (["--quick", "--output"], ["memoir.json", "memoir.md", "memoir.png"]),
    "defaults_bench": (["--quick", "--output"], ["defaults.json", "defaults.md", "defaults.png"]),
    "startup_bench": (["--repeats", "2", "--no-load", "--output"], ["startup.json", "startup.md", "startup.png"]),
    "first_use_bench": (["--quick", "--out"], ["first-use.json", "first-use.md", "first-use.png"]),
    "leastsquares_bench": (["--quick", "--out"], ["leastsquares.json", "leastsquares.md", "leastsquares.png"]),
    "lpsvm_bench": (["--quick", "--out"], ["lpsvm.json", "lpsvm.md", "lpsvm.png"]),
    "serve_bench": (["--quick", "--out"], ["serve.json", "serve.md"]),
    "scaleout_bench": (["--quick", "--out"], ["scaleout.json", "scaleout.md", "scaleout.png"]),
    "drift_bench": (["--quick", "--stream-seeds", "2", "--jobs", "1", "--out"], ["drift.json", "drift.md", "drift.png"]),
    "drift_bench benchmark-sets": (["--quick", "--benchmark-sets", "--seeds", "2", "--jobs", "1", "--out"],
                                   ["drift-stationary.json", "drift-stationary.md", "drift-stationary.png"]),
    "calibration_bench": (["--quick", "--out"], ["calibration.json", "calibration.md", "calibration.png"]),
    "speed_bench": (["--quick", "--out"], ["speed.json", "speed.md", "speed.png"]),
    "options_bench": (["--quick", "--jobs", "1", "--out"], ["options.json", "options.md", "options.png"]),
    "options_bench other-families": (["--quick", "--other-families", "--jobs", "1", "--out"],
                                     ["options-families.json", "options-families.md", "options-families.png"]),
    "adaptation_bench": (["--quick", "--out"], ["adaptation.json", "adaptation.md", "adaptation.png"]),
    "ann_bench": (["--quick", "--out"], ["ann.json", "ann.md", "ann.png"]),
    "dense_extreme_bench": (["--quick", "--repeats", "2", "--out"], ["dense-extreme.json", "dense-extreme.md", "dense-extreme.png"]),
    "linear_bound_bench": (["--quick", "--out"], ["linear-bound.json", "linear-bound.md", "linear-bound.png"]),
    "oracle_cost_bench": (["--quick", "--out"], ["oracle-cost.json", "oracle-cost.md", "oracle-cost.png"]),
    "list_cost_bench": (["--quick", "--out"], ["list-cost.json", "list-cost.md", "list-cost.png"]),
    "means_probe_bench": (["--quick", "--out"], ["means-probe.json", "means-probe.md", "means-probe.png"]),
    "weights_bench": (["--quick", "--out"], ["weights.json", "weights.md", "weights.png"]),
}


class SmokeRuns:
    """Every smoke run, one after the other, slightly niced, on a thread of its own: started early in
    the session when the whole suite runs (tests/conftest.py moves this file's tests to its end), it
    uses the core the rest of the suite leaves idle. :meth:`wait` gives ``{module: (completed
    process, output folder)}``."""

    def __init__(self):
        from concurrent.futures import ThreadPoolExecutor

        self.folder = pathlib.Path(tempfile.mkdtemp(prefix="smoke-runs-"))
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="smoke-runs")
        self._runs = {module: self._pool.submit(self._run, module) for module in sorted(SMOKE_RUNS)}

    def _run(self, module):
        """One smoke run, limited in CPU time (``conftest.limit_cpu``); a run still going after
        :data:`conftest.PATIENCE` is stopped with what it started and fails alone."""
        from conftest import BACKGROUND_NICE, PATIENCE, limit_cpu

        arguments, _ = SMOKE_RUNS[module]
        out = self.folder / module.replace(" ", "-")
        out.mkdir()
        command = ["nice", "-n", str(BACKGROUND_NICE), sys.executable, "-m", f"bench.{module.split()[0]}", *arguments, str(out)]
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=limit_cpu())
        try:
            stdout, stderr = process.communicate(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            stderr += f"\nstopped after {PATIENCE} s"
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr), out

    def wait(self) -> dict:
        return {module: run.result() for module, run in self._runs.items()}

    def remove(self) -> None:
        self._pool.shutdown(cancel_futures=True)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def smoke_runs(request, datasets_dir) -> dict:
    runs = getattr(request.config, "smoke_runs", None) or SmokeRuns()
    try:
        yield runs.wait()
    finally:
        runs.remove()


@pytest.mark.parametrize("module", sorted(SMOKE_RUNS))
def test_the_benchmark_smoke_run_writes_its_results(module, smoke_runs):
    result, out = smoke_runs[module]
    assert result.returncode == 0, result.stderr[-3000:]
    for name in SMOKE_RUNS[module][1]:
        assert (out / name).stat().st_size > 0, name
    provenance = json.loads((out / SMOKE_RUNS[module][1][0]).read_text())["machine"]
    assert provenance["commit"] and provenance["versions"]["numpy"] and provenance["cpu"]


def test_the_drift_bench_draws_each_synthetic_stream_as_often_as_asked_and_a_real_set_once(smoke_runs):
    result, out = smoke_runs["drift_bench"]
    assert result.returncode == 0, result.stderr[-3000:]
    cells = json.loads((out / "drift.json").read_text())["cells"]
    draws = {}
    for cell in cells:
        draws.setdefault((cell["stream"], cell["learner"]), []).append(cell["seed"])
    assert {key: sorted(seeds) for key, seeds in draws.items()} == {
        (stream, learner): [0, 10] if stream == "sine" else [0] for stream, learner in draws}
    assert {stream for stream, _ in draws} == {"sine", "phishing"}
    assert "Draws of each synthetic stream: 2" in (out / "drift.md").read_text()


def test_every_benchmark_has_a_smoke_run():
    benchmarks = {p.stem for p in (ROOT / "bench").glob("*_bench.py")}
    modules = {run.split()[0] for run in SMOKE_RUNS}
    assert benchmarks <= modules, f"benchmarks without a smoke run here: {benchmarks - modules}"


def test_leastsquares_sections_rerun_into_the_results_and_the_report_is_rewritten(smoke_runs, tmp_path):
    """``--only SECTION`` merges one section's new run, with its own provenance, into the results;
    ``--report-only`` rewrites the report from the results alone."""
    result, out = smoke_runs["leastsquares_bench"]
    assert result.returncode == 0, result.stderr[-3000:]
    shutil.copytree(out, tmp_path, dirs_exist_ok=True)
    before = json.loads((tmp_path / "leastsquares.json").read_text())
    (tmp_path / "leastsquares.md").unlink()
    for arguments in (["--quick", "--only", "draw_spread"], ["--report-only"]):
        run = subprocess.run([sys.executable, "-m", "bench.leastsquares_bench", *arguments, "--out", str(tmp_path)], cwd=ROOT,
                             capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert run.returncode == 0, run.stderr[-3000:]
    after = json.loads((tmp_path / "leastsquares.json").read_text())
    assert after["provenance"]["draw_spread"]["command"].endswith("--only draw_spread --out " + str(tmp_path))
    assert after["provenance"]["table1"] == before["provenance"]["table1"] and after["table1"] == before["table1"]
    assert "| draw_spread |" in (tmp_path / "leastsquares.md").read_text()


def test_the_recorded_command_carries_the_thread_limits_that_shaped_the_timings(monkeypatch):
    from bench.common import THREAD_LIMITS, machine

    for name in THREAD_LIMITS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "argv", [str(ROOT / "bench" / "leastsquares_bench.py"), "--only", "text"])
    assert machine()["command"] == "python -m bench.leastsquares_bench --only text"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert machine()["command"] == "OPENBLAS_NUM_THREADS=1 python -m bench.leastsquares_bench --only text"


def test_the_recorded_commit_is_the_one_the_run_started_from(monkeypatch):
    """A long run records its provenance when a section ends: a commit made meanwhile is not the
    code it ran, so the checkout is read once, when the process starts."""
    import bench.common

    def no_git(*args, **kwargs):
        raise AssertionError("machine() read the checkout again")

    monkeypatch.setattr(bench.common, "CODE_AT_START", ("f" * 40, False))
    monkeypatch.setattr(bench.common.subprocess, "run", no_git)
    assert bench.common.machine()["commit"] == "f" * 40


def test_the_least_squares_benchmark_names_every_ridge_it_fits_with():
    """The paper's experiments fix their ridge: a fit left at the learner's default changed meaning
    when the defaults protocol moved that default (1e-6 to 1 or 0.1)."""
    import ast

    tree = ast.parse((ROOT / "bench" / "leastsquares_bench.py").read_text())
    learners = {"GeneralizedLeastSquares", "CalibratedLeastSquares", "StagewiseRegression"}
    fits = [call for call in ast.walk(tree) if isinstance(call, ast.Call) and getattr(call.func, "id", None) in learners]
    assert len(fits) >= 8
    assert all("ridge" in {k.arg for k in call.keywords} for call in fits), [ast.unparse(c) for c in fits]


def _recorded(node, key: str):
    """Every value under ``key`` anywhere in a results file's JSON."""
    if isinstance(node, dict):
        for name, value in node.items():
            if name == key:
                yield value
            yield from _recorded(value, key)
    elif isinstance(node, list):
        for value in node:
            yield from _recorded(value, key)


def test_every_committed_result_names_a_command_that_runs_from_the_checkout():
    """A results file's command is how a reader reproduces its figures: a module of ``bench/``
    run from the repository root (it once recorded the file's absolute path with dots)."""
    import re

    commands = [(path.name, command) for path in sorted((ROOT / "bench" / "results").glob("*.json"))
                for command in _recorded(json.loads(path.read_text()), "command")]
    assert len(commands) >= 10
    runnable = re.compile(r"(?:[A-Z_]+=\d+ )*python -m bench\.(\w+)(?: |$)")
    for name, command in commands:
        if command.startswith("not recorded: "):
            continue
        match = runnable.match(command)
        assert match and (ROOT / "bench" / f"{match.group(1)}.py").is_file(), (name, command)
