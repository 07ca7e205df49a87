"""SPC-1: the Storage Performance Council's OLTP-like benchmark workload, open loop.

Three application storage units (ASUs) share the host volume one after the other: ASU-1 (data
store) 45 %, ASU-2 (user store) 45 %, ASU-3 (log) 10 % of the capacity, each a whole number of
4 KiB blocks. A business scaling unit (BSU) is 50 I/Os per second made of eight I/O streams;
each stream is a Poisson process (exponential gaps) of intensity x 50 IOPS.

Constants below follow NetApp's public reimplementation ``spc1.c`` version 1.4 (2009;
"A portable, open-source implementation of the SPC-1 workload", Daniel S. Johnson et al.) in
its default HRRW_CLASSIC mode, which follows the SPC-1 specification's stream table:

=======  =========  ====  ===============================================================
stream   intensity  read  access pattern
=======  =========  ====  ===============================================================
ASU1-1   0.035      0.5   uniform random 4 KiB over ASU-1
ASU1-2   0.281      0.5   hierarchical reuse random walk (HRRW), 4 KiB, hot region at 15 %
ASU1-3   0.070      1.0   sequential read runs of 10 % of ASU-1 starting in [20 %, 60 %)
ASU1-4   0.210      0.5   HRRW, hot region at 70 % of ASU-1
ASU2-1   0.018      0.3   uniform random 4 KiB over ASU-2
ASU2-2   0.070      0.3   HRRW, hot region at 47 % of ASU-2
ASU2-3   0.035      1.0   sequential read runs of 10 % of ASU-2 starting in [20 %, 60 %)
ASU3-1   0.281      0.0   sequential write runs of 30 % of ASU-3 starting in [0 %, 70 %)
=======  =========  ====  ===============================================================

Hot regions are 5 % of their ASU. Sequential transfers are 4, 8, 16, 32 or 64 KiB with
chances 40, 24, 20, 8 and 8 %; runs start and end on 64 KiB boundaries. In the trace,
``device`` is the ASU (1, 2, 3), ``stream`` is ``bsu * 8 + k`` with k the stream's row above
(0 = ASU1-1 ... 7 = ASU3-1), and ``sector`` is on the host volume.

The walk needs its first subtree (2**7 leaves of 32 KiB) to fit the 5 % hot region, so ASU-1
and ASU-2 must hold at least 20,480 blocks of 4 KiB (80 MiB; spc1.c's minimum, below which it
scales ASUs up and divides the offsets, which blocklab refuses instead).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from blocklab.kernels import synth as K
from blocklab.traces.errors import BlocklabError

from . import CHUNK_ROWS, Fill, chunks, seed_state

IOPS_PER_BSU = 50  # SPC-1 (spc1.c IOPS_PER_BSU)
BLOCK_SECTORS = 8  # the SPC-1 block, 4 KiB
ASU_SHARES = (45, 45, 10)  # percent of the capacity for ASU-1, -2, -3
HOT_REGION_PCT = 5  # spc1.c: hrrw_init(..., asu_size / 20)
MIN_ASU_BLOCKS = 128 * 8 * 20  # spc1.c spc1_compute_multiplier(a, 128 * 8 * 20): 2^7 x 32k / 5%
STREAM_NAMES = ("ASU1-1", "ASU1-2", "ASU1-3", "ASU1-4", "ASU2-1", "ASU2-2", "ASU2-3", "ASU3-1")

# The stream table (columns: kernels.synth SP_*). Intensities in thousandths (spc1.c IN018 ..
# IN281, which sum to 1); read chances in tenths (spc1.c: rnd(10) < 5 reads); hot regions at
# 15 % and 70 % of ASU-1 and 47 % of ASU-2 (spc1.c init); sequential runs: start %, range %, run
# % of the ASU (spc1.c asu1_3, asu2_3, asu3_1).
_U, _H, _S = K.KIND_UNIFORM, K.KIND_HRRW, K.KIND_SEQ
STREAM_TABLE = np.array([
    # asu, permille, read10, kind, region, start, range, run
    [1, 35, 5, _U, -1, 0, 0, 0],
    [1, 281, 5, _H, 0, 0, 0, 0],
    [1, 70, 10, _S, -1, 20, 40, 10],
    [1, 210, 5, _H, 1, 0, 0, 0],
    [2, 18, 3, _U, -1, 0, 0, 0],
    [2, 70, 3, _H, 2, 0, 0, 0],
    [2, 35, 10, _S, -1, 20, 40, 10],
    [3, 281, 0, _S, -1, 0, 70, 30],
], dtype=np.int64)
HOT_REGIONS = ((1, 15), (1, 70), (2, 47))  # (ASU, start %) of the three walks
#: Transfer sizes of the sequential streams in 4 KiB blocks, equally likely (spc1.c
#: ``smix_lengths``): 1, 2, 4, 8, 16 blocks with chances 10, 6, 5, 2, 2 in 25.
SMIX_BLOCKS = np.repeat(np.array([1, 2, 4, 8, 16], dtype=np.int64), [10, 6, 5, 2, 2])
#: Stream of each thousandth of a BSU's I/Os: 35 thousandths of ASU1-1, then 281 of ASU1-2, ...
STREAM_OF_PERMILLE = np.repeat(np.arange(8, dtype=np.int64), STREAM_TABLE[:, K.SP_PERMILLE])
assert len(STREAM_OF_PERMILLE) == 1000


@dataclasses.dataclass(frozen=True)
class Spc1Plan:
    bsu: int
    duration_s: float
    seed: int
    capacity_sectors: int
    asu_blocks: tuple[int, int, int]
    asu_base_sectors: tuple[int, int, int]

    @property
    def offered_iops(self) -> int:
        return IOPS_PER_BSU * self.bsu

    def extra(self) -> dict[str, Any]:
        return {
            "generator": "spc1",
            "options": {"bsu": self.bsu, "duration_s": self.duration_s, "seed": self.seed,
                        "capacity_sectors": self.capacity_sectors},
            "seed": self.seed,
            "open_loop": True,
            "iops_offered": self.offered_iops,
            "asu": [{"asu": a + 1, "first_sector": self.asu_base_sectors[a],
                     "blocks_4k": self.asu_blocks[a]} for a in range(3)],
            "stream_id": "bsu * 8 + k; k: " + ", ".join(f"{i} {n}"
                                                        for i, n in enumerate(STREAM_NAMES)),
            "reference": "NetApp spc1.c v1.4 (HRRW_CLASSIC)",
        }

    def batches(self, chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
        return chunks(self.kernel(), False, chunk_rows)

    def kernel(self) -> Fill:
        """The generator's state and a ``fill(columns, cap) -> (rows, done)`` over it."""
        rng = seed_state(self.seed)
        n_streams = self.bsu * 8
        st = np.zeros((n_streams, K.ST_NCOLS), dtype=np.int64)
        hr = np.zeros((3, K.HR_NCOLS), dtype=np.int64)
        leaf0 = 0
        for g, (asu, start_pct) in enumerate(HOT_REGIONS):
            size = self.asu_blocks[asu - 1]
            region = size * HOT_REGION_PCT // 100
            n_leaves = region // K.LEAF_BLOCKS
            # the tree: the largest power of two of leaves that fits the region (spc1.c
            # hrrw_init, CLASSIC); each stream puts it at a random leaf inside the region
            levels = n_leaves.bit_length() - 1
            tree_leaves = 1 << levels
            hr[g, K.HR_MIN] = size * start_pct // 100
            hr[g, K.HR_DELTA] = K.LEAF_BLOCKS * (n_leaves - tree_leaves)
            hr[g, K.HR_TREE] = region - hr[g, K.HR_DELTA]
            hr[g, K.HR_LEVELS] = levels
            hr[g, K.HR_LEAF0] = leaf0
            leaf0 += 2 * n_leaves  # room for leaves past the tree (spc1.c allocates twice)
        leaves = np.zeros(leaf0, dtype=np.uint8)
        K.spc1_init(rng, STREAM_TABLE, st, hr, self.bsu)
        clock = np.zeros(1, dtype=np.float64)
        asu_blocks = np.array((0, *self.asu_blocks), dtype=np.int64)
        asu_base = np.array((0, *self.asu_base_sectors), dtype=np.int64)
        mean_gap_ns = 1e9 / self.offered_iops
        end_ns = self.duration_s * 1e9

        def fill(c: dict[str, np.ndarray], cap: int) -> tuple[int, int]:
            return K.spc1_fill(rng, clock, STREAM_TABLE, STREAM_OF_PERMILLE, SMIX_BLOCKS, st, hr,
                               leaves, self.bsu, asu_blocks, asu_base, mean_gap_ns, end_ns,
                               c["t_ns"], c["dev"], c["sector"], c["nbytes"], c["op"],
                               c["stream"], cap)

        return fill


