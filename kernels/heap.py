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


@njit(forceinline=True, nrt=False)
def less(h, i, j):
    if h[i, 0] != h[j, 0]:
        return h[i, 0] < h[j, 0]
    if h[i, 1] != h[j, 1]:
        return h[i, 1] < h[j, 1]
    return h[i, 2] < h[j, 2]


@njit(forceinline=True, nrt=False)
def _before(t, kind, seq, h, j):
    """Whether the entry (t, kind, seq) comes before row ``j``."""
    if t != h[j, 0]:
        return t < h[j, 0]
    if kind != h[j, 1]:
        return kind < h[j, 1]
    return seq < h[j, 2]


@njit(forceinline=True, nrt=False)
def _after(t, kind, seq, h, j):
    """Whether the entry (t, kind, seq) comes after row ``j``."""
    if t != h[j, 0]:
        return t > h[j, 0]
    if kind != h[j, 1]:
        return kind > h[j, 1]
    return seq > h[j, 2]


@njit(forceinline=True, nrt=False)
def _move(h, dst, src):
    h[dst, 0] = h[src, 0]
    h[dst, 1] = h[src, 1]
    h[dst, 2] = h[src, 2]
    h[dst, 3] = h[src, 3]


@njit(forceinline=True, nrt=False)
def push(h, size, t, kind, seq, ident):
    """Insert an event; returns the new size. The caller keeps room (it raises when full).
    The new entry's place is found first (its parents move down into the hole) and it is
    written once; the order of the entries is total, so where equal-looking rows sit cannot
    change what pops."""
    if size >= h.shape[0]:
        raise IndexError("replay: event heap full (the caller sized it too small)")
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(t, kind, seq, h, parent):
            break
        _move(h, i, parent)
        i = parent
    h[i, 0] = t
    h[i, 1] = kind
    h[i, 2] = seq
    h[i, 3] = ident
    return size + 1


@njit(forceinline=True, nrt=False)
def pop(h, size):
    """Remove the top event (read it from row 0 first); returns the new size. The last entry
    sinks from the top through a hole (children move up) and is written once."""
    size -= 1
    t = h[size, 0]
    kind = h[size, 1]
    seq = h[size, 2]
    ident = h[size, 3]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and less(h, c + 1, c):
            c += 1
        if not _after(t, kind, seq, h, c):
            break
        _move(h, i, c)
        i = c
    h[i, 0] = t
    h[i, 1] = kind
    h[i, 2] = seq
    h[i, 3] = ident
    return size
