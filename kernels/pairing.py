"""Pair block-layer events (queue, merge, getrq, insert, issue, requeue, split, remap, complete)
into one row per request, the way btt follows an I/O from Q to C.

Events arrive as rows of an int64 matrix in time order (columns TE_*), passed flattened. The
state (requests in flight) persists across calls, so a trace of any length streams through in
bounded memory: a pool of entries plus an open-addressing hash table that indexes them by one
64-bit key ``kind << 62 | device index << 48 | sector``:

- KIND_BIO: a bio queued (Q) or announced by a remap (A), not yet a request;
- KIND_START and KIND_END: a request (after G, I or D) by its first sector and by the sector
  after its last; the end key finds the request a back merge (M) extends, the start key the
  request a front merge (F), an issue (D) or a completion (C) refers to.

Devices get small indices from a second table (a flush is keyed as its own device at sector 0:
flushes carry no position, a completion may even say sector -1). Sectors are keyed modulo
2**48 (128 PiB).

Duplicate keys (two flushes in flight) are found first-in first-out: linear probing puts a
newer twin later on the probe run, and backward-shift deletion keeps that order.

Everything is flat one-dimensional arrays indexed ``row * NCOLS + column``: Numba indexes a 2-D
array with a run-time stride multiply and a wraparound check per access, which made an earlier
2-D version of this kernel five times slower.

A request becomes an output row when it completes; a completion with no earlier event becomes a
row flagged PARTIAL (the request began before the trace). ``pair_sweep`` evicts requests idle for
longer than a limit (events lost, or trace ended) as INCOMPLETE rows and reports the earliest
arrival still in flight, so the caller can release completed rows in arrival order.

**Flush sequences** (block/blk-flush.c). On a device with a volatile write cache, a request with
a preflush, or with FUA the device does not support, goes through the kernel's flush machinery:
the block layer issues its own flush request before the data (``D FN``, ``C FN``: no Q, no G;
rows of their own, flagged PARTIAL as any request first seen at its issue), the data step
(``I``/``D``/``C`` with the preflush and the emulated FUA flags stripped), a flush after it when
FUA is emulated, and only then ends the original request: a completion of 0 bytes at its sector
(``C WSM 229418 [0]``; an empty preflush's ``C WS 0 [0]``). That last completion is when the
submitter sees the request done, so it is the row's completion. A request is known to be in a
sequence (FL_SEQ) when it reaches the request stage (G, I or D) with its preflush flag (the
flag survives to the Q only on a device with a write cache: the kernel strips it at submission
otherwise), or is issued (D) without the FUA flag its queueing had; an empty preflush allocated
as a request (G) always is. Its data completion (an empty flush's: the flush's) is kept
(F_DONE) and the request waits, under a key of its own for an empty flush, for the 0-byte end;
one not ended within ``seq_wait`` ns is released at its data completion (a trace without the
ends: a synthetic one, or events lost). A 0-byte write completion that ends no request waiting
for it -- a trace without G and Q (a capture of request events only), where the stripped
flags cannot tell, or a sequence that began before the trace -- makes no row: it is counted
(ST_ENDS), and such a write's row ends at its data step.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

# Trace-event matrix columns (TE_: one block-layer event of a trace, before pairing; the
# replay engine's EV_ columns in kernels/engine.py are another table).
TE_TIME, TE_DEV, TE_ACT, TE_OP, TE_FLAGS, TE_SECTOR, TE_BYTES, TE_PID, TE_ERR, TE_AUX = range(10)
TE_NCOLS = 10


@njit(forceinline=True, nrt=False)
def put_event(events, k, t, dev, act, op, flags, sector, nbytes, pid, err, aux):
    """Trace event ``k`` into the flattened event matrix (``TE_NCOLS`` values a row: no 2-D
    stride multiply per store), as every parser writes its events."""
    o = k * TE_NCOLS
    events[o + TE_TIME] = t
    events[o + TE_DEV] = dev
    events[o + TE_ACT] = act
    events[o + TE_OP] = op
    events[o + TE_FLAGS] = flags
    events[o + TE_SECTOR] = sector
    events[o + TE_BYTES] = nbytes
    events[o + TE_PID] = pid
    events[o + TE_ERR] = err
    events[o + TE_AUX] = aux

# Actions: the numbers of the kernel's __BLK_TA_* codes.
A_QUEUE, A_BACKMERGE, A_FRONTMERGE, A_GETRQ, A_SLEEPRQ, A_REQUEUE = 1, 2, 3, 4, 5, 6
A_ISSUE, A_COMPLETE, A_PLUG, A_UNPLUG_IO, A_UNPLUG_TIMER, A_INSERT = 7, 8, 9, 10, 11, 12
A_SPLIT, A_BOUNCE, A_REMAP, A_ABORT = 13, 14, 15, 16

# Output row columns.
(R_TIME, R_DEV, R_SECTOR, R_BYTES, R_OP, R_FLAGS, R_GETRQ, R_INSERT, R_ISSUE, R_COMPLETE,
 R_LATENCY, R_MERGES, R_PID, R_ERR, R_SEQ) = range(15)
R_NCOLS = 15

# Entry fields.
(F_STAGE, F_DEV, F_DIDX, F_START, F_END, F_START0, F_BYTES0, F_OP, F_FLAGS, F_Q, F_G, F_I, F_D,
 F_PID, F_MERGES, F_LAST, F_SEQ, F_DONE, F_ERR) = range(19)
NF = 19

# Entry stages.
S_FREE, S_REMAP, S_BIO, S_REQ = 0, 1, 2, 3
KIND_BIO, KIND_START, KIND_END = 0, 1, 2

# State scalars.
(ST_FREE_TOP, ST_SEQ, ST_LIVE, ST_USED, ST_NOW, ST_NDEV, ST_LAST_DEV, ST_LAST_DIDX,
 ST_SHIFT, ST_ENDS) = range(10)
ST_NFIELDS = 10

# Flag bits (values of traces.schema.FLAG_*; kernels do not import the schema module).
FL_REMAPPED = 1 << 6
FL_REQUEUED = 1 << 7
FL_SPLIT = 1 << 8
FL_PARTIAL = 1 << 9
FL_INCOMPLETE = 1 << 10
FL_FUA, FL_PREFLUSH = 1 << 1, 1 << 4  # (the parsers' FL_FUA, FL_PREFLUSH)
#: The pairing's own bit (never in a row): the request is in a flush sequence (module docstring)
FL_SEQ = 1 << 14

OP_WRITE = 1
OP_FLUSH = 3
FLUSH_KEY = 1 << 33
#: The flush pseudo-device's sector under which an empty preflush waits for its end (the
#: flushes in flight are all at sector 0)
FLUSH_WAIT = 1
SECTOR_MASK = (1 << 48) - 1
MAX_DEVICES = 1 << 14

# Status codes.
OK = 0
FULL = 1  # the entry pool (or the hash table) needs to grow
TOO_MANY_DEVICES = 2

NULL = -1
EMPTY = -1


def new_state(capacity: int = 1 << 12):
    """Allocate the pairing state for ``capacity`` requests in flight.

    Returns (ent, keys, vals, devk, devv, free, st): entry pool, hash table keys and values,
    device table keys and indices, free list, scalars.
    """
    ent = np.zeros(capacity * NF, dtype=np.int64)
    slots = 4 * capacity
    keys = np.zeros(slots, dtype=np.int64)
    vals = np.full(slots, EMPTY, dtype=np.int64)
    devk = np.zeros(2 * MAX_DEVICES, dtype=np.int64)
    devv = np.full(2 * MAX_DEVICES, EMPTY, dtype=np.int64)
    free = np.arange(capacity - 1, -1, -1, dtype=np.int64)
    st = np.zeros(ST_NFIELDS, dtype=np.int64)
    st[ST_FREE_TOP] = capacity
    st[ST_SHIFT] = 64 - (slots.bit_length() - 1)
    return ent, keys, vals, devk, devv, free, st


@njit(forceinline=True, nrt=False)
def _mix(key, mask):
    """Slot of a key: MurmurHash3's 64-bit finalizer, so that every key bit (kind and device
    in the high bits too) moves the slot; a multiply alone leaves the low bits blind to them."""
    x = key ^ (key >> 33)
    x *= -49064778989728563  # 0xff51afd7ed558ccd as int64
    x ^= x >> 33
    x *= -4265267296055464877  # 0xc4ceb9fe1a85ec53 as int64
    x ^= x >> 33
    return x & mask


@njit(forceinline=True, nrt=False)
def _slot(key, st, mask):
    """Slot of a request-table key: the top bits of the key times 2**64 / golden ratio
    (Fibonacci hashing; ``st[ST_SHIFT]`` is 64 - log2 of the slots). Every key bit moves the
    top bits of the product, the kind and device bits too, and it is one multiply where
    ``_mix`` chains two: hashing was a sixth of an event's pairing. The slots change nothing
    that is found: linear probing keeps twins first in, first out whatever the hash."""
    return ((key * -7046029254386353131) >> st[ST_SHIFT]) & mask  # 0x9e3779b97f4a7c15


@njit(forceinline=True, nrt=False)
def _key(kind, didx, sector):
    return (kind << 62) | (didx << 48) | (sector & SECTOR_MASK)


@njit(forceinline=True, nrt=False)
def _dev_index(devk, devv, st, dev):
    """Small index of a device (or flush pseudo-device) key; -1 when the table is full. The
    last device looked up is kept (``ST_LAST_DEV``, its index + 1 in ``ST_LAST_DIDX``, 0 for
    none): consecutive events are mostly on one device, and its table probe was a tenth of
    an event's pairing."""
    if st[ST_LAST_DIDX] > 0 and st[ST_LAST_DEV] == dev:
        return st[ST_LAST_DIDX] - 1
    mask = devk.shape[0] - 1
    i = _mix(dev + 1, mask)
    while devv[i] != EMPTY:
        if devk[i] == dev:
            st[ST_LAST_DEV] = dev
            st[ST_LAST_DIDX] = devv[i] + 1
            return devv[i]
        i = (i + 1) & mask
    if st[ST_NDEV] >= MAX_DEVICES:
        return -1
    devk[i] = dev
    devv[i] = st[ST_NDEV]
    st[ST_NDEV] += 1
    return devv[i]


