"""The replay engine's event heap: a binary min-heap over four parallel int64 arrays (time,
kind, sequence number, identifier), ordered by (time, kind, sequence).

The kind breaks ties between events at the same nanosecond (lower first) and the sequence
number, which the engine increments for every event it schedules, breaks the rest: the order
is total, so the same inputs always replay the same way (SimPy schedules with an event id for
the same reason).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from blocklab.kernels._jit import njit


class Heap(NamedTuple):
    t: np.ndarray  # event time, ns
    k: np.ndarray  # kind (priority at equal times: lower first)
    s: np.ndarray  # sequence number
    i: np.ndarray  # identifier (what the event is about)


def new_heap(capacity: int) -> Heap:
    return Heap(*(np.zeros(capacity, dtype=np.int64) for _ in range(4)))


def grown(h: Heap, size: int, capacity: int) -> Heap:
    """A copy of the first ``size`` entries in arrays of ``capacity``."""
    out = new_heap(capacity)
    for a, b in zip(out, h, strict=True):
        a[:size] = b[:size]
    return out


@njit(inline="always", nrt=False)
def less(h, i, j):
    if h.t[i] != h.t[j]:
        return h.t[i] < h.t[j]
    if h.k[i] != h.k[j]:
        return h.k[i] < h.k[j]
    return h.s[i] < h.s[j]


@njit(inline="always", nrt=False)
def _swap(h, i, j):
    h.t[i], h.t[j] = h.t[j], h.t[i]
    h.k[i], h.k[j] = h.k[j], h.k[i]
    h.s[i], h.s[j] = h.s[j], h.s[i]
    h.i[i], h.i[j] = h.i[j], h.i[i]


@njit(inline="always", nrt=False)
def push(h, size, t, kind, seq, ident):
    """Insert an event; returns the new size. The caller keeps room (it raises when full)."""
    if size >= h.t.shape[0]:
        raise IndexError("replay: event heap full (the caller sized it too small)")
    i = size
    h.t[i] = t
    h.k[i] = kind
    h.s[i] = seq
    h.i[i] = ident
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
    """Remove the top event (read it from index 0 first); returns the new size."""
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
