"""Ahead-of-time compilation of the kernels listed in :mod:`.exports` (``setup.py`` runs
:func:`build` when the package is installed; see :mod:`streamlearn.kernels`).

numba's ``pycc`` compiles each signature of each exported function, with every ``@njit``
function it calls, into one extension module that needs NumPy but not numba at run time.
Two settings make the build behave as the JIT does:

* ``target_cpu = "host"``: code for the installing machine's CPU (the JIT compiles for
  the running machine's), so both vectorise alike and give the same bits;
* the GIL is released around each call, as ``@njit(nogil=True)`` does (pycc's own
  flags do not ask for it, and the reader's parser threads would then run one at a time).
"""

from __future__ import annotations

import importlib
import os

from .exports import EXPORTS, symbol


def numba_signature(codes: tuple[str, ...]) -> str:
    """The numba signature text of a tuple of :mod:`.exports` type codes (return type inferred)."""
    return "(" + ", ".join(code.rstrip("r") for code in codes) + ("," if len(codes) == 1 else "") + ")"  # a 1-tuple


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
            python_function = getattr(source, name).py_func
            for variant, codes in enumerate(signatures):
                cc.export(symbol(module, name, variant), numba_signature(codes))(python_function)
    cc.compile()
    return os.path.join(output_dir, cc.output_file)
