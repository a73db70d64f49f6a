"""Compiled kernels: plain arrays in, plain arrays out; no Python objects, no I/O.

The kernels are written once, as numba functions (``mcid.py``, ``scaled.py``, ``rows.py``,
``pgs.py``, ``text.py``; loss codes in the numba-free ``codes.py``), and reach the rest of
streamlearn through :func:`compiled`, which picks for each call:

* the **ahead-of-time build** (``_aot*.so``, compiled by ``setup.py`` when the package is
  installed, for the functions and argument types of :mod:`~streamlearn.kernels.exports`),
  when the call's arguments match one of the compiled signatures exactly (dtype,
  dimensions, C order, writeable). It needs no numba at run time: the ``streamlearn``
  command starts without importing numba and loading its cache (``bench/results/startup.md``);
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
import pathlib

import numpy as np

from .exports import EXPORTS, symbol

try:
    if os.environ.get("STREAMLEARN_JIT"):
        raise ImportError("STREAMLEARN_JIT is set")
    from . import _aot  # built by setup.py
except ImportError as error:  # not built (or for another NumPy ABI): numba's JIT serves every call
    _aot = None
    # no file: the install's build failed or was skipped (the import's own words blame "a circular import")
    _AOT_MISSING = str(error) if any(pathlib.Path(__file__).parent.glob("_aot*.so")) else "not built at install"
else:
    _AOT_MISSING = ""

_DTYPES = {code: np.dtype(t) for code, t in
           (("u1", np.uint8), ("i4", np.int32), ("i8", np.int64), ("u8", np.uint64), ("f8", np.float64), ("b1", np.bool_))}
_INTEGERS = frozenset({int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64})
_SCALARS = {"i8": _INTEGERS, "f8": frozenset({float, np.float32, np.float64}) | _INTEGERS, "b1": frozenset({bool, np.bool_})}


def signature_check(codes: tuple[str, ...], trusted: frozenset = frozenset()):
    """A predicate telling whether arguments fit a signature of :mod:`.exports`, generated as
    one boolean expression (as ``dataclasses`` generates its methods): a call of the MCID step
    per ``learn_one`` example checks 22 arguments, and a loop of per-argument checks would cost
    more than the step itself. Dtypes are compared with
    ``==``: the arrays compiled code returns carry dtype objects equal to, not the same as,
    NumPy's builtin ones. An argument of another type (a NumPy scalar subclass, say) only
    sends the call to the JIT. Arguments at the positions in ``trusted`` are not looked at
    (see :meth:`KernelModule.trusting`).

    >>> check = signature_check(("i8[::1]", "f8"))
    >>> check(np.zeros(3, np.int64), 1.5), check(np.zeros(6, np.int64)[::2], 1.5), check(np.zeros(3, np.int64), "x")
    (True, False, False)
    """
    names = [f"a{i}" for i in range(len(codes))]
    tests, scope = [], {"_ndarray": np.ndarray}
    for i, (name, code) in enumerate(zip(names, codes)):
        if i in trusted:
            continue
        if code in _SCALARS:
            scope[f"_types{i}"] = _SCALARS[code]
            tests.append(f"type({name}) in _types{i}")
            continue
        scope[f"_dtype{i}"] = _DTYPES[code[:2]]
        ndim = {"[::1]": 1, "[:, ::1]": 2}[code[2:].rstrip("r")]
        layout = f"{name}.flags.c_contiguous" if code.endswith("r") else f"(_f := {name}.flags).c_contiguous and _f.writeable"
        tests.append(f"type({name}) is _ndarray and {name}.dtype == _dtype{i} and {name}.ndim == {ndim} and {layout}")
    source = f"def check({', '.join(names)}):\n    return (" + "\n            and ".join(tests or ["True"]) + ")\n"
    exec(source, scope)  # noqa: S102 - the source is built above from the fixed type codes only
    return scope["check"]


def argument_check(code: str):
    """A predicate telling whether one argument fits a type code of :mod:`.exports`.

    >>> argument_check("i8[::1]")(np.zeros(3, np.int64)), argument_check("i8[::1]")(np.zeros(6, np.int64)[::2])
    (True, False)
    """
    return signature_check((code,))


def _dispatcher(jit_function, variants: list):
    """A function calling the first compiled variant whose check passes, else the JIT
    function (``jit_function()`` imports it on first need)."""

    def call(*args, **kwargs):
        if not kwargs:
            for function, n_args, check in variants:
                if len(args) == n_args and check(*args):
                    return function(*args)
        return jit_function()(*args, **kwargs)

    return call


class KernelCompilationWarning(RuntimeWarning):
    """The ahead-of-time kernels are missing: numba compiles each kernel at its first use."""


_announced: list[bool] = []


def announce_missing_build() -> None:
    """Say once per process, as a :class:`KernelCompilationWarning`, that the kernels will be
    compiled at first use and why: a failed build at install is otherwise silent (its lines show
    only under ``pip -v``) and costs seconds at every first use."""
    if _announced:
        return
    _announced.append(True)
    import warnings

    warnings.warn(f"streamlearn: no ahead-of-time kernels ({_AOT_MISSING}); numba compiles each kernel at its first "
                  "use (a learner's first: ~15 s, cached after). Reinstall with a C compiler present (pip install -v shows the "
                  "build) or set STREAMLEARN_JIT=1 to choose the JIT", KernelCompilationWarning, stacklevel=3)


class KernelModule:
    """The kernels of ``streamlearn/kernels/<name>.py`` as attributes (see the module
    docstring); each is resolved on first access."""

    def __init__(self, name: str):
        self._name = name

    def _jit(self, attribute: str):
        if _aot is None and not os.environ.get("STREAMLEARN_JIT"):
            announce_missing_build()
        return getattr(importlib.import_module(f"{__name__}.{self._name}"), attribute)

    def trusting(self, attribute: str, trusted: frozenset):
        """The kernel with the dispatcher's argument check kept for every argument but those at
        the positions in ``trusted``: arrays a :class:`~streamlearn.weights.ScaledWeights` makes
        itself (float64, C-contiguous, writable by construction), which a call per ``learn_one``
        example would otherwise check at a cost above the step's. A wrong type at a trusted
        position is undefined behaviour, not a fallback to the JIT."""
        signatures = EXPORTS.get(self._name, {}).get(attribute)
        if _aot is None or not signatures:
            return lambda *args, **kwargs: getattr(self, attribute)(*args, **kwargs)  # resolved at the first call
        variants = [(getattr(_aot, symbol(self._name, attribute, i)), len(signature), signature_check(signature, trusted))
                    for i, signature in enumerate(signatures)]
        return _dispatcher(lambda: self._jit(attribute), variants)

    def __getattr__(self, attribute: str):
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        signatures = EXPORTS.get(self._name, {}).get(attribute)
        if _aot is None or not signatures:
            value = self._jit(attribute)
        else:
            variants = [(getattr(_aot, symbol(self._name, attribute, i)), len(signature), signature_check(signature))
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


def aot_function(name: str):
    """The ahead-of-time build's function of that symbol (``exports.symbol``); the build must be loaded."""
    if _aot is None:
        raise RuntimeError(f"no ahead-of-time build: {_AOT_MISSING}")
    return getattr(_aot, name)


def small_records_road():
    """The C extension of the MCID learners' one-example road (``small_records.c``, see
    :mod:`streamlearn.mcid.small_records`), or ``None`` when it was not built."""
    try:
        from . import _small_records
    except ImportError:
        return None
    return _small_records


def backend() -> str:
    """``"aot"`` when the ahead-of-time kernels are loaded, ``"jit"`` otherwise."""
    return "jit" if _aot is None else "aot"


def backend_note() -> str:
    """One line on how the kernels run, for ``streamlearn --version`` and bug reports."""
    road = "; small records: C road" if small_records_road() is not None else "; small records: no C road (not built)"
    if _aot is not None:
        return "kernels: ahead-of-time build (numba JIT for other argument types)" + road
    return f"kernels: numba JIT (no ahead-of-time build: {_AOT_MISSING})" + road
