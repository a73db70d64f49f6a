"""A lean, honest install (issue 76): a core of six distributions, an extra for each optional part
whose absence a command names in one line (exit 2), one installed package name, and a build that
says when it fell back to the JIT."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from helpers import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
LETTER = ROOT / "streamlearn" / "data" / "letter.scale.bz2"
CORE = {"numpy", "scipy", "numba", "river", "msgpack", "tqdm"}
#: each extra and one module it brings (streamlearn/extras.py's table)
EXTRAS = {"serve": "uvicorn", "kafka": "kafka", "kafka-fast": "confluent_kafka", "plot": "matplotlib",
          "pandas": "pandas", "graph": "hnswlib", "sklearn": "sklearn"}

#: runs the streamlearn command with the top-level modules named in argv[1] unimportable, as on an
#: install without their extras
BLOCKED_COMMAND = """
import sys
blocked = set(sys.argv[1].split(","))
class Uninstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name.split(".")[0])
sys.meta_path.insert(0, Uninstalled())
sys.argv = ["streamlearn"] + sys.argv[2:]
from streamlearn.service.console import console_main
console_main()
"""


def without(modules, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKED_COMMAND, ",".join(modules), *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", requirement).group().lower()


def test_the_core_requires_six_distributions_and_each_extra_is_declared():
    requirements = importlib.metadata.requires("streamlearn")
    assert {_name(r) for r in requirements if "extra ==" not in r} == CORE
    declared = set(importlib.metadata.metadata("streamlearn").get_all("Provides-Extra"))
    assert set(EXTRAS) | {"all", "test"} <= declared
    in_all = {_name(r) for r in requirements if 'extra == "all"' in r}
    assert in_all == {"streamlearn"}  # `all` is the other extras, named once (streamlearn[serve,...])


def test_predict_proba_many_of_an_array_without_pandas_names_the_extra(monkeypatch):
    from streamlearn import MulticlassSVM
    from streamlearn.extras import MissingExtraError

    model = MulticlassSVM()
    model.learn_many(np.eye(3), [0, 1, 2])
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'streamlearn\[pandas\]'"):
        model.predict_proba_many(np.eye(3))
    assert model.predict_many(np.eye(3)).dtype == np.int64  # labels need no pandas


def test_the_scikit_learn_wrappers_without_scikit_learn_name_the_extra(monkeypatch):
    from streamlearn.extras import MissingExtraError

    monkeypatch.delitem(sys.modules, "streamlearn.sklearn", raising=False)
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(MissingExtraError, match=r"streamlearn\.sklearn needs sklearn.*'streamlearn\[sklearn\]'"):
        importlib.import_module("streamlearn.sklearn")


@pytest.mark.slow
def test_the_core_job_runs_with_every_extra_missing(tmp_path):
    """train, evaluate, predict, inspect on files, with none of the extras' modules importable."""
    every = list(EXTRAS.values()) + ["httptools", "orjson", "prometheus_client", "crc32c"]
    out = without(every, "train", LETTER, "--checkpoint-dir", tmp_path / "ckpt", "--quiet")
    assert out.returncode == 0, out.stderr
    for args in (("evaluate", ROOT / "streamlearn" / "data" / "letter.scale.t.bz2", "--checkpoint", tmp_path / "ckpt"),
                 ("predict", LETTER, "--checkpoint", tmp_path / "ckpt", "--output", tmp_path / "p.jsonl"),
                 ("inspect", tmp_path / "ckpt")):
        out = without(every, *args)
        assert out.returncode == 0, (args, out.stderr)
    assert sum(1 for _ in open(tmp_path / "p.jsonl")) == 15_000


@pytest.mark.slow
@pytest.mark.parametrize("blocked, args, extra", [
    ("uvicorn", ("serve", "--checkpoint-dir", "{ckpt}"), "serve"),
    ("orjson", ("train", LETTER, "--serve", "127.0.0.1:0", "--checkpoint-dir", "{new}"), "serve"),
    ("kafka", ("train", "kafka://127.0.0.1:1/t", "--checkpoint-dir", "{new}"), "kafka"),
    ("confluent_kafka", ("train", "kafka://127.0.0.1:1/t?client=confluent", "--checkpoint-dir", "{new}"), "kafka-fast"),
    ("matplotlib", ("plot", "{ckpt}/metrics.jsonl", "--output", "{new}.png"), "plot"),
    ("hnswlib", ("train", LETTER, "--learner", "ExtremeSVM", "--param", "oracle=graph", "--checkpoint-dir", "{new}"),
     "graph"),
], ids=lambda v: v if isinstance(v, str) and "/" not in v else None)
def test_a_command_without_its_extra_says_which_in_one_line_and_exits_2(tmp_path, blocked, args, extra):
    ckpt = tmp_path / "ckpt"
    cli("train", LETTER, "--checkpoint-dir", ckpt, "--quiet", "--passes", "1")
    args = [str(a).format(ckpt=ckpt, new=tmp_path / "new") for a in args]
    out = without([blocked], *args)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pip install 'streamlearn[{extra}]'" in lines[0], out.stderr
    assert not list((tmp_path / "new").glob("ckpt-*")) if (tmp_path / "new").is_dir() else True  # refused before learning
    assert list(ckpt.glob("ckpt-*"))  # the pattern above names the checkpoints a run writes


@pytest.mark.slow
def test_the_wheel_installs_one_name_without_test_helpers_and_says_when_its_build_failed(tmp_path):
    """``CC=/bin/false``: no compiler. The wheel builds (JIT at first use), and the build's warning
    reaches the terminal pip runs in although pip captures the build's output (``script`` gives
    the build a terminal)."""
    if shutil.which("script") is None:
        pytest.skip("util-linux `script` (a terminal for pip) is not installed")
    command = f"{sys.executable} -m pip wheel -q --no-deps {ROOT} -w {tmp_path}"
    env = dict(os.environ, CC="/bin/false", CXX="/bin/false")
    env.pop("STREAMLEARN_REQUIRE_AOT", None)
    out = subprocess.run(["script", "-qec", command, str(tmp_path / "typescript")], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    warnings = [line for line in out.stdout.splitlines() if "WARNING: streamlearn: ahead-of-time kernels not built" in line]
    assert len(warnings) == 1 and "first use JIT-compiles" in warnings[0], out.stdout
    (wheel,) = tmp_path.glob("streamlearn-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"streamlearn", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1]
                                                + ".dist-info"}
    assert "streamlearn/connectors/kafka.py" in names and "streamlearn/extras.py" in names
    assert not [n for n in names if "localbroker" in n or "broker_front" in n]
    assert not [n for n in names if "_aot" in n and n.endswith(".so")]  # the build did fail, as the warning says
