"""The driver shared by the event text formats (blkparse, tracefs): chunks of whole lines ->
kernel -> event matrices, with process names learned on the way and bad lines reported by
line number."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterator

import numpy as np

from blocklab.kernels import pairing as K
from blocklab.kernels import textparse as T
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

from .base import ReadContext
from .paired import ProcessNames

MESSAGES = {
    T.BAD_LINE: "not a {what} line",
    T.BAD_ACTION: "unknown action in a {what} line",
    T.BACKWARDS: "time runs backwards",
    T.BAD_SIZE: "absurd request size",
}


def text_events(
    inp: Input,
    ctx: ReadContext,
    names: ProcessNames,
    what: str,
    run: Callable[[np.ndarray, int, np.ndarray, np.ndarray, int], tuple[int, int, int, int, int]],
    prefetch: bool | None = None,
) -> Iterator[np.ndarray]:
    """Yield event matrices parsed from ``inp`` by ``run(buf, pos, events, comms, last)``.

    With ``prefetch`` (the default when there are worker threads: ``io.decode_threads``), the
    next chunk is parsed on a worker thread (the kernels release the GIL) while the current
    one is paired and written. It starts from the current chunk's last time, as the serial
    parse would, and its bad lines are reported here, in order: the results are the serial ones.
    """
    if prefetch is None:
        prefetch = decode_threads() > 0
    last = np.iinfo(np.int64).min
    chunks = text_blocks(inp, mapped=True)  # (the names are sliced from the buffer itself)
    # the event and name arrays, reused from chunk to chunk (io.ArrayRing; measured: the
    # parse of a 5 M-line blkparse text 0.76 -> 0.73 s); pair_stream takes copies of what it
    # keeps, so a set is free again once its chunk's events have been handed on
    arrays = ArrayRing(2 if prefetch else 1, (K.TE_NCOLS, 2))

    def start(item: tuple[np.ndarray, int, int] | None, last: int) -> _Chunk | None:
        if item is None:
            return None
        buf, first_line, lines = item
        job = _Chunk(buf, first_line, *arrays.take(lines + 1))
        if prefetch:
            job.result = decode_pool().submit(
                run, buf, 0, job.events.reshape(-1), job.comms.reshape(-1), last)
        return job

    job = start(next(chunks, None), last)
    while job is not None:
        buf, first_line, events, comms = job.buf, job.first_line, job.events, job.comms
        if job.result is not None:
            result = result_of(job.result)
        else:
            result = run(buf, 0, events.reshape(-1), comms.reshape(-1), last)
        filled = 0
        done = False
        while True:
            ne, pos, status, where, last = result
            filled += ne
            if status == T.OK:
                break
            if status == T.SUMMARY:
                done = True
                break
            idx, text = line_at(buf, where)
            ctx.bad(
                inp.name, MESSAGES[status].format(what=what) + f": {text!r}", line=first_line + idx
            )
            pos = next_line(buf, where)
            result = run(
                buf, pos, events[filled:].reshape(-1), comms[filled:].reshape(-1), last
            )
        # the next chunk parses while this one is paired (serially: after it, as before)
        nxt = start(next(chunks, None), last) if prefetch and not done else None
        if filled:
            _learn_names(buf, events[:filled], comms[:filled], names)
            yield events[:filled]
        if ctx.on_progress:
            ctx.on_progress()
        if done:
            return
        job = nxt if prefetch else start(next(chunks, None), last)


class _Chunk:
    """A chunk of whole lines and the arrays its events are parsed into."""

    def __init__(self, buf: np.ndarray, first_line: int, events: np.ndarray, comms: np.ndarray):
        self.buf = buf
        self.first_line = first_line
        self.events = events
        self.comms = comms
        self.result: concurrent.futures.Future | None = None


def _learn_names(buf: np.ndarray, events: np.ndarray, comms: np.ndarray, names: ProcessNames):
    names.learn(events, comms,
                lambda s, e: buf[s:e].tobytes().decode("utf-8", "replace").strip())
