"""blktrace binary: per-CPU ``NAME.blktrace.N`` sets merged by time, or one merged dump
(``blkparse -d``); native or byte-swapped; record versions 7 and 8. Events are paired into
requests (see ``traces.formats.paired``)."""

from __future__ import annotations

import concurrent.futures
import struct
from collections.abc import Iterator

import numpy as np

from blocklab.kernels import blktrace_decode as D
from blocklab.kernels import pairing as K
from blocklab.traces.io import (
    CHUNK_BYTES,
    ArrayRing,
    Input,
    decode_pool,
    decode_threads,
    result_of,
)

from .base import Chunk, Format, ReadContext
from .paired import ProcessNames, pair_stream

_MESSAGES = {
    D.BAD_MAGIC: "bad magic: not a blktrace record (expected 0x656174NN)",
    D.BAD_VERSION: "unsupported blktrace record version (this reads 7 and 8)",
    D.BAD_ACTION: "unknown blktrace action code",
    D.BACKWARDS: "time runs backwards within this file",
    D.BAD_SIZE: "absurd request size (over 1 TiB)",
}


def byte_order(head: bytes) -> int:
    """0 for a little-endian blktrace record at the start of ``head``, 1 for big-endian,
    -1 when the first 4 bytes are not a blktrace magic (0x656174NN, version 7 or 8)."""
    if len(head) < 4:
        return -1
    for swap, order in enumerate(("<", ">")):
        (magic,) = struct.unpack(order + "I", head[:4])
        if magic & 0xFFFFFF00 == D.MAGIC and magic & 0xFF in (7, 8):
            return swap
    return -1


def _record_length(raw: bytes | np.ndarray, at: int, swap: int) -> int:
    """Header plus payload length of the (well-formed) record at ``at``."""
    order = ">" if swap else "<"
    head = bytes(raw[at : at + D.HDR8])  # (bytes read, or a window of the file's map)
    (magic,) = struct.unpack_from(order + "I", head)
    if magic & 0xFF == 8:
        return D.HDR8 + struct.unpack_from(order + "H", head, 50)[0]
    return D.HDR7 + struct.unpack_from(order + "H", head, 46)[0]


def sniff(head: bytes) -> bool:
    return byte_order(head) >= 0


class _Job:
    """One chunk of a file being decoded: its bytes, where the kernel's first run stopped."""

    def __init__(self, buf_bytes: bytes | np.ndarray, events: np.ndarray, notes: np.ndarray,
                 eof: bool):
        self.buf_bytes = buf_bytes  # bytes read, or a window of the file's map (Input.mapped)
        self.buf = (buf_bytes if isinstance(buf_bytes, np.ndarray)
                    else np.frombuffer(buf_bytes, dtype=np.uint8))
        self.events = events
        self.notes = notes
        self.eof = eof
        self.result: concurrent.futures.Future | None = None