@njit(forceinline=True, nrt=False)
def _find(keys, vals, st, key):
    mask = keys.shape[0] - 1
    i = _slot(key, st, mask)
    while True:
        v = vals[i]
        if v == EMPTY:
            return -1
        if keys[i] == key:
            return v
        i = (i + 1) & mask


@njit(forceinline=True, nrt=False)
def _find_seq(keys, vals, ent, st, key):
    """The first entry under ``key`` in a flush sequence (FL_SEQ), or -1."""
    mask = keys.shape[0] - 1
    i = _slot(key, st, mask)
    while True:
        v = vals[i]
        if v == EMPTY:
            return -1
        if keys[i] == key and (ent[v * NF + F_FLAGS] & FL_SEQ) != 0:
            return v
        i = (i + 1) & mask


@njit(forceinline=True, nrt=False)
def _insert(keys, vals, st, key, entry):
    mask = keys.shape[0] - 1
    i = _slot(key, st, mask)
    while vals[i] != EMPTY:
        i = (i + 1) & mask
    keys[i] = key
    vals[i] = entry
    st[ST_USED] += 1


@njit(forceinline=True, nrt=False)
def _remove(keys, vals, st, key, entry):
    """Delete ``entry``'s slot under ``key`` (not a twin's), shifting the run back after it."""
    mask = keys.shape[0] - 1
    i = _slot(key, st, mask)
    while True:
        v = vals[i]
        if v == EMPTY:
            return
        if v == entry and keys[i] == key:
            break
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        if vals[j] == EMPTY:
            break
        home = _slot(keys[j], st, mask)
        # the key at j may move back to i only if its home is not cyclically within (i, j]
        if i <= j:
            if i < home and home <= j:
                continue
        elif home > i or home <= j:
            continue
        keys[i] = keys[j]
        vals[i] = vals[j]
        i = j
    vals[i] = EMPTY
    st[ST_USED] -= 1


