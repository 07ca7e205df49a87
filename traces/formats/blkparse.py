"""blkparse default text output (``blkparse -i NAME``): one event per line, paired into
requests; the per-CPU and total summary blkparse prints at the end is skipped."""

from __future__ import annotations

import re
from collections.abc import Iterator

from blocklab.kernels import textparse as T
from blocklab.traces.io import PEEK_BYTES, Input

from .base import Chunk, Format, ReadContext, mostly
from .paired import ProcessNames, pair_stream
from .textevents import text_events

_LINE = re.compile(rb"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d{9}\s+\d+\s+[A-Za-z]{1,2}\s+[A-Z]+")


_SUMMARY = re.compile(rb"^(CPU\d+ \(|Total \()")


def sniff(head: bytes) -> bool:
    """Event lines up to blkparse's closing summary (if it is within the head)."""
    lines = [ln for ln in head.split(b"\n")[:40] if ln.strip()]
    if len(head) >= PEEK_BYTES:
        lines = lines[:-1]  # the last line may be cut
    events = []
    for ln in lines:
        if _SUMMARY.match(ln):
            break
        events.append(ln)
    return mostly(events, _LINE.match)


def read(inputs: list[Input], ctx: ReadContext) -> Iterator[Chunk]:
    (inp,) = inputs
    ctx.linux_devices = True
    names = ProcessNames()
    events = text_events(inp, ctx, names, "blkparse", _parse)
    yield from pair_stream(events, names, ctx, expect_queue=True)


def _parse(buf, pos, events, comms, last, _lost):
    """``text_events``' parser: blkparse text says nothing of lost events."""
    return T.parse_blkparse(buf, pos, events, comms, last)


FORMAT = Format(
    name="blkparse",
    description="blkparse default text output (one event per line; summary skipped)",
    sniff=sniff,
    read=read,
    extensions=(".blkparse",),
)
