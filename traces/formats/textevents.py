"""The driver shared by the event text formats (blkparse, tracefs): chunks of whole lines ->
kernel -> event matrices, with process names learned on the way and bad lines reported by
line number."""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Callable, Iterator

import numpy as np

from blocklab.kernels import pairing as K
from blocklab.kernels import textparse as T
from blocklab.kernels.bytescan import count_lines
from blocklab.traces.io import (
    ArrayRing,
    Input,
    decode_pool,
    decode_threads,
    line_at,
    next_line,
    result_of,
    text_blocks,
)
from blocklab.traces.safety import critical

from .base import ReadContext
from .paired import ProcessNames, named_rows

MESSAGES = {
    T.BAD_LINE: "not a {what} line",
    T.BAD_ACTION: "unknown action in a {what} line",
    T.BACKWARDS: "time runs backwards",
    T.BAD_SIZE: "absurd request size",
}


#: Chunks parsed ahead of the one being paired, when there are worker threads. With one, the
#: parse thread waited for the main thread to hand it the next chunk after every chunk: with
#: two it always has one queued (the bench's 5 M-line blkparse text, in process: 1.00-1.08 s
#: -> 0.88-0.89 s; three gave no more).
AHEAD = 2


def text_events(
    inp: Input,
    ctx: ReadContext,
    names: ProcessNames,
    what: str,
    run: Callable[..., tuple[int, int, int, int, int, int, bool]],
    prefetch: bool | None = None,
    lost: np.ndarray | None = None,
) -> Iterator[np.ndarray]:
    """Yield event matrices parsed from ``inp`` by ``run(buf, pos, events, comms, last,
    lost)`` (a kernels/textparse parser; ``lost[0]`` counts what the format says was lost,
    added to the caller's ``lost`` once per chunk).

    With ``prefetch`` (the default when there are worker threads: ``io.decode_threads``), the
    next ``AHEAD`` chunks are parsed on a worker thread (the kernels release the GIL) while the
    current one is paired and written. The first of them starts from the current chunk's last
    time, as the serial parse would; the others start before the chunk before theirs has been
    parsed, with no last time (``T.NO_TIME``), and are taken only if the first time they
    checked is at least that chunk's last; else (a chunk whose first line runs backwards, or
    stops before a time: rare) the chunk is parsed again, serially. Bad lines are reported
    here, in order: the results are the serial ones.
    """
    if prefetch is None:
        prefetch = decode_threads() > 0
    last = T.NO_TIME
    # (the names are sliced from the buffer itself; the lines are counted by ``_Chunk.parse``)
    chunks = text_blocks(inp, mapped=True, count=False)
    # the event and name arrays, reused from chunk to chunk (io.ArrayRing; measured: the
    # parse of a 5 M-line blkparse text 0.76 -> 0.73 s); pair_stream takes copies of what it
    # keeps, so a set is free again once its chunk's events have been handed on
    arrays = ArrayRing(AHEAD + 1 if prefetch else 1, (K.TE_NCOLS, 2))
    ahead: collections.deque[_Chunk] = collections.deque()

    def start(item: tuple[np.ndarray, int, int] | None, last: int) -> _Chunk | None:
        if item is None:
            return None
        job = _Chunk(item[0], arrays, arrays.next_slot(), run, last)
        if prefetch:
            job.result = decode_pool().submit(job.parse, last)
        return job

    first_line = 1
    try:
        job = start(next(chunks, None), last)
        while job is not None:
            buf = job.buf
            result = result_of(job.result) if job.result is not None else None
            if result is None or not _serial(result, job.last, last):
                result = job.parse(last)
            events, comms, named = job.events, job.comms, job.named
            filled = 0
            done = False
            while True:
                ne, pos, status, where, last, _first, _checked = result
                filled += ne
                if status == T.OK:
                    break
                if status == T.SUMMARY:
                    done = True
                    break
                named = None  # (found for the rows before the first bad line only)
                idx, text = line_at(buf, where)
                ctx.bad(inp.name, MESSAGES[status].format(what=what) + f": {text!r}",
                        line=first_line + idx)
                pos = next_line(buf, where)
                result = run(buf, pos, events[filled:].reshape(-1),
                             comms[filled:].reshape(-1), last, job.lost)
            if lost is not None:
                lost[0] += job.lost[0]
            # the next chunks parse while this one is paired (serially: after it, as before)
            while prefetch and not done and len(ahead) < AHEAD:
                nxt = start(next(chunks, None), T.NO_TIME if ahead else last)
                if nxt is None:
                    break
                ahead.append(nxt)
            if filled:
                if named is None:
                    named = named_rows(events[:filled], comms[:filled])
                names.learn_rows(named, comms, _name_in(buf))
                yield events[:filled]
            if ctx.on_progress:
                ctx.on_progress()
            if done:
                return
            first_line += job.lines
            job = ahead.popleft() if ahead else (
                None if prefetch else start(next(chunks, None), last))
    finally:
        _settle(ahead)


