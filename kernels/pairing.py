"""Pair block-layer events (queue, merge, getrq, insert, issue, requeue, split, remap, complete)
into one row per request, the way btt follows an I/O from Q to C.

Events arrive as rows of an int64 matrix in time order (columns EV_*). The state (requests in
flight) persists across calls, so a trace of any length streams through in bounded memory:
a fixed pool of entries plus an open-addressing hash table that indexes them by

- (KIND_BIO, dev, sector): a bio queued (Q) or announced by a remap (A), not yet a request;
- (KIND_START, dev, sector) and (KIND_END, dev, end sector): a request (after G, I or D);
  the end key finds the request a back merge (M) extends, the start key the request a front
  merge (F), an issue (D) or a completion (C) refers to.

Duplicate keys (two flushes in flight at sector 0) are found first-in first-out: linear probing
puts a newer twin later on the probe run, and backward-shift deletion keeps that order.

A request becomes an output row when it completes; a completion with no earlier event becomes a
row flagged PARTIAL (the request began before the trace). ``pair_sweep`` evicts requests idle for
longer than a limit (events lost, or trace ended) as INCOMPLETE rows and reports the earliest
arrival still in flight, so the caller can release completed rows in arrival order.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

# Event matrix columns.
EV_TIME, EV_DEV, EV_ACT, EV_OP, EV_FLAGS, EV_SECTOR, EV_BYTES, EV_PID, EV_ERR, EV_AUX = range(10)
EV_NCOLS = 10

# Actions: the numbers of the kernel's __BLK_TA_* codes.
A_QUEUE, A_BACKMERGE, A_FRONTMERGE, A_GETRQ, A_SLEEPRQ, A_REQUEUE = 1, 2, 3, 4, 5, 6
A_ISSUE, A_COMPLETE, A_PLUG, A_UNPLUG_IO, A_UNPLUG_TIMER, A_INSERT = 7, 8, 9, 10, 11, 12
A_SPLIT, A_BOUNCE, A_REMAP, A_ABORT = 13, 14, 15, 16

# Output row columns.
(
    R_TIME,
    R_DEV,
    R_SECTOR,
    R_BYTES,
    R_OP,
    R_FLAGS,
    R_GETRQ,
    R_INSERT,
    R_ISSUE,
    R_COMPLETE,
    R_LATENCY,
    R_MERGES,
    R_PID,
    R_ERR,
    R_SEQ,
) = range(15)
R_NCOLS = 15

# Entry fields.
(
    F_STAGE,
    F_DEV,
    F_START,
    F_END,
    F_START0,
    F_BYTES0,
    F_OP,
    F_FLAGS,
    F_Q,
    F_G,
    F_I,
    F_D,
    F_PID,
    F_MERGES,
    F_LAST,
    F_SEQ,
) = range(16)
F_NFIELDS = 16

# Entry stages.
S_FREE, S_REMAP, S_BIO, S_REQ = 0, 1, 2, 3
KIND_BIO, KIND_START, KIND_END = 1, 2, 3

# State scalars.
ST_FREE_TOP, ST_SEQ, ST_LIVE, ST_USED_SLOTS, ST_NOW = range(5)
ST_NFIELDS = 8

# Flag bits (values of traces.schema.FLAG_*; kernels do not import the schema module).
FL_REMAPPED = 1 << 6
FL_REQUEUED = 1 << 7
FL_SPLIT = 1 << 8
FL_PARTIAL = 1 << 9
FL_INCOMPLETE = 1 << 10

OP_FLUSH = 3
FLUSH_KEY = 1 << 33

# Status codes.
OK = 0
FULL = 1

NULL = -1


def new_state(capacity: int = 1 << 16):
    """Allocate the pairing state for ``capacity`` requests in flight."""
    ent = np.zeros((capacity, F_NFIELDS), dtype=np.int64)
    slots = 4 * capacity
    table = np.full((slots, 3), 0, dtype=np.int64)
    table[:, 2] = -1  # -1 empty, -2 tombstone, else entry index
    free = np.arange(capacity - 1, -1, -1, dtype=np.int64)
    st = np.zeros(ST_NFIELDS, dtype=np.int64)
    st[ST_FREE_TOP] = capacity
    return ent, table, free, st


@njit(inline="always")
def _hash(k1, k2, mask):
    h = (k1 * -7046029254386353131) ^ (k2 * -4417276706812531889)  # 64-bit golden-ratio mixers
    h ^= h >> 29
    return h & mask


@njit(inline="always")
def _find(table, kind, dev, sector):
    mask = table.shape[0] - 1
    k1 = (kind << 40) | dev
    i = _hash(k1, sector, mask)
    while True:
        v = table[i, 2]
        if v == -1:
            return -1, -1
        if v >= 0 and table[i, 0] == k1 and table[i, 1] == sector:
            return i, v
        i = (i + 1) & mask


@njit(inline="always")
def _insert(table, st, kind, dev, sector, entry):
    mask = table.shape[0] - 1
    k1 = (kind << 40) | dev
    i = _hash(k1, sector, mask)
    while table[i, 2] != -1:
        i = (i + 1) & mask
    table[i, 0] = k1
    table[i, 1] = sector
    table[i, 2] = entry
    st[ST_USED_SLOTS] += 1


@njit(inline="always")
def _remove(table, st, kind, dev, sector, entry):
    """Delete the slot of ``entry`` under this key (the entry's own slot, not a twin's).

    Backward-shift deletion: the keys after it on the probe run move back, so no tombstones
    build up and the relative order of duplicate keys (first in, first found) is kept.
    """
    mask = table.shape[0] - 1
    k1 = (kind << 40) | dev
    i = _hash(k1, sector, mask)
    while True:
        v = table[i, 2]
        if v == -1:
            return
        if v == entry and table[i, 0] == k1 and table[i, 1] == sector:
            break
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        if table[j, 2] == -1:
            break
        home = _hash(table[j, 0], table[j, 1], mask)
        # the key at j may move to i only if its home is not cyclically within (i, j]
        if i <= j:
            stays = i < home <= j
        else:
            stays = home > i or home <= j
        if stays:
            continue
        table[i, 0] = table[j, 0]
        table[i, 1] = table[j, 1]
        table[i, 2] = table[j, 2]
        i = j
    table[i, 2] = -1
    st[ST_USED_SLOTS] -= 1


@njit
def _rebuild(table, ent, st):
    """Rehash every live entry (after the pool grew); twins keep their order by seq."""
    table[:, 2] = -1
    st[ST_USED_SLOTS] = 0
    n = ent.shape[0]
    order = np.argsort(ent[:, F_SEQ])
    for j in range(n):
        e = order[j]
        stage = ent[e, F_STAGE]
        if stage == S_FREE:
            continue
        dev = ent[e, F_DEV]
        if stage == S_REQ:
            _insert(table, st, KIND_START, dev, ent[e, F_START], e)
            _insert(table, st, KIND_END, dev, ent[e, F_END], e)
        else:
            _insert(table, st, KIND_BIO, dev, ent[e, F_START], e)


@njit(inline="always")
def _alloc(ent, free, st, table):
    top = st[ST_FREE_TOP]
    if top == 0:
        return -1
    top -= 1
    st[ST_FREE_TOP] = top
    e = free[top]
    ent[e, :] = NULL
    ent[e, F_FLAGS] = 0
    ent[e, F_MERGES] = 0
    st[ST_SEQ] += 1
    ent[e, F_SEQ] = st[ST_SEQ]
    st[ST_LIVE] += 1
    return e


@njit(inline="always")
def _release(ent, free, st, table, e):
    dev = ent[e, F_DEV]
    if ent[e, F_STAGE] == S_REQ:
        _remove(table, st, KIND_START, dev, ent[e, F_START], e)
        _remove(table, st, KIND_END, dev, ent[e, F_END], e)
    else:
        _remove(table, st, KIND_BIO, dev, ent[e, F_START], e)
    ent[e, F_STAGE] = S_FREE
    free[st[ST_FREE_TOP]] = e
    st[ST_FREE_TOP] += 1
    st[ST_LIVE] -= 1


@njit(inline="always")
def _promote(ent, table, st, e):
    """A bio becomes a request: index it by start and end instead of as a bio."""
    dev = ent[e, F_DEV]
    _remove(table, st, KIND_BIO, dev, ent[e, F_START], e)
    ent[e, F_STAGE] = S_REQ
    _insert(table, st, KIND_START, dev, ent[e, F_START], e)
    _insert(table, st, KIND_END, dev, ent[e, F_END], e)


@njit(inline="always")
def _new_entry(ent, free, st, table, ev, stage, t, dev, sector):
    e = _alloc(ent, free, st, table)
    if e < 0:
        return -1
    nsec = (ev[EV_BYTES] + 511) >> 9
    ent[e, F_STAGE] = stage
    ent[e, F_DEV] = dev
    ent[e, F_START] = sector
    ent[e, F_END] = sector + nsec
    ent[e, F_START0] = sector
    ent[e, F_BYTES0] = ev[EV_BYTES]
    ent[e, F_OP] = ev[EV_OP]
    ent[e, F_FLAGS] = ev[EV_FLAGS]
    ent[e, F_PID] = ev[EV_PID]
    ent[e, F_LAST] = t
    if stage == S_REQ:
        _insert(table, st, KIND_START, dev, sector, e)
        _insert(table, st, KIND_END, dev, sector + nsec, e)
    else:
        _insert(table, st, KIND_BIO, dev, sector, e)
    return e


@njit(inline="always")
def _emit(out, n, ent, e, t_complete, err, extra_flags):
    out[n, R_TIME] = ent[e, F_Q]
    out[n, R_DEV] = ent[e, F_DEV] & 0xFFFFFFFF  # drop the flush key bit
    out[n, R_SECTOR] = ent[e, F_START0]
    out[n, R_BYTES] = ent[e, F_BYTES0]
    out[n, R_OP] = ent[e, F_OP]
    out[n, R_FLAGS] = ent[e, F_FLAGS] | extra_flags
    out[n, R_GETRQ] = ent[e, F_G]
    out[n, R_INSERT] = ent[e, F_I]
    out[n, R_ISSUE] = ent[e, F_D]
    out[n, R_COMPLETE] = t_complete
    out[n, R_LATENCY] = t_complete - ent[e, F_Q] if t_complete != NULL else NULL
    out[n, R_MERGES] = ent[e, F_MERGES]
    out[n, R_PID] = ent[e, F_PID]
    out[n, R_ERR] = err
    out[n, R_SEQ] = ent[e, F_SEQ]


@njit(inline="always")
def _request_at(ent, free, st, table, ev, t, expect_queue, dev, sector):
    """The request starting at the event's sector: found, promoted from a bio, or created."""
    _s, e = _find(table, KIND_START, dev, sector)
    if e >= 0:
        return e
    _s, e = _find(table, KIND_BIO, dev, sector)
    if e >= 0:
        if ent[e, F_STAGE] == S_REMAP:  # remapped, then issued without a traced Q
            ent[e, F_Q] = t
        _promote(ent, table, st, e)
        return e
    e = _new_entry(ent, free, st, table, ev, S_REQ, t, dev, sector)
    if e >= 0:
        ent[e, F_Q] = t
        if expect_queue:
            ent[e, F_FLAGS] |= FL_PARTIAL
    return e


