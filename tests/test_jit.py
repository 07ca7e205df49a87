"""The house ``@njit`` (kernels/_jit.py): a kernel called from another kernel with constant
arguments compiles once per plain signature, not once per constant, and computes what
Numba's own dispatcher computes. Compiled here without the disk cache: a kernel loaded from
the cache would not compile the one it calls, and there would be nothing to count."""

from __future__ import annotations

import numba
import numpy as np

from blocklab.kernels._jit import njit


def _scale(x, k, flag):
    return x * k if flag else x - k


def _calls(x):
    # the same callee with four different constants, and once with variables
    return (_mine(x, 0, True) + _mine(x, 1, False) + _mine(x, 2, True) + _mine(x, 3, True)
            + _mine(x, x, x > 0))


def _calls_numba(x):
    return (_theirs(x, 0, True) + _theirs(x, 1, False) + _theirs(x, 2, True)
            + _theirs(x, 3, True) + _theirs(x, x, x > 0))


_mine = njit(cache=False)(_scale)
_caller = njit(cache=False)(_calls)
_theirs = numba.njit(_scale)
_caller_numba = numba.njit(_calls_numba)


def test_constants_compile_once():
    for x in (5, -3):
        want = (_scale(x, 0, True) + _scale(x, 1, False) + _scale(x, 2, True)
                + _scale(x, 3, True) + _scale(x, x, x > 0))  # plain Python
        assert _caller(np.int64(x)) == _caller_numba(np.int64(x)) == want
    # Numba's own dispatcher compiled the callee once per constant (the waste this avoids) ...
    assert len(_theirs.signatures) >= 4
    # ... ours once: every constant typed as the plain int64 / bool it is
    assert [tuple(map(str, s)) for s in _mine.signatures] == [("int64", "int64", "bool")]


def test_inline_and_arrays_unchanged():
    """Inlined kernels and array arguments work as with Numba's dispatcher."""

    @njit(inline="always", cache=False)
    def add(a, i, v):
        a[i] += v

    @njit(cache=False)
    def fill(a):
        for i in range(a.shape[0]):
            add(a, i, 2)
        return a.sum()

    a = np.arange(5, dtype=np.int64)
    assert fill(a) == 20 and a.tolist() == [2, 3, 4, 5, 6]