def _serial(result: tuple[int, ...], assumed: int, last: int) -> bool:
    """Whether ``result``, of a parse started from the last time ``assumed``, is the one a
    parse from ``last`` gives: the same start, or a first time checked that ``last`` passes
    too (everything after it depends only on the chunk's own lines). Whether a time was
    checked is the parser's flag, not ``first != NO_TIME``: a line whose time was NO_TIME (a
    time that overflowed int64 wrapped to it, before parse_fixed refused those) passed unseen,
    and the line after it was taken for the first (found by review)."""
    _ne, _pos, _status, _where, _last, first, checked = result
    return assumed == last or (bool(checked) and first >= last)


def _settle(ahead: collections.deque[_Chunk]) -> None:
    """Cancel the parses not started, and wait for those running (milliseconds): none is
    left reading a chunk's buffer or arrays after the reader has stopped (an error, the
    summary, Ctrl-C)."""
    for job in ahead:
        if job.result is not None:
            job.result.cancel()
    with critical(raise_at_end=False):  # (a signal cutting the wait: see io.result_of)
        for job in ahead:
            if job.result is not None and not job.result.cancelled():
                concurrent.futures.wait([job.result])
    ahead.clear()


class _Chunk:
    """A chunk of whole lines, the arrays its events are parsed into (a slot of ``arrays``)
    and, once parsed, the last named row of each process."""

    def __init__(self, buf: np.ndarray, arrays: ArrayRing, slot: int,
                 run: Callable[..., tuple[int, int, int, int, int, int, bool]], last: int):
        self.buf = buf
        self.arrays = arrays
        self.slot = slot
        self.run = run
        self.last = last  # the last time its parse started from
        self.lines = -1
        self.events = self.comms = np.empty((0, 0), dtype=np.int64)
        self.named: tuple[np.ndarray, np.ndarray] | None = None
        self.lost = np.zeros(1, dtype=np.int64)
        self.result: concurrent.futures.Future | None = None

    def parse(self, last: int) -> tuple[int, int, int, int, int, int, bool]:
        """Parse the chunk from the last time ``last`` (on a worker thread, or again on the
        reader's): its lines counted and its arrays sized the first time, then the parser,
        then, when it stopped at no bad line, the last named rows (``paired.named_rows``).
        Counting and naming were 0.10 and 0.16 s of the reader's thread, which also pairs
        and writes (a 5 M-line blkparse text); here they run beside it. The pairing then
        reads the events from the other core's cache and takes some of that back: the whole
        command went from 1.615 to 1.54 s (the median of 8 runs, alternating with the code
        before, same output), its CPU time 2.29 -> 2.16 s."""
        if self.lines < 0:
            self.lines = int(count_lines(self.buf))
            self.events, self.comms = self.arrays.take_at(self.slot, self.lines + 1)
        self.lost[0] = 0
        result = self.run(self.buf, 0, self.events.reshape(-1), self.comms.reshape(-1), last,
                          self.lost)
        ne, status = result[0], result[2]
        self.named = (named_rows(self.events[:ne], self.comms[:ne])
                      if status in (T.OK, T.SUMMARY) else None)
        return result


def _name_in(buf: np.ndarray) -> Callable[[int, int], str]:
    """The text of the name at bytes ``[s, e)`` of ``buf``."""
    return lambda s, e: buf[s:e].tobytes().decode("utf-8", "replace").strip()