@njit
def rehash(ent, keys, vals, st):
    """Index every live entry again (after the pool or the table grew); twins keep their
    first-in first-out order by entry sequence number."""
    bits = 0
    while (1 << bits) < keys.shape[0]:  # (the table is a power of two)
        bits += 1
    st[ST_SHIFT] = 64 - bits
    vals[:] = EMPTY
    st[ST_USED] = 0
    n = ent.shape[0] // NF
    seqs = np.empty(n, dtype=np.int64)
    for e in range(n):
        seqs[e] = ent[e * NF + F_SEQ] if ent[e * NF + F_STAGE] != S_FREE else -1
    order = np.argsort(seqs)
    for j in range(n):
        e = order[j]
        b = e * NF
        stage = ent[b + F_STAGE]
        if stage == S_FREE:
            continue
        d = ent[b + F_DIDX]
        if stage == S_REQ:
            _insert(keys, vals, st, _key(KIND_START, d, ent[b + F_START]), e)
            _insert(keys, vals, st, _key(KIND_END, d, ent[b + F_END]), e)
        else:
            _insert(keys, vals, st, _key(KIND_BIO, d, ent[b + F_START]), e)


@njit(forceinline=True, nrt=False)
def _alloc(ent, free, st):
    top = st[ST_FREE_TOP] - 1
    st[ST_FREE_TOP] = top
    e = free[top]
    b = e * NF
    for f in range(NF):
        ent[b + f] = NULL
    ent[b + F_FLAGS] = 0
    ent[b + F_MERGES] = 0
    st[ST_SEQ] += 1
    ent[b + F_SEQ] = st[ST_SEQ]
    st[ST_LIVE] += 1
    return e


