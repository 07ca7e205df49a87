"""Linux tracefs text (``trace`` or ``trace_pipe``) of the block tracepoints
``block_rq_insert``, ``block_rq_issue``, ``block_rq_complete`` (and, when enabled,
``block_bio_queue``, merges, ``block_getrq``, ``block_split``, ``block_bio_remap``,
``block_rq_requeue``), in the line formats of old and new kernels (with or without the bytes
field and the ioprio triple). ``CPU:N [LOST M EVENTS]`` lines are counted as lost events."""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from blocklab.kernels import textparse as T
from blocklab.traces.io import Input

from .base import Chunk, Format, ReadContext
from .paired import ProcessNames, pair_stream
from .textevents import text_events

_EVENT = re.compile(rb"\[\d+\].*?\d+\.\d+: block_[a-z_]+: \d+,\d+ ")


def sniff(head: bytes) -> bool:
    return _EVENT.search(head) is not None


def read(inputs: list[Input], ctx: ReadContext) -> Iterator[Chunk]:
    (inp,) = inputs
    ctx.linux_devices = True
    names = ProcessNames()
    lost = np.zeros(1, dtype=np.int64)
    events = text_events(inp, ctx, names, "tracefs block event", T.parse_tracefs, lost=lost)
    # tracefs has no queue event unless block_bio_queue was enabled: a request first seen at
    # insert or issue is complete, only one first seen at completion began before the trace
    yield from pair_stream(events, names, ctx, expect_queue=False)
    ctx.count("lost_events", int(lost[0]))


FORMAT = Format(
    name="tracefs",
    description="Linux tracefs text of block_rq_insert/issue/complete (old and new kernels)",
    sniff=sniff,
    read=read,
    extensions=(".trace", ".txt"),
)