@njit
def pair_events(events, n_events, ent, table, free, st, out, expect_queue):
    """Feed ``events[:n_events]`` through the pairing state; completed requests go to ``out``.

    Returns (rows written, events consumed, status). Status FULL means the entry pool is
    exhausted: the caller sweeps (evicts) and calls again from the returned event index.
    ``expect_queue``: the source traces queue events, so a request first seen later is PARTIAL.
    """
    n = 0
    for k in range(n_events):
        if st[ST_FREE_TOP] < 2:  # every event needs at most two free entries (a split)
            return n, k, FULL
        ev = events[k]
        t = ev[EV_TIME]
        act = ev[EV_ACT]
        dev = ev[EV_DEV]
        sector = ev[EV_SECTOR]
        if ev[EV_OP] == OP_FLUSH:
            # flushes carry no position (a completion may even say sector -1): key them apart
            dev |= FLUSH_KEY
            sector = 0
        st[ST_NOW] = t
        if act == A_QUEUE:
            _s, e = _find(table, KIND_BIO, dev, sector)
            if e >= 0 and ent[e, F_STAGE] == S_REMAP:
                ent[e, F_STAGE] = S_BIO
                ent[e, F_Q] = t
                ent[e, F_BYTES0] = ev[EV_BYTES]
                ent[e, F_END] = sector + ((ev[EV_BYTES] + 511) >> 9)
                ent[e, F_OP] = ev[EV_OP]
                ent[e, F_FLAGS] |= ev[EV_FLAGS]
                ent[e, F_PID] = ev[EV_PID]
                ent[e, F_LAST] = t
            elif e >= 0 and (ent[e, F_FLAGS] & FL_SPLIT) != 0 and ent[e, F_Q] <= t:
                ent[e, F_LAST] = t  # the remainder of a split, queued again
            else:
                e = _new_entry(ent, free, st, table, ev, S_BIO, t, dev, sector)
                if e < 0:
                    return n, k, FULL
                ent[e, F_Q] = t
        elif act == A_REMAP:
            e = _new_entry(ent, free, st, table, ev, S_REMAP, t, dev, sector)
            if e < 0:
                return n, k, FULL
            ent[e, F_FLAGS] |= FL_REMAPPED
            ent[e, F_Q] = t
        elif act == A_BACKMERGE or act == A_FRONTMERGE:
            if act == A_BACKMERGE:
                _s, r = _find(table, KIND_END, dev, sector)
            else:
                _s, r = _find(table, KIND_START, dev, sector + ((ev[EV_BYTES] + 511) >> 9))
            _s, b = _find(table, KIND_BIO, dev, sector)
            q = t
            if b >= 0:
                q = ent[b, F_Q]
                _release(ent, free, st, table, b)
            if r >= 0:
                nsec = (ev[EV_BYTES] + 511) >> 9
                if act == A_BACKMERGE:
                    _remove(table, st, KIND_END, dev, ent[r, F_END], r)
                    ent[r, F_END] = sector + nsec
                    _insert(table, st, KIND_END, dev, ent[r, F_END], r)
                else:
                    _remove(table, st, KIND_START, dev, ent[r, F_START], r)
                    ent[r, F_START] = sector
                    ent[r, F_START0] = sector
                    _insert(table, st, KIND_START, dev, sector, r)
                ent[r, F_BYTES0] += ev[EV_BYTES]
                ent[r, F_MERGES] += 1
                if q < ent[r, F_Q]:
                    ent[r, F_Q] = q
                ent[r, F_LAST] = t
        elif act == A_SPLIT:
            _s, e = _find(table, KIND_BIO, dev, sector)
            if e < 0:
                _s, e = _find(table, KIND_START, dev, sector)
            new_sector = ev[EV_AUX]
            if e >= 0 and sector < new_sector < ent[e, F_END]:
                old_end = ent[e, F_END]
                stage = ent[e, F_STAGE]
                if stage == S_REQ:
                    _remove(table, st, KIND_END, dev, old_end, e)
                    ent[e, F_END] = new_sector
                    _insert(table, st, KIND_END, dev, new_sector, e)
                else:
                    ent[e, F_END] = new_sector
                ent[e, F_BYTES0] = (new_sector - sector) << 9
                ent[e, F_FLAGS] |= FL_SPLIT
                r = _alloc(ent, free, st, table)
                if r < 0:
                    return n, k, FULL
                for f in range(F_NFIELDS):
                    if f != F_SEQ:
                        ent[r, f] = ent[e, f]
                ent[r, F_STAGE] = S_BIO
                ent[r, F_START] = new_sector
                ent[r, F_START0] = new_sector
                ent[r, F_END] = old_end
                ent[r, F_BYTES0] = (old_end - new_sector) << 9
                ent[r, F_G] = NULL
                ent[r, F_I] = NULL
                ent[r, F_D] = NULL
                ent[r, F_MERGES] = 0
                ent[r, F_LAST] = t
                _insert(table, st, KIND_BIO, dev, new_sector, r)
        elif act == A_GETRQ or act == A_INSERT or act == A_ISSUE:
            e = _request_at(ent, free, st, table, ev, t, expect_queue, dev, sector)
            if e < 0:
                return n, k, FULL
            ent[e, F_LAST] = t
            if act == A_GETRQ:
                if ent[e, F_G] == NULL:
                    ent[e, F_G] = t
            elif act == A_INSERT:
                if ent[e, F_I] == NULL:
                    ent[e, F_I] = t
            else:
                ent[e, F_D] = t  # after a requeue, the last issue counts (as btt's D2C)
                if ev[EV_BYTES] > 0 and ev[EV_BYTES] != ent[e, F_BYTES0]:
                    # the driver saw the request as a whole (merges we did not see): trust it
                    nsec = (ev[EV_BYTES] + 511) >> 9
                    _remove(table, st, KIND_END, dev, ent[e, F_END], e)
                    ent[e, F_END] = ent[e, F_START] + nsec
                    _insert(table, st, KIND_END, dev, ent[e, F_END], e)
                    ent[e, F_BYTES0] = ev[EV_BYTES]
            if ent[e, F_PID] == NULL and ev[EV_PID] > 0:
                ent[e, F_PID] = ev[EV_PID]
            ent[e, F_FLAGS] |= ev[EV_FLAGS]
        elif act == A_REQUEUE:
            _s, e = _find(table, KIND_START, dev, sector)
            if e >= 0:
                ent[e, F_FLAGS] |= FL_REQUEUED
                ent[e, F_LAST] = t
        elif act == A_COMPLETE:
            _s, e = _find(table, KIND_START, dev, sector)
            if e < 0:
                _s, e = _find(table, KIND_BIO, dev, sector)
                if e >= 0:
                    _promote(ent, table, st, e)
            if e < 0:
                # began before the trace: a row with what we know
                e = _new_entry(ent, free, st, table, ev, S_REQ, t, dev, sector)
                if e < 0:
                    return n, k, FULL
                ent[e, F_Q] = t
                ent[e, F_FLAGS] |= FL_PARTIAL
                _emit(out, n, ent, e, t, ev[EV_ERR], 0)
                n += 1
                _release(ent, free, st, table, e)
                continue
            done = ev[EV_BYTES]
            remaining = (ent[e, F_END] - ent[e, F_START]) << 9
            if done > 0 and done < remaining and ent[e, F_OP] != OP_FLUSH:
                # partial completion: the rest of the request stays in flight
                nsec = (done + 511) >> 9
                _remove(table, st, KIND_START, dev, ent[e, F_START], e)
                ent[e, F_START] += nsec
                _insert(table, st, KIND_START, dev, ent[e, F_START], e)
                ent[e, F_LAST] = t
                continue
            _emit(out, n, ent, e, t, ev[EV_ERR], 0)
            n += 1
            _release(ent, free, st, table, e)
        # other actions (plug, unplug, sleeprq, bounce, abort) do not change a request
    return n, n_events, OK


@njit
def pair_sweep(ent, table, free, st, out, stale_before, flush_all):
    """Evict entries idle since before ``stale_before`` (all of them if ``flush_all``).

    Evicted requests and queued bios become INCOMPLETE rows; remap markers vanish.
    Returns (rows written, earliest arrival still in flight or -1, markers dropped).
    """
    n = 0
    dropped = 0
    earliest = -1
    for e in range(ent.shape[0]):
        stage = ent[e, F_STAGE]
        if stage == S_FREE:
            continue
        if flush_all or ent[e, F_LAST] < stale_before:
            if stage == S_REMAP:
                dropped += 1
            else:
                _emit(out, n, ent, e, NULL, NULL, FL_INCOMPLETE)
                n += 1
            _release(ent, free, st, table, e)
        elif stage != S_REMAP:
            q = ent[e, F_Q]
            if earliest == -1 or q < earliest:
                earliest = q
    return n, earliest, dropped
