"""``blocklab capture``: the counts its trace's metadata carries are the capture's own, every
one (docs/formats.md: lost_events, over_size_limit, skipped and incomplete always; flush_ends
when not zero). Unlike tests/test_capture.py this needs no root, fio or loop device: it runs
the metadata step on what the pairing counted."""

from __future__ import annotations

import types

from blocklab.kernels import pairing as K
from blocklab.pipeline.capture import _Capture
from blocklab.traces.formats.base import ReadContext
from blocklab.traces.formats.paired import Pairer
from blocklab.traces.store import TraceMeta


def _counts(ctx: ReadContext, stats: dict[str, dict[str, int]]) -> dict[str, int]:
    fake = types.SimpleNamespace(
        ctx=ctx, t0=0, devices=[], events_enabled=[], key=None,
        opts=types.SimpleNamespace(buffer_kb=1024, anonymize=False))
    decoder = types.SimpleNamespace(events=0, lost=[0, 0])
    meta = TraceMeta(source_format="tracefs-capture")
    _Capture._finish_meta(fake, meta, decoder, stats, "duration", 0, 0, 1.0, [])
    return meta.counts


def test_a_capture_writes_the_flush_ends_its_pairing_counted():
    """A capture without --bio-queue ends a flush sequence's row at its data step and counts
    the 0-byte completion that follows as flush_ends; _finish_meta wrote four counts by name
    and dropped it."""
    ctx = ReadContext()
    pairer = Pairer(expect_queue=False, ctx=ctx)
    pairer.st[K.ST_ENDS] = 3  # three flush ends that ended no waiting request
    pairer.sweep(final=True)
    ctx.count("over_size_limit", 2)
    stats = {"0": {"overrun": 4, "dropped": 1}}
    assert _counts(ctx, stats) == {"lost_events": 5, "over_size_limit": 2, "skipped": 0,
                                   "incomplete": 0, "flush_ends": 3}


def test_the_counts_always_written_are_there_at_zero():
    assert _counts(ReadContext(), {}) == {"lost_events": 0, "over_size_limit": 0,
                                          "skipped": 0, "incomplete": 0}
