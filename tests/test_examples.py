"""The examples and the README's main job run and learn something."""

from __future__ import annotations

import pathlib
import re
import runpy
import subprocess
import sys

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
