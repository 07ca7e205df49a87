"""Decode blktrace binary records (``struct blk_io_trace``) into the pairing event matrix.

Record layout, version 7 (include/uapi/linux/blktrace_api.h), 48 bytes then ``pdu_len`` bytes:

====== ===== ============ ==========================================================
offset size field        notes
====== ===== ============ ==========================================================
0      4     magic        0x65617400 | version (7)
4      4     sequence     per-CPU event sequence number
8      8     time         ns, relative to the trace's start (per-CPU clock)
16     8     sector       512-byte sectors
24     4     bytes        request or bio length
28     4     action       low 16 bits: __BLK_TA_* code (+ __BLK_TA_CGROUP 1<<8);
                          high 16 bits: BLK_TC_* category mask
32     4     pid
36     4     device       kernel dev_t: major << 20 | minor
40     4     cpu
44     2     error
46     2     pdu_len      bytes of payload after the header
====== ===== ============ ==========================================================

The numbers are in the byte order of the machine that recorded them; the magic tells which.
Payloads: split (X) carries the new sector as a big-endian u64; remap (A) carries
``{be32 device_from, be32 device_to, be64 sector_from}``; with __BLK_TA_CGROUP the payload
starts with an 8-byte cgroup id. Notify records (category NOTIFY) carry a process name
(BLK_TN_PROCESS), a wall-clock timestamp (BLK_TN_TIMESTAMP: u32 seconds, u32 nanoseconds) or
a message (BLK_TN_MESSAGE).

Version 8 (``struct blk_io_trace2``, added with zoned-device tracing in 2025) widens the action
to 64 bits and is 64 bytes: magic 0, sequence 4, time 8, sector 16, bytes 24 (u32), pid 28
(u32), action 32 (u64), device 40, cpu 44, error 48 (u16), pdu_len 50 (u16), 12 bytes of
padding. Bits 0-31 of the action mean what they mean in version 7; bits 32 and up
(``BLK_TC_ACT2``) carry the new categories (zone append, reset, open, close, finish).
"""

from __future__ import annotations

from ._jit import njit
from .pairing import put_event

MAGIC = 0x65617400
HDR7 = 48
HDR8 = 64

TC_READ = 1 << 0
TC_WRITE = 1 << 1
TC_FLUSH = 1 << 2
TC_SYNC = 1 << 3
TC_QUEUE = 1 << 4
TC_REQUEUE = 1 << 5
TC_ISSUE = 1 << 6
TC_COMPLETE = 1 << 7
TC_FS = 1 << 8
TC_PC = 1 << 9
TC_NOTIFY = 1 << 10
TC_AHEAD = 1 << 11
TC_META = 1 << 12
TC_DISCARD = 1 << 13
TC_DRV_DATA = 1 << 14
TC_FUA = 1 << 15

TA_CGROUP = 1 << 8
TA_MAX = 17  # __BLK_TA_DRV_DATA
TA_MAX_V8 = 20  # version 8 adds __BLK_TA_ZONE_MGMT, _ZONE_PLUG, _ZONE_UNPLUG

# Status codes (messages in traces.formats.blktrace).
OK = 0
NEED_MORE = 1  # the buffer ends inside a record
BAD_MAGIC = 2
BAD_VERSION = 3
BAD_ACTION = 4
BACKWARDS = 5
BAD_SIZE = 6

# Notes (notify records) columns: kind (0 process, 1 timestamp, 2 message), pid, pdu offset,
# pdu length, time.
NOTE_NCOLS = 5

# Flag bits (traces.schema.FLAG_*).
FL_SYNC, FL_FUA, FL_META, FL_RAHEAD, FL_PREFLUSH = 1, 2, 4, 8, 16
OP_READ, OP_WRITE, OP_DISCARD, OP_FLUSH, OP_OTHER = 0, 1, 2, 3, 4

MAX_BYTES = 1 << 40


@njit(forceinline=True, nrt=False)
def _u16(buf, p, swap):
    if swap:
        return (buf[p] << 8) | buf[p + 1]
    return buf[p] | (buf[p + 1] << 8)


@njit(forceinline=True, nrt=False)
def _u32(buf, p, swap):
    b0 = buf[p] & 0xFF
    b1 = buf[p + 1] & 0xFF
    b2 = buf[p + 2] & 0xFF
    b3 = buf[p + 3] & 0xFF
    if swap:
        return (b0 << 24) | (b1 << 16) | (b2 << 8) | b3
    return b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)


@njit(forceinline=True, nrt=False)
def _u64(buf, p, swap):
    lo = _u32(buf, p, swap)
    hi = _u32(buf, p + 4, swap)
    if swap:
        return (lo << 32) | hi
    return (hi << 32) | lo


@njit(forceinline=True, nrt=False)
def _be32(buf, p):
    return _u32(buf, p, True)


@njit(forceinline=True, nrt=False)
def _be64(buf, p):
    return _u64(buf, p, True)


