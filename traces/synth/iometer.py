"""Iometer: one access specification run by W workers on one disk target, closed loop.

An Iometer access specification line gives the transfer size, the percentage of reads, the
percentage of random accesses and the alignment ("align I/Os on", 0 = sector boundaries); the
worker's disk target gives the outstanding I/Os, the starting disk sector and the maximum disk
size in sectors (0 = the whole disk). Per I/O, as Iometer's Grunt (src/IOGrunt.cpp) and
``TargetDisk::Seek`` (src/IOTargetDisk.cpp) do: a read when Rand(100) < %read; a random seek
when Rand(100) < %random, to start + Rand(size) bytes, otherwise just after the worker's
previous transfer; the offset moves up to the next multiple of the alignment, and back to the
start when the transfer would pass the end. Each worker keeps its own position and random
sequence (SplitMix64 seeded with seed + worker).

Each worker is a stream (``stream`` = worker) with ``outstanding`` I/Os in flight, ``requests``
I/Os each; rows interleave the workers (worker 0's k-th I/O, worker 1's k-th, ...). Bursts and
transfer delays, replies (network targets) and access specifications of several lines are not
modelled. Sizes are in bytes and must be whole sectors (512 B).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from blocklab.kernels import synth as K
from blocklab.traces.errors import BlocklabError

from . import CHUNK_ROWS, SECTOR, Fill, chunks, seed_state


@dataclasses.dataclass(frozen=True)
class IometerPlan:
    transfer: int
    read_pct: int
    random_pct: int
    align: int  # bytes; 0 = sector boundaries
    outstanding: int
    workers: int
    requests: int  # per worker
    start_sector: int
    size_sectors: int  # the range accessed, from start_sector
    seed: int
    capacity_sectors: int

    def extra(self) -> dict[str, Any]:
        return {
            "generator": "iometer",
            "options": {"transfer_size": self.transfer, "read_pct": self.read_pct,
                        "random_pct": self.random_pct, "align": self.align,
                        "outstanding": self.outstanding, "workers": self.workers,
                        "requests": self.requests, "starting_sector": self.start_sector,
                        "disk_sectors": self.size_sectors,
                        "capacity_sectors": self.capacity_sectors, "seed": self.seed},
            "seed": self.seed,
        }

    def batches(self, chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
        return chunks(self.kernel(), True, chunk_rows)

    def kernel(self) -> Fill:
        """The generator's state and a ``fill(columns, cap) -> (rows, done)`` over it."""
        w = self.workers
        rng = seed_state(self.seed, w)
        lo = self.start_sector * SECTOR
        offset = np.full(w, lo, dtype=np.int64)
        last = np.zeros(w, dtype=np.int64)
        state = np.zeros(2, dtype=np.int64)
        align = self.align or SECTOR

        def fill(c: dict[str, np.ndarray], cap: int) -> tuple[int, int]:
            return K.iometer_fill(rng, offset, last, state, w, self.requests, self.transfer,
                                  self.read_pct, self.random_pct, align, lo,
                                  self.size_sectors * SECTOR, self.outstanding, c["t_ns"],
                                  c["dev"], c["sector"], c["nbytes"], c["op"], c["stream"],
                                  c["seq"], c["phase"], c["outst"], cap)

        return fill


def plan(transfer: int, read_pct: int, random_pct: int, align: int, outstanding: int,
         workers: int, requests: int, start_sector: int, disk_sectors: int, seed: int,
         capacity_sectors: int) -> IometerPlan:
    for name, v in (("--read-pct", read_pct), ("--random-pct", random_pct)):
        if not 0 <= v <= 100:
            raise BlocklabError(f"{name}: a percentage from 0 to 100, found {v}")
    if transfer <= 0 or transfer % SECTOR:
        raise BlocklabError(f"--transfer-size: must be a positive multiple of {SECTOR} bytes, "
                            f"found {transfer}")
    if align < 0 or align % SECTOR:
        raise BlocklabError(f"--align: must be 0 (sector boundaries) or a multiple of {SECTOR} "
                            f"bytes, found {align}")
    if outstanding < 1 or outstanding > 65535:
        raise BlocklabError(f"--outstanding: from 1 to 65535, found {outstanding}")
    for name, v in (("--workers", workers), ("--requests", requests)):
        if v < 1:
            raise BlocklabError(f"{name}: must be at least 1, found {v}")
    if seed < 0:
        raise BlocklabError(f"--seed: must be a whole number >= 0, found {seed}")
    if not 0 <= start_sector < capacity_sectors:
        raise BlocklabError(f"--starting-sector: {start_sector} is not within the volume's "
                            f"{capacity_sectors} sectors")
    if disk_sectors < 0:
        raise BlocklabError(f"--disk-sectors: must be 0 (all) or positive, found {disk_sectors}")
    # Iometer: a starting sector shrinks the accessible size to what is left of the disk
    size = capacity_sectors - start_sector
    if disk_sectors:
        size = min(size, disk_sectors)
    a = align or SECTOR
    first = -(-start_sector * SECTOR // a) * a
    if first + transfer > (start_sector + size) * SECTOR:
        raise BlocklabError(
            f"--transfer-size: a {transfer}-byte transfer aligned on {a} bytes does not fit "
            f"the {size} sectors accessed from sector {start_sector}")
    return IometerPlan(transfer, read_pct, random_pct, align, outstanding, workers, requests,
                       start_sector, size, seed, capacity_sectors)
