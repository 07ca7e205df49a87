"""The driver shared by the event text formats (blkparse, tracefs): chunks of whole lines ->
kernel -> event matrices, with process names learned on the way and bad lines reported by
line number."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from blocklab.kernels import pairing as K
from blocklab.kernels import textparse as T
from blocklab.traces.io import Input, line_at, next_line, text_chunks

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
) -> Iterator[np.ndarray]:
    """Yield event matrices parsed from ``inp`` by ``run(buf, pos, events, comms, last)``."""
    last = np.iinfo(np.int64).min
    for buf, first_line in text_chunks(inp):
        cap = buf.base.count(b"\n") + 1  # buf views a bytes object: bytes.count is fast
        events = np.empty((cap, K.EV_NCOLS), dtype=np.int64)
        comms = np.empty((cap, 2), dtype=np.int64)
        pos = 0
        filled = 0
        done = False
        while True:
            ne, pos, status, where, last = run(
                buf, pos, events[filled:].reshape(-1), comms[filled:].reshape(-1), last
            )
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
        if filled:
            _learn_names(buf, events[:filled], comms[:filled], names)
            yield events[:filled]
        if ctx.on_progress:
            ctx.on_progress()
        if done:
            return


def _learn_names(buf: np.ndarray, events: np.ndarray, comms: np.ndarray, names: ProcessNames):
    has = (comms[:, 0] >= 0) & (events[:, K.EV_PID] > 0)
    if not has.any():
        return
    idx = np.nonzero(has)[0]
    pids = events[idx, K.EV_PID]
    # the last name seen for each pid in this chunk
    rev_pids = pids[::-1]
    uniq, first_rev = np.unique(rev_pids, return_index=True)
    last_idx = idx[::-1][first_rev]
    raw = buf.base if isinstance(buf.base, bytes) else buf.tobytes()
    found = []
    for k in last_idx.tolist():
        s, e = int(comms[k, 0]), int(comms[k, 1])
        found.append(raw[s:e].decode("utf-8", "replace").strip())
    names.update(uniq.tolist(), found)
