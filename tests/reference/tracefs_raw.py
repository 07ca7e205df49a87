"""Plain-Python reference of the ring-buffer page decoder (kernels/tracefs_raw.py), written
with ``struct`` from the kernel's description of the format (kernel/trace/ring_buffer.c,
libtraceevent kbuffer-parse.c), independently of the kernel code: one event at a time, a dict
per event format, the rwbs letters decoded from their table.

``decode(data, page_size, commit_size, data_off, formats)`` returns the events as tuples
``(time, dev, action, op, flags, sector, nbytes, pid, error, aux, comm)`` (comm None when the
event has no comm field) and the loss counts (stored counts, pages flagged without a count).
"""

from __future__ import annotations

import struct

READ, WRITE, DISCARD, FLUSH, OTHER = 0, 1, 2, 3, 4
SYNC, FUA, META, RAHEAD, PREFLUSH = 1, 2, 4, 8, 16
SPLIT = 13

_OPS = {"W": WRITE, "R": READ, "D": DISCARD, "DE": DISCARD, "F": FLUSH, "N": OTHER,
        "ZA": WRITE, "ZR": OTHER, "ZRA": OTHER, "ZF": OTHER, "ZO": OTHER, "ZC": OTHER}
_TRAILING = {"F": FUA, "A": RAHEAD, "S": SYNC, "M": META, "U": 0}


def rwbs(text: str) -> tuple[int, int] | None:
    """(op, flags) of an rwbs string, None when it is not one."""
    flags = 0
    if len(text) >= 2 and text[0] == "F" and text[1] in "WRDFNZ":
        flags |= PREFLUSH
        text = text[1:]
    for n in (3, 2, 1):  # the longest operation name that fits
        head = text[:n]
        if head in _OPS and all(c in _TRAILING for c in text[n:]):
            for c in text[n:]:
                flags |= _TRAILING[c]
            return _OPS[head], flags
    return None


def empty_flush(op: int, flags: int, nsec: int, action: int) -> tuple[int, int]:
    if nsec == 0 and action != SPLIT:
        if flags & PREFLUSH or op == FLUSH:
            return FLUSH, flags & ~PREFLUSH
        if op == READ:
            return OTHER, flags
    return op, flags


def _cstr(b: bytes) -> str:
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def decode(data: bytes, page_size: int, commit_size: int, data_off: int,
           formats: dict[int, tuple[int, dict[str, tuple[int, int]]]]):
    """``formats``: event id -> (action, {field: (offset, size)})."""
    out = []
    lost_stored = 0
    lost_pages = 0
    for p in range(0, len(data), page_size):
        page = data[p : p + page_size]
        ts = struct.unpack_from("<Q", page, 0)[0]
        commit = struct.unpack_from("<Q" if commit_size == 8 else "<I", page, 8)[0]
        size = commit & ((1 << 27) - 1)
        assert size <= page_size - data_off, "commit beyond the page"
        if commit & (1 << 31):
            if commit & (1 << 30):
                lost_stored += struct.unpack_from("<Q" if commit_size == 8 else "<I", page,
                                                  data_off + size)[0]
            else:
                lost_pages += 1
        o = data_off
        end = data_off + size
        while o < end:
            word = struct.unpack_from("<I", page, o)[0]
            kind = word & 0x1F
            delta = word >> 5
            if kind == 29:  # padding: a discarded event, its length in the next word
                if o + 8 > end:
                    break
                length = struct.unpack_from("<I", page, o + 4)[0]
                ts += delta
                if length == 0:
                    break
                o += 4 + length
                continue
            if kind == 30:  # time extend
                ts += (struct.unpack_from("<I", page, o + 4)[0] << 27) + delta
                o += 8
                continue
            if kind == 31:  # absolute time stamp, top five bits from the current time
                ts = ((struct.unpack_from("<I", page, o + 4)[0] << 27) + delta) | (
                    ts & (0x1F << 59))
                o += 8
                continue
            if kind == 0:
                length = struct.unpack_from("<I", page, o + 4)[0] - 4
                length = (length + 3) // 4 * 4
                body = o + 8
            else:
                length = kind * 4
                body = o + 4
            ts += delta
            payload = page[body : body + length]
            assert len(payload) == length and body + length <= end, "event past the data"
            o = body + length
            eid = struct.unpack_from("<H", payload, 0)[0]
            if eid not in formats:
                continue
            action, fields = formats[eid]

            def num(name, signed=False, default=0, fields=fields, payload=payload):
                if name not in fields:
                    return default
                off, sz = fields[name]
                fmt = {4: "i" if signed else "I", 8: "q" if signed else "Q"}[sz]
                return struct.unpack_from("<" + fmt, payload, off)[0]

            off, sz = fields["rwbs"]
            decoded = rwbs(_cstr(payload[off : off + sz]))
            assert decoded is not None, "bad rwbs"
            nsec = num("nr_sector")
            op, flags = empty_flush(*decoded, nsec, action)
            comm = None
            if "comm" in fields:
                off, sz = fields["comm"]
                comm = _cstr(payload[off : off + sz])
            out.append((
                ts & ((1 << 64) - 1),
                num("dev"),
                action,
                op,
                flags,
                num("sector"),
                nsec * 512,
                num("common_pid", signed=True),
                num("error", signed=True),
                num("new_sector", default=-1),
                comm,
            ))
    return out, lost_stored, lost_pages
