"""Write blktrace binary files from ``struct blk_io_trace`` as documented in the kernel's
include/uapi/linux/blktrace_api.h, independently of blocklab's decoder (plain ``struct``).

Requests are described in plain Python and turned into the events the block layer would trace
(A, Q, M, G, I, D, R, X, C), so tests know exactly which requests a correct pairing must find.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

MAGIC = 0x65617400
# __BLK_TA_* codes
TA = {"Q": 1, "M": 2, "F": 3, "G": 4, "S": 5, "R": 6, "D": 7, "C": 8, "P": 9, "U": 10,
      "UT": 11, "I": 12, "X": 13, "B": 14, "A": 15}
# BLK_TC_* categories
TC_READ, TC_WRITE, TC_FLUSH, TC_SYNC = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TC_QUEUE, TC_REQUEUE, TC_ISSUE, TC_COMPLETE = 1 << 4, 1 << 5, 1 << 6, 1 << 7
TC_FS, TC_PC, TC_NOTIFY, TC_AHEAD, TC_META, TC_DISCARD = (
    1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12, 1 << 13)
TC_FUA = 1 << 15
_CAT_OF_ACTION = {"Q": TC_QUEUE, "M": TC_QUEUE, "F": TC_QUEUE, "G": TC_QUEUE, "I": TC_QUEUE,
                  "D": TC_ISSUE, "C": TC_COMPLETE, "R": TC_REQUEUE, "X": TC_QUEUE,
                  "A": TC_QUEUE, "P": TC_QUEUE, "U": TC_QUEUE, "UT": TC_QUEUE, "S": TC_QUEUE}


@dataclasses.dataclass
class Event:
    time: int
    action: str
    dev: int
    sector: int
    nbytes: int
    op: str  # read, write, discard, flush
    pid: int
    cpu: int
    flags: tuple[str, ...] = ()  # sync, fua, meta, rahead, preflush
    error: int = 0
    pdu: bytes = b""


def categories(op: str, flags: tuple[str, ...], action: str) -> int:
    cat = _CAT_OF_ACTION[action] | TC_FS
    if op == "write":
        cat |= TC_WRITE
    elif op == "read":
        cat |= TC_READ
    elif op == "discard":
        cat |= TC_DISCARD | TC_WRITE
    elif op == "flush":
        cat |= TC_FLUSH | TC_WRITE
    for f, bit in (("sync", TC_SYNC), ("fua", TC_FUA), ("meta", TC_META),
                   ("rahead", TC_AHEAD), ("preflush", TC_FLUSH)):
        if f in flags:
            cat |= bit
    return cat


def pack(ev: Event, seq: int, endian: str = "<", version: int = 7) -> bytes:
    """One record: the 48-byte header (version 7) then the payload."""
    action = TA[ev.action] | (categories(ev.op, ev.flags, ev.action) << 16)
    err = ev.error & 0xFFFF
    head = struct.pack(
        endian + "IIQQIIIIIHH", MAGIC | version, seq, ev.time, ev.sector, ev.nbytes, action,
        ev.pid, ev.dev, ev.cpu, err, len(ev.pdu),
    )
    return head + ev.pdu


def pack_process_note(pid: int, comm: str, cpu: int, time: int, seq: int, endian="<") -> bytes:
    """BLK_TN_PROCESS notify: the process name, NUL-padded to 16 bytes (TASK_COMM_LEN)."""
    pdu = comm.encode()[:15].ljust(16, b"\0")
    action = 0 | (TC_NOTIFY << 16)
    head = struct.pack(endian + "IIQQIIIIIHH", MAGIC | 7, seq, time, 0, 0, action, pid, 0, cpu,
                       0, len(pdu))
    return head + pdu


def split_pdu(new_sector: int) -> bytes:
    return struct.pack(">Q", new_sector)


def remap_pdu(dev_from: int, dev_to: int, sector_from: int) -> bytes:
    return struct.pack(">IIQ", dev_from, dev_to, sector_from)


@dataclasses.dataclass
class Request:
    """A request as the trace must yield it, with the events that trace it."""

    dev: int
    sector: int
    nbytes: int
    op: str
    pid: int
    cpu: int
    q: int
    g: int
    i: int
    d: int
    c: int
    flags: tuple[str, ...] = ()
    merged: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)  # (t, sector, bytes)
    requeue_at: int | None = None  # a requeue and second issue at this time (before c)
    remapped_from: int | None = None
    error: int = 0

    def events(self) -> list[Event]:
        first = self.nbytes - sum(b for _t, _s, b in self.merged)
        mk = lambda t, a, s, n, **kw: Event(t, a, self.dev, s, n, self.op, self.pid, self.cpu,  # noqa: E731
                                            self.flags, **kw)
        evs = []
        if self.remapped_from is not None:
            evs.append(mk(self.q, "A", self.sector, first,
                          pdu=remap_pdu(self.remapped_from, self.dev, self.sector + 2048)))
        evs.append(mk(self.q, "Q", self.sector, first))
        evs.append(mk(self.g, "G", self.sector, first))
        for t, s, b in self.merged:
            evs.append(mk(t, "Q", s, b))
            evs.append(mk(t, "M", s, b))
        evs.append(mk(self.i, "I", self.sector, self.nbytes))
        evs.append(mk(self.d, "D", self.sector, self.nbytes))
        if self.requeue_at is not None:
            evs.append(mk(self.requeue_at, "R", self.sector, self.nbytes))
            evs.append(mk(self.requeue_at + 1, "D", self.sector, self.nbytes))
        evs.append(mk(self.c, "C", self.sector, self.nbytes, error=self.error))
        return evs

    @property
    def last_issue(self) -> int:
        return self.requeue_at + 1 if self.requeue_at is not None else self.d


def write_percpu(base: Path, requests: list[Request], comms: dict[int, str], ncpu: int,
                 endian: str = "<", extra: list[Event] | None = None) -> list[Path]:
    """Write BASE.blktrace.N files, one per CPU, each in time order (as the kernel's per-CPU
    relay buffers are)."""
    events = [e for r in requests for e in r.events()] + list(extra or [])
    paths = []
    for cpu in range(ncpu):
        mine = sorted((e for e in events if e.cpu == cpu), key=lambda e: e.time)
        blob = bytearray()
        seq = 0
        if cpu == 0:
            for pid, comm in comms.items():
                blob += pack_process_note(pid, comm, 0, 0, seq, endian)
                seq += 1
        for e in mine:
            blob += pack(e, seq, endian)
            seq += 1
        p = Path(f"{base}.blktrace.{cpu}")
        p.write_bytes(bytes(blob))
        paths.append(p)
    return paths


def write_merged(path: Path, requests: list[Request], comms: dict[int, str],
                 endian: str = "<") -> Path:
    """One file with every event in time order (the layout of ``blkparse -d``)."""
    events = sorted((e for r in requests for e in r.events()), key=lambda e: e.time)
    blob = bytearray()
    seq = 0
    for pid, comm in comms.items():
        blob += pack_process_note(pid, comm, 0, 0, seq, endian)
        seq += 1
    for e in events:
        blob += pack(e, seq, endian)
        seq += 1
    path.write_bytes(bytes(blob))
    return path
