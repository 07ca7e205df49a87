"""The one house @njit decorator: every kernel in blocklab is compiled with these options.

- cache=True: compiled code is kept on disk, so CI and every later run skip the compile, which
  costs more than most test inputs take to process. The folder is NUMBA_CACHE_DIR (or
  ~/.cache/blocklab/numba) / a hash of all kernel sources: see ``_cache_dir``.
- nogil=True: kernels release the GIL, so ingest can decompress/write in other threads.
- error_model="numpy": division by zero gives inf/nan instead of a Python-style check on every
  division in hot loops; kernels validate their inputs explicitly instead.
- boundscheck stays off (the default); the tests run the kernels against plain-Python references.

``@njit(nrt=False)`` compiles a kernel without Numba's reference counting. Use it for kernels
that never allocate (they fill arrays the caller allocated, as STYLE asks): with reference
counting on, every call of a helper that takes arrays inside a loop increments and decrements
the arrays' reference counts through out-of-line atomic calls, which the refcount pruning pass
cannot remove across loops. Measured on the pairing kernel: 190 ns per event with it, a few tens
without. A kernel compiled this way must not create arrays (np.empty, argsort, ...).

A kernel that another kernel calls is compiled once per argument types, and Numba types a
constant argument as its own literal type (``Literal[int](0)``), not ``int64``: a call
``_job_ops(W, j, 0, now, ncand)`` and a call ``_job_ops(W, j, 1, now, ncand)`` compiled the
function (and every function it calls) twice more than needed. Our dispatcher types a call's
constants as their plain types, so each kernel compiles once per real signature. Measured on
the replay kernels from an empty cache (``python -m blocklab.tools.warm``): 39 compiles, 18
of them such duplicates (``_job_ops`` four times, the HDD ``service`` and ``_ra_bus`` twice, a
RAID-6 planner six times), 466 s; without them 297 s (same machine, same day).

The same holds for ``inline="always"``: every call site gets its own copy of the callee (and of
everything it inlines), and compile time grows faster than the code. ``kernels/engine/loop.py``'s
event loop therefore calls its heavy helpers from one place each (``_to_drives``, ``_finish``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numba
from numba.core import registry, types


def _cache_dir() -> str:
    """A cache folder named after a hash of every kernel source file.

    Numba keys a cached kernel on its own file only: a kernel that calls (and so compiles in)
    a helper from another module would keep running the helper's old code after that module
    changed. Keying the whole folder on all kernel sources makes any change start afresh.
    """
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(here.rglob("*.py")):
        h.update(f.relative_to(here).as_posix().encode())
        h.update(f.read_bytes())
    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "blocklab", "numba")
    return os.path.join(base, h.hexdigest()[:16])


numba.config.CACHE_DIR = _cache_dir()

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy")


class _Kernel(registry.CPUDispatcher):
    """Numba's CPU dispatcher, but a call from another kernel is typed with the plain types of
    its constant arguments (``int64``, ``bool``), not their literal types: one compile per
    signature, not one per constant (see the module docstring)."""

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(types.unliteral(a) for a in args),
                                         {k: types.unliteral(v) for k, v in kws.items()})


def njit(*args, **kwargs):
    """``numba.njit`` with the house options; usable as ``@njit`` or ``@njit(inline="always")``."""
    opts = dict(_OPTIONS)
    if not kwargs.pop("nrt", True):
        opts["_nrt"] = False
    opts.update(kwargs)

    def make(func):
        disp = numba.njit(**opts)(func)
        disp.__class__ = _Kernel  # (the same object layout: only the typing of calls changes)
        return disp

    if args and callable(args[0]):
        return make(args[0])
    if args:  # explicit signatures: Numba's own dispatcher
        return numba.njit(*args, **opts)
    return make


def cache_folder() -> str:
    """The folder compiled kernels are cached in (keyed on the kernel sources: ``_cache_dir``),
    for the pipeline's warm-up stamp (tools/warm.py); the pipeline does not import Numba."""
    return str(numba.config.CACHE_DIR)