@njit(forceinline=True, nrt=False)
def _release(ent, keys, vals, free, st, e):
    b = e * NF
    d = ent[b + F_DIDX]
    if ent[b + F_STAGE] == S_REQ:
        _remove(keys, vals, st, _key(KIND_START, d, ent[b + F_START]), e)
        _remove(keys, vals, st, _key(KIND_END, d, ent[b + F_END]), e)
    else:
        _remove(keys, vals, st, _key(KIND_BIO, d, ent[b + F_START]), e)
    ent[b + F_STAGE] = S_FREE
    free[st[ST_FREE_TOP]] = e
    st[ST_FREE_TOP] += 1
    st[ST_LIVE] -= 1


@njit(forceinline=True, nrt=False)
def _promote(ent, keys, vals, st, e):
    """A bio becomes a request: index it by start and end instead of as a bio."""
    b = e * NF
    d = ent[b + F_DIDX]
    _remove(keys, vals, st, _key(KIND_BIO, d, ent[b + F_START]), e)
    ent[b + F_STAGE] = S_REQ
    _insert(keys, vals, st, _key(KIND_START, d, ent[b + F_START]), e)
    _insert(keys, vals, st, _key(KIND_END, d, ent[b + F_END]), e)


@njit(forceinline=True, nrt=False)
def _new_entry(ent, keys, vals, free, st, events, p, stage, t, dev, didx, sector):
    e = _alloc(ent, free, st)
    b = e * NF
    nbytes = events[p + TE_BYTES]
    nsec = (nbytes + 511) >> 9
    ent[b + F_STAGE] = stage
    ent[b + F_DEV] = dev
    ent[b + F_DIDX] = didx
    ent[b + F_START] = sector
    ent[b + F_END] = sector + nsec
    ent[b + F_START0] = sector
    ent[b + F_BYTES0] = nbytes
    ent[b + F_OP] = events[p + TE_OP]
    ent[b + F_FLAGS] = events[p + TE_FLAGS]
    ent[b + F_PID] = events[p + TE_PID]
    ent[b + F_LAST] = t
    ent[b + F_Q] = t
    if stage == S_REQ:
        _insert(keys, vals, st, _key(KIND_START, didx, sector), e)
        _insert(keys, vals, st, _key(KIND_END, didx, sector + nsec), e)
    else:
        _insert(keys, vals, st, _key(KIND_BIO, didx, sector), e)
    return e


@njit(forceinline=True, nrt=False)
def _emit(out, n, ent, e, t_complete, err, extra_flags):
    b = e * NF
    o = n * R_NCOLS
    q = ent[b + F_Q]
    out[o + R_TIME] = q
    out[o + R_DEV] = ent[b + F_DEV] & 0xFFFFFFFF  # drop the flush key bit
    out[o + R_SECTOR] = ent[b + F_START0]
    out[o + R_BYTES] = ent[b + F_BYTES0]
    out[o + R_OP] = ent[b + F_OP]
    out[o + R_FLAGS] = (ent[b + F_FLAGS] | extra_flags) & ~FL_SEQ
    out[o + R_GETRQ] = ent[b + F_G]
    out[o + R_INSERT] = ent[b + F_I]
    out[o + R_ISSUE] = ent[b + F_D]
    out[o + R_COMPLETE] = t_complete
    out[o + R_LATENCY] = t_complete - q if t_complete != NULL else NULL
    out[o + R_MERGES] = ent[b + F_MERGES]
    out[o + R_PID] = ent[b + F_PID]
    out[o + R_ERR] = err
    out[o + R_SEQ] = ent[b + F_SEQ]


