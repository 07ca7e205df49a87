"""Decoder of the kernel's binary per-CPU ring-buffer pages (tracefs
``per_cpu/cpuN/trace_pipe_raw``) of the block tracepoints into the pairing event matrix.

A page (sub-buffer) is a header, ``u64 timestamp`` then ``long commit`` (data length in the
low 27 bits, flags for missed events above), then events. Every event starts with a 32-bit
word: ``type_len`` in the low 5 bits, a time delta in the upper 27. ``type_len`` 1..28 is a
data event of ``type_len * 4`` payload bytes; 0 is a data event whose length (plus 4) is in the
next word; 29 is padding (a discarded event: its length in the next word); 30 extends the
time delta by the next word << 27; 31 is an absolute time stamp (the next word << 27 plus the
delta, its top five bits taken from the current time). Sources: the kernel's
kernel/trace/ring_buffer.c (``struct ring_buffer_event``, ``rb_event_length``) and
libtraceevent's kbuffer-parse.c (``translate_data``, ``kbuffer_load_subbuffer``: COMMIT_MASK,
MISSING_EVENTS, MISSING_STORED, TS_MSB), both read for these facts.

Event payloads start with ``unsigned short common_type`` (the event id). Where each field is
comes from the tracepoint's ``format`` file, so one decoder reads every kernel's layout: the
caller passes a table ``kind_of[id] -> row`` and, per row, the action and field offsets
(columns L_*, -1 for a field the event lacks). Little-endian hosts only (the caller checks).
"""

from __future__ import annotations

import numpy as np

from ._jit import njit
from .pairing import put_event
from .textparse import MAX_SECTORS, _empty_flush, rwbs

# Layout table columns (one row per event kind; offsets within the payload, -1 = absent).
(L_ACT, L_PID, L_DEV, L_SECTOR, L_NSEC, L_ERR, L_RWBS, L_RWBS_LEN, L_COMM, L_COMM_LEN, L_AUX,
 L_MINLEN) = range(12)
L_NCOLS = 12

# ring_buffer.c: enum ring_buffer_type
TYPE_PADDING = 29
TYPE_TIME_EXTEND = 30
TYPE_TIME_STAMP = 31
TS_SHIFT = 27
# kbuffer-parse.c: the commit word's length mask and missed-events flags
COMMIT_MASK = (1 << 27) - 1
MISSING_EVENTS = 1 << 31
MISSING_STORED = 1 << 30
# kbuffer-parse.c TS_MSB: an absolute time stamp lacks the top five bits of the clock
TS_MSB = -(1 << 59)  # 0xf8 << 56 as int64

# Status codes.
OK = 0
BAD_PAGE = 1  # commit length beyond the page
BAD_EVENT = 2  # an event runs past its page's data, or is shorter than its format
BAD_RWBS = 3  # an rwbs string that is not one
BAD_SIZE = 4  # absurd nr_sector
FULL = 5  # the output matrix is full (the caller sized it too small)

# Indices of the loss accumulator.
LOST_STORED = 0  # events the kernel says it missed before a page (count stored on the page)
LOST_PAGES = 1  # pages flagged "events missed" without a count


# Bytes are widened to int64 before shifting: a shifted uint8 becomes uint64 in Numba, and
# uint64 | int64 is float64.
@njit(forceinline=True, nrt=False)
def _u16(buf, o):
    return np.int64(buf[o]) | (np.int64(buf[o + 1]) << 8)


@njit(forceinline=True, nrt=False)
def _u32(buf, o):
    return (np.int64(buf[o]) | (np.int64(buf[o + 1]) << 8) | (np.int64(buf[o + 2]) << 16)
            | (np.int64(buf[o + 3]) << 24))


@njit(forceinline=True, nrt=False)
def _u64(buf, o):
    return _u32(buf, o) | (_u32(buf, o + 4) << 32)


@njit(forceinline=True, nrt=False)
def _i32(buf, o):
    v = _u32(buf, o)
    return v - (1 << 32) if v >= (1 << 31) else v


@njit(forceinline=True, nrt=False)
def _cstr_end(buf, i, n):
    """End of the NUL-terminated string in buf[i:i+n]."""
    j = i
    while j < i + n and buf[j] != 0:
        j += 1
    return j


