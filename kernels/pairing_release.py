"""Release of paired requests (kernels/pairing.py's output rows) in arrival order: which of
the rows held can go, given the earliest arrival still in flight, and in what order, without a
NumPy lexsort (traces/formats/paired.py ``Pairer.sweep``)."""

from __future__ import annotations

from ._jit import njit
from .pairing import R_NCOLS, R_SEQ, R_TIME

#: ``release_keys``'s answers: how the released rows are to be ordered.
ORDER_DONE, ORDER_BY_KEY, ORDER_BY_COLUMNS = 0, 1, 2


@njit(nrt=False)
def release_keys(rows, n, earliest, everything, idx, key, tcol, scol, slots):
    """The rows of ``rows`` (the first ``n`` of a flattened R_* matrix) that can be released,
    arrival before ``earliest`` (all of them with ``everything``: at the trace's end, or with
    nothing in flight), and how to order them by (arrival, sequence number).

    Fills ``idx[:m]`` with their row numbers (in row order) and ``tcol``/``scol`` with their
    arrival times and sequence numbers. Returns (m, how):

    - ORDER_DONE: ``key[:m]`` holds the order (positions in ``idx``). Sequence numbers are
      given as requests are first seen, in time order, so arrival order is mostly sequence
      order: the rows are placed by sequence number in ``slots`` (one pass, when their span
      is at most ``len(slots)``), and that order is kept if its arrival times never step back.
      A merge that takes an earlier bio's queue time, a remap, or a split's second part (its
      first part's arrival, a later number) can break it; then
    - ORDER_BY_KEY: ``key[:m]`` holds ``(time - least time) << b | (sequence - least
      sequence)``, one integer per row whose order is that order (sequence numbers are
      unique: no two keys tie), for one NumPy argsort;
    - ORDER_BY_COLUMNS: the two do not fit in 63 bits together: sort by ``tcol``, ``scol``.

    NumPy's lexsort over the two columns, which this replaces, was a tenth of a blktrace binary
    ingest's main thread (measured on the bench's 100 M records)."""
    m = 0
    for i in range(n):
        o = i * R_NCOLS
        t = rows[o + R_TIME]
        if everything or t < earliest:
            idx[m] = i
            tcol[m] = t
            scol[m] = rows[o + R_SEQ]
            m += 1
    if m == 0:
        return 0, ORDER_DONE
    tmin = tcol[0]
    tmax = tcol[0]
    smin = scol[0]
    smax = scol[0]
    for j in range(m):
        t = tcol[j]
        s = scol[j]
        if t < tmin:
            tmin = t
        if t > tmax:
            tmax = t
        if s < smin:
            smin = s
        if s > smax:
            smax = s
    span = smax - smin + 1
    if span <= slots.shape[0]:
        for k in range(span):
            slots[k] = -1
        for j in range(m):
            slots[scol[j] - smin] = j
        p = 0
        last = tmin
        for k in range(span):
            j = slots[k]
            if j < 0:
                continue
            if tcol[j] < last:
                break
            last = tcol[j]
            key[p] = j
            p += 1
        if p == m:
            return m, ORDER_DONE
    b = 0
    while (1 << b) <= smax - smin:
        b += 1
    # both parts in 63 bits (the key stays non-negative); a 30 s span of times takes 35 bits,
    # leaving 28 for the sequence numbers
    if b > 62 or tmax - tmin >= (1 << (62 - b)):
        return m, ORDER_BY_COLUMNS
    for j in range(m):
        key[j] = ((tcol[j] - tmin) << b) | (scol[j] - smin)
    return m, ORDER_BY_KEY


@njit(nrt=False)
def release_take(rows, n, earliest, everything, idx, order, m, cols):
    """Gather the ``m`` released rows ``idx[order[j]]`` into ``cols``, a flattened R_NCOLS x m
    matrix (a column per row of it, the Arrow columns' layout), then move the rows kept
    (arrival at or after ``earliest``, none with ``everything``) to the front of ``rows`` in
    their order. Returns the rows kept."""
    for j in range(m):
        o = idx[order[j]] * R_NCOLS
        for c in range(R_NCOLS):
            cols[c * m + j] = rows[o + c]
    if everything:
        return 0
    kept = 0
    for i in range(n):
        o = i * R_NCOLS
        if rows[o + R_TIME] >= earliest:
            if kept != i:  # (every released row was gathered above: overwriting it is safe)
                d = kept * R_NCOLS
                for c in range(R_NCOLS):
                    rows[d + c] = rows[o + c]
            kept += 1
    return kept