@njit(forceinline=True, nrt=False)
def _request_at(ent, keys, vals, free, st, events, p, t, expect_queue, dev, didx, sector,
                bio_first):
    """The request starting at the event's sector: found, promoted from a bio, or created.
    ``bio_first`` (a G: a bio gets its request) looks for a queued bio there before a request:
    two requests at one sector are rare, but every flush of a device is at sector 0, and a
    second preflush's G took the first's request."""
    if not bio_first:
        e = _find(keys, vals, st, _key(KIND_START, didx, sector))
        if e >= 0:
            return e
    e = _find(keys, vals, st, _key(KIND_BIO, didx, sector))
    if e >= 0:
        if ent[e * NF + F_STAGE] == S_REMAP:  # remapped, then issued without a traced Q
            ent[e * NF + F_Q] = t
        _promote(ent, keys, vals, st, e)
        return e
    if bio_first:
        e = _find(keys, vals, st, _key(KIND_START, didx, sector))
        if e >= 0:
            return e
    e = _new_entry(ent, keys, vals, free, st, events, p, S_REQ, t, dev, didx, sector)
    if expect_queue:
        ent[e * NF + F_FLAGS] |= FL_PARTIAL
    return e


@njit(forceinline=True, nrt=False)
def _on_queue(ent, keys, vals, free, st, events, p, t, dev, didx, sector, nbytes):
    """Q: a new bio; or the queueing of a remapped bio (its marker becomes the bio), or the
    remainder of a split queued again."""
    e = _find(keys, vals, st, _key(KIND_BIO, didx, sector))
    if e >= 0 and ent[e * NF + F_STAGE] == S_REMAP:
        b = e * NF
        ent[b + F_STAGE] = S_BIO
        ent[b + F_Q] = t
        ent[b + F_BYTES0] = nbytes
        ent[b + F_END] = sector + ((nbytes + 511) >> 9)
        ent[b + F_OP] = events[p + TE_OP]
        ent[b + F_FLAGS] |= events[p + TE_FLAGS]
        ent[b + F_PID] = events[p + TE_PID]
        ent[b + F_LAST] = t
    elif e >= 0 and (ent[e * NF + F_FLAGS] & FL_SPLIT) != 0 and ent[e * NF + F_Q] <= t:
        ent[e * NF + F_LAST] = t  # the remainder of a split, queued again
    else:
        _new_entry(ent, keys, vals, free, st, events, p, S_BIO, t, dev, didx, sector)


@njit(forceinline=True, nrt=False)
def _on_merge(ent, keys, vals, free, st, act, t, didx, sector, nbytes):
    """M or F: the bio joins the request it extends at the back or the front (its queue time
    the earlier of the two); the bio's own entry goes."""
    nsec = (nbytes + 511) >> 9
    if act == A_BACKMERGE:
        r = _find(keys, vals, st, _key(KIND_END, didx, sector))
    else:
        r = _find(keys, vals, st, _key(KIND_START, didx, sector + nsec))
    bio = _find(keys, vals, st, _key(KIND_BIO, didx, sector))
    q = t
    if bio >= 0:
        q = ent[bio * NF + F_Q]
        _release(ent, keys, vals, free, st, bio)
    if r >= 0:
        b = r * NF
        if act == A_BACKMERGE:
            _remove(keys, vals, st, _key(KIND_END, didx, ent[b + F_END]), r)
            ent[b + F_END] = sector + nsec
            _insert(keys, vals, st, _key(KIND_END, didx, sector + nsec), r)
        else:
            _remove(keys, vals, st, _key(KIND_START, didx, ent[b + F_START]), r)
            ent[b + F_START] = sector
            ent[b + F_START0] = sector
            _insert(keys, vals, st, _key(KIND_START, didx, sector), r)
        ent[b + F_BYTES0] += nbytes
        ent[b + F_MERGES] += 1
        if q < ent[b + F_Q]:
            ent[b + F_Q] = q
        ent[b + F_LAST] = t