def asu_layout(capacity_sectors: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """ASU sizes (4 KiB blocks) and first sectors: 45 %, 45 %, 10 % of the capacity, in order."""
    blocks = tuple(capacity_sectors * share // 100 // BLOCK_SECTORS for share in ASU_SHARES)
    base = (0, blocks[0] * BLOCK_SECTORS, (blocks[0] + blocks[1]) * BLOCK_SECTORS)
    return blocks, base  # type: ignore[return-value]


def min_capacity_sectors() -> int:
    """The smallest capacity whose ASU-1 and ASU-2 hold the walk's minimum."""
    c = MIN_ASU_BLOCKS * BLOCK_SECTORS * 100 // ASU_SHARES[0]
    while asu_layout(c)[0][0] < MIN_ASU_BLOCKS:
        c += 1
    return c


#: The longest trace (seconds): its times in nanoseconds stay within int64 (``inf`` gave a
#: traceback)
MAX_DURATION_S = 2**62 // 10**9


def plan(bsu: int, duration_s: float, seed: int, capacity_sectors: int) -> Spc1Plan:
    """Check the options against the capacity; one-line errors name the option."""
    if bsu < 1:
        raise BlocklabError(f"--bsu: must be at least 1, found {bsu}")
    if not 0 < duration_s <= MAX_DURATION_S:
        raise BlocklabError(f"--duration: must be positive seconds, at most {MAX_DURATION_S:,} "
                            f"(trace times are int64 nanoseconds), found {duration_s}")
    blocks, base = asu_layout(capacity_sectors)
    if min(blocks[0], blocks[1]) < MIN_ASU_BLOCKS:
        raise BlocklabError(
            f"--capacity: {capacity_sectors} sectors is too small for SPC-1: ASU-1 and ASU-2 "
            f"(45 % each) need at least {MIN_ASU_BLOCKS} blocks of 4 KiB for the hot-region "
            f"walk, so at least {min_capacity_sectors()} sectors in all")
    limit = max_bsu(capacity_sectors)
    if bsu > limit:
        raise BlocklabError(
            f"--bsu: {bsu} BSUs exceed what a capacity of {capacity_sectors} sectors holds: "
            f"each BSU's walk streams need {BSU_LEAVES} leaves of 32 KiB of the smallest hot "
            f"region (spc1.c's first subtree), so at most {limit} BSUs here")
    return Spc1Plan(bsu, float(duration_s), seed, capacity_sectors, blocks, base)


#: Leaves of the smallest hot region each BSU needs: one first-level subtree of the walk.
BSU_LEAVES = 1 << K.WALK_FIRST_LEVEL


def max_bsu(capacity_sectors: int) -> int:
    """The most BSUs a capacity holds: the smallest hot region (ASU-2's, 5 %) divided into
    first-level subtrees of the walk (2**7 leaves of 32 KiB = 4 MiB), one per BSU, so that
    the BSUs' walk streams can start in different subtrees of the region."""
    blocks, _ = asu_layout(capacity_sectors)
    region = min(blocks[0], blocks[1]) * HOT_REGION_PCT // 100
    return max(0, region // K.LEAF_BLOCKS // BSU_LEAVES)
