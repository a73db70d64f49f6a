"""The examples in ``streamlearn.connectors``' docstrings run, on the modules as installed.

pytest's own ``--doctest-modules`` would import ``connectors/`` by its folder's name, a second copy
beside ``streamlearn.connectors`` (the name a wheel installs, issue 76) whose relative imports of
``streamlearn`` fail; so the folder is not among pytest's test paths, and this runs its examples."""

from __future__ import annotations

import doctest
import importlib
import pathlib

import pytest

FOLDER = pathlib.Path(__file__).resolve().parents[1] / "connectors"
MODULES = sorted("streamlearn.connectors" + ("" if p.stem == "__init__" else f".{p.stem}") for p in FOLDER.glob("*.py"))


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_of_each_connector_module_run(name):
    module = importlib.import_module(name)
    assert module.__file__.startswith(str(FOLDER))  # the repository's folder, under its installed name
    result = doctest.testmod(module, verbose=False, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name} (printed above)"


def test_the_connector_examples_are_found():
    """The run above is not vacuous: the folder's docstrings hold examples, and testmod finds them."""
    attempted = sum(doctest.testmod(importlib.import_module(n), verbose=False, report=False).attempted for n in MODULES)
    assert attempted >= 40  # 49 when this was written
