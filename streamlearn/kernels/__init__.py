"""Compiled kernels: plain arrays in, plain arrays out; no Python objects, no I/O.

The kernels are written once, as numba functions (``mcid.py``, ``scaled.py``, ``rows.py``,
``pgs.py``, ``text.py``; loss codes in the numba-free ``codes.py``), and reach the rest of
streamlearn through :func:`compiled`, which picks for each call:

* the **ahead-of-time build** (``_aot*.so``, compiled by ``setup.py`` when the package is
  installed, for the functions and argument types of :mod:`~streamlearn.kernels.exports`),
  when the call's arguments match one of the compiled signatures exactly (dtype,
  dimensions, C order, writeable). It needs no numba at run time: the ``streamlearn``
  command starts in a fraction of the ~0.6 s that importing numba and loading its cache
  take;
* numba's **JIT** version otherwise (other argument types, kernels not exported, an
  install without the extension, or ``STREAMLEARN_JIT=1`` in the environment). numba is
  imported on first need, and compiles with ``cache=True``: beside the source when that
  directory is writable, else in a per-user cache directory (``NUMBA_CACHE_DIR`` overrides).

Both are compiled from the same functions by the same LLVM for the same CPU, and give
bit-identical results (``tests/test_kernels_aot.py`` checks every exported signature).

>>> rows = compiled("rows")
>>> rows.first_appearance(np.array([3, 1, 3, 0]), 4).tolist()
[3, 1, 0]
>>> backend() in ("aot", "jit")
True
"""

from __future__ import annotations

import importlib
import os

import numpy as np

from .exports import EXPORTS, symbol

try:
    if os.environ.get("STREAMLEARN_JIT"):
        raise ImportError("STREAMLEARN_JIT is set")
    from . import _aot  # built by setup.py
except ImportError as error:  # not built (or for another NumPy ABI): numba's JIT serves every call
    _aot = None
    _AOT_MISSING = str(error)
else:
    _AOT_MISSING = ""

_DTYPES = {code: np.dtype(t) for code, t in
           (("u1", np.uint8), ("i4", np.int32), ("i8", np.int64), ("u8", np.uint64), ("f8", np.float64), ("b1", np.bool_))}


def _is_int(a) -> bool:
    return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))


def _is_float(a) -> bool:
    return isinstance(a, (float, int, np.floating, np.integer)) and not isinstance(a, (bool, np.bool_))


def _is_bool(a) -> bool:
    return isinstance(a, (bool, np.bool_))


def argument_check(code: str):
    """A predicate telling whether an argument fits a type code of :mod:`.exports`.

    >>> argument_check("i8[::1]")(np.zeros(3, np.int64)), argument_check("i8[::1]")(np.zeros(6, np.int64)[::2])
    (True, False)
    """
    scalar = {"i8": _is_int, "f8": _is_float, "b1": _is_bool}.get(code)
    if scalar is not None:
        return scalar
    read_only_ok = code.endswith("r")
    dtype = _DTYPES[code[:2]]
    ndim = {"[::1]": 1, "[:, ::1]": 2}[code[2:].rstrip("r")]

    def fits(a) -> bool:
        if type(a) is not np.ndarray or a.dtype != dtype or a.ndim != ndim:
            return False
        flags = a.flags
        return flags.c_contiguous and (read_only_ok or flags.writeable)

    return fits


def _dispatcher(jit_function, variants: list):
    """A function calling the first compiled variant whose checks all pass, else the JIT
    function (``jit_function()`` imports it on first need)."""

    def call(*args, **kwargs):
        if not kwargs:
            for function, checks in variants:
                if len(args) == len(checks) and all(check(a) for check, a in zip(checks, args)):
                    return function(*args)
        return jit_function()(*args, **kwargs)

    return call


class KernelModule:
    """The kernels of ``streamlearn/kernels/<name>.py`` as attributes (see the module
    docstring); each is resolved on first access."""

    def __init__(self, name: str):
        self._name = name

    def _jit(self, attribute: str):
        return getattr(importlib.import_module(f"{__name__}.{self._name}"), attribute)

    def __getattr__(self, attribute: str):
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        signatures = EXPORTS.get(self._name, {}).get(attribute)
        if _aot is None or not signatures:
            value = self._jit(attribute)
        else:
            variants = [(getattr(_aot, symbol(self._name, attribute, i)), [argument_check(c) for c in signature])
                        for i, signature in enumerate(signatures)]
            cache = []

            def jit_function():
                if not cache:
                    cache.append(self._jit(attribute))
                return cache[0]

            value = _dispatcher(jit_function, variants)
            value.__name__ = value.__qualname__ = attribute
            value.__doc__ = f"Ahead-of-time build of streamlearn.kernels.{self._name}.{attribute} (see streamlearn.kernels)."
        setattr(self, attribute, value)
        return value


_MODULES: dict[str, KernelModule] = {}


def compiled(name: str) -> KernelModule:
    """The kernels of one module (``"mcid"``, ``"scaled"``, ``"rows"``, ``"pgs"``, ``"text"``)."""
    if name not in _MODULES:
        _MODULES[name] = KernelModule(name)
    return _MODULES[name]


def backend() -> str:
    """``"aot"`` when the ahead-of-time kernels are loaded, ``"jit"`` otherwise."""
    return "jit" if _aot is None else "aot"


def backend_note() -> str:
    """One line on how the kernels run, for ``streamlearn --version`` and bug reports."""
    if _aot is not None:
        return "kernels: ahead-of-time build (numba JIT for other argument types)"
    return f"kernels: numba JIT (no ahead-of-time build: {_AOT_MISSING})"
