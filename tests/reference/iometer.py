"""Plain-Python Iometer worker, written from Iometer's source (src/IOGrunt.cpp: a read when
Rand(100) < %read; src/IOTargetDisk.cpp TargetDisk::Seek: a random seek to
starting_position + Rand(size), or on from the last transfer; up to the next alignment
boundary; back to the start when the transfer would pass the end), drawing with the same
SplitMix64 as blocklab (tests/reference/ior.py)."""

from __future__ import annotations

from .ior import SplitMix64


def worker(seed, n, transfer, read_pct, random_pct, align, start_sector, size_sectors):
    """The worker's n I/Os as (op, byte offset): op 0 read, 1 write."""
    rng = SplitMix64(seed)
    lo = start_sector * 512
    end = lo + size_sectors * 512
    align = align or 512
    offset, last = lo, 0
    out = []
    for _ in range(n):
        is_read = rng.below(100) < read_pct
        if rng.below(100) < random_pct:
            offset = lo + rng.below(size_sectors * 512)
        else:
            offset += last
        if offset % align:
            offset += align - offset % align
        if offset + transfer > end:
            offset = lo
            if offset % align:
                offset += align - offset % align
        last = transfer
        out.append((0 if is_read else 1, offset))
    return out
