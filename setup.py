"""Builds streamlearn's ahead-of-time kernels and its one C extension (the MCID learners' road for
small records, streamlearn/kernels/small_records.c) at install; the rest of the package metadata is
in pyproject.toml. See streamlearn/kernels/__init__.py for what the build is for.

If the build fails (no C compiler, a numba without pycc), the package installs without it
and streamlearn JIT-compiles every kernel with numba instead, and small records take the general
road: slower, same results. Set STREAMLEARN_REQUIRE_AOT=1 to make such a failure stop the install.
The failure is said in one warning line: on stderr (pip shows a build's output only with -v or on
an error) and on the terminal pip runs in, when it has one (/dev/tty, which pip does not capture),
and again at first use (streamlearn.kernels.KernelCompilationWarning).

An editable (or in-place) build also byte-compiles the packages' sources, as pip does for what
it installs: Python would otherwise compile them at every start where it may not write
bytecode (PYTHONDONTWRITEBYTECODE, read-only trees), which cost the streamlearn command
~37 ms of its ~0.15 s start-up here. A cache that an edit makes stale is ignored by Python.
"""

import compileall
import os
import pathlib
import sys
import types

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = pathlib.Path(__file__).resolve().parent


def _kernel_builder():
    """``streamlearn.kernels._build.build``, imported without running ``streamlearn/__init__.py``
    (it needs river, which the isolated build environment does not have)."""
    sys.path.insert(0, str(HERE))
    if "streamlearn" not in sys.modules:
        package = types.ModuleType("streamlearn")
        package.__path__ = [str(HERE / "streamlearn")]
        sys.modules["streamlearn"] = package
    from streamlearn.kernels._build import build

    return build


#: what a failed build costs, measured by bench/first_use_bench.py (bench/results/first-use.md)
FIRST_USE_COST = "a learner's first use JIT-compiles its kernels (~15 s once, cached after)"


def one_line(error: Exception) -> str:
    """An error's type and the start of its first line (a compiler's command line runs long)."""
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text[:120]}{'...' if len(text) > 120 else ''}"


def warn_loudly(message: str) -> None:
    """One warning line on stderr and on the controlling terminal, which pip does not capture."""
    line = f"WARNING: streamlearn: {message}"
    print(line, file=sys.stderr)
    try:
        with open("/dev/tty", "w") as terminal:
            terminal.write(line + "\n")
    except OSError:  # no terminal (CI, a service): stderr, seen with pip -v, is all there is
        pass


class BuildKernels(build_ext):
    def build_extension(self, ext):
        if ext.name == SMALL_RECORDS.name:
            return self._build_optional(ext)
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            built = pathlib.Path(_kernel_builder()(str(target.parent), target.name.split(".")[0]))
        except Exception as error:  # noqa: BLE001 - any failure means: install without it
            if os.environ.get("STREAMLEARN_REQUIRE_AOT"):
                raise
            warn_loudly(f"ahead-of-time kernels not built ({one_line(error)}); "
                        f"{FIRST_USE_COST}. A C compiler at install avoids it")
            return
        if built != target:
            built.replace(target)
        if self.inplace or getattr(self, "editable_mode", False):  # the sources are what Python imports
            for package in ("streamlearn", "connectors"):
                compileall.compile_dir(str(HERE / package), quiet=1)

    def _build_optional(self, ext):
        """A C extension streamlearn can run without (see its source): a failure is a warning, or an
        error with STREAMLEARN_REQUIRE_AOT=1."""
        import numpy

        ext.include_dirs.append(numpy.get_include())
        try:
            super().build_extension(ext)
        except Exception as error:  # noqa: BLE001 - any failure means: install without it
            if os.environ.get("STREAMLEARN_REQUIRE_AOT"):
                raise
            warn_loudly(f"{ext.name} not built ({one_line(error)}); "
                        "single records take the general road (slower, same results)")


#: the MCID learners' one-example road in C (streamlearn/kernels/small_records.c); -ffp-contract=off keeps
#: every multiply and add separate, as the numba kernels it repeats bit for bit
SMALL_RECORDS = Extension("streamlearn.kernels._small_records", sources=["streamlearn/kernels/small_records.c"],
                          extra_compile_args=["-O2", "-ffp-contract=off"])

#: one installed name: the repository's top-level connectors/ folder is the package streamlearn.connectors
PACKAGES = find_packages(include=["streamlearn", "streamlearn.*"]) + ["streamlearn.connectors"]

setup(
    packages=PACKAGES,
    package_dir={"streamlearn.connectors": "connectors"},
    ext_modules=[Extension("streamlearn.kernels._aot", sources=[]), SMALL_RECORDS],
    cmdclass={"build_ext": BuildKernels},
)
