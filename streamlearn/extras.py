"""The optional parts of an install: which extra brings which module, and the one-line error
when a command or method needs one that is missing.

The core install (numpy, scipy, numba, river, msgpack, tqdm) learns, predicts, checkpoints and
reads files and stdin; each of the following needs its extra (``pip install 'streamlearn[NAME]'``,
or ``[all]``):

========== ================================================ ===================================
extra      brings                                           for
========== ================================================ ===================================
serve      uvicorn, httptools, orjson, prometheus-client    ``streamlearn serve``, ``train --serve``
kafka      kafka-python, crc32c                             ``kafka://`` sources, sinks, mixing
kafka-fast kafka + confluent-kafka                          ``kafka://...?client=confluent``
plot       matplotlib                                       ``streamlearn plot``
pandas     pandas                                           ``predict_proba_many`` of an array
graph      hnswlib                                          ``ExtremeSVM(oracle="graph")``
sklearn    scikit-learn                                     :mod:`streamlearn.sklearn`
========== ================================================ ===================================

>>> require("json", "serve", "streamlearn serve").__name__
'json'
>>> require("no_such_module_here", "serve", "streamlearn serve")
Traceback (most recent call last):
...
streamlearn.extras.MissingExtraError: streamlearn serve needs no_such_module_here, which is not installed: pip install 'streamlearn[serve]'
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtraError(ImportError):
    """A module of an optional extra is not installed; the message says which extra to install.
    The ``streamlearn`` command prints it as one line and exits 2."""

    def __init__(self, module: str, extra: str, what: str):
        super().__init__(f"{what} needs {module}, which is not installed: pip install 'streamlearn[{extra}]'",
                         name=module)
        self.extra = extra


def require(module: str, extra: str, what: str) -> ModuleType:
    """``module`` imported, or :class:`MissingExtraError` naming ``extra``; ``what``: the command or
    method that needs it, as the user wrote it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        if error.name is not None and module != error.name and not module.startswith(error.name + "."):
            raise  # the module is there but broken (one of its own imports failed): its own error says more
        raise MissingExtraError(module, extra, what) from None


def require_all(modules: tuple[str, ...], extra: str, what: str) -> None:
    """Each of ``modules`` importable, or :class:`MissingExtraError` for the first that is not."""
    for module in modules:
        require(module, extra, what)
