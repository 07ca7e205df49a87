"""The one house @njit decorator: every kernel in blocklab is compiled with these options.

- cache=True: compiled code is kept on disk (NUMBA_CACHE_DIR or __pycache__), so CI and every
  later run skip the compile, which costs more than most test inputs take to process.
- nogil=True: kernels release the GIL, so ingest can decompress/write in other threads.
- error_model="numpy": division by zero gives inf/nan instead of a Python-style check on every
  division in hot loops; kernels validate their inputs explicitly instead.
- boundscheck stays off (the default); the tests run the kernels against plain-Python references.
"""

from __future__ import annotations

import numba

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")


def njit(*args, **kwargs):
    """``numba.njit`` with the house options; usable as ``@njit`` or ``@njit(inline="always")``."""
    opts = dict(_OPTIONS)
    opts.update(kwargs)
    if args and callable(args[0]):
        return numba.njit(**opts)(args[0])
    return numba.njit(*args, **opts)