@njit(forceinline=True, nrt=False)
def _on_split(ent, keys, vals, free, st, t, didx, sector, new_sector):
    """X: the bio (or request) at ``sector`` ends at ``new_sector``; a new bio entry, a copy
    of it, covers the rest."""
    e = _find(keys, vals, st, _key(KIND_BIO, didx, sector))
    if e < 0:
        e = _find(keys, vals, st, _key(KIND_START, didx, sector))
    if e < 0 or not (sector < new_sector < ent[e * NF + F_END]):
        return
    b = e * NF
    old_end = ent[b + F_END]
    if ent[b + F_STAGE] == S_REQ:
        _remove(keys, vals, st, _key(KIND_END, didx, old_end), e)
        ent[b + F_END] = new_sector
        _insert(keys, vals, st, _key(KIND_END, didx, new_sector), e)
    else:
        ent[b + F_END] = new_sector
    ent[b + F_BYTES0] = (new_sector - sector) << 9
    ent[b + F_FLAGS] |= FL_SPLIT
    r = _alloc(ent, free, st)
    c = r * NF
    for f in range(NF):
        if f != F_SEQ:
            ent[c + f] = ent[b + f]
    ent[c + F_STAGE] = S_BIO
    ent[c + F_START] = new_sector
    ent[c + F_START0] = new_sector
    ent[c + F_END] = old_end
    ent[c + F_BYTES0] = (old_end - new_sector) << 9
    ent[c + F_G] = NULL
    ent[c + F_I] = NULL
    ent[c + F_D] = NULL
    ent[c + F_MERGES] = 0
    ent[c + F_LAST] = t
    _insert(keys, vals, st, _key(KIND_BIO, didx, new_sector), r)


@njit(forceinline=True, nrt=False)
def _on_request(ent, keys, vals, free, st, events, p, act, t, expect_queue, dev, didx, sector,
                nbytes):
    """G, I or D: the request at ``sector`` (found, promoted from its bio, or created) gets
    its getrq, insert or issue time."""
    e = _request_at(ent, keys, vals, free, st, events, p, t, expect_queue, dev, didx, sector,
                    act == A_GETRQ)
    b = e * NF
    ent[b + F_LAST] = t
    f = ent[b + F_FLAGS]
    evf = events[p + TE_FLAGS]
    if (f & FL_SEQ) == 0:  # a flush sequence? (module docstring)
        if events[p + TE_OP] == OP_FLUSH:
            if act == A_GETRQ:
                ent[b + F_FLAGS] |= FL_SEQ
        elif ((f | evf) & FL_PREFLUSH) != 0 or (
                act == A_ISSUE and (f & FL_FUA) != 0 and (evf & FL_FUA) == 0):
            ent[b + F_FLAGS] |= FL_SEQ
    if act == A_GETRQ:
        if ent[b + F_G] == NULL:
            ent[b + F_G] = t
    elif act == A_INSERT:
        if ent[b + F_I] == NULL:
            ent[b + F_I] = t
    else:
        ent[b + F_D] = t  # after a requeue, the last issue counts (as btt's D2C)
        if nbytes > 0 and nbytes != ent[b + F_BYTES0]:
            # the driver saw the request as a whole (merges we did not see): trust it
            _remove(keys, vals, st, _key(KIND_END, didx, ent[b + F_END]), e)
            ent[b + F_END] = ent[b + F_START] + ((nbytes + 511) >> 9)
            _insert(keys, vals, st, _key(KIND_END, didx, ent[b + F_END]), e)
            ent[b + F_BYTES0] = nbytes
    if ent[b + F_PID] == NULL and events[p + TE_PID] > 0:
        ent[b + F_PID] = events[p + TE_PID]
    ent[b + F_FLAGS] |= events[p + TE_FLAGS]


@njit(forceinline=True, nrt=False)
def _rekey_start(keys, vals, st, ent, e, start):
    b = e * NF
    d = ent[b + F_DIDX]
    _remove(keys, vals, st, _key(KIND_START, d, ent[b + F_START]), e)
    ent[b + F_START] = start
    _insert(keys, vals, st, _key(KIND_START, d, start), e)


