"""Orion (Oracle's I/O calibration tool): small random I/Os against large I/Os over a matrix of
outstanding counts, closed loop.

Orion's test is a matrix of data points: a point is (small outstanding I/Os, large outstanding
I/Os). Small I/Os are random, ``--size-small`` (default 8 KiB, Orion's ``-size_small``); large
I/Os (``--size-large``, default 1 MiB, Orion's ``-size_large``) are random or, with
``--type seq``, sequential streams: then the large count is the number of streams, each with
``--num-streamio`` I/Os in flight (Orion's ``-num_streamIO``, default 4). ``--write`` is the
percentage of writes (Orion's ``-write``, default 0). ``--matrix`` picks the points, as Orion's
``-matrix``:

- basic: small I/Os alone at each small level, then large I/Os alone at each large level;
- detailed: every combination of small level 0..num_small and large level 0..num_large;
- row: every small level with num_large large; col: every large level with num_small small;
- point: the one point (num_small, num_large);
- max: the last row and the last column (every small level with num_large, every large
  level with num_small).

Levels run 1, 2, ... up to ``--num-small`` and ``--num-large``; blocklab's defaults for these are
5 and 2 per disk (``--num-disks``), so the matrix spans light load to saturation. Each point is a
phase (a barrier: Orion runs its points one after the other); in a point, the small I/Os are
one stream with ``small`` outstanding, large random I/Os one stream with ``large`` outstanding,
each sequential stream a stream of its own. Orion runs every point for a fixed time; a trace
must fix a count instead: each stream issues ``--requests-per-slot`` I/Os per outstanding slot.
Stream ids count up through the trace (a point's small stream first). Offsets are aligned to the
I/O's size over the whole volume; a sequential stream starts at a random aligned offset and
wraps at the end.
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

MATRICES = ("basic", "detailed", "row", "col", "point", "max")
TYPES = ("rand", "seq")
DEFAULT_SMALL = 8 << 10  # Orion -size_small default (KiB 8)
DEFAULT_LARGE = 1 << 20  # Orion -size_large default (KiB 1024)
DEFAULT_STREAM_IO = 4  # Orion -num_streamIO default
SMALL_PER_DISK, LARGE_PER_DISK = 5, 2  # blocklab's default top levels per disk


def matrix_points(matrix: str, num_small: int, num_large: int) -> list[tuple[int, int]]:
    """The (small, large) outstanding counts of each point, in the order they run."""
    s_all = range(num_small + 1)
    l_all = range(num_large + 1)
    if matrix == "basic":
        pts = [(s, 0) for s in range(1, num_small + 1)] + [(0, n) for n in range(1, num_large + 1)]
    elif matrix == "detailed":
        pts = [(s, n) for n in l_all for s in s_all]
    elif matrix == "row":
        pts = [(s, num_large) for s in s_all]
    elif matrix == "col":
        pts = [(num_small, n) for n in l_all]
    elif matrix == "point":
        pts = [(num_small, num_large)]
    else:  # max
        pts = [(s, num_large) for s in s_all] + [(num_small, n) for n in l_all
                                                 if n != num_large]
    return [p for p in pts if p != (0, 0)]


@dataclasses.dataclass(frozen=True)
class OrionPlan:
    matrix: str
    large_type: str
    size_small: int
    size_large: int
    num_disks: int
    num_small: int
    num_large: int
    num_streamio: int
    write_pct: int
    per_slot: int
    seed: int
    capacity_sectors: int
    points: tuple[tuple[int, int], ...]

    def extra(self) -> dict[str, Any]:
        return {
            "generator": "orion",
            "options": {"matrix": self.matrix, "type": self.large_type,
                        "size_small": self.size_small, "size_large": self.size_large,
                        "num_disks": self.num_disks, "num_small": self.num_small,
                        "num_large": self.num_large, "num_streamio": self.num_streamio,
                        "write_pct": self.write_pct, "requests_per_slot": self.per_slot,
                        "capacity_sectors": self.capacity_sectors, "seed": self.seed},
            "seed": self.seed,
            "points": [{"phase": p, "small": s, "large": n}
                       for p, (s, n) in enumerate(self.points)],
        }

    def stream_table(self) -> tuple[np.ndarray, np.ndarray]:
        """One row per stream (kernels.synth OS_* columns), and where each phase's begin."""
        rows: list[list[int]] = []
        lo = [0]
        sid = 0
        for p, (s, n) in enumerate(self.points):
            if s:
                rows.append([sid, p, K.OK_SMALL, s, s * self.per_slot, self.size_small])
                sid += 1
            if n and self.large_type == "rand":
                rows.append([sid, p, K.OK_LARGE_RAND, n, n * self.per_slot, self.size_large])
                sid += 1
            elif n:
                for _i in range(n):
                    rows.append([sid, p, K.OK_LARGE_SEQ, self.num_streamio,
                                 self.num_streamio * self.per_slot, self.size_large])
                    sid += 1
            lo.append(len(rows))
        return (np.array(rows, dtype=np.int64).reshape(-1, K.OS_NCOLS),
                np.array(lo, dtype=np.int64))

    def batches(self, chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
        return chunks(self.kernel(), True, chunk_rows)

    def kernel(self) -> Fill:
        """The generator's state and a ``fill(columns, cap) -> (rows, done)`` over it."""
        streams, phase_lo = self.stream_table()
        rng = seed_state(self.seed)
        pos = np.full(len(streams), -1, dtype=np.int64)
        state = np.array([0, 0, -1, 0], dtype=np.int64)
        cap_bytes = self.capacity_sectors * SECTOR

        def fill(c: dict[str, np.ndarray], cap: int) -> tuple[int, int]:
            return K.orion_fill(rng, streams, phase_lo, pos, state, self.write_pct, cap_bytes,
                                c["t_ns"], c["dev"], c["sector"], c["nbytes"], c["op"],
                                c["stream"], c["seq"], c["phase"], c["outst"], cap)

        return fill


def plan(matrix: str, large_type: str, size_small: int, size_large: int, num_disks: int,
         num_small: int | None, num_large: int | None, num_streamio: int, write_pct: int,
         per_slot: int, seed: int, capacity_sectors: int) -> OrionPlan:
    if matrix not in MATRICES:
        raise BlocklabError(f"--matrix: one of {', '.join(MATRICES)}, found {matrix!r}")
    if large_type not in TYPES:
        raise BlocklabError(f"--type: rand or seq, found {large_type!r}")
    for name, v in (("--size-small", size_small), ("--size-large", size_large)):
        if v <= 0 or v % SECTOR:
            raise BlocklabError(f"{name}: must be a positive multiple of {SECTOR} bytes, "
                                f"found {v}")
        if v > capacity_sectors * SECTOR:
            raise BlocklabError(f"{name}: {v} bytes is larger than the volume "
                                f"({capacity_sectors} sectors)")
    if num_disks < 1:
        raise BlocklabError(f"--num-disks: must be at least 1, found {num_disks}")
    ns = SMALL_PER_DISK * num_disks if num_small is None else num_small
    nl = LARGE_PER_DISK * num_disks if num_large is None else num_large
    for name, v in (("--num-small", ns), ("--num-large", nl)):
        if not 0 <= v <= 65535:
            raise BlocklabError(f"{name}: from 0 to 65535 outstanding I/Os, found {v}")
    if not 1 <= num_streamio <= 65535:
        raise BlocklabError(f"--num-streamio: from 1 to 65535, found {num_streamio}")
    if not 0 <= write_pct <= 100:
        raise BlocklabError(f"--write: a percentage from 0 to 100, found {write_pct}")
    if per_slot < 1:
        raise BlocklabError(f"--requests-per-slot: must be at least 1, found {per_slot}")
    if seed < 0:
        raise BlocklabError(f"--seed: must be a whole number >= 0, found {seed}")
    points = matrix_points(matrix, ns, nl)
    if not points:
        raise BlocklabError(f"--matrix {matrix}: no data point with --num-small {ns} and "
                            f"--num-large {nl} (a point needs some outstanding I/O)")
    if len(points) > 65536:
        raise BlocklabError(f"--matrix {matrix}: {len(points)} points, at most 65536 phases")
    return OrionPlan(matrix, large_type, size_small, size_large, num_disks, ns, nl,
                     num_streamio, write_pct, per_slot, seed, capacity_sectors, tuple(points))
