"""blkparse default text output (``blkparse -i NAME``): one event per line, paired into
requests; the per-CPU and total summary blkparse prints at the end is skipped."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ...kernels import textparse as T
from ..io import Input
from .base import Chunk, Format, ReadContext
from .paired import ProcessNames, pair_stream
from .textevents import text_events

_LINE = re.compile(rb"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d{9}\s+\d+\s+[A-Z]{1,2}\s+[A-Z]+", re.M)


def sniff(head: bytes) -> bool:
    lines = [ln for ln in head.split(b"\n")[:20] if ln.strip()]
    if not lines:
        return False
    hits = sum(1 for ln in lines if _LINE.match(ln))
    return hits >= max(1, len(lines) // 2)


def read(inputs: list[Input], ctx: ReadContext) -> Iterator[Chunk]:
    (inp,) = inputs
    ctx.linux_devices = True
    names = ProcessNames()
    events = text_events(inp, ctx, names, "blkparse", T.parse_blkparse)
    yield from pair_stream(events, names, ctx, expect_queue=True)


FORMAT = Format(
    name="blkparse",
    description="blkparse default text output (one event per line; summary skipped)",
    sniff=sniff,
    read=read,
    extensions=(".blkparse",),
)
