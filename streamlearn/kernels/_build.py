"""Ahead-of-time compilation of the kernels listed in :mod:`.exports` (``setup.py`` runs
:func:`build` when the package is installed; see :mod:`streamlearn.kernels`).

numba's ``pycc`` compiles each signature of each exported function, with every ``@njit``
function it calls, into one extension module that needs NumPy but not numba at run time.
Two settings make the build behave as the JIT does:

* ``target_cpu = "host"``: code for the installing machine's CPU (the JIT compiles for
  the running machine's), so both vectorise alike and give the same bits;
* the GIL is released around each call, as ``@njit(nogil=True)`` does (pycc's own
  flags do not ask for it, and the reader's parser threads would then run one at a time);
* each kernel is exported through a wrapper that calls it, so the kernel itself is compiled
  as the JIT compiles it, with its own options: pycc compiles every export with one set of
  flags, which would drop ``fastmath=True`` (and change the sums it lets LLVM reorder), and a
  kernel both exported itself and called by another exported one (the store's
  ``needed_room``) failed numba's type inference of an unrelated export.
"""

from __future__ import annotations

import importlib
import inspect
import os

from .exports import EXPORTS, NAMED_TUPLES, SCALAR_CODES, symbol


def numba_argument_types(codes: tuple[str, ...]) -> tuple:
    """The numba types of a tuple of :mod:`.exports` type codes (the return type is inferred)."""
    from numba.core import types

    numbers = {"u1": types.uint8, "i4": types.int32, "i8": types.int64, "u8": types.uint64, "f4": types.float32,
               "f8": types.float64, "b1": types.boolean}
    out = []
    for code in codes:
        if code in NAMED_TUPLES:
            named_tuple, fields = NAMED_TUPLES[code]
            out.append(types.NamedTuple(numba_argument_types(fields), named_tuple))
        elif code in SCALAR_CODES:
            out.append(numbers[code])
        else:
            out.append(types.Array(numbers[code[:2]], 2 if code[2:].startswith("[:, ") else 1, "C"))
    return tuple(out)


def exported_function(dispatcher):
    """The Python function pycc compiles for a ``@njit`` kernel: a wrapper calling it (see the module docstring)."""
    arguments = ", ".join(inspect.signature(dispatcher.py_func).parameters)
    scope = {"kernel": dispatcher}
    exec(f"def {dispatcher.__name__}({arguments}):\n    return kernel({arguments})\n", scope)  # noqa: S102 - names from the kernel's own signature
    return scope[dispatcher.__name__]


def build(output_dir: str, module_name: str = "_aot") -> str:
    """Compile the exported kernels into ``output_dir``; return the extension's path."""
    import numba.pycc.compiler as pycc_compiler
    from numba.pycc import CC

    class GilReleasingFlags(pycc_compiler.Flags):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.release_gil = True

    pycc_compiler.Flags = GilReleasingFlags
    cc = CC(module_name)
    cc.output_dir = output_dir
    cc.target_cpu = "host"
    cc.verbose = False
    for module, functions in EXPORTS.items():
        source = importlib.import_module(f"{__package__}.{module}")
        for name, signatures in functions.items():
            python_function = exported_function(getattr(source, name))
            for variant, codes in enumerate(signatures):
                cc.export(symbol(module, name, variant), numba_argument_types(codes))(python_function)
    cc.compile()
    return os.path.join(output_dir, cc.output_file)