@njit(nrt=False)
def decode(buf, pos, swap, events, notes, last_time, at_eof):
    """Decode records from ``buf[pos:]`` into ``events`` (rows) and ``notes``.

    Returns (events written, notes written, next position, status, status position,
    last event time). Stops with NEED_MORE at a record cut by the end of the buffer (an error
    only when ``at_eof``), or with an error status at the offending record's offset.
    """
    n = len(buf)
    ne = 0
    nn = 0
    while pos < n:
        if n - pos < HDR7:
            return ne, nn, pos, NEED_MORE, pos, last_time
        magic = _u32(buf, pos, swap)
        if (magic & 0xFFFFFF00) != MAGIC:
            return ne, nn, pos, BAD_MAGIC, pos, last_time
        version = magic & 0xFF
        if version == 7:
            hdr = HDR7
            t = _u64(buf, pos + 8, swap)
            sector = _u64(buf, pos + 16, swap)
            nbytes = _u32(buf, pos + 24, swap)
            action = _u32(buf, pos + 28, swap)
            pid = _u32(buf, pos + 32, swap)
            dev = _u32(buf, pos + 36, swap)
            err = _u16(buf, pos + 44, swap)
            pdu_len = _u16(buf, pos + 46, swap)
            cat = (action >> 16) & 0xFFFF
            cat2 = 0
            code = action & 0xFFFF
        elif version == 8:
            if n - pos < HDR8:
                return ne, nn, pos, NEED_MORE, pos, last_time
            hdr = HDR8
            t = _u64(buf, pos + 8, swap)
            sector = _u64(buf, pos + 16, swap)
            nbytes = _u32(buf, pos + 24, swap)
            pid = _u32(buf, pos + 28, swap)
            action = _u64(buf, pos + 32, swap)
            dev = _u32(buf, pos + 40, swap)
            err = _u16(buf, pos + 48, swap)
            pdu_len = _u16(buf, pos + 50, swap)
            # version 8 keeps the version-7 categories in bits 16-31 and adds new ones (zoned
            # operations, BLK_TC_ACT2) from bit 32 on
            cat = (action >> 16) & 0xFFFF
            cat2 = (action >> 32) & 0xFFFFFFFF
            code = action & 0xFFFF
            if (code & 0xFF) > TA_MAX and (code & 0xFF) <= TA_MAX_V8:
                pos = pos + hdr + pdu_len  # zone management / zone plug events: no request
                continue
        else:
            return ne, nn, pos, BAD_VERSION, pos, last_time
        end = pos + hdr + pdu_len
        if end > n:
            return ne, nn, pos, NEED_MORE, pos, last_time
        pdu = pos + hdr
        if cat & TC_NOTIFY:
            skip = 8 if (code & TA_CGROUP) != 0 and pdu_len >= 8 else 0  # a cgroup id first
            notes[nn, 0] = code & 0xFF
            notes[nn, 1] = pid
            notes[nn, 2] = pdu + skip
            notes[nn, 3] = pdu_len - skip
            notes[nn, 4] = t
            nn += 1
            pos = end
            continue
        base = code & 0xFF
        if base == 0 or base > TA_MAX:
            return ne, nn, pos, BAD_ACTION, pos, last_time
        if t < last_time:
            return ne, nn, pos, BACKWARDS, pos, last_time
        if nbytes > MAX_BYTES:
            return ne, nn, pos, BAD_SIZE, pos, last_time
        last_time = t
        if (cat & TC_PC) != 0 or base == TA_MAX:
            pos = end  # passthrough commands and driver data are not block requests
            continue
        if code & TA_CGROUP:
            pdu += 8
        op = OP_READ
        if cat2 != 0:
            op = OP_WRITE if nbytes > 0 and (cat & TC_WRITE) != 0 else OP_OTHER  # zoned ops
        elif cat & TC_DISCARD:
            op = OP_DISCARD
        elif (cat & TC_FLUSH) != 0 and nbytes == 0:
            op = OP_FLUSH
        elif cat & TC_WRITE:
            op = OP_WRITE
        flags = 0
        if cat & TC_SYNC:
            flags |= FL_SYNC
        if cat & TC_FUA:
            flags |= FL_FUA
        if cat & TC_META:
            flags |= FL_META
        if cat & TC_AHEAD:
            flags |= FL_RAHEAD
        if (cat & TC_FLUSH) != 0 and op != OP_FLUSH:
            flags |= FL_PREFLUSH
        aux = -1
        if base == 13 and pdu + 8 <= end:  # split: new sector
            aux = _be64(buf, pdu)
        elif base == 15 and pdu + 16 <= end:  # remap: sector_from
            aux = _be64(buf, pdu + 8)
        put_event(events, ne, t, dev, base, op, flags, sector, nbytes, pid,
                  err - 65536 if err >= 32768 else err, aux)  # a negative errno as u16
        ne += 1
        pos = end
    return ne, nn, pos, OK, pos, last_time


@njit(nrt=False)
def find_magic(buf, pos, swap):
    """Next offset after ``pos`` where a plausible record header starts (for --skip-bad)."""
    n = len(buf)
    p = pos + 1
    while p + 4 <= n:
        m = _u32(buf, p, swap)
        if (m & 0xFFFFFF00) == MAGIC and ((m & 0xFF) == 7 or (m & 0xFF) == 8):
            return p
        p += 1
    return n