@njit(forceinline=True, nrt=False)
def _decode_event(buf, d, layout, r, ts, events, comms, ne):
    """The block event whose payload starts at ``d`` (layout row offset ``r``), at time
    ``ts``, into row ``ne`` of ``events`` and ``comms``. Returns (status, byte offset of the
    problem)."""
    act = layout[r + L_ACT]
    rs = d + layout[r + L_RWBS]
    re = _cstr_end(buf, rs, layout[r + L_RWBS_LEN])
    op, flags, ok = rwbs(buf, rs, re)
    if not ok:
        return BAD_RWBS, rs
    nsec = 0
    if layout[r + L_NSEC] >= 0:
        nsec = _u32(buf, d + layout[r + L_NSEC])
        if nsec > MAX_SECTORS:
            return BAD_SIZE, d
    err = 0
    if layout[r + L_ERR] >= 0:
        err = _i32(buf, d + layout[r + L_ERR])
    aux = -1
    if layout[r + L_AUX] >= 0:
        aux = _u64(buf, d + layout[r + L_AUX])
    cs = -1
    ce = -1
    if layout[r + L_COMM] >= 0:
        cs = d + layout[r + L_COMM]
        ce = _cstr_end(buf, cs, layout[r + L_COMM_LEN])
    op, flags = _empty_flush(op, flags, nsec, act)
    put_event(events, ne, ts, _u32(buf, d + layout[r + L_DEV]), act, op, flags,
              _u64(buf, d + layout[r + L_SECTOR]), nsec << 9, _i32(buf, d + layout[r + L_PID]),
              err, aux)
    comms[2 * ne] = cs
    comms[2 * ne + 1] = ce
    return OK, 0


@njit(nrt=False)
def decode_pages(buf, n_pages, page_size, commit_size, data_off, kind_of, layout, events, comms,
                 cap, lost):
    """Decode ``n_pages`` consecutive ring-buffer pages of one CPU.

    Parameters
    ----------
    buf : uint8 array, the pages back to back (``page_size`` bytes each).
    commit_size, data_off : size of the header's commit word (8 on 64-bit kernels, 4 on
        32-bit) and where the data starts (16 or 12), from ``events/header_page``.
    kind_of : int array indexed by event id: the layout row, or -1 for an event not decoded.
    layout : flattened int64 rows of L_NCOLS columns.
    events : flattened int64 event matrix (TE_NCOLS per event), ``cap`` rows.
    comms : flattened int64, two per event: start and end in ``buf`` of the process name
        (-1 when the event has none).
    lost : int64[2] accumulator (LOST_STORED, LOST_PAGES).

    Returns (events written, status, byte offset in ``buf`` of the problem).
    Times are the ring buffer's clock in ns.
    """
    ne = 0
    nkinds = len(kind_of)
    for pg in range(n_pages):
        p = pg * page_size
        ts = _u64(buf, p)
        commit = _u64(buf, p + 8) if commit_size == 8 else _u32(buf, p + 8)
        size = commit & COMMIT_MASK
        if size > page_size - data_off:
            return ne, BAD_PAGE, p + 8
        o = p + data_off
        end = o + size
        if (commit & MISSING_EVENTS) != 0:
            if (commit & MISSING_STORED) != 0 and end + commit_size <= p + page_size:
                lost[LOST_STORED] += (_u64(buf, end) if commit_size == 8 else _u32(buf, end))
            else:
                lost[LOST_PAGES] += 1
        while o < end:
            if o + 4 > end:
                return ne, BAD_EVENT, o
            h = _u32(buf, o)
            tl = h & 31
            delta = h >> 5
            if tl == TYPE_PADDING:
                if o + 8 > end:
                    break  # padding to the end of the page
                ln = _u32(buf, o + 4)
                ts += delta
                if ln == 0:
                    break
                o = o + 4 + ln
                continue
            if tl == TYPE_TIME_EXTEND:
                if o + 8 > end:
                    return ne, BAD_EVENT, o
                ts += (_u32(buf, o + 4) << TS_SHIFT) + delta
                o += 8
                continue
            if tl == TYPE_TIME_STAMP:
                if o + 8 > end:
                    return ne, BAD_EVENT, o
                ts = ((_u32(buf, o + 4) << TS_SHIFT) + delta) | (ts & TS_MSB)
                o += 8
                continue
            if tl == 0:
                if o + 8 > end:
                    return ne, BAD_EVENT, o
                ln = _u32(buf, o + 4) - 4
                ln = (ln + 3) & ~3
                d = o + 8
            else:
                ln = tl * 4
                d = o + 4
            ts += delta
            if ln < 2 or d + ln > end:
                return ne, BAD_EVENT, o
            o = d + ln
            eid = _u16(buf, d)
            if eid >= nkinds:
                continue
            k = kind_of[eid]
            if k < 0:
                continue
            r = k * L_NCOLS
            if ln < layout[r + L_MINLEN]:
                return ne, BAD_EVENT, d
            if ne >= cap:
                return ne, FULL, o
            status, where = _decode_event(buf, d, layout, r, ts, events, comms, ne)
            if status != OK:
                return ne, status, where
            ne += 1
    return ne, OK, 0
