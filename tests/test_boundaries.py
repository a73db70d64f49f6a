"""The library's rooms meet at public names (issue 42): no module of ``streamlearn/`` or
``connectors/`` reads a private attribute (``obj._name``) or imports a private name that another
module defines. A family's own names count as its own: those its module defines, and those of the
modules its classes inherit from (a learner restoring its own pending rows in a classmethod).
Allowed across modules: river's estimator protocol, which river spells with an underscore, and
``os._exit``. The library (``streamlearn/`` without ``service/``) never imports the service floor."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: river's estimator API (``river.base.Estimator``), the standard library's ``os._exit``
PROTOCOL = {"_get_params", "_multiclass", "_unit_test_params", "_unit_test_skips", "_supervised", "_more_tags", "_exit"}


def _module_of(path: pathlib.Path) -> str:
    """The name a module is imported by: ``connectors/`` is installed as ``streamlearn.connectors``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(("streamlearn",) + parts if parts[0] == "connectors" else parts)


MODULES = {_module_of(p): p for folder in ("streamlearn", "connectors") for p in (ROOT / folder).rglob("*.py")}


def _defined(tree: ast.AST) -> set:
    """Names a module defines: functions, classes, assigned names and ``self``/``cls`` attributes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") \
                and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".")[: -node.level]
    return ".".join(package + ([node.module] if node.module else []))


def _own_names(module: str, tree: ast.AST) -> set:
    """This module's names and those of the modules whose classes its classes inherit from."""
    imported = {alias.asname or alias.name: _resolve(module, node) for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    parents = {imported[base.id] for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
               for base in node.bases if isinstance(base, ast.Name) and base.id in imported}
    own = _defined(tree)
    for parent in parents & MODULES.keys():
        own |= _defined(ast.parse(MODULES[parent].read_text()))
    return own


def private_reads(module: str, source: str | None = None) -> list[str]:
    """``line: what`` for each private name ``module`` (its file, or ``source``) takes from another module."""
    tree = ast.parse(MODULES[module].read_text() if source is None else source)
    own, found = _own_names(module, tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr not in own and node.attr not in PROTOCOL:
                found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and not (node.level and node.module is None):  # `from . import _x`: a package's own module
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_reads_no_private_name_of_another(module):
    assert private_reads(module) == []


TESTS = sorted(p.name for p in (ROOT / "tests").glob("*.py"))


@pytest.mark.parametrize("name", TESTS)
def test_a_test_reads_no_private_name_of_the_code_it_tests(name):
    """Tests too go through public names: a learner's insides can change without breaking them
    (a test's own helpers, named with an underscore, are its own)."""
    path = ROOT / "tests" / name
    assert private_reads(_module_of(path), path.read_text()) == []


def test_the_check_finds_what_it_is_for():
    """A reach into another family's insides, and a private import, are found (the check can fail)."""
    source = "from streamlearn.base import _hidden\n\ndef peek(model):\n    return model._weights.V, model.n_steps\n"
    assert private_reads("streamlearn.peeking", source) == ["1: import _hidden", "4: ._weights"]


#: the library's modules: ``streamlearn/`` without its service floor and without ``__main__`` (the embedded job, a program)
SERVICE_PACKAGES = ("streamlearn.connectors", "streamlearn.service")
LIBRARY = sorted(m for m in MODULES if m.startswith("streamlearn.") and not m.startswith(SERVICE_PACKAGES)
                 and m != "streamlearn.__main__")


def service_imports(module: str, source: str | None = None) -> list[str]:
    """``line: what`` for each import of the service floor (``streamlearn.connectors``, ``streamlearn.service``) in ``module``."""
    tree = ast.parse(MODULES[module].read_text() if source is None else source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            targets = [_resolve(module, node)]
            if node.level and node.module is None:  # `from . import x`: the modules x of the package
                targets = [f"{targets[0]}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        found += [f"{node.lineno}: {target}" for target in targets
                  if any(target == p or target.startswith(p + ".") for p in SERVICE_PACKAGES)]
    return found


@pytest.mark.parametrize("module", LIBRARY)
def test_the_library_never_imports_the_service(module):
    """The estimators can be read, packaged and tested without the daemon (ARCHITECTURE.md's two floors)."""
    assert service_imports(module) == []


def test_the_floor_check_finds_what_it_is_for():
    """Each spelling of an import of the service floor is found, a library import is not (the check can fail)."""
    top = "import streamlearn.connectors.files\nfrom .service import runner\nfrom . import service, features\nfrom .base import x\n"
    assert service_imports("streamlearn.mcid", top) == ["1: streamlearn.connectors.files", "2: streamlearn.service",
                                                        "3: streamlearn.service"]
    nested = "from ..service.checkpoint import pack\nfrom ..features import FeatureSpace\n"
    assert service_imports("streamlearn.leastsquares.solvers", nested) == ["1: streamlearn.service.checkpoint"]


#: a room's size: past it, a module holds more than one concern (ARCHITECTURE.md)
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 80


@pytest.mark.parametrize("module", sorted(MODULES))
def test_rooms_stay_small(module):
    """No module over 500 lines; no function over 80, but a compiled kernel that says in the
    comment line above it (``# over 80 lines: why``) why it is one function."""
    lines = MODULES[module].read_text().splitlines()
    assert len(lines) <= MAX_MODULE_LINES, f"{module}: {len(lines)} lines"
    long = []
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            said = module.startswith("streamlearn.kernels.") and lines[first - 2].startswith("# over 80 lines: ")
            if not said:
                long.append(f"{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert long == []
