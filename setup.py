"""Builds streamlearn's ahead-of-time kernels at install; the rest of the package metadata is
in pyproject.toml. See streamlearn/kernels/__init__.py for what the build is for.

If the build fails (no C compiler, a numba without pycc), the package installs without it
and streamlearn JIT-compiles every kernel with numba instead: slower to start, same results.
Set STREAMLEARN_REQUIRE_AOT=1 to make such a failure stop the install.
"""

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


setup(
    ext_modules=[Extension("streamlearn.kernels._aot", sources=[])],
    cmdclass={"build_ext": BuildKernels},
)