@njit(forceinline=True, nrt=False)
def _on_sequence_end(ent, keys, vals, free, st, devk, devv, events, p, out, n, t, dev, didx,
                     sector):
    """A 0-byte write completion: the end of the flush sequence of the request waiting for it
    at ``sector``, or of an empty preflush of the device (one whose flush completed first,
    then any other: the kernel runs one flush for all the preflushes pending), which becomes
    output row ``n``; else no row, counted. Returns the rows written (0 or 1)."""
    e = _find_seq(keys, vals, ent, st, _key(KIND_START, didx, sector))
    if e < 0:
        fd = _dev_index(devk, devv, st, dev | FLUSH_KEY)
        if fd >= 0:
            e = _find_seq(keys, vals, ent, st, _key(KIND_START, fd, FLUSH_WAIT))
            if e < 0:
                e = _find_seq(keys, vals, ent, st, _key(KIND_START, fd, 0))
    if e < 0:
        st[ST_ENDS] += 1
        return 0
    _emit(out, n, ent, e, t, events[p + TE_ERR], 0)
    _release(ent, keys, vals, free, st, e)
    return 1


@njit(forceinline=True, nrt=False)
def _on_complete(ent, keys, vals, free, st, events, p, out, n, t, dev, didx, sector, nbytes):
    """C: the request at ``sector`` becomes output row ``n`` (a PARTIAL row when it began
    before the trace), unless the completion covers only its first part, or is the data step
    of a flush sequence (the request then waits for its end). Returns the rows written (0 or
    1)."""
    e = _find(keys, vals, st, _key(KIND_START, didx, sector))
    if e < 0:
        e = _find(keys, vals, st, _key(KIND_BIO, didx, sector))
        if e >= 0:
            _promote(ent, keys, vals, st, e)
    if e < 0:
        # began before the trace: a row with what we know
        e = _new_entry(ent, keys, vals, free, st, events, p, S_REQ, t, dev, didx, sector)
        ent[e * NF + F_FLAGS] |= FL_PARTIAL
        _emit(out, n, ent, e, t, events[p + TE_ERR], 0)
        _release(ent, keys, vals, free, st, e)
        return 1
    b = e * NF
    remaining = (ent[b + F_END] - ent[b + F_START]) << 9
    if nbytes > 0 and nbytes < remaining and ent[b + F_OP] != OP_FLUSH:
        # partial completion: the rest of the request stays in flight
        _remove(keys, vals, st, _key(KIND_START, didx, ent[b + F_START]), e)
        ent[b + F_START] += (nbytes + 511) >> 9
        _insert(keys, vals, st, _key(KIND_START, didx, ent[b + F_START]), e)
        ent[b + F_LAST] = t
        return 0
    if (ent[b + F_FLAGS] & FL_SEQ) != 0 and ent[b + F_DONE] == NULL:
        # the data step (an empty preflush's flush) is done: wait for the 0-byte end, at the
        # request's first sector (an empty preflush under FLUSH_WAIT, apart from the flushes)
        ent[b + F_DONE] = t
        ent[b + F_ERR] = events[p + TE_ERR]
        ent[b + F_LAST] = t
        _rekey_start(keys, vals, st, ent, e,
                     FLUSH_WAIT if ent[b + F_OP] == OP_FLUSH else ent[b + F_START0])
        return 0
    _emit(out, n, ent, e, t, events[p + TE_ERR], 0)
    _release(ent, keys, vals, free, st, e)
    return 1


