"""The examples and the README's main job run and learn something."""

from __future__ import annotations

import json
import os
import pathlib
import re
import runpy
import subprocess
import sys

import pytest

import streamlearn
from conftest import PATIENCE

pytestmark = pytest.mark.slow  # whole processes or every river check: not in the quick subset

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_river_pipeline_example_learns():
    namespace = runpy.run_path(str(ROOT / "examples" / "river_pipeline.py"))
    assert namespace["main"]() > 0.80  # measured 0.865; chance is ~0.14


def test_main_job_prints_held_out_accuracy():
    out = subprocess.run(
        [sys.executable, "-m", "streamlearn", "--passes", "2"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    accuracies = [float(a) for a in re.findall(r"held-out accuracy ([\d.]+)%", out)]
    assert len(accuracies) == 2
    assert accuracies[-1] > 60.0  # a linear model reaches ~70-75% on letter; chance is ~4%


@pytest.mark.parametrize("lam", ["1e-3", "auto"])
def test_main_job_takes_lam_and_batch_rows(lam):
    out = subprocess.run([sys.executable, "-m", "streamlearn", "--passes", "1", "--lam", lam, "--batch-rows", "2000"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert f"lam={lam!r}" in out if lam == "auto" else f"lam={float(lam)!r}" in out
    assert float(re.findall(r"held-out accuracy ([\d.]+)%", out)[0]) > 60.0


@pytest.mark.parametrize(("arguments", "message"), [(["--lam", "often"], "--lam"),
                                                   (["--learner", "ExtremeSVM", "--lam", "auto"], "lam must be")])
def test_main_job_refuses_a_bad_lam(arguments, message):
    result = subprocess.run([sys.executable, "-m", "streamlearn", *arguments], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_shell_pipe_example_learns_from_stdin_and_resumes(tmp_path):
    env = {**os.environ, "PATH": f"{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}"}
    run = lambda: subprocess.run(["bash", str(ROOT / "examples" / "shell_pipe.sh"), str(tmp_path)], env=env,
                                 capture_output=True, text=True, check=True)
    first = run()
    evaluation = json.loads(first.stdout.strip().splitlines()[-1])
    assert evaluation["accuracy"] > 0.65 and (tmp_path / "learning_curves.png").exists()
    second = run()  # same stream piped again: the checkpoint already covers all of it
    assert "resumed from" in second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1]) == evaluation


def _broker_example(name: str):
    """What ``examples/NAME``'s ``main()`` returns, run on a broker of its own (skipped without one)."""
    from localbroker import BrokerUnavailable

    namespace = runpy.run_path(str(ROOT / "examples" / name))
    try:
        return namespace["main"]([])
    except BrokerUnavailable as error:
        pytest.skip(str(error))


def test_kafka_daemon_example_end_to_end():
    accuracy = _broker_example("kafka_daemon.py")
    assert accuracy > 0.6  # measured 0.68 after one pass; chance is ~0.04


def test_scale_out_example_end_to_end():
    outcome = _broker_example("scale_out.py")
    for daemon in outcome["daemons"]:  # every record once in the one shared model
        assert daemon["examples"] == sum(daemon["by_member"].values()) == 15_000
    assert len({d["accuracy"] for d in outcome["daemons"]}) == 1  # one model: the same predictions
    assert outcome["daemons"][0]["accuracy"] > 0.6 and outcome["alone"] > 0.6  # one pass of letter: ~0.69


def test_serve_live_example_end_to_end():
    outcome = runpy.run_path(str(ROOT / "examples" / "serve_live.py"))["main"]()
    assert outcome["predictions"] == 15_000 and outcome["unlabelled"] == 1_500 and outcome["learned"] == 13_500
    assert outcome["checkpoints_answered"] >= 3 and outcome["accuracy"] > 0.6  # one pass of letter: ~0.69


@pytest.mark.parametrize("learner", sorted(streamlearn.LEARNERS))
def test_the_default_job_runs_every_learner_it_offers(learner):
    """``python -m streamlearn --learner X`` offered ten learners; five crashed on ``lam``."""
    result = subprocess.run([sys.executable, "-m", "streamlearn", "--learner", learner, "--passes", "1"],
                            capture_output=True, text=True, timeout=PATIENCE)
    assert result.returncode == 0, result.stderr
    accuracy = float(result.stdout.strip().splitlines()[-1].split("held-out accuracy ")[1].rstrip("%"))
    assert accuracy > 30.0, result.stdout


def _readme_blocks(language: str) -> list[tuple[int, str]]:
    """The fenced code blocks of README.md in a language, with their first line number."""
    text = (ROOT / "README.md").read_text()
    return [(text[: m.start()].count("\n") + 2, m.group(1))
            for m in re.finditer(rf"```{language}\n(.*?)```", text, re.S)]


def test_the_readme_is_short():
    assert (ROOT / "README.md").read_text().count("\n") <= 150


def test_the_readme_python_blocks_run_as_written():
    import doctest

    blocks = _readme_blocks("python")
    assert blocks
    for line, block in blocks:
        test = doctest.DocTestParser().get_doctest(block, {}, "README.md", str(ROOT / "README.md"), line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test)
        assert runner.failures == 0 and runner.tries > 0, f"README.md block at line {line} failed"


def test_the_readme_command_lines_run(tmp_path):
    """Each line of the command-line block, as a newcomer runs it: in an empty folder, where
    ``letter.scale`` and ``letter.scale.t`` name the bundled files."""
    (_, block), = [b for b in _readme_blocks("bash") if "--checkpoint-dir model " in b[1]]
    for command in block.strip().splitlines():
        command = command.split("  #")[0].strip().replace("python -m", f"{sys.executable} -m")
        command = command.replace("| streamlearn ", f"| {sys.executable} -m streamlearn.service.cli ")
        command = re.sub(r"^streamlearn ", f"{sys.executable} -m streamlearn.service.cli ", command)
        result = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=PATIENCE)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
    assert (tmp_path / "predictions.jsonl").read_text().count("\n") == 5000


@pytest.mark.parametrize("name", sorted(n for n in streamlearn.__all__ if n[:1].isupper() and n not in (
    "LEARNERS", "REGRESSORS", "LEARNER_NAMES")))
def test_every_public_class_documents_parameters_attributes_and_an_example(name):
    import inspect

    doc = inspect.getdoc(getattr(streamlearn, name)) or ""
    shared = "Parameters and attributes are those of" in doc  # the MCID learners share MulticlassSVM's
    for part in ("Parameters", "Attributes", ">>> "):
        assert part in doc or (shared and part != ">>> "), (name, part)
