"""The replay engine's event heap: a binary min-heap of rows (time, kind, sequence number,
identifier) in one int64 array, ordered by (time, kind, sequence).

The kind breaks ties between events at the same nanosecond (lower first) and the sequence
number, which the engine increments for every event it schedules, breaks the rest: the order
is total, so the same inputs always replay the same way (SimPy schedules with an event id for
the same reason).
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit

# columns of a heap row
HT_TIME, HT_KIND, HT_SEQ, HT_ID = range(4)


def new_heap(capacity: int) -> np.ndarray:
    """An empty heap: one row per entry (time, kind, sequence, identifier)."""
    return np.zeros((capacity, 4), dtype=np.int64)


def grown(h: np.ndarray, size: int, capacity: int) -> np.ndarray:
    """A copy of the first ``size`` entries in a heap of ``capacity``."""
    out = new_heap(capacity)
    out[:size] = h[:size]
    return out


@njit(inline="always", nrt=False)
def less(h, i, j):
    if h[i, 0] != h[j, 0]:
        return h[i, 0] < h[j, 0]
    if h[i, 1] != h[j, 1]:
        return h[i, 1] < h[j, 1]
    return h[i, 2] < h[j, 2]


@njit(inline="always", nrt=False)
def _swap(h, i, j):
    for c in range(4):
        h[i, c], h[j, c] = h[j, c], h[i, c]


@njit(inline="always", nrt=False)
def push(h, size, t, kind, seq, ident):
    """Insert an event; returns the new size. The caller keeps room (it raises when full)."""
    if size >= h.shape[0]:
        raise IndexError("replay: event heap full (the caller sized it too small)")
    i = size
    h[i, 0] = t
    h[i, 1] = kind
    h[i, 2] = seq
    h[i, 3] = ident
    while i > 0:
        parent = (i - 1) >> 1
        if less(h, i, parent):
            _swap(h, i, parent)
            i = parent
        else:
            break
    return size + 1


@njit(inline="always", nrt=False)
def pop(h, size):
    """Remove the top event (read it from row 0 first); returns the new size."""
    size -= 1
    _swap(h, 0, size)
    i = 0
    while True:
        left = 2 * i + 1
        right = left + 1
        m = i
        if left < size and less(h, left, m):
            m = left
        if right < size and less(h, right, m):
            m = right
        if m == i:
            break
        _swap(h, i, m)
        i = m
    return size