class _Decoder:
    """One input file's decoding state: carry-over bytes, pending events, last time.

    With ``prefetch``, the next chunk's bytes are read and handed to the decode kernel on a
    worker thread (the kernel releases the GIL) as soon as the current chunk is decoded, so
    decoding overlaps with the pairing and writing of the current chunk, and the per-CPU files
    of a set decode side by side. Everything else (errors, notes, the carry-over) is handled on
    the calling thread in file order, so the events, errors and offsets are the serial ones.
    """

    def __init__(self, inp: Input, index: int, ctx: ReadContext, names: ProcessNames,
                 prefetch: bool = False):
        self.inp = inp
        self.index = index
        self.ctx = ctx
        self.names = names
        self.carry = b""
        self.base = 0  # file offset of carry[0]
        self.last_time = 0
        self.eof = False
        self.swap = -1
        self.prefetch = prefetch
        self.pending = np.empty((0, K.TE_NCOLS), dtype=np.int64)
        # event and note buffers, reused across chunks (fresh pages cost page faults); two
        # when prefetching: one holds the chunk being consumed, the other the next one
        self._arrays = ArrayRing(2 if prefetch else 1, (K.TE_NCOLS, D.NOTE_NCOLS))
        self._next: _Job | None = None
        # a regular uncompressed file is read through a map of it: each chunk a window, no
        # copies, and a record cut by the window's end is where the next window starts
        self.map = inp.mapped()
        self.window = CHUNK_BYTES  # (with the map) the next window's length
        self.resync = False  # the last chunk ended in bad bytes, searching for a header

    def _read(self) -> _Job:
        """Read the next chunk (after the carry-over) on this thread."""
        buf_bytes: bytes | np.ndarray
        if self.map is not None:
            start = self.base  # (_finish has moved it past the last chunk's whole records)
            end = min(start + self.window, len(self.map))
            buf_bytes = self.map[start:end]
            eof = end == len(self.map)
            self.inp.mapped_upto(end, start)  # (the chunks before it are decoded)
        else:
            data = self.inp.read(CHUNK_BYTES)
            eof = not data
            buf_bytes = self.carry + data
        if self.swap < 0 and len(buf_bytes) >= 4:
            swap = byte_order(bytes(buf_bytes[:4]))
            if swap < 0:
                self.ctx.bad(self.inp.name, _MESSAGES[D.BAD_MAGIC], offset=self.base)
                swap = 0
            self.swap = swap
        events, notes = self._arrays.take(len(buf_bytes) // D.HDR7 + 1)
        return _Job(buf_bytes, events, notes, eof)

    def _run(self, job: _Job) -> tuple[int, int, int, int, int, int]:
        return D.decode(job.buf, 0, max(self.swap, 0), job.events.reshape(-1), job.notes,
                        self.last_time, job.eof)

    def _submit(self, job: _Job) -> None:
        # the arguments are taken now, on this thread: the worker reads no decoder state
        job.result = decode_pool().submit(
            D.decode, job.buf, 0, max(self.swap, 0), job.events.reshape(-1), job.notes,
            self.last_time, job.eof)

    def decode_more(self) -> None:
        """Decode the next chunk of the file into ``pending``."""
        if len(self.pending):
            # events left at the merge's horizon (``_merged_events``): a view of a reused
            # buffer that the next chunk may be decoded into; a few, kept apart
            self.pending = self.pending.copy()
        job = self._next if self._next is not None else self._read()
        self._next = None
        first = result_of(job.result) if job.result is not None else self._run(job)
        self._finish(job, first)
        if self.prefetch and not self.eof:
            # the next chunk decodes while this one is paired; its kernel starts from this
            # chunk's last time, as the serial decode would
            self._next = self._read()
            self._submit(self._next)

    def _finish(self, job: _Job, first: tuple[int, int, int, int, int, int]) -> None:
        """Handle the kernel's stops (bad records, the end of the buffer) in file order."""
        if job.eof:
            self.eof = True
        buf_bytes, buf, events, notes = job.buf_bytes, job.buf, job.events, job.notes
        flat = events.reshape(-1)
        filled = 0
        result = first
        resync, self.resync = self.resync, False
        while True:
            ne, nn, pos, status, where, self.last_time = result
            filled += ne
            if nn:
                self._notes(buf_bytes, notes[:nn])
            if status == D.OK:
                break
            if status == D.NEED_MORE:
                if self.eof:
                    self.ctx.bad(
                        self.inp.name,
                        f"truncated record: {len(buf) - where} bytes left, header or payload cut",
                        offset=self.base + where,
                    )
                    pos = len(buf)
                break
            if not (resync and status == D.BAD_MAGIC and where == 0):
                self.ctx.bad(self.inp.name, _MESSAGES[status], offset=self.base + where)
            # (else: the bad bytes the last chunk ended in, already reported, go on here)
            resync = False
            if status == D.BACKWARDS or status == D.BAD_ACTION or status == D.BAD_SIZE:
                pos = where + _record_length(buf_bytes, where, self.swap)  # well formed: step over
            else:
                pos = int(D.find_magic(buf, where, max(self.swap, 0)))
                if pos == len(buf) and not self.eof:
                    # no header starts before the chunk's end: the next chunk starts with its
                    # last 3 bytes, which may begin one, and goes on searching without a
                    # second report (else a record whose magic the end cut was lost, and
                    # where the chunks end changed the trace)
                    pos = max(where + 1, len(buf) - 3)
                    self.resync = True
            result = D.decode(
                buf, pos, max(self.swap, 0), flat[filled * K.TE_NCOLS :], notes, self.last_time,
                self.eof,
            )
        if self.map is None:
            self.carry = buf_bytes[pos:]  # type: ignore[assignment]
        else:
            # the next window starts at base; one that held no whole record (a record longer
            # than a chunk: only with the tests' small chunks) is followed by a longer one, as
            # the carry-over grows when reading
            self.window = self.window * 2 if pos == 0 and not self.eof else CHUNK_BYTES
        self.base += pos
        if filled:
            # a view of a reused buffer (decode_more copies what is left of it before it
            # decodes into the buffer again)
            new = events[:filled]
            self.pending = np.concatenate([self.pending, new]) if len(self.pending) else new
        if self.ctx.on_progress:
            self.ctx.on_progress()

    def _notes(self, raw: bytes | np.ndarray, notes: np.ndarray) -> None:
        pids, comms = [], []
        for kind, pid, off, length, t in notes.tolist():
            payload = bytes(raw[off : off + length])
            if kind == 0:  # BLK_TN_PROCESS: the process name
                pids.append(pid)
                comms.append(payload.split(b"\0", 1)[0].decode("utf-8", "replace"))
            elif kind == 1 and len(payload) >= 8 and self.ctx.start_unix_ns is None:
                # BLK_TN_TIMESTAMP: wall-clock time at the trace's time 0
                order = ">" if self.swap else "<"
                sec, nsec = np.frombuffer(payload[:8], dtype=f"{order}u4").tolist()
                self.ctx.start_unix_ns = int(sec) * 1_000_000_000 + int(nsec) - int(t)
        if pids:
            self.names.update(pids, comms)


def _merged_events(decoders: list[_Decoder]) -> Iterator[np.ndarray]:
    """Events of all files merged by time, released up to the earliest file's horizon."""
    live = list(decoders)
    while live:
        for d in live:
            while len(d.pending) == 0 and not d.eof:
                d.decode_more()
        live = [d for d in live if len(d.pending) or not d.eof]
        if not live:
            return
        if len(live) == 1:
            # one file left (or a merged dump): its events are in time order already (the
            # decoder refuses a step back), so all of them go, without the horizon's search
            # (over a strided column: a copy of it) and the merge keys below
            d = live[0]
            ev, d.pending = d.pending, d.pending[:0]
            yield ev
            if not d.eof:
                d.decode_more()
            continue
        waiting = [d for d in live if not d.eof]
        horizon = min(int(d.pending[-1, K.TE_TIME]) for d in waiting) if waiting else None
        parts, keys = [], []
        for d in live:
            if horizon is None:
                take = len(d.pending)
            else:
                # before the horizon only: a file whose pending events end at the horizon may
                # have more at that time in its next chunk, and events of one time go out
                # together, by file, whatever the chunks (a per-CPU set's ties were ordered by
                # where its chunks ended)
                take = int(np.searchsorted(d.pending[:, K.TE_TIME], horizon, side="left"))
            if take:
                parts.append(d.pending[:take])
                keys.append(np.full(take, d.index))
                d.pending = d.pending[take:]
        if len(parts) == 1:
            yield parts[0]
        elif parts:
            ev = np.concatenate(parts)
            order = np.lexsort((np.concatenate(keys), ev[:, K.TE_TIME]))  # stable per file
            yield ev[order]
        # a file with nothing left before the horizon decodes more: the one whose events
        # end at the horizon too, else the horizon would not move
        for d in live:
            if not d.eof and (len(d.pending) == 0 or int(d.pending[-1, K.TE_TIME]) == horizon):
                d.decode_more()


#: Files of a set decoded ahead on worker threads; a larger set decodes serially, so that
#: its two buffers per file (some 30 MB each) stay few.
PREFETCH_FILES = 8


def read(inputs: list[Input], ctx: ReadContext, prefetch: bool | None = None) -> Iterator[Chunk]:
    ctx.linux_devices = True
    names = ProcessNames()
    if prefetch is None:
        prefetch = decode_threads() > 0 and len(inputs) <= PREFETCH_FILES
    decoders = [_Decoder(inp, i, ctx, names, prefetch) for i, inp in enumerate(inputs)]
    yield from pair_stream(_merged_events(decoders), names, ctx, expect_queue=True)


FORMAT = Format(
    name="blktrace",
    description="blktrace binary: per-CPU NAME.blktrace.N sets or a blkparse -d dump, v7/v8",
    sniff=sniff,
    read=read,
    binary=True,
    groups_files=True,
    extensions=(".blktrace", ".bin"),
)
