"""Builds streamlearn's ahead-of-time kernels and its one C extension (the MCID learners' road for
small records, streamlearn/kernels/small_records.c) at install; the rest of the package metadata is
in pyproject.toml. See streamlearn/kernels/__init__.py for what the build is for.

If the build fails (no C compiler, a numba without pycc), the package installs without it
and streamlearn JIT-compiles every kernel with numba instead, and small records take the general
road: slower, same results. Set STREAMLEARN_REQUIRE_AOT=1 to make such a failure stop the install.

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

from setuptools import Extension, setup
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
            print(f"streamlearn: ahead-of-time kernels not built ({type(error).__name__}: {error}); "
                  "kernels will be JIT-compiled by numba", file=sys.stderr)
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
            print(f"streamlearn: {ext.name} not built ({type(error).__name__}: {error}); "
                  "small records take the general road", file=sys.stderr)


#: the MCID learners' one-example road in C (streamlearn/kernels/small_records.c); -ffp-contract=off keeps
#: every multiply and add separate, as the numba kernels it repeats bit for bit
SMALL_RECORDS = Extension("streamlearn.kernels._small_records", sources=["streamlearn/kernels/small_records.c"],
                          extra_compile_args=["-O2", "-ffp-contract=off"])

setup(
    ext_modules=[Extension("streamlearn.kernels._aot", sources=[]), SMALL_RECORDS],
    cmdclass={"build_ext": BuildKernels},
)
