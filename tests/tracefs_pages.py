"""Write ring-buffer pages (tracefs ``trace_pipe_raw``) from plain event descriptions, the way
the kernel lays them out (kernel/trace/ring_buffer.c): a page header (u64 time stamp, commit
word), then events with a 32-bit header (type_len, 27-bit time delta), time extends for long
gaps, absolute time stamps, discarded (padding) events, and the missed-events flags. Used to
test the decoder on layouts a short real capture rarely shows."""

from __future__ import annotations

import random
import struct

from blocklab.traces.formats.tracefs_raw import EventFormat

# The block tracepoints' format files of Linux 6.18 (this project's machine) and of an older
# kernel (4.x: no bytes field, rwbs[8], no ioprio).
FORMATS_6_18 = {
    "block_rq_insert": """name: block_rq_insert
ID: 2105
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:unsigned int nr_sector;	offset:24;	size:4;	signed:0;
	field:unsigned int bytes;	offset:28;	size:4;	signed:0;
	field:unsigned short ioprio;	offset:32;	size:2;	signed:0;
	field:char rwbs[10];	offset:34;	size:10;	signed:0;
	field:char comm[16];	offset:44;	size:16;	signed:0;
	field:__data_loc char[] cmd;	offset:60;	size:4;	signed:0;
""",
    "block_rq_issue": """name: block_rq_issue
ID: 2104
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:unsigned int nr_sector;	offset:24;	size:4;	signed:0;
	field:unsigned int bytes;	offset:28;	size:4;	signed:0;
	field:unsigned short ioprio;	offset:32;	size:2;	signed:0;
	field:char rwbs[10];	offset:34;	size:10;	signed:0;
	field:char comm[16];	offset:44;	size:16;	signed:0;
	field:__data_loc char[] cmd;	offset:60;	size:4;	signed:0;
""",
    "block_rq_complete": """name: block_rq_complete
ID: 2107
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:unsigned int nr_sector;	offset:24;	size:4;	signed:0;
	field:int error;	offset:28;	size:4;	signed:1;
	field:unsigned short ioprio;	offset:32;	size:2;	signed:0;
	field:char rwbs[10];	offset:34;	size:10;	signed:0;
	field:__data_loc char[] cmd;	offset:44;	size:4;	signed:0;
""",
    "block_bio_queue": """name: block_bio_queue
ID: 2097
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:unsigned int nr_sector;	offset:24;	size:4;	signed:0;
	field:char rwbs[10];	offset:28;	size:10;	signed:0;
	field:char comm[16];	offset:38;	size:16;	signed:0;
""",
    "block_split": """name: block_split
ID: 2101
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:sector_t new_sector;	offset:24;	size:8;	signed:0;
	field:char rwbs[10];	offset:32;	size:10;	signed:0;
	field:char comm[16];	offset:42;	size:16;	signed:0;
""",
}
FORMATS_OLD = {
    "block_rq_issue": """name: block_rq_issue
ID: 1040
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:unsigned int nr_sector;	offset:24;	size:4;	signed:0;
	field:unsigned int bytes;	offset:28;	size:4;	signed:0;
	field:char rwbs[8];	offset:32;	size:8;	signed:0;
	field:char comm[16];	offset:40;	size:16;	signed:0;
	field:__data_loc char[] cmd;	offset:56;	size:4;	signed:0;
""",
    "block_rq_complete": """name: block_rq_complete
ID: 1042
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:dev_t dev;	offset:8;	size:4;	signed:0;
	field:sector_t sector;	offset:16;	size:8;	signed:0;
	field:unsigned int nr_sector;	offset:24;	size:4;	signed:0;
	field:int errors;	offset:28;	size:4;	signed:1;
	field:char rwbs[8];	offset:32;	size:8;	signed:0;
	field:__data_loc char[] cmd;	offset:40;	size:4;	signed:0;
""",
}