@njit(nrt=False)
def pair_events(events, n_events, ent, keys, vals, devk, devv, free, st, out, expect_queue):
    """Feed the first ``n_events`` rows of the flattened event matrix through the state;
    completed requests go to the flattened ``out`` rows.

    Returns (rows written, events consumed, status). Status FULL: the entry pool or the table
    needs to grow (the caller grows it and calls again from the returned event index).
    """
    n = 0
    slots = keys.shape[0]
    for k in range(n_events):
        # every event needs at most two free entries (a split) and four table slots
        if st[ST_FREE_TOP] < 2 or (st[ST_USED] + 4) * 2 > slots:
            return n, k, FULL
        p = k * TE_NCOLS
        t = events[p + TE_TIME]
        act = events[p + TE_ACT]
        dev = events[p + TE_DEV]
        sector = events[p + TE_SECTOR]
        nbytes = events[p + TE_BYTES]
        if events[p + TE_OP] == OP_FLUSH:
            dev |= FLUSH_KEY
            sector = 0
        didx = _dev_index(devk, devv, st, dev)
        if didx < 0:
            return n, k, TOO_MANY_DEVICES
        st[ST_NOW] = t
        # each handler is inlined once, here: the loop compiles as one function
        if act == A_QUEUE:
            _on_queue(ent, keys, vals, free, st, events, p, t, dev, didx, sector, nbytes)
        elif act == A_REMAP:
            e = _new_entry(ent, keys, vals, free, st, events, p, S_REMAP, t, dev, didx, sector)
            ent[e * NF + F_FLAGS] |= FL_REMAPPED
        elif act == A_BACKMERGE or act == A_FRONTMERGE:
            _on_merge(ent, keys, vals, free, st, act, t, didx, sector, nbytes)
        elif act == A_SPLIT:
            _on_split(ent, keys, vals, free, st, t, didx, sector, events[p + TE_AUX])
        elif act == A_GETRQ or act == A_INSERT or act == A_ISSUE:
            _on_request(ent, keys, vals, free, st, events, p, act, t, expect_queue, dev, didx,
                        sector, nbytes)
        elif act == A_REQUEUE:
            e = _find(keys, vals, st, _key(KIND_START, didx, sector))
            if e >= 0:
                ent[e * NF + F_FLAGS] |= FL_REQUEUED
                ent[e * NF + F_LAST] = t
        elif act == A_COMPLETE:
            if nbytes == 0 and events[p + TE_OP] == OP_WRITE:
                n += _on_sequence_end(ent, keys, vals, free, st, devk, devv, events, p, out, n,
                                      t, dev, didx, sector)
            else:
                n += _on_complete(ent, keys, vals, free, st, events, p, out, n, t, dev, didx,
                                  sector, nbytes)
        # other actions (plug, unplug, sleeprq, bounce, abort) do not change a request
    return n, n_events, OK


@njit(nrt=False)
def pair_sweep(ent, keys, vals, free, st, out, stale_before, seq_before, flush_all):
    """Evict entries idle since before ``stale_before`` (all of them if ``flush_all``).

    Evicted requests and queued bios become INCOMPLETE rows; remap markers vanish. A request
    of a flush sequence whose data completed before ``seq_before`` (or at all, with
    ``flush_all``) and whose end never came is a row completed then.
    Returns (rows written, earliest arrival still in flight or -1, markers dropped, rows of
    those sequences).
    """
    n = 0
    dropped = 0
    ended = 0
    earliest = -1
    for e in range(ent.shape[0] // NF):
        b = e * NF
        stage = ent[b + F_STAGE]
        if stage == S_FREE:
            continue
        if ent[b + F_DONE] != NULL and (flush_all or ent[b + F_DONE] < seq_before):
            _emit(out, n, ent, e, ent[b + F_DONE], ent[b + F_ERR], 0)
            n += 1
            ended += 1
            _release(ent, keys, vals, free, st, e)
        elif flush_all or ent[b + F_LAST] < stale_before:
            if stage == S_REMAP:
                dropped += 1
            else:
                _emit(out, n, ent, e, NULL, NULL, FL_INCOMPLETE)
                n += 1
            _release(ent, keys, vals, free, st, e)
        elif stage != S_REMAP:
            q = ent[b + F_Q]
            if earliest == -1 or q < earliest:
                earliest = q
    return n, earliest, dropped, ended


@njit(nrt=False)
def last_named(events, comms, table, out_pid, out_idx):
    """For each process id of the event rows that carry a name (``comms[k, 0] >= 0``, pid > 0),
    the last such row: fills ``out_pid``/``out_idx`` in order of first appearance from the end,
    returns how many, or -1 when more than half of ``table`` would be taken (the caller tries
    again with a larger one). ``table`` (int64, a power of two, any contents) is an
    open-addressing set of the pids seen. The text parsers' names per chunk
    (traces/formats/paired.py ``named_rows``)."""
    mask = table.shape[0] - 1
    table[:] = -1
    m = 0
    prev = -1  # (the pid of the row before: most rows repeat it)
    for k in range(events.shape[0] - 1, -1, -1):
        pid = events[k, TE_PID]
        if comms[k, 0] < 0 or pid <= 0 or pid == prev:
            continue
        prev = pid
        h = _mix(pid, mask)
        while table[h] >= 0 and table[h] != pid:
            h = (h + 1) & mask
        if table[h] == pid:
            continue
        if 2 * (m + 1) > table.shape[0]:
            return -1
        table[h] = pid
        out_pid[m] = pid
        out_idx[m] = k
        m += 1
    return m
