"""A yardstick of this machine's speed for ``make bench``, in code that must not change: the
bench's replay figures move with the machine as much as with the code (side by side on
2026-11-29, the engine of eleven commits from 11-26 to 11-29 ran within 10 % of each other, while
the benches of those days had measured it up to 1.5 x apart). The bench prints this loop's
time beside its replay lines, so figures of two days can be read against the machine's own
change. Edit nothing here: a changed loop measures something else.

The loop is a binary min-heap of 64 K int64 keys (the replay engine's event heap is one),
its root replaced by a key from a fixed LCG and sifted down, ``n`` times: scalar, branchy,
cache-resident work like the engine's.
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit


@njit(nrt=True)
def heap_loop(n, size):
    """``n`` root replacements in a heap of ``size`` keys; a checksum of the roots, so the
    work cannot be left out."""
    heap = np.empty(size, np.int64)
    for i in range(size):  # ascending: a heap already
        heap[i] = i * 1000
    x = np.int64(12345)
    total = np.int64(0)
    for _ in range(n):
        top = heap[0]
        total += top
        x = (x * np.int64(6364136223846793005) + np.int64(1442695040888963407)) \
            & np.int64(0x7FFFFFFFFFFFFFFF)
        key = top + (x >> 40)
        i = 0
        while True:
            c = 2 * i + 1
            if c >= size:
                break
            if c + 1 < size and heap[c + 1] < heap[c]:
                c += 1
            if heap[c] >= key:
                break
            heap[i] = heap[c]
            i = c
        heap[i] = key
    return total