def payload(fmt: EventFormat, values: dict) -> bytes:
    """The payload of one event: every field of ``fmt`` from ``values`` (0 / empty if absent),
    plus an empty ``cmd`` string where the format has that dynamic field."""
    size = fmt.size
    extra = b""
    buf = bytearray(size)
    struct.pack_into("<H", buf, 0, fmt.id)
    for f in fmt.fields.values():
        if f.name == "common_type":
            continue
        if f.name == "cmd":  # __data_loc: offset << 0 | length << 16 of a string after the fields
            struct.pack_into("<I", buf, f.offset, (1 << 16) | size)
            extra = b"\0"
            continue
        v = values.get(f.name, 0)
        if f.array is not None:
            raw = v.encode() if isinstance(v, str) else bytes(v)
            buf[f.offset : f.offset + f.size] = raw[: f.size].ljust(f.size, b"\0")
        else:
            code = {1: "B", 2: "H", 4: "i" if f.signed else "I", 8: "q" if f.signed else "Q"}
            struct.pack_into("<" + code[f.size], buf, f.offset, v)
    return bytes(buf) + extra


def pack_pages(records: list[tuple[int, bytes]], page_size: int = 4096, commit_size: int = 8,
               data_off: int = 16, rng: random.Random | None = None,
               missed: dict[int, int | None] | None = None) -> bytes:
    """Pages holding ``records`` (absolute ns time, payload), in time order.

    With ``rng``, encodings vary as the kernel's do: length in the next word (type_len 0)
    instead of in type_len, time extends where none is needed, absolute time stamps, discarded
    events. ``missed`` flags page k as following missed events (a count, or None for "some").
    """
    rng = rng or random.Random(0)
    missed = missed or {}
    pages: list[bytes] = []
    body = bytearray()
    page_ts = 0
    last = 0

    def close():
        nonlocal body
        k = len(pages)
        commit = len(body)
        tail = b""
        if k in missed:
            commit |= 1 << 31
            if missed[k] is not None:
                commit |= 1 << 30
                tail = struct.pack("<Q" if commit_size == 8 else "<I", missed[k])
        head = struct.pack("<Q", page_ts) + struct.pack(
            "<Q" if commit_size == 8 else "<I", commit)
        page = (head + bytes(body) + tail).ljust(page_size, b"\xee")
        assert len(page) == page_size
        pages.append(page)
        body = bytearray()

    def encode(delta: int, data: bytes) -> bytes:
        out = bytearray()
        if delta >= (1 << 27) or (delta and rng.random() < 0.05):
            out += struct.pack("<II", 30 | ((delta & ((1 << 27) - 1)) << 5), delta >> 27)
            delta = 0
        elif rng.random() < 0.03:  # an absolute time stamp instead of the delta
            out += struct.pack("<II", 31 | ((stamp & ((1 << 27) - 1)) << 5),
                               (stamp >> 27) & 0xFFFFFFFF)
            delta = 0
        if rng.random() < 0.03:  # a discarded event of random length before this one
            ln = 4 * rng.randint(1, 20)
            out += struct.pack("<II", 29 | (0 << 5), ln) + b"\xdd" * (ln - 4)
        padded = data + b"\0" * (-len(data) % 4)
        if len(padded) <= 112 and rng.random() < 0.7:
            out += struct.pack("<I", (len(padded) // 4) | (delta << 5)) + padded
        else:
            out += struct.pack("<II", 0 | (delta << 5), len(data) + 4) + padded
        return bytes(out)

    for ts, data in records:
        stamp = ts
        if not body:
            page_ts = max(0, ts - rng.randint(0, 1000))
            last = page_ts
        enc = encode(ts - last, data)
        room = page_size - data_off - (commit_size if (len(pages) in missed) else 0)
        if len(body) + len(enc) > room:
            close()
            page_ts = max(0, ts - rng.randint(0, 1000))
            last = page_ts
            enc = encode(ts - last, data)
        body += enc
        last = ts
    if body or not pages:
        close()
    return b"".join(pages)
