"""numba-compiled kernels only: plain arrays in, plain arrays out; no Python objects, no I/O.

Every kernel is compiled with ``cache=True``. numba writes its cache beside the source
when that directory is writable and falls back to a per-user cache directory otherwise
(a read-only install); ``NUMBA_CACHE_DIR`` overrides both.
"""

from . import mcid, rows, scaled

__all__ = ["mcid", "rows", "scaled"]
